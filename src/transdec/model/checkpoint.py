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


def load_transdec_model(path: str | os.PathLike[str], device: str | torch.device = "cpu",
                        dtype: torch.dtype = torch.float32) -> TransducerModel:
    """Load a transdec model file (see :func:`save_model`) in eval mode; :func:`transdec.load_model` loads every
    kind of model, this one only transdec's own."""
    path = Path(path)
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
