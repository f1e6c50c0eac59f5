"""Sequences of different lengths as one zero-padded batch: audio, token ids, encoder frames."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


def round_up(value: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that is at least ``value``."""
    return -(-value // multiple) * multiple


def pad_batch(sequences: Sequence[Tensor | np.ndarray | Sequence[float]], multiple: int = 1,
              dtype: torch.dtype | None = None, min_length: int = 0) -> tuple[Tensor, Tensor]:
    """Rows ``[L_i, *]`` (tensors, arrays or lists of numbers; trailing dimensions alike) as one batch.

    Args:
        sequences: the B rows.
        multiple: the padded length is rounded up to a multiple of this, so that batch shapes repeat.
        dtype: of the batch; None takes the rows' common dtype (an empty list of numbers is float32, so give
            one for token ids).
        min_length: the padded length is at least this.

    Returns:
        ``padded [B, L, *]``, zero past each row's length, with ``L = round_up(max(min_length, longest),
        multiple)``, on the rows' device; and ``lengths [B]`` int64, on the same device. An empty list gives
        ``padded [0, L]`` of ``dtype`` (float32 if None) on the CPU.
    """
    if multiple < 1 or min_length < 0:
        raise ValueError(f"multiple must be at least 1 and min_length non-negative, got {multiple}, {min_length}")
    rows = [torch.as_tensor(s) for s in sequences]
    if any(row.dim() == 0 for row in rows):
        raise ValueError("pad_batch pads sequences; a row is a scalar")
    width = round_up(max([min_length, *(len(row) for row in rows)]), multiple)
    if not rows:
        return torch.zeros(0, width, dtype=dtype or torch.float32), torch.zeros(0, dtype=torch.int64)
    if dtype is None:
        dtype = functools.reduce(torch.promote_types, (row.dtype for row in rows))
    padded = rows[0].new_zeros(len(rows), width, *rows[0].shape[1:], dtype=dtype)
    for i, row in enumerate(rows):
        padded[i, : len(row)] = row
    return padded, torch.tensor([len(row) for row in rows], dtype=torch.int64, device=padded.device)
