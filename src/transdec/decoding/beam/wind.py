"""WIND beam search (WIND paper, Algorithm 3), one utterance at a time, RNN-T heads.

Hypotheses wait at frames: the search always takes those at the earliest frame ``t``, merges equal ones and keeps
the ``beam_size`` best, and expands each with one joint call over the window of frames ``t .. t+n-1``
(``n = min(window_size, T - t)``), its predictor output fixed. The window defines which emission comes next:

* token ``v`` at window position ``k``: blanks at ``t .. t+k-1``, then ``v`` at ``t+k``; score the blanks' and
  the token's (fused) scores; the hypothesis then waits at ``t+k`` (a token keeps the frame). A hypothesis that
  emitted ``max_symbols_per_frame`` tokens at ``t`` has no token at position 0: there its next emission is the
  forced blank, which for RNN-T is the blank;
* the blank: blanks over the whole window; the hypothesis waits at ``t+n``.

Each hypothesis keeps its ``beam_size`` best of these ``n * V + 1`` expansions. A hypothesis that waits at or past
``T`` is finished. Hypotheses are equal when they have the same tokens at the same frame with the same number of
tokens emitted there (``merge``: keep the best, or the best with their summed probability; finished ones are
equal by tokens alone). With a beam wide enough to prune nothing every path is searched for any window, so the
best hypothesis is the best path (``"max"``) or the sequence with the highest summed probability
(``"logsumexp"``); with pruning, the window changes which hypotheses compete, and so the result. ``window_size=1``
is a frame-synchronous search.

Multi-blank and TDT blanks jump by their durations, which a window of blanks cannot express: those heads are
refused (use ``beam_alsd_pp``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transdec.decoding.beam.utterance import (UtteranceHyp, best_first, feed, merge_hypotheses, search_each, start_hyp,
                                              with_final_bonus)
from transdec.decoding.inputs import check_rnnt_head
from transdec.decoding.options import BeamOptions, WindOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel


@dataclass(frozen=True)
class WindBeamOptions(BeamOptions, WindOptions):
    """Options of WIND beam search: the beam options and the window."""


@dataclass
class _Hyp(UtteranceHyp):
    """A hypothesis whose ``predictor_proj`` may lag its tokens by one: ``pending`` is the last token, fed to the
    predictor only if the hypothesis survives pruning."""

    pending: int | None = None


@takes_options(WindBeamOptions)
@torch.inference_mode()
def beam_wind(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: WindBeamOptions,
              fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """WIND beam search over ``encoder_out [B, T, D]`` with valid ``lengths [B]``, one utterance after another."""
    check_rnnt_head(model.head, "beam_wind")
    scoring, stats = Scoring(model.head, fusions), DecodingStats()
    return search_each(encoder_out, lengths, stats, scoring,
                       lambda frames, scoring: _search(model, scoring, frames, options, stats))


def _search(model: DecodingModel, scoring: Scoring, frames: torch.Tensor, options: WindBeamOptions,
            stats: DecodingStats) -> list[Hypothesis]:
    joint = model.joint
    num_frames, device = frames.shape[0], frames.device
    encoder_proj = joint.project_encoder(frames.unsqueeze(0))[0]  # [T, J]
    start = start_hyp(model, scoring, stats, device, _Hyp)
    waiting: dict[int, list[_Hyp]] = {0: [start]}
    finished: list[_Hyp] = []
    while waiting:
        t = min(waiting)
        if t >= num_frames:
            finished.extend(h for frame in list(waiting) for h in waiting.pop(frame))
            break
        hyps = best_first(merge_hypotheses(best_first(waiting.pop(t)), options.merge,
                                           key=lambda h: (h.tokens, h.tokens_at_frame)))
        for hyp in hyps[: options.beam_size]:
            if hyp.pending is not None:
                feed(model, scoring, hyp, hyp.pending, stats, device)
                hyp.pending = None
            for new in _expand(model, scoring, encoder_proj, hyp, options, stats):
                waiting.setdefault(new.time, []).append(new)
    ranked = best_first(with_final_bonus(scoring, merge_hypotheses(best_first(finished), options.merge,
                                                                   key=lambda h: h.tokens)),
                        options.length_norm)
    return [h.hypothesis() for h in ranked[: options.nbest]]


def _expand(model: DecodingModel, scoring: Scoring, encoder_proj: torch.Tensor, hyp: _Hyp, options: WindBeamOptions,
            stats: DecodingStats) -> list[_Hyp]:
    """The ``beam_size`` best expansions of ``hyp`` over its window (see the module docstring)."""
    head, t = model.head, hyp.time
    size = min(options.window_size, encoder_proj.shape[0] - t)
    scored = scoring(model.joint.combine(encoder_proj[t : t + size], hyp.predictor_proj).unsqueeze(0), hyp.context)
    stats.joint_calls += 1
    scores, logprobs = scored.scores[0], scored.label_logprobs[0]  # [n, L]
    # Blanks before each window position: [n + 1], the last one the whole window.
    blanks = torch.cat([scores.new_zeros(1), scores[:, head.blank_id].cumsum(0)])
    am_blanks = torch.cat([logprobs.new_zeros(1), logprobs[:, head.blank_id].cumsum(0)])
    token_scores = blanks[:size].unsqueeze(1) + scores[:, : head.num_tokens]  # [n, V]
    if options.max_symbols_per_frame is not None and hyp.tokens_at_frame >= options.max_symbols_per_frame:
        token_scores[0] = -torch.inf  # the forced blank at t
    token_scores = token_scores.flatten()  # [n * V]
    candidates = torch.cat([token_scores, blanks[size:]])
    best_scores, best = candidates.topk(min(options.beam_size, candidates.shape[0]))
    expansions = []
    for score, index in zip(best_scores.tolist(), best.tolist()):
        if score == -float("inf"):  # a token the forced blank rules out
            continue
        if index == size * head.num_tokens:  # the blank over the whole window
            expansions.append(dataclasses.replace(hyp, time=t + size, tokens_at_frame=0, score=hyp.score + score,
                                                  am_score=hyp.am_score + float(am_blanks[size])))
            continue
        k, token = divmod(index, head.num_tokens)
        new = dataclasses.replace(hyp, tokens=hyp.tokens + (token,), timestamps=hyp.timestamps + (t + k,),
                                  durations=hyp.durations + (0,), token_logprobs=hyp.token_logprobs + (float(logprobs[k, token]),),
                                  time=t + k, tokens_at_frame=(hyp.tokens_at_frame if k == 0 else 0) + 1,
                                  score=hyp.score + score,
                                  am_score=hyp.am_score + float(am_blanks[k] + logprobs[k, token]))
        new.pending = token
        expansions.append(new)
    return expansions
