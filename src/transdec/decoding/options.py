"""Options of the decoding strategies: one frozen dataclass per strategy, checked when made.

Every options class derives from :class:`DecodingOptions`, whose fields :func:`~transdec.decoding.api.decode`
applies around any strategy; the fields a class adds are the keyword arguments of its strategy's function.
Each field's ``metadata["help"]`` documents it and becomes the help of its command-line flag
(``max_symbols_per_frame`` -> ``--max-symbols-per-frame``), so a new strategy's options reach the CLI with
no edits there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transdec.decoding.inputs import check_max_symbols, check_window_size


def option(default: Any, help: str, **metadata: Any) -> Any:
    """A dataclass field with the help text of its command-line flag (and e.g. ``choices``)."""
    return field(default=default, metadata={"help": help, **metadata})


@dataclass(frozen=True)
class DecodingOptions:
    """What every strategy takes; :func:`~transdec.decoding.api.decode` applies it around the strategy call."""

    cpu_threads: int | None = option(
        None, "intra-op threads for decoding on a CPU (default: transdec chooses; see transdec.runtime); "
              "ignored on other devices")

    def __post_init__(self) -> None:
        if self.cpu_threads is not None and (isinstance(self.cpu_threads, bool) or self.cpu_threads < 1):
            raise ValueError(f"cpu_threads must be at least 1 or None, got {self.cpu_threads}")


@dataclass(frozen=True)
class GreedyOptions(DecodingOptions):
    """Options of every greedy strategy."""

    max_symbols_per_frame: int | None = option(
        10, "tokens allowed at one frame before time is forced forward (none: no limit; a model that never "
            "emits a blank then never stops)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_max_symbols(self.max_symbols_per_frame)


WINDOW_HELP = "WIND window: frames scored per joint call while looking for the next label (1 = frame by frame); " \
              "never changes the output"


@dataclass(frozen=True)
class WindOptions(GreedyOptions):
    """Greedy decoding that scores a window of frames per joint call while looking for the next label (WIND)."""

    window_size: int = option(8, WINDOW_HELP)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_window_size(self.window_size)
