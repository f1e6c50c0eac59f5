"""What a search over streams does: the protocol that a strategy's streaming form implements.

A stream search holds up to ``S`` streams in slots and decodes them together as their encoder frames arrive, chunk
by chunk, with the result of the strategy on each stream's frames whole. Greedy label-looping
(:class:`~transdec.decoding.greedy.streaming.GreedyStreams`) and ALSD++ beam search
(:class:`~transdec.decoding.beam.streaming.BeamStreams`) implement it; a strategy names its stream search when it is
registered (:func:`~transdec.decoding.registry.register_strategy`), and
:func:`~transdec.decoding.api.stream_search` makes it from a :class:`~transdec.decoding.api.DecodingConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch

from transdec.decoding.options import DecodingOptions
from transdec.decoding.results import DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion


#: Options of a strategy that its stream search does not read: streams run eagerly (no CUDA graphs, the predictor and
#: joint in the model's dtype, the threads the caller set) and a segment's result is the best hypothesis.
IGNORED_OPTIONS = ("cpu_threads", "cuda_graphs", "compute_dtype", "nbest")


class StreamSearch(Protocol):
    """Streams of one model decoded together; frames, timestamps and positions count from each stream's start."""

    stats: DecodingStats  # predictor and joint calls so far, each over every slot

    def open(self) -> int:
        """A free slot, reset to the start of a stream; ValueError when every slot is taken."""

    def accept(self, slot: int, frames: torch.Tensor) -> None:
        """Queue encoder frames ``[T, D]`` of the stream in ``slot``, decoded by the next :meth:`decode`."""

    def finish(self, slot: int) -> None:
        """No more frames will come for ``slot``: the next :meth:`decode` takes the stream to its end."""

    def decode(self) -> None:
        """Run every open stream as far as its frames allow, all of them in one batch."""

    def position(self, slot: int) -> int:
        """The frame up to which the stream has been decoded (at most the frames received)."""

    def best(self, slot: int) -> Hypothesis:
        """The stream's best hypothesis so far."""

    def nbest(self, slot: int) -> list[Hypothesis]:
        """The stream's hypotheses so far, best first (one for a greedy search)."""

    def restart(self, slot: int) -> None:
        """Begin a new segment where the stream's search stands (after an endpoint): no tokens, the predictor and
        the fusions at their start; frames and positions go on."""

    def close(self, slot: int) -> Any:
        """Free ``slot``; returns the stream's result (the search's own form: a hypothesis, or the n-best)."""


class StreamSearchMaker(Protocol):
    """How a strategy makes its stream search (the stream search classes' constructors have this signature)."""

    def __call__(self, model: Any, max_streams: int, options: DecodingOptions, fusions: Sequence[Fusion] = (),
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> StreamSearch: ...
