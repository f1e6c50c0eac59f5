"""The decoding strategies by name, and the calling convention every strategy function follows.

A strategy is a function ``decode_fn(model, encoder_out [B, T, D], lengths [B], options, *, fusions)`` returning a
:class:`~transdec.decoding.results.DecodingResult`: ``options`` is an instance of the strategy's options class (a
:class:`~transdec.decoding.options.DecodingOptions` subclass, where every option and its default is defined once),
``fusions`` the :class:`~transdec.decoding.scoring.Fusion` s to score with. :func:`takes_options` lets the
function also be called with its options as keywords. The built-in strategies are registered in
:mod:`transdec.decoding.strategies`; :func:`~transdec.decoding.api.decode` and the command line work on whatever
is registered.

A strategy may also name its **stream search** (:class:`~transdec.decoding.stream_search.StreamSearch`: the same
search run on streams whose frames arrive in chunks, with the same result) and its **graph driver** (the search
captured as CUDA graphs, which the strategy function hands a CUDA batch to through :func:`graph_driver`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar

import torch

from transdec.decoding.options import DecodingOptions
from transdec.decoding.results import DecodingResult
from transdec.decoding.scoring import Fusion
from transdec.decoding.stream_search import StreamSearchMaker


class DecodeFn(Protocol):
    def __call__(self, model: Any, encoder_out: torch.Tensor, lengths: torch.Tensor,
                 options: DecodingOptions, *, fusions: Sequence[Fusion] = ()) -> DecodingResult: ...


class GraphDriver(Protocol):
    """A strategy's search under CUDA graphs: the result of ``encoder_out [B, T, D]``, or None to decode eagerly (no
    graph mode usable here; the driver warned why)."""

    def __call__(self, model: Any, encoder_out: torch.Tensor, lengths: torch.Tensor, options: DecodingOptions,
                 fusions: Sequence[Fusion] = ()) -> DecodingResult | None: ...


F = TypeVar("F", bound=Callable[..., DecodingResult])


def takes_options(options_class: type[DecodingOptions]) -> Callable[[F], F]:
    """Decorator for a strategy function ``fn(model, encoder_out, lengths, options, fusions=())``: the options may
    be left out (the class's defaults), or given as keywords (``fn(model, x, n, beam_size=8)``), and are checked
    to be ``options_class``."""

    def wrap(decode_fn: F) -> F:
        @functools.wraps(decode_fn)
        def call(model: Any, encoder_out: torch.Tensor, lengths: torch.Tensor,
                 options: DecodingOptions | None = None, *, fusions: Sequence[Fusion] = (),
                 **option_values: Any) -> DecodingResult:
            if options is None:
                options = options_class(**option_values)
            elif option_values:
                raise TypeError(f"{decode_fn.__name__}: give options either as an object or as keywords, not both")
            elif type(options) is not options_class:
                raise TypeError(f"{decode_fn.__name__} takes {options_class.__name__}, got {type(options).__name__}")
            return decode_fn(model, encoder_out, lengths, options, fusions=fusions)

        call.options_class = options_class  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap


@dataclass(frozen=True)
class Strategy:
    """A registered strategy: its ``name``, function, options class, a one-line ``summary``, and where it has them
    its stream search (``streams``) and CUDA-graph driver (``graphs``)."""

    name: str
    decode: DecodeFn
    options: type[DecodingOptions]
    summary: str
    streams: StreamSearchMaker | None = None
    graphs: GraphDriver | None = None


#: Every registered strategy by name, in registration order.
STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, decode_fn: DecodeFn, options: type[DecodingOptions], summary: str, *,
                      streams: StreamSearchMaker | None = None, graphs: GraphDriver | None = None) -> Strategy:
    """Register ``decode_fn`` under ``name`` with its options class, and its stream search and graph driver where
    it has them; returns the :class:`Strategy`."""
    if name in STRATEGIES:
        raise ValueError(f"a decoding strategy named {name!r} is already registered")
    if not (isinstance(options, type) and issubclass(options, DecodingOptions)):
        raise TypeError(f"{name}: options must be a DecodingOptions subclass, got {options!r}")
    parameters = inspect.signature(decode_fn).parameters
    missing = [n for n in ("options", "fusions") if n not in parameters]
    if missing:
        raise TypeError(f"{name}: {decode_fn.__qualname__} takes no argument(s) {missing}")
    STRATEGIES[name] = Strategy(name, decode_fn, options, summary, streams, graphs)
    return STRATEGIES[name]


def graph_driver(name: str) -> GraphDriver | None:
    """The CUDA-graph driver registered for strategy ``name`` (None: it has none, or nothing is registered under
    that name)."""
    strategy = STRATEGIES.get(name)
    return None if strategy is None else strategy.graphs


def streaming_strategies() -> list[str]:
    """The registered strategies that stream, in registration order."""
    return [name for name, strategy in STRATEGIES.items() if strategy.streams is not None]
