"""Batched greedy decoding that loops over labels (label-looping paper, Algorithm 3), for every head.

The outer loop runs once per emitted label: one predictor call advances every hypothesis of the batch.
The inner loop then moves each utterance's own frame index over blanks until it finds its next label
(or runs off its end), calling only the joint. Utterances therefore never wait for each other's
frames, and the predictor runs ``longest hypothesis + 1`` times, the fewest possible.

With ``window_size > 1`` the inner loop scores a window of frames per joint call (WIND); see
:mod:`transdec.decoding.wind_window`.

The result is identical to :func:`~transdec.decoding.greedy_reference.greedy_reference` for RNN-T,
TDT and multi-blank heads, stateful and stateless predictors: each utterance keeps its own frame index
and moves it by exactly the advance the reference would (a TDT duration, a big blank's duration, the
forced advance of ``max_symbols_per_frame``).

The encoder projection is computed once for the batch and the predictor projection once per outer
step (paper, Sec. 3.4). All bookkeeping is masked tensor updates; the only host syncs are the loop
conditions.
"""

from __future__ import annotations

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.emissions import Emissions, GreedyHead
from transdec.decoding.inputs import check_max_symbols, check_window_size, checked_lengths
from transdec.decoding.results import DecodingResult, DecodingStats
from transdec.decoding.wind_window import WindowSkipper
from transdec.model.protocol import DecodingModel, Joint


@torch.inference_mode()
def greedy_label_looping(
    model: DecodingModel,
    encoder_out: torch.Tensor,
    lengths: torch.Tensor,
    max_symbols_per_frame: int | None = 10,
    window_size: int = 1,
) -> DecodingResult:
    """Decode ``encoder_out [B, T, D]`` with valid ``lengths [B]``; exact for every head.

    ``window_size > 1`` scores that many frames per joint call while looking for the next label (WIND, see
    :mod:`transdec.decoding.wind_window`); the output is identical for every window size.
    """
    lengths = checked_lengths(encoder_out, lengths)
    check_max_symbols(max_symbols_per_frame)
    check_window_size(window_size)
    head, predictor, joint = model.head, model.predictor, model.joint
    batch_size, max_time, _ = encoder_out.shape
    device = encoder_out.device

    read = GreedyHead(head, device)
    encoder_proj = joint.project_encoder(encoder_out)  # [B, T, J]
    hyps = BatchedHyps(batch_size, max_time, device, encoder_out.dtype)
    stats = DecodingStats()
    if window_size == 1:
        search: _BlankSkipper | WindowSkipper = _BlankSkipper(read, joint, encoder_proj, lengths, hyps, stats)
    else:
        search = WindowSkipper(read, joint, encoder_proj, lengths, hyps, stats, window_size)

    time = torch.zeros(batch_size, dtype=torch.long, device=device)  # each utterance's current frame
    tokens_at_frame = torch.zeros_like(time)  # tokens emitted at `time` since it last moved
    labels = torch.full_like(time, head.predictor_blank_id)
    state = predictor.initial_state(batch_size)
    active = time < lengths

    while active.any():
        predictor_out, state = predictor.step(labels, state)
        predictor_proj = joint.project_predictor(predictor_out)  # [B, J]
        stats.predictor_calls += 1

        found = search.next_labels(predictor_proj, time, tokens_at_frame, active)
        active = time < lengths  # utterances that found a label before their end
        hyps.add_labels(active, found.labels, time, found.durations, found.label_logprobs)
        hyps.add_scores(active, found.logprobs)

        stays = active & (found.advance == 0)
        tokens_at_frame = torch.where(stays, tokens_at_frame + 1, 0)
        time += torch.where(active, found.advance, 0)
        if max_symbols_per_frame is not None:
            forced = tokens_at_frame >= max_symbols_per_frame
            time += forced
            tokens_at_frame.masked_fill_(forced, 0)
        active = time < lengths
        # Finished rows still go through the predictor with the rest; feed them the blank, a valid input.
        labels = torch.where(active, found.labels, head.predictor_blank_id)

    return DecodingResult(hyps, stats)


class _BlankSkipper:
    """The inner loop: moves each searching utterance over blanks to its next label."""

    def __init__(
        self,
        read: GreedyHead,
        joint: Joint,
        encoder_proj: torch.Tensor,
        lengths: torch.Tensor,
        hyps: BatchedHyps,
        stats: DecodingStats,
    ) -> None:
        self.read = read
        self.joint = joint
        self.encoder_proj = encoder_proj
        self.lengths = lengths
        self.hyps = hyps
        self.stats = stats
        self.rows = torch.arange(encoder_proj.shape[0], device=encoder_proj.device)
        self.last_frame = max(encoder_proj.shape[1] - 1, 0)

    def next_labels(
        self, predictor_proj: torch.Tensor, time: torch.Tensor, tokens_at_frame: torch.Tensor, active: torch.Tensor
    ) -> Emissions:
        """Advance ``time`` (in place) over blanks for the ``active`` rows, scoring each blank.

        Returns the emissions at the final ``time`` of every row: a label for rows that found one
        (``time < length``); meaningless for the others. A row that found its label in an earlier pass
        is evaluated again, on the same frame and predictor output, in every later pass, so the last
        pass holds every row's label and no per-field merging is needed.
        """
        searching = active
        while True:
            frames = self.encoder_proj[self.rows, time.clamp(max=self.last_frame)]  # [B, J]
            emissions = self.read(self.joint.combine(frames, predictor_proj))
            self.stats.joint_calls += 1
            on_blank = searching & emissions.is_blank
            self.hyps.add_scores(on_blank, emissions.logprobs)
            time += torch.where(on_blank, emissions.advance, 0)
            tokens_at_frame.masked_fill_(on_blank, 0)
            searching = on_blank & (time < self.lengths)
            if not searching.any():
                return emissions
