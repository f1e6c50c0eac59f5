"""Decoder-only speed of frame-looping vs label-looping greedy decoding on a parakeet-sized decoder.

The decoder has random weights at the size of parakeet/FastConformer-Large: a 2-layer LSTM predictor of
width 640, joint width 640, 1024 tokens, encoder width 1024. Its blank logits are shifted until greedy
decoding emits about one token per 2.5 encoder frames (the measured rate is printed). Utterances of
5-20 s are random encoder outputs at 80 ms per frame; the encoder itself is not run or timed.

Both decoders run on the same batches in the same process, alternating, and the table shows the
median of the repeats. Run ``python bench/greedy.py --help`` for options.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from typing import Iterator

import torch

from transdec.decoding import DecodingConfig, InexactDecodingWarning, decode, greedy_label_looping
from transdec.protocol import HeadSpec
from transdec.model.synthetic import random_decoder, random_encoder_output
from transdec.runtime import decoding_threads

FRAME_SECONDS = 0.08
ENCODER_DIM = 1024
HEADS = {
    "rnnt": HeadSpec("rnnt", num_tokens=1024),
    "tdt": HeadSpec("tdt", num_tokens=1024, durations=(0, 1, 2, 3, 4)),
    "multiblank": HeadSpec("multiblank", num_tokens=1024, big_blank_durations=(2, 4, 8)),
}
STRATEGIES = ("greedy_frame", "greedy_label")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", default="rnnt,tdt,multiblank", help="comma-separated head kinds")
    parser.add_argument("--batch-sizes", default="1,4,16,32", help="comma-separated batch sizes")
    parser.add_argument("--utterances", type=int, default=32, help="utterances decoded at every batch size")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per cell (median reported)")
    parser.add_argument("--tokens-per-frame", type=float, default=0.4, help="target token rate of the model")
    parser.add_argument(
        "--threads", type=int, default=None, help="intra-op CPU threads in the decoding loop (default: transdec's choice)"
    )
    parser.add_argument(
        "--background-load", action="store_true", help="keep one core busy with another process, as on a shared machine"
    )
    parser.add_argument("--quick", action="store_true", help="a small, fast run: RNN-T, B=1,32, 8 utterances")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.heads, args.batch_sizes, args.utterances, args.repeats = "rnnt", "1,32", 8, 1
    return args


def utterance_lengths(count: int, seed: int) -> list[int]:
    """Encoder lengths of utterances of 5-20 s."""
    generator = torch.Generator().manual_seed(seed)
    seconds = 5.0 + 15.0 * torch.rand(count, generator=generator)
    return [round(s / FRAME_SECONDS) for s in seconds.tolist()]


def make_batches(lengths: list[int], batch_size: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The same utterances (each with its own seed) padded into batches of ``batch_size``."""
    utterances = [random_encoder_output([n], ENCODER_DIM, seed=seed + i)[0][0] for i, n in enumerate(lengths)]
    batches = []
    for start in range(0, len(lengths), batch_size):
        chunk = utterances[start : start + batch_size]
        frames = torch.nn.utils.rnn.pad_sequence(chunk, batch_first=True)
        batches.append((frames, torch.tensor(lengths[start : start + batch_size])))
    return batches


def tokens_per_frame(model, batches) -> float:
    tokens = sum(int(greedy_label_looping(model, *batch).hyps.lengths.sum()) for batch in batches)
    return tokens / sum(int(lengths.sum()) for _, lengths in batches)


def calibrated_model(head: HeadSpec, target: float, seed: int, lowest_blank_rate: float = 0.3):
    """The parakeet-sized random decoder whose greedy token rate is closest to ``target`` per frame (searched by
    bisection over ``blank_rate`` from ``lowest_blank_rate``: lower it for token-heavy targets)."""
    probe = make_batches(utterance_lengths(8, seed + 1), 8, seed + 1)
    low, high = lowest_blank_rate, 0.999  # blank_rate bounds: more blanks, fewer tokens
    for _ in range(9):
        blank_rate = (low + high) / 2
        model = build_model(head, blank_rate, seed)
        if tokens_per_frame(model, probe) > target:
            low = blank_rate
        else:
            high = blank_rate
    return build_model(head, (low + high) / 2, seed)


