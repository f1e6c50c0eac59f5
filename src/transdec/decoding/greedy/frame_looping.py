"""Batched greedy decoding that loops over frames (label-looping paper, Algorithm 2): the baseline.

The whole batch shares one frame index ``t``. At each frame the predictor runs for the whole batch,
then again after every step in which any utterance emitted a label, until every utterance has emitted
a blank there (or ``max_symbols_per_frame`` steps were taken); only then does ``t`` move. Predictor
states are kept only for the rows that emitted. This is the call pattern of the paper's Algorithm 2
and of NeMo's frame-looping decoder (which re-runs the predictor at the start of every frame); the
hypothesis updates here are masked tensor operations rather than NeMo's per-utterance Python loop, so
this baseline is, if anything, faster than the one the paper measured.

Exactness: RNN-T results equal the per-utterance reference. TDT and multi-blank are INEXACT: as in
the multi-blank paper's batched inference (Sec. 5.3) and the TDT baseline of the label-looping paper,
the shared ``t`` moves by the smallest advance any active utterance asked for, so an utterance that
predicted a longer duration or a bigger blank looks at frames the reference would skip, and its result
can depend on the rest of the batch. Those results are marked ``exact=False`` and a warning is raised.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.emissions import GreedyHead
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import GreedyOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel


class InexactDecodingWarning(UserWarning):
    """Raised when a decoder's result may differ from the per-utterance reference."""


@takes_options(GreedyOptions)
@torch.inference_mode()
def greedy_frame_looping(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: GreedyOptions,
                         fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Decode ``encoder_out [B, T, D]`` with valid ``lengths [B]``; exact for RNN-T only."""
    lengths = checked_lengths(encoder_out, lengths)
    max_symbols_per_frame = options.max_symbols_per_frame
    head, predictor, joint = model.head, model.predictor, model.joint
    exact = head.kind == "rnnt"
    if not exact:
        warnings.warn(
            f"frame-looping greedy decoding of a {head.kind} head is inexact: the batch advances by its "
            "smallest duration, so results can differ from per-utterance decoding; use greedy_label",
            InexactDecodingWarning,
            stacklevel=3,
        )
    batch_size, max_time, _ = encoder_out.shape
    device = encoder_out.device

    scoring = Scoring(head, fusions)
    read = GreedyHead(scoring, device)
    encoder_proj = joint.project_encoder(encoder_out)  # [B, T, J]
    hyps = BatchedHyps(batch_size, max_time, device, encoder_out.dtype)
    stats = DecodingStats()
    labels = torch.full((batch_size,), head.predictor_blank_id, dtype=torch.long, device=device)
    state = predictor.initial_state(batch_size)
    scorer_state = scoring.initial_state(batch_size, device)
    context = scoring.context(scorer_state)
    no_advance = torch.full_like(labels, max_time + 1)  # larger than any real advance

    t = 0
    end = int(lengths.max()) if batch_size else 0
    while t < end:
        in_frame = t < lengths
        done = ~in_frame  # rows that are finished with frame t
        advance = no_advance  # per row: how far its last emission at frame t moves it
        frame_proj = encoder_proj[:, t]  # [B, J]
        steps = 0
        while True:
            predictor_out, new_state = predictor.step(labels, state)
            stats.predictor_calls += 1
            # Rows still at frame t after max_symbols_per_frame tokens there take the forced blank.
            forced = None if max_symbols_per_frame is None or steps < max_symbols_per_frame else ~done
            emissions = read(joint.combine(frame_proj, joint.project_predictor(predictor_out)), context, forced)
            stats.joint_calls += 1
            scored = ~done
            emits = scored & ~emissions.is_blank
            hyps.add_scores(scored, emissions.scores)
            hyps.add_labels(emits, emissions.labels, t, emissions.durations, emissions.label_logprobs)
            state = predictor.select_state(emits, new_state, state)
            scorer_state = scoring.advance(scorer_state, emissions.labels, emits)
            context = scoring.context(scorer_state)
            labels = torch.where(emits, emissions.labels, labels)
            moves = scored & (emissions.advance > 0)
            advance = torch.where(moves, emissions.advance, advance)
            done = done | moves
            steps += 1
            if done.all():
                break
        t += int(advance[in_frame].min())
    return DecodingResult(hyps, stats, exact=exact)
