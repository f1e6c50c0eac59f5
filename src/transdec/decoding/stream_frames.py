"""The encoder frames that streams decoded chunk by chunk keep: a buffer ``[S, C, J]`` per slot, column 0 holding
stream frame ``offset[s]``, so that frames behind every search can be dropped and memory follows the chunk size."""

from __future__ import annotations

import torch


def rebased(encoder_proj: torch.Tensor, offset: torch.Tensor, first: torch.Tensor, columns: int) -> torch.Tensor:
    """``encoder_proj [S, C, J]`` (column 0: frame ``offset [S]``) with each slot's frames before ``first [S]``
    dropped (column 0 becomes frame ``first``), grown to at least ``columns`` columns where it holds fewer."""
    capacity, width = encoder_proj.shape[1], encoder_proj.shape[2]
    index = (torch.arange(capacity, device=encoder_proj.device)[None] + (first - offset)[:, None]).clamp(
        max=capacity - 1)
    frames = encoder_proj.gather(1, index[..., None].expand(-1, -1, width))
    if columns <= capacity:
        return frames
    grown = frames.new_zeros(frames.shape[0], max(columns, 2 * capacity), width)
    grown[:, :capacity] = frames
    return grown
