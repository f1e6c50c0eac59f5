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

from transdec.decoding.beam.wind_batched import WindSearch
from transdec.decoding.cuda import search_graphs

#: The first entry of this decoder's keys in the shared graph cache and in FAILED_MODES.
NAME = "beam_wind_batched"

#: ``decode_with_graphs(model, encoder_out, lengths, options, fusions=())``: the result, or None to decode eagerly.
decode_with_graphs = search_graphs.graph_driver_of(NAME, WindSearch, needs_symbol_limit=True)
