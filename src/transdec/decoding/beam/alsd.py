"""Alignment-length synchronous beam search (Saon et al. 2020, ALSD), one utterance at a time: the specification
that batched ALSD++ (:mod:`transdec.decoding.beam.alsd_pp`) is tested against.

Every hypothesis takes exactly one emission per search step, so all hypotheses of a step have the same
alignment length (tokens plus blanks). A hypothesis is its tokens, its frame ``t``, the number of tokens it
emitted at ``t`` since ``t`` last moved, its score and its predictor and fusion states. At each step:

1. Every unfinished hypothesis (``t < T``) is expanded by every emission the greedy rules allow at ``t``
   (:mod:`transdec.decoding.greedy.reference`): each label output (and, for TDT, each duration with it),
   scored by :class:`~transdec.decoding.scoring.Scoring`. A blank moves ``t`` by 1, a big blank by its
   duration, a TDT emission by its duration (a blank by at least 1); a token of an RNN-T or multi-blank head
   stays at ``t``; after ``max_symbols_per_frame`` tokens at one frame the forced blank is the only emission.
   A finished hypothesis is carried over unchanged, so finished and unfinished ones compete in one beam.
   Each hypothesis' candidates are its ``beam_size`` best emissions.
2. The ``beam_size`` best-ranked candidates are kept (Saon's ALSD). With ``dominance_slots=n``, the best ranked
   but ``n``: those slots go to the other candidates *dominated* by the fewest others, the best ranked among equal
   counts (a candidate dominates another when it stands at the same or a later frame, the frame its emission
   moves it to or a finished hypothesis' own, and ranks strictly higher). With fusions, ``pruning="late"`` ranks
   them by the fused score; ``"early"`` by the hypothesis' score plus the emission's Transducer log-prob alone,
   the fusions' scores being added to the kept ones only (beam-search paper, Sec. 2.3).
3. Merging (``merge``): kept hypotheses with the same tokens in the same state (the same ``t`` and tokens
   emitted there, or both finished) are one hypothesis: the best of them, with its own score (``"max"``) or
   with the log of their summed probabilities (``"logsumexp"``); ``"none"`` keeps them all.

Why dominance slots: the hypotheses of a step have taken as many emissions but stand at different frames, and a
higher score behind may only have put off costs still to pay (the blanks of the frames between, TDT's short
durations), so the plain ranking can fill the beam with hypotheses of many cheap emissions, which end below the
path greedy decoding takes (on the parakeet-sized random decoders of ``bench/beam_quality.py``, below greedy's score in
up to 9 of 32 utterances at beam 2 and 5 of 32 at beam 8, TDT worst). A candidate that is further on and scores
higher than another is better on both counts, and the slots keep such candidates. On trained models they cost WER
(most with fusions: docs/decoding.md, "Beam search against greedy decoding"), so they are an option, off by
default. The best-ranked candidate is kept either way, so beam 1 is greedy decoding.

The search ends when every hypothesis is finished; ``max_length_ratio`` (Saon's ``U_max = ratio * T``) ends it
after ``T + U_max`` steps instead, keeping only the finished hypotheses if there are any. The n-best are the
finished hypotheses by score (per token with ``length_norm``), each with the fusions' final bonus
(:meth:`~transdec.decoding.scoring.Scoring.final_bonus`, e.g. phrase boosting taking back an unfinished match).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transdec.decoding.beam.frame_search import Move, label_advance
from transdec.decoding.beam.greedy_guard import kept_greedy
from transdec.decoding.beam.utterance import (UtteranceHyp, best_first, feed, merge_hypotheses, search_each,
                                              start_hyp, with_final_bonus)
from transdec.decoding.options import CandidateOptions, option
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, LabelScores, Scoring
from transdec.protocol import DecodingModel, HeadSpec


@dataclass(frozen=True)
class AlsdOptions(CandidateOptions):
    """Options of per-utterance ALSD."""

    max_length_ratio: float | None = option(
        None, "end the search after T * (1 + ratio) steps, Saon's U_max (default none: when every hypothesis is "
              "finished)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_length_ratio is not None and not self.max_length_ratio >= 0:
            raise ValueError(f"max_length_ratio must be non-negative or None, got {self.max_length_ratio}")



@takes_options(AlsdOptions)
@torch.inference_mode()
def beam_alsd(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: AlsdOptions,
              fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Beam search over ``encoder_out [B, T, D]`` with valid ``lengths [B]``, one utterance after another."""
    scoring, stats = Scoring(model.head, fusions), DecodingStats()
    result = search_each(encoder_out, lengths, stats, scoring,
                         lambda frames, scoring: _search(model, scoring, frames, options, stats))
    # Greedy decoding's hypothesis: this search at beam 1, which is greedy decoding.
    greedy = AlsdOptions(beam_size=1, max_symbols_per_frame=options.max_symbols_per_frame)
    return kept_greedy(result, options, lambda: beam_alsd(model, encoder_out, lengths, greedy, fusions=fusions))


