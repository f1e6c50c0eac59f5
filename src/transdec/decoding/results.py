"""What decoders return: per-utterance hypotheses, the batched form, and call counts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.hypothesis import Hypothesis

if TYPE_CHECKING:
    import torch

# Hypothesis has a module of its own, below batched_hyps, which builds them; it is part of what decoders return.
__all__ = ["DecodingResult", "DecodingStats", "Hypothesis"]


@dataclass
class DecodingStats:
    """How much work a decode did: calls of the predictor and of the joint, each over the whole batch.

    ``emissions`` (filled by the per-utterance reference decoder only) counts every greedy decision by
    ``(kind, frames advanced)``: ``("token", d)`` or ``("blank", d)``, e.g. ``("blank", 4)`` for a
    multi-blank big blank of duration 4 or a TDT blank with duration 4.

    ``window_jumps`` (filled by the batch-1 WIND decoder) counts, for each window it scored, how many
    frames the search moved: 0 when the label sat at the window start (the WIND paper's Figure 1).
    """

    predictor_calls: int = 0
    joint_calls: int = 0
    emissions: Counter[tuple[str, int]] = field(default_factory=Counter)
    window_jumps: Counter[int] = field(default_factory=Counter)


@dataclass
class DecodingResult:
    """Output of every decoder.

    Attributes:
        hyps: the batched form (``[B, L]`` tensors), for further tensor work without Python loops.
        stats: call counts.
        exact: False for decoders that may differ from the per-utterance reference (frame-looping
            TDT and multi-blank, which advance the whole batch by its smallest duration).
        nbest: beam search only (else None): per utterance, its best hypotheses, best first; ``hyps``
            holds the first of each.
    """

    hyps: BatchedHyps
    stats: DecodingStats
    exact: bool = True
    nbest: list[list[Hypothesis]] | None = None

    @classmethod
    def from_nbest(cls, nbest: list[list[Hypothesis]], stats: DecodingStats, device: torch.device,
                   float_dtype: torch.dtype) -> DecodingResult:
        """A beam search's result from each utterance's n-best list (best first, never empty)."""
        best = [hyps[0] for hyps in nbest]
        return cls(BatchedHyps.from_hypotheses(best, device, float_dtype), stats, nbest=nbest)

    def hypotheses(self) -> list[Hypothesis]:
        """The best hypothesis of each utterance, as Python lists."""
        if self.nbest is not None:
            return [hyps[0] if hyps else Hypothesis() for hyps in self.nbest]
        return self.hyps.to_hypotheses()

    def nbest_hypotheses(self) -> list[list[Hypothesis]]:
        """Per utterance, the n-best list (one hypothesis for greedy decoders)."""
        if self.nbest is not None:
            return self.nbest
        return [[hyp] for hyp in self.hyps.to_hypotheses()]
