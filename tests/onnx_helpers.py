"""Shared pieces of the ONNX tests: exports made once per session, and sherpa-onnx's feature extraction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
import torch

import transdec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.flac"))
NEMO_FIXTURES = ROOT / "tests" / "fixtures" / "nemo"
#: Model name -> what load_model takes.
MODELS = {
    "tiny-en-rnnt": "tiny-en-rnnt",
    "tiny-en-tdt": "tiny-en-tdt",
    "tiny-en-multiblank": "tiny-en-multiblank",
    "nemo-fc-rnnt": str(NEMO_FIXTURES / "fc_rnnt.nemo"),
    "nemo-fc-stateless": str(NEMO_FIXTURES / "fc_stateless.nemo"),
}
_EXPORTS: dict[str, Path] = {}
_MODELS: dict[str, object] = {}


def model(name: str):
    if name not in _MODELS:
        _MODELS[name] = transdec.load_model(MODELS[name])
    return _MODELS[name]


def exported(name: str, root: Path) -> Path:
    """The export of model ``name`` (made once per test session under ``root``)."""
    if name not in _EXPORTS:
        from transdec.export.onnx import export_onnx

        export_onnx(model(name), root / name)
        _EXPORTS[name] = root / name
    return _EXPORTS[name]


def example_audio(sample_rate: int = 16000) -> list[np.ndarray]:
    """The bundled example recordings as float32 mono at ``sample_rate``."""
    import soxr

    waves = []
    for path in EXAMPLES:
        samples, rate = sf.read(path, dtype="float32")
        if rate != sample_rate:
            samples = soxr.resample(samples, rate, sample_rate).astype(np.float32)
        waves.append(samples)
    return waves


def sherpa_nemo_features(samples: np.ndarray, num_bins: int = 80) -> torch.Tensor:
    """``[T, F]``: the features sherpa-onnx computes for ``model_type="nemo_transducer"`` with
    ``normalize_type=per_feature`` (see :class:`transdec.adapters.onnx_features.SherpaFrontEnd`)."""
    from transdec.adapters.onnx_features import SherpaFrontEnd

    return SherpaFrontEnd("nemo", num_bins, "per_feature").features(samples)


def sherpa_icefall_features(samples: np.ndarray, num_bins: int = 80) -> torch.Tensor:
    """``[T, F]``: sherpa-onnx's features for icefall-type transducers (Kaldi fbank, no normalisation)."""
    from transdec.adapters.onnx_features import SherpaFrontEnd

    return SherpaFrontEnd("icefall", num_bins).features(samples)