def _search(model: DecodingModel, scoring: Scoring, frames: torch.Tensor, options: AlsdOptions,
            stats: DecodingStats) -> list[Hypothesis]:
    head, joint = model.head, model.joint
    num_frames = frames.shape[0]
    encoder_proj = joint.project_encoder(frames.unsqueeze(0))[0]  # [T, J]
    beam = [start_hyp(model, scoring, stats, frames.device, UtteranceHyp)]
    max_steps = None if options.max_length_ratio is None else num_frames + math.ceil(options.max_length_ratio * num_frames)
    step = 0
    while any(h.time < num_frames for h in beam) and (max_steps is None or step < max_steps):
        candidates: list[tuple[float, int, UtteranceHyp, Move | None]] = []  # (rank, frame, hypothesis, emission)
        for hyp in beam:
            if hyp.time >= num_frames:
                candidates.append((hyp.score, hyp.time, hyp, None))
                continue
            scored = scoring(joint.combine(encoder_proj[hyp.time], hyp.predictor_proj[0]).unsqueeze(0), hyp.context)
            stats.joint_calls += 1
            forced = options.max_symbols_per_frame is not None and hyp.tokens_at_frame >= options.max_symbols_per_frame
            moves = [forced_blank(head, scored)] if forced else _moves(head, scored, options.beam_size,
                                                                       early=options.pruning == "early")
            for emission in moves:
                rank = emission.am_score if options.pruning == "early" else emission.score
                candidates.append((hyp.score + rank, hyp.time + emission.advance, hyp, emission))
        candidates.sort(key=lambda c: -c[0])  # stable: ties keep hypothesis, label, duration order
        kept = [_extend(model, scoring, hyp, emission, options, stats, frames.device)
                for _, _, hyp, emission in best_and_undominated(candidates, options.beam_size,
                                                                  options.dominance_slots)]
        # Equal: the same tokens in the same state, the same frame and tokens there, or both finished.
        beam = merge_hypotheses(best_first(kept), options.merge,
                                key=lambda h: (h.tokens, None, None) if h.time >= num_frames
                                else (h.tokens, h.time, h.tokens_at_frame))
        step += 1
    finished = with_final_bonus(scoring, [h for h in beam if h.time >= num_frames] or beam)
    return [h.hypothesis() for h in best_first(finished, options.length_norm)[: options.nbest]]


def best_and_undominated(candidates: list[tuple], count: int, slots: int) -> list[tuple]:
    """``count`` of ``candidates`` ``(rank, frame, ...)`` (best ranked first): the ``count - slots`` best ranked,
    then those of the others dominated by the fewest (a candidate at the same or a later frame that ranks strictly
    higher), the best ranked among equal counts; in the order of ``candidates``."""
    if slots == 0:
        return candidates[:count]
    best = count - min(slots, count)
    dominated_by = [-1 if i < best else
                    sum(other_rank > rank and other_frame >= frame for other_rank, other_frame, *_ in candidates)
                    for i, (rank, frame, *_) in enumerate(candidates)]
    chosen = sorted(range(len(candidates)), key=dominated_by.__getitem__)[:count]  # stable: rank order on ties
    return [candidates[i] for i in sorted(chosen)]


def _moves(head: HeadSpec, scored: LabelScores, beam_size: int, early: bool = False) -> list[Move]:
    """The ``beam_size`` best emissions of one joint call, by fused score (by the Transducer's with ``early``): a
    hypothesis' candidates. For TDT the best emissions pair the best labels with the best durations (the two are
    scored independently)."""
    _, labels = (scored.label_logprobs if early else scored.scores)[0].topk(min(beam_size, head.num_labels))
    scores = scored.scores[0, labels]
    label_logprobs = scored.label_logprobs[0, labels].tolist()
    if head.kind != "tdt":
        return [Move(label, 0, label_advance(head, label), score, logprob, logprob, label < head.num_tokens)
                for label, score, logprob in zip(labels.tolist(), scores.tolist(), label_logprobs)]
    duration_logprobs, duration_index = scored.duration_logprobs[0].topk(min(beam_size, len(head.durations)))
    emissions = [
        Move(label, head.durations[d], max(head.durations[d], 1) if label == head.blank_id else head.durations[d],
             score + duration_logprob, logprob + duration_logprob, logprob, label < head.num_tokens)
        for label, score, logprob in zip(labels.tolist(), scores.tolist(), label_logprobs)
        for d, duration_logprob in zip(duration_index.tolist(), duration_logprobs.tolist())
    ]
    return sorted(emissions, key=lambda e: -(e.am_score if early else e.score))[:beam_size]


def forced_blank(head: HeadSpec, scored: LabelScores) -> Move:
    """The forced blank of one joint call (see :mod:`transdec.decoding.greedy.reference`)."""
    blank, index = head.blank_id, head.forced_duration_index
    score, logprob = float(scored.scores[0, blank]), float(scored.label_logprobs[0, blank])
    duration_logprob = float(scored.duration_logprobs[0, index]) if head.kind == "tdt" else 0.0
    return Move(blank, head.forced_advance if head.kind == "tdt" else 0, head.forced_advance,
                score + duration_logprob, logprob + duration_logprob, logprob, False)


def _extend(model: DecodingModel, scoring: Scoring, hyp: UtteranceHyp, emission: Move | None, options: AlsdOptions,
            stats: DecodingStats, device: torch.device) -> UtteranceHyp:
    """``hyp`` after ``emission`` (None: a finished hypothesis, carried over)."""
    if emission is None:
        return hyp
    new = dataclasses.replace(hyp, score=hyp.score + emission.score, am_score=hyp.am_score + emission.am_score)
    if not emission.is_token:
        new.time, new.tokens_at_frame = hyp.time + emission.advance, 0
        return new
    new.tokens = hyp.tokens + (emission.label,)
    new.timestamps = hyp.timestamps + (hyp.time,)
    new.durations = hyp.durations + (emission.duration,)
    new.token_logprobs = hyp.token_logprobs + (emission.label_logprob,)
    if emission.advance > 0:
        new.time, new.tokens_at_frame = hyp.time + emission.advance, 0
    else:
        new.tokens_at_frame = hyp.tokens_at_frame + 1
    feed(model, scoring, new, emission.label, stats, device)
    return new

