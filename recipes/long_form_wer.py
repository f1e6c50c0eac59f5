"""WER on long recordings made of held-out utterances, against the same utterances one at a time.

    .venv/bin/python recipes/long_form_wer.py --manifest data/synth/test.jsonl \
        --models tiny-en-rnnt tiny-en-tdt tiny-en-multiblank

Consecutive manifest utterances are joined, with ``--pause`` seconds of silence between them, into
recordings of about ``--seconds``; each is transcribed whole (encoder attention over all of it), with the
default chunking (30 s windows with the model's receptive field as context on each side, or 5 s where
attention is global) and with 10 s windows (5 s of context), and scored against the
joined transcripts. A model that only ever saw short utterances in training loses accuracy as attention
spans more than it learnt; this measures how much, and whether long-form training rows
(``transdec train --long-form-share``) win it back.
"""

from __future__ import annotations

import argparse

import transdec
from transdec.long_audio import ChunkingConfig
from transdec.metrics import word_errors
from transdec.training.data import collate, load_entry, read_training_manifest

SETTINGS = {"whole": None, "30 s windows": ChunkingConfig(), "10 s windows": ChunkingConfig(10.0, 5.0)}


def long_recordings(entries, sample_rate: int, seconds: float, pause: float, count: int):
    """Up to ``count`` (samples, reference, member indices): consecutive entries joined up to ``seconds``,
    by the training loader's own joining (:func:`~transdec.training.data.collate`)."""
    rows, members, length = [], [], 0.0
    for i, entry in enumerate(entries):
        if members and length + pause + entry.duration > seconds:
            rows.append(members)
            members, length = [], 0.0
            if len(rows) == count:
                break
        length += (pause if members else 0.0) + entry.duration
        members.append(i)
    for members in rows:
        batch = collate(entries, [members], [[]] * len(entries), sample_rate, pause_seconds=pause)
        samples = batch.waveforms[0, : batch.waveform_lengths[0]].numpy()
        yield samples, " ".join(entries[j].text for j in members), members


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--models", nargs="+", required=True)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each long recording")
    parser.add_argument("--recordings", type=int, default=20)
    parser.add_argument("--pause", type=float, default=0.5, help="silence between the utterances")
    args = parser.parse_args()
    entries = read_training_manifest(args.manifest)
    print("| model | recordings / audio | one at a time | " + " | ".join(SETTINGS) + " |")
    print("|---|---|---|" + "---|" * len(SETTINGS))
    for name in args.models:
        model = transdec.load_model(name)
        recordings = list(long_recordings(entries, model.sample_rate, args.seconds, args.pause, args.recordings))
        members = [j for _, _, m in recordings for j in m]
        singles = model.transcribe([load_entry(entries[j], model.sample_rate) for j in members])
        cells = [word_errors([entries[j].text for j in members], [r.text for r in singles]).wer]
        references = [reference for _, reference, _ in recordings]
        for chunking in SETTINGS.values():
            texts = [model.transcribe([samples], chunking=chunking)[0].text for samples, _, _ in recordings]
            cells.append(word_errors(references, texts).wer)
        audio = sum(len(samples) for samples, _, _ in recordings) / model.sample_rate
        print(f"| {name} | {len(recordings)} / {audio:.0f} s | " + " | ".join(f"{100 * w:.2f}%" for w in cells) + " |")


if __name__ == "__main__":
    main()
