"""ALSD++ beam search under CUDA graphs (``cuda_graphs="while_loops"`` or ``"step_graphs"``).

An eager ALSD++ step on a GPU is a hundred-odd small kernels and a host sync or two; at realistic batch sizes
the launches, not the arithmetic, set its speed. :class:`~transdec.decoding.beam.alsd_pp.AlsdSearch` with
``in_place=True`` runs the step on preallocated tensors without reading anything back; its ``start`` and its
``step`` are captured and run as :mod:`transdec.decoding.cuda.search_graphs` describes (one graph for the whole
search with a device-side loop, or a graph per step replayed from the host), the n-gram LM's scoring kernel and
the boosting tree inside the step. The graphs need a ``max_symbols_per_frame``: it bounds the steps, and so the
hypotheses' storage.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transdec.decoding.beam.alsd_pp import AlsdPlusOptions, AlsdSearch
from transdec.decoding.cuda import search_graphs
from transdec.decoding.scoring import Fusion
from transdec.protocol import DecodingModel

#: The first entry of this decoder's keys in the shared graph cache and in FAILED_MODES.
NAME = "beam_alsd_pp"


class GraphedAlsd(search_graphs.GraphedSteps):
    """ALSD++ for one batch size, frame capacity, dtype, option set and fusions, captured in ``mode``."""

    def __init__(self, model: DecodingModel, batch_size: int, max_time: int, encoder_dim: int, dtype: torch.dtype,
                 device: torch.device, options: AlsdPlusOptions, mode: str = "step_graphs",
                 fusions: Sequence[Fusion] = ()) -> None:
        make = search_graphs.search_maker(AlsdSearch, model)
        super().__init__(lambda captured, *inputs: make(captured, options, *inputs), batch_size, max_time,
                         encoder_dim, dtype, device, mode, fusions)


#: ``decode_with_graphs(model, encoder_out, lengths, options, fusions=())``: the result, or None to decode eagerly.
decode_with_graphs = search_graphs.graph_driver_of(NAME, AlsdSearch, needs_symbol_limit=True)