def build_model(head: HeadSpec, blank_rate: float, seed: int):
    return random_decoder(
        head,
        "lstm",
        encoder_dim=ENCODER_DIM,
        predictor_dim=640,
        joint_dim=640,
        num_layers=2,
        blank_rate=blank_rate,
        seed=seed,
    )


def time_strategy(model, batches, config: DecodingConfig) -> tuple[float, int, int, int]:
    """Seconds to decode all batches, with predictor calls, joint calls and tokens."""
    predictor_calls = joint_calls = tokens = 0
    start = time.perf_counter()
    for frames, lengths in batches:
        result = decode(model, frames, lengths, config)
        predictor_calls += result.stats.predictor_calls
        joint_calls += result.stats.joint_calls
        tokens += int(result.hyps.lengths.sum())
    return time.perf_counter() - start, predictor_calls, joint_calls, tokens


def describe_settings(threads: int | None) -> str:
    with decoding_threads(torch.device("cpu"), threads) as used:
        loop_threads = used
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return (
        f"transdec commit {commit}; torch {torch.__version__}, python {platform.python_version()}, {cpu}, {os.cpu_count()} cores; "
        f"decoding-loop threads {loop_threads} ({'set by --threads' if threads else 'chosen by transdec'}), "
        f"process threads {torch.get_num_threads()}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}, "
        f"float32, LSTM step = explicit cell (no oneDNN)"
    )


@contextlib.contextmanager
def background_load(enabled: bool) -> Iterator[None]:
    """Keep one core busy with a spinning child process while the block runs."""
    if not enabled:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def main() -> None:
    args = parse_args()
    with background_load(args.background_load):
        run(args)


def run(args: argparse.Namespace) -> None:
    warnings.simplefilter("ignore", InexactDecodingWarning)
    torch.manual_seed(args.seed)
    lengths = utterance_lengths(args.utterances, args.seed)
    audio_seconds = sum(lengths) * FRAME_SECONDS
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    print(f"# {describe_settings(args.threads)}", flush=True)
    load = "; another process keeps one core busy" if args.background_load else ""
    print(f"# {len(lengths)} utterances, {audio_seconds:.0f} s of audio, median of {args.repeats} repeats{load}", flush=True)

    rows = []
    for kind in args.heads.split(","):
        head = HEADS[kind]
        model = calibrated_model(head, args.tokens_per_frame, args.seed)
        for batch_size in batch_sizes:
            batches = make_batches(lengths, batch_size, args.seed)
            configs = {s: DecodingConfig(strategy=s, cpu_threads=args.threads) for s in STRATEGIES}
            for config in configs.values():  # warm-up
                time_strategy(model, batches[:1], config)
            samples = {s: [] for s in STRATEGIES}
            counts = {}
            for _ in range(args.repeats):
                for strategy, config in configs.items():
                    seconds, *counts[strategy] = time_strategy(model, batches, config)
                    samples[strategy].append(seconds)
            frame_s, label_s = (statistics.median(samples[s]) for s in STRATEGIES)
            (frame_pred, frame_joint, _), (label_pred, label_joint, label_tokens) = (counts[s] for s in STRATEGIES)
            rows.append(
                f"| {kind}{'' if kind == 'rnnt' else ' (frame inexact)'} | {batch_size} | "
                f"{label_tokens / sum(lengths):.2f} | {frame_s:.2f} | {label_s:.2f} | "
                f"{audio_seconds / frame_s:.0f} | {audio_seconds / label_s:.0f} | **{frame_s / label_s:.2f}x** | "
                f"{frame_pred} / {label_pred} | {frame_joint} / {label_joint} |"
            )
            print(rows[-1], file=sys.stderr, flush=True)

    print(
        "| head | B | tokens/frame | frame-looping s | label-looping s | frame RTFx | label RTFx | "
        "label/frame speed-up | predictor calls frame / label | joint calls frame / label |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
