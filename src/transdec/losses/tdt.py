"""The TDT (token-and-duration Transducer) loss with under-normalised label logits."""

from __future__ import annotations

from typing import Sequence

import torch

from transdec.losses.lattice import (LatticeWeights, checked_logits, full_lattice_log_likelihood, normalized_columns,
                                     reduce_losses, target_columns)
from transdec.protocol import HeadSpec


def tdt_weights(logits: torch.Tensor, point_targets: torch.Tensor, durations: Sequence[int],
                sigma: float = 0.0) -> LatticeWeights:
    """Transition log-weights at lattice points: ``logits [B, T, P, V + 1 + len(durations)]``, ``point_targets
    [B, T or 1, P]`` -> a label and (durations > 0) a blank weight per duration, each ``[B, T, P]``."""
    head = HeadSpec("tdt", num_tokens=logits.shape[-1] - len(durations) - 1, durations=durations)
    tokens, blank = normalized_columns(logits[..., : head.num_labels], point_targets, [head.blank_id])
    tokens, blank = tokens - sigma, blank[..., 0] - sigma
    duration_log_probs = logits[..., head.num_labels :].log_softmax(dim=-1)  # [B, T, P, D]
    label_weights = {d: tokens + duration_log_probs[..., i] for i, d in enumerate(head.durations)}
    blank_weights = {d: blank + duration_log_probs[..., i] for i, d in enumerate(head.durations) if d > 0}
    return label_weights, blank_weights


def tdt_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    durations: Sequence[int],
    sigma: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """TDT loss.

    Args:
        logits: ``[B, T, U + 1, V + 1 + len(durations)]`` raw joint outputs: ``V`` token logits, the
            blank, then one logit per duration. Labels (tokens and blank) and durations are normalised
            separately and are independent: an emission's log-probability is the sum of both.
        targets, logit_lengths, target_lengths, reduction: as for
            :func:`~transdec.losses.rnnt.rnnt_loss`.
        durations: frames each duration output moves, e.g. ``(0, 1, 2, 3, 4)``.
        sigma: under-normalisation of the label log-probabilities only (not the durations).

    A token's jump must stay inside the utterance (``t + d < T``); the path ends with a blank that lands
    exactly on ``T``. Blanks of duration 0 are not transitions (they would not move). Without a
    duration 0, an utterance may have no alignment at all (too many tokens for its frames); its loss is
    then about ``1e30``: filter such utterances out of training data.
    """
    logits = checked_logits(logits, targets, logit_lengths, target_lengths)
    weights = tdt_weights(logits, target_columns(targets, target_lengths).unsqueeze(1), durations, sigma)
    log_likelihood = full_lattice_log_likelihood(weights, logit_lengths, target_lengths)
    return reduce_losses(-log_likelihood, reduction)
