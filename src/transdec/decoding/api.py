"""One entry point for every decoding strategy: ``decode(model, encoder_out, lengths, config)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from transdec.decoding.greedy_frame_looping import greedy_frame_looping
from transdec.decoding.greedy_label_looping import GRAPH_MODES, greedy_label_looping
from transdec.decoding.greedy_reference import greedy_reference
from transdec.decoding.greedy_wind import greedy_wind
from transdec.decoding.inputs import check_max_symbols, check_window_size
from transdec.decoding.results import DecodingResult
from transdec.model.protocol import DecodingModel
from transdec.runtime import decoding_threads

#: Strategy name -> decoder. ``greedy_frame`` is exact for RNN-T only (see its module).
STRATEGIES: dict[str, Callable[..., DecodingResult]] = {
    "greedy_label": greedy_label_looping,
    "greedy_frame": greedy_frame_looping,
    "greedy_reference": greedy_reference,
    "greedy_wind": greedy_wind,
}
#: Strategies that take a WIND ``window_size``.
WINDOWED = {"greedy_label", "greedy_wind"}


@dataclass(frozen=True)
class DecodingConfig:
    """How to decode.

    Attributes:
        strategy: ``"greedy_label"`` (label-looping, exact, fastest batched), ``"greedy_frame"``
            (frame-looping baseline; inexact for TDT and multi-blank), ``"greedy_wind"`` (one utterance
            at a time with a WIND window: the batch-1 path) or ``"greedy_reference"`` (one utterance at a
            time, frame by frame; the specification).
        max_symbols_per_frame: tokens allowed at one frame before time is forced forward; None for no
            limit (a model that never emits a blank then never stops).
        cpu_threads: intra-op threads for the decoding loop on CPU; None lets transdec choose
            (see :mod:`transdec.runtime`). Ignored on other devices.
        window_size: WIND window for ``greedy_label`` and ``greedy_wind``: frames scored per joint call
            while looking for the next label (1 = frame by frame). Never changes the output.
        cuda_graphs: for ``greedy_label`` on CUDA: ``"auto"`` (the fastest mode that works here),
            ``"while_loops"`` (one graph per decode, loops on the device), ``"step_graphs"`` (a graph per
            loop step) or ``"off"``; see :mod:`transdec.decoding.label_looping_graphs`. Never changes
            the output.
        compute_dtype: for ``greedy_label``: run the predictor and joint in this dtype (e.g.
            ``torch.bfloat16``); scores stay in the encoder output's. None: the encoder output's dtype.
    """

    strategy: str = "greedy_label"
    max_symbols_per_frame: int | None = 10
    cpu_threads: int | None = None
    window_size: int = 1
    cuda_graphs: str = "auto"
    compute_dtype: torch.dtype | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown decoding strategy {self.strategy!r}; choose from {sorted(STRATEGIES)}")
        check_max_symbols(self.max_symbols_per_frame)
        check_window_size(self.window_size)
        if self.window_size != 1 and self.strategy not in WINDOWED:
            raise ValueError(f"window_size applies to {sorted(WINDOWED)}, not to {self.strategy!r}")
        if self.cuda_graphs not in GRAPH_MODES:
            raise ValueError(f"cuda_graphs must be one of {GRAPH_MODES}, got {self.cuda_graphs!r}")
        if self.cpu_threads is not None and self.cpu_threads < 1:
            raise ValueError(f"cpu_threads must be at least 1 or None, got {self.cpu_threads}")


def decode(
    model: DecodingModel,
    encoder_out: torch.Tensor,
    lengths: torch.Tensor,
    config: DecodingConfig | None = None,
) -> DecodingResult:
    """Decode a batch of encoder outputs.

    Args:
        model: anything with ``head``, ``predictor`` and ``joint`` (see :mod:`transdec.model.protocol`).
        encoder_out: ``[B, T, D]`` encoder frames; frames past an utterance's length are never read.
        lengths: ``[B]`` number of valid frames per utterance.
        config: strategy and options; defaults to exact label-looping greedy decoding.

    Returns:
        A :class:`~transdec.decoding.results.DecodingResult`; ``result.hypotheses()`` gives one
        :class:`~transdec.decoding.results.Hypothesis` per utterance.
    """
    config = config or DecodingConfig()
    decoder = STRATEGIES[config.strategy]
    with decoding_threads(encoder_out.device, config.cpu_threads):
        options = {"window_size": config.window_size} if config.strategy in WINDOWED else {}
        if config.strategy == "greedy_label":
            options.update(cuda_graphs=config.cuda_graphs, compute_dtype=config.compute_dtype)
        return decoder(model, encoder_out, lengths, max_symbols_per_frame=config.max_symbols_per_frame, **options)
