"""What the batched beam searches that CUDA graphs capture share (ALSD++, AES++, batched WIND): the strategy function's
body (graphs on CUDA, else the eager search), how ``start()`` makes or rewrites the search state, and reading the
result back.

A search's state is a dataclass with ``hyps`` (:class:`~transdec.decoding.beam_hyps.BatchedBeamHyps`), its own
fields and ``stats`` / ``calls`` / ``active_any``: without ``in_place`` a new state per start, the call counts on the
host (``stats``); with ``in_place`` one state for good, its tensors written over by every later start, the call
counts (``calls``, predictor then joint) and the loop condition (``active_any``) on the device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from transdec.decoding.beam_hyps import BatchedBeamHyps
from transdec.decoding.cuda import joint_kernel
from transdec.decoding.cuda.graph_cache import graphed_result
from transdec.decoding.cuda.in_place import copy_of
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import GraphOptions
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel, HeadSpec, Joint, Predictor


def decode_batch(strategy: str, search_class: Callable[..., BatchedBeamSearch], model: DecodingModel,
                 encoder_out: torch.Tensor, lengths: torch.Tensor, options: GraphOptions,
                 fusions: Sequence[Fusion]) -> DecodingResult:
    """A batched beam strategy's result: through its registered graph driver on CUDA (see
    :func:`~transdec.decoding.cuda.graph_cache.graphed_result`), else ``search_class(model, encoder_out, lengths,
    options, scoring)`` run eagerly."""
    lengths = checked_lengths(encoder_out, lengths)
    scoring = Scoring(model.head, fusions)
    result = graphed_result(strategy, model, encoder_out, lengths, options, scoring)
    if result is not None:
        return result
    search = search_class(model, encoder_out, lengths, options, scoring)
    search.run()
    return search.result()


class BatchedBeamSearch:
    """The shared part of a batched beam search; subclasses set ``state``, ``scoring``, ``options``, ``in_place``,
    the model's ``head``, ``predictor`` and ``joint`` and ``encoder_out``, and define ``step()`` and
    ``_set(name, value)`` (:func:`~transdec.decoding.cuda.in_place.set_state`)."""

    state: Any
    scoring: Scoring
    options: Any
    in_place: bool
    head: HeadSpec
    predictor: Predictor
    joint: Joint
    encoder_out: torch.Tensor
    step: Callable[[], object]
    _set: Callable[[str, Any], None]

    def start(self) -> None:
        """Project the encoder output, put one empty hypothesis per utterance at frame 0 and feed the predictor
        the start symbol: a new :attr:`state`, or with ``in_place`` after the first call, the same one written over.
        The constructor calls it; call it again (in place) after writing new inputs."""
        raise NotImplementedError

    def _take_inputs(self, model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: Any,
                     scoring: Scoring, in_place: bool) -> None:
        """Keep what every batched search reads: the model's parts (only the parts: graph caches keyed on the model
        must not keep it alive), ``options``, ``scoring``, ``in_place``, ``encoder_out [B, T, D]``, ``max_time``,
        ``lengths`` as ``[B, 1]`` (a view: new lengths written into ``lengths`` reach it) and, in place (under CUDA
        graphs), the joint kernel's layer, with which one kernel computes the joint with the frame gather in it."""
        self.head, self.predictor, self.joint = model.head, model.predictor, model.joint
        self.options, self.scoring, self.in_place = options, scoring, in_place
        self.encoder_out, self.max_time = encoder_out, encoder_out.shape[1]
        self.lengths = lengths.unsqueeze(1)
        self.joint_layer = joint_kernel.fused_layer(self.joint, encoder_out.device) if in_place else None

    def _start_fields(self, rows: int) -> dict[str, Any]:
        """What every search starts from, for ``rows`` hypotheses: ``encoder_proj`` (the encoder output projected,
        ``[B, T, J]``), and each hypothesis' predictor fed the start symbol (``predictor_state``,
        ``predictor_proj [rows, J]``) with its fusions at their start (``scorer_state``)."""
        device = self.encoder_out.device
        start = torch.full((rows,), self.head.predictor_blank_id, dtype=torch.long, device=device)
        out, predictor_state = self.predictor.step(start, self.predictor.initial_state(rows))
        return {"encoder_proj": self.joint.project_encoder(self.encoder_out), "predictor_state": predictor_state,
                "predictor_proj": self.joint.project_predictor(out),
                "scorer_state": self.scoring.initial_state(rows, device)}

    def run(self) -> None:
        """Step until every hypothesis is finished (in place: from the state ``start()`` left, while the device
        flag ``state.active_any`` says so; else until ``step()`` says it took none)."""
        if self.in_place:
            while bool(self.state.active_any):
                self.step()
        else:
            while self.step():
                pass

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
