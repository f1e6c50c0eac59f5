"""Writes one training manifest that mixes the corpus's split manifests with a voice balance.

    .venv/bin/python recipes/mix_manifest.py data/synth/mix_fine_tuning.jsonl --data data/synth \
        --splits train train_wordnet train_wordnet_glosses train_piper_extra \
        --piper-copies train=3 train_wordnet=3 train_wordnet_glosses=2 train_piper_extra=3 \
        --espeak-share 0.5 --espeak-whole train

Piper rows are listed ``--piper-copies`` times (per split, 1 where not given); espeak-ng rows are kept whole in
the ``--espeak-whole`` splits and otherwise each kept with probability ``--espeak-share``, drawn in the order of
``--splits`` from a generator seeded with ``--seed``. The generator is called only for those espeak-ng rows, so a
mix is reproduced exactly from the same split manifests and seed.

With ``--rare-below N``, a row whose transcript has n words read fewer than N times in all the listed splits'
rows is listed ``min(n, --rare-max-copies)`` times as often, and left out when n is 0: most greedy errors are on
words that training heard rarely (``docs/models.md``, "Where the errors are"), so a run on such a mix hears them
more often (with N = 100 on the bundled models' training splits, words read 10-99 times are 19% of the words heard
instead of 14%); it did not make the RNN-T better on them ("Known weaknesses").
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path


def split_copies(pairs: list[str]) -> dict[str, int]:
    """``["train=3", ...]`` -> ``{"train": 3, ...}``."""
    copies = {}
    for pair in pairs:
        name, sep, count = pair.partition("=")
        if not sep or not count.isdigit():
            raise SystemExit(f"--piper-copies expects SPLIT=COUNT, got {pair!r}")
        copies[name] = int(count)
    return copies


def count_words(data: Path, splits: list[str]) -> Counter[str]:
    """How many times each word is read in the rows of ``splits`` (each row once, whatever its copies)."""
    counts: Counter[str] = Counter()
    for name in splits:
        for line in open(data / f"{name}.jsonl"):
            counts.update(json.loads(line)["text"].split())
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--data", type=Path, default=Path("data/synth"), help="folder of the split manifests")
    parser.add_argument("--splits", nargs="+", required=True)
    parser.add_argument("--piper-copies", nargs="*", default=[], metavar="SPLIT=COUNT")
    parser.add_argument("--espeak-share", type=float, default=1.0,
                        help="share of espeak-ng rows kept outside the --espeak-whole splits")
    parser.add_argument("--espeak-whole", nargs="*", default=[], metavar="SPLIT")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rare-below", type=int, default=0, metavar="N",
                        help="list each row once per word in it read fewer than N times (0: off)")
    parser.add_argument("--rare-max-copies", type=int, default=4, metavar="K")
    args = parser.parse_args()

    piper_copies = split_copies(args.piper_copies)
    rng = random.Random(args.seed)
    word_counts = count_words(args.data, args.splits) if args.rare_below else Counter()
    lines_per_voice: Counter[str] = Counter()
    with open(args.output, "w") as out:
        for name in args.splits:
            for line in open(args.data / f"{name}.jsonl"):
                row = json.loads(line)
                voice = row["voice"]
                if voice == "piper":
                    copies = piper_copies.get(name, 1)
                elif name in args.espeak_whole:
                    copies = 1
                else:
                    copies = 1 if rng.random() < args.espeak_share else 0
                if args.rare_below and copies:
                    rare = sum(word_counts[word] < args.rare_below for word in row["text"].split())
                    copies *= min(rare, args.rare_max_copies)
                out.write(line * copies)
                lines_per_voice[voice] += copies
    print(args.output, dict(lines_per_voice))


if __name__ == "__main__":
    main()
