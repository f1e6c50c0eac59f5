"""Reading the versioned tensor files transdec writes (a compiled n-gram LM, a boosting tree), with checks that
name the file and what is wrong with it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch


def read_tensor_file(path: Path, file_format: str, what: str, tensor_names: Sequence[str],
                     error: type[Exception] = ValueError) -> dict:
    """The dict that ``torch.save`` wrote to ``path`` with ``"format": file_format`` and the tensors
    ``tensor_names`` in a ``"tensors"`` dict. Raises ``error``, naming the file and ``what`` it should be, when it
    cannot be read, is another kind of file or lacks a tensor; the caller checks the other entries."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as cause:  # truncated or another kind of file: torch raises many kinds
        first_line = str(cause).splitlines()[0] if str(cause) else ""
        raise error(f"{path}: not a {what} (it cannot be read: {type(cause).__name__}: {first_line})") from cause
    if not isinstance(saved, dict) or saved.get("format") != file_format:
        raise error(f"{path}: not a {what} (format {file_format!r})")
    tensors = saved.get("tensors")
    missing = [n for n in tensor_names if not isinstance(tensors, dict) or not isinstance(tensors.get(n), torch.Tensor)]
    if missing:
        raise error(f"{path}: a damaged {what} file (missing tensors {missing})")
    return saved
