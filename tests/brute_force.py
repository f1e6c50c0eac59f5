"""Every decoding path of one utterance, enumerated: the ground truth beam searches are tested against.

A path is a sequence of emissions under the decoding rules of ``transdec.decoding.greedy.reference`` (a blank
moves time by 1, a big blank by its duration, a TDT emission by its duration (a blank by at least 1), a token
of an RNN-T or multi-blank head keeps it, and after ``max_symbols_per_frame`` tokens at one frame the only
emission is the forced blank, scored), taking *every* choice where greedy takes the best. Only for tiny problems.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from transdec.decoding.scoring import Scoring


@dataclass(frozen=True)
class Path:
    tokens: tuple[int, ...]
    timestamps: tuple[int, ...]
    durations: tuple[int, ...]
    score: float
    am_score: float | None = None  # with fusions: the score without them (their final bonus included in score)


@torch.inference_mode()
def all_paths(model, frames: torch.Tensor, max_symbols_per_frame: int, fusions=()) -> list[Path]:
    """Every complete path over ``frames [T, D]``. With ``fusions`` (of one utterance) a path's score is the sum of
    its fused emission scores plus the fusions' final bonus after its tokens (``Scoring.final_bonus``)."""
    head, predictor, joint = model.head, model.predictor, model.joint
    scoring = Scoring(head, fusions)
    encoder_proj = joint.project_encoder(frames.unsqueeze(0))[0]
    num_frames = frames.shape[0]
    predictor_outputs: dict[tuple[int, ...], tuple[torch.Tensor, object]] = {}
    scorer_states: dict[tuple[int, ...], tuple] = {(): scoring.initial_state(1, frames.device)}
    contexts: dict[tuple[int, ...], tuple] = {}

    def predictor_proj(tokens: tuple[int, ...]) -> torch.Tensor:
        if tokens not in predictor_outputs:
            if tokens:
                _, state = predictor_proj(tokens[:-1]), predictor_outputs[tokens[:-1]][1]
                label = tokens[-1]
            else:
                state, label = predictor.initial_state(1), head.predictor_blank_id
            out, state = predictor.step(torch.tensor([label]), state)
            predictor_outputs[tokens] = (joint.project_predictor(out)[0], state)
        return predictor_outputs[tokens][0]

    def scorer_state(tokens: tuple[int, ...]):
        if tokens not in scorer_states:
            scorer_states[tokens] = scoring.advance(scorer_state(tokens[:-1]), torch.tensor([tokens[-1]]),
                                                    torch.ones(1, dtype=torch.bool))
        return scorer_states[tokens]

    def emissions(t: int, tokens: tuple[int, ...]):
        """(label, duration, advance, score, am logprob) of every choice at frame t."""
        logits = joint.combine(encoder_proj[t], predictor_proj(tokens))
        if tokens not in contexts:
            contexts[tokens] = scoring.context(scorer_state(tokens))
        scored = scoring(logits.unsqueeze(0), contexts[tokens])
        scores, label_lp = scored.scores[0].tolist(), scored.label_logprobs[0].tolist()
        if head.kind == "tdt":
            duration_lp = scored.duration_logprobs[0].tolist()
            for label, (score, lp) in enumerate(zip(scores, label_lp)):
                for duration, dlp in zip(head.durations, duration_lp):
                    advance = max(duration, 1) if label == head.blank_id else duration
                    yield label, duration, advance, score + dlp, lp + dlp
            return
        for label, (score, lp) in enumerate(zip(scores, label_lp)):
            if label == head.blank_id:
                advance = 1
            elif label >= head.num_tokens:
                advance = head.big_blank_durations[head.blank_id - 1 - label]
            else:
                advance = 0
            yield label, 0, advance, score, lp

    paths: list[Path] = []

    def forced(label: int, duration: int) -> bool:
        return label == head.blank_id and (head.kind != "tdt" or duration == head.forced_advance)

    def extend(t, here, tokens, stamps, durations, score, am_score):
        if t >= num_frames:
            if scoring.fusions:
                final = scoring.final_bonus(scorer_state(tokens))
                paths.append(Path(tokens, stamps, durations, score + float(final if isinstance(final, float)
                                                                           else final[0]), am_score))
            else:
                paths.append(Path(tokens, stamps, durations, score))
            return
        for label, duration, advance, lp, am_lp in emissions(t, tokens):
            if here >= max_symbols_per_frame and not forced(label, duration):
                continue
            if label >= head.num_tokens:
                extend(t + advance, 0, tokens, stamps, durations, score + lp, am_score + am_lp)
                continue
            next_t, next_here = (t + advance, 0) if advance > 0 else (t, here + 1)
            extend(next_t, next_here, tokens + (label,), stamps + (t,), durations + (duration,), score + lp,
                   am_score + am_lp)

    extend(0, 0, (), (), (), 0.0, 0.0)
    return paths


def best_path(paths: list[Path]) -> Path:
    """The single best path (what a search with max merging and no pruning finds)."""
    return max(paths, key=lambda p: p.score)


def sequence_scores(paths: list[Path]) -> dict[tuple[int, ...], float]:
    """Each token sequence's log of the summed probability of its paths (what log-sum-exp merging finds)."""
    grouped: dict[tuple[int, ...], list[float]] = {}
    for path in paths:
        grouped.setdefault(path.tokens, []).append(path.score)
    return {tokens: _logsumexp(scores) for tokens, scores in grouped.items()}


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))
