"""The greedy choice at one decoding step, batched: which label, how far time moves, at what log-prob.

The per-utterance reference decoder spells the same rules out one step at a time; the tests hold the two
to each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from transdec.decoding.scoring import Scoring
from transdec.protocol import HeadSpec


@dataclass
class Emissions:
    """The argmax emission of each of ``B`` rows; every field is ``[B]``.

    Attributes:
        labels: the chosen label output: a token (``< V``), a big blank or the blank.
        is_blank: whether the label is the blank or a big blank.
        durations: TDT only (else None): the predicted duration, independent of the label.
        advance: frames time moves by: 0 after an RNN-T or multi-blank token, the duration after a TDT
            token, 1 after a blank (a TDT blank with duration 0 moves by 1 too), a big blank's duration.
        label_logprobs: the Transducer's log-probability of the label.
        scores: score of the emission, which hypothesis scores add up: the label's (with any fusion), plus
            the duration's log-probability for TDT.
    """

    labels: torch.Tensor
    is_blank: torch.Tensor
    durations: torch.Tensor | None
    advance: torch.Tensor
    label_logprobs: torch.Tensor
    scores: torch.Tensor


def tdt_advance(labels: torch.Tensor, durations: torch.Tensor, blank_id: int) -> torch.Tensor:
    """Frames a TDT emission moves: its duration, and at least one for the blank (a blank of duration 0 would
    stay forever)."""
    return torch.where(labels == blank_id, durations.clamp(min=1), durations)


def lookup_tables(head: HeadSpec, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advance [num_labels], durations [K])``: frames each label output moves time by (1 for the blank,
    a big blank's duration, 0 for a token; unused for TDT), and the value of each TDT duration output."""
    advance = torch.zeros(head.num_labels, dtype=torch.long, device=device)
    advance[head.blank_id] = 1
    for i, duration in enumerate(head.big_blank_durations):
        advance[head.big_blank_id(i)] = duration
    durations = torch.tensor(head.durations or (0,), dtype=torch.long, device=device)
    return advance, durations


class GreedyHead:
    """Argmax emissions of joint logits ``[B, ..., C]``, scored by a :class:`~transdec.decoding.scoring.Scoring`;
    holds the lookup tables on the device."""

    def __init__(self, scoring: Scoring, device: torch.device) -> None:
        self.scoring = scoring
        self.head = scoring.head
        self._advance_by_label, self._duration_values = lookup_tables(self.head, device)

    def __call__(self, logits: torch.Tensor, context: tuple[torch.Tensor, ...] = (),
                 forced: torch.Tensor | None = None) -> Emissions:
        """Emissions of ``logits [B, ..., C]``; ``context`` is the scoring context of the ``B`` rows. Where
        ``forced [B, ...]`` is True the emission is the forced blank (:attr:`~transdec.protocol.HeadSpec.
        forced_advance`), whatever the argmax."""
        head = self.head
        scored = self.scoring(logits, context)
        label_scores, labels = scored.scores.max(dim=-1)
        if forced is not None:
            labels = labels.masked_fill(forced, head.blank_id)
            label_scores = torch.where(forced, scored.scores[..., head.blank_id], label_scores)
        if scored.scores is scored.label_logprobs:  # no fusion: spare the gather
            label_logprobs = label_scores
        else:
            label_logprobs = scored.label_logprobs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        if head.kind != "tdt":
            return Emissions(
                labels=labels,
                is_blank=labels >= head.num_tokens,
                durations=None,
                advance=self._advance_by_label[labels],
                label_logprobs=label_logprobs,
                scores=label_scores,
            )
        duration_logprobs, duration_index = scored.duration_logprobs.max(dim=-1)
        if forced is not None:
            duration_index = duration_index.masked_fill(forced, head.forced_duration_index)
            duration_logprobs = torch.where(forced, scored.duration_logprobs[..., head.forced_duration_index],
                                            duration_logprobs)
        durations = self._duration_values[duration_index]
        return Emissions(
            labels=labels,
            is_blank=labels == head.blank_id,
            durations=durations,
            advance=tdt_advance(labels, durations, head.blank_id),
            label_logprobs=label_logprobs,
            scores=label_scores + duration_logprobs,
        )
