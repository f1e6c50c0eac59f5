"""CPU thread settings for decoding loops (placeholder, tuned below)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def decoding_threads(device: torch.device, num_threads: int | None = None) -> Iterator[int]:
    """Run the block with ``num_threads`` intra-op threads on CPU, restoring the setting afterwards."""
    if torch.device(device).type != "cpu":
        yield torch.get_num_threads()
        return
    chosen = 1 if num_threads is None else num_threads
    previous = torch.get_num_threads()
    torch.set_num_threads(chosen)
    try:
        yield chosen
    finally:
        torch.set_num_threads(previous)
