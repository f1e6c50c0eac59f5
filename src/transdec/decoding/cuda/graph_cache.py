"""What every CUDA-graph decoder shares: the per-model cache of captured graphs, the record of modes that failed,
the fallback warning, and the guard that keeps the garbage collector out of a capture.

A decoder's graphs are made per shape (batch size and frame bucket, ``T`` rounded up to a power of two, at least
:data:`MIN_FRAME_BUCKET`) and kept with the model they were captured from, as long as it lives; a change of the
predictor's or joint's weights (:func:`weights_version`, the last entry of every key) makes them anew. Greedy keys
start with their graph mode and beam keys with their search's name, so the decoders share one cache (and its
limit of :data:`MAX_CACHED_SHAPES` sets per model) without meeting.
"""

from __future__ import annotations

import contextlib
import gc
import warnings
import weakref
from collections.abc import Sequence
from typing import Any, Callable, Iterator, TypeVar

import torch

from transdec.decoding.options import GraphOptions
from transdec.decoding.registry import graph_driver
from transdec.decoding.results import DecodingResult
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel

MIN_FRAME_BUCKET = 64
#: Graph sets kept per model (each holds its buffers and graphs); the oldest goes first.
MAX_CACHED_SHAPES = 16

G = TypeVar("G")


class CudaGraphFallbackWarning(UserWarning):
    """A CUDA graph mode could not be used; decoding went on with the next one."""


# Per process: why modes are unusable on a device (None: usable), and each model's graphs (dropped with
# the model).
FAILED_MODES: dict[tuple, str | None] = {}
GRAPHS: weakref.WeakKeyDictionary[Any, dict[tuple, Any]] = weakref.WeakKeyDictionary()


class GraphedSearch:
    """A search captured in CUDA graphs that read their input from fixed buffers: subclasses make ``encoder_out
    [B, T, D]`` and ``lengths [B]``, a ``search`` with ``result()``, ``_run``, which runs the graphs, and the
    fusions the graphs read (:meth:`capture_fusions`)."""

    encoder_out: torch.Tensor
    lengths: torch.Tensor
    search: Any
    fusions: tuple[Fusion, ...] = ()
    _loaded: list[Any]  # per fusion, the scorer whose values its buffer holds (None: not buffered)
    _run: Callable[[], None]

    def capture_fusions(self, fusions: Sequence[Fusion]) -> tuple[Fusion, ...]:
        """The fusions the graphs capture (:attr:`fusions`): ``fusions`` with each scorer that has a ``graph_key``
        replaced by its ``graph_buffer()``, loaded with its values; :meth:`decode` loads later scorers of the same
        key into it."""
        captured, self._loaded = [], []
        for fusion in fusions:
            if _buffered(fusion):
                buffer = fusion.scorer.graph_buffer()
                fusion.scorer.copy_to(buffer)
                self._loaded.append(fusion.scorer)
                fusion = Fusion(buffer, fusion.weight, fusion.token_bonus, fusion.blank_scoring)
            else:
                self._loaded.append(None)
            captured.append(fusion)
        self.fusions = tuple(captured)
        return self.fusions

    def decode(self, encoder_out: torch.Tensor, lengths: torch.Tensor, fusions: Sequence[Fusion] = ()) -> Any:
        """Decode ``encoder_out [B, T, D]`` (``T`` at most the capacity) with ``lengths [B]`` and ``fusions``, of
        the :func:`fusions_key` the graphs were captured for (empty: the scorers loaded last)."""
        for number, fusion in enumerate(fusions):
            if _buffered(fusion) and fusion.scorer != self._loaded[number]:
                fusion.scorer.copy_to(self.fusions[number].scorer)
                self._loaded[number] = fusion.scorer
        self._load(encoder_out, lengths)
        self._run()
        return self.search.result()

    def _load(self, encoder_out: torch.Tensor, lengths: torch.Tensor) -> None:
        # Frames past T keep an earlier batch's values; they lie past every length, so no decision reads them.
        self.encoder_out[:, : encoder_out.shape[1]].copy_(encoder_out)
        self.lengths.copy_(lengths)


def _buffered(fusion: Fusion) -> bool:
    return hasattr(fusion.scorer, "graph_key")


def fusions_key(fusions: Sequence[Fusion]) -> tuple:
    """What graphs captured with ``fusions`` depend on: each fusion itself, or for a scorer with ``graph_key()``,
    ``graph_buffer()`` and ``copy_to(buffer)`` (a boosting tree: its tables are values a graph can read from
    buffers, see :meth:`GraphedSearch.capture_fusions`) the fusion's weights and that key, so that a new scorer of
    the same key reuses the graphs."""
    return tuple((fusion.weight, fusion.token_bonus, fusion.blank_scoring, fusion.scorer.graph_key())
                 if _buffered(fusion) else fusion for fusion in fusions)


