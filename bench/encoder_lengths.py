"""Encoder time when every batch has a new length, under each length policy (``TransducerModel.encode``).

    .venv/bin/python bench/encoder_lengths.py --model tiny-en-rnnt --device cuda --batch 16 --seconds 10

cuDNN builds an execution plan for every convolution input shape it has not seen, so on a GPU a batch of a new
length can cost many times one of a length seen before (``transdec.model.transducer_model.LengthPolicy``). Two
tables, each policy in turn in one process:

1. Batches of ``--batch`` rows of about ``--seconds`` s: the same length on every call, then a new length on
   every call (one feature frame, 10 ms, shorter each time and never used again, by any policy; the padded
   policies put them all in one bucket). Median of ``--repeats`` calls after ``--warmup`` untimed ones, and
   the ratio to the same-length time without a policy, the target being at most 1.2x.
2. What evaluating a test set sorted by length meets: lengths spread over several 1 s buckets (1.5 s, 2.5 s,
   ... below ``--seconds``), each met for the first time (each policy's lengths a few frames apart from the
   others', and only ``pad`` plans the buckets with cuDNN), then the same lengths again.

Every call is timed alone, with ``torch.cuda.synchronize`` before and after it. On a CPU (``--device cpu``)
shapes cost nothing and the policies should time alike, except for the padding's extra frames.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator

import torch

import transdec
from transdec.model.transducer_model import LENGTH_POLICIES


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-en-rnnt", help="bundled model name or model file")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=16, help="rows per batch")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the rows in table 1")
    parser.add_argument("--repeats", type=int, default=15, help="timed calls per cell (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls before each cell")
    parser.add_argument("--policies", default="none,pad,no_cudnn,pad_no_cudnn",
                        help="comma-separated length policies (default: %(default)s)")
    parser.add_argument("--pad-seconds", type=float, default=1.0, help="bucket of the padded policies")
    parser.add_argument("--no-spread", action="store_true", help="skip table 2")
    return parser.parse_args()


class Timer:
    def __init__(self, model, device: torch.device, batch: int, max_frames: int) -> None:
        self.model, self.device, self.batch = model, device, batch
        generator = torch.Generator().manual_seed(0)
        self.noise = (0.1 * torch.randn(batch, self.samples_for(max_frames), generator=generator)).to(device)

    def samples_for(self, frames: int) -> int:
        """The fewest samples that give ``frames`` feature frames."""
        config = self.model.config.features
        return (frames - 1) * config.frame_shift + config.window_length

    def __call__(self, frames: int, policy: str) -> float:
        """Seconds of one ``encode`` of ``batch`` rows of ``frames`` feature frames, all of them real."""
        waveforms = self.noise[:, : self.samples_for(frames)]
        lengths = torch.full((self.batch,), waveforms.shape[1], device=self.device)
        self.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            self.model.encode(waveforms, lengths, length_policy=policy)
        self.synchronize()
        return time.perf_counter() - start

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def median_ms(timer: Timer, frames: Iterator[int], policy: str, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        timer(next(frames), policy)
    return 1e3 * statistics.median(timer(next(frames), policy) for _ in range(repeats))


def main() -> None:
    args = parse_args()
    policies = [p.strip() for p in args.policies.split(",")]
    if any(policy not in LENGTH_POLICIES for policy in policies):
        raise SystemExit(f"--policies: choose from {','.join(LENGTH_POLICIES)}")
    device = torch.device(args.device)
    model = transdec.load_model(args.model, device=device)
    model.pad_seconds = args.pad_seconds
    per_second = round(1000 / model.config.features.frame_shift_ms)  # feature frames
    base = round(args.seconds * per_second)  # feature frames of a row in table 1
    timer = Timer(model, device, args.batch, base)
    # One feature frame shorter at every call, across all policies: no length is ever met twice in table 1.
    fresh = iter(range(base - 1, 0, -1))

    for _ in range(args.warmup):  # the process's first calls (allocator, lazy initialisation) time nothing
        timer(base, "none")
    same, new = {}, {}
    for policy in policies:
        same[policy] = median_ms(timer, iter(lambda: base, None), policy, args.warmup, args.repeats)
        new[policy] = median_ms(timer, fresh, policy, args.warmup, args.repeats)
    reference = same.get("none", min(same.values()))

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"# torch {torch.__version__}, {name}, {args.model}, batch {args.batch} x {args.seconds:g} s, median of "
          f"{args.repeats} calls after {args.warmup} warm-up calls, pad buckets of {args.pad_seconds:g} s")
    print("| length policy | same length, ms | new length every call, ms | new vs same length (none) | "
          "new vs same length (this policy) |")
    print("|---|---|---|---|---|")
    for policy in policies:
        print(f"| {policy} | {same[policy]:.1f} | {new[policy]:.1f} | {new[policy] / reference:.2f}x | "
              f"{new[policy] / same[policy]:.2f}x |")

    buckets = [k for k in range(1, int(args.seconds) - 1)]
    if args.no_spread or not buckets:
        return
    print()
    print(f"# lengths {buckets[0] + 0.5:g}, {buckets[0] + 1.5:g}, ... {buckets[-1] + 0.5:g} s ({len(buckets)} buckets, "
          f"each met for the first time), then the same lengths again; batch {args.batch}, ms per call")
    print("| length policy | first time, ms | again, ms | first / again |")
    print("|---|---|---|---|")
    for number, policy in enumerate(policies):
        # A few frames apart for each policy, so that the unpadded ones meet new shapes too (padded ones share
        # buckets, but only "pad" builds cuDNN plans for them).
        lengths = [round((k + 0.5) * per_second) + 3 * number for k in buckets]
        first = [timer(frames, policy) for frames in lengths]
        again = [timer(frames, policy) for frames in lengths]
        print(f"| {policy} | {1e3 * statistics.mean(first):.1f} | {1e3 * statistics.mean(again):.1f} | "
              f"{sum(first) / sum(again):.2f}x |")


if __name__ == "__main__":
    main()
