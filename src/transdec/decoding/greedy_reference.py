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
* ``max_symbols_per_frame = n``: after ``n`` tokens emitted at one frame without ``t`` moving, ``t``
  is forced forward by 1 (no blank is scored). ``None`` sets no limit.
* Decoding stops once ``t >= T``; a duration or big blank may jump past the end.
* A token's timestamp is the frame it was emitted at; its duration is the TDT duration, or 0.
* The score is the sum of the log-probabilities of all emissions, blanks included; for TDT each
  emission's log-probability includes its duration's.
"""

from __future__ import annotations

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.inputs import check_max_symbols, checked_lengths
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.model.protocol import DecodingModel, HeadSpec


@torch.inference_mode()
def greedy_reference(
    model: DecodingModel,
    encoder_out: torch.Tensor,
    lengths: torch.Tensor,
    max_symbols_per_frame: int | None = 10,
) -> DecodingResult:
    """Decode ``encoder_out [B, T, D]`` with valid ``lengths [B]``, one utterance after another."""
    lengths = checked_lengths(encoder_out, lengths)
    check_max_symbols(max_symbols_per_frame)
    stats = DecodingStats()
    hypotheses = [
        _decode_utterance(model, encoder_out[b, :length], max_symbols_per_frame, stats)
        for b, length in enumerate(lengths.tolist())
    ]
    return DecodingResult(BatchedHyps.from_hypotheses(hypotheses, encoder_out.device, encoder_out.dtype), stats)


def _decode_utterance(
    model: DecodingModel, frames: torch.Tensor, max_symbols_per_frame: int | None, stats: DecodingStats
) -> Hypothesis:
    """Greedy decoding of one utterance's encoder frames ``[T, D]``."""
    head, predictor, joint = model.head, model.predictor, model.joint
    encoder_proj = joint.project_encoder(frames.unsqueeze(0))[0]  # [T, J]
    start = torch.tensor([head.predictor_blank_id], device=frames.device)
    predictor_out, state = predictor.step(start, predictor.initial_state(1))
    predictor_proj = joint.project_predictor(predictor_out)[0]  # [J]
    stats.predictor_calls += 1

    hyp = Hypothesis()
    t, tokens_at_frame = 0, 0
    while t < frames.shape[0]:
        logits = joint.combine(encoder_proj[t], predictor_proj)
        stats.joint_calls += 1
        label, duration, advance, label_logprob, logprob = _read_step(head, logits)
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
        predictor_out, state = predictor.step(torch.tensor([label], device=frames.device), state)
        predictor_proj = joint.project_predictor(predictor_out)[0]
        stats.predictor_calls += 1
        if advance > 0:
            t += advance
            tokens_at_frame = 0
        else:
            tokens_at_frame += 1
            if max_symbols_per_frame is not None and tokens_at_frame >= max_symbols_per_frame:
                t += 1
                tokens_at_frame = 0
    return hyp


def _read_step(head: HeadSpec, logits: torch.Tensor) -> tuple[int, int, int, float, float]:
    """The greedy choice from one logit vector ``[C]``.

    Returns ``(label, duration, advance, label_logprob, logprob)``: ``duration`` is the TDT duration
    (0 for other heads) and ``advance`` how far ``t`` moves (see the module docstring).
    """
    if head.kind == "tdt":
        label_logprobs = logits[: head.num_labels].log_softmax(dim=0)
        duration_logprobs = logits[head.num_labels :].log_softmax(dim=0)
        label = int(label_logprobs.argmax())
        duration_index = int(duration_logprobs.argmax())
        duration = head.durations[duration_index]
        advance = max(duration, 1) if label == head.blank_id else duration
        label_logprob = float(label_logprobs[label])
        return label, duration, advance, label_logprob, label_logprob + float(duration_logprobs[duration_index])

    logprobs = logits.log_softmax(dim=0)
    label = int(logprobs.argmax())
    if label == head.blank_id:
        advance = 1
    elif label >= head.num_tokens:  # big blank i sits at blank_id - 1 - i
        advance = head.big_blank_durations[head.blank_id - 1 - label]
    else:
        advance = 0
    return label, 0, advance, float(logprobs[label]), float(logprobs[label])
