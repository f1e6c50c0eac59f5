"""``load_model``: any model transdec runs, by bundled name, path or Hugging Face Hub name, as a
:class:`~transdec.protocol.SpeechModel`.

It tells the kinds apart and hands each to its loader: transdec's own model files and bundled names
(:mod:`transdec.model.checkpoint`), NeMo ``.nemo`` checkpoints (:mod:`transdec.adapters.nemo`) and directories of
ONNX files (:mod:`transdec.adapters.onnx`); a Hub name is fetched first (:mod:`transdec.adapters.hub`), then loaded
as the local file it became. The adapters, and the libraries they need, are imported only for their kind of model,
so that loading a transdec model (and ``import transdec``) does without them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from transdec.adapters.hub import is_hub_name
from transdec.adapters.onnx_files import VARIANTS
from transdec.model.checkpoint import BUNDLED_MODELS, bundled_model_path, load_transdec_model
from transdec.model.quantization import apply_precision, check_precision
from transdec.protocol import SpeechModel

if TYPE_CHECKING:  # for annotations only: the adapters load with their kind of model
    from transdec.adapters.nemo import NemoTransducer
    from transdec.model.transducer_model import TransducerModel

FRONT_ENDS = ("model", "sherpa")


def load_model(name_or_path: str | os.PathLike[str], device: str | torch.device = "cpu",
               dtype: torch.dtype = torch.float32, front_end: str = "model",
               att_context_size: Sequence[int] | None = None, onnx_variant: str = "fp32",
               quantize: str | None = None, compute_dtype: torch.dtype | None = None) -> SpeechModel:
    """Load a bundled model by name (``"tiny-en-rnnt"``, ...), any model file by path, or a model on the Hugging
    Face Hub by name (``"org/name"``, ``"org/name@revision"``), in eval mode.

    A path ending in ``.nemo`` is a NeMo checkpoint, loaded by :func:`transdec.adapters.nemo.load_nemo`; a directory
    of ``.onnx`` files is an ONNX Transducer, loaded by :func:`transdec.adapters.onnx.load_onnx`; anything else is
    a transdec model file (:func:`transdec.model.checkpoint.load_transdec_model`).

    A name that is neither bundled nor an existing path and reads ``org/name[@revision]`` is fetched from the Hub
    into its cache (:func:`transdec.adapters.hub.fetch_model`: the repository's ``.nemo`` checkpoint or its ONNX
    export's files), then loaded as above; the model's ``hub_source`` (a :class:`~transdec.adapters.hub.HubSource`)
    says what was fetched: repository, commit, files, size. Failures raise a
    :class:`~transdec.adapters.hub.HubError` (a ``ValueError``) naming the model.

    ``onnx_variant`` (``"fp32"`` or ``"int8"``) picks the graphs of an ONNX export holding both (``encoder.onnx``
    and ``encoder.int8.onnx``), local or on the Hub; a part with only one variant loads that one.

    ``front_end="sherpa"`` makes ``encode`` compute the features sherpa-onnx computes for the model's ONNX export
    (:class:`~transdec.adapters.onnx_features.SherpaFrontEnd`, with kaldi-native-fbank) instead of the model's own,
    so that transcripts equal sherpa-onnx's (docs/deploy.md, "Front ends"). A model hears other features than it
    was trained on then, which costs accuracy unless it was trained on sherpa-onnx's.

    ``att_context_size`` (``[left, right]``, NeMo checkpoints only) picks the look-ahead of a multi-look-ahead
    cache-aware streaming model (default its first, as NeMo); see docs/nemo.md.

    ``quantize="int8"`` (CPU, PyTorch models) makes the encoder's and joint's matrix products int8 (dynamic
    quantization: int8 weights, each input quantized as it comes); ``compute_dtype=torch.bfloat16`` runs the encoder
    in bfloat16 (fast on CPUs with AVX-512 BF16 or AMX). Neither is exact: their measured accuracy and speed are in
    docs/cpu.md and docs/benchmarks.md (:mod:`transdec.model.quantization`). ONNX exports take their int8 graphs
    with ``onnx_variant="int8"`` instead.
    """
    if front_end not in FRONT_ENDS:
        raise ValueError(f"front_end must be 'model' or 'sherpa', got {front_end!r}")
    if onnx_variant not in VARIANTS:
        raise ValueError(f"onnx_variant must be one of {', '.join(VARIANTS)}, got {onnx_variant!r}")
    check_precision(quantize, compute_dtype)
    name = str(name_or_path)
    source = None
    if name in BUNDLED_MODELS:
        path = bundled_model_path(name)
    elif is_hub_name(name):
        from transdec.adapters.hub import fetch_model

        source = fetch_model(name, onnx_variant)
        path = source.path
    else:
        path = Path(name)
    if (quantize is not None or compute_dtype not in (None, torch.float32)) and path.is_dir() and any(
            path.glob("*.onnx")):
        raise ValueError(f"{path}: an ONNX export is not quantized when loaded; load its int8 graphs with "
                         "onnx_variant='int8' (--onnx-variant int8), written by transdec export onnx --quantize int8")
    model = _load_path(path, device, dtype, front_end, att_context_size, onnx_variant)
    if quantize is not None or compute_dtype is not None:
        apply_precision(model, quantize, compute_dtype)  # type: ignore[arg-type]
    if source is not None:
        model.hub_source = source  # type: ignore[attr-defined]
    return model


def _load_path(path: Path, device: str | torch.device, dtype: torch.dtype, front_end: str,
               att_context_size: Sequence[int] | None, onnx_variant: str) -> SpeechModel:
    """The model at ``path``: an ONNX directory, a NeMo checkpoint or a transdec model file."""
    if att_context_size is not None and not path.name.endswith(".nemo"):
        raise ValueError(f"{path}: att_context_size chooses the look-ahead of a NeMo (.nemo) checkpoint")
    if path.is_dir() and any(path.glob("*.onnx")):
        from transdec.adapters.onnx import load_onnx

        if torch.device(device).type != "cpu" or dtype != torch.float32:
            raise ValueError(f"{path}: ONNX models run in float32 on the CPU (ONNX Runtime)")
        return load_onnx(path, front_end=front_end, variant=onnx_variant)
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
