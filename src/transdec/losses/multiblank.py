"""The multi-blank RNN-T loss with logit under-normalisation (multi-blank paper, eqs. 2-6)."""

from __future__ import annotations

from typing import Sequence

import torch

from transdec.losses.lattice import (LatticeWeights, checked_logits, full_lattice_log_likelihood, normalized_columns,
                                     reduce_losses, target_columns)
from transdec.protocol import HeadSpec


def multiblank_weights(logits: torch.Tensor, point_targets: torch.Tensor, big_blank_durations: Sequence[int],
                       sigma: float = 0.0) -> LatticeWeights:
    """Transition log-weights at lattice points: ``logits [B, T, P, C]`` in the multi-blank layout,
    ``point_targets [B, T or 1, P]`` -> labels of duration 0 and one blank per duration (1 and the big
    blanks'), each ``[B, T, P]``."""
    head = HeadSpec(
        "multiblank", num_tokens=logits.shape[-1] - len(big_blank_durations) - 1, big_blank_durations=big_blank_durations
    )
    blank_durations = (1, *head.big_blank_durations)
    blank_columns = [head.blank_id] + [head.big_blank_id(i) for i in range(len(head.big_blank_durations))]
    tokens, blank_log_probs = normalized_columns(logits, point_targets, blank_columns)
    blanks = {d: blank_log_probs[..., i] - sigma for i, d in enumerate(blank_durations)}
    return {0: tokens - sigma}, blanks


def multiblank_rnnt_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    big_blank_durations: Sequence[int],
    sigma: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """Multi-blank RNN-T loss.

    Args:
        logits: ``[B, T, U + 1, V + len(big_blank_durations) + 1]`` raw joint outputs in the layout of
            :class:`~transdec.protocol.HeadSpec`: tokens, big blanks (big blank ``i`` at
            ``blank - 1 - i``), blank last. All outputs share one softmax.
        targets, logit_lengths, target_lengths, reduction: as for
            :func:`~transdec.losses.rnnt.rnnt_loss`.
        big_blank_durations: frames each big blank consumes, e.g. ``(2, 4, 8)``.
        sigma: logit under-normalisation: every emission's log-probability is lowered by ``sigma``, so a
            path is penalised by ``sigma`` per emission and paths through long blanks are favoured.

    A big blank must land inside the utterance or exactly on its end.
    """
    logits = checked_logits(logits, targets, logit_lengths, target_lengths)
    weights = multiblank_weights(logits, target_columns(targets, target_lengths).unsqueeze(1), big_blank_durations,
                                 sigma)
    log_likelihood = full_lattice_log_likelihood(weights, logit_lengths, target_lengths)
    return reduce_losses(-log_likelihood, reduction)
