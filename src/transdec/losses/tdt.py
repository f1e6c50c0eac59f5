"""The TDT (token-and-duration Transducer) loss with under-normalised label logits."""

from __future__ import annotations

from typing import Sequence

import torch

from transdec.losses.lattice import checked_logits, lattice_log_likelihood, normalized_columns, reduce_losses
from transdec.model.protocol import HeadSpec


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
    num_labels = logits.shape[-1] - len(durations)
    head = HeadSpec("tdt", num_tokens=num_labels - 1, durations=durations)
    logits = checked_logits(logits, targets, logit_lengths, target_lengths)
    tokens, blank = normalized_columns(logits[..., :num_labels], targets, target_lengths, [head.blank_id])
    tokens, blank = tokens - sigma, blank[..., 0] - sigma
    duration_log_probs = logits[..., num_labels:].log_softmax(dim=-1)  # [B, T, U + 1, D]
    label_weights = {d: tokens + duration_log_probs[:, :, :-1, i] for i, d in enumerate(head.durations)}
    blank_weights = {d: blank + duration_log_probs[..., i] for i, d in enumerate(head.durations) if d > 0}
    log_likelihood = lattice_log_likelihood(label_weights, blank_weights, logit_lengths, target_lengths)
    return reduce_losses(-log_likelihood, reduction)
