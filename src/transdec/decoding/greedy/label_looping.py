"""Batched greedy decoding that loops over labels (label-looping paper, Algorithm 3), for every head.

The outer loop runs once per emitted label: one predictor call advances every hypothesis of the batch.
The inner loop then moves each utterance's own frame index over blanks until it finds its next label
(or runs off its end), calling only the joint. Utterances therefore never wait for each other's
frames, and the predictor runs ``longest hypothesis + 1`` times, the fewest possible.

With ``window_size > 1`` the inner loop scores a window of frames per joint call (WIND); see
:mod:`transdec.decoding.greedy.wind_window`.

The result is identical to :func:`~transdec.decoding.greedy.reference.greedy_reference` for RNN-T,
TDT and multi-blank heads, stateful and stateless predictors: each utterance keeps its own frame index
and moves it by exactly the advance the reference would (a TDT duration, a big blank's duration, the
forced blank after ``max_symbols_per_frame`` tokens, which the search pass takes at the row's frame).

The encoder projection is computed once for the batch and the predictor projection once per outer
step (paper, Sec. 3.4). All bookkeeping is masked tensor updates; the only host syncs are the loop
conditions, and :class:`LabelLoopingSearch` splits the loops into four straight-line steps so that on
CUDA they can be captured as graphs and the loops run on the device
(:mod:`transdec.decoding.greedy.label_looping_graphs`, the strategy's registered graph driver).

The steps themselves (:class:`LabelLoopingSteps`) are shared with
:class:`~transdec.decoding.greedy.streaming.GreedyStreams`, which runs them on streams whose frames arrive in chunks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.compute_dtype import in_compute_dtype
from transdec.decoding.cuda import greedy_kernels, joint_kernel
from transdec.decoding.cuda.graph_cache import graphed_result
from transdec.decoding.cuda.in_place import copy_of, set_state
from transdec.decoding.emissions import Emissions, GreedyHead, lookup_tables
from transdec.decoding.greedy.wind_window import WindowScan
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import WINDOW_HELP, GraphOptions, WindOptions, option
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats
from transdec.decoding.scoring import Fusion, Scoring, ScorerState
from transdec.protocol import DecodingModel, Joint, JointOutputLayer, PredictorState

#: The dtypes ``compute_dtype`` may name on the command line.
COMPUTE_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                  "bfloat16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class LabelLoopingOptions(WindOptions, GraphOptions):
    """Options of batched label-looping greedy decoding (none of them changes the output)."""

    window_size: int = option(1, WINDOW_HELP)
    compute_dtype: torch.dtype | None = option(None, "run the predictor and joint in this dtype (scores stay in "
                                                     "the encoder output's; default: the encoder output's)",
                                               choices=COMPUTE_DTYPES)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.compute_dtype is not None and self.compute_dtype not in COMPUTE_DTYPES.values():
            raise ValueError(f"compute_dtype must be one of {sorted(COMPUTE_DTYPES)} or None, got {self.compute_dtype}")


@takes_options(LabelLoopingOptions)
@torch.inference_mode()
def greedy_label_looping(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                         options: LabelLoopingOptions, fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Decode ``encoder_out [B, T, D]`` with valid ``lengths [B]``; exact for every head.

    ``window_size > 1`` scores that many frames per joint call while looking for the next label (WIND, see
    :mod:`transdec.decoding.greedy.wind_window`); the output is identical for every window size.

    ``cuda_graphs`` (CUDA only; see :mod:`transdec.decoding.greedy.label_looping_graphs`): ``"while_loops"`` runs
    the whole decode as one CUDA graph with device-side loops, ``"step_graphs"`` replays a graph per loop
    step from a host loop, ``"off"`` runs the steps eagerly, ``"auto"`` takes the fastest that works here.
    The output is identical in every mode.

    ``compute_dtype`` (e.g. ``torch.bfloat16``) runs the predictor and joint in that dtype; scores stay in
    ``encoder_out``'s (see :mod:`transdec.decoding.compute_dtype`).

    ``fusions`` (:mod:`transdec.decoding.scoring`) go into the graphs when their scorers are graph-safe (the
    n-gram LM); with any other, ``"auto"`` means ``"off"`` and a graph mode is a ValueError.
    """
    lengths = checked_lengths(encoder_out, lengths)
    compute_dtype = effective_compute_dtype(options, encoder_out)
    if compute_dtype is not None:
        model = in_compute_dtype(model, compute_dtype)
    scoring = Scoring(model.head, fusions)
    result = graphed_result("greedy_label", model, encoder_out, lengths, options, scoring)
    if result is not None:
        return result
    search = LabelLoopingSearch(model, encoder_out, lengths, options.max_symbols_per_frame, options.window_size,
                                compute_dtype=compute_dtype, scoring=scoring)
    search.run()
    return search.result()


