"""ALSD++ beam search under CUDA graphs (``cuda_graphs="while_loops"`` or ``"step_graphs"``).

An eager ALSD++ step on a GPU is a hundred-odd small kernels and a host sync or two; at realistic batch sizes
the launches, not the arithmetic, set its speed. :class:`~transdec.decoding.beam.alsd_pp.AlsdSearch` with
``in_place=True`` runs the step on preallocated tensors without reading anything back; here its ``start`` and
its ``step`` are captured as CUDA graphs, run in one of two modes:

``"while_loops"``
    One graph for the whole search: ``start``, then ``step`` inside a WHILE conditional node on the device flag
    ``active_any`` (:mod:`transdec.decoding.cuda.conditional_graphs`), so a decode is one launch and one sync at the
    end. Needs a CUDA 12.4+ driver and ``cuda-python``.
``"step_graphs"``
    The ``start`` graph, then the ``step`` graph replayed from a host loop that reads ``active_any`` once per
    step. Needs only PyTorch.

``"auto"`` tries them in that order. Graphs are made per batch size, frame bucket (``T`` rounded up to a power
of two, at least 64), beam, dtype, options, fusions (graph-safe ones: the n-gram LM's scoring kernel runs inside
the step) and predictor/joint weights, and kept with the model
(:mod:`transdec.decoding.cuda.graph_cache`, shared with greedy decoding's graphs). Before a captured set is trusted it
decodes a small seeded batch, which must give the n-best (tokens, timestamps, durations) that eager decoding
gives; a mode whose capture or check fails is skipped with one
:class:`~transdec.decoding.cuda.graph_cache.CudaGraphFallbackWarning` saying why, and the search runs eagerly when
none is left: a decode never fails because of graphs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import partial
from typing import Any

import torch

from transdec.decoding.beam.alsd_pp import AlsdPlusOptions, AlsdSearch
from transdec.decoding.cuda.conditional_graphs import ConditionalGraph, While
from transdec.decoding.cuda.graph_cache import (FAILED_MODES, GraphedSearch, cached, capture_graph, failure_reason,
                                           frame_bucket, mode_unavailable, no_garbage_collection, warn_fallback,
                                           weights_version)
from transdec.decoding.results import DecodingResult, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel

#: The first entry of this decoder's keys in the shared graph cache and in FAILED_MODES.
NAME = "beam_alsd_pp"
#: Frames of the self-check batch that hold random values (its lengths lie in [0, SAMPLE_FRAMES]).
SAMPLE_FRAMES = 32


class GraphedAlsd(GraphedSearch):
    """ALSD++ for one batch size, frame capacity, dtype, option set and fusions, captured as a start and a step
    graph and run in ``mode`` (see the module docstring)."""

    def __init__(self, model: DecodingModel, batch_size: int, max_time: int, encoder_dim: int, dtype: torch.dtype,
                 device: torch.device, options: AlsdPlusOptions, mode: str = "step_graphs",
                 fusions: Sequence[Fusion] = ()) -> None:
        self.encoder_out = torch.zeros(batch_size, max_time, encoder_dim, dtype=dtype, device=device)
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
        scoring = Scoring(model.head, fusions)
        self.search = AlsdSearch(model, self.encoder_out, self.lengths, options, scoring, in_place=True)
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
        plain = AlsdSearch(model, sample, sample_lengths, options, scoring)
        plain.run()
        expected = _decisions(plain.nbest())
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream), no_garbage_collection():
            self._load(sample, sample_lengths)
            self.search.start()
            self.search.run()
            pool = torch.cuda.graph_pool_handle()
            keep = mode == "while_loops"  # a conditional graph clones the captured ones
            start_graph = capture_graph(self.search.start, pool, stream, keep)
            step_graph = capture_graph(self.search.step, pool, stream, keep)
        torch.cuda.current_stream(device).wait_stream(stream)
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


@torch.inference_mode()
def decode_with_graphs(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                       options: AlsdPlusOptions, fusions: Sequence[Fusion] = ()) -> DecodingResult | None:
    """Decode with captured ALSD++ steps in ``options.cuda_graphs`` (or the fastest mode that works, for
    ``"auto"``); None means "decode eagerly": no mode could be used here (each warned why) or the batch is empty.
    ``fusions`` must be graph-safe (:mod:`transdec.decoding.scoring`); the graphs keep them (and their
    scorers) alive with the model's other graphs."""
    batch_size, max_time, encoder_dim = encoder_out.shape
    if batch_size == 0 or max_time == 0:
        return None
    if options.max_symbols_per_frame is None:
        warn_fallback("ALSD++ CUDA graphs need a max_symbols_per_frame (it bounds the search's storage)")
        return None
    device = encoder_out.device
    frames = frame_bucket(max_time)
    candidates = ("while_loops", "step_graphs") if options.cuda_graphs == "auto" else (options.cuda_graphs,)
    for mode in candidates:
        reason = mode_unavailable(mode, device) or FAILED_MODES.get((NAME, mode, device))
        if reason is None:
            # The thread count does not change what is captured; the mode is in the key.
            graph_options = dataclasses.replace(options, cuda_graphs=mode, cpu_threads=None)
            key = (NAME, batch_size, frames, encoder_dim, encoder_out.dtype, device, graph_options, tuple(fusions),
                   weights_version(model))
            try:
                graphed = cached(model, key, lambda: GraphedAlsd(model, batch_size, frames, encoder_dim,
                                                                 encoder_out.dtype, device, graph_options, mode,
                                                                 fusions))
                return graphed.decode(encoder_out, lengths)
            except Exception as error:  # capture, replay or self-check refused: any such failure means "fall back"
                reason = failure_reason(error)
                FAILED_MODES[NAME, mode, device] = reason
        warn_fallback(f"CUDA graph mode {mode!r} of beam_alsd_pp is not usable here: {reason}")
    return None
