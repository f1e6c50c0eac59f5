"""``load_model``: any model transdec runs, by bundled name or path, as a :class:`~transdec.protocol.SpeechModel`.

It tells the kinds apart and hands each to its loader: transdec's own model files and bundled names
(:mod:`transdec.model.checkpoint`), NeMo ``.nemo`` checkpoints (:mod:`transdec.adapters.nemo`) and directories of
ONNX files (:mod:`transdec.adapters.onnx`). The adapters, and the libraries they need, are imported only for their
kind of model, so that loading a transdec model (and ``import transdec``) does without them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from transdec.model.checkpoint import BUNDLED_MODELS, bundled_model_path, load_transdec_model
from transdec.protocol import SpeechModel

if TYPE_CHECKING:  # for annotations only: the adapters load with their kind of model
    from transdec.adapters.nemo import NemoTransducer
    from transdec.model.transducer_model import TransducerModel

FRONT_ENDS = ("model", "sherpa")


def load_model(name_or_path: str | os.PathLike[str], device: str | torch.device = "cpu",
               dtype: torch.dtype = torch.float32, front_end: str = "model",
               att_context_size: Sequence[int] | None = None) -> SpeechModel:
    """Load a bundled model by name (``"tiny-en-rnnt"``, ...) or any model file by path, in eval mode.

    A path ending in ``.nemo`` is a NeMo checkpoint, loaded by :func:`transdec.adapters.nemo.load_nemo`; a directory
    of ``.onnx`` files is an ONNX Transducer, loaded by :func:`transdec.adapters.onnx.load_onnx`; anything else is
    a transdec model file (:func:`transdec.model.checkpoint.load_transdec_model`).

    ``front_end="sherpa"`` makes ``encode`` compute the features sherpa-onnx computes for the model's ONNX export
    (:class:`~transdec.adapters.onnx_features.SherpaFrontEnd`, with kaldi-native-fbank) instead of the model's own,
    so that transcripts equal sherpa-onnx's (docs/deploy.md, "Front ends"). A model hears other features than it
    was trained on then, which costs accuracy unless it was trained on sherpa-onnx's.

    ``att_context_size`` (``[left, right]``, NeMo checkpoints only) picks the look-ahead of a multi-look-ahead
    cache-aware streaming model (default its first, as NeMo); see docs/nemo.md.
    """
    if front_end not in FRONT_ENDS:
        raise ValueError(f"front_end must be 'model' or 'sherpa', got {front_end!r}")
    name = str(name_or_path)
    path = bundled_model_path(name) if name in BUNDLED_MODELS else Path(name)
    if att_context_size is not None and not path.name.endswith(".nemo"):
        raise ValueError(f"{path}: att_context_size chooses the look-ahead of a NeMo (.nemo) checkpoint")
    if path.is_dir() and any(path.glob("*.onnx")):
        from transdec.adapters.onnx import load_onnx

        if torch.device(device).type != "cpu" or dtype != torch.float32:
            raise ValueError(f"{path}: ONNX models run in float32 on the CPU (ONNX Runtime)")
        return load_onnx(path, front_end=front_end)
    model = _load_pytorch_model(path, device, dtype, att_context_size)
    if front_end == "sherpa":
        from transdec.adapters.onnx_features import sherpa_front_end_of

        model.external_front_end = sherpa_front_end_of(model)
    return model


def _load_pytorch_model(path: Path, device: str | torch.device, dtype: torch.dtype,
                        att_context_size: Sequence[int] | None = None) -> TransducerModel | NemoTransducer:
    """A NeMo checkpoint or a transdec model file: the PyTorch models, which take an external front end."""
    if path.name.endswith(".nemo"):
        from transdec.adapters.nemo import load_nemo

        return load_nemo(path, device=device, dtype=dtype, att_context_size=att_context_size)
    if path.is_dir():
        raise ValueError(f"{path}: a directory without .onnx files; expected a transdec model file, a .nemo "
                         f"checkpoint, an ONNX export directory (encoder.onnx, decoder.onnx, joiner.onnx, "
                         f"tokens.txt) or a bundled model name ({', '.join(BUNDLED_MODELS)})")
    return load_transdec_model(path, device, dtype)
