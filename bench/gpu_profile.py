"""Where a GPU decode's time goes: kernel launches and host syncs per decode for each strategy run eagerly, and the
GPU time by kernel of label-looping and ALSD++ under CUDA graphs.

    python bench/gpu_profile.py --output profile.md

The decoder is the parakeet-sized random one of ``bench/greedy.py`` (LSTM 2x640, joint 640, 1024 tokens, ~0.4
tokens per frame) on one batch of ``--batch-size`` random encoder outputs of 5-20 s.

1. Eagerly (``cuda_graphs="off"`` where a strategy has graphs): greedy label-looping, ALSD++, AES++ and batched WIND
   beam search; per decode the wall time, the CUDA kernels launched (``torch.profiler``) and the host syncs
   (``torch.cuda.set_sync_debug_mode``), also per emitted token. Launches and syncs are what CUDA graphs remove;
   a search with syncs inside its step cannot be captured as it stands.
2. Under CUDA graphs (``while_loops``): the kernels of one replayed decode by GPU time (top ``--top``), with
   their launch counts, for greedy label-looping and ALSD++.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import greedy as greedy_bench  # noqa: E402
from gpu import describe  # noqa: E402

from transdec.decoding import DecodingConfig, decode  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", default="rnnt,tdt")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--eager", default="greedy_label,beam_alsd_pp,beam_aes_pp,beam_wind_batched",
                        help="strategies of the eager table ('' for none)")
    parser.add_argument("--output", default=None)
    parser.add_argument("--device", default="cuda", help="cpu only checks that the script runs")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def kernels_launched(run) -> tuple[int, float]:
    """CUDA kernels one call of ``run`` launches, and their summed GPU time in ms."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        sync()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(kernels), sum(e.device_time for e in kernels) / 1000


def syncs(run) -> int:
    """Host syncs of one call of ``run`` (each synchronising operation warns once in "warn" mode)."""
    sync()
    if not torch.cuda.is_available():
        return 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    lines = [f"# {describe(device)}; B={args.batch_size}, beam {args.beam_size}"]
    print(lines[0], flush=True)
    lengths = greedy_bench.utterance_lengths(args.batch_size, args.seed)
    frames, frame_lengths = (t.to(device) for t in greedy_bench.make_batches(lengths, args.batch_size, args.seed)[0])
    eager = ["| head | strategy (eager) | ms | kernels | GPU busy ms | host syncs | tokens | kernels / token | "
             "syncs / token |", "|---|---|---|---|---|---|---|---|---|"]
    graphed: list[str] = []
    for kind in args.heads.split(","):
        model = greedy_bench.calibrated_model(greedy_bench.HEADS[kind], 0.4, args.seed).to(device)
        beam = dict(beam_size=args.beam_size)
        strategies = {"greedy_label": DecodingConfig(cuda_graphs="off"),
                      "beam_alsd_pp": DecodingConfig("beam_alsd_pp", cuda_graphs="off", **beam),
                      "beam_aes_pp": DecodingConfig("beam_aes_pp", **beam)}
        if kind == "rnnt":
            strategies["beam_wind_batched"] = DecodingConfig("beam_wind_batched", **beam)
        wanted = set(filter(None, args.eager.split(",")))
        for name, config in ((n, c) for n, c in strategies.items() if n in wanted):
            try:
                def run(config=config):
                    return decode(model, frames, frame_lengths, config)

                tokens = sum(len(h.tokens) for h in run().hypotheses())
                sync()
                start = time.perf_counter()
                run()
                sync()
                ms = (time.perf_counter() - start) * 1000
                launched, busy = kernels_launched(run)
                synced = syncs(run)
                eager.append(f"| {kind} | {name} | {ms:.0f} | {launched:,} | {busy:.0f} | {synced:,} | {tokens} | "
                             f"{launched / max(tokens, 1):.0f} | {synced / max(tokens, 1):.2f} |")
            except Exception as error:
                eager.append(f"| {kind} | {name} | failed: {type(error).__name__}: {str(error)[:200]} |||||||")
            print(eager[-1], flush=True)
        for name, config in {"greedy_label while_loops": DecodingConfig(cuda_graphs="while_loops"),
                             "beam_alsd_pp while_loops": DecodingConfig("beam_alsd_pp", cuda_graphs="while_loops",
                                                                        **beam)}.items():
            first = len(graphed)
            try:
                decode(model, frames, frame_lengths, config)  # capture
                sync()
                start = time.perf_counter()
                decode(model, frames, frame_lengths, config)
                sync()
                ms = (time.perf_counter() - start) * 1000
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    decode(model, frames, frame_lengths, config)
                    sync()
                table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.top, max_name_column_width=60)
                graphed += [f"### {kind}, {name}: {ms:.1f} ms wall", "", "```", table, "```", ""]
            except Exception as error:
                graphed += [f"### {kind}, {name}: failed: {type(error).__name__}: {error}", ""]
            print("\n".join(graphed[first:]), flush=True)
    lines += ["", *eager, "", *graphed]
    if args.output:
        with open(args.output, "w") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
