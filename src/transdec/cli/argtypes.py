"""The argparse value types of the command line's flags: each parses one flag's text or raises
``argparse.ArgumentTypeError`` with a message argparse prints after the flag's name."""

from __future__ import annotations

import argparse
import math
from typing import Callable


def at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer no smaller than ``minimum`` (and no larger than ``maximum``)."""
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum or (maximum is not None and value > maximum):
            bounds = f"at least {minimum}" if maximum is None else f"from {minimum} to {maximum}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {value}")
        return value

    parse.__name__ = "integer"  # for a non-number argparse says "invalid integer value"
    return parse


def milliseconds(minimum: float) -> Callable[[str], float]:
    """An argparse type: milliseconds no fewer than ``minimum``, as seconds."""
    def parse(text: str) -> float:
        value = float(text)
        if not value >= minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g} ms, got {text}")
        return value / 1000.0

    parse.__name__ = "milliseconds"
    return parse


def _integers(text: str) -> list[int]:
    """The comma-separated integers of ``text``; empty if any part is not one."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        return []


def attention_window(text: str) -> tuple[int, int]:
    """An argparse type: ``LEFT`` or ``LEFT,RIGHT`` positive frame counts."""
    parts = _integers(text)
    if len(parts) not in (1, 2) or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"expected LEFT or LEFT,RIGHT positive frame counts, got {text!r}")
    return parts[0], parts[-1]


def look_ahead(text: str) -> tuple[int, int]:
    """An argparse type: ``LEFT,RIGHT`` non-negative frame counts."""
    parts = _integers(text)
    if len(parts) != 2 or min(parts) < 0:
        raise argparse.ArgumentTypeError(f"expected LEFT,RIGHT frame counts, e.g. 70,6, got {text!r}")
    return parts[0], parts[1]


def weights(text: str) -> list[float]:
    """An argparse type: comma-separated finite LM weights."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(w) for w in values):
        raise argparse.ArgumentTypeError(f"weights must be finite numbers, got {text!r}")
    return values


def finite(text: str) -> float:
    """An argparse type: a finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more."""
    value = finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, more than 0."""
    value = finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text!r}")
    return value
