"""Checks on what callers hand to decoders, so that mistakes fail with a message instead of garbage."""

from __future__ import annotations

import torch

from transdec.protocol import HeadSpec


def checked_lengths(encoder_out: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Validate ``encoder_out [B, T, D]`` against ``lengths [B]``; return lengths as int64 on its device."""
    if not isinstance(encoder_out, torch.Tensor) or encoder_out.dim() != 3:
        shape = tuple(encoder_out.shape) if isinstance(encoder_out, torch.Tensor) else type(encoder_out).__name__
        raise ValueError(f"encoder_out must be a [B, T, D] tensor, got {shape}")
    if not encoder_out.is_floating_point():
        raise ValueError(f"encoder_out must be floating point, got {encoder_out.dtype}")
    lengths = torch.as_tensor(lengths)
    batch_size, max_time, _ = encoder_out.shape
    if lengths.dim() != 1 or lengths.shape[0] != batch_size:
        raise ValueError(f"lengths must be [B] = [{batch_size}] to match encoder_out, got {tuple(lengths.shape)}")
    if lengths.is_floating_point() or lengths.dtype == torch.bool or lengths.is_complex():
        raise ValueError(f"lengths must be integers, got {lengths.dtype}")
    if batch_size and (int(lengths.min()) < 0 or int(lengths.max()) > max_time):
        raise ValueError(
            f"lengths must lie in [0, T={max_time}], got min {int(lengths.min())} and max {int(lengths.max())}"
        )
    return lengths.to(device=encoder_out.device, dtype=torch.long)


def check_rnnt_head(head: HeadSpec, strategy: str) -> None:
    """WIND beam search scores a window of frames as blanks of one frame each: an RNN-T head only."""
    if head.kind != "rnnt":
        raise ValueError(f"{strategy} needs an RNN-T head, not {head.kind!r} (its blanks jump by durations); "
                         "use beam_alsd_pp")


def check_max_symbols(max_symbols_per_frame: int | None) -> None:
    if max_symbols_per_frame is not None and max_symbols_per_frame < 1:
        raise ValueError(f"max_symbols_per_frame must be at least 1 or None, got {max_symbols_per_frame}")


def check_window_size(window_size: int) -> None:
    if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1:
        raise ValueError(f"window_size must be a positive integer (1 = no window), got {window_size!r}")
