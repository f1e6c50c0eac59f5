"""Decoding with the predictor and joint in a lower precision (``compute_dtype``, e.g. bfloat16).

On a GPU the predictor and joint matrix products are a small part of a decode, which is bound by kernel
count rather than arithmetic, so lower precision is mostly a memory saving; ``bench/gpu.py`` measures both
the speed and how many utterances change their tokens. Only the two matrix-product networks change dtype:
log-softmax, scores and all bookkeeping stay in the encoder output's dtype.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from transdec.protocol import DecodingModel, HeadSpec


@dataclass(eq=False)
class _ConvertedModel:
    head: HeadSpec
    predictor: Any
    joint: Any


# Per process: each model's converted copies, dropped with the model.
_COPIES: weakref.WeakKeyDictionary[Any, dict[torch.dtype, _ConvertedModel]] = weakref.WeakKeyDictionary()


def in_compute_dtype(model: DecodingModel, dtype: torch.dtype) -> DecodingModel:
    """``model`` with copies of its predictor and joint cast to ``dtype`` (made once per model and dtype; a
    later change to the model's weights is not seen by the copy)."""
    def convert() -> _ConvertedModel:
        parts = []
        for part in (model.predictor, model.joint):
            if not isinstance(part, torch.nn.Module):
                raise TypeError(f"compute_dtype needs torch modules as predictor and joint, got {type(part).__name__}")
            parts.append(copy.deepcopy(part).to(dtype))
        return _ConvertedModel(model.head, *parts)

    try:
        copies = _COPIES.setdefault(model, {})
    except TypeError:  # not weak-referenceable or not hashable
        return convert()
    if dtype not in copies:
        copies[dtype] = convert()
    return copies[dtype]
