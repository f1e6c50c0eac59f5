"""`transdec transcribe` against `transdec transcribe --ray` with 1 and 2 model replicas on one manifest
(docs/scale.md, "Measured"): each a fresh command, as a user runs it, interleaved round by round; the `--ray` runs
start a local Ray cluster of this machine's CPUs, which is part of their time.

    python bench/ray_scale.py MANIFEST [--rounds 3] [--window ITEMS] [--batch-size 16]

Prints each run (wall-clock seconds, and for `--ray` the run's own report: its time from the dataset's start, until
its first results, and its throughput after them, with the replicas up) and then the medians, with whether each
output equals the plain run's to the byte.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPORT = re.compile(r"ray: \d+/\d+ item\(s\), [\d.]+ s of audio in (?P<run>[\d.]+) s: [\d.]+ s of audio/s"
                    r"(; first results after (?P<first>[\d.]+) s, (?P<since>[\d.]+) s of audio/s since)?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("manifest")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=int, default=None, help="--ray-window (default: the default, 8 x batch)")
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    command = [sys.executable, "-m", "transdec", "transcribe", args.manifest, "--format", "jsonl",
               "--batch-size", str(args.batch_size)]
    window = ["--ray-window", str(args.window)] if args.window else []
    runs = {"plain": [], "ray, 1 replica": ["--ray", "--ray-replicas", "1", *window],
            "ray, 2 replicas": ["--ray", "--ray-replicas", "2", *window]}
    times: dict[str, list[tuple[float, float | None, float | None, float | None]]] = {name: [] for name in runs}
    same: dict[str, bool] = {name: True for name in runs}
    with tempfile.TemporaryDirectory() as folder:
        for round_number in range(args.rounds):
            for name, extra in runs.items():
                out = Path(folder) / f"{len(times[name])}-{name}.jsonl"
                start = time.perf_counter()
                result = subprocess.run([*command, *extra, "--output", str(out)], capture_output=True, text=True)
                wall = time.perf_counter() - start
                if result.returncode != 0:
                    sys.exit(f"{name}: exit {result.returncode}\n{result.stderr}")
                reports = list(REPORT.finditer(result.stderr))  # progress lines come first, without a terminal
                report = reports[-1] if reports else None
                run = float(report["run"]) if report else None
                first = float(report["first"]) if report and report["first"] else None
                since = float(report["since"]) if report and report["since"] else None
                times[name].append((wall, run, first, since))
                text = out.read_text()
                if name == "plain" and round_number == 0:
                    reference = text
                    audio = sum(json.loads(line)["duration"] for line in text.splitlines())
                same[name] &= text == reference
                print(f"round {round_number + 1}, {name}: {wall:.1f} s" + (f" ({report[0]})" if report else ""),
                      flush=True)
    items = len(reference.splitlines())
    print(f"\n{items} items, {audio:.0f} s of audio, {args.rounds} rounds, medians\n")
    print("| run | wall-clock (s) | audio s per s, wall-clock | dataset run (s) | first results after (s) | "
          "audio s per s after them | output = plain's |")
    print("|---|---|---|---|---|---|---|")

    def median(values: list[float | None], digits: int) -> str:
        present = [value for value in values if value is not None]
        return f"{statistics.median(present):.{digits}f}" if present else "-"

    for name in runs:
        wall = statistics.median(t[0] for t in times[name])
        print(f"| {name} | {wall:.1f} | {audio / wall:.0f} | {median([t[1] for t in times[name]], 1)} | "
              f"{median([t[2] for t in times[name]], 1)} | {median([t[3] for t in times[name]], 0)} | "
              f"{'yes' if same[name] else 'no'} |")

if __name__ == "__main__":
    main()