def effective_compute_dtype(options: LabelLoopingOptions, encoder_out: torch.Tensor) -> torch.dtype | None:
    """The dtype the predictor and joint run in, None where it is ``encoder_out``'s own."""
    return None if options.compute_dtype == encoder_out.dtype else options.compute_dtype


@dataclasses.dataclass(slots=True)
class LabelLoopingState:
    """Everything label-looping carries from one step to the next, for ``B`` rows; the search's configuration
    (model parts, options, the input buffers ``encoder_out`` and ``lengths``) is not in it.

    :meth:`LabelLoopingSearch.start` makes it and the steps update it, field by field
    (:func:`~transdec.decoding.cuda.in_place.set_state`). With ``in_place`` every tensor in it is the one the first
    ``start()`` made, written into from then on and never rebound: CUDA graphs captured the steps on them.

    Between two steps this is the whole decode so far: suspending a search means keeping this object, resuming it
    giving it back to a search of the same configuration; ``encoder_proj`` is the one field made from the input
    frames, which a search resumed on new frames makes anew.
    """

    hyps: BatchedHyps  # the labels so far ([B, L] each; L fixed with in_place) and each row's path score [B]
    encoder_proj: torch.Tensor  # [B, T, J] (compute dtype): the encoder output projected for the joint
    time: torch.Tensor  # [B] long: each row's frame
    tokens_at_frame: torch.Tensor  # [B] long: tokens emitted at `time` since it last moved
    labels: torch.Tensor  # [B] long: the next predictor input, each row's last label (the blank at first and once done)
    predictor_state: PredictorState  # B rows; begin_label() advances it by `labels`
    scorer_state: tuple[ScorerState, ...]  # each fusion's state, B rows, after every recorded label
    active: torch.Tensor  # [B] bool: rows with frames left
    active_any: torch.Tensor  # [] bool: the outer loop's condition (in place: a view of `flags`)
    stats: DecodingStats | None = None  # without in_place: predictor and joint calls, counted on the host
    calls: torch.Tensor | None = None  # [2] long, in place only: predictor and joint calls, counted on the device
    flags: torch.Tensor | None = None  # [2] bool, in place only: active_any and searching_any, read back at once
    # Streams only (None: every row with frames left has a label for the predictor, and the others need none):
    pending: torch.Tensor | None = None  # [B] bool: rows whose `labels` the predictor has not taken yet
    # Set by begin_label() (in place, searching_any is a view of `flags` from the start):
    searching_any: torch.Tensor | None = None  # [] bool: the inner loop's condition
    searching: torch.Tensor | None = None  # [B] bool: rows still looking for their next label
    predictor_proj: torch.Tensor | None = None  # [B, J]: the predictor output after `labels`, projected
    context: tuple[torch.Tensor, ...] | None = None  # each fusion's token log-probs [B, V]
    # Set by search_step() (with the fused kernels, their buffers, greedy_kernels.found_buffers, from the start):
    found: Emissions | dict[str, torch.Tensor] | None = None  # each row's emission at its frame, [B] per field


