"""NeMo's log-mel front end (``AudioToMelSpectrogramPreprocessor`` at inference), reimplemented.

The steps, in NeMo's order: pre-emphasis (the first sample kept, samples past each length zeroed afterwards), a
centred STFT with zero padding (or NeMo's "exact pad": ``(n_fft - hop) / 2`` zeros each side, not centred), the
magnitude raised to ``mag_power``, a mel filterbank (librosa's Slaney mel scale, read from the checkpoint when it
is there), ``log(x + guard)`` (or ``log(max(x, guard))``), then each mel bin normalised over the valid frames
with the unbiased standard deviation plus 1e-5. Frames past a length are zero. There is no dither: NeMo adds
it in training only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transdec.sample_windows import SampleWindow, window_samples

#: Added to the standard deviation in per-feature normalisation (NeMo's constant).
_STD_GUARD = 1e-5
_WINDOWS = {"hann": torch.hann_window, "hamming": torch.hamming_window, "blackman": torch.blackman_window,
            "bartlett": torch.bartlett_window}


@dataclass
class NemoMelConfig:
    """The settings of a NeMo mel front end, with NeMo's defaults for keys a config leaves out.

    Attributes:
        sample_rate: samples per second.
        win_length, hop_length: window and hop in samples.
        n_fft: FFT size (the next power of two above ``win_length`` when the config has none).
        window: ``"hann"``, ``"hamming"``, ``"blackman"``, ``"bartlett"`` or ``"none"``.
        num_mel_bins: mel bins ``F``.
        preemph: pre-emphasis coefficient, or ``None``.
        lowfreq, highfreq: the filterbank's range in Hz (``highfreq=None``: Nyquist).
        log: take the log.
        log_zero_guard_type, log_zero_guard_value: ``"add"`` or ``"clamp"``, and the value (or ``"tiny"``/``"eps"``).
        normalize: ``"per_feature"``, ``"all_features"`` or ``"none"`` (NeMo's other values, e.g. ``"NA"``).
        exact_pad: NeMo's non-centred STFT padding.
        mag_power: power of the magnitude spectrum.
        mel_norm: librosa's filterbank normalisation (``"slaney"`` or ``None``).
        pad_value: value of frames past a length.
    """

    sample_rate: int = 16000
    win_length: int = 320
    hop_length: int = 160
    n_fft: int = 512
    window: str = "hann"
    num_mel_bins: int = 64
    preemph: float | None = 0.97
    lowfreq: float = 0.0
    highfreq: float | None = None
    log: bool = True
    log_zero_guard_type: str = "add"
    log_zero_guard_value: float | str = 2**-24
    normalize: str = "per_feature"
    exact_pad: bool = False
    mag_power: float = 2.0
    mel_norm: str | None = "slaney"
    pad_value: float = 0.0

    @classmethod
    def from_nemo(cls, config: dict[str, Any]) -> NemoMelConfig:
        """From the ``preprocessor`` section of a NeMo model config (``AudioToMelSpectrogramPreprocessor``)."""
        def get(key: str, default: Any) -> Any:
            value = config.get(key, default)
            return default if value is None and default is not None else value

        from transdec.adapters.nemo_encoder import UnsupportedConfig

        problems = []
        target = str(config.get("_target_", ""))
        if not target.endswith("AudioToMelSpectrogramPreprocessor"):
            problems.append(f"preprocessor._target_={target!r} is not supported (AudioToMelSpectrogramPreprocessor)")
        sample_rate = int(get("sample_rate", 16000))
        win = config.get("n_window_size") or int(get("window_size", 0.02) * sample_rate)
        hop = config.get("n_window_stride") or int(get("window_stride", 0.01) * sample_rate)
        if int(get("frame_splicing", 1)) != 1:
            problems.append(f"preprocessor.frame_splicing={config.get('frame_splicing')} is not supported (only 1)")
        normalize = config.get("normalize", "per_feature")
        if isinstance(normalize, dict):
            problems.append(f"preprocessor.normalize={normalize!r} (fixed statistics) is not supported")
        if normalize not in ("per_feature", "all_features"):
            normalize = "none"  # NeMo leaves the features as they are for any other value ("NA", null, ...)
        window = get("window", "hann")
        if window not in _WINDOWS and window != "none":
            problems.append(f"preprocessor.window={window!r} is not supported ({sorted(_WINDOWS)} or none)")
        guard_type = get("log_zero_guard_type", "add")
        if guard_type not in ("add", "clamp"):
            problems.append(f"preprocessor.log_zero_guard_type={guard_type!r} is not supported (add or clamp)")
        if config.get("mel_norm", "slaney") not in ("slaney", None):
            problems.append(f"preprocessor.mel_norm={config.get('mel_norm')!r} is not supported (slaney or null)")
        if problems:
            raise UnsupportedConfig(problems)
        return cls(sample_rate=sample_rate, win_length=int(win), hop_length=int(hop),
                   n_fft=int(config.get("n_fft") or 2 ** math.ceil(math.log2(win))), window=window,
                   num_mel_bins=int(get("features", 64)),
                   preemph=config.get("preemph", 0.97), lowfreq=float(get("lowfreq", 0.0)),
                   highfreq=config.get("highfreq"), log=bool(get("log", True)), log_zero_guard_type=guard_type,
                   log_zero_guard_value=get("log_zero_guard_value", 2**-24), normalize=normalize,
                   exact_pad=bool(get("exact_pad", False)), mag_power=float(get("mag_power", 2.0)),
                   mel_norm=config.get("mel_norm", "slaney"), pad_value=float(get("pad_value", 0.0)))


def slaney_mel_filterbank(sample_rate: int, n_fft: int, num_mel_bins: int, fmin: float = 0.0,
                          fmax: float | None = None, norm: str | None = "slaney") -> Tensor:
    """librosa's default mel filterbank (Slaney's mel scale, area normalisation): ``[num_mel_bins, n_fft // 2 + 1]``.

    Computed in float64 and returned as float32, as librosa returns it to NeMo.
    """
    fmax = sample_rate / 2 if fmax is None else fmax

    def hz_to_mel(hz: Tensor) -> Tensor:
        # Linear below 1 kHz, logarithmic above (Slaney's Auditory Toolbox).
        linear = hz / (200.0 / 3)
        log_part = 15.0 + torch.log(torch.clamp(hz, min=1e-10) / 1000.0) / (math.log(6.4) / 27.0)
        return torch.where(hz >= 1000.0, log_part, linear)

    def mel_to_hz(mel: Tensor) -> Tensor:
        linear = mel * (200.0 / 3)
        log_part = 1000.0 * torch.exp((math.log(6.4) / 27.0) * (mel - 15.0))
        return torch.where(mel >= 15.0, log_part, linear)

    fft_freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    mels = torch.linspace(hz_to_mel(torch.tensor(float(fmin), dtype=torch.float64)).item(),
                          hz_to_mel(torch.tensor(float(fmax), dtype=torch.float64)).item(),
                          num_mel_bins + 2, dtype=torch.float64)
    edges = mel_to_hz(mels)
    widths = edges[1:] - edges[:-1]
    ramps = edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = torch.clamp(torch.minimum(lower, upper), min=0.0)
    if norm == "slaney":
        weights = weights * (2.0 / (edges[2:] - edges[:-2]))[:, None]
    elif norm is not None:
        raise ValueError(f"preprocessor.mel_norm={norm!r} is not supported (slaney or null)")
    return weights.float()


class NemoMelFrontEnd(nn.Module):
    """``waveforms [B, N]``, ``lengths [B]`` -> ``features [B, T, F]``, ``frame_counts [B]``, as NeMo computes them.

    The filterbank ``fb [1, F, n_fft // 2 + 1]`` and ``window [win_length]`` are buffers named as in NeMo's
    state dict (``preprocessor.featurizer.fb``, ``.window``), so a checkpoint's own ones are used.
    """

    def __init__(self, config: NemoMelConfig) -> None:
        super().__init__()
        self.config = config
        window_fn = _WINDOWS.get(config.window)
        window = window_fn(config.win_length, periodic=False) if window_fn else None
        self.register_buffer("window", window)
        fb = slaney_mel_filterbank(config.sample_rate, config.n_fft, config.num_mel_bins, config.lowfreq,
                                   config.highfreq, config.mel_norm)
        self.register_buffer("fb", fb.unsqueeze(0))

    def num_frames(self, lengths: Tensor) -> Tensor:
        """Valid feature frames of ``lengths`` samples (NeMo's ``get_seq_len``; zero samples give zero frames)."""
        c = self.config
        pad = (c.n_fft - c.hop_length) // 2 * 2 if c.exact_pad else c.n_fft // 2 * 2
        frames = torch.div(lengths + pad - c.n_fft, c.hop_length, rounding_mode="floor").long()
        return torch.where(lengths == 0, torch.zeros_like(frames), frames)

    def forward(self, waveforms: Tensor, lengths: Tensor | None = None,
                statistics: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """Features ``[B, T, F]`` and frame counts ``[B]``. ``statistics`` (mean and deviation ``[F]``, or ``[1]``
        for ``normalize="all_features"``) normalise instead of each recording's own, e.g. a whole recording's when it
        is encoded in windows (:mod:`transdec.long_audio`); with ``statistics=()`` the features are left
        unnormalised."""
        c = self.config
        if lengths is None:
            lengths = torch.full((waveforms.shape[0],), waveforms.shape[1], device=waveforms.device)
        lengths = lengths.to(waveforms.device)
        x = waveforms.float()  # NeMo runs the front end in float32 whatever the model's dtype
        frame_counts = self.num_frames(lengths)
        if c.exact_pad:
            pad = (c.n_fft - c.hop_length) // 2
            x = F.pad(x, (pad, pad))
        if c.preemph is not None:
            x = torch.cat([x[:, :1], x[:, 1:] - c.preemph * x[:, :-1]], dim=1)
            valid = torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]
            x = x.masked_fill(~valid, 0.0)
        mel = self._log_mel(x, center=not c.exact_pad)
        valid = torch.arange(mel.shape[-1], device=mel.device)[None, :] < frame_counts[:, None]  # [B, T]
        if statistics is not None:
            if statistics:
                mean, deviation = statistics
                mel = (mel - mean.to(mel.dtype)[None, :, None]) / deviation.to(mel.dtype)[None, :, None]
        elif c.normalize == "per_feature":
            mel = _normalize_per_feature(mel, valid, frame_counts)
        elif c.normalize == "all_features":
            mel = _normalize_all_features(mel, frame_counts)
        mel = mel.masked_fill(~valid[:, None, :], c.pad_value)
        return mel.transpose(1, 2), frame_counts

    def log_mel_frames(self, signal: Tensor) -> Tensor:
        """Unnormalised features ``[B, T, F]`` of a pre-emphasised float32 ``signal [B, n_fft + (T - 1) x hop]`` that
        holds exactly ``T`` STFT frames (no centring padding added): frame by frame what :meth:`forward` computes
        from the same samples, for a front end that computes features as audio arrives
        (:mod:`~transdec.adapters.nemo_streaming`)."""
        return self._log_mel(signal, center=False).transpose(1, 2)

    def _log_mel(self, x: Tensor, center: bool) -> Tensor:
        """``[B, F, T]``: the STFT of ``x [B, N]``, magnitude to ``mag_power``, mel filterbank, log."""
        c = self.config
        window = self.window.float() if self.window is not None else None
        spectrum = torch.stft(x, n_fft=c.n_fft, hop_length=c.hop_length, win_length=c.win_length,
                              center=center, window=window, return_complex=True, pad_mode="constant")
        magnitude = torch.view_as_real(spectrum).pow(2).sum(-1).sqrt()  # [B, n_fft / 2 + 1, T]
        if c.mag_power != 1.0:
            magnitude = magnitude.pow(c.mag_power)
        mel = torch.matmul(self.fb.float(), magnitude)  # [B, F, T]
        if c.log:
            guard = self._log_guard(mel.dtype)
            mel = torch.log(mel + guard) if c.log_zero_guard_type == "add" else torch.log(mel.clamp(min=guard))
        return mel

    def _log_guard(self, dtype: torch.dtype) -> float:
        value = self.config.log_zero_guard_value
        if value == "tiny":
            return torch.finfo(dtype).tiny
        if value == "eps":
            return torch.finfo(dtype).eps
        return float(value)


def _normalize_per_feature(mel: Tensor, valid: Tensor, counts: Tensor) -> Tensor:
    """Each bin of ``mel [B, F, T]`` to zero mean and unit (unbiased) deviation over its valid frames."""
    mask = valid[:, None, :]
    counts = counts[:, None].to(mel.dtype)
    mean = torch.where(mask, mel, 0.0).sum(dim=2) / counts
    centred = torch.where(mask, mel - mean[:, :, None], 0.0)
    std = torch.sqrt(centred.pow(2).sum(dim=2) / (counts - 1.0))
    std = std.masked_fill(std.isnan(), 0.0) + _STD_GUARD  # one frame: NeMo takes the deviation as 0
    return (mel - mean[:, :, None]) / std[:, :, None]


def _normalize_all_features(mel: Tensor, counts: Tensor) -> Tensor:
    """Each utterance of ``mel [B, F, T]`` to zero mean and unit deviation over all its valid values."""
    rows = []
    for row, count in zip(mel, counts.tolist()):
        valid = row[:, :count]
        rows.append((row - valid.mean()) / (valid.std() + _STD_GUARD))
    return torch.stack(rows)


def feature_statistics(sums: Tensor, squares: Tensor, count: int, per_feature: bool) -> tuple[Tensor, Tensor]:
    """Mean and deviation for ``forward(statistics=...)`` from float64 sums ``[F]`` and sums of squares ``[F]`` of
    ``count`` frames, as ``normalize="per_feature"`` (per bin) or ``"all_features"`` (over all values) computes
    them for a whole recording."""
    if not per_feature:
        sums, squares, count = sums.sum().view(1), squares.sum().view(1), count * sums.numel()
    mean = sums / count
    variance = (squares - sums * mean) / (count - 1) if count > 1 else torch.zeros_like(mean)
    return mean, variance.clamp(min=0).sqrt() + _STD_GUARD


def recording_statistics(front_end: NemoMelFrontEnd, waveform: Tensor, windows: Sequence[SampleWindow],
                         step: int) -> tuple[Tensor, Tensor] | None:
    """The whole recording's normalisation statistics (for ``forward(statistics=...)``) where ``front_end``
    normalises per recording, else ``None``: for a recording ``waveform [N]`` encoded in ``windows`` of samples
    (encoder frames ``step`` samples apart).

    A first pass over the windows sums the unnormalised features of the frames each one keeps, which are the
    whole recording's features (their FFT windows lie inside the window).
    """
    normalize = front_end.config.normalize
    if normalize not in ("per_feature", "all_features"):
        return None
    features_per_frame = step // front_end.config.hop_length
    sums = squares = None
    count = 0
    for window in windows:
        samples = window_samples(waveform, window, step)
        features, counts = front_end(samples, torch.tensor([samples.shape[1]], device=samples.device), statistics=())
        stop = int(counts[0]) if window.keep is None else (window.skip + window.keep) * features_per_frame
        kept = features[0, window.skip * features_per_frame : stop].double()  # [frames, F]
        sums = kept.sum(0) if sums is None else sums + kept.sum(0)
        squares = kept.square().sum(0) if squares is None else squares + kept.square().sum(0)
        count += kept.shape[0]
    return feature_statistics(sums, squares, count, normalize == "per_feature")
