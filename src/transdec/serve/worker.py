"""The one thread that runs the model.

PyTorch calls block and the model is not meant to be driven from several threads at once (CUDA graph capture,
oneDNN's and OpenMP's threads), so every call into the model, the transcription batches and the streaming steps
alike, runs here, one at a time and in the order asked. The event loop awaits the results and stays free to take
requests meanwhile. Batches and streaming steps alternate: each side has at most one call waiting, so neither
waits for more than one of the other's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class ModelWorker:
    """A single-thread executor that the event loop can await."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="transdec-model")

    async def run(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` on the model thread. Cancelling the caller does not stop a call already running
        (PyTorch cannot be interrupted); its result is dropped."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    def submit(self, function: Callable[..., T], *args: object):
        """``function(*args)`` on the model thread, from any thread; a :class:`concurrent.futures.Future`."""
        return self._executor.submit(function, *args)

    def close(self) -> None:
        """Finish what was asked, then end the thread."""
        self._executor.shutdown(wait=True)
