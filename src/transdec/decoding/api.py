"""The entry points of every decoding strategy: ``decode(model, encoder_out, lengths, config)`` for whole utterances,
``stream_search(model, config, max_streams)`` for streams decoded chunk by chunk."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from transdec.decoding import strategies  # noqa: F401  (registers the built-in strategies)
from transdec.decoding.options import DecodingOptions
from transdec.decoding.registry import STRATEGIES, Strategy, streaming_strategies
from transdec.decoding.results import DecodingResult
from transdec.decoding.scoring import Fusion, Scoring
from transdec.decoding.stream_search import StreamSearch
from transdec.protocol import DecodingModel
from transdec.runtime import decoding_threads


def strategy_named(name: str) -> Strategy:
    """The registered strategy ``name``; a ValueError listing the others if there is none."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown decoding strategy {name!r}; choose from {sorted(STRATEGIES)}")
    return STRATEGIES[name]


@dataclasses.dataclass(frozen=True, init=False)
class DecodingConfig:
    """How to decode: a strategy, its options and the fusions to score with.

    ``DecodingConfig("greedy_wind", window_size=4)`` makes the strategy's options from keyword arguments,
    ``DecodingConfig("greedy_wind", options)`` takes them made; an option the strategy does not have is a
    ValueError naming the ones it has. The strategies (``transdec.decoding.STRATEGIES``), their options and
    whether they stream:

    {strategies}

    Attributes:
        strategy: a registered strategy name.
        options: its options (a :class:`~transdec.decoding.options.DecodingOptions` subclass).
        fusions: external token scorers fused into every decision (:mod:`transdec.decoding.scoring`).
    """

    strategy: str
    options: DecodingOptions
    fusions: tuple[Fusion, ...]

    def __init__(self, strategy: str = "greedy_label", options: DecodingOptions | None = None, *,
                 fusions: Sequence[Fusion] = (), **option_values: Any) -> None:
        options_class = strategy_named(strategy).options
        if options is None:
            accepted = [f.name for f in dataclasses.fields(options_class)]
            unknown = sorted(set(option_values) - set(accepted))
            if unknown:
                raise ValueError(f"decoding strategy {strategy!r} has no option(s) {unknown}; its options: {accepted}")
            options = options_class(**option_values)
        elif option_values:
            raise ValueError("give a strategy's options either as an options object or as keywords, not both")
        elif type(options) is not options_class:
            raise ValueError(f"decoding strategy {strategy!r} takes {options_class.__name__}, "
                             f"got {type(options).__name__}")
        object.__setattr__(self, "strategy", strategy)
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "fusions", tuple(fusions))


def _strategy_list() -> str:
    """The registered strategies as the bullet list of :class:`DecodingConfig`'s docstring."""
    lines = []
    for strategy in STRATEGIES.values():
        common = {f.name for f in dataclasses.fields(DecodingOptions)}  # every strategy's: decode() applies them
        options = ", ".join(f"``{f.name}``" for f in dataclasses.fields(strategy.options) if f.name not in common)
        streams = "; streams" if strategy.streams is not None else ""
        lines.append(f"* ``{strategy.name}``: {strategy.summary} (:class:`{strategy.options.__name__}`"
                     f"{': ' + options if options else ''}{streams})")
    return "\n    ".join(lines)


# The docstring's list is the registry's: it cannot fall behind the strategies.
DecodingConfig.__doc__ = (DecodingConfig.__doc__ or "").replace("{strategies}", _strategy_list())


def streaming_config(decoding: DecodingConfig | DecodingOptions) -> DecodingConfig:
    """``decoding`` as the config of a strategy that streams: a config as it is; an options object as the config of
    the first streaming strategy whose options class it is (``AlsdPlusOptions(beam_size=8)``: ``beam_alsd_pp``).

    Raises:
        ValueError: the strategy does not stream (the message names those that do).
    """
    if isinstance(decoding, DecodingOptions):
        strategy = next((name for name in streaming_strategies() if STRATEGIES[name].options is type(decoding)),
                        None)
        if strategy is None:
            raise ValueError(f"no decoding strategy that streams takes {type(decoding).__name__}; "
                             f"strategies that stream: {', '.join(streaming_strategies())}")
        return DecodingConfig(strategy, decoding)
    if STRATEGIES[decoding.strategy].streams is None:
        raise ValueError(f"decoding strategy {decoding.strategy!r} does not stream; "
                         f"strategies that stream: {', '.join(streaming_strategies())}")
    return decoding


def stream_search(model: DecodingModel, config: DecodingConfig, max_streams: int,
                  device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> StreamSearch:
    """The stream search of ``config``'s strategy (its options and fusions) for up to ``max_streams`` streams of
    ``model``, run in ``dtype`` on ``device`` (:class:`~transdec.decoding.stream_search.StreamSearch`).

    Raises:
        ValueError: the strategy does not stream (the message names those that do).
    """
    config = streaming_config(config)
    make = STRATEGIES[config.strategy].streams
    return make(model, max_streams, config.options, config.fusions, device=device, dtype=dtype)


def decode(
    model: DecodingModel,
    encoder_out: torch.Tensor,
    lengths: torch.Tensor,
    config: DecodingConfig | None = None,
) -> DecodingResult:
    """Decode a batch of encoder outputs.

    Args:
        model: anything with ``head``, ``predictor`` and ``joint`` (see :mod:`transdec.protocol`).
        encoder_out: ``[B, T, D]`` encoder frames; frames past an utterance's length are never read.
        lengths: ``[B]`` number of valid frames per utterance.
        config: strategy and options; defaults to exact label-looping greedy decoding.

    Returns:
        A :class:`~transdec.decoding.results.DecodingResult`; ``result.hypotheses()`` gives one
        :class:`~transdec.decoding.results.Hypothesis` per utterance.
    """
    config = config or DecodingConfig()
    strategy = STRATEGIES[config.strategy]
    Scoring.check_batch_size(config.fusions, encoder_out.shape[0])
    with decoding_threads(encoder_out.device, config.options.cpu_threads):
        return strategy.decode(model, encoder_out, lengths, config.options, fusions=config.fusions)
