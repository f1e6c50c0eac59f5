"""Numbers for docs/models.md: held-out WER per voice family, size, training time, batch-1 greedy speed, and
the emission histogram (tokens and blanks by frames advanced) of each model.

    python recipes/model_report.py --manifest data/synth/test.jsonl \
        --models tiny-en-rnnt tiny-en-tdt tiny-en-multiblank --histogram docs/emissions.png

Speed is measured in one run for all models, on the same utterances, one utterance at a time: the encoder
once, then greedy decoding timed separately, best of ``--repeats`` passes, with the two exact batch-1 paths:
label-looping (``greedy_label``) and the per-utterance loop (``greedy_wind`` with window 1, Algorithm 1
with plain Python control flow), the two interleaved in every pass.
"""

from __future__ import annotations

import argparse
import collections
import time
from pathlib import Path

import torch

import transdec
from transdec.decoding import DecodingConfig, decode
from transdec.decoding.greedy.reference import greedy_reference
from transdec.metrics import word_errors
from transdec.training.data import collate, read_training_manifest
from transdec.training.trainer import transcribe_entries


def model_size(name: str) -> int:
    from transdec.model.checkpoint import BUNDLED_MODELS, bundled_model_path

    return (bundled_model_path(name) if name in BUNDLED_MODELS else Path(name)).stat().st_size


BATCH1_DECODERS = {"label-looping": DecodingConfig(strategy="greedy_label"),
                   "per-utterance loop": DecodingConfig(strategy="greedy_wind", window_size=1)}


def batch1_greedy_seconds(model, entries, repeats: int) -> tuple[float, dict[str, float]]:
    """(encoder seconds, best decoder seconds of each of :data:`BATCH1_DECODERS`) over ``entries``, one
    utterance at a time."""
    encoded = []
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(len(entries)):
            batch = collate(entries, [[i]], [[]] * len(entries), model.sample_rate)
            encoded.append(model.encode(batch.waveforms, batch.waveform_lengths))
    encoder_seconds = time.perf_counter() - start
    best = dict.fromkeys(BATCH1_DECODERS, float("inf"))
    for _ in range(repeats):
        for name, config in BATCH1_DECODERS.items():
            start = time.perf_counter()
            for frames, lengths in encoded:
                decode(model, frames, lengths, config)
            best[name] = min(best[name], time.perf_counter() - start)
    return encoder_seconds, best


def emission_counts(model, entries) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    with torch.inference_mode():
        for start in range(0, len(entries), 32):
            indices = list(range(start, min(start + 32, len(entries))))
            batch = collate(entries, [[i] for i in indices], [[]] * len(entries), model.sample_rate)
            frames, lengths = model.encode(batch.waveforms, batch.waveform_lengths)
            counts.update(greedy_reference(model, frames, lengths).stats.emissions)
    return counts


def plot_histograms(histograms: dict[str, collections.Counter], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(histograms), figsize=(4.2 * len(histograms), 3.4), squeeze=False)
    for ax, (name, counts) in zip(axes[0], histograms.items()):
        keys = sorted(counts, key=lambda k: (k[0] != "token", k[1]))
        total = sum(counts.values())
        labels = [f"{kind}\n+{frames}" for kind, frames in keys]
        ax.bar(range(len(keys)), [100 * counts[k] / total for k in keys],
               color=["tab:orange" if k[0] == "token" else "tab:blue" for k in keys])
        ax.set_xticks(range(len(keys)), labels, fontsize=8)
        ax.set_title(f"{name} ({total} decisions)", fontsize=10)
        ax.set_ylabel("% of greedy decisions")
    fig.suptitle("Greedy emissions on the held-out test set, by frames advanced")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--models", nargs="+", required=True)
    parser.add_argument("--group-by", default="voice", help="manifest key whose values get a WER each")
    parser.add_argument("--speed-utterances", type=int, default=200, help="0: WER and emissions only, no timing")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--histogram", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)

    entries = read_training_manifest(args.manifest)
    groups = sorted({str(e.fields.get(args.group_by, "all")) for e in entries})
    speed_entries = (entries[:: max(1, len(entries) // args.speed_utterances)][: args.speed_utterances]
                     if args.speed_utterances else [])
    audio_seconds = sum(e.duration for e in speed_entries)
    rows, histograms = [], {}
    for name in args.models:
        model = transdec.load_model(name)
        hyps = transcribe_entries(model, entries)
        wer = {}
        for group in groups:
            chosen = [i for i, e in enumerate(entries) if str(e.fields.get(args.group_by, "all")) == group]
            wer[group] = word_errors([entries[i].text for i in chosen], [hyps[i] for i in chosen]).wer
        wer["all"] = word_errors([e.text for e in entries], hyps).wer
        encoder_s, decoder_s = (batch1_greedy_seconds(model, speed_entries, args.repeats) if speed_entries
                                else (float("nan"), {}))
        histograms[name] = emission_counts(model, entries)
        meta = getattr(model, "metadata", {})
        rows.append((name, wer, model.num_parameters(), model_size(name), meta.get("train_minutes"), encoder_s,
                     decoder_s))

    header = ["model"] + [f"WER {g}" for g in groups] + ["WER all", "params", "size", "train min", "encoder s"]
    header += [f"{name} b=1 s (vs first model)" for name in BATCH1_DECODERS if speed_entries]
    print(f"{len(entries)} test utterances; speed on {len(speed_entries)} utterances ({audio_seconds:.0f} s audio)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, wer, params, size, minutes, encoder_s, decoder_s in rows:
        cells = [name] + [f"{100 * wer[g]:.2f}%" for g in groups] + [
            f"{100 * wer['all']:.2f}%", f"{params / 1e6:.2f} M", f"{size / 2**20:.1f} MB", str(minutes),
            f"{encoder_s:.2f}"]
        cells += [f"{seconds:.3f} ({rows[0][-1][decoder] / seconds:.2f}x)" for decoder, seconds in decoder_s.items()]
        print("| " + " | ".join(cells) + " |")
    for name, counts in histograms.items():
        total = sum(counts.values())
        print(name, ", ".join(f"{k}+{d}: {100 * n / total:.1f}%" for (k, d), n in sorted(counts.items())))
    if args.histogram:
        plot_histograms(histograms, args.histogram)
        print(f"wrote {args.histogram}")


if __name__ == "__main__":
    main()
