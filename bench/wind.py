"""WIND window sizes, decoder only: the batch-1 path (WIND paper, Table 1) and label-looping with and without a
window at small batches (Table 2), plus the jump-size distribution (Figure 1), in one run.

    .venv/bin/python bench/wind.py --manifest data/synth/test.jsonl --histogram docs/wind_jumps.png

Decoders: the bundled models or any ``--models`` files (on encoder outputs of ``--utterances`` held-out
test utterances, computed once, not timed) and the parakeet-sized random decoder of ``bench/greedy.py``
(random encoder frames, calibrated to ~0.4 tokens per frame) for each head. Every cell is the median of
``--repeats`` runs, all cells interleaved in one process.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import greedy as greedy_bench  # noqa: E402  (the parakeet-sized synthetic decoder)

import transdec  # noqa: E402
from transdec.decoding import DecodingConfig, decode  # noqa: E402
from transdec.training.data import collate, read_training_manifest  # noqa: E402

BUNDLED = ("tiny-en-rnnt", "tiny-en-tdt", "tiny-en-multiblank")


def model_sources(manifest: str, count: int, names: list[str]):
    """(name, model, per-utterance encoder outputs [(frames [1, T, D], lengths [1])], frame seconds)."""
    entries = read_training_manifest(manifest)
    entries = entries[:: max(1, len(entries) // count)][:count]
    for name in names:
        try:
            model = transdec.load_model(name)
        except FileNotFoundError:
            print(f"# {name} is not available; skipped")
            continue
        outputs = []
        with torch.inference_mode():
            for i in range(len(entries)):
                batch = collate(entries, [[i]], [[]] * len(entries), model.sample_rate)
                outputs.append(model.encode(batch.waveforms, batch.waveform_lengths))
        yield name, model, outputs, model.frame_shift_seconds


def synthetic_sources(count: int, seed: int):
    lengths = greedy_bench.utterance_lengths(count, seed)
    for kind, head in greedy_bench.HEADS.items():
        model = greedy_bench.calibrated_model(head, 0.4, seed)
        yield f"parakeet-size random {kind}", model, greedy_bench.make_batches(lengths, 1, seed), greedy_bench.FRAME_SECONDS


def rebatch(outputs, batch_size: int):
    """Per-utterance encoder outputs padded into batches of ``batch_size``."""
    batches = []
    for start in range(0, len(outputs), batch_size):
        chunk = outputs[start : start + batch_size]
        frames = torch.nn.utils.rnn.pad_sequence([f[0, : int(n[0])] for f, n in chunk], batch_first=True)
        batches.append((frames, torch.cat([n for _, n in chunk])))
    return batches


def timed(model, batches, config: DecodingConfig) -> tuple[float, int, collections.Counter]:
    calls, jumps = 0, collections.Counter()
    start = time.perf_counter()
    for frames, lengths in batches:
        result = decode(model, frames, lengths, config)
        calls += result.stats.joint_calls
        jumps.update(result.stats.window_jumps)
    return time.perf_counter() - start, calls, jumps


def median_times(model, batches, configs: dict[str, DecodingConfig], repeats: int):
    for config in configs.values():
        timed(model, batches[:1], config)  # warm-up
    samples = {name: [] for name in configs}
    info = {}
    for _ in range(repeats):
        for name, config in configs.items():
            seconds, calls, jumps = timed(model, batches, config)
            samples[name].append(seconds)
            info[name] = (calls, jumps)
    return {name: statistics.median(v) for name, v in samples.items()}, info


def plot_jumps(histograms: dict[int, collections.Counter], title: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(histograms), figsize=(3.0 * len(histograms), 3.0), sharey=True)
    for ax, (window, counts) in zip(axes, histograms.items()):
        total = sum(counts.values())
        sizes = sorted(counts)
        ax.bar([str(s) for s in sizes], [100 * counts[s] / total for s in sizes], color="tab:blue")
        ax.set_title(f"window {window}")
        ax.set_xlabel("frames moved per window")
        ax.tick_params(axis="x", labelsize=7, rotation=90)
    axes[0].set_ylabel("% of window searches")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", default="data/synth/test.jsonl")
    parser.add_argument("--models", nargs="+", default=list(BUNDLED), help="bundled names or model files")
    parser.add_argument("--utterances", type=int, default=64)
    parser.add_argument("--synthetic-utterances", type=int, default=16)
    parser.add_argument("--windows", default="1,2,4,8,16")
    parser.add_argument("--batch-sizes", default="2,4,8,16")
    parser.add_argument("--batched-window", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-synthetic", action="store_true")
    parser.add_argument("--histogram", default=None, help="PNG of the jump sizes of the first decoder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    print(f"# {greedy_bench.describe_settings(None)}")

    sources = list(model_sources(args.manifest, args.utterances, args.models)) if os.path.exists(args.manifest) else []
    if not args.no_synthetic:
        sources += list(synthetic_sources(args.synthetic_utterances, args.seed))
    table1, table2, first_jumps = [], [], None
    for name, model, outputs, frame_seconds in sources:
        audio = sum(int(n[0]) for _, n in outputs) * frame_seconds
        configs = {w: DecodingConfig(strategy="greedy_wind", window_size=w) for w in windows}
        times, info = median_times(model, outputs, configs, args.repeats)
        base = times[windows[0]]
        cells = [f"{times[w]:.3f} ({base / times[w]:.2f}x, {info[w][0]} calls)" for w in windows]
        table1.append(f"| {name} | {len(outputs)} / {audio:.0f} s | " + " | ".join(cells) + " |")
        if first_jumps is None:
            first_jumps = (name, {w: info[w][1] for w in windows})

        for batch_size in batch_sizes:
            batches = rebatch(outputs, batch_size)
            pair = {"label": DecodingConfig(strategy="greedy_label"),
                    "wind": DecodingConfig(strategy="greedy_label", window_size=args.batched_window)}
            times2, info2 = median_times(model, batches, pair, args.repeats)
            table2.append(f"| {name} | {batch_size} | {times2['label']:.3f} | {times2['wind']:.3f} | "
                          f"**{times2['label'] / times2['wind']:.2f}x** | {info2['label'][0]} / {info2['wind'][0]} |")
        print(f"# done: {name}", flush=True)

    print(f"\nBatch 1, one utterance at a time (greedy_wind), decoder seconds (speed-up vs window "
          f"{windows[0]}, joint calls), median of {args.repeats}:\n")
    print("| decoder | utterances / audio | " + " | ".join(f"window {w}" for w in windows) + " |")
    print("|---|---|" + "---|" * len(windows))
    print("\n".join(table1))
    print(f"\nBatched label-looping, window 1 vs window {args.batched_window}, decoder seconds:\n")
    print("| decoder | B | label-looping s | + WIND s | speed-up | joint calls |")
    print("|---|---|---|---|---|---|")
    print("\n".join(table2))
    if args.histogram and first_jumps is not None:
        plot_jumps(first_jumps[1], f"WIND jump sizes, batch 1, {first_jumps[0]}", args.histogram)
        print(f"\nwrote {args.histogram}")


if __name__ == "__main__":
    main()
