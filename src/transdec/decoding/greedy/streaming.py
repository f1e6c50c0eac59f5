"""Greedy decoding of many streams at once, chunk by chunk, with the result of decoding each stream's frames whole.

A :class:`GreedyStreams` holds up to ``S`` streams in slots. Each :meth:`~GreedyStreams.decode` call takes the
frames that arrived since the last one and runs every stream as far as its frames go, all streams in one batch
whatever their positions: the steps are label-looping's own
(:class:`~transdec.decoding.greedy.label_looping.LabelLoopingSteps`), run on the slots with the frames each stream
has received as its length. A stream whose search reaches the end of its frames (a TDT duration or a big blank may
jump past it) waits there with its whole search state, a label the predictor has not taken yet included, and goes on
when the next chunk comes. Nothing is decided on frames that have not arrived, so the tokens, timestamps, durations
and scores are those of :func:`~transdec.decoding.greedy.reference.greedy_reference` on all the stream's frames, for
any chunking.

A slot keeps only the frames its search may still read: those before the frame it stands at are dropped when
room is needed, so memory is bounded by the chunk size and not by the stream's length. :meth:`~GreedyStreams.restart`
starts a new segment where the stream stands (after an endpoint), its tokens and predictor state afresh.

With ``window_size > 1`` (:class:`~transdec.decoding.options.WindOptions` or
:class:`~transdec.decoding.greedy.label_looping.LabelLoopingOptions`) each joint call scores a WIND window of frames
from each stream's frame; the frames a stream has not received end its window, so a stream whose blanks lead past
them waits there as it does frame by frame. The output is the same for every window size.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.greedy.label_looping import LabelLoopingState, LabelLoopingSteps
from transdec.decoding.options import GreedyOptions
from transdec.decoding.results import DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.decoding.stream_frames import rebased
from transdec.protocol import DecodingModel


class GreedyStreams:
    """Up to ``max_streams`` streams of one model, decoded greedily together as their frames arrive (a
    :class:`~transdec.decoding.stream_search.StreamSearch`).

    ``open()`` gives a free slot, ``accept(slot, frames [T, D])`` queues encoder frames, ``decode()`` advances every
    stream over what it has, ``hypothesis(slot)`` is its result so far (final once its frames are all in and
    decoded), ``restart(slot)`` begins a new segment there, ``close(slot)`` frees the slot. Frames, timestamps and
    positions count from the stream's start.

    Of ``options`` the search takes ``max_symbols_per_frame`` and, where they have one, ``window_size``
    (:class:`~transdec.decoding.options.WindOptions`, and so
    :class:`~transdec.decoding.greedy.label_looping.LabelLoopingOptions`); it runs eagerly in ``dtype`` on
    ``device``.
    """

    def __init__(self, model: DecodingModel, max_streams: int, options: GreedyOptions | None = None,
                 fusions: Sequence[Fusion] = (), device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32) -> None:
        if max_streams < 1:
            raise ValueError(f"max_streams must be at least 1, got {max_streams}")
        options = options or GreedyOptions()
        self.device, self.dtype = torch.device(device), dtype
        zeros = torch.zeros(max_streams, dtype=torch.long, device=self.device)
        # The steps read both at every step: written in place, never rebound.
        self.received = zeros.clone()  # [S]: frames received per slot, the length of each stream's search
        self.offset = zeros.clone()  # [S]: the stream frame held in column 0 of `state.encoder_proj`
        self.is_open = torch.zeros(max_streams, dtype=torch.bool, device=self.device)
        self.rows = torch.arange(max_streams, device=self.device)
        self.steps = LabelLoopingSteps(model, self.received, options.max_symbols_per_frame,
                                       getattr(options, "window_size", 1), scoring=Scoring(model.head, fusions),
                                       frame_offset=self.offset)
        self.steps.state = self._fresh_state(max_streams)

    @property
    def state(self) -> LabelLoopingState:
        """The label-looping state of every slot; its ``encoder_proj [S, C, J]`` holds each slot's frames from
        ``offset`` on."""
        return self.steps.state

    @property
    def stats(self) -> DecodingStats:
        """Predictor and joint calls so far, each over every slot."""
        return self.state.stats

    @torch.inference_mode()
    def _fresh_state(self, slots: int) -> LabelLoopingState:
        """Every slot at its start, the start symbol waiting for the predictor, nothing received."""
        steps = self.steps
        blank = torch.full((slots,), steps.head.predictor_blank_id, dtype=torch.long, device=self.device)
        # One row through the predictor: the width and dtype of the joint's inputs.
        projected = steps.joint.project_predictor(steps.predictor.step(blank[:1], steps.predictor.initial_state(1))[0])
        zeros = torch.zeros_like(blank)
        no = torch.zeros_like(self.is_open)
        width = projected.shape[-1]
        return LabelLoopingState(
            hyps=BatchedHyps(slots, 1, self.device, self.dtype), encoder_proj=projected.new_zeros(slots, 1, width),
            time=zeros, tokens_at_frame=zeros.clone(), labels=blank,
            predictor_state=steps.predictor.initial_state(slots),
            scorer_state=steps.scoring.initial_state(slots, self.device), active=no, active_any=no.any(),
            stats=DecodingStats(), pending=~no, predictor_proj=projected.new_zeros(slots, width))

    @torch.inference_mode()
    def open(self) -> int:
        """A free slot, reset to the start of a stream; ValueError when every slot is taken."""
        free = (~self.is_open).nonzero().flatten().tolist()
        if not free:
            raise ValueError(f"all {len(self.rows)} streams are open; close one first")
        slot = free[0]
        self.restart(slot)
        for field in (self.offset, self.received, self.state.time):
            field[slot] = 0
        self.is_open[slot] = True
        return slot

    @torch.inference_mode()
    def restart(self, slot: int) -> None:
        """Begin a new segment of the stream in ``slot`` where its search stands: no tokens, the predictor and the
        fusions at their start (as at the start of an utterance); the frames and positions go on."""
        state, steps, mask = self.state, self.steps, self.rows == slot
        slots = len(self.rows)
        state.predictor_state = steps.predictor.select_state(mask, steps.predictor.initial_state(slots),
                                                             state.predictor_state)
        state.labels[slot] = steps.head.predictor_blank_id
        state.pending[slot] = True
        state.scorer_state = steps.scoring.select_state(mask, steps.scoring.initial_state(slots, self.device),
                                                        state.scorer_state)
        state.tokens_at_frame[slot] = 0
        state.hyps.lengths[slot] = 0
        state.hyps.scores[slot] = 0

    @torch.inference_mode()
    def close(self, slot: int) -> Hypothesis:
        """Free ``slot``; returns its stream's hypothesis."""
        hypothesis = self.hypothesis(slot)
        self.is_open[slot] = False
        # Its search must not take another step: it has no frames past where it stands.
        self.received[slot] = torch.minimum(self.received[slot], self.state.time[slot])
        return hypothesis

    @torch.inference_mode()
    def accept(self, slot: int, frames: torch.Tensor) -> None:
        """Queue encoder frames ``[T, D]`` of the stream in ``slot``; they are decoded by the next :meth:`decode`."""
        if not bool(self.is_open[slot]):
            raise ValueError(f"stream slot {slot} is not open")
        if frames.dim() != 2:
            raise ValueError(f"frames must be [T, D], got {tuple(frames.shape)}")
        state = self.state
        start = int(self.received[slot])
        end = start + frames.shape[0]
        if end - int(self.offset[slot]) > state.encoder_proj.shape[1]:
            self._make_room(slot, end)
        offset = int(self.offset[slot])
        state.encoder_proj[slot, start - offset : end - offset] = self.steps.joint.project_encoder(
            frames.to(self.device, self.dtype)[None])[0]
        self.received[slot] = end

    def _make_room(self, slot: int, end: int) -> None:
        """Drop every slot's frames before the one its search stands at (never read again); then grow the buffer
        if frames up to ``end`` of ``slot`` still do not fit."""
        state = self.state
        first = torch.minimum(state.time, self.received)
        state.encoder_proj = rebased(state.encoder_proj, self.offset, first, end - int(first[slot]))
        self.offset.copy_(first)

    @torch.inference_mode()
    def decode(self) -> None:
        """Run every open stream as far as its received frames go (one batch for all of them)."""
        state = self.state
        state.active = state.time < self.received  # closed slots have no frames past their search
        state.active_any = state.active.any()
        self.steps.label_loop()
        state.hyps.recount()

    def finish(self, slot: int) -> None:
        """No more frames will come for ``slot``: nothing to do, a greedy search decides nothing past its frames."""

    def position(self, slot: int) -> int:
        """The frame up to which the stream's search has decoded (at most the frames received)."""
        return int(torch.minimum(self.state.time[slot], self.received[slot]))

    def best(self, slot: int) -> Hypothesis:
        """The stream's hypothesis so far (as :meth:`hypothesis`)."""
        return self.hypothesis(slot)

    def nbest(self, slot: int) -> list[Hypothesis]:
        """The stream's hypothesis so far, the one of its n-best."""
        return [self.hypothesis(slot)]

    def hypothesis(self, slot: int) -> Hypothesis:
        """The stream's tokens, timestamps (frames from its start), durations and score so far."""
        hyps = self.state.hyps
        length = int(hyps.lengths[slot])
        return Hypothesis(hyps.tokens[slot, :length].tolist(), hyps.timestamps[slot, :length].tolist(),
                          hyps.durations[slot, :length].tolist(), hyps.token_logprobs[slot, :length].tolist(),
                          float(hyps.scores[slot]))
