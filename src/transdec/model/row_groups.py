"""Batches run through a function a few rows at a time, where big fresh tensors cost more than the calls.

On a CPU, a tensor of tens of megabytes is new memory from the system on every call (the allocator hands such
blocks back), and its page faults cost more than the arithmetic of an elementwise pass over it: the subsampling of
16 x 10 s took 4.2x as long in one piece as in groups of rows, the filterbank 2.5x (``bench/cpu_layouts.py``).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor


def in_row_groups(fn: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]], x: Tensor, lengths: Tensor,
                  bytes_per_row: int, budget: int) -> tuple[Tensor, Tensor]:
    """``fn(x, lengths)`` (``x [B, ...]``, ``lengths [B]``, giving a ``[B, ...]`` pair), computed on groups of
    rows whose largest intermediate, ``bytes_per_row`` each, stays under ``budget`` bytes; at least one row."""
    rows = max(1, budget // max(bytes_per_row, 1))
    if rows >= x.shape[0]:
        return fn(x, lengths)
    pieces = [fn(x[i : i + rows], lengths[i : i + rows]) for i in range(0, x.shape[0], rows)]
    return torch.cat([out for out, _ in pieces]), torch.cat([counts for _, counts in pieces])