class LabelLoopingSteps:
    """Label-looping's steps on the ``B`` rows of a :class:`LabelLoopingState` (:attr:`state`), whatever supplies
    their frames: :class:`LabelLoopingSearch` (whole utterances) and
    :class:`~transdec.decoding.greedy.streaming.GreedyStreams` (streams, chunk by chunk) run the same steps::

        while active_any:
            begin_label()              # predictor step for every row
            while searching_any:
                search_step()          # one joint pass over blanks
            end_label()                # record each row's label, move its frame

    :meth:`label_loop` is that loop on the host. Row ``b`` reads column ``time[b] - frame_offset[b]`` of
    ``state.encoder_proj`` (``frame_offset`` None: column ``time[b]``) and has frames up to ``lengths[b]``: an
    utterance's length, or for a stream the frames received so far (where its search waits, with its state, for
    more). Both are read at every step, so their owner may write new values into them between loops.

    With ``in_place`` (see :class:`LabelLoopingSearch`) every update is copied into the tensors of :attr:`state`
    and calls are counted on the device; ``fused`` takes the search pass and the label bookkeeping from the Triton
    kernels of :mod:`transdec.decoding.cuda.greedy_kernels`.
    """

    def __init__(
        self,
        model: DecodingModel,
        lengths: torch.Tensor,
        max_symbols_per_frame: int | None,
        window_size: int,
        in_place: bool = False,
        fused: bool = False,
        scoring: Scoring | None = None,
        frame_offset: torch.Tensor | None = None,
    ) -> None:
        # Only the parts: graph caches keyed on the model must not keep it alive.
        self.head, self.predictor, self.joint = model.head, model.predictor, model.joint
        self.lengths, self.frame_offset = lengths, frame_offset
        self.max_symbols_per_frame = max_symbols_per_frame
        self.window_size = window_size
        self.in_place = in_place
        if fused and not in_place:
            raise ValueError("the fused kernels work in place")
        self.scoring = scoring or Scoring(self.head)
        if fused and not self.scoring.acoustic_only:
            raise ValueError("the fused kernels score without fusions")
        self.fused = fused
        device = lengths.device
        self.read = GreedyHead(self.scoring, device)
        if fused:
            self.tables = lookup_tables(self.head, device)
        # In place (under CUDA graphs), one kernel computes the joint with the frame gather in it.
        joint_layer = joint_kernel.fused_layer(self.joint, device) if in_place else None
        self.skipper = (_BlankSkipper(self.read, self.joint, lengths, max_symbols_per_frame, joint_layer)
                        if window_size == 1 else
                        WindowSkipper(self.read, self.joint, lengths, max_symbols_per_frame, window_size, joint_layer))
        self.state: LabelLoopingState | None = None

    def label_loop(self) -> None:
        """Run the steps from :attr:`state` until no row has frames left; the loops read ``active_any`` /
        ``searching_any`` back at every pass."""
        while bool(self.state.active_any):
            self.begin_label()
            while True:
                self.search_step()
                if not bool(self.state.searching_any):
                    break
            self.end_label()

    def begin_label(self) -> None:
        """Advance the predictor by every row's last label; every active row starts searching. With ``pending``
        (streams), only the rows whose label the predictor has not taken: the others keep their output."""
        state = self.state
        pending = state.pending
        if pending is None or bool(pending.any()):
            predictor_out, predictor_state = self.predictor.step(state.labels, state.predictor_state)
            predictor_proj = self.joint.project_predictor(predictor_out)  # [B, J]
            if pending is not None:
                predictor_state = self.predictor.select_state(pending, predictor_state, state.predictor_state)
                predictor_proj = torch.where(pending.unsqueeze(1), predictor_proj, state.predictor_proj)
                self._set("pending", torch.zeros_like(pending))
            self._set("predictor_state", predictor_state)
            self._set("predictor_proj", predictor_proj)
            self._count(0)
        self._set("context", self.scoring.context(state.scorer_state))
        self._set("searching", state.active)
        self._set("searching_any", state.active_any)

    def search_step(self) -> None:
        """One joint pass: searching rows move over blanks; ``found`` holds each row's emission at its frame."""
        self._count(1)
        state = self.state
        if self.fused:
            logits = self.skipper.logits(state.encoder_proj, state.predictor_proj, state.time)
            greedy_kernels.search_pass(self.head, logits.view(logits.shape[0], -1, logits.shape[-1]), *self.tables,
                                       state.time, self.lengths, state.tokens_at_frame, state.hyps.scores,
                                       state.searching, state.found, self.max_symbols_per_frame)
            self._set("searching_any", state.searching.any())
            return
        found, searching = self.skipper.step(state, self.frame_offset)
        self._set("found", found)
        self._set("searching", searching)
        self._set("searching_any", searching.any())

    def end_label(self) -> None:
        """Record the label of each row that found one before the end of its frames, and move its frame as the
        label says."""
        state = self.state
        if self.fused:
            greedy_kernels.end_label(self.head, state.found, state.time, self.lengths, state.tokens_at_frame,
                                     state.active, state.labels, state.hyps)
            self._set("active_any", state.active.any())
            return
        found, time = state.found, state.time
        recorded = time < self.lengths
        state.hyps.add_labels(recorded, found.labels, time, found.durations, found.label_logprobs)
        state.hyps.add_scores(recorded, found.scores)
        self._set("scorer_state", self.scoring.advance(state.scorer_state, found.labels, recorded))
        stays = recorded & (found.advance == 0)
        self._set("tokens_at_frame", torch.where(stays, state.tokens_at_frame + 1, 0))
        time += torch.where(recorded, found.advance, 0)
        active = time < self.lengths
        self._set("active", active)
        if state.pending is None:
            # Finished rows still go through the predictor with the rest; feed them the blank, a valid input.
            self._set("labels", torch.where(active, found.labels, self.head.predictor_blank_id))
        else:
            # A stream that ran out of frames keeps its label until more come.
            self._set("labels", torch.where(recorded, found.labels, state.labels))
            self._set("pending", state.pending | recorded)
        self._set("active_any", active.any())

    def _set(self, name: str, value: Any) -> None:
        set_state(self.state, name, value, self.in_place)

    def _count(self, which: int) -> None:
        """Count a predictor (0) or joint (1) call. On the device, only calls made while rows were left count,
        so that steps replayed past the end of the decode (see ``step_graphs``) count nothing."""
        state = self.state
        if self.in_place:
            state.calls[which] += state.flags[which]
        elif which == 0:
            state.stats.predictor_calls += 1
        else:
            state.stats.joint_calls += 1


