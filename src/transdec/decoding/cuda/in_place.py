"""State updates that CUDA graphs can capture: written into the tensors a search made first, not rebound.

A graph replays kernels on fixed memory, so a search meant for capture (label-looping's and ALSD++'s
``in_place=True``) copies every new value into its existing tensors; eagerly on a CPU, rebinding is cheaper.
:func:`set_state` does one or the other for a state attribute that may be a tensor, a tuple or list of tensors
(predictor states) or a dataclass of them (:class:`~transdec.decoding.emissions.Emissions`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch


def set_state(owner: object, name: str, value: Any, in_place: bool) -> None:
    """``owner.name = value``; with ``in_place``, copied into the tensors ``owner.name`` already holds (the first
    time, a copy of ``value``, which may share memory with another attribute)."""
    attributes = owner.__dict__
    if not in_place:
        attributes[name] = value
    elif name in attributes:
        copy_into(attributes[name], value)
    else:
        attributes[name] = copy_of(value)


def copy_into(target: Any, value: Any) -> None:
    """Copy ``value`` into the tensors of ``target``: a tensor, a tuple/list of them or a dataclass of them."""
    if isinstance(target, torch.Tensor):
        target.copy_(value)
    elif dataclasses.is_dataclass(target):
        for field in dataclasses.fields(target):
            if getattr(target, field.name) is not None:
                copy_into(getattr(target, field.name), getattr(value, field.name))
    else:
        for part, part_value in zip(target, value, strict=True):
            copy_into(part, part_value)


def copy_of(value: Any) -> Any:
    """A copy of ``value`` (as :func:`copy_into` takes it) with fresh tensors."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if dataclasses.is_dataclass(value):
        fields = [f.name for f in dataclasses.fields(value) if getattr(value, f.name) is not None]
        return dataclasses.replace(value, **{name: copy_of(getattr(value, name)) for name in fields})
    return type(value)(copy_of(part) for part in value)
