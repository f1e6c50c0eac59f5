"""Transducer losses in pure PyTorch: RNN-T, multi-blank RNN-T and TDT, on CPU and GPU."""

from __future__ import annotations

import torch

from transdec.losses.multiblank import multiblank_rnnt_loss
from transdec.losses.rnnt import rnnt_loss
from transdec.losses.tdt import tdt_loss
from transdec.protocol import HeadSpec


def transducer_loss(
    head: HeadSpec,
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    sigma: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """The loss for ``head``'s kind; ``sigma`` (under-normalisation) must be 0 for RNN-T."""
    if logits.shape[-1] != head.num_outputs:
        raise ValueError(f"logits have {logits.shape[-1]} outputs, the head needs {head.num_outputs}")
    if head.kind == "rnnt":
        if sigma:
            raise ValueError("under-normalisation (sigma) changes nothing for RNN-T; use a multi-blank or TDT head")
        return rnnt_loss(logits, targets, logit_lengths, target_lengths, reduction)
    if head.kind == "multiblank":
        return multiblank_rnnt_loss(
            logits, targets, logit_lengths, target_lengths, head.big_blank_durations, sigma, reduction
        )
    return tdt_loss(logits, targets, logit_lengths, target_lengths, head.durations, sigma, reduction)


__all__ = ["multiblank_rnnt_loss", "rnnt_loss", "tdt_loss", "transducer_loss"]
