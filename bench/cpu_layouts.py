"""How transdec lays out CPU work, each choice beside the plain alternative, measured in one run.

* depthwise convolution of the Conformer convolution module: ``nn.Conv1d`` vs the same weights as a 2-D
  convolution of height 1 (``transdec.model.conformer.depthwise_conv1d``);
* decoding's small matrix products: ``nn.Linear`` (weight ``[out, in]``) vs a cached transposed copy
  (``transdec.model.decoding_weights.linear``), at the predictor's and joint's shapes of the bundled models and of
  parakeet-sized decoders;
* the convolutional subsampling without autograd: all rows at once vs row groups with in-place masks and ReLUs
  (``ConvSubsampling``), and the filterbank in one piece vs row groups (``FbankExtractor``).

Every pair gives the same numbers (printed: the largest difference). One thread, median of ``--repeats`` rounds in
which each variant runs in turn.

    python bench/cpu_layouts.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from transdec.model import features as features_module
from transdec.model.conformer import depthwise_conv1d
from transdec.model.decoding_weights import linear
from transdec.model.features import FbankConfig, FbankExtractor
from transdec.model.subsampling import ConvSubsampling


def median_seconds(plain: Callable[[], object], chosen: Callable[[], object], repeats: int,
                   calls: int) -> tuple[float, float]:
    plain(), chosen()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for which, fn in enumerate((plain, chosen)):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[which].append((time.perf_counter() - start) / calls)
    return statistics.median(times[0]), statistics.median(times[1])


def row(name: str, plain: Callable[[], torch.Tensor], chosen: Callable[[], torch.Tensor], repeats: int,
        calls: int) -> None:
    difference = (plain() - chosen()).abs().max().item()
    a, b = median_seconds(plain, chosen, repeats, calls)
    print(f"| {name} | {1e6 * a:,.0f} | {1e6 * b:,.0f} | {a / b:.2f}x | {difference:.1e} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, 1 thread, median of {args.repeats}; microseconds per call\n")
    print("| operation | plain | transdec | speed-up | largest difference |")
    print("|---|---:|---:|---:|---:|")
    with torch.inference_mode():
        conv = torch.nn.Conv1d(144, 144, 15, padding=7, groups=144)
        for batch, frames in ((1, 50), (1, 1000), (16, 125), (16, 1000)):
            x = torch.randn(batch, frames, 144).transpose(1, 2)  # [B, C, T] as the convolution module holds it
            row(f"depthwise conv, 144 channels, kernel 15, B={batch} T={frames}", lambda: conv(x),
                lambda: depthwise_conv1d(x, conv), args.repeats, 200 if batch * frames < 10_000 else 20)
        for name, out_features, in_features in (("LSTM gates 320 -> 1280 (bundled)", 1280, 320),
                                                ("joint output 320 -> 257 (bundled)", 257, 320),
                                                ("LSTM gates 640 -> 2560 (parakeet)", 2560, 640),
                                                ("joint output 640 -> 1025 (parakeet)", 1025, 640)):
            with torch.inference_mode(False):  # as a loaded model's: inference-mode weights are not cached
                layer = torch.nn.Linear(in_features, out_features)
            for rows in (1, 4, 16, 64):
                x = torch.randn(rows, in_features)
                row(f"{name}, {rows} rows", lambda: layer(x), lambda: linear(x, layer), args.repeats, 500)
        subsampling = ConvSubsampling(80, 144, 8)
        features, lengths = torch.randn(16, 1000, 80), torch.full((16,), 1000)
        lengths[-1] = 900
        row("subsampling 8x, 64 channels, B=16 x 10 s", lambda: subsampling._subsample(features, lengths, False)[0],
            lambda: subsampling(features, lengths)[0], args.repeats, 3)
        extractor = FbankExtractor(FbankConfig(normalize="per_feature"))
        waveforms, samples = torch.randn(16, 160_000), torch.full((16,), 160_000)

        def one_piece() -> torch.Tensor:
            default, features_module.ROW_GROUP_BYTES = features_module.ROW_GROUP_BYTES, 2**62
            try:
                return extractor(waveforms, samples)[0]
            finally:
                features_module.ROW_GROUP_BYTES = default

        row("filterbank, B=16 x 10 s", one_piece, lambda: extractor(waveforms, samples)[0], args.repeats, 3)


if __name__ == "__main__":
    main()
