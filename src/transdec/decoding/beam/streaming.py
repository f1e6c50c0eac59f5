"""ALSD++ beam search of many streams at once, chunk by chunk, with the n-best of decoding each stream's frames whole.

A :class:`BeamStreams` holds up to ``S`` streams in slots, each with its beam of ``K`` hypotheses. Each
:meth:`~BeamStreams.decode` call runs every stream as far as the frames it has received allow, all streams in one
batch whatever their positions: the search step is ALSD++'s own (:class:`~transdec.decoding.beam.alsd_pp.AlsdSteps`),
run on the ``S x K`` hypotheses of the slots.

ALSD++ ranks all hypotheses of an utterance against each other at every step, so a stream takes a step only when
every live hypothesis of its beam can take it: while any of them stands at a frame that has not arrived (a TDT
duration or a big blank may jump past the frames received), the stream waits at that step boundary with its whole
beam, unchanged, until the next chunk comes or :meth:`~BeamStreams.finish` says that no more will. From then on
the frames received are the stream's length ``T``, and a hypothesis at or past ``T`` is finished, as in the offline
search. Merging needs to know the same (two hypotheses with the same tokens past ``T`` are one); a step after
which a live hypothesis stands past the frames received, before ``T`` is known, leaves its merge to be done before
the stream's next step (the stream waits in between, so the merge sees what it would have seen then). Nothing is
decided on frames that have not arrived: for any chunking, the n-best after ``finish`` and ``decode`` is that of
:func:`~transdec.decoding.beam.alsd_pp.beam_alsd_pp` on the stream's frames (tokens, timestamps, durations, scores
and order).

A slot keeps only the frames its beam may still read (from its earliest live hypothesis on), and the hypotheses'
tree of tokens is compacted when its buffers fill (each hypothesis' tokens in a chain of its own, the steps without
a token dropped), so memory follows the chunk size and the hypotheses' tokens, not the number of steps taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transdec.decoding.beam.alsd_pp import AlsdPlusOptions, AlsdState, AlsdSteps
from transdec.decoding.beam_hyps import BatchedBeamHyps
from transdec.decoding.results import DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.decoding.stream_frames import rebased
from transdec.protocol import DecodingModel

#: Steps the hypotheses' tree holds at least, after a compaction as at the start.
MIN_TREE_CAPACITY = 64


@dataclass(slots=True)
class BeamStreamsState:
    """Everything the streams carry from one :meth:`BeamStreams.decode` call to the next: ``S`` slots of ``K``
    hypotheses each."""

    search: AlsdState  # the ALSD++ state of the S x K hypotheses; its encoder_proj [S, C, J]: frames from `offset`
    offset: torch.Tensor  # [S] long: the stream frame held in column 0 of `search.encoder_proj`
    received: torch.Tensor  # [S] long: frames received per slot
    finished: torch.Tensor  # [S] bool: finish() was called: `received` is the stream's length
    merge_pending: torch.Tensor  # [S] bool: the merge after the slot's last step waits for the stream's length
    is_open: torch.Tensor  # [S] bool: slots holding a stream


class BeamStreams:
    """Up to ``max_streams`` streams of one model, decoded by ALSD++ beam search together as their frames arrive.

    ``open()`` gives a free slot, ``accept(slot, frames [T, D])`` queues encoder frames, ``finish(slot)`` says the
    stream has no more, ``decode()`` advances every stream over what it has, ``nbest(slot)`` is its n-best so far
    (partial until it is finished and decoded, see :meth:`done`; then that of
    :func:`~transdec.decoding.beam.alsd_pp.beam_alsd_pp` on its frames), ``close(slot)`` frees the slot. Frames and
    timestamps count from the stream's start. ``options`` are ALSD++'s; ``cuda_graphs`` and ``cpu_threads`` are
    not used here (the steps run eagerly), and ``keep_greedy`` is refused.
    """

    def __init__(self, model: DecodingModel, max_streams: int, options: AlsdPlusOptions | None = None,
                 fusions: Sequence[Fusion] = (), device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32) -> None:
        if max_streams < 1:
            raise ValueError(f"max_streams must be at least 1, got {max_streams}")
        self.predictor, self.joint = model.predictor, model.joint
        self.options = options or AlsdPlusOptions()
        if self.options.keep_greedy:
            # A stream's greedy hypothesis would need a search of its own beside the beam: decode whole utterances.
            raise ValueError("keep_greedy is not offered when streaming (beam_alsd_pp on whole utterances has it)")
        self.device, self.dtype = torch.device(device), dtype
        self.scoring = Scoring(model.head, fusions)
        self.steps = AlsdSteps(model, self.options, self.scoring, max_streams, self.device)
        beam = self.options.beam_size
        self.slot_of_row = torch.arange(max_streams * beam, device=self.device) // beam  # [S*K]
        self._start = self._fresh_state(max_streams)
        self.state = self._fresh_state(max_streams)

    @torch.inference_mode()
    def _fresh_state(self, slots: int) -> BeamStreamsState:
        """Every slot closed, its hypotheses' predictor fed the start symbol and fusions at their start."""
        rows = slots * self.options.beam_size
        start = torch.full((rows,), self.steps.head.predictor_blank_id, dtype=torch.long, device=self.device)
        out, predictor_state = self.predictor.step(start, self.predictor.initial_state(rows))
        predictor_proj = self.joint.project_predictor(out)  # [S*K, J]
        scorer_state = self.scoring.initial_state(rows, self.device)
        search = AlsdState(BatchedBeamHyps(slots, self.options.beam_size, self.device, self.dtype,
                                           capacity=MIN_TREE_CAPACITY),
                           encoder_proj=predictor_proj.new_zeros(slots, 1, predictor_proj.shape[-1]),
                           predictor_state=predictor_state, predictor_proj=predictor_proj, scorer_state=scorer_state,
                           context=self.scoring.context(scorer_state), stats=DecodingStats(predictor_calls=1))
        zeros = torch.zeros(slots, dtype=torch.long, device=self.device)
        no = torch.zeros(slots, dtype=torch.bool, device=self.device)
        return BeamStreamsState(search, offset=zeros, received=zeros.clone(), finished=no, merge_pending=no.clone(),
                                is_open=no.clone())

    @property
    def stats(self) -> DecodingStats:
        """Predictor and joint calls so far, each over every slot's hypotheses."""
        return self.state.search.stats

    @torch.inference_mode()
    def open(self) -> int:
        """A free slot, reset to the start of a stream (one empty hypothesis); ValueError when every slot is taken."""
        state = self.state
        free = (~state.is_open).nonzero().flatten().tolist()
        if not free:
            raise ValueError(f"all {len(state.is_open)} streams are open; close one first")
        slot = free[0]
        for field in (state.offset, state.received):
            field[slot] = 0
        state.finished[slot] = False
        state.is_open[slot] = True
        self._start_beam(slot, 0)
        return slot

    @torch.inference_mode()
    def restart(self, slot: int) -> None:
        """Begin a new segment of the stream in ``slot`` where its best hypothesis stands (after an endpoint): one
        empty hypothesis there, the predictor and the fusions at their start; the frames and positions go on."""
        hyps = self._open_state(slot).search.hyps
        best = self._ranking(slot, self._scores(slot, final=True)).argmax()
        self._start_beam(slot, int(hyps.time[slot, int(best)]))

    def _scores(self, slot: int, final: bool) -> torch.Tensor:
        """``[K]``: the slot's hypothesis scores, with the fusions' final bonus where the hypotheses end here
        (``final``), as ``beam_alsd_pp`` ranks its final hypotheses: an unfinished boosted phrase given back."""
        search = self.state.search
        scores = search.hyps.scores[slot]
        if final and self.scoring.has_final_bonus:
            rows = self.slot_of_row == slot
            scores = scores + self.scoring.final_bonus(self.scoring.gather_state(search.scorer_state,
                                                                                 rows.nonzero().squeeze(1)))
        return scores

    def _ranking(self, slot: int, scores: torch.Tensor) -> torch.Tensor:
        """``[K]``: what orders the slot's hypotheses, best highest: ``scores``, or per token with ``length_norm``."""
        lengths = self.state.search.hyps.lengths[slot]
        return scores / lengths.clamp(min=1) if self.options.length_norm else scores

    def _start_beam(self, slot: int, time: int) -> None:
        """The beam of ``slot``: one empty hypothesis at frame ``time``, as at the start of an utterance."""
        state = self.state
        search, start = state.search, self._start.search
        rows = self.slot_of_row == slot  # [S*K]
        search.predictor_state = self.predictor.select_state(rows, start.predictor_state, search.predictor_state)
        search.predictor_proj = torch.where(rows.unsqueeze(1), start.predictor_proj, search.predictor_proj)
        search.scorer_state = self.scoring.select_state(rows, start.scorer_state, search.scorer_state)
        search.context = tuple(torch.where(rows.unsqueeze(1), a, b) for a, b in zip(start.context, search.context,
                                                                                     strict=True))
        hyps = search.hyps
        hyps.scores[slot] = -torch.inf
        hyps.scores[slot, 0] = 0.0
        for field in (hyps.am_scores, hyps.tokens_at_frame, hyps.lengths, hyps.hashes):
            field[slot] = 0
        hyps.time[slot] = time
        hyps.last_tokens[slot] = -1
        hyps.node_tokens[slot, :, : hyps.steps] = -1  # the tree's older nodes of this slot: no tokens of this stream
        state.merge_pending[slot] = False

    def best(self, slot: int) -> Hypothesis:
        """The stream's best hypothesis so far (the empty one before any)."""
        nbest = self.nbest(slot)
        return nbest[0] if nbest else Hypothesis()

    def position(self, slot: int) -> int:
        """The frame up to which every live hypothesis of the stream has decoded (at most the frames received)."""
        hyps, received = self.state.search.hyps, int(self.state.received[slot])
        alive = hyps.scores[slot] > -torch.inf
        return min(received, int(hyps.time[slot][alive].min())) if bool(alive.any()) else received

    @torch.inference_mode()
    def accept(self, slot: int, frames: torch.Tensor) -> None:
        """Queue encoder frames ``[T, D]`` of the stream in ``slot``; they are decoded by the next :meth:`decode`."""
        state = self._open_state(slot)
        if bool(state.finished[slot]):
            raise ValueError(f"stream slot {slot} is finished: it takes no more frames")
        if frames.dim() != 2:
            raise ValueError(f"frames must be [T, D], got {tuple(frames.shape)}")
        if frames.shape[0] == 0:
            return
        start = int(state.received[slot])
        end = start + frames.shape[0]
        if end - int(state.offset[slot]) > state.search.encoder_proj.shape[1]:
            self._make_room(slot, end)
        offset = int(state.offset[slot])
        state.search.encoder_proj[slot, start - offset : end - offset] = self.joint.project_encoder(
            frames.to(self.device, self.dtype)[None])[0]
        state.received[slot] = end

    @torch.inference_mode()
    def finish(self, slot: int) -> None:
        """No more frames will come for the stream in ``slot``: the frames received are its whole length, and its
        hypotheses that reach their end are final (the next :meth:`decode` takes it to its end)."""
        self._open_state(slot).finished[slot] = True

    def done(self, slot: int) -> bool:
        """Whether the stream in ``slot`` is finished and decoded to its end: :meth:`nbest` is then final."""
        state = self._open_state(slot)
        hyps = state.search.hyps
        inside = (hyps.time[slot] < state.received[slot]) & (hyps.scores[slot] > -torch.inf)
        return bool(state.finished[slot]) and not bool(inside.any()) and not bool(state.merge_pending[slot])

    @torch.inference_mode()
    def close(self, slot: int) -> list[Hypothesis]:
        """Free ``slot``; returns its stream's n-best."""
        nbest = self.nbest(slot)
        self.state.is_open[slot] = False
        return nbest

    def _open_state(self, slot: int) -> BeamStreamsState:
        if not bool(self.state.is_open[slot]):
            raise ValueError(f"stream slot {slot} is not open")
        return self.state

    def _make_room(self, slot: int, end: int) -> None:
        """Drop every slot's frames before its earliest live hypothesis (never read again); then grow the buffer if
        frames up to ``end`` of ``slot`` still do not fit."""
        state = self.state
        hyps = state.search.hyps
        earliest = torch.where(hyps.scores > -torch.inf, hyps.time, state.received.unsqueeze(1)).amin(dim=1)
        first = torch.where(state.is_open, earliest.minimum(state.received), state.received).maximum(state.offset)
        state.search.encoder_proj = rebased(state.search.encoder_proj, state.offset, first, end - int(first[slot]))
        state.offset = first

    @torch.inference_mode()
    def decode(self) -> None:
        """Run every open stream as far as its received frames allow (one batched search step for all streams
        that can take one, until none can)."""
        state = self.state
        search = state.search
        self.steps.state = search
        merging = self.options.merge != "none"
        received = state.received.unsqueeze(1)  # [S, 1]: as the lengths of the finished streams
        while True:
            hyps = search.hyps
            alive = hyps.scores > -torch.inf
            inside = hyps.time < received
            # A stream steps when each of its live hypotheses is at a frame it has, or is past its known end.
            ready = state.is_open & (state.finished | (inside | ~alive).all(dim=1))  # [S]
            if merging:
                due = state.merge_pending & ready
                if bool(due.any()):
                    self.steps.merge(received, due)
                    state.merge_pending = state.merge_pending & ~due
                    alive = hyps.scores > -torch.inf
            active = alive & inside & ready.unsqueeze(1)  # [S, K]
            stepping = active.any(dim=1)
            if not bool(stepping.any()):
                break
            if hyps.steps == hyps.capacity:
                self._compact_tree()
            column = (hyps.time - state.offset.unsqueeze(1)).clamp(0, search.encoder_proj.shape[1] - 1)
            self.steps.expand(active, self.steps.joint_at(search.encoder_proj, column), waiting=~stepping)
            if merging:
                hyps = search.hyps
                # Before its length is known, a stream with a live hypothesis past its frames cannot tell which
                # hypotheses are finished: its merge waits for the stream's next step (it waits until then).
                known = state.finished | ((hyps.time < received) | (hyps.scores == -torch.inf)).all(dim=1)
                self.steps.merge(received, stepping & known)
                state.merge_pending = state.merge_pending | (stepping & ~known)

    def _compact_tree(self) -> None:
        """Rewrite the hypotheses' tree with each hypothesis' tokens as a chain of its own and no node without a
        token (closed slots emptied): the steps it holds become the most tokens of any hypothesis."""
        hyps = self.state.search.hyps
        steps = hyps.steps
        batch_size, beam = hyps.scores.shape
        slot = torch.arange(beam, device=self.device).expand(batch_size, beam)
        path = torch.empty(batch_size, beam, steps, dtype=torch.long, device=self.device)
        for step in range(steps - 1, -1, -1):  # each hypothesis' slot at every step, from its last node back
            path[:, :, step] = slot
            slot = hyps.node_parents[:, :, step].gather(1, slot)

        def along(buffer: torch.Tensor) -> torch.Tensor:  # [S, K, steps]: the nodes on each hypothesis' path
            return buffer[:, :, :steps].gather(1, path)

        tokens = along(hyps.node_tokens).masked_fill(~self.state.is_open.view(-1, 1, 1), -1)
        emitted = tokens >= 0
        count = emitted.sum(dim=2, keepdim=True)  # [S, K, 1]
        width = int(count.max()) if steps else 0
        order = (~emitted).long().argsort(dim=2, stable=True)[:, :, :width]  # the token nodes first, in order
        kept = torch.arange(width, device=self.device) < count  # [S, K, width]
        capacity = max(MIN_TREE_CAPACITY, 2 * width)

        def packed(values: torch.Tensor, fill: int) -> torch.Tensor:
            new = values.new_zeros(batch_size, beam, capacity)
            new[:, :, :width] = values.gather(2, order).masked_fill(~kept, fill)
            return new

        hyps.node_tokens = packed(tokens, -1)
        hyps.node_times = packed(along(hyps.node_times), 0)
        hyps.node_durations = packed(along(hyps.node_durations), 0)
        hyps.node_logprobs = packed(along(hyps.node_logprobs), 0)
        hyps.node_parents = torch.arange(beam, device=self.device).view(1, beam, 1).expand(
            batch_size, beam, capacity).clone()
        hyps.steps = width

    @torch.inference_mode()
    def nbest(self, slot: int) -> list[Hypothesis]:
        """The stream's ``nbest`` best hypotheses so far, best first (by score, or per token with ``length_norm``):
        its tokens, timestamps (frames from its start), durations and scores. Final once :meth:`done`; before, the
        beam as it stands (two hypotheses that a merge waiting for the stream's length would join may both be in
        it)."""
        hyps = self._open_state(slot).search.hyps
        scores = self._scores(slot, final=bool(self.state.finished[slot]))
        top_scores, top = self._ranking(slot, scores).topk(self.options.nbest)
        slots = torch.full((hyps.batch_size, self.options.nbest), -1, dtype=torch.long, device=self.device)
        slots[slot] = torch.where(top_scores > -torch.inf, top, -1)
        all_scores = hyps.scores.clone()
        all_scores[slot] = scores
        return hyps.hypotheses(slots, all_scores)[slot]
