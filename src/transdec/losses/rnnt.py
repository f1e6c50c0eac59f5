"""The RNN-T loss (Graves 2012): negative log-likelihood summed over all alignments."""

from __future__ import annotations

import torch

from transdec.losses.lattice import (LatticeWeights, checked_logits, full_lattice_log_likelihood, normalized_columns,
                                     reduce_losses, target_columns)


def rnnt_weights(logits: torch.Tensor, point_targets: torch.Tensor) -> LatticeWeights:
    """Transition log-weights at lattice points: ``logits [B, T, P, V + 1]`` (blank last), ``point_targets
    [B, T or 1, P]`` -> labels of duration 0 and the blank of duration 1, each ``[B, T, P]``."""
    tokens, blank = normalized_columns(logits, point_targets, [logits.shape[-1] - 1])
    return {0: tokens}, {1: blank[..., 0]}


def rnnt_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    reduction: str = "mean",
) -> torch.Tensor:
    """RNN-T loss with the blank at the last output index.

    Args:
        logits: ``[B, T, U + 1, V + 1]`` raw joint outputs (normalised here).
        targets: ``[B, U]`` token ids, padded past ``target_lengths``.
        logit_lengths: ``[B]`` frames per utterance (at least 1).
        target_lengths: ``[B]`` tokens per utterance.
        reduction: ``"mean"`` over utterances, ``"sum"``, or ``"none"`` for ``[B]``.
    """
    logits = checked_logits(logits, targets, logit_lengths, target_lengths)
    weights = rnnt_weights(logits, target_columns(targets, target_lengths).unsqueeze(1))
    return reduce_losses(-full_lattice_log_likelihood(weights, logit_lengths, target_lengths), reduction)
