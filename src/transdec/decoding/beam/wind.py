"""WIND beam search (WIND paper, Algorithm 3), one utterance at a time, RNN-T heads.

Hypotheses wait at frames: the search always takes those at the earliest frame ``t``, merges equal ones and keeps
the ``beam_size`` best, and expands each with one joint call over the window of frames ``t .. t+n-1``
(``n = min(window_size, T - t)``), its predictor output fixed. An expansion is one of:

* token ``v`` at window position ``k``: blanks at ``t .. t+k-1``, then ``v`` at ``t+k``; scored by the blanks' and
  the token's (fused) scores; the hypothesis then waits at ``t+k`` (a token keeps the frame). A hypothesis that
  emitted ``max_symbols_per_frame`` tokens at ``t`` has no token at position 0: there its next emission is the
  forced blank, which for RNN-T is the blank;
* the blank over the whole window; the hypothesis waits at ``t+n``.

Which expansions a hypothesis keeps is decided frame by frame along its chain of blanks, as a frame-synchronous
search would decide them: at position ``k`` (reached by blanks at ``t .. t+k-1``), the ``beam_size`` best labels at
frame ``t+k`` (tokens and the blank, by their scores there) give an expansion for each token among them; the chain
goes on to position ``k+1`` only if the blank is among them, and a chain that passes the whole window gives the
whole-window blank. Every choice is so made between emissions at the same frame, never between a token at ``t``
and blanks over many frames (the paper ranks all ``n * V + 1`` expansions together, blanks before a token counted
in, which on models whose blanks are not near-certain prunes the whole-window blank and every later position, and
floods the beam with tokens at ``t``: on a parakeet-sized random decoder at 0.4 tokens per frame it returned about
ten tokens a frame, scoring ten times lower than greedy decoding). With ``beam_size=1`` this is greedy decoding for
every window; with ``window_size=1`` it keeps the ``beam_size`` best of the tokens and the blank at ``t``.

A hypothesis that waits at or past ``T`` is finished. Hypotheses are equal when they have the same tokens at the
same frame with the same number of tokens emitted there (``merge``: keep the best, or the best with their summed
probability; finished ones are equal by tokens alone). With a beam wide enough to prune nothing every path is
searched for any window, so the best hypothesis is the best path (``"max"``) or the sequence with the highest summed
probability (``"logsumexp"``); with pruning, the window changes which hypotheses compete, and so the result.

Multi-blank and TDT blanks jump by their durations, which a window of blanks cannot express: those heads are
refused (use ``beam_alsd_pp``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transdec.decoding.beam.greedy_guard import kept_greedy
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
    result = search_each(encoder_out, lengths, stats, scoring,
                         lambda frames, scoring: _search(model, scoring, frames, options, stats))
    # Greedy decoding's hypothesis: this search at beam 1, which is greedy decoding.
    greedy = WindBeamOptions(beam_size=1, max_symbols_per_frame=options.max_symbols_per_frame,
                             window_size=options.window_size)
    return kept_greedy(result, options, lambda: beam_wind(model, encoder_out, lengths, greedy, fusions=fusions))


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
    """The expansions ``hyp`` keeps over its window (see the module docstring)."""
    head, t = model.head, hyp.time
    size = min(options.window_size, encoder_proj.shape[0] - t)
    scored = scoring(model.joint.combine(encoder_proj[t : t + size], hyp.predictor_proj).unsqueeze(0), hyp.context)
    stats.joint_calls += 1
    scores, logprobs = scored.scores[0].clone(), scored.label_logprobs[0]  # [n, L]
    if options.max_symbols_per_frame is not None and hyp.tokens_at_frame >= options.max_symbols_per_frame:
        scores[0, : head.num_tokens] = -torch.inf  # the forced blank at t
    # Blanks before each window position: [n + 1], the last one the whole window.
    blanks = torch.cat([scores.new_zeros(1), scores[:, head.blank_id].cumsum(0)])
    am_blanks = torch.cat([logprobs.new_zeros(1), logprobs[:, head.blank_id].cumsum(0)])
    expansions = []
    for k in range(size):
        best_scores, best = scores[k].topk(min(options.beam_size, scores.shape[1]))
        chain_goes_on = False
        for score, label in zip(best_scores.tolist(), best.tolist()):
            if score == -float("inf"):  # a token the forced blank rules out
                continue
            if label == head.blank_id:
                chain_goes_on = True
                continue
            new = dataclasses.replace(hyp, tokens=hyp.tokens + (label,), timestamps=hyp.timestamps + (t + k,),
                                      durations=hyp.durations + (0,),
                                      token_logprobs=hyp.token_logprobs + (float(logprobs[k, label]),),
                                      time=t + k, tokens_at_frame=(hyp.tokens_at_frame if k == 0 else 0) + 1,
                                      score=hyp.score + float(blanks[k] + score),
                                      am_score=hyp.am_score + float(am_blanks[k] + logprobs[k, label]))
            new.pending = label
            expansions.append(new)
        if not chain_goes_on:
            return expansions
    expansions.append(dataclasses.replace(hyp, time=t + size, tokens_at_frame=0, score=hyp.score + float(blanks[size]),
                                          am_score=hyp.am_score + float(am_blanks[size])))
    return expansions
