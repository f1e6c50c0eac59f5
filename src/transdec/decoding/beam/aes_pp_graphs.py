"""AES++ beam search under CUDA graphs (``cuda_graphs="while_loops"`` or ``"step_graphs"``).

An eager AES++ frame on a GPU is a few hundred small kernels and a host sync per expansion step. With
``in_place=True`` :class:`~transdec.decoding.beam.aes_pp.AesSearch` searches a frame on preallocated tensors without
reading anything back; its ``start`` and its ``step`` (one frame) are captured and run as
:mod:`transdec.decoding.cuda.search_graphs` describes: one graph for the whole search with a device-side loop over
the frames, or a graph per frame replayed from the host.
"""

from __future__ import annotations

from transdec.decoding.beam.aes_pp import AesSearch
from transdec.decoding.cuda import search_graphs

#: The first entry of this decoder's keys in the shared graph cache and in FAILED_MODES.
NAME = "beam_aes_pp"

#: ``decode_with_graphs(model, encoder_out, lengths, options, fusions=())``: the result, or None to decode eagerly.
decode_with_graphs = search_graphs.graph_driver_of(NAME, AesSearch)
