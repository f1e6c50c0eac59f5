"""Batched WIND beam search under CUDA graphs (``cuda_graphs="while_loops"`` or ``"step_graphs"``).

With ``in_place=True`` :class:`~transdec.decoding.beam.wind_batched.WindSearch` runs a round on preallocated tensors
without reading anything back; its ``start`` and its ``step`` (one round) are captured and run as
:mod:`transdec.decoding.cuda.search_graphs` describes: one graph for the whole search with a device-side loop over
the rounds, or a graph per round replayed from the host. The graphs need a ``max_symbols_per_frame`` ``m``: it
bounds the rounds, and so the hypotheses' storage, a tree node per store slot and round: ``B x K (n + 2) x T (m + 1)``
nodes of 40 bytes (``n``: the window), 2.3 GB for 128 utterances of 1,024 frames at beam 4, window 8 and the
default ``m = 10``; a smaller ``m`` shrinks it in proportion. A capture that runs out of memory falls back like any
other failure.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transdec.decoding.beam.wind_batched import WindBatchedOptions, WindSearch
from transdec.decoding.cuda import search_graphs
from transdec.decoding.cuda.graph_cache import warn_fallback
from transdec.decoding.results import DecodingResult
from transdec.decoding.scoring import Fusion
from transdec.protocol import DecodingModel

#: The first entry of this decoder's keys in the shared graph cache and in FAILED_MODES.
NAME = "beam_wind_batched"



@torch.inference_mode()
def decode_with_graphs(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                       options: WindBatchedOptions, fusions: Sequence[Fusion] = ()) -> DecodingResult | None:
    """Decode with captured WIND beam rounds in ``options.cuda_graphs`` (or the fastest mode that works, for
    ``"auto"``); None means "decode eagerly" (see :func:`transdec.decoding.cuda.search_graphs.decode_with_graphs`).
    ``fusions`` must be graph-safe (:mod:`transdec.decoding.scoring`)."""
    if options.max_symbols_per_frame is None:
        warn_fallback("WIND beam CUDA graphs need a max_symbols_per_frame (it bounds the search's storage)")
        return None
    return search_graphs.decode_with_graphs(NAME, search_graphs.search_maker(WindSearch, model), model, encoder_out,
                                            lengths, options, fusions)
