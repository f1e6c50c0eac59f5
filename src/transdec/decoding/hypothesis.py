"""Hypothesis: one decoded utterance as Python lists, what decoders return per utterance."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Hypothesis:
    """One decoded utterance.

    Attributes:
        tokens: token ids, in order (blanks are never included).
        timestamps: the encoder frame each token was emitted at.
        durations: frames each token consumes: the predicted duration for TDT, 0 for RNN-T and
            multi-blank (their labels never advance time).
        token_logprobs: log-probability of each token's label (for TDT without the duration term).
        score: log-probability of the whole decoded path: every label and blank emission, including
            TDT duration terms (the forced blank after ``max_symbols_per_frame`` tokens counts like any blank).
            With fusions, the fused score; for beam search with log-sum-exp merging, the merged score of
            every path to these tokens the search combined.
        am_score: beam search only (else None): ``score`` without the fusions' terms.
    """

    tokens: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    durations: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    score: float = 0.0
    am_score: float | None = None
