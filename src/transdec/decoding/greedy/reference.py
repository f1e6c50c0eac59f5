"""Per-utterance greedy decoding (label-looping paper, Algorithm 1): the executable specification.

Every other greedy decoder must give the same tokens, timestamps and durations as this one. It runs
one utterance at a time with plain Python control flow and reads the joint output with its own
scalar code, so that it shares no decision logic with the batched decoders it checks.

Semantics, with ``t`` the current encoder frame of an utterance of ``T`` frames:

* At each step the joint scores frame ``t`` against the predictor output for the labels so far.
* RNN-T: argmax over tokens and blank. A blank moves ``t`` by 1; a token is emitted at frame ``t`` and
  ``t`` stays.
* Multi-blank: argmax over tokens, big blanks and blank (one softmax). A big blank moves ``t`` by its
  duration; the blank by 1; a token is emitted and ``t`` stays.
* TDT: the label (tokens and blank) and the duration are two independent argmaxes over separately
  normalised logits. A token is emitted with that duration and ``t`` moves by it (0 keeps ``t``); a
  blank moves ``t`` by its duration, and by 1 if the duration is 0.
* ``max_symbols_per_frame = n``: after ``n`` tokens emitted at one frame without ``t`` moving, the next
  emission is the *forced blank* whatever the argmax: the blank (multi-blank: the standard blank; TDT: the blank
  with duration 1, or the smallest positive duration a head without 1 has), scored as any emission, so that a
  score is always the log-probability of a path. It moves ``t`` by 1 (that duration). ``None`` sets no limit.
* Decoding stops once ``t >= T``; a duration or big blank may jump past the end.
* A token's timestamp is the frame it was emitted at; its duration is the TDT duration, or 0.
* The score is the sum of the log-probabilities of all emissions, blanks included; for TDT each
  emission's log-probability includes its duration's.
* With fusions, labels are chosen by the fused scores of :class:`~transdec.decoding.scoring.Scoring` and
  the score sums those; ``token_logprobs`` stay the Transducer's own.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import GreedyOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, LabelScores, Scoring
from transdec.protocol import DecodingModel, HeadSpec


@takes_options(GreedyOptions)
@torch.inference_mode()
def greedy_reference(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: GreedyOptions,
                     fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Decode ``encoder_out [B, T, D]`` with valid ``lengths [B]``, one utterance after another."""
    lengths = checked_lengths(encoder_out, lengths)
    scoring = Scoring(model.head, fusions)
    stats = DecodingStats()
    hypotheses = [
        _decode_utterance(model, scoring.for_utterance(b), encoder_out[b, :length], options.max_symbols_per_frame,
                          stats)
        for b, length in enumerate(lengths.tolist())
    ]
    return DecodingResult(BatchedHyps.from_hypotheses(hypotheses, encoder_out.device, encoder_out.dtype), stats)


def _decode_utterance(
    model: DecodingModel, scoring: Scoring, frames: torch.Tensor, max_symbols_per_frame: int | None,
    stats: DecodingStats
) -> Hypothesis:
    """Greedy decoding of one utterance's encoder frames ``[T, D]``."""
    head, predictor, joint = model.head, model.predictor, model.joint
    encoder_proj = joint.project_encoder(frames.unsqueeze(0))[0]  # [T, J]
    start = torch.tensor([head.predictor_blank_id], device=frames.device)
    predictor_out, state = predictor.step(start, predictor.initial_state(1))
    predictor_proj = joint.project_predictor(predictor_out)[0]  # [J]
    stats.predictor_calls += 1
    scorer_state = scoring.initial_state(1, frames.device)
    context = scoring.context(scorer_state)

    hyp = Hypothesis()
    t, tokens_at_frame = 0, 0
    while t < frames.shape[0]:
        scored = scoring(joint.combine(encoder_proj[t], predictor_proj).unsqueeze(0), context)
        stats.joint_calls += 1
        forced = max_symbols_per_frame is not None and tokens_at_frame >= max_symbols_per_frame
        label, duration, advance, label_logprob, logprob = _read_step(head, scored, forced)
        hyp.score += logprob
        stats.emissions["blank" if label >= head.num_tokens else "token", advance] += 1
        if label >= head.num_tokens:  # a blank of any kind
            t += advance
            tokens_at_frame = 0
            continue
        hyp.tokens.append(label)
        hyp.timestamps.append(t)
        hyp.durations.append(duration)
        hyp.token_logprobs.append(label_logprob)
        label_tensor = torch.tensor([label], device=frames.device)
        predictor_out, state = predictor.step(label_tensor, state)
        scorer_state = scoring.advance(scorer_state, label_tensor, torch.ones(1, dtype=torch.bool, device=frames.device))
        context = scoring.context(scorer_state)
        predictor_proj = joint.project_predictor(predictor_out)[0]
        stats.predictor_calls += 1
        if advance > 0:
            t += advance
            tokens_at_frame = 0
        else:
            tokens_at_frame += 1
    return hyp


def _read_step(head: HeadSpec, scored: LabelScores, forced: bool = False) -> tuple[int, int, int, float, float]:
    """The greedy choice from the scores of one joint call (``[1, L]`` and, for TDT, ``[1, K]``), or with
    ``forced`` the forced blank.

    Returns ``(label, duration, advance, label_logprob, score)``: ``duration`` is the TDT duration (0 for
    other heads), ``advance`` how far ``t`` moves (see the module docstring), ``label_logprob`` the
    Transducer's and ``score`` the fused one (plus the duration's log-prob for TDT).
    """
    scores = scored.scores[0].tolist()
    label = max(range(len(scores)), key=scores.__getitem__)  # the first of equal maxima, as torch.argmax
    if forced:
        label = head.blank_id
    label_logprob = float(scored.label_logprobs[0, label])
    if head.kind == "tdt":
        duration_logprobs = scored.duration_logprobs[0].tolist()
        duration_index = max(range(len(duration_logprobs)), key=duration_logprobs.__getitem__)
        if forced:
            duration_index = head.forced_duration_index
        duration = head.durations[duration_index]
        advance = max(duration, 1) if label == head.blank_id else duration
        return label, duration, advance, label_logprob, scores[label] + duration_logprobs[duration_index]
    if label == head.blank_id:
        advance = 1
    elif label >= head.num_tokens:  # big blank i sits at blank_id - 1 - i
        advance = head.big_blank_durations[head.blank_id - 1 - label]
    else:
        advance = 0
    return label, 0, advance, label_logprob, scores[label]
