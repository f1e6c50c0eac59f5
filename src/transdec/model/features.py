"""Kaldi-compatible log-mel filterbank features in pure PyTorch, batched.

:class:`FbankExtractor` computes the same features as Kaldi's ``compute-fbank-feats`` (and
kaldi-native-fbank) with ``snip_edges=True``, for a padded batch of waveforms at once. Per frame, as Kaldi:

1. take ``window_length`` samples every ``frame_shift`` samples (only frames that fit completely);
2. add dither (optional), subtract the frame mean, pre-emphasise, multiply by the window;
3. zero-pad to ``fft_size``, take the power spectrum, apply triangular mel filters, take the log.

Waveforms are used as given, **not** rescaled: float audio in ``[-1, 1]`` (the soundfile / torchaudio
convention) gives features of float audio in ``[-1, 1]``. Kaldi's command-line tools read 16-bit integer
samples, so their features are those of ``32768 * waveform``; with a power spectrum this only shifts every
log-mel value by ``2 * ln(32768) ~= 20.79`` (except where the log floor is hit), and
``normalize="per_feature"`` removes the difference entirely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from transdec.model.row_groups import in_row_groups

#: Added to the standard deviation in ``per_feature`` normalisation, as NeMo does, so that silent bins do
#: not blow up.
NORMALIZE_STD_EPS = 1e-5

_WINDOWS = ("povey", "hanning", "hamming", "rectangular")


@dataclass(frozen=True)
class FbankConfig:
    """Filterbank settings; the defaults are Kaldi's, with 80 mel bins and no dither.

    ``high_freq <= 0`` means ``nyquist + high_freq``, as in Kaldi. ``fft_size`` must be at least the window
    length; Kaldi rounds the window length up to a power of two (400 samples -> 512). ``log_floor`` is the
    floor applied before the log (Kaldi's ``log(max(energy, FLT_EPSILON))``). ``normalize="per_feature"``
    normalises each mel bin of each utterance to zero mean and unit (unbiased) standard deviation over its
    valid frames, as NeMo does.
    """

    sample_rate: int = 16000
    num_mel_bins: int = 80
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    preemphasis: float = 0.97
    remove_dc_offset: bool = True
    window: str = "povey"
    low_freq: float = 20.0
    high_freq: float = 0.0
    fft_size: int = 512
    snip_edges: bool = True
    dither: float = 0.0
    log_floor: float = torch.finfo(torch.float32).eps
    normalize: Literal["none", "per_feature"] = "none"

    def __post_init__(self) -> None:
        if self.sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {self.sample_rate}")
        if self.window_length < 2 or self.frame_shift < 1:
            raise ValueError(
                f"frame_length_ms={self.frame_length_ms} and frame_shift_ms={self.frame_shift_ms} give a window "
                f"of {self.window_length} samples and a shift of {self.frame_shift}; need at least 2 and 1"
            )
        if self.fft_size < self.window_length:
            raise ValueError(
                f"fft_size={self.fft_size} is smaller than the window ({self.window_length} samples); "
                f"use {1 << (self.window_length - 1).bit_length()} to match Kaldi"
            )
        if self.num_mel_bins < 3:
            raise ValueError(f"num_mel_bins must be at least 3 (as in Kaldi), got {self.num_mel_bins}")
        if not 0.0 <= self.low_freq < self.upper_freq <= self.sample_rate / 2:
            raise ValueError(
                f"need 0 <= low_freq < high_freq <= nyquist ({self.sample_rate / 2}), got low_freq={self.low_freq} "
                f"and high_freq={self.high_freq} (= {self.upper_freq} Hz)"
            )
        if self.window not in _WINDOWS:
            raise ValueError(f"unknown window {self.window!r}; choose from {list(_WINDOWS)}")
        if not self.snip_edges:
            raise ValueError("only snip_edges=True is supported")
        if not 0.0 <= self.preemphasis <= 1.0:
            raise ValueError(f"preemphasis must be in [0, 1], got {self.preemphasis}")
        if self.dither < 0.0:
            raise ValueError(f"dither must be >= 0, got {self.dither}")
        if self.log_floor <= 0.0:
            raise ValueError(f"log_floor must be positive, got {self.log_floor}")
        if self.normalize not in ("none", "per_feature"):
            raise ValueError(f"normalize must be 'none' or 'per_feature', got {self.normalize!r}")

    @property
    def window_length(self) -> int:
        """Samples per frame (Kaldi truncates, it does not round)."""
        return int(self.sample_rate * 0.001 * self.frame_length_ms)

    @property
    def frame_shift(self) -> int:
        """Samples between frame starts."""
        return int(self.sample_rate * 0.001 * self.frame_shift_ms)

    @property
    def upper_freq(self) -> float:
        """``high_freq`` in Hz, with Kaldi's "<= 0 is an offset from nyquist" resolved."""
        return self.high_freq if self.high_freq > 0 else self.sample_rate / 2 + self.high_freq


def mel_scale(freq: Tensor) -> Tensor:
    """Kaldi's (HTK's) mel scale, ``1127 ln(1 + f / 700)``."""
    return 1127.0 * torch.log1p(freq / 700.0)


def window_function(config: FbankConfig, dtype: torch.dtype = torch.float64) -> Tensor:
    """Kaldi's analysis window, ``[window_length]``. Kaldi's windows are symmetric: ``2 pi n / (N - 1)``."""
    n = torch.arange(config.window_length, dtype=torch.float64)
    cosine = torch.cos(2 * math.pi * n / (config.window_length - 1))
    if config.window == "povey":
        window = (0.5 - 0.5 * cosine) ** 0.85
    elif config.window == "hanning":
        window = 0.5 - 0.5 * cosine
    elif config.window == "hamming":
        window = 0.54 - 0.46 * cosine
    else:
        window = torch.ones_like(n)
    return window.to(dtype)


def mel_filterbank(config: FbankConfig, dtype: torch.dtype = torch.float64) -> Tensor:
    """Kaldi's triangular mel filters, ``[num_mel_bins, fft_size // 2 + 1]``, for a power spectrum.

    The triangles are evenly spaced and linear in the mel domain between ``low_freq`` and ``high_freq``.
    Kaldi gives the Nyquist bin no weight (it only looks at ``fft_size // 2`` bins); its column is kept, at
    zero, so that the filters apply to a whole ``rfft`` output.
    """
    num_fft_bins = config.fft_size // 2
    bin_mels = mel_scale(torch.arange(num_fft_bins + 1, dtype=torch.float64) * config.sample_rate / config.fft_size)
    low, high = mel_scale(torch.tensor([config.low_freq, config.upper_freq], dtype=torch.float64))
    edges = low + (high - low) / (config.num_mel_bins + 1) * torch.arange(config.num_mel_bins + 2, dtype=torch.float64)
    left, center, right = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bin_mels - left) / (center - left)
    falling = (right - bin_mels) / (right - center)
    filters = torch.minimum(rising, falling).clamp_min(0.0)
    filters[:, num_fft_bins] = 0.0
    return filters.to(dtype)


