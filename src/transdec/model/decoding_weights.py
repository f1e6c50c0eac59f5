"""Weights laid out for the small matrix products of decoding on a CPU.

A decoding step multiplies a few rows (one per hypothesis) by the predictor's and joint's weight matrices. With
the weight stored as ``nn.Linear`` keeps it (``[out, in]``), PyTorch's CPU BLAS runs that product as a transposed
GEMM, which took up to 1.5x as long as the same product with the weight stored transposed (``[in, out]``): 1.0-1.5x
at 4-16 rows, 1.0-1.3x at 1 and 64 rows (``bench/cpu_layouts.py``; docs/benchmarks.md, "CPU layouts"). :func:`linear` keeps a
transposed copy of each weight on its module and uses it whenever autograd is off.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def transposed(module: nn.Module, name: str) -> Tensor:
    """``module``'s parameter ``name`` transposed (``[in, out]``): a contiguous copy cached on the module when
    autograd is off (decoding) and the tensor is on a CPU, else the transposed view (with autograd on, a frozen
    weight may still be saved for another input's gradient, and a copy made under inference mode cannot be; in a
    trace, the exported graph must read the parameter).

    The copy is rebuilt whenever the parameter changes: in-place updates (optimiser steps, ``load_state_dict``)
    bump its version, moves and casts reallocate it. Parameters made under inference mode have no version
    counter, so they get the view.
    """
    weight = module._parameters[name]
    if weight.device.type != "cpu" or weight.is_inference() or torch.is_grad_enabled() or torch.jit.is_tracing():
        return weight.t()
    key = (weight._version, weight.data_ptr(), weight.dtype)
    cache = module.__dict__.setdefault("_transposed_weights", {})
    cached = cache.get(name)
    if cached is None or cached[0] != key:
        with torch.no_grad():
            cached = cache[name] = (key, weight.t().contiguous())
    return cached[1]


def linear(x: Tensor, module: nn.Module) -> Tensor:
    """``module(x)`` for ``x [..., in]``, with the weight from :func:`transposed` for an ``nn.Linear`` (another
    layer, e.g. an int8 one of :mod:`transdec.model.quantization`, is called as it is)."""
    if not isinstance(module, nn.Linear):
        return module(x)
    weight, bias = module._parameters["weight"], module._parameters["bias"]
    weight_t = transposed(module, "weight")
    if weight_t.data_ptr() == weight.data_ptr():  # no copy here: nn.Linear's own path
        return F.linear(x, weight, bias)
    rows = x.reshape(-1, x.shape[-1])
    out = rows @ weight_t if bias is None else torch.addmm(bias, rows, weight_t)
    return out.reshape(*x.shape[:-1], out.shape[-1])
