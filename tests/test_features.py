"""Log-mel filterbank features: agreement with kaldi-native-fbank, batching, frame counts, normalisation."""

import functools
import math

import numpy as np
import pytest
import torch

from transdec.model.features import FbankConfig, FbankExtractor, mel_filterbank, window_function

knf = pytest.importorskip("kaldi_native_fbank")

SAMPLE_RATE = 16000


def knf_options(window: str = "povey") -> "knf.FbankOptions":
    """kaldi-native-fbank options spelled out to match FbankConfig() (its defaults differ: dither, num_bins)."""
    opts = knf.FbankOptions()
    opts.frame_opts.samp_freq = SAMPLE_RATE
    opts.frame_opts.frame_length_ms = 25.0
    opts.frame_opts.frame_shift_ms = 10.0
    opts.frame_opts.dither = 0.0
    opts.frame_opts.snip_edges = True
    opts.frame_opts.window_type = window
    opts.frame_opts.preemph_coeff = 0.97
    opts.frame_opts.remove_dc_offset = True
    opts.frame_opts.round_to_power_of_two = True
    opts.mel_opts.num_bins = 80
    opts.mel_opts.low_freq = 20.0
    opts.mel_opts.high_freq = 0.0
    opts.use_energy = False
    opts.use_log_fbank = True
    opts.use_log_floor = True
    opts.use_power = True
    return opts


def knf_fbank(samples: torch.Tensor, window: str = "povey") -> np.ndarray:
    """``[N]`` samples, used unscaled -> ``[T, 80]`` float32 features from kaldi-native-fbank."""
    fbank = knf.OnlineFbank(knf_options(window))
    fbank.accept_waveform(SAMPLE_RATE, samples.float().tolist())
    fbank.input_finished()
    frames = [fbank.get_frame(i) for i in range(fbank.num_frames_ready)]
    return np.stack(frames) if frames else np.zeros((0, 80), dtype=np.float32)