def capture_graph(steps: Callable[[], object], pool: Any, stream: torch.cuda.Stream, keep: bool) -> Any:
    """A CUDA graph of ``steps`` on ``stream`` in memory ``pool``; ``keep`` keeps it clonable into a
    :class:`~transdec.decoding.cuda.conditional_graphs.ConditionalGraph`."""
    graph = torch.cuda.CUDAGraph(keep_graph=True) if keep else torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
        steps()
    return graph


def frame_bucket(max_time: int) -> int:
    """The frame capacity graphs for ``max_time`` frames are made with: a power of two, at least the minimum, so
    that a few shapes serve every length."""
    return max(MIN_FRAME_BUCKET, 1 << (max_time - 1).bit_length())


def cached(model: DecodingModel, key: tuple, make: Callable[[], G]) -> G:
    """The graph set of ``model`` under ``key`` (its last entry the :func:`weights_version`), made if missing."""
    try:
        graphs = GRAPHS.setdefault(model, {})
    except TypeError:  # not weak-referenceable or not hashable: nothing to keep the graphs with
        return make()
    if key not in graphs:
        stale = [k for k in graphs if k[:-1] == key[:-1]]  # same shape, older weights
        for old in stale + list(graphs)[: max(0, len(graphs) - MAX_CACHED_SHAPES + 1)]:
            graphs.pop(old, None)
        graphs[key] = make()
    return graphs[key]


def weights_version(model: DecodingModel) -> tuple:
    """Changes whenever the predictor's or joint's weights are replaced or updated in place: captured graphs
    (and tables derived from the weights at capture) would otherwise keep using the old ones."""
    version = []
    for part in (model.predictor, model.joint):
        if isinstance(part, torch.nn.Module):
            for parameter in part.parameters():
                counter = None if parameter.is_inference() else parameter._version
                version.append((parameter.data_ptr(), counter))
    return tuple(version)


def mode_unavailable(mode: str, device: torch.device) -> str | None:
    """Why ``mode`` cannot run on ``device`` at all (checked once per process), or None: ``"while_loops"`` needs
    conditional graph nodes (:mod:`transdec.decoding.cuda.conditional_graphs`); the other modes need only PyTorch."""
    if mode != "while_loops":
        return None
    if (mode, device) not in FAILED_MODES:
        from transdec.decoding.cuda.conditional_graphs import conditional_graphs_unavailable

        FAILED_MODES[mode, device] = conditional_graphs_unavailable(device)
    return FAILED_MODES[mode, device]


def failure_reason(error: Exception) -> str:
    """What to tell the user about an exception that stopped a capture or a self-check."""
    reason = f"{type(error).__name__}: {error}"
    if error.__context__ is not None:  # capture_end's error hides the one that broke the capture
        reason += f" (after {type(error.__context__).__name__}: {error.__context__})"
    return reason


def warn_fallback(message: str, stacklevel: int = 4) -> None:
    """Warn (:class:`CudaGraphFallbackWarning`) that a graph mode is skipped, and why."""
    warnings.warn(f"{message}; decoding without it", CudaGraphFallbackWarning, stacklevel=stacklevel)


@contextlib.contextmanager
def capture_stream(device: torch.device) -> Iterator[tuple[torch.cuda.Stream, Any]]:
    """A side stream to warm the steps up and capture them on (PyTorch captures off the default stream), and a memory
    pool for the graphs captured there; no garbage is collected meanwhile (:func:`no_garbage_collection`), and the
    current stream waits for the side stream's work afterwards."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream), no_garbage_collection():
        yield stream, torch.cuda.graph_pool_handle()
    torch.cuda.current_stream(device).wait_stream(stream)


@contextlib.contextmanager
def no_garbage_collection() -> Iterator[None]:
    """Collect garbage now and not again until the graphs are captured: a collection during capture can free
    another decoder's graphs, and destroying a graph then invalidates the capture."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def graphed_result(strategy: str, model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                   options: GraphOptions, scoring: Scoring) -> DecodingResult | None:
    """A strategy's graph dispatch: its result through the graph driver registered for ``strategy`` on CUDA, or None
    to decode eagerly (a CPU, ``cuda_graphs="off"``, fusions that are not graph-safe under ``"auto"``, no driver
    registered, or no mode usable here).

    Raises:
        ValueError: a graph mode asked for with a fusion that is not graph-safe.
    """
    if not scoring.graph_safe and options.cuda_graphs not in ("auto", "off"):
        raise ValueError(f"cuda_graphs={options.cuda_graphs!r} takes only graph-safe fusions (such as the n-gram LM); "
                         "use 'auto' or 'off'")
    if encoder_out.device.type != "cuda" or options.cuda_graphs == "off" or not scoring.graph_safe:
        return None
    driver = graph_driver(strategy)
    return None if driver is None else driver(model, encoder_out, lengths, options, scoring.fusions)
