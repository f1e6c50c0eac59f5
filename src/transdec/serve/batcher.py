"""Dynamic batching: requests that arrive close together are transcribed in one batch.

A request takes a *slot* (:meth:`DynamicBatcher.admit`) once its upload has arrived, before its audio is decoded:
there are ``max_queue``, and none left means 503, so the decoded audio held in memory is bounded however many
clients call (and a client still uploading holds none). With its audio decoded it joins the queue
(:meth:`DynamicBatcher.transcribe`). The batching loop waits for the first request, then, while others are on
their way (admitted, their audio being read), up to ``max_wait_ms`` from its arrival for them (a lone request
does not wait), takes up to ``max_batch``, frees their slots and has the model thread transcribe them in one call:
one padded encoder batch, one decoder call, each request with its own boost phrases (:func:`transdec.transcribe`).
While a batch runs the next one gathers, so under load batches fill up without waiting. A request whose client
goes away is dropped from the queue if its batch has not started.

The loop runs on the event loop; only the model call runs on the model thread (:class:`~transdec.serve.worker.
ModelWorker`), so the queue needs no locks.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from transdec.biasing.phrases import BoostPhrase
from transdec.serve.metrics import Metrics
from transdec.serve.tasks import cancel_and_wait
from transdec.serve.worker import ModelWorker
from transdec.transcribe import Transcript

#: ``(waveforms, phrase lists) -> transcripts``, run on the model thread.
BatchFunction = Callable[[list[np.ndarray], list[list[BoostPhrase]]], list[Transcript]]


class QueueFull(Exception):
    """No slot is free: the client should retry after ``retry_after`` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"queue full; retry after {retry_after} s")
        self.retry_after = retry_after


class Slot:
    """A request's place in the queue, held from its arrival until its batch starts (or it ends); releasing
    twice is harmless."""

    def __init__(self, batcher: DynamicBatcher) -> None:
        self._batcher: DynamicBatcher | None = batcher

    def release(self) -> None:
        if self._batcher is not None:
            self._batcher._release()
            self._batcher = None

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(eq=False)  # compared by identity: the queue removes this job, not one with equal audio
class _Job:
    waveform: np.ndarray
    phrases: list[BoostPhrase]
    slot: Slot
    arrived: float
    timing: dict[str, float]  # filled in: milliseconds in the queue and decoding
    future: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class DynamicBatcher:
    """See the module docstring. ``decode`` is the batch function the model thread runs."""

    def __init__(self, decode: BatchFunction, worker: ModelWorker, metrics: Metrics, sample_rate: int,
                 max_batch: int = 16, max_wait_ms: float = 10.0, max_queue: int = 64) -> None:
        self.decode, self.worker, self.metrics, self.sample_rate = decode, worker, metrics, sample_rate
        self.max_batch, self.max_wait, self.max_queue = max_batch, max_wait_ms / 1000.0, max_queue
        self._admitted = 0
        self._waiting: deque[_Job] = deque()
        self._arrived: asyncio.Event | None = None
        self._running = 0  # requests in the batch on (or waiting for) the model thread
        self._task: asyncio.Task | None = None

    # -- requests ------------------------------------------------------------------------------------------------

    def admit(self) -> Slot:
        """A slot for a new request; :class:`QueueFull` when all ``max_queue`` are taken."""
        if self._admitted >= self.max_queue:
            raise QueueFull(self.retry_after())
        self._admitted += 1
        self.metrics.queued = self._admitted
        return Slot(self)

    def _release(self) -> None:
        self._admitted -= 1
        self.metrics.queued = self._admitted
        if self._arrived is not None:  # one fewer on its way: the batching loop may stop waiting for it
            self._arrived.set()

    @property
    def waiting(self) -> int:
        """Requests in the queue with their audio decoded, waiting for a batch."""
        return len(self._waiting)

    @property
    def arriving(self) -> int:
        """Requests admitted and not yet in the queue: their audio is being read, they join it in moments."""
        return self._admitted - len(self._waiting)

    @property
    def running(self) -> int:
        """Requests in the batch that is on (or waiting for) the model thread."""
        return self._running

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: the batches the queue holds, at the recent batch time."""
        batches = math.ceil(self.max_queue / self.max_batch) + 1
        return max(1, math.ceil(batches * self.metrics.mean_batch_seconds()))

    async def transcribe(self, slot: Slot, waveform: np.ndarray, phrases: Sequence[BoostPhrase] = (),
                         timing: dict[str, float] | None = None) -> Transcript:
        """The transcript of ``waveform`` (at the model's rate), decoded in the next batch; ``timing`` gets the
        milliseconds it waited in the queue (``queue_ms``) and its batch took (``decode_ms``). Cancelling the
        caller takes the request out of the queue if its batch has not started."""
        if self._task is None:
            raise RuntimeError("the batcher is not running (start() it)")
        job = _Job(waveform, list(phrases), slot, time.perf_counter(), {} if timing is None else timing)
        self._waiting.append(job)
        assert self._arrived is not None
        self._arrived.set()
        try:
            return await job.future
        finally:
            if not job.future.done():
                job.future.cancel()
            if job in self._waiting:  # cancelled before its batch: free its place now
                self._waiting.remove(job)
            slot.release()

    # -- the batching loop ---------------------------------------------------------------------------------------

    def start(self) -> None:
        self._arrived = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="transdec-batcher")

    async def stop(self) -> None:
        """Finish the queued requests and the batch that runs, then end the loop."""
        while self._waiting or self._running:
            await asyncio.sleep(0.01)
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        assert self._arrived is not None
        while True:
            while not self._waiting:
                self._arrived.clear()
                await self._arrived.wait()
            # Wait for companions up to max_wait after the oldest request arrived, or until the batch is full, but
            # only while one is on its way (admitted, its audio being read): a lone request starts at once.
            while len(self._waiting) < self.max_batch and self.arriving:
                remaining = self._waiting[0].arrived + self.max_wait - time.perf_counter() if self._waiting else 0
                if remaining <= 0:
                    break
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), remaining)
                except asyncio.TimeoutError:
                    break
            batch = []
            while self._waiting and len(batch) < self.max_batch:
                job = self._waiting.popleft()
                if not job.future.done():
                    batch.append(job)
            if batch:
                await self._run(batch)

    async def _run(self, batch: list[_Job]) -> None:
        began = time.perf_counter()
        for job in batch:  # decoding starts: their places go to new requests
            job.slot.release()
            job.timing["queue_ms"] = round((began - job.arrived) * 1000, 1)
        self._running = len(batch)
        try:
            try:
                results = await self.worker.run(self.decode, [j.waveform for j in batch], [j.phrases for j in batch])
            except Exception:
                if len(batch) == 1:
                    raise
                # One bad request must not fail the others: decode each alone, so only its own fails.
                results = [await self._alone(job) for job in batch]
        except Exception as error:
            results = [error]
        finally:
            self._running = 0
        seconds = time.perf_counter() - began
        audio = sum(len(job.waveform) for job in batch) / self.sample_rate
        self.metrics.batch_done(len(batch), audio, seconds)
        for job, result in zip(batch, results if len(results) == len(batch) else results * len(batch)):
            job.timing["decode_ms"] = round(seconds * 1000, 1)
            if job.future.done():  # its client went away while it was decoded
                continue
            if isinstance(result, Exception):
                job.future.set_exception(result)
            else:
                job.future.set_result(result)

    async def _alone(self, job: _Job) -> Transcript | Exception:
        try:
            return (await self.worker.run(self.decode, [job.waveform], [job.phrases]))[0]
        except Exception as error:
            return error
