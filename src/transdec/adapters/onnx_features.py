"""The features sherpa-onnx 2.0 computes for transducers, with kaldi-native-fbank (the library it uses), so that
transdec decodes an ONNX model from exactly the input sherpa-onnx decodes it from.

``load_onnx(dir, front_end="sherpa")`` uses :class:`SherpaFrontEnd`; ``pip install kaldi-native-fbank``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

#: What sherpa-onnx pads a batch of an icefall transducer's features with (offline-recognizer-transducer-impl.h;
#: icefall's LOG_EPS, log(1e-10), which its training batches are padded with too); its NeMo transducers pad with 0.
ICEFALL_PADDING = math.log(1e-10)


@dataclass(frozen=True)
class SherpaFrontEnd:
    """``waveforms [B, N]``, ``lengths [B]`` -> ``features [B, T, F]``, ``frame_counts [B]``, as sherpa-onnx computes
    them.

    ``layout="nemo"`` (``model_type="nemo_transducer"``): Slaney-normalised librosa mel banks from 0 Hz to
    Nyquist - 400 Hz, povey window, no DC removal, pre-emphasis 0.97, frames not snipped, ``log(x + 2^-24)``; then,
    with ``normalize="per_feature"``, each bin normalised with its population deviation + 1e-5 (in float32, as
    sherpa-onnx does). ``layout="icefall"``: Kaldi's filterbank from 20 Hz to Nyquist - 400 Hz, frames not snipped,
    no normalisation. Both take the samples as they are, in [-1, 1] (sherpa-onnx's ``normalize_samples``: it scales
    them by 32768 only for other kinds of model).

    In a batch, the frames past a recording's end are ``padding_value``: what sherpa-onnx pads a batch with,
    ``log(1e-10)`` for icefall transducers (:func:`sherpa_front_end` sets it), 0 for NeMo ones.
    """

    layout: str
    num_mel_bins: int = 80
    normalize: str = ""
    sample_rate: int = 16000
    padding_value: float = 0.0

    def __call__(self, waveforms: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if lengths is None:
            lengths = torch.full((waveforms.shape[0],), waveforms.shape[1])
        rows = [self.features(waveforms[i, :n].float().cpu().numpy()) for i, n in enumerate(lengths.tolist())]
        counts = torch.tensor([r.shape[0] for r in rows])
        batch = torch.full((len(rows), int(counts.max()) if rows else 0, self.num_mel_bins), self.padding_value)
        for i, row in enumerate(rows):
            batch[i, : row.shape[0]] = row
        return batch, counts

    def features(self, samples: np.ndarray) -> Tensor:
        """``[T, F]`` of one recording ``[N]`` (float in [-1, 1])."""
        import kaldi_native_fbank as knf  # optional: only this front end needs it

        options = knf.FbankOptions()
        options.frame_opts.samp_freq = self.sample_rate
        options.frame_opts.dither = 0.0
        options.frame_opts.snip_edges = False
        options.mel_opts.num_bins = self.num_mel_bins
        options.mel_opts.high_freq = -400.0
        if self.layout == "nemo":
            options.frame_opts.remove_dc_offset = False
            options.mel_opts.low_freq = 0.0
            options.mel_opts.is_librosa = True
            options.use_log_floor = False
            options.eps = 2.0**-24
        fbank = knf.OnlineFbank(options)
        fbank.accept_waveform(self.sample_rate, samples.tolist())
        fbank.input_finished()
        frames = fbank.num_frames_ready
        if frames == 0:
            return torch.zeros(0, self.num_mel_bins)
        feats = np.stack([fbank.get_frame(i) for i in range(frames)]).astype(np.float32)
        if self.layout == "nemo" and self.normalize == "per_feature":
            mean = feats.mean(0, dtype=np.float32)
            var = np.maximum((feats * feats).mean(0, dtype=np.float32) - mean * mean, 0.0)
            feats = (feats - mean) * (1.0 / (np.sqrt(var) + np.float32(1e-5)))
        return torch.from_numpy(feats)


def sherpa_front_end(layout: str, description: dict[str, Any] | None) -> SherpaFrontEnd:
    """The features sherpa-onnx computes for an export of ``layout`` whose front end ``description`` is the
    ``transdec_front_end`` metadata (``{"config": {"num_mel_bins": ...}, "normalize": ...}``; missing: 80 bins, no
    normalisation)."""
    try:
        import kaldi_native_fbank  # noqa: F401  (checked here: a missing one is found at load, not mid-run)
    except ImportError as error:
        raise ImportError("sherpa-onnx's features (front_end='sherpa', and the front end of icefall-format exports) "
                          "need kaldi-native-fbank, which is not installed", name="kaldi_native_fbank") from error
    description = description or {}
    bins = int(description.get("config", {}).get("num_mel_bins", 80))
    padding = ICEFALL_PADDING if layout == "icefall" else 0.0
    return SherpaFrontEnd(layout, bins, description.get("normalize", "") or "", padding_value=padding)


def sherpa_front_end_of(model: Any) -> SherpaFrontEnd:
    """The features sherpa-onnx computes for ``model``'s ONNX export (a transdec or NeMo-imported PyTorch model):
    ``transdec.load_model(..., front_end="sherpa")``."""
    from transdec.export.onnx import export_layout, front_end_metadata

    return sherpa_front_end(export_layout(model), front_end_metadata(model))
