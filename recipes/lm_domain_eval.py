"""Helpers of recipes/lm_domain_shift.sh: the LM text of the models' own training data, the choice of fusion
settings on a dev sweep, and the WER table of the test runs.

    python recipes/lm_domain_eval.py training-text --synth data/synth -o exp/lm/train_text.txt
    python recipes/lm_domain_eval.py choose exp/lm/dev/domain/tiny-en-rnnt --strategy beam_alsd_pp
    python recipes/lm_domain_eval.py table exp/lm/test/domain
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

# The training splits of the synthetic corpus whose texts the bundled models read (docs/models.md, "The corpus").
TRAINING_PLANS = ("plan_train.jsonl", "plan_train_wordnet.jsonl", "plan_train_wordnet_glosses.jsonl")
# A dev run's directory names its fusion settings: bonus<B>-blank or bonus<B>-plain (recipes/lm_domain_shift.sh).
RUN_NAME = re.compile(r"bonus(?P<bonus>[0-9.]+)-(?P<mode>blank|plain)")


def training_text(synth: Path, output: Path) -> None:
    """Every distinct transcript of the training plans, one a line, in the order first seen."""
    texts: dict[str, None] = {}
    for name in TRAINING_PLANS:
        path = synth / name
        if not path.exists():
            raise SystemExit(f"{path} not found: run recipes/synthetic_corpus.py text (docs/models.md, Reproduce)")
        for line in path.read_text(encoding="utf-8").splitlines():
            texts.setdefault(json.loads(line)["text"], None)
    output.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    print(f"{output}: {len(texts)} sentences")


def dev_results(directory: Path, strategy: str) -> list[tuple[float, float, float, bool]]:
    """``(WER, weight, bonus, blank scoring)`` of every LM row of ``strategy`` in the dev runs under ``directory``."""
    rows = []
    for summary in sorted(directory.glob("*/summary.json")):
        match = RUN_NAME.fullmatch(summary.parent.name)
        if match is None:
            continue
        for row in json.loads(summary.read_text())["strategies"]:
            name, _, weight = row["strategy"].partition("+lm")
            if name == strategy and weight:
                rows.append((row["wer"], float(weight), float(match["bonus"]), match["mode"] == "blank"))
    if not rows:
        raise SystemExit(f"no dev runs of {strategy} under {directory}")
    return rows


def choose(directory: Path, strategy: str) -> None:
    """Print the evaluate options of the lowest dev WER (ties: the smaller weight, then bonus, plain first)."""
    wer, weight, bonus, blank = min(dev_results(directory, strategy))
    print(f"--lm-weight {weight:g} --lm-token-bonus {bonus:g}" + (" --lm-blank-scoring" if blank else ""))


def paired_row(path: Path) -> list[str]:
    """The cells of the 'all' row of a recipes/paired_wer.py table."""
    for line in path.read_text().splitlines():
        if line.startswith("| all"):
            return [cell.strip() for cell in line.strip("|").split("|")]
    raise SystemExit(f"{path}: no 'all' row")


def table(directory: Path) -> None:
    """WER of greedy, greedy+LM, beam and beam+LM per model, with the paired tests, as markdown."""
    print("| model | greedy | greedy+LM | beam 4 | beam 4+LM | greedy+LM vs greedy | beam+LM vs greedy "
          "| greedy+LM settings | beam+LM settings |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model_dir in sorted(p for p in directory.iterdir() if p.is_dir()):
        wers = {}
        for run in ("nolm", "greedy_lm", "beam_lm"):
            for row in json.loads((model_dir / run / "summary.json").read_text())["strategies"]:
                wers[row["strategy"].split("+lm")[0] + ("+lm" if "+lm" in row["strategy"] else "")] = row["wer"]
        greedy, greedy_lm, beam, beam_lm = (wers[k] for k in ("greedy_label", "greedy_label+lm", "beam_alsd_pp",
                                                             "beam_alsd_pp+lm"))
        cells = []
        for name in ("greedy_lm", "beam_lm"):
            row = paired_row(model_dir / f"paired-{name}.txt")
            cells.append(f"{row[6]} better / {row[7]} worse, p = {row[8]}")
        settings = [(model_dir / f"{name}.options").read_text().strip() for name in ("greedy_lm", "beam_lm")]
        print(f"| {model_dir.name} | {greedy:.2%} | {greedy_lm:.2%} ({relative(greedy, greedy_lm)}) | {beam:.2%} "
              f"({relative(greedy, beam)}) | {beam_lm:.2%} ({relative(greedy, beam_lm)}) | {cells[0]} | {cells[1]} "
              f"| `{settings[0]}` | `{settings[1]}` |")


def relative(base: float, new: float) -> str:
    """The relative change of WER from ``base`` to ``new``, as a signed percentage."""
    return f"{(new - base) / base:+.1%}" if base else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("training-text")
    p.add_argument("--synth", type=Path, default=Path("data/synth"))
    p.add_argument("-o", "--output", type=Path, required=True)
    p = sub.add_parser("choose")
    p.add_argument("directory", type=Path)
    p.add_argument("--strategy", required=True)
    p = sub.add_parser("table")
    p.add_argument("directory", type=Path)
    args = parser.parse_args()
    if args.command == "training-text":
        training_text(args.synth, args.output)
    elif args.command == "choose":
        choose(args.directory, args.strategy)
    else:
        table(args.directory)


if __name__ == "__main__":
    main()
