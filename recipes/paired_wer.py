"""Is one model's WER really lower than another's on the same test set? A paired comparison, utterance by utterance.

    .venv/bin/transdec evaluate data/synth/test.jsonl --model A.pt --decoding greedy_label --normalizer none \
        --output-dir exp/eval-a      # and the same for B into exp/eval-b
    .venv/bin/python recipes/paired_wer.py exp/eval-a/predictions_greedy_label.jsonl \
        exp/eval-b/predictions_greedy_label.jsonl

For all utterances and per voice family: word errors of A and B, how many utterances B gets better and worse
than A, the two-sided sign test's p-value over those, and how often a bootstrap resample of the utterances shows
no gain for B (its error count not below A's). Headline WERs on 800 utterances move by ~0.1-0.2 points between
equally good models; this tells a gain from that noise before a model is bundled.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

from transdec.metrics import word_errors


def read_errors(path: Path) -> dict[str, tuple[str, int, int]]:
    """``audio_filepath -> (voice, reference words, word errors)`` from a ``predictions_*.jsonl``."""
    errors = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        counts = word_errors([row["text"]], [row["pred_text"]])
        errors[row["audio_filepath"]] = (row.get("voice", "all"), counts.reference_words,
                                         counts.substitutions + counts.deletions + counts.insertions)
    return errors


def sign_test(better: int, worse: int) -> float:
    """Two-sided p-value of ``better`` against ``worse`` under a fair coin (ties left out)."""
    n = better + worse
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(better, worse) + 1)) / 2**n
    return min(1.0, 2 * tail)


def bootstrap_no_gain(differences: list[int], resamples: int, seed: int) -> float:
    """Share of resamples (utterances drawn with replacement) in which B's errors are not below A's."""
    rng = random.Random(seed)
    n = len(differences)
    return sum(sum(rng.choices(differences, k=n)) >= 0 for _ in range(resamples)) / resamples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path, help="predictions of model A (the baseline)")
    parser.add_argument("b", type=Path, help="predictions of model B (the candidate)")
    parser.add_argument("--resamples", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    a, b = read_errors(args.a), read_errors(args.b)
    if a.keys() != b.keys():
        raise SystemExit(f"{args.a} and {args.b} are not predictions for the same utterances "
                         f"({len(a.keys() ^ b.keys())} differ)")
    voices = sorted({voice for voice, _, _ in a.values()})
    print("| utterances | words | errors A | errors B | WER A | WER B | B better | B worse | sign test p "
          "| bootstrap P(no gain) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for group in (["all"] if voices == ["all"] else ["all", *voices]):
        keys = [key for key in a if group in ("all", a[key][0])]
        words = sum(a[key][1] for key in keys)
        errors_a, errors_b = sum(a[key][2] for key in keys), sum(b[key][2] for key in keys)
        differences = [b[key][2] - a[key][2] for key in keys]
        better, worse = sum(d < 0 for d in differences), sum(d > 0 for d in differences)
        print(f"| {group}: {len(keys)} | {words} | {errors_a} | {errors_b} | {errors_a / max(words, 1):.2%} "
              f"| {errors_b / max(words, 1):.2%} | {better} | {worse} | {sign_test(better, worse):.3f} "
              f"| {bootstrap_no_gain(differences, args.resamples, args.seed):.3f} |")


if __name__ == "__main__":
    main()