class FbankExtractor(nn.Module):
    """Log-mel filterbank features of a padded batch: ``[B, N] waveforms -> [B, T, num_mel_bins]``.

    Waveforms are used unscaled (see the module docstring). Every utterance gets the features it would
    get alone, up to rounding: samples past its length are never read into its frames, whatever they hold,
    and output frames past its frame count are 0. Computation is in float64 for float64 input and in
    float32 otherwise; the output has that dtype.
    """

    window: Tensor
    filterbank: Tensor

    def __init__(self, config: FbankConfig | None = None) -> None:
        super().__init__()
        self.config = config or FbankConfig()
        # float64 so that float64 input loses nothing; forward casts them to the compute dtype. Not
        # persistent: they follow from the config, so checkpoints need not carry them.
        self.register_buffer("window", window_function(self.config), persistent=False)  # [W]
        filterbank = mel_filterbank(self.config).T.contiguous()  # [fft_size // 2 + 1, num_mel_bins]
        self.register_buffer("filterbank", filterbank, persistent=False)

    def num_frames(self, num_samples: Tensor | int) -> Tensor | int:
        """Kaldi's frame count with ``snip_edges=True``: ``1 + (n - window) // shift``, or 0 if ``n < window``."""
        window, shift = self.config.window_length, self.config.frame_shift
        if isinstance(num_samples, Tensor):
            return torch.where(num_samples >= window, 1 + (num_samples - window).div(shift, rounding_mode="floor"), 0)
        return 1 + (num_samples - window) // shift if num_samples >= window else 0

    def forward(self, waveforms: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Features ``[B, T, num_mel_bins]`` and frame counts ``[B]`` (int64).

        ``waveforms`` is ``[B, N]`` float audio, ``lengths`` ``[B]`` the valid samples of each row (default:
        all ``N``). ``T = num_frames(N)``, which is the largest frame count when the longest utterance fills
        its row.
        """
        lengths = self._check_inputs(waveforms, lengths)
        if waveforms.device.type == "cpu" and not (torch.is_grad_enabled() and waveforms.requires_grad):
            # Row groups whose spectra stay under ROW_GROUP_BYTES (see transdec.model.row_groups). Same output.
            spectrum_bytes = self.num_frames(waveforms.shape[1]) * (self.config.fft_size + 2) * 8
            return in_row_groups(self._features, waveforms, lengths, spectrum_bytes, ROW_GROUP_BYTES)
        return self._features(waveforms, lengths)

    def _features(self, waveforms: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        dtype = torch.float64 if waveforms.dtype == torch.float64 else torch.float32
        waveforms = waveforms.to(dtype)
        cfg = self.config
        batch, num_samples = waveforms.shape
        frame_counts = self.num_frames(lengths)
        max_frames = self.num_frames(num_samples)
        if max_frames == 0:  # unfold cannot make zero frames
            return waveforms.new_zeros(batch, 0, cfg.num_mel_bins), frame_counts

        frames = waveforms.unfold(1, cfg.window_length, cfg.frame_shift)  # [B, T, W], a view
        if cfg.dither > 0:
            # Kaldi dithers each frame independently, so overlapping frames see different noise.
            frames = frames + cfg.dither * torch.randn_like(frames)
        if cfg.remove_dc_offset:
            frames = frames - frames.mean(dim=-1, keepdim=True)
        if cfg.preemphasis > 0:
            # Kaldi treats the sample before each frame's first as the first sample itself.
            previous = torch.cat([frames[..., :1], frames[..., :-1]], dim=-1)
            frames = frames - cfg.preemphasis * previous
        frames = frames * self.window.to(dtype)

        spectrum = torch.fft.rfft(frames, n=cfg.fft_size)  # zero-pads each frame to fft_size
        power = spectrum.real.square() + spectrum.imag.square()
        features = torch.matmul(power, self.filterbank.to(dtype)).clamp_min(cfg.log_floor).log()

        valid = (torch.arange(max_frames, device=waveforms.device) < frame_counts[:, None])[..., None]  # [B, T, 1]
        if cfg.normalize == "per_feature":
            features = normalize_per_feature(features, valid, frame_counts)
        # where, not multiply: frames past the end may hold NaN/inf from whatever the padding was.
        return torch.where(valid, features, 0.0), frame_counts

    def _check_inputs(self, waveforms: Tensor, lengths: Tensor | None) -> Tensor:
        if not isinstance(waveforms, Tensor) or waveforms.dim() != 2:
            shape = tuple(waveforms.shape) if isinstance(waveforms, Tensor) else type(waveforms).__name__
            raise ValueError(f"waveforms must be a 2-D tensor [batch, samples], got {shape}")
        if not waveforms.is_floating_point():
            raise ValueError(f"waveforms must be floating point (audio in [-1, 1]), got {waveforms.dtype}")
        batch, num_samples = waveforms.shape
        if lengths is None:
            return torch.full((batch,), num_samples, dtype=torch.int64, device=waveforms.device)
        if not isinstance(lengths, Tensor) or lengths.shape != (batch,):
            shape = tuple(lengths.shape) if isinstance(lengths, Tensor) else type(lengths).__name__
            raise ValueError(f"lengths must be a tensor of shape [{batch}] (one per waveform), got {shape}")
        if lengths.dtype.is_floating_point or lengths.dtype == torch.bool or lengths.is_complex():
            raise ValueError(f"lengths must be an integer tensor of sample counts, got {lengths.dtype}")
        if batch and (lengths.min() < 0 or lengths.max() > num_samples):
            raise ValueError(
                f"lengths must be in [0, {num_samples}] (the padded waveform length), "
                f"got values in [{int(lengths.min())}, {int(lengths.max())}]"
            )
        return lengths.to(device=waveforms.device, dtype=torch.int64)


#: See :meth:`FbankExtractor.forward`.
ROW_GROUP_BYTES = 4 * 2**20


def normalize_per_feature(features: Tensor, valid: Tensor, frame_counts: Tensor) -> Tensor:
    """NeMo's ``per_feature`` normalisation over valid frames: ``[B, T, F]``, mask ``[B, T, 1]``, counts ``[B]``.

    The standard deviation is unbiased; utterances with one frame get std 0 (then ``+ eps``), as in NeMo.
    """
    counts = frame_counts.to(features.dtype)[:, None, None]
    mean = torch.where(valid, features, 0.0).sum(dim=1, keepdim=True) / counts.clamp_min(1)
    centered = torch.where(valid, features - mean, 0.0)
    std = (centered.square().sum(dim=1, keepdim=True) / (counts - 1).clamp_min(1)).sqrt()
    return centered / (std + NORMALIZE_STD_EPS)
