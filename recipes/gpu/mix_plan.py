"""Writes a corpus plan for a GPU box that synthesises for a fixed time: rows drawn from existing plans, the two
voice families interleaved one to one, so that whatever prefix gets synthesised before the time is up is
balanced between them. (The command below made the plan of the 2026-11-25 H100 run, docs/models.md.)

    python recipes/gpu/mix_plan.py --out data/synth --name train_gpu --size 80000 \\
        --piper train_wordnet_glosses:23822 train_piper_extra train_wordnet \\
        --espeak train_wordnet_glosses train train_wordnet

A source `SPLIT:FIRST` skips that split's first FIRST rows of the voice (e.g. readings already synthesised
elsewhere). Rows keep their ids and synthesis settings, so each one sounds exactly as in its own split; only
`split` changes (it names the audio folder). Sources are sampled with a fixed seed.
"""

import argparse
import json
import random
from pathlib import Path


def read_rows(out: Path, source: str, voice: str) -> list[dict]:
    split, _, first = source.partition(":")
    rows = [json.loads(line) for line in (out / f"plan_{split}.jsonl").read_text(encoding="utf-8").splitlines()]
    return [row for row in rows if row["voice"] == voice][int(first or 0):]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("data/synth"))
    parser.add_argument("--name", default="train_gpu")
    parser.add_argument("--size", type=int, required=True, help="rows in all, half of each voice")
    parser.add_argument("--piper", nargs="+", required=True, metavar="SPLIT[:FIRST]")
    parser.add_argument("--espeak", nargs="+", required=True, metavar="SPLIT[:FIRST]")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    per_voice = []
    for voice, sources in (("piper", args.piper), ("espeak", args.espeak)):
        rows = [row for source in sources for row in read_rows(args.out, source, voice)]
        if len(rows) < args.size // 2:
            raise SystemExit(f"only {len(rows)} {voice} rows in {sources}, {args.size // 2} asked for")
        per_voice.append(rng.sample(rows, args.size // 2))
    with open(args.out / f"plan_{args.name}.jsonl", "w", encoding="utf-8") as f:
        for pair in zip(*per_voice):
            for row in pair:
                f.write(json.dumps({**row, "split": args.name}) + "\n")
    print(f"plan_{args.name}.jsonl: {2 * len(per_voice[0])} rows")


if __name__ == "__main__":
    main()