class LabelLoopingSearch(LabelLoopingSteps):
    """Label-looping greedy decoding of one batch: :meth:`start`, then the steps' loops (:meth:`run`).

    The loop conditions are fields of :attr:`state` (:class:`LabelLoopingState`), which holds everything the steps
    carry. The steps only touch tensors and never read them back, so with ``in_place=True`` (every update written
    into the tensors made by the first :meth:`start`, with call counts on the device) CUDA graphs can capture them
    and replay them on new inputs written into ``encoder_out`` and ``lengths``. Without it, updates rebind the
    state's fields, which costs fewer operations on the CPU.

    ``hyps`` then has a fixed capacity of ``T * max_symbols_per_frame + 1`` labels per row, the most any
    decode can emit (each label either moves time or counts towards the limit).
    """

    def __init__(
        self,
        model: DecodingModel,
        encoder_out: torch.Tensor,
        lengths: torch.Tensor,
        max_symbols_per_frame: int | None,
        window_size: int,
        in_place: bool = False,
        fused: bool = False,
        compute_dtype: torch.dtype | None = None,
        scoring: Scoring | None = None,
    ) -> None:
        super().__init__(model, lengths, max_symbols_per_frame, window_size, in_place, fused, scoring)
        self.encoder_out = encoder_out
        self.compute_dtype = compute_dtype
        max_time = encoder_out.shape[1]
        if in_place:
            if max_symbols_per_frame is None:
                raise ValueError("in-place label-looping needs a max_symbols_per_frame to bound the hypotheses")
            self.capacity = max_time * max_symbols_per_frame + 1
        else:
            self.capacity = max_time

    def run(self) -> None:
        """Decode on the host: :meth:`start`, then the loops."""
        self.start()
        self.label_loop()

    def result(self) -> DecodingResult:
        state = self.state
        if self.in_place:
            predictor_calls, joint_calls = state.calls.tolist()
            stats = DecodingStats(predictor_calls=predictor_calls, joint_calls=joint_calls)
            return DecodingResult(state.hyps.trimmed_copy(), stats)
        return DecodingResult(state.hyps, state.stats)

    def start(self) -> None:
        """Project the encoder output, empty the hypotheses and put every row at frame 0: a new :attr:`state`, or
        with ``in_place`` after the first call, the same one written over."""
        batch_size, device = self.encoder_out.shape[0], self.encoder_out.device
        encoder_out = self.encoder_out if self.compute_dtype is None else self.encoder_out.to(self.compute_dtype)
        encoder_proj = self.joint.project_encoder(encoder_out)
        time = torch.zeros(batch_size, dtype=torch.long, device=device)
        active = time < self.lengths
        initial = {
            "encoder_proj": encoder_proj,
            "time": time,
            "tokens_at_frame": torch.zeros_like(time),
            "labels": torch.full_like(time, self.head.predictor_blank_id),
            "predictor_state": self.predictor.initial_state(batch_size),
            "scorer_state": self.scoring.initial_state(batch_size, device),
            "active": active,
            "active_any": active.any(),
        }
        if self.state is None or not self.in_place:
            self.state = self._new_state(initial)
            return
        self.state.hyps.reset()
        self.state.calls.zero_()
        for name, value in initial.items():
            self._set(name, value)

    def _new_state(self, initial: dict[str, Any]) -> LabelLoopingState:
        """The state :meth:`start` makes from its ``initial`` fields; with ``in_place``, on copies of them (no two
        fields share memory), the loop flags and counters on the device and fixed-capacity hypotheses."""
        batch_size, device, dtype = self.encoder_out.shape[0], self.encoder_out.device, self.encoder_out.dtype
        if not self.in_place:
            return LabelLoopingState(BatchedHyps(batch_size, self.capacity, device, dtype), **initial,
                                     stats=DecodingStats())
        flags = torch.zeros(2, dtype=torch.bool, device=device)
        flags[0].copy_(initial["active_any"])
        copies = {name: copy_of(value) for name, value in initial.items() if name != "active_any"}
        return LabelLoopingState(
            BatchedHyps(batch_size, self.capacity, device, dtype, fixed_capacity=True), **copies, active_any=flags[0],
            calls=torch.zeros(2, dtype=torch.long, device=device), flags=flags, searching_any=flags[1],
            found=greedy_kernels.found_buffers(batch_size, dtype, device) if self.fused else None,
        )


