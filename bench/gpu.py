"""Decoder-only GPU speed of label-looping greedy decoding in each CUDA graph mode, beside NeMo's decoders.

    python bench/gpu.py --output gpu.md

The parakeet-sized random decoder of ``bench/greedy.py`` (LSTM 2x640, joint 640, 1024 tokens, calibrated
to ~0.4 tokens per frame) decodes random encoder outputs of 5-20 s utterances (80 ms frames). Columns:
transdec label-looping with ``cuda_graphs`` ``off`` / ``step_graphs`` / ``while_loops``, and, when NeMo is
importable, NeMo's batched greedy label-looping decoder on the same weights and inputs with and without
its CUDA graphs (``bench/nemo_greedy.py``). Every cell is the median of ``--repeats`` timed passes over all
batches after one untimed pass (which also captures the graphs); cells are interleaved in one process.
Token agreement is counted per utterance against transdec's eager decode.

A second table times WIND at batch 1 (label-looping with a window, in graph mode, against window 1 and
NeMo at batch 1), and checks that every window gives the same output.

A third times ALSD++ beam search (``beam_alsd_pp``, ``--beam-size``) at ``--beam-batch-sizes`` with
``cuda_graphs`` ``off``, ``step_graphs`` and ``while_loops`` on the same decoder and batches, and counts the
utterances whose best hypothesis has the same tokens as ``off``. A row that fails says so and the script goes on.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import warnings
from typing import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import greedy as greedy_bench  # noqa: E402  (the parakeet-sized random decoder)

from transdec.decoding import DecodingConfig, decode  # noqa: E402

#: transdec columns: name -> (cuda_graphs mode, fused kernels of transdec.decoding.cuda.greedy_kernels, the joint
#: kernel of transdec.decoding.cuda.joint_kernel, compute dtype).
MODES = {"off": ("off", False, False, None), "step_graphs": ("step_graphs", True, True, None),
         "while_loops, plain": ("while_loops", False, False, None),
         "while_loops, PyTorch joint": ("while_loops", True, False, None),
         "while_loops": ("while_loops", True, True, None),
         "while_loops, bf16": ("while_loops", True, True, torch.bfloat16)}
#: ALSD++ columns: name -> cuda_graphs mode.
BEAM_MODES = ("off", "step_graphs", "while_loops")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", default="rnnt,tdt,multiblank")
    parser.add_argument("--batch-sizes", default="1,32,128")
    parser.add_argument("--utterances", type=int, default=128, help="utterances at B > 1")
    parser.add_argument("--batch1-utterances", type=int, default=16, help="utterances at B = 1")
    parser.add_argument("--windows", default="1,4,8", help="WIND windows timed at batch 1")
    parser.add_argument("--beam-batch-sizes", default="32,128", help="ALSD++ rows ('' for none)")
    parser.add_argument("--beam-size", type=int, default=4, help="beam of the ALSD++ rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-nemo", action="store_true", help="skip NeMo's decoders even if NeMo imports")
    parser.add_argument("--output", default=None, help="also write the tables (markdown) here")
    parser.add_argument("--device", default="cuda", help="cpu only checks that the script runs")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def synchronized(step: Callable[[], object]) -> Callable[[], float]:
    sync = torch.cuda.synchronize if torch.cuda.is_available() else lambda: None

    def timed() -> float:
        sync()
        start = time.perf_counter()
        step()
        sync()
        return time.perf_counter() - start

    return timed


def transdec_runner(model, batches, config: DecodingConfig, fused: bool = True, joint_kernel: bool = True):
    """Decodes every batch; returns the token lists (the last pass's) through ``outputs``."""
    outputs: list[list[int]] = []

    def run() -> None:
        outputs.clear()
        os.environ["TRANSDEC_GREEDY_KERNELS"] = "1" if fused else "0"
        os.environ["TRANSDEC_JOINT_KERNEL"] = "1" if joint_kernel else "0"
        for frames, lengths in batches:
            outputs.extend(h.tokens for h in decode(model, frames, lengths, config).hypotheses())

    return run, outputs


def nemo_runner(nemo, model, use_graphs, batches):
    """NeMo's label-looping loop alone (its ``decoding_computer``), results read back as token lists, as
    transdec's are. A new decoder per batch size: NeMo's graphs serve smaller batches at the larger's cost."""
    greedy = nemo.nemo_greedy(model, batches[0][0].device, cuda_graphs=use_graphs, max_symbols_per_step=10)
    outputs: list[list[int]] = []

    def run() -> None:
        outputs.clear()
        for frames, lengths in batches:
            outputs.extend(nemo.batched_tokens(nemo.nemo_decode_batched(greedy, frames, lengths), frames.shape[0]))

    run.greedy = greedy
    return run, outputs


def median_times(runners: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    timers = {name: synchronized(run) for name, run in runners.items()}
    for name, timer in timers.items():  # untimed pass: captures graphs, warms caches
        timer()
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(repeats):
        for name, timer in timers.items():
            samples[name].append(timer())
    return {name: statistics.median(values) for name, values in samples.items()}


def beam_rows(model, kind: str, all_lengths: list[int], args: argparse.Namespace, device: torch.device) -> list[str]:
    """ALSD++ rows of one head, one per batch size: RTFx in each of ``BEAM_MODES``."""
    rows = []
    seconds_of_audio = sum(all_lengths) * greedy_bench.FRAME_SECONDS
    for batch_size in (int(b) for b in args.beam_batch_sizes.split(",") if b.strip()):
        try:
            batches = [(f.to(device), n.to(device))
                       for f, n in greedy_bench.make_batches(all_lengths, batch_size, args.seed)]
            runners, outputs = {}, {}
            for mode in BEAM_MODES:
                config = DecodingConfig("beam_alsd_pp", beam_size=args.beam_size, cuda_graphs=mode)
                runners[mode], outputs[mode] = transdec_runner(model, batches, config)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                times = median_times(runners, args.repeats)
            for warning in {str(w.message) for w in caught}:
                print(f"# warning: {warning}", flush=True)
            rtfx = {mode: seconds_of_audio / times[mode] for mode in BEAM_MODES}
            same = [f"{sum(a == b for a, b in zip(outputs[mode], outputs['off']))}/{len(outputs['off'])}"
                    for mode in BEAM_MODES[1:]]
            best = max(rtfx[mode] for mode in BEAM_MODES[1:])
            cells = " | ".join(f"{rtfx[mode]:,.0f}" for mode in BEAM_MODES)
            rows.append(f"| {kind} | {batch_size} | {args.beam_size} | {cells} | **{best / rtfx['off']:.2f}x** | "
                        f"{', '.join(same)} |")
        except Exception as error:  # a failed row must not cost the other tables
            rows.append(f"| {kind} | {batch_size} | {args.beam_size} | failed: {type(error).__name__}: {error} "
                        "| - | - | - | - |")
        print(rows[-1], flush=True)
    return rows


def load_nemo(disabled: bool):
    if disabled:
        return None
    try:
        import nemo_greedy  # first: importing NeMo rewrites sys.path[0], this script's folder

        import nemo.collections.asr  # noqa: F401

        nemo_greedy.quiet_nemo_logging()
        return nemo_greedy
    except Exception as error:  # NeMo is optional: its absence only drops its columns
        print(f"# NeMo columns skipped: {type(error).__name__}: {error}", flush=True)
        return None


def describe(device: torch.device) -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    try:
        from cuda import bindings

        bindings_version = bindings.__version__
    except ImportError:
        bindings_version = "not installed"
    name = torch.cuda.get_device_properties(device).name if device.type == "cuda" else "CPU"
    return (f"transdec commit {commit}; {name}; torch {torch.__version__} (CUDA {torch.version.cuda}); "
            f"cuda-bindings {bindings_version}; float32")


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    lines = [f"# {describe(device)}"]
    print(lines[0], flush=True)
    nemo = load_nemo(args.no_nemo)
    all_lengths = greedy_bench.utterance_lengths(args.utterances, args.seed)
    header = ("| head | B | NeMo graphs RTFx | NeMo no graphs | transdec " + " | ".join(MODES) +
              " | best float32 / NeMo graphs | same tokens as transdec off |")
    rows = [header, "|---" * (header.count("|") - 1) + "|"]
    wind_rows = ["| head | decoder (B=1) | RTFx | / NeMo graphs B=1 | same tokens as window 1 |", "|---|---|---|---|---|"]
    alsd_rows = ["| head | B | beam | ALSD++ off RTFx | step_graphs | while_loops | best graphs / off | "
                 "same best tokens as off (step_graphs, while_loops) |", "|---|---|---|---|---|---|---|---|"]
    for kind in args.heads.split(","):
        model = greedy_bench.calibrated_model(greedy_bench.HEADS[kind], 0.4, args.seed).to(device)
        with_nemo = nemo is not None and kind in ("rnnt", "tdt")
        for batch_size in (int(b) for b in args.batch_sizes.split(",")):
            lengths = all_lengths[: args.batch1_utterances] if batch_size == 1 else all_lengths
            seconds_of_audio = sum(lengths) * greedy_bench.FRAME_SECONDS
            batches = [(f.to(device), n.to(device)) for f, n in greedy_bench.make_batches(lengths, batch_size, args.seed)]
            runners, outputs = {}, {}
            for name, (mode, fused, joint, dtype) in MODES.items():
                config = DecodingConfig(cuda_graphs=mode, compute_dtype=dtype)
                runners[name], outputs[name] = transdec_runner(model, batches, config, fused, joint)
            if with_nemo:
                for name, graphs in (("nemo_graphs", True), ("nemo", False)):
                    runners[name], outputs[name] = nemo_runner(nemo, model, graphs, batches)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                times = median_times(runners, args.repeats)
            for warning in {str(w.message) for w in caught}:
                print(f"# warning: {warning}", flush=True)
            if with_nemo:
                print(f"# NeMo graphs mode: {nemo.cuda_graphs_mode(runners['nemo_graphs'].greedy)}", flush=True)
            rtfx = {name: seconds_of_audio / t for name, t in times.items()}
            eager = outputs["off"]
            agree = [f"{name} {sum(a == b for a, b in zip(outputs[name], eager))}/{len(eager)}"
                     for name in outputs if name != "off"]
            best = max(rtfx[m] for m, (*_, dtype) in MODES.items() if dtype is None)
            cell = lambda name: f"{rtfx[name]:,.0f}" if name in rtfx else "-"  # noqa: E731
            ratio = f"**{best / rtfx['nemo_graphs']:.2f}x**" if "nemo_graphs" in rtfx else "-"
            rows.append(f"| {kind} | {batch_size} | {cell('nemo_graphs')} | {cell('nemo')} | "
                        + " | ".join(cell(m) for m in MODES) + f" | {ratio} | {', '.join(agree)} |")
            print(rows[-1], flush=True)

        # WIND at batch 1.
        lengths = all_lengths[: args.batch1_utterances]
        seconds_of_audio = sum(lengths) * greedy_bench.FRAME_SECONDS
        batches = [(f.to(device), n.to(device)) for f, n in greedy_bench.make_batches(lengths, 1, args.seed)]
        runners, outputs = {}, {}
        for window in (int(w) for w in args.windows.split(",")):
            name = f"label-looping, window {window}, graphs (auto)"
            runners[name], outputs[name] = transdec_runner(model, batches, DecodingConfig(window_size=window))
        runners["greedy_wind window 8 (host loop)"], outputs["greedy_wind window 8 (host loop)"] = transdec_runner(
            model, batches, DecodingConfig(strategy="greedy_wind", window_size=8))
        if with_nemo:
            runners["NeMo, graphs"], outputs["NeMo, graphs"] = nemo_runner(nemo, model, True, batches)
        times = median_times(runners, args.repeats)
        reference = outputs[next(iter(outputs))]
        nemo_rtfx = seconds_of_audio / times["NeMo, graphs"] if "NeMo, graphs" in times else None
        for name, t in times.items():
            rtfx = seconds_of_audio / t
            versus = f"{rtfx / nemo_rtfx:.2f}x" if nemo_rtfx else "-"
            same = f"{sum(a == b for a, b in zip(outputs[name], reference))}/{len(reference)}"
            wind_rows.append(f"| {kind} | {name} | {rtfx:,.0f} | {versus} | {same} |")
            print(wind_rows[-1], flush=True)

        alsd_rows += beam_rows(model, kind, all_lengths, args, device)

    lines += ["", f"Decoder-only RTFx, {args.utterances} utterances of 5-20 s ({args.batch1_utterances} at B=1), "
              f"median of {args.repeats}:", "", *rows, "", "WIND at batch 1:", "", *wind_rows, "",
              f"ALSD++ beam search, beam {args.beam_size}, decoder only:", "", *alsd_rows]
    print("\n".join(lines))
    if args.output:
        with open(args.output, "w") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
