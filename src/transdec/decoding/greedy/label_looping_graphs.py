"""Label-looping greedy decoding under CUDA graphs.

Eager label-looping on a GPU is bound by kernel launches and host syncs: every pass of its loops issues
dozens of small kernels and reads a flag back. :class:`~transdec.decoding.greedy.label_looping.LabelLoopingSearch`
splits the decode into four straight-line steps on preallocated tensors; here they are captured as CUDA
graphs, in one of two modes:

``"while_loops"``
    The whole decode is one graph: the steps are child graphs inside two nested WHILE conditional nodes
    (:mod:`transdec.decoding.cuda.conditional_graphs`), so a decode is one launch and one sync at the end, as
    in the label-looping paper (Sec. 3.5). Needs a CUDA 12.4+ driver and ``cuda-python``.
``"step_graphs"``
    Three graphs (first label, search pass, next label) replayed from a host loop that reads both loop
    flags with one sync per replay. Needs only PyTorch.

``"auto"`` tries them in that order. A mode that cannot be used here (no bindings, capture refused, a
self-check that disagrees with eager decoding) is skipped with one warning saying why, and eager
decoding is the last resort; a decode never fails for that reason.

Graphs are made per batch size and frame bucket (``T`` rounded up to a power of two, at least 64): the
first decode of a shape pays for capture (tens of milliseconds) and later ones reuse it. They are kept
per model, as long as the model lives, and made again when its predictor or joint weights change
(:mod:`transdec.decoding.cuda.graph_cache`, which ALSD++'s graphs share).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

import torch

from transdec.decoding.cuda import greedy_kernels, joint_kernel
from transdec.decoding.cuda.conditional_graphs import ConditionalGraph, While
from transdec.decoding.cuda.graph_cache import (FAILED_MODES, GraphedSearch, cached, capture_graph, capture_stream,
                                                 failure_reason, frame_bucket, fusions_key, mode_unavailable,
                                                 warn_fallback, weights_version)
from transdec.decoding.greedy.label_looping import LabelLoopingOptions, LabelLoopingSearch, effective_compute_dtype
from transdec.decoding.results import DecodingResult
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel


class GraphedLabelLooping(GraphedSearch):
    """Label-looping for one batch size, frame capacity, dtype and option set, captured in CUDA graphs."""

    def __init__(
        self,
        model: DecodingModel,
        batch_size: int,
        max_time: int,
        encoder_dim: int,
        dtype: torch.dtype,
        device: torch.device,
        max_symbols_per_frame: int,
        window_size: int,
        mode: str,
        fused: bool,
        compute_dtype: torch.dtype | None,
        fusions: Sequence[Fusion] = (),
    ) -> None:
        self.mode = mode
        self.device = device
        self.encoder_out = torch.zeros(batch_size, max_time, encoder_dim, dtype=dtype, device=device)
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
        scoring = Scoring(model.head, self.capture_fusions(fusions))
        self.search = LabelLoopingSearch(
            model, self.encoder_out, self.lengths, max_symbols_per_frame, window_size, in_place=True, fused=fused,
            compute_dtype=compute_dtype, scoring=scoring,
        )
        # A small seeded batch with real decisions in it: decoded by the plain eager loop it is what the graphs
        # must agree with; decoded by the steps it warms up every kernel before capture (as PyTorch requires)
        # and makes every buffer.
        generator = torch.Generator().manual_seed(0)
        sample = torch.randn(batch_size, max_time, encoder_dim, generator=generator).to(device, dtype)
        sample_lengths = torch.randint(0, min(max_time, 32) + 1, (batch_size,), generator=generator).to(device)
        plain = LabelLoopingSearch(model, sample, sample_lengths, max_symbols_per_frame, window_size,
                                   compute_dtype=compute_dtype, scoring=scoring)
        plain.run()
        expected = _decisions(plain.result())
        with capture_stream(device) as (stream, pool):
            self._load(sample, sample_lengths)
            self.search.run()
            if mode == "while_loops":
                self._build_while_loops(pool, stream)
            else:
                self._build_step_graphs(pool, stream)
        if _decisions(self.decode(sample, sample_lengths)) != expected:
            raise RuntimeError(f"{mode} graphs decoded a test batch differently from eager decoding")

    def _build_while_loops(self, pool: Any, stream: torch.cuda.Stream) -> None:
        s = self.search
        start, begin, search, end = (
            capture_graph(step, pool, stream, keep=True)
            for step in (s.start, s.begin_label, s.search_step, s.end_label)
        )
        # The flags are the state's: made by the warm-up's start() and written in place ever since.
        loops = [start, While(s.state.active_any, [begin, While(s.state.searching_any, [search]), end])]
        graph = ConditionalGraph(loops, self.device)
        self._run = graph.launch

    def _build_step_graphs(self, pool: Any, stream: torch.cuda.Stream) -> None:
        first, search, next_label = (
            capture_graph(steps, pool, stream, keep=False) for steps in step_pieces(self.search)
        )
        self._run = lambda: run_step_pieces(self.search, first.replay, search.replay, next_label.replay)


def step_pieces(s: LabelLoopingSearch) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
    """The three pieces ``step_graphs`` captures: the first label's steps, one search pass, the next label's."""

    def first() -> None:
        s.start()
        s.begin_label()
        s.search_step()

    def next_label() -> None:
        # Replayed once more after the last label: with no row left, its steps change nothing.
        s.end_label()
        s.begin_label()
        s.search_step()

    return first, s.search_step, next_label


def run_step_pieces(s: LabelLoopingSearch, first: Callable[[], None], search: Callable[[], None],
                    next_label: Callable[[], None]) -> None:
    """The host loop of ``step_graphs``: one read of both loop flags per piece."""
    first()
    while True:
        active_any, searching_any = s.state.flags.tolist()
        if not active_any:
            return
        (search if searching_any else next_label)()


def _decisions(result: DecodingResult) -> list[tuple[list[int], list[int], list[int]]]:
    return [(h.tokens, h.timestamps, h.durations) for h in result.hypotheses()]


def decode_options_with_graphs(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                               options: LabelLoopingOptions, fusions: Sequence[Fusion] = ()) -> DecodingResult | None:
    """``greedy_label``'s graph driver: :func:`decode_with_graphs` with the strategy's options (``model`` already
    in their ``compute_dtype``)."""
    return decode_with_graphs(model, encoder_out, lengths, options.max_symbols_per_frame, options.window_size,
                              options.cuda_graphs, effective_compute_dtype(options, encoder_out), fusions)


def decode_with_graphs(
    model: DecodingModel,
    encoder_out: torch.Tensor,
    lengths: torch.Tensor,
    max_symbols_per_frame: int | None,
    window_size: int,
    mode: str,
    compute_dtype: torch.dtype | None = None,
    fusions: Sequence[Fusion] = (),
) -> DecodingResult | None:
    """Decode with CUDA graphs in ``mode`` (or the fastest that works, for ``"auto"``); None means "decode
    eagerly": the modes could not be used (each one warned why) or the batch is empty.

    Each mode is tried with the fused kernels of :mod:`transdec.decoding.cuda.greedy_kernels` where Triton is
    available and there are no ``fusions``, then without them; either way the joint is one kernel
    (:mod:`transdec.decoding.cuda.joint_kernel`) where the joint allows. ``fusions`` must be graph-safe
    (:mod:`transdec.decoding.scoring`); the graphs keep them alive with the model's other graphs.
    """
    batch_size, max_time, encoder_dim = encoder_out.shape
    if batch_size == 0 or max_time == 0:
        return None
    if max_symbols_per_frame is None:
        warn_fallback("CUDA graphs need a max_symbols_per_frame (it bounds the hypotheses' storage)")
        return None
    device = encoder_out.device
    frames = frame_bucket(max_time)
    fused_options = (True, False) if greedy_kernels.kernels_available(device) and not fusions else (False,)
    for candidate in ("while_loops", "step_graphs") if mode == "auto" else (mode,):
        reason = mode_unavailable(candidate, device)
        if reason is not None:
            warn_fallback(f"CUDA graph mode {candidate!r} is not usable here: {reason}")
            continue
        for fused in fused_options:
            variant = (candidate, fused, device)
            reason = FAILED_MODES.get(variant)
            if reason is None:
                key = (candidate, fused, joint_kernel.enabled(), batch_size, frames, encoder_dim, encoder_out.dtype,
                       compute_dtype, device, max_symbols_per_frame, window_size, fusions_key(fusions),
                       weights_version(model))
                try:
                    graphed = cached(model, key, lambda: GraphedLabelLooping(
                        model, batch_size, frames, encoder_dim, encoder_out.dtype, device, max_symbols_per_frame,
                        window_size, candidate, fused, compute_dtype, fusions))
                    return graphed.decode(encoder_out, lengths, fusions)
                except Exception as error:  # capture or graph building refused: any such failure means "fall back"
                    reason = failure_reason(error)
                    FAILED_MODES[variant] = reason
            kernels = " with the fused kernels" if fused else ""
            warn_fallback(f"CUDA graph mode {candidate!r}{kernels} is not usable here: {reason}")
    return None

