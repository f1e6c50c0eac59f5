"""One entry point for every decoding strategy: ``decode(model, encoder_out, lengths, config)``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from transdec.decoding import strategies  # noqa: F401  (registers the built-in strategies)
from transdec.decoding.options import DecodingOptions
from transdec.decoding.registry import STRATEGIES, Strategy
from transdec.decoding.results import DecodingResult
from transdec.decoding.scoring import Fusion, Scoring
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
    ValueError naming the ones it has. Strategies (see ``transdec.decoding.STRATEGIES``):

    * ``greedy_label``: label-looping, exact, the fastest batched decoder (options
      :class:`~transdec.decoding.greedy.label_looping.LabelLoopingOptions`: ``window_size``, ``cuda_graphs``,
      ``compute_dtype``);
    * ``greedy_frame``: the frame-looping baseline, inexact for TDT and multi-blank;
    * ``greedy_wind``: one utterance at a time with a WIND window, the batch-1 path;
    * ``greedy_reference``: one utterance at a time, frame by frame: the specification.

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
