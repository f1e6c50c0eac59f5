"""The RNN-T loss (Graves 2012): negative log-likelihood summed over all alignments."""

from __future__ import annotations

import torch

from transdec.losses.lattice import checked_logits, lattice_log_likelihood, normalized_columns, reduce_losses


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
    tokens, blank = normalized_columns(logits, targets, target_lengths, [logits.shape[-1] - 1])
    log_likelihood = lattice_log_likelihood({0: tokens}, {1: blank[..., 0]}, logit_lengths, target_lengths)
    return reduce_losses(-log_likelihood, reduction)
