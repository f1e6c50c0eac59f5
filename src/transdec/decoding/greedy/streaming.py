"""Greedy decoding of many streams at once, chunk by chunk, with the result of decoding each stream's frames whole.

A :class:`GreedyStreams` holds up to ``S`` streams in slots. Each :meth:`~GreedyStreams.decode` call takes the
frames that arrived since the last one and runs every stream as far as its frames go, all streams in one batch
whatever their positions: a stream whose search reaches the end of its frames (a TDT duration or a big blank may
jump past it) waits there with its whole search state, and goes on when the next chunk comes. Nothing is decided
on frames that have not arrived, so the tokens, timestamps, durations and scores are those of
:func:`~transdec.decoding.greedy.reference.greedy_reference` on all the stream's frames, for any chunking.

A slot keeps only the frames its search may still read: those before the frame it stands at are dropped when
room is needed, so memory is bounded by the chunk size and not by the stream's length. :meth:`~GreedyStreams.restart`
starts a new segment where the stream stands (after an endpoint), its tokens and predictor state afresh.

The search is label-looping (Algorithm 3 of the label-looping paper) over streams at different frames: in the frame
loop every stream still searching reads its frame, a blank moves it on and a token ends its search for this label;
then one predictor step takes every token found. Streams at different positions only mean different frames to read.

With ``window_size > 1`` (:class:`~transdec.decoding.options.WindOptions` or
:class:`~transdec.decoding.greedy.label_looping.LabelLoopingOptions`) each joint call of the frame loop scores a WIND
window of frames from each stream's frame and follows the blanks the reference would through it
(:class:`~transdec.decoding.greedy.wind_window.WindowScan`); the frames a stream has not received end its window,
so a stream whose blanks lead past them waits there as it does frame by frame. The output is the same for every
window size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.emissions import Emissions, GreedyHead
from transdec.decoding.greedy.wind_window import WindowScan
from transdec.decoding.options import GreedyOptions, WindOptions
from transdec.decoding.results import DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring, ScorerState
from transdec.decoding.stream_frames import rebased
from transdec.protocol import DecodingModel, PredictorState


@dataclass(slots=True)
class StreamsState:
    """Everything the streams carry from one :meth:`GreedyStreams.decode` call to the next, ``S`` slots."""

    encoder_proj: torch.Tensor  # [S, C, J]: each slot's frames from `offset` on, projected for the joint
    offset: torch.Tensor  # [S] long: the stream frame held in column 0 of `encoder_proj`
    received: torch.Tensor  # [S] long: frames received per slot
    time: torch.Tensor  # [S] long: the frame each slot's search stands at (may lie past `received`)
    tokens_at_frame: torch.Tensor  # [S] long: tokens emitted at `time` since it last moved
    predictor_state: PredictorState  # S rows, after each slot's last token
    predictor_proj: torch.Tensor  # [S, J]: the predictor output after each slot's last token, projected
    scorer_state: tuple[ScorerState, ...]  # each fusion's state, S rows
    hyps: BatchedHyps  # each slot's tokens so far and its path score
    is_open: torch.Tensor  # [S] bool: slots holding a stream


class GreedyStreams:
    """Up to ``max_streams`` streams of one model, decoded greedily together as their frames arrive.

    ``open()`` gives a free slot, ``accept(slot, frames [T, D])`` queues encoder frames, ``decode()`` advances every
    stream over what it has, ``hypothesis(slot)`` is its result so far (final once its frames are all in and
    decoded), ``restart(slot)`` begins a new segment there, ``close(slot)`` frees the slot. Frames, timestamps and
    positions count from the stream's start.

    Of ``options`` the search takes ``max_symbols_per_frame`` and, from :class:`WindOptions` (and so
    :class:`~transdec.decoding.greedy.label_looping.LabelLoopingOptions`), ``window_size``; it runs eagerly in
    ``dtype`` on ``device``.
    """

    def __init__(self, model: DecodingModel, max_streams: int, options: GreedyOptions | None = None,
                 fusions: Sequence[Fusion] = (), device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32) -> None:
        if max_streams < 1:
            raise ValueError(f"max_streams must be at least 1, got {max_streams}")
        self.head, self.predictor, self.joint = model.head, model.predictor, model.joint
        options = options or GreedyOptions()
        self.max_symbols = options.max_symbols_per_frame
        self.device, self.dtype = torch.device(device), dtype
        self.scoring = Scoring(self.head, fusions)
        self.read = GreedyHead(self.scoring, self.device)
        self.stats = DecodingStats()
        self.rows = torch.arange(max_streams, device=self.device)
        self.window_size = options.window_size if isinstance(options, WindOptions) else 1
        self.window_scan = None if self.window_size == 1 else WindowScan(self.read, self.joint, self.max_symbols,
                                                                         self.window_size, max_streams, self.device)
        self._start = self._fresh_state(max_streams, capacity=1)
        self.state = self._fresh_state(max_streams, capacity=1)

    @torch.inference_mode()
    def _fresh_state(self, slots: int, capacity: int) -> StreamsState:
        """Every slot at its start: the predictor fed the start symbol, nothing received."""
        start = torch.full((slots,), self.head.predictor_blank_id, dtype=torch.long, device=self.device)
        out, predictor_state = self.predictor.step(start, self.predictor.initial_state(slots))
        predictor_proj = self.joint.project_predictor(out)
        zeros = torch.zeros(slots, dtype=torch.long, device=self.device)
        return StreamsState(
            encoder_proj=predictor_proj.new_zeros(slots, capacity, predictor_proj.shape[-1]),
            offset=zeros, received=zeros.clone(), time=zeros.clone(), tokens_at_frame=zeros.clone(),
            predictor_state=predictor_state,
            predictor_proj=predictor_proj, scorer_state=self.scoring.initial_state(slots, self.device),
            hyps=BatchedHyps(slots, 1, self.device, self.dtype), is_open=torch.zeros_like(zeros, dtype=torch.bool))

    @torch.inference_mode()
    def open(self) -> int:
        """A free slot, reset to the start of a stream; ValueError when every slot is taken."""
        free = (~self.state.is_open).nonzero().flatten().tolist()
        if not free:
            raise ValueError(f"all {len(self.rows)} streams are open; close one first")
        slot = free[0]
        self.restart(slot)
        for field in (self.state.offset, self.state.received, self.state.time):
            field[slot] = 0
        self.state.is_open[slot] = True
        return slot

    @torch.inference_mode()
    def restart(self, slot: int) -> None:
        """Begin a new segment of the stream in ``slot`` where its search stands: no tokens, the predictor and the
        fusions at their start (as at the start of an utterance); the frames and positions go on."""
        state, start, mask = self.state, self._start, self.rows == slot
        state.predictor_state = self.predictor.select_state(mask, start.predictor_state, state.predictor_state)
        state.predictor_proj[slot] = start.predictor_proj[slot]
        state.scorer_state = self.scoring.select_state(mask, start.scorer_state, state.scorer_state)
        state.tokens_at_frame[slot] = 0
        state.hyps.lengths[slot] = 0
        state.hyps.scores[slot] = 0

    @torch.inference_mode()
    def close(self, slot: int) -> Hypothesis:
        """Free ``slot``; returns its stream's hypothesis."""
        hypothesis = self.hypothesis(slot)
        self.state.is_open[slot] = False
        return hypothesis

    @torch.inference_mode()
    def accept(self, slot: int, frames: torch.Tensor) -> None:
        """Queue encoder frames ``[T, D]`` of the stream in ``slot``; they are decoded by the next :meth:`decode`."""
        state = self.state
        if not bool(state.is_open[slot]):
            raise ValueError(f"stream slot {slot} is not open")
        if frames.dim() != 2:
            raise ValueError(f"frames must be [T, D], got {tuple(frames.shape)}")
        start = int(state.received[slot])
        end = start + frames.shape[0]
        if end - int(state.offset[slot]) > state.encoder_proj.shape[1]:
            self._make_room(slot, end)
        offset = int(state.offset[slot])
        state.encoder_proj[slot, start - offset : end - offset] = self.joint.project_encoder(
            frames.to(self.device, self.dtype)[None])[0]
        state.received[slot] = end

    def _make_room(self, slot: int, end: int) -> None:
        """Drop every slot's frames before the one its search stands at (never read again); then grow the buffer
        if frames up to ``end`` of ``slot`` still do not fit."""
        state = self.state
        first = torch.minimum(state.time, state.received)
        state.encoder_proj = rebased(state.encoder_proj, state.offset, first, end - int(first[slot]))
        state.offset = first

    @torch.inference_mode()
    def decode(self) -> None:
        """Run every open stream as far as its received frames go (one batch for all of them)."""
        state, head = self.state, self.head
        while True:
            active = state.is_open & (state.time < state.received)  # [S]
            if not bool(active.any()):
                break
            # The frame loop: each searching stream reads its frame (or window) and moves over blanks (while it
            # has frames), a token ends its search for this label. Then one predictor step for every token found.
            searching, found = active, torch.zeros_like(active)
            labels = torch.full_like(state.time, head.predictor_blank_id)
            context = self.scoring.context(state.scorer_state)
            while True:
                emission, emits = self._skip_blanks(searching, context)
                self.stats.joint_calls += 1
                state.hyps.add_scores(emits, emission.scores)
                state.hyps.add_labels(emits, emission.labels, state.time, emission.durations,
                                      emission.label_logprobs)
                moves = emits & (emission.advance > 0)
                state.tokens_at_frame = torch.where(moves, 0, state.tokens_at_frame + emits.long())
                state.time = state.time + torch.where(emits, emission.advance, 0)
                found = found | emits
                labels = torch.where(emits, emission.labels, labels)
                searching = searching & ~emits & (state.time < state.received)
                if not bool(searching.any()):
                    break
            if bool(found.any()):
                out, stepped = self.predictor.step(labels, state.predictor_state)
                self.stats.predictor_calls += 1
                state.predictor_state = self.predictor.select_state(found, stepped, state.predictor_state)
                state.predictor_proj = torch.where(found[:, None], self.joint.project_predictor(out),
                                                   state.predictor_proj)
                state.scorer_state = self.scoring.advance(state.scorer_state, labels, found)
        state.hyps.recount()

    def _skip_blanks(self, searching: torch.Tensor,
                     context: tuple[torch.Tensor, ...]) -> tuple[Emissions, torch.Tensor]:
        """One joint call: the ``searching [S]`` streams move over the blanks of their frame (or window), their
        scores take those blanks'. Returns the emission at each stream's frame (``[S]`` per field) and the streams
        that found a token there, on a received frame."""
        state = self.state
        if self.window_scan is None:  # frame by frame: fewer operations per call than a window of one
            column = (state.time - state.offset).clamp(0, state.encoder_proj.shape[1] - 1)
            frames = state.encoder_proj[self.rows, column]  # [S, J]
            forced = None if self.max_symbols is None else state.tokens_at_frame >= self.max_symbols
            emissions = self.read(self.joint.combine(frames, state.predictor_proj), context, forced)
            on_blank = searching & emissions.is_blank
            state.hyps.add_scores(on_blank, emissions.scores)
            state.time = state.time + torch.where(on_blank, emissions.advance, 0)
            state.tokens_at_frame = state.tokens_at_frame.masked_fill(on_blank, 0)
            return emissions, searching & ~emissions.is_blank
        # The window in buffer columns: it starts at the stream's frame (column 0, frame `offset`, is never past it,
        # so no dropped frame is read), and the frames not received yet (the limit) end its chain of blanks, so
        # nothing is decided on them; a stream whose chain reaches them waits there.
        emissions, end, crossed = self.window_scan.scan(state.encoder_proj, state.predictor_proj, context,
                                                        state.time - state.offset, state.received - state.offset,
                                                        state.tokens_at_frame)
        state.hyps.add_scores(searching, crossed)
        moved = torch.where(searching, end, 0)
        state.time = state.time + moved
        state.tokens_at_frame = state.tokens_at_frame.masked_fill(moved > 0, 0)
        found_token = searching & (end < self.window_size) & (state.time < state.received)
        return self.window_scan.at(emissions, end), found_token

    def finish(self, slot: int) -> None:
        """No more frames will come for ``slot``: nothing to do, a greedy search decides nothing past its frames."""

    def position(self, slot: int) -> int:
        """The frame up to which the stream's search has decoded (at most the frames received)."""
        return int(torch.minimum(self.state.time[slot], self.state.received[slot]))

    def best(self, slot: int) -> Hypothesis:
        """The stream's hypothesis so far (as :meth:`hypothesis`; the name the beam streams share)."""
        return self.hypothesis(slot)

    def hypothesis(self, slot: int) -> Hypothesis:
        """The stream's tokens, timestamps (frames from its start), durations and score so far."""
        hyps = self.state.hyps
        length = int(hyps.lengths[slot])
        return Hypothesis(hyps.tokens[slot, :length].tolist(), hyps.timestamps[slot, :length].tolist(),
                          hyps.durations[slot, :length].tolist(), hyps.token_logprobs[slot, :length].tolist(),
                          float(hyps.scores[slot]))
