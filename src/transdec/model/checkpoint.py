"""Self-describing model files, and the registry of models bundled with transdec.

A checkpoint is one ``torch.save`` file holding plain data only, so it loads with ``weights_only=True``
(no code from the file is ever run)::

    {"format": "transdec-model", "version": 1,
     "config": ModelConfig.to_dict(), "tokenizer": sentencepiece model bytes,
     "state_dict": weights, "metadata": free-form (training command, data, steps, ...)}

Bundled models store their weights in float16 to stay small; they are loaded back as float32.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import ModelConfig, TransducerModel

FORMAT = "transdec-model"
VERSION = 1
BUNDLED_MODELS = ("tiny-en-rnnt", "tiny-en-tdt", "tiny-en-multiblank")
_BUNDLED_PACKAGE = "transdec.pretrained"


def save_model(model: TransducerModel, path: str | os.PathLike[str], *, half: bool = False,
               metadata: dict[str, Any] | None = None) -> None:
    """Write ``model`` to ``path`` (atomically: a stopped save never leaves a truncated file)."""
    state = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    if half:
        state = {n: t.half() if t.is_floating_point() else t for n, t in state.items()}
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "config": model.config.to_dict(),
        "tokenizer": model.tokenizer.to_bytes(),
        "state_dict": state,
        "metadata": dict(metadata or {}),
    }
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def read_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The raw checkpoint dictionary, checked for format and version."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, not a model file")
    if not path.is_file():
        raise FileNotFoundError(f"model file {path} does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch.load raises many kinds (pickle, zip, struct errors) for a file of another kind
        raise ValueError(f"{path}: not a transdec model file (a PyTorch file saved by transdec), a .nemo checkpoint "
                         f"or an ONNX export directory; reading it as one failed: "
                         f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from error
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path} is not a transdec model file (no '{FORMAT}' format tag)")
    if payload.get("version") != VERSION:
        raise ValueError(f"{path} has model file version {payload.get('version')}; this transdec reads {VERSION}")
    return payload


def load_model(name_or_path: str | os.PathLike[str], device: str | torch.device = "cpu",
               dtype: torch.dtype = torch.float32, front_end: str = "model") -> TransducerModel:
    """Load a bundled model by name (``"tiny-en-rnnt"``, ...) or any model file by path, in eval mode.

    A path ending in ``.nemo`` is a NeMo checkpoint, loaded by :func:`transdec.adapters.nemo.load_nemo`; a directory
    of ``.onnx`` files is an ONNX Transducer, loaded by :func:`transdec.adapters.onnx.load_onnx`.

    ``front_end="sherpa"`` makes ``encode`` compute the features sherpa-onnx computes for the model's ONNX export
    (:class:`~transdec.adapters.onnx_features.SherpaFrontEnd`, with kaldi-native-fbank) instead of the model's own,
    so that transcripts equal sherpa-onnx's (docs/deploy.md, "Front ends"). A model hears other features than it
    was trained on then, which costs accuracy unless it was trained on sherpa-onnx's.
    """
    if front_end not in ("model", "sherpa"):
        raise ValueError(f"front_end must be 'model' or 'sherpa', got {front_end!r}")
    name = str(name_or_path)
    path = bundled_model_path(name) if name in BUNDLED_MODELS else Path(name)
    if path.is_dir() and any(path.glob("*.onnx")):  # an ONNX export: ONNX Runtime loads only when needed
        from transdec.adapters.onnx import load_onnx

        if torch.device(device).type != "cpu" or dtype != torch.float32:
            raise ValueError(f"{path}: ONNX models run in float32 on the CPU (ONNX Runtime)")
        return load_onnx(path, front_end=front_end)
    model = _load_pytorch_model(path, device, dtype)
    if front_end == "sherpa":
        from transdec.adapters.onnx_features import sherpa_front_end_of

        model.external_front_end = sherpa_front_end_of(model)
    return model


def _load_pytorch_model(path: Path, device: str | torch.device, dtype: torch.dtype) -> TransducerModel:
    if path.name.endswith(".nemo"):  # a NeMo checkpoint: the adapter (and its YAML library) load only when needed
        from transdec.adapters.nemo import load_nemo

        return load_nemo(path, device=device, dtype=dtype)
    if path.is_dir():
        raise ValueError(f"{path}: a directory without .onnx files; expected a transdec model file, a .nemo "
                         f"checkpoint, an ONNX export directory (encoder.onnx, decoder.onnx, joiner.onnx, "
                         f"tokens.txt) or a bundled model name ({', '.join(BUNDLED_MODELS)})")
    if not path.exists():
        raise FileNotFoundError(f"no model file {str(path)!r}; the bundled models are {list(BUNDLED_MODELS)}")
    payload = read_checkpoint(path)
    try:
        model = TransducerModel(ModelConfig.from_dict(payload["config"]), Tokenizer.from_bytes(payload["tokenizer"]))
        model.load_state_dict({n: t.to(dtype) if t.is_floating_point() else t
                               for n, t in payload["state_dict"].items()})
    except (TypeError, ValueError, RuntimeError, KeyError) as error:
        raise ValueError(f"{path}: the model in this file cannot be built: {error}") from error
    model.metadata = payload.get("metadata", {})
    return model.to(device=device, dtype=dtype).eval()


def bundled_model_path(name: str) -> Path:
    """Path of a bundled model file inside the installed package."""
    if name not in BUNDLED_MODELS:
        raise ValueError(f"unknown bundled model {name!r}; available: {list(BUNDLED_MODELS)}")
    path = Path(str(resources.files(_BUNDLED_PACKAGE).joinpath(f"{name}.pt")))
    if not path.exists():
        raise FileNotFoundError(f"bundled model {name!r} is missing from this installation ({path})")
    return path