@functools.lru_cache
def make_signal(kind: str, num_samples: int, seed: int = 0) -> torch.Tensor:
    """``[num_samples]`` float64 test audio in [-1, 1]; cached, so callers must not modify it."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(num_samples, dtype=torch.float64) / SAMPLE_RATE
    if kind == "noise":
        return 0.1 * torch.randn(num_samples, generator=g, dtype=torch.float64)
    if kind == "sweep":
        # Linear chirp 100 Hz -> 7 kHz over one second: every mel bin gets energy at some point, and the
        # bins far from the tone are very weak (see DYNAMIC_RANGE).
        return 0.5 * torch.sin(2 * math.pi * (100 * t + 0.5 * 6900 * t**2))
    if kind == "speech":
        # Harmonics of a gliding pitch with 1/k roll-off, amplitude-modulated at a syllable rate, plus a
        # little noise: low energy between harmonics and at high frequencies exercises the log's range.
        phase = 2 * math.pi * torch.cumsum(110 + 40 * t, 0) / SAMPLE_RATE
        voiced = sum(torch.sin(k * phase) / k for k in range(1, 40))
        envelope = 0.6 + 0.4 * torch.sin(2 * math.pi * 4 * t)
        return 0.2 * voiced * envelope + 1e-3 * torch.randn(num_samples, generator=g, dtype=torch.float64)
    raise ValueError(kind)


# kaldi-native-fbank computes in float32, and float32 FFT rounding leaves a noise floor ~1e-7 of the
# frame's peak amplitude: a mel bin 80 dB below the frame's strongest bin has only a few bits right, and
# the log magnifies that (the sweep's far bins differ by up to 1.5e-2, in float32 and float64 alike).
# So the tight bound applies to bins within DYNAMIC_RANGE of their frame's strongest bin, and all bins get
# a loose one. float64 cannot get much closer: the rest of the difference is kaldi-native-fbank's rounding.
DYNAMIC_RANGE = 16.0  # nats of log-mel energy, ~70 dB
# Measured max |diff| over these cases, within DYNAMIC_RANGE: 1.7e-4 (float32), 1.3e-4 (float64);
# over all bins (the sweep's far bins): 1.5e-2 (float32), 1.3e-2 (float64).
KNF_TOLERANCE = 1e-3
KNF_TOLERANCE_ALL_BINS = 5e-2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("num_samples", [8000, 21920, 300])  # 0.5 s, 1.37 s, shorter than one window
@pytest.mark.parametrize("kind", ["noise", "sweep", "speech"])
def test_matches_kaldi_native_fbank(kind, num_samples, dtype):
    # Both get the same float32 samples, so only the computation differs.
    samples = make_signal(kind, num_samples).float()
    expected = knf_fbank(samples)
    features, frames = FbankExtractor()(samples.to(dtype)[None], torch.tensor([num_samples]))
    assert features.dtype == dtype
    assert features.shape == (1, expected.shape[0], 80)
    assert frames.tolist() == [expected.shape[0]]
    diff = np.abs(features[0].double().numpy() - expected)
    strong = expected > expected.max(axis=1, keepdims=True, initial=-np.inf) - DYNAMIC_RANGE
    max_diff, max_diff_strong = diff.max(initial=0.0), diff[strong].max(initial=0.0)
    if len(expected):
        print(
            f"\n{kind} {num_samples} samples {dtype}: {len(expected)} frames, max |diff| vs knf = "
            f"{max_diff_strong:.2e} within {DYNAMIC_RANGE:g} nats of the frame peak ({strong.mean():.0%} of "
            f"bins), {max_diff:.2e} over all bins"
        )
    assert max_diff_strong < KNF_TOLERANCE
    assert max_diff < KNF_TOLERANCE_ALL_BINS


@pytest.mark.parametrize("window", ["hanning", "hamming", "rectangular"])
def test_other_windows_match_kaldi_native_fbank(window):
    samples = make_signal("noise", 8000).float()
    features, _ = FbankExtractor(FbankConfig(window=window))(samples[None])
    max_diff = np.abs(features[0].numpy() - knf_fbank(samples, window)).max()
    print(f"\n{window}: max |diff| vs knf = {max_diff:.2e}")
    assert max_diff < 1e-3


def test_window_and_filterbank_match_kaldi_native_fbank():
    opts = knf_options()
    window = np.array(knf.FeatureWindowFunction(opts.frame_opts).window)
    np.testing.assert_allclose(window_function(FbankConfig()).numpy(), window, rtol=0, atol=1e-6)
    # Kaldi builds its filters in float32 (mel values ~2800 have an ulp of 2.4e-4); measured 1.1e-5.
    kaldi_filters = knf.MelBanks(opts.mel_opts, opts.frame_opts).get_matrix()
    filters = mel_filterbank(FbankConfig()).numpy()
    assert filters.shape == kaldi_filters.shape == (80, 257)
    np.testing.assert_allclose(filters, kaldi_filters, rtol=0, atol=5e-5)
    assert (filters[:, -1] == 0).all()  # Kaldi gives the Nyquist bin no weight


def test_features_are_of_unscaled_audio():
    """Scaling by 32768 (Kaldi's int16 convention) shifts every log-mel value by 2 ln 32768."""
    extractor = FbankExtractor()
    samples = make_signal("noise", 4000)[None]
    shift = extractor(32768 * samples)[0] - extractor(samples)[0]
    torch.testing.assert_close(shift, torch.full_like(shift, 2 * math.log(32768)), rtol=0, atol=1e-9)


@pytest.mark.parametrize("normalize", ["none", "per_feature"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batch_matches_one_at_a_time_with_nan_padding(normalize, dtype):
    extractor = FbankExtractor(FbankConfig(normalize=normalize))
    lengths = [21920, 8000, 300, 400, 16001, 0]
    signals = [make_signal("speech", n, seed=i).to(dtype) for i, n in enumerate(lengths)]
    batch = torch.full((len(lengths), max(lengths)), float("nan"), dtype=dtype)
    for row, signal in zip(batch, signals):
        row[: len(signal)] = signal
    features, frames = extractor(batch, torch.tensor(lengths))

    assert features.shape == (len(lengths), extractor.num_frames(max(lengths)), 80)
    assert not features.isnan().any()
    for i, signal in enumerate(signals):
        alone, alone_frames = extractor(signal[None], torch.tensor([len(signal)]))
        assert frames[i] == alone_frames[0] == extractor.num_frames(len(signal))
        # Different batch shapes may take different FFT/matmul code paths, hence a tolerance, not ==.
        torch.testing.assert_close(features[i, : frames[i]], alone[0])
        assert (features[i, frames[i] :] == 0).all()


@pytest.mark.parametrize("group_bytes", [1, 900_000])
def test_row_groups_give_the_whole_batch_s_features(monkeypatch, group_bytes):
    """On a CPU without autograd the rows go through in groups (one row; two rows); the output is the same."""
    from transdec.model import features as features_module

    extractor = FbankExtractor(FbankConfig(normalize="per_feature"))
    lengths = torch.tensor([8000, 16000, 300, 12000, 0])
    batch = torch.randn(len(lengths), 16000, dtype=torch.float64)
    whole, whole_frames = extractor(batch, lengths)
    monkeypatch.setattr(features_module, "ROW_GROUP_BYTES", group_bytes)
    with torch.inference_mode():
        grouped, grouped_frames = extractor(batch, lengths)
    assert torch.equal(grouped_frames, whole_frames)
    torch.testing.assert_close(grouped, whole, rtol=0, atol=1e-12)


def test_batch_shorter_than_one_window():
    features, frames = FbankExtractor()(torch.zeros(3, 399), torch.tensor([399, 10, 0]))
    assert features.shape == (3, 0, 80)
    assert frames.tolist() == [0, 0, 0]


EDGE_LENGTHS = [0, 399, 400, 401, 560, 16000]


def test_frame_counts_at_edge_lengths():
    extractor = FbankExtractor()
    expected = [0, 0, 1, 1, 2, 98]
    assert [extractor.num_frames(n) for n in EDGE_LENGTHS] == expected
    assert extractor.num_frames(torch.tensor(EDGE_LENGTHS)).tolist() == expected
    kaldi = [knf_fbank(torch.zeros(n)).shape[0] for n in EDGE_LENGTHS]
    assert kaldi == expected

    batch = make_signal("noise", max(EDGE_LENGTHS)).expand(len(EDGE_LENGTHS), -1)
    features, frames = extractor(batch, torch.tensor(EDGE_LENGTHS))
    assert frames.tolist() == expected and frames.dtype == torch.int64
    assert features.shape == (len(EDGE_LENGTHS), 98, 80)
    valid = (features != 0).all(dim=-1)  # noise never hits exactly 0 in a valid frame
    assert valid.sum(dim=1).tolist() == expected


def test_per_feature_normalisation():
    extractor = FbankExtractor(FbankConfig(normalize="per_feature"))
    lengths = torch.tensor([21920, 8000, 400, 0])  # 135, 48, 1 and 0 frames
    batch = torch.stack([make_signal("speech", 21920, seed=i) for i in range(4)])
    features, frames = extractor(batch, lengths)
    for i in range(2):
        valid = features[i, : frames[i]]
        torch.testing.assert_close(valid.mean(dim=0), torch.zeros(80, dtype=torch.float64), rtol=0, atol=1e-9)
        # Unbiased std, as NeMo; the 1e-5 added to it makes the result a hair under 1.
        torch.testing.assert_close(valid.std(dim=0), torch.ones(80, dtype=torch.float64), rtol=0, atol=1e-4)
        assert (features[i, frames[i] :] == 0).all()
    # One frame has std 0: NeMo's convention gives zeros, not NaN; no frames gives nothing at all.
    assert (features[2:] == 0).all()


def test_dither_adds_noise_to_each_frame():
    torch.manual_seed(0)
    silence = torch.zeros(1, 1600)
    floor = math.log(torch.finfo(torch.float32).eps)
    assert (FbankExtractor()(silence)[0] == floor).all()
    dithered = FbankExtractor(FbankConfig(dither=1e-2))(silence)[0]
    assert (dithered > floor).all() and dithered.isfinite().all()


def test_buffers_are_not_in_the_state_dict():
    extractor = FbankExtractor()
    assert dict(extractor.state_dict()) == {}
    assert extractor.window.shape == (400,) and extractor.filterbank.shape == (257, 80)


@pytest.mark.parametrize(
    "waveforms, lengths, message",
    [
        (torch.zeros(1600), torch.tensor([1600]), "2-D"),
        (torch.zeros(1, 1, 1600), torch.tensor([1600]), "2-D"),
        (torch.zeros(2, 1600, dtype=torch.int16), torch.tensor([1600, 1600]), "floating point"),
        (torch.zeros(2, 1600), torch.tensor([1600]), r"shape \[2\]"),
        (torch.zeros(2, 1600), torch.tensor([[1600, 1600]]), r"shape \[2\]"),
        (torch.zeros(2, 1600), [1600, 1600], r"shape \[2\]"),
        (torch.zeros(2, 1600), torch.tensor([1600.0, 1600.0]), "integer"),
        (torch.zeros(2, 1600), torch.tensor([1601, 1600]), r"in \[0, 1600\]"),
        (torch.zeros(2, 1600), torch.tensor([-1, 1600]), r"in \[0, 1600\]"),
    ],
)
def test_bad_inputs_raise(waveforms, lengths, message):
    with pytest.raises(ValueError, match=message):
        FbankExtractor()(waveforms, lengths)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(frame_length_ms=50.0), "fft_size=512 is smaller than the window .800 samples.; use 1024"),
        (dict(window="blackman"), "unknown window"),
        (dict(high_freq=9000.0), "high_freq"),
        (dict(low_freq=8000.0, high_freq=-100.0), "high_freq"),
        (dict(num_mel_bins=2), "num_mel_bins"),
        (dict(snip_edges=False), "snip_edges"),
        (dict(normalize="per_utterance"), "normalize"),
        (dict(log_floor=0.0), "log_floor"),
    ],
)
def test_bad_configs_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FbankConfig(**kwargs)
