"""Greedy decoding one utterance at a time with a WIND window (WIND paper, Algorithm 2), for every head.

This is the batch-1 path: plain Python control flow around one joint call per window ``[w, C]`` of
frames ``t .. t+w-1`` (clipped at the utterance end), with the encoder projected once per utterance and
the predictor projected once per label. ``window_size=1`` is the classic per-frame loop (Algorithm 1).

Inside a window it follows the frames the reference would visit: a blank at position ``k`` moves to
``k + advance`` (1, a big blank's duration or a TDT blank's duration), and the first *visited* label is
the next label (see :mod:`transdec.decoding.greedy.wind_window` for why the first non-blank is wrong for
multi-blank and TDT). A label found at position ``k`` is stamped with frame ``t + k``. The output is
identical to :func:`~transdec.decoding.greedy.reference.greedy_reference`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.emissions import GreedyHead
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import WindOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel


@takes_options(WindOptions)
@torch.inference_mode()
def greedy_wind(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: WindOptions,
                fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Decode ``encoder_out [B, T, D]`` with valid ``lengths [B]`` one utterance after another."""
    lengths = checked_lengths(encoder_out, lengths)
    stats = DecodingStats()
    read = GreedyHead(Scoring(model.head, fusions), encoder_out.device)
    hypotheses = [
        _decode_utterance(model, read, encoder_out[b, :length], options.max_symbols_per_frame, options.window_size,
                          stats, read.scoring.for_utterance(b))
        for b, length in enumerate(lengths.tolist())
    ]
    return DecodingResult(BatchedHyps.from_hypotheses(hypotheses, encoder_out.device, encoder_out.dtype), stats)


def _decode_utterance(model: DecodingModel, read: GreedyHead, frames: torch.Tensor,
                      max_symbols_per_frame: int | None, window: int, stats: DecodingStats,
                      scoring: Scoring) -> Hypothesis:
    """Greedy decoding of one utterance's encoder frames ``[T, D]``; ``scoring`` is ``read``'s for this utterance
    (:meth:`~transdec.decoding.scoring.Scoring.for_utterance`): it holds the fusion states."""
    head, predictor, joint = model.head, model.predictor, model.joint
    num_frames = frames.shape[0]
    hyp = Hypothesis()
    if num_frames == 0:
        return hyp
    encoder_proj = joint.project_encoder(frames.unsqueeze(0))[0]  # [T, J]
    label = torch.tensor([head.predictor_blank_id], device=frames.device)
    state = predictor.initial_state(1)
    scorer_state = scoring.initial_state(1, frames.device)
    emitted = torch.ones(1, dtype=torch.bool, device=frames.device)
    t, tokens_at_frame = 0, 0
    while t < num_frames:
        predictor_out, state = predictor.step(label, state)
        predictor_proj = joint.project_predictor(predictor_out)  # [1, J]
        stats.predictor_calls += 1
        context = scoring.context(scorer_state)
        # Look for the next label, a window at a time.
        while True:
            size = min(window, num_frames - t)
            # The forced blank after max_symbols_per_frame tokens at frame t: the window's first emission.
            forced = None
            if max_symbols_per_frame is not None and tokens_at_frame >= max_symbols_per_frame:
                forced = torch.arange(size, device=frames.device) == 0
            # fields [size]; the one hypothesis' context [1, V] broadcasts over the window
            emissions = read(joint.combine(encoder_proj[t : t + size], predictor_proj), context, forced)
            stats.joint_calls += 1
            is_blank = emissions.is_blank.tolist()
            advance = emissions.advance.tolist()
            scores = emissions.scores.tolist()
            k = 0
            while k < size and is_blank[k]:
                hyp.score += scores[k]
                k += advance[k]
            stats.window_jumps[k] += 1
            if k > 0:
                tokens_at_frame = 0
            t += k
            if k < size or t >= num_frames:
                break
        if t >= num_frames:
            break
        token = int(emissions.labels[k])
        duration = int(emissions.durations[k]) if emissions.durations is not None else 0
        hyp.tokens.append(token)
        hyp.timestamps.append(t)
        hyp.durations.append(duration)
        hyp.token_logprobs.append(float(emissions.label_logprobs[k]))
        hyp.score += scores[k]
        label = emissions.labels[k : k + 1]
        scorer_state = scoring.advance(scorer_state, label, emitted)
        if advance[k] > 0:
            t += advance[k]
            tokens_at_frame = 0
        else:
            tokens_at_frame += 1
    return hyp
