"""AES++ beam search under CUDA graphs (``cuda_graphs="while_loops"`` or ``"step_graphs"``).

An eager AES++ frame on a GPU is a few hundred small kernels and a host sync per expansion step. With
``in_place=True`` :class:`~transdec.decoding.beam.aes_pp.AesSearch` searches a frame on preallocated tensors without
reading anything back; its ``start`` and its ``step`` (one frame) are captured and run as
:mod:`transdec.decoding.cuda.search_graphs` describes: one graph for the whole search with a device-side loop over
the frames, or a graph per frame replayed from the host.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transdec.decoding.beam.aes_pp import AesOptions, AesSearch
from transdec.decoding.cuda import search_graphs
from transdec.decoding.results import DecodingResult
from transdec.decoding.scoring import Fusion
from transdec.protocol import DecodingModel

#: The first entry of this decoder's keys in the shared graph cache and in FAILED_MODES.
NAME = "beam_aes_pp"



@torch.inference_mode()
def decode_with_graphs(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: AesOptions,
                       fusions: Sequence[Fusion] = ()) -> DecodingResult | None:
    """Decode with captured AES++ frames in ``options.cuda_graphs`` (or the fastest mode that works, for
    ``"auto"``); None means "decode eagerly" (see :func:`transdec.decoding.cuda.search_graphs.decode_with_graphs`).
    ``fusions`` must be graph-safe (:mod:`transdec.decoding.scoring`)."""
    return search_graphs.decode_with_graphs(NAME, search_graphs.search_maker(AesSearch, model), model, encoder_out,
                                            lengths, options, fusions)
