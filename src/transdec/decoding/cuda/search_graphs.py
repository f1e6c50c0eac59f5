"""A batched beam search captured as CUDA graphs: its ``start`` and its ``step``, run in one of two modes.

A search that runs in place (ALSD++'s :class:`~transdec.decoding.beam.alsd_pp.AlsdSearch`, AES++'s
:class:`~transdec.decoding.beam.aes_pp.AesSearch`, batched WIND beam's
:class:`~transdec.decoding.beam.wind_batched.WindSearch`, each with ``in_place=True``) writes every update into
tensors made once and keeps its loop condition on the device, in ``state.active_any``. Its ``start()`` and ``step()`` are
captured as graphs and run

``"while_loops"``
    as one graph for the whole search: ``start``, then ``step`` inside a WHILE conditional node on the flag
    (:mod:`transdec.decoding.cuda.conditional_graphs`), so a decode is one launch and one sync at the end. Needs a
    CUDA 12.4+ driver and ``cuda-python``;
``"step_graphs"``
    as the ``start`` graph, then the ``step`` graph replayed from a host loop that reads the flag once per step.
    Needs only PyTorch.

``"auto"`` tries them in that order. Graphs are made per batch size, frame bucket (``T`` rounded up to a power
of two, at least 64), dtype, options, fusions (graph-safe ones; a boosting tree by its padded shapes, see
:func:`~transdec.decoding.cuda.graph_cache.fusions_key`) and predictor/joint weights, and kept with the
model (:mod:`transdec.decoding.cuda.graph_cache`, shared by every decoder's graphs). Before a captured set is
trusted it decodes a small seeded batch, which must give the n-best (tokens, timestamps, durations) that eager
decoding gives; a mode whose capture or check fails is skipped with one
:class:`~transdec.decoding.cuda.graph_cache.CudaGraphFallbackWarning` saying why, and the search runs eagerly when
none is left: a decode never fails because of graphs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch

from transdec.decoding.cuda import joint_kernel
from transdec.decoding.cuda.conditional_graphs import ConditionalGraph, While
from transdec.decoding.cuda.graph_cache import (FAILED_MODES, GraphedSearch, cached, capture_graph, capture_stream,
                                                failure_reason, frame_bucket, fusions_key, mode_unavailable,
                                                warn_fallback, weights_version)
from transdec.decoding.options import GraphOptions
from transdec.decoding.results import DecodingResult, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel

#: Frames of the self-check batch that hold random values (its lengths lie in [0, SAMPLE_FRAMES]).
SAMPLE_FRAMES = 32

#: ``(fusions, encoder_out [B, T, D], lengths [B], in_place) -> search``: a search with ``start``, ``step``,
#: ``run``, ``nbest`` and ``result``, whose in-place ``state.active_any`` is its loop condition.
SearchMaker = Callable[[Sequence[Fusion], torch.Tensor, torch.Tensor, bool], Any]
#: A :data:`SearchMaker` that takes the options after the fusions.
OptionsSearchMaker = Callable[[Sequence[Fusion], Any, torch.Tensor, torch.Tensor, bool], Any]


def search_maker(search_class: Callable[..., Any], model: DecodingModel) -> OptionsSearchMaker:
    """The :data:`OptionsSearchMaker` of a batched search class made as ``search_class(model, encoder_out, lengths,
    options, scoring, in_place=...)`` (ALSD++'s, AES++'s, batched WIND beam's)."""

    def make(fusions: Sequence[Fusion], options: Any, encoder_out: torch.Tensor, lengths: torch.Tensor,
             in_place: bool) -> Any:
        return search_class(model, encoder_out, lengths, options, Scoring(model.head, fusions), in_place=in_place)

    return make


class GraphedSteps(GraphedSearch):
    """The search ``make_search`` makes with ``fusions``, for one batch size, frame capacity and dtype, captured as a
    start and a step graph and run in ``mode`` (see the module docstring)."""

    def __init__(self, make_search: SearchMaker, batch_size: int, max_time: int, encoder_dim: int,
                 dtype: torch.dtype, device: torch.device, mode: str = "step_graphs",
                 fusions: Sequence[Fusion] = ()) -> None:
        self.encoder_out = torch.zeros(batch_size, max_time, encoder_dim, dtype=dtype, device=device)
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.search = make_search(self.capture_fusions(fusions), self.encoder_out, self.lengths, True)
        # A small seeded batch with real decisions in it: decoded by the plain eager search it is what the graphs
        # must agree with; decoded by the in-place steps it warms every kernel up before capture, as PyTorch
        # requires. Frames past SAMPLE_FRAMES stay zero: no length reaches them.
        generator = torch.Generator().manual_seed(0)
        sample = torch.zeros(batch_size, max_time, encoder_dim, dtype=dtype, device=device)
        random_frames = min(max_time, SAMPLE_FRAMES)
        sample[:, :random_frames] = torch.randn(batch_size, random_frames, encoder_dim, generator=generator).to(
            device, dtype)
        sample_lengths = torch.randint(0, random_frames + 1, (batch_size,), generator=generator).to(device)
        sample_lengths[0] = random_frames  # at least one utterance with steps to take
        plain = make_search(self.fusions, sample, sample_lengths, False)
        plain.run()
        expected = _decisions(plain.nbest())
        with capture_stream(device) as (stream, pool):
            self._load(sample, sample_lengths)
            self.search.start()
            self.search.run()
            keep = mode == "while_loops"  # a conditional graph clones the captured ones
            start_graph = capture_graph(self.search.start, pool, stream, keep)
            step_graph = capture_graph(self.search.step, pool, stream, keep)
        # The loop condition is the state's: made by the constructor's start() and written in place ever since.
        active_any = self.search.state.active_any
        if mode == "while_loops":
            whole = ConditionalGraph([start_graph, While(active_any, [step_graph])], device)
            self._run = whole.launch
        else:
            self._run = partial(_replay_steps, start_graph, step_graph, active_any)
        got = _decisions(self.decode(sample, sample_lengths).nbest)
        if got != expected:
            raise RuntimeError(f"{mode} graphs decoded a test batch differently from eager decoding")


def _replay_steps(start_graph: Any, step_graph: Any, active_any: torch.Tensor) -> None:
    """The host loop of ``step_graphs``: one flag read per step (a step replayed with nothing left to search
    would still write a node)."""
    start_graph.replay()
    while bool(active_any):
        step_graph.replay()


def _decisions(nbest: list[list[Hypothesis]]) -> list[list[tuple[list[int], list[int], list[int]]]]:
    return [[(h.tokens, h.timestamps, h.durations) for h in hyps] for hyps in nbest]


def decode_with_graphs(name: str, make_search: OptionsSearchMaker, model: DecodingModel, encoder_out: torch.Tensor,
                       lengths: torch.Tensor, options: GraphOptions, fusions: Sequence[Fusion],
                       needs_symbol_limit: bool = False) -> DecodingResult | None:
    """Decode with the captured steps of ``make_search``'s search (the strategy ``name``) in ``options.cuda_graphs``
    (or the fastest mode that works, for ``"auto"``); None means "decode eagerly": no mode could be used here (each
    warned why), the batch is empty, or the search ``needs_symbol_limit`` to bound its storage and the options have
    no ``max_symbols_per_frame``. ``make_search`` is given the fusions the graphs capture
    (:meth:`~transdec.decoding.cuda.graph_cache.GraphedSearch.capture_fusions`) and the options; both key the
    graphs. The fusions must be graph-safe (:mod:`transdec.decoding.scoring`); the graphs keep them (and their
    scorers) alive with the model's other graphs."""
    if needs_symbol_limit and getattr(options, "max_symbols_per_frame", None) is None:
        warn_fallback(f"{name} CUDA graphs need a max_symbols_per_frame (it bounds the search's storage)")
        return None
    batch_size, max_time, encoder_dim = encoder_out.shape
    if batch_size == 0 or max_time == 0:
        return None
    device = encoder_out.device
    frames = frame_bucket(max_time)
    candidates = ("while_loops", "step_graphs") if options.cuda_graphs == "auto" else (options.cuda_graphs,)
    for mode in candidates:
        reason = mode_unavailable(mode, device) or FAILED_MODES.get((name, mode, device))
        if reason is None:
            # The thread count does not change what is captured; the mode is in the key.
            graph_options = dataclasses.replace(options, cuda_graphs=mode, cpu_threads=None)
            key = (name, batch_size, frames, encoder_dim, encoder_out.dtype, device, graph_options,
                   fusions_key(fusions), weights_version(model), joint_kernel.enabled())
            try:
                graphed = cached(model, key, lambda: GraphedSteps(
                    lambda captured, *inputs: make_search(captured, graph_options, *inputs), batch_size, frames,
                    encoder_dim, encoder_out.dtype, device, mode, fusions))
                return graphed.decode(encoder_out, lengths, fusions)
            except Exception as error:  # capture, replay or self-check refused: any such failure means "fall back"
                reason = failure_reason(error)
                FAILED_MODES[name, mode, device] = reason
        warn_fallback(f"CUDA graph mode {mode!r} of {name} is not usable here: {reason}")
    return None


def graph_driver_of(name: str, search_class: Callable[..., Any],
                    needs_symbol_limit: bool = False) -> Callable[..., Any]:
    """The graph driver of the batched search ``search_class`` (registered for strategy ``name``):
    ``decode_with_graphs(model, encoder_out, lengths, options, fusions=())``, the result or None to decode eagerly
    (see :func:`decode_with_graphs`)."""

    @torch.inference_mode()
    def decode(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: GraphOptions,
               fusions: Sequence[Fusion] = ()) -> DecodingResult | None:
        """Decode with the captured search in ``options.cuda_graphs`` (or the fastest mode that works, for
        ``"auto"``); ``fusions`` must be graph-safe (:mod:`transdec.decoding.scoring`)."""
        return decode_with_graphs(name, search_maker(search_class, model), model, encoder_out, lengths, options,
                                  fusions, needs_symbol_limit)

    return decode
