"""The WebSocket clients' streams, all decoded by one shared :class:`~transdec.streaming.Recognizer`.

Each client is a :class:`Connection`: the event loop appends the audio it sends (converted to float samples at
its own rate) and its end; the hub's loop steps the recognizer on the model thread, where each step hands every
stream the audio it needs for its next chunk, runs one batched :meth:`Recognizer.decode` of every stream with a
chunk ready, and collects what each client is to be told (partial results that changed, final segments, the
end). Streams take audio only as far as their next chunk, so the recognizer holds little; what a client sends
ahead waits in its connection, up to ``stream_buffer_seconds``, after which the server stops reading from it
until the recognizer catches up (TCP then slows the client down).

The recognizer and its streams are touched on the model thread only; a connection's waiting audio is shared with
the event loop under a lock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from transdec.audio import as_waveform
from transdec.serve.metrics import Metrics
from transdec.serve.tasks import cancel_and_wait
from transdec.serve.worker import ModelWorker
from transdec.streaming import Recognizer, Stream
from transdec.streaming.files import segment_record

logger = logging.getLogger("transdec.serve")

#: The sample encodings a client may send, as numpy reads them.
ENCODINGS = {"pcm_s16le": np.dtype("<i2"), "f32le": np.dtype("<f4")}
#: Sample rates a client may send (resampled to the model's).
MIN_RATE, MAX_RATE = 8000, 192000
#: The largest piece given to a stream at once, in seconds: big binary messages are cut, so that a stream's
#: buffer stays near one chunk.
PIECE_SECONDS = 0.1


class HubFull(Exception):
    """Every stream is taken."""


@dataclass(frozen=True)
class StreamConfig:
    """What a client's first message says: its ``sample_rate`` and the ``encoding`` of its binary frames."""

    sample_rate: int
    encoding: str = "pcm_s16le"

    @classmethod
    def parse(cls, message: object) -> StreamConfig:
        """The config of a client's first message; a ValueError that says what is wrong with it."""
        if not isinstance(message, dict):
            raise ValueError('the first message must be a JSON object such as {"sample_rate": 16000}')
        if message.get("type", "config") != "config":
            raise ValueError(f"the first message must be the config, got type {message.get('type')!r}")
        rate = message.get("sample_rate")
        if isinstance(rate, bool) or not isinstance(rate, int) or not MIN_RATE <= rate <= MAX_RATE:
            raise ValueError(f"sample_rate must be an integer from {MIN_RATE} to {MAX_RATE}, got {rate!r}")
        encoding = message.get("encoding", "pcm_s16le")
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
        return cls(rate, encoding)


class Connection:
    """One client's stream as the hub holds it (see the module docstring)."""

    def __init__(self, config: StreamConfig, max_buffered_seconds: float) -> None:
        self.config = config
        self.events: asyncio.Queue[dict] = asyncio.Queue()
        self.room = asyncio.Event()  # set while the client may send more
        self.room.set()
        self.ended = False  # the client sent its end
        self.closed = False  # the client is gone, or its stream is done
        self._max_buffered = int(max_buffered_seconds * config.sample_rate)
        self._piece = max(1, int(PIECE_SECONDS * config.sample_rate))
        self._pieces: deque[np.ndarray] = deque()
        self._buffered = 0
        self._lock = threading.Lock()
        self._remainder = b""
        # The model thread's: the recognizer's stream, the partial last sent, whether its input was finished.
        self.stream: Stream | None = None
        self.shown = ""
        self.input_finished = False

    # -- the event loop's side -----------------------------------------------------------------------------------

    def feed(self, data: bytes) -> float:
        """Take a binary frame of samples (a sample cut in two by a frame boundary is joined with the next);
        returns its seconds. ValueError for samples that are not audio (NaN or infinite floats)."""
        dtype = ENCODINGS[self.config.encoding]
        data = self._remainder + data
        whole = len(data) - len(data) % dtype.itemsize
        self._remainder = data[whole:]
        # A bytearray, so that the samples are writable (torch warns about read-only arrays).
        samples = as_waveform(np.frombuffer(bytearray(data[:whole]), dtype), self.config.sample_rate,
                              "the streamed audio")
        with self._lock:
            for start in range(0, len(samples), self._piece):
                self._pieces.append(samples[start : start + self._piece])
            self._buffered += len(samples)
            if self._buffered > self._max_buffered:
                self.room.clear()
        return len(samples) / self.config.sample_rate

    @property
    def buffered(self) -> int:
        with self._lock:
            return self._buffered

    def update_room(self) -> None:
        if self.closed or self.buffered <= self._max_buffered:
            self.room.set()

    # -- the model thread's side ---------------------------------------------------------------------------------

    def take(self) -> np.ndarray | None:
        """The oldest waiting piece of audio, or None."""
        with self._lock:
            if not self._pieces:
                return None
            piece = self._pieces.popleft()
            self._buffered -= len(piece)
            return piece


