"""State updates that CUDA graphs can capture: written into the tensors a search made first, not rebound.

A graph replays kernels on fixed memory, so a search meant for capture (label-looping's and ALSD++'s
``in_place=True``) copies every new value into its existing tensors; eagerly on a CPU, rebinding is cheaper.
A search's state is a dataclass that declares its fields (``LabelLoopingState``, ``AlsdState``);
:func:`set_state` sets one of them either way. A field may hold a tensor, a tuple or list of tensors (predictor
states), a dict of them or a dataclass of them (:class:`~transdec.decoding.emissions.Emissions`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch


def set_state(state: Any, name: str, value: Any, in_place: bool) -> None:
    """``state.name = value`` for a declared field of the dataclass ``state``; with ``in_place``, copied into the
    tensors the field already holds (while it holds None, set to a copy of ``value``, which may share memory
    with another field). An undeclared name is an AttributeError: a search's state is what its class declares."""
    if name not in _field_names(type(state)):
        raise AttributeError(f"{type(state).__name__} declares no field {name!r}")
    current = getattr(state, name)
    if not in_place:
        setattr(state, name, value)
    elif current is None:
        setattr(state, name, copy_of(value))
    else:
        copy_into(current, value)


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(field.name for field in dataclasses.fields(cls))


def copy_into(target: Any, value: Any) -> None:
    """Copy ``value`` into the tensors of ``target``: a tensor, a tuple/list/dict of them or a dataclass of them."""
    if isinstance(target, torch.Tensor):
        target.copy_(value)
    elif dataclasses.is_dataclass(target):
        for field in dataclasses.fields(target):
            if getattr(target, field.name) is not None:
                copy_into(getattr(target, field.name), getattr(value, field.name))
    elif isinstance(target, dict):
        for key, part in target.items():
            copy_into(part, value[key])
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
    if isinstance(value, dict):
        return {key: copy_of(part) for key, part in value.items()}
    return type(value)(copy_of(part) for part in value)
