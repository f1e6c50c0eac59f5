"""The decoding strategies by name: each strategy module registers its function and options class here.

A strategy is a function ``decode_fn(model, encoder_out [B, T, D], lengths [B], *, fusions, **options)``
returning a :class:`~transdec.decoding.results.DecodingResult`, whose keyword arguments are the fields its
options class adds to :class:`~transdec.decoding.options.DecodingOptions`. ``fusions`` are the
:class:`~transdec.decoding.scoring.Fusion` s to score with; every strategy reads the joint through
:class:`~transdec.decoding.scoring.Scoring`. :func:`~transdec.decoding.api.decode` and the command line
work on whatever is registered.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Callable, TypeVar

from transdec.decoding.options import DecodingOptions
from transdec.decoding.results import DecodingResult

DecodeFn = Callable[..., DecodingResult]
F = TypeVar("F", bound=DecodeFn)


@dataclass(frozen=True)
class Strategy:
    """A registered strategy: its ``name``, function, options class and a one-line ``summary``."""

    name: str
    decode: DecodeFn
    options: type[DecodingOptions]
    summary: str

    def strategy_fields(self) -> list[str]:
        """The option names passed to the function (those :class:`DecodingOptions` does not define)."""
        common = {f.name for f in dataclasses.fields(DecodingOptions)}
        return [f.name for f in dataclasses.fields(self.options) if f.name not in common]


#: Every registered strategy by name, in registration order.
STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, options: type[DecodingOptions], summary: str) -> Callable[[F], F]:
    """Decorator that registers a strategy function under ``name`` with its options class."""

    def register(decode_fn: F) -> F:
        if name in STRATEGIES:
            raise ValueError(f"a decoding strategy named {name!r} is already registered")
        if not (isinstance(options, type) and issubclass(options, DecodingOptions)):
            raise TypeError(f"{name}: options must be a DecodingOptions subclass, got {options!r}")
        strategy = Strategy(name, decode_fn, options, summary)
        parameters = inspect.signature(decode_fn).parameters
        missing = [n for n in [*strategy.strategy_fields(), "fusions"] if n not in parameters]
        if missing:
            raise TypeError(f"{name}: {decode_fn.__qualname__} takes no argument(s) {missing}")
        STRATEGIES[name] = strategy
        return decode_fn

    return register
