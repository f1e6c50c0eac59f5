"""What the per-utterance beam searches (ALSD, WIND beam, Graves, mAES) share: a hypothesis with its predictor and
fusion states, feeding it a label, merging and ranking hypotheses, and running a search on each utterance of a
batch."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from transdec.decoding.beam.frame_search import FrameSearch, logsumexp
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel


@dataclass
class UtteranceHyp:
    """One hypothesis of a per-utterance search: its emissions so far, where it is, and the states its next joint
    call reads (``predictor_proj [1, J]``, the predictor ``state``, the fusions' ``scorer_state`` and
    ``context``)."""

    tokens: tuple[int, ...] = ()
    timestamps: tuple[int, ...] = ()
    durations: tuple[int, ...] = ()
    token_logprobs: tuple[float, ...] = ()
    time: int = 0
    tokens_at_frame: int = 0  # tokens emitted at ``time`` since it last moved
    score: float = 0.0
    am_score: float = 0.0
    predictor_proj: torch.Tensor | None = None
    state: Any = None
    scorer_state: Any = None
    context: tuple[torch.Tensor, ...] = field(default=())

    def hypothesis(self) -> Hypothesis:
        return Hypothesis(list(self.tokens), list(self.timestamps), list(self.durations), list(self.token_logprobs),
                          self.score, self.am_score)


H = TypeVar("H", bound=UtteranceHyp)


def start_hyp(model: DecodingModel, scoring: Scoring, stats: DecodingStats, device: torch.device,
              hyp_class: type[H]) -> H:
    """The empty hypothesis, its predictor fed the start symbol."""
    start = hyp_class(state=model.predictor.initial_state(1), scorer_state=scoring.initial_state(1, device))
    feed(model, scoring, start, model.head.predictor_blank_id, stats, device)
    return start


def feed(model: DecodingModel, scoring: Scoring, hyp: UtteranceHyp, label: int, stats: DecodingStats,
         device: torch.device) -> None:
    """Advance ``hyp``'s predictor (``state``, ``predictor_proj [1, J]``) and, for a token, its fusion state
    (``scorer_state``, ``context``) by ``label``, in place."""
    labels = torch.tensor([label], device=device)
    out, hyp.state = model.predictor.step(labels, hyp.state)
    hyp.predictor_proj = model.joint.project_predictor(out)
    stats.predictor_calls += 1
    if label != model.head.predictor_blank_id:
        hyp.scorer_state = scoring.advance(hyp.scorer_state, labels, torch.ones(1, dtype=torch.bool, device=device))
    hyp.context = scoring.context(hyp.scorer_state)


def merge_hypotheses(hyps: list[H], rule: str, key: Callable[[H], Hashable]) -> list[H]:
    """One hypothesis per group of equal ``key`` (``hyps`` best first): the first of each group, in order, with the
    log of the group's summed probability (score and AM score) for ``"logsumexp"``; ``"none"`` keeps them all."""
    if rule == "none":
        return hyps
    groups: dict[Hashable, list[H]] = {}
    for hyp in hyps:
        groups.setdefault(key(hyp), []).append(hyp)
    merged = []
    for group in groups.values():
        best = group[0]
        if rule == "logsumexp" and len(group) > 1:
            best = dataclasses.replace(best, score=logsumexp(h.score for h in group),
                                       am_score=logsumexp(h.am_score for h in group))
        merged.append(best)
    return merged


def with_final_bonus(scoring: Scoring, hyps: list[H]) -> list[H]:
    """``hyps`` with the fusions' final bonus (:meth:`~transdec.decoding.scoring.Scoring.final_bonus`) added to
    their scores: what the n-best of a search is ranked by."""
    if not scoring.has_final_bonus:
        return hyps
    return [dataclasses.replace(h, score=h.score + float(scoring.final_bonus(h.scorer_state)[0])) for h in hyps]


def best_first(hyps: list[H], length_norm: bool = False) -> list[H]:
    """By score, or by score per token with ``length_norm``, best first (ties keep their order)."""
    if length_norm:
        return sorted(hyps, key=lambda h: -h.score / max(len(h.tokens), 1))
    return sorted(hyps, key=lambda h: -h.score)


def search_each(encoder_out: torch.Tensor, lengths: torch.Tensor, stats: DecodingStats, scoring: Scoring,
                search: Callable[[torch.Tensor, Scoring], list[Hypothesis]]) -> DecodingResult:
    """``search`` on each utterance's valid frames ``[T_b, D]`` of ``encoder_out [B, T, D]`` with ``scoring`` for
    that utterance (:meth:`~transdec.decoding.scoring.Scoring.for_utterance`); its n-best lists as one result."""
    lengths = checked_lengths(encoder_out, lengths)
    nbest_lists = [search(encoder_out[b, :length], scoring.for_utterance(b))
                   for b, length in enumerate(lengths.tolist())]
    return DecodingResult.from_nbest(nbest_lists, stats, encoder_out.device, encoder_out.dtype)


def search_frames_of_each(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: Any,
                          fusions: Sequence[Fusion], search: Callable[[FrameSearch, Any], list[Hypothesis]],
                          early: bool = False) -> DecodingResult:
    """``search(frame_search, options)`` on each utterance of ``encoder_out [B, T, D]`` (valid ``lengths [B]``), one
    after another, each in a :class:`FrameSearch` with the options' symbol limit and merging (``early``: see
    :class:`~transdec.decoding.beam.frame_search.FrameSearch`); their n-best lists as one result."""
    scoring, stats = Scoring(model.head, fusions), DecodingStats()
    return search_each(encoder_out, lengths, stats, scoring, lambda frames, scoring: search(
        FrameSearch(model, scoring, frames, options.max_symbols_per_frame, options.merge, stats, early=early), options))
