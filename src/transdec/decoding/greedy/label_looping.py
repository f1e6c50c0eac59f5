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
(:mod:`transdec.decoding.cuda.label_looping_graphs`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.compute_dtype import in_compute_dtype
from transdec.decoding.cuda import greedy_kernels
from transdec.decoding.emissions import Emissions, GreedyHead, lookup_tables
from transdec.decoding.cuda.graph_cache import GRAPH_MODES, check_graph_mode
from transdec.decoding.cuda.in_place import set_state
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import WINDOW_HELP, WindOptions, option
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats
from transdec.decoding.scoring import Fusion, Scoring
from transdec.decoding.greedy.wind_window import WindowSkipper
from transdec.protocol import DecodingModel, Joint

#: The dtypes ``compute_dtype`` may name on the command line.
COMPUTE_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                  "bfloat16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class LabelLoopingOptions(WindOptions):
    """Options of batched label-looping greedy decoding (none of them changes the output)."""

    window_size: int = option(1, WINDOW_HELP)
    cuda_graphs: str = option("auto", "on a GPU: 'while_loops' (one graph per decode), 'step_graphs' (a graph per "
                                      "loop step), 'off', or 'auto' (the fastest that works here)",
                              choices=GRAPH_MODES)
    compute_dtype: torch.dtype | None = option(None, "run the predictor and joint in this dtype (scores stay in "
                                                     "the encoder output's; default: the encoder output's)",
                                               choices=COMPUTE_DTYPES)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_graph_mode(self.cuda_graphs)
        if self.compute_dtype is not None and self.compute_dtype not in COMPUTE_DTYPES.values():
            raise ValueError(f"compute_dtype must be one of {sorted(COMPUTE_DTYPES)} or None, got {self.compute_dtype}")


@takes_options(LabelLoopingOptions)
@torch.inference_mode()
def greedy_label_looping(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                         options: LabelLoopingOptions, fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Decode ``encoder_out [B, T, D]`` with valid ``lengths [B]``; exact for every head.

    ``window_size > 1`` scores that many frames per joint call while looking for the next label (WIND, see
    :mod:`transdec.decoding.greedy.wind_window`); the output is identical for every window size.

    ``cuda_graphs`` (CUDA only; see :mod:`transdec.decoding.cuda.label_looping_graphs`): ``"while_loops"`` runs
    the whole decode as one CUDA graph with device-side loops, ``"step_graphs"`` replays a graph per loop
    step from a host loop, ``"off"`` runs the steps eagerly, ``"auto"`` takes the fastest that works here.
    The output is identical in every mode.

    ``compute_dtype`` (e.g. ``torch.bfloat16``) runs the predictor and joint in that dtype; scores stay in
    ``encoder_out``'s (see :mod:`transdec.decoding.compute_dtype`).

    ``fusions`` (:mod:`transdec.decoding.scoring`) go into the graphs when their scorers are graph-safe (the
    n-gram LM); with any other, ``"auto"`` means ``"off"`` and a graph mode is a ValueError.
    """
    lengths = checked_lengths(encoder_out, lengths)
    max_symbols_per_frame, window_size, cuda_graphs = (options.max_symbols_per_frame, options.window_size,
                                                        options.cuda_graphs)
    compute_dtype = None if options.compute_dtype == encoder_out.dtype else options.compute_dtype
    if compute_dtype is not None:
        model = in_compute_dtype(model, compute_dtype)
    scoring = Scoring(model.head, fusions)
    if not scoring.graph_safe and cuda_graphs not in ("auto", "off"):
        raise ValueError(f"cuda_graphs={cuda_graphs!r} takes only graph-safe fusions (such as the n-gram LM); "
                         "use 'auto' or 'off'")
    if encoder_out.device.type == "cuda" and cuda_graphs != "off" and scoring.graph_safe:
        from transdec.decoding.cuda.label_looping_graphs import decode_with_graphs

        result = decode_with_graphs(model, encoder_out, lengths, max_symbols_per_frame, window_size, cuda_graphs,
                                    compute_dtype, scoring.fusions)
        if result is not None:
            return result
    search = LabelLoopingSearch(model, encoder_out, lengths, max_symbols_per_frame, window_size,
                                compute_dtype=compute_dtype, scoring=scoring)
    search.run()
    return search.result()


class LabelLoopingSearch:
    """Label-looping greedy decoding of one batch as four straight-line steps and the loops around them::

        start()
        while active_any:
            begin_label()              # predictor step for every row
            while searching_any:
                search_step()          # one joint pass over blanks
            end_label()                # record each row's label, move its frame

    :meth:`run` is that loop on the host. The steps only touch tensors and never read them back, so with
    ``in_place=True`` (every update written into the tensors made by the first :meth:`start`, with call
    counts on the device) CUDA graphs can capture them and replay them on new inputs written into
    ``encoder_out`` and ``lengths``. Without it, updates rebind attributes, which costs fewer operations on
    the CPU.

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
        # Only the parts: graph caches keyed on the model must not keep it alive.
        self.head, self.predictor, self.joint = model.head, model.predictor, model.joint
        self.encoder_out, self.lengths = encoder_out, lengths
        self.max_symbols_per_frame = max_symbols_per_frame
        self.window_size = window_size
        self.in_place = in_place
        self.compute_dtype = compute_dtype
        if fused and not in_place:
            raise ValueError("the fused kernels work in place")
        self.scoring = scoring or Scoring(self.head)
        if fused and not self.scoring.acoustic_only:
            raise ValueError("the fused kernels score without fusions")
        self.fused = fused
        batch_size, max_time, _ = encoder_out.shape
        device = encoder_out.device
        self.read = GreedyHead(self.scoring, device)
        if fused:
            self.found = greedy_kernels.found_buffers(batch_size, encoder_out.dtype, device)
            self.tables = lookup_tables(self.head, device)
        if in_place:
            if max_symbols_per_frame is None:
                raise ValueError("in-place label-looping needs a max_symbols_per_frame to bound the hypotheses")
            capacity = max_time * max_symbols_per_frame + 1
            self.calls = torch.zeros(2, dtype=torch.long, device=device)  # predictor, joint
            flags = torch.zeros(2, dtype=torch.bool, device=device)
            self.flags, self.active_any, self.searching_any = flags, flags[0], flags[1]
        else:
            capacity = max_time
        self.hyps = BatchedHyps(batch_size, capacity, device, encoder_out.dtype, fixed_capacity=in_place)
        self.stats = DecodingStats()
        self.skipper: _BlankSkipper | WindowSkipper | None = None

    def run(self) -> None:
        """Decode on the host: the loops read ``active_any`` / ``searching_any`` back at every pass."""
        self.start()
        while bool(self.active_any):
            self.begin_label()
            while True:
                self.search_step()
                if not bool(self.searching_any):
                    break
            self.end_label()

    def result(self) -> DecodingResult:
        if self.in_place:
            predictor_calls, joint_calls = self.calls.tolist()
            stats = DecodingStats(predictor_calls=predictor_calls, joint_calls=joint_calls)
            return DecodingResult(self.hyps.trimmed_copy(), stats)
        return DecodingResult(self.hyps, self.stats)

    def start(self) -> None:
        """Project the encoder output, reset the hypotheses and put every row at frame 0."""
        batch_size, device = self.encoder_out.shape[0], self.encoder_out.device
        encoder_out = self.encoder_out if self.compute_dtype is None else self.encoder_out.to(self.compute_dtype)
        self._set("encoder_proj", self.joint.project_encoder(encoder_out))  # [B, T, J]
        if self.skipper is None or not self.in_place:
            args = (self.read, self.joint, self.encoder_proj, self.lengths, self.hyps, self.max_symbols_per_frame)
            self.skipper = _BlankSkipper(*args) if self.window_size == 1 else WindowSkipper(*args, self.window_size)
        self.hyps.reset()
        self._set("time", torch.zeros(batch_size, dtype=torch.long, device=device))  # each row's frame
        self._set("tokens_at_frame", torch.zeros_like(self.time))  # tokens emitted at `time` since it moved
        self._set("labels", torch.full_like(self.time, self.head.predictor_blank_id))
        self._set("state", self.predictor.initial_state(batch_size))
        self._set("scorer_state", self.scoring.initial_state(batch_size, device))
        self._set("active", self.time < self.lengths)
        self._set("active_any", self.active.any())
        if self.in_place:
            self.calls.zero_()

    def begin_label(self) -> None:
        """Advance the predictor by every row's last label; every active row starts searching."""
        predictor_out, state = self.predictor.step(self.labels, self.state)
        self._set("state", state)
        self._set("predictor_proj", self.joint.project_predictor(predictor_out))  # [B, J]
        self._set("context", self.scoring.context(self.scorer_state))
        self._set("searching", self.active)
        self._set("searching_any", self.active_any)
        self._count(0)

    def search_step(self) -> None:
        """One joint pass: searching rows move over blanks; ``found`` holds each row's emission at its frame."""
        self._count(1)
        if self.fused:
            logits = self.skipper.logits(self.predictor_proj, self.time)
            greedy_kernels.search_pass(self.head, logits.view(logits.shape[0], -1, logits.shape[-1]), *self.tables,
                                       self.time, self.lengths, self.tokens_at_frame, self.hyps.scores,
                                       self.searching, self.found, self.max_symbols_per_frame)
            self._set("searching_any", self.searching.any())
            return
        found, searching = self.skipper.step(self.predictor_proj, self.context, self.time, self.tokens_at_frame,
                                             self.searching)
        self._set("found", found)
        self._set("searching", searching)
        self._set("searching_any", searching.any())

    def end_label(self) -> None:
        """Record the label of each row that found one before its end, and move its frame as the label says."""
        if self.fused:
            greedy_kernels.end_label(self.head, self.found, self.time, self.lengths, self.tokens_at_frame,
                                     self.active, self.labels, self.hyps)
            self._set("active_any", self.active.any())
            return
        found, time = self.found, self.time
        active = time < self.lengths
        self.hyps.add_labels(active, found.labels, time, found.durations, found.label_logprobs)
        self.hyps.add_scores(active, found.scores)
        self._set("scorer_state", self.scoring.advance(self.scorer_state, found.labels, active))
        stays = active & (found.advance == 0)
        self._set("tokens_at_frame", torch.where(stays, self.tokens_at_frame + 1, 0))
        time += torch.where(active, found.advance, 0)
        active = time < self.lengths
        self._set("active", active)
        # Finished rows still go through the predictor with the rest; feed them the blank, a valid input.
        self._set("labels", torch.where(active, found.labels, self.head.predictor_blank_id))
        self._set("active_any", active.any())

    def _set(self, name: str, value: Any) -> None:
        set_state(self, name, value, self.in_place)

    def _count(self, which: int) -> None:
        """Count a predictor (0) or joint (1) call. On the device, only calls made while rows were left count,
        so that steps replayed past the end of the decode (see ``step_graphs``) count nothing."""
        if self.in_place:
            self.calls[which] += self.flags[which]
        elif which == 0:
            self.stats.predictor_calls += 1
        else:
            self.stats.joint_calls += 1


class _BlankSkipper:
    """The inner loop's pass: moves each searching utterance over one blank."""

    def __init__(
        self, read: GreedyHead, joint: Joint, encoder_proj: torch.Tensor, lengths: torch.Tensor, hyps: BatchedHyps,
        max_symbols_per_frame: int | None,
    ) -> None:
        self.read = read
        self.joint = joint
        self.encoder_proj = encoder_proj
        self.lengths = lengths
        self.hyps = hyps
        self.max_symbols = max_symbols_per_frame
        self.rows = torch.arange(encoder_proj.shape[0], device=encoder_proj.device)
        self.last_frame = max(encoder_proj.shape[1] - 1, 0)

    def logits(self, predictor_proj: torch.Tensor, time: torch.Tensor) -> torch.Tensor:
        """Joint logits ``[B, C]`` of each row at its frame (the last frame for rows past the end)."""
        frames = self.encoder_proj[self.rows, time.clamp(max=self.last_frame)]  # [B, J]
        return self.joint.combine(frames, predictor_proj)

    def step(
        self, predictor_proj: torch.Tensor, context: tuple[torch.Tensor, ...], time: torch.Tensor,
        tokens_at_frame: torch.Tensor, searching: torch.Tensor
    ) -> tuple[Emissions, torch.Tensor]:
        """Score every row at its frame (``context``: the rows' scoring context); move ``time`` (in place) over
        the blank for the ``searching`` rows.

        Returns the emissions at each row's frame before the move and the rows still searching. A row that
        found its label in an earlier pass is scored again, on the same frame and predictor output, in
        every later pass, so the last pass holds every row's label and no per-field merging is needed.
        """
        forced = None if self.max_symbols is None else tokens_at_frame >= self.max_symbols
        emissions = self.read(self.logits(predictor_proj, time), context, forced)
        on_blank = searching & emissions.is_blank
        self.hyps.add_scores(on_blank, emissions.scores)
        time += torch.where(on_blank, emissions.advance, 0)
        tokens_at_frame.masked_fill_(on_blank, 0)
        return emissions, on_blank & (time < self.lengths)