class StreamingHub:
    """The WebSocket streams of one server: connections in, the recognizer stepped on the model thread."""

    def __init__(self, recognizer: Recognizer, worker: ModelWorker, metrics: Metrics,
                 buffer_seconds: float = 10.0) -> None:
        self.recognizer, self.worker, self.metrics = recognizer, worker, metrics
        self.max_streams = recognizer.options.max_streams
        self.buffer_seconds = buffer_seconds
        self._connections: list[Connection] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    @property
    def full(self) -> bool:
        return len(self._connections) >= self.max_streams

    def connect(self, config: StreamConfig) -> Connection:
        """A new stream; :class:`HubFull` when ``max_streams`` are open (a closed one counts until its stream is
        freed, at the next step)."""
        if self.full:
            raise HubFull(f"all {self.max_streams} streams are in use")
        connection = Connection(config, self.buffer_seconds)
        self._connections.append(connection)
        self.metrics.streams_active = len(self._connections)
        return connection

    def feed(self, connection: Connection, data: bytes) -> None:
        self.metrics.stream_audio(connection.feed(data))
        self.wake()

    def end(self, connection: Connection) -> None:
        """The client's audio has ended: its last segment is finished and the stream ends with ``done``."""
        connection.ended = True
        self.wake()

    def close(self, connection: Connection) -> None:
        """The client is gone (or done): its stream is freed at the next step."""
        connection.closed = True
        connection.room.set()
        self.wake()

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="transdec-streams")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            connections = list(self._connections)
            if not connections:
                continue
            began = time.perf_counter()
            try:
                stepped, events = await self.worker.run(self._step, connections)
            except Exception as error:  # a bug, not a stream's audio (those are caught per stream): end them all
                logger.exception("streaming step failed")
                await self.worker.run(self._free_all, connections)
                stepped, events = 0, [(c, {"type": "error", "message": f"the server failed: {error}"})
                                      for c in connections]
            if stepped:
                self.metrics.stream_step(time.perf_counter() - began)
            for connection, event in events:
                connection.events.put_nowait(event)
            for connection in connections:
                connection.update_room()
            self._connections = [c for c in self._connections if not (c.closed and c.stream is None)]
            self.metrics.streams_active = len(self._connections)
            if stepped:  # more chunks may be ready; otherwise every stream waits for its client
                self._wake.set()

    def _step(self, connections: list[Connection]) -> tuple[int, list[tuple[Connection, dict]]]:
        """On the model thread: free the closed streams, open the new ones, hand each the audio of its next chunk,
        decode one batched step, and collect each client's messages."""
        events: list[tuple[Connection, dict]] = []
        for connection in connections:
            if connection.closed:
                self._free(connection)
                continue
            try:
                if connection.stream is None:
                    connection.stream = self.recognizer.open()
                stream = connection.stream
                while not stream.audio.ready and (piece := connection.take()) is not None:
                    stream.accept_waveform(piece, connection.config.sample_rate)
                if connection.ended and not connection.input_finished and connection.buffered == 0:
                    stream.input_finished()
                    connection.input_finished = True
            except Exception as error:  # this stream's audio could not be taken: it ends, the others go on
                logger.exception("a stream's audio failed")
                events.append((connection, {"type": "error", "message": f"the audio could not be decoded: {error}"}))
                self._free(connection)
        try:
            stepped = self.recognizer.decode()
        except Exception as error:  # the recognizer failed: every stream ends, the server goes on
            logger.exception("streaming step failed")
            for connection in connections:
                if not connection.closed:
                    events.append((connection, {"type": "error", "message": f"decoding failed: {error}"}))
                self._free(connection)
            return 0, events
        for connection in connections:
            stream = connection.stream
            if connection.closed or stream is None:
                continue
            for segment in stream.new_segments():
                events.append((connection, {"type": "final", **segment_record(segment)}))
                connection.shown = ""
            if stream.done:
                events.append((connection, {"type": "done"}))
                self._free(connection)
                continue
            text = stream.result().text
            if text != connection.shown:
                connection.shown = text
                events.append((connection, {"type": "partial", "text": text}))
        return stepped, events

    def _free_all(self, connections: list[Connection]) -> None:
        for connection in connections:
            self._free(connection)

    @staticmethod
    def _free(connection: Connection) -> None:
        """Close the connection's stream (on the model thread), freeing its place in the recognizer's batch."""
        if connection.stream is not None:
            connection.stream.close()
            connection.stream = None
        connection.closed = True
