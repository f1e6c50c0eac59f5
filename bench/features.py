"""Log-mel fbank speed and agreement: transdec's FbankExtractor vs kaldi-native-fbank, on CPU.

One utterance of random speech-like audio (``--seconds``, default 60), both set to the same Kaldi
options, one thread, median of ``--repeats``; also prints the largest difference of the features.
"""

from __future__ import annotations

import argparse
import statistics
import time

import kaldi_native_fbank as knf
import torch

from transdec.model import FbankConfig, FbankExtractor


def kaldi_native(samples: torch.Tensor, config: FbankConfig) -> torch.Tensor:
    options = knf.FbankOptions()
    options.frame_opts.dither = 0.0
    options.frame_opts.samp_freq = config.sample_rate
    options.frame_opts.snip_edges = True
    options.frame_opts.window_type = config.window
    options.frame_opts.preemph_coeff = config.preemphasis
    options.frame_opts.remove_dc_offset = config.remove_dc_offset
    options.mel_opts.num_bins = config.num_mel_bins
    options.mel_opts.low_freq = config.low_freq
    options.mel_opts.high_freq = config.high_freq
    fbank = knf.OnlineFbank(options)
    fbank.accept_waveform(config.sample_rate, samples.tolist())
    fbank.input_finished()
    return torch.stack([torch.tensor(fbank.get_frame(i)) for i in range(fbank.num_frames_ready)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = FbankConfig()
    extractor = FbankExtractor(config)
    generator = torch.Generator().manual_seed(0)
    n = int(args.seconds * config.sample_rate)
    t = torch.arange(n) / config.sample_rate
    # Harmonics of a wandering pitch under a syllable-rate envelope, plus a little noise.
    pitch = 120 + 30 * torch.sin(2 * torch.pi * 0.7 * t)
    phase = 2 * torch.pi * torch.cumsum(pitch, 0) / config.sample_rate
    voice = sum(torch.sin(k * phase) / k for k in range(1, 12)) * (0.5 + 0.5 * torch.sin(2 * torch.pi * 4 * t)) ** 2
    audio = (0.1 * voice + 0.003 * torch.randn(n, generator=generator)).float()

    timings = {"transdec": [], "kaldi-native-fbank": []}
    for _ in range(args.repeats):
        start = time.perf_counter()
        ours, _ = extractor(audio.unsqueeze(0), torch.tensor([n]))
        timings["transdec"].append(time.perf_counter() - start)
        start = time.perf_counter()
        reference = kaldi_native(audio, config)
        timings["kaldi-native-fbank"].append(time.perf_counter() - start)
    difference = (ours[0] - reference).abs().max().item()
    print(f"# torch {torch.__version__}, 1 thread, {args.seconds:.0f} s of 16 kHz audio, median of {args.repeats}")
    print("| extractor | ms |")
    print("|---|---|")
    for name, samples in timings.items():
        print(f"| {name} | {statistics.median(samples) * 1e3:.1f} |")
    print(f"max |difference| of log-mel features: {difference:.2e} over {reference.shape[0]} frames")


if __name__ == "__main__":
    main()
