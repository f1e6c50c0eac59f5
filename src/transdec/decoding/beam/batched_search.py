"""What the batched beam searches that CUDA graphs capture share (ALSD++, AES++, batched WIND): how ``start()``
makes or rewrites the search state, and reading the result back.

A search's state is a dataclass with ``hyps`` (:class:`~transdec.decoding.beam_hyps.BatchedBeamHyps`), its own
fields and ``stats`` / ``calls`` / ``active_any``: without ``in_place`` a new state per start, the call counts on the
host (``stats``); with ``in_place`` one state for good, its tensors written over by every later start, the call
counts (``calls``, predictor then joint) and the loop condition (``active_any``) on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from transdec.decoding.beam_hyps import BatchedBeamHyps
from transdec.decoding.cuda.in_place import copy_of
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Scoring


class BatchedBeamSearch:
    """The shared part of a batched beam search; subclasses set ``state``, ``scoring``, ``options``, ``in_place``
    and ``encoder_out`` and define ``_set(name, value)`` (:func:`~transdec.decoding.cuda.in_place.set_state`)."""

    state: Any
    scoring: Scoring
    options: Any
    in_place: bool
    encoder_out: torch.Tensor
    _set: Callable[[str, Any], None]

    def _start_state(self, make_state: Callable[..., Any], slots: tuple[int, int], capacity: int,
                     initial: dict[str, Any], eager: dict[str, Any] | None = None,
                     in_place: dict[str, Any] | None = None) -> None:
        """Make :attr:`state` with ``make_state`` for hypotheses ``slots = (B, K)`` from the ``initial`` fields
        (and ``eager`` or ``in_place`` extra ones), the start symbol counted as one predictor call; in place after
        the first start, write ``initial`` over it instead (the extra fields are the caller's to reset).
        ``capacity``: the steps of the fixed-capacity hypotheses of an in-place search."""
        batch_size, beam = slots
        device, dtype = self.encoder_out.device, self.encoder_out.dtype
        if not self.in_place:
            self.state = make_state(BatchedBeamHyps(batch_size, beam, device, dtype), **initial, **(eager or {}),
                                    stats=DecodingStats(predictor_calls=1))
            return
        if self.state is None:
            self.state = make_state(BatchedBeamHyps(batch_size, beam, device, dtype, fixed_capacity=capacity),
                                    **{name: copy_of(value) for name, value in initial.items()}, **(in_place or {}),
                                    calls=torch.zeros(2, dtype=torch.long, device=device),
                                    active_any=torch.zeros((), dtype=torch.bool, device=device))
        else:
            self.state.hyps.reset()
            for name, value in initial.items():
                self._set(name, value)
        self.state.calls.zero_()
        self.state.calls[0].fill_(1)

    def nbest(self) -> list[list[Hypothesis]]:
        """Each utterance's ``nbest`` best hypotheses, best first, ranked with the fusions' final bonus."""
        hyps = self.state.hyps
        bonus = self.scoring.final_bonus(self.state.scorer_state)  # one row per slot, as the scores
        if isinstance(bonus, torch.Tensor):
            bonus = bonus.view_as(hyps.scores)
        return hyps.best(self.options.nbest, self.options.length_norm, bonus)

    def decoding_stats(self) -> DecodingStats:
        """Predictor and joint calls so far (in place: one read of the device counts)."""
        if not self.in_place:
            return self.state.stats
        predictor_calls, joint_calls = self.state.calls.tolist()
        return DecodingStats(predictor_calls=predictor_calls, joint_calls=joint_calls)

    def result(self) -> DecodingResult:
        return DecodingResult.from_nbest(self.nbest(), self.decoding_stats(), self.encoder_out.device,
                                         self.encoder_out.dtype)