def _columns(time: torch.Tensor, frame_offset: torch.Tensor | None) -> torch.Tensor:
    """Each row's column of ``encoder_proj``: its frame, less the frame its buffer starts at (streams)."""
    return time if frame_offset is None else time - frame_offset


class _BlankSkipper:
    """The inner loop's pass: moves each searching row over one blank."""

    def __init__(self, read: GreedyHead, joint: Joint, lengths: torch.Tensor, max_symbols_per_frame: int | None,
                 joint_layer: JointOutputLayer | None = None) -> None:
        self.read = read
        self.joint = joint
        self.joint_layer = joint_layer  # where given, the joint kernel computes the logits
        self.lengths = lengths
        self.max_symbols = max_symbols_per_frame
        self.rows = torch.arange(lengths.shape[0], device=lengths.device)

    def logits(self, encoder_proj: torch.Tensor, predictor_proj: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
        """Joint logits ``[B, C]`` of each row at its column (the last column for rows past it)."""
        if self.joint_layer is not None:
            return joint_kernel.joint_logits(self.joint_layer, encoder_proj, predictor_proj, column)[:, 0]
        frames = encoder_proj[self.rows, column.clamp(max=max(encoder_proj.shape[1] - 1, 0))]  # [B, J]
        return self.joint.combine(frames, predictor_proj)

    def step(self, state: LabelLoopingState, frame_offset: torch.Tensor | None) -> tuple[Emissions, torch.Tensor]:
        """Score every row at its frame; move ``state.time`` (in place) over the blank for the searching rows, and
        add its log-prob to their scores.

        Returns the emissions at each row's frame before the move and the rows still searching. A row that
        found its label in an earlier pass is scored again, on the same frame and predictor output, in
        every later pass, so the last pass holds every row's label and no per-field merging is needed.
        """
        time, tokens_at_frame = state.time, state.tokens_at_frame
        forced = None if self.max_symbols is None else tokens_at_frame >= self.max_symbols
        logits = self.logits(state.encoder_proj, state.predictor_proj, _columns(time, frame_offset))
        emissions = self.read(logits, state.context, forced)
        on_blank = state.searching & emissions.is_blank
        state.hyps.add_scores(on_blank, emissions.scores)
        time += torch.where(on_blank, emissions.advance, 0)
        tokens_at_frame.masked_fill_(on_blank, 0)
        return emissions, on_blank & (time < self.lengths)


class WindowSkipper(WindowScan):
    """The inner loop's pass with a WIND window: looks for each searching row's next label in ``w`` frames
    (:mod:`transdec.decoding.greedy.wind_window`), its frames limited by ``lengths``."""

    def __init__(self, read: GreedyHead, joint: Joint, lengths: torch.Tensor, max_symbols_per_frame: int | None,
                 window: int, joint_layer: JointOutputLayer | None = None) -> None:
        super().__init__(read, joint, max_symbols_per_frame, window, lengths.shape[0], lengths.device, joint_layer)
        self.lengths = lengths

    def step(self, state: LabelLoopingState, frame_offset: torch.Tensor | None) -> tuple[Emissions, torch.Tensor]:
        """Same contract as the frame-by-frame pass: moves ``state.time`` (in place) over the blanks of one window
        for the searching rows, adds their log-probs to the scores, and returns the emission at each row's new frame
        (a label where the row found one) and the rows still searching."""
        time, tokens_at_frame, searching = state.time, state.tokens_at_frame, state.searching
        columns, limits = _columns(time, frame_offset), _columns(self.lengths, frame_offset)
        emissions, end, crossed = self.scan(state.encoder_proj, state.predictor_proj, state.context, columns, limits,
                                            tokens_at_frame)
        state.hyps.add_scores(searching, crossed)
        time += torch.where(searching, end, 0)
        tokens_at_frame.masked_fill_(searching & (end > 0), 0)
        # Rows that found a label stay where they are; later passes re-read the same label there.
        return self.at(emissions, end), searching & (end >= self.window) & (time < self.lengths)
