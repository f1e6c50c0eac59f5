"""Where a model's greedy errors are: by how often training read the word, by word position, by espeak-ng accent.

    .venv/bin/python recipes/error_profile.py exp/eval-model/predictions_greedy_label.jsonl \
        --train data/synth/train.jsonl data/synth/train_wordnet.jsonl ... --plan data/synth/plan_test.jsonl

The predictions are ``transdec evaluate``'s rows (``text``, ``pred_text``, ``voice``, ``audio_filepath``). A
reference word counts as wrong when the word alignment substitutes or deletes it; insertions are counted per
voice. Word counts come from the ``text`` of every row of the ``--train`` files (manifests or corpus plans).
With ``--plan`` (the corpus plan of the evaluated split), errors are also broken down by espeak-ng accent.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import jiwer

BUCKETS = ("0", "1-9", "10-99", "100-999", "1000+")
ROW_ORDER = {name: i for i, name in enumerate(BUCKETS)} | {"first": 0, "middle": 1, "last": 2}


def bucket(count: int) -> str:
    """The training-count bucket of a word read ``count`` times."""
    return BUCKETS[sum(count >= bound for bound in (1, 10, 100, 1000))]


def wrong_words(reference: str, hypothesis: str) -> tuple[list[bool], int]:
    """Per reference word whether the alignment substitutes or deletes it, and the number of inserted words."""
    wrong = [False] * len(reference.split())
    inserted = 0
    alignment = jiwer.process_words(reference, hypothesis).alignments[0]
    for chunk in alignment:
        if chunk.type in ("substitute", "delete"):
            for index in range(chunk.ref_start_idx, chunk.ref_end_idx):
                wrong[index] = True
        elif chunk.type == "insert":
            inserted += chunk.hyp_end_idx - chunk.hyp_start_idx
    return wrong, inserted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("predictions", type=Path)
    parser.add_argument("--train", type=Path, nargs="+", required=True, help="training manifests or plans")
    parser.add_argument("--plan", type=Path, help="the corpus plan of the evaluated split (for accents)")
    args = parser.parse_args()

    word_counts: Counter[str] = Counter()
    for manifest in args.train:
        for line in open(manifest):
            word_counts.update(json.loads(line)["text"].split())
    accent_of = {}
    if args.plan:
        for line in open(args.plan):
            row = json.loads(line)
            accent_of[row["id"]] = row["espeak_voice"].split("+")[0]

    words: Counter[tuple] = Counter()  # (voice, kind, value) -> reference words
    errors: Counter[tuple] = Counter()  # the same keys -> wrong words (insertions under kind "all")
    for line in open(args.predictions):
        row = json.loads(line)
        voice, reference = row["voice"], row["text"].split()
        wrong, inserted = wrong_words(row["text"], row["pred_text"])
        accent = accent_of.get(Path(row["audio_filepath"]).stem, "")
        errors[(voice, "all", "")] += inserted
        errors[(voice, "insertions", "")] += inserted
        for index, (word, is_wrong) in enumerate(zip(reference, wrong)):
            position = "first" if index == 0 else "last" if index == len(reference) - 1 else "middle"
            keys = [(voice, "all", ""), (voice, "read in training", bucket(word_counts[word])),
                    (voice, "position", position)]
            if voice == "espeak" and accent:
                keys.append((voice, "accent", accent))
            for key in keys:
                words[key] += 1
                errors[key] += is_wrong

    for voice in sorted({key[0] for key in words}):
        total_words, total_errors = words[(voice, "all", "")], errors[(voice, "all", "")]
        print(f"\n{voice}: {total_errors} errors in {total_words} words, WER {total_errors / total_words:.2%}; "
              f"{errors[(voice, 'insertions', '')]} insertions")
        print("| | words | share of words | wrong | share wrong | share of errors |")
        print("|---|---|---|---|---|---|")
        for kind in ("read in training", "position", "accent"):
            values = {key[2] for key in words if key[:2] == (voice, kind)}
            for value in sorted(values, key=lambda v: (ROW_ORDER.get(v, 9), v)):
                n, e = words[(voice, kind, value)], errors[(voice, kind, value)]
                label = f"{kind} {value}" if kind != "accent" else value
                print(f"| {label} | {n} | {n / total_words:.1%} | {e} | {e / n:.1%} | {e / total_errors:.1%} |")


if __name__ == "__main__":
    main()
