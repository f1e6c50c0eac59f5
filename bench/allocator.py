"""Training steps and transcription under each memory allocator setting, side by side.

    .venv/bin/python bench/allocator.py --train-manifest data/synth/train.jsonl --test-manifest data/synth/test.jsonl

Settings: glibc's malloc with its defaults (``TRANSDEC_GLIBC_MALLOC=default``), glibc's malloc keeping freed
memory (``=keep``, what ``transdec train`` does by default, :func:`transdec.runtime.configure_malloc`), and
tcmalloc and jemalloc where installed (``LD_PRELOAD``). A process picks its allocator when it starts, so every
measurement is a child process: ``bench/train_step.py`` (the bundled-model shape, pruned loss) and
``transdec evaluate`` with the bundled ``tiny-en-rnnt``. The children take turns, setting by setting, for
``--rounds`` rounds, so that all see the same machine load. The table gives medians over rounds, the
speed-up over glibc's defaults, and each child's peak resident memory (the largest over rounds).
"""

from __future__ import annotations

import argparse
import ctypes.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from transdec.runtime import MALLOC_ENV

ROOT = Path(__file__).resolve().parent.parent
PRELOADED = {"tcmalloc": "tcmalloc_minimal", "jemalloc": "jemalloc"}


def allocator_settings() -> dict[str, dict[str, str]]:
    """Setting name -> environment for its children, for the allocators installed here."""
    glibc_default = {MALLOC_ENV: "default", "LD_PRELOAD": ""}
    settings = {"glibc defaults": glibc_default, "glibc, freed memory kept": {MALLOC_ENV: "keep", "LD_PRELOAD": ""}}
    for name, library in PRELOADED.items():
        soname = ctypes.util.find_library(library)
        if soname:
            settings[name] = {**glibc_default, "LD_PRELOAD": soname}
    return settings


def run_child(command: list[str], env: dict[str, str]) -> float:
    """Run ``command`` to completion; returns its peak resident memory in MiB."""
    child = subprocess.Popen(command, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env}, cwd=ROOT,
                             stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed (exit status {os.waitstatus_to_exitcode(status)})")
    return usage.ru_maxrss / 1024  # kilobytes on Linux


def measure_training(args: argparse.Namespace, env: dict[str, str], scratch: Path) -> tuple[float, float]:
    """``(median step seconds, peak MiB)`` of ``bench/train_step.py`` with the pruned loss."""
    out = scratch / "train_step.json"
    peak = run_child([sys.executable, "bench/train_step.py", "--manifest", args.train_manifest, "--prune-ranges",
                      "5", "--steps", str(args.steps), "--threads", str(args.threads), "--json", str(out)], env)
    return json.loads(out.read_text())["pruned 5"]["total"], peak


def measure_evaluate(args: argparse.Namespace, env: dict[str, str], scratch: Path) -> tuple[float, float, float]:
    """``(encoder seconds, decoder seconds, peak MiB)`` of ``transdec evaluate``, greedy label-looping."""
    peak = run_child([str(Path(sys.executable).with_name("transdec")), "evaluate", args.test_manifest, "--model",
                      args.model, "--decoding", "greedy_label", "--output-dir", str(scratch / "evaluate")], env)
    summary = json.loads((scratch / "evaluate" / "summary.json").read_text())["strategies"][0]
    return summary["encoder_seconds"], summary["decoder_seconds"], peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-manifest", required=True)
    parser.add_argument("--test-manifest", required=True)
    parser.add_argument("--model", default="tiny-en-rnnt")
    parser.add_argument("--threads", type=int, default=1, help="training threads (the recipe: one per run)")
    parser.add_argument("--steps", type=int, default=6, help="timed training steps per child")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    settings = allocator_settings()
    rows = ["training step s", "evaluate: encoder s", "evaluate: decoder s", "training peak MiB",
            "evaluate peak MiB"]
    measured = {name: {row: [] for row in rows} for name in settings}
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(args.rounds):
            for name, env in settings.items():
                cells = measured[name]
                step, train_peak = measure_training(args, env, Path(scratch))
                encoder, decoder, evaluate_peak = measure_evaluate(args, env, Path(scratch))
                for row, value in zip(rows, (step, encoder, decoder, train_peak, evaluate_peak)):
                    cells[row].append(value)
            print(f"round {round_index + 1} of {args.rounds} done", file=sys.stderr)

    preloaded = [f"{name} = {env['LD_PRELOAD']}" for name, env in settings.items() if env["LD_PRELOAD"]]
    print(f"preloaded: {', '.join(preloaded) or 'none installed'}")
    print(f"training: bundled-model shape, pruned loss, {args.threads} thread(s), median of {args.steps} steps; "
          f"evaluate: {args.model}, greedy label-looping, {args.test_manifest}; median of {args.rounds} rounds "
          "(peak memory: largest)\n")
    names = list(settings)
    print("| | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for row in rows:
        if row.endswith("MiB"):
            cells = [f"{max(measured[name][row]):.0f}" for name in names]
        else:
            base = statistics.median(measured[names[0]][row])
            cells = [f"{statistics.median(measured[name][row]):.3f}"
                     + (f" ({base / statistics.median(measured[name][row]):.2f}x)" if name != names[0] else "")
                     for name in names]
        print(f"| {row} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
