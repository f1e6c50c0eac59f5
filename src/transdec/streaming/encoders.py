"""Audio of many streams to encoder frames, a chunk at a time: the encoder half of streaming recognition.

A :class:`StreamingEncoder` opens one :class:`EncoderStream` per audio stream; a stream takes samples as they come
(:meth:`EncoderStream.accept`), says when it holds enough for its next chunk (:attr:`EncoderStream.ready`), and
:meth:`StreamingEncoder.encode` turns the next chunk of every ready stream it is given into encoder frames in one
batch. The decoder half (:class:`~transdec.decoding.greedy.streaming.GreedyStreams`) takes those frames as they
come and carries its search across chunks.

Two kinds of encoder stream:

* :class:`BufferedEncoder`, for any offline model (:class:`~transdec.protocol.SpeechModel`): each chunk is encoded
  in a window with left and right context, and only the chunk's frames are kept (NeMo's "buffered" streaming).
  A chunk's frames come out once the audio of its right context has arrived, so the latency is the chunk plus the
  right context. Frames differ from those of the whole recording where the encoder would have looked further
  (attention beyond the window, features normalised over the window instead of the recording): that is the
  accuracy this costs, measured in docs/streaming.md.
* cache-aware encoders (NeMo's cache-aware streaming FastConformer), which keep each layer's left context in
  caches and give every chunk's frames exactly as the model was trained to; see :mod:`transdec.adapters`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from transdec.padding import pad_batch
from transdec.protocol import SpeechModel


@runtime_checkable
class EncoderStream(Protocol):
    """One stream's audio on its way to encoder frames."""

    def accept(self, samples: Tensor) -> None:
        """Append mono float samples ``[N]`` at the encoder's sample rate."""
        ...

    def input_finished(self) -> None:
        """No more samples will come: the rest is encoded as the last chunk."""
        ...

    @property
    def ready(self) -> bool:
        """Whether the next chunk can be encoded now (enough audio, or the input finished with frames left)."""
        ...

    @property
    def done(self) -> bool:
        """Whether the input finished and every frame has been given out."""
        ...


@runtime_checkable
class StreamingEncoder(Protocol):
    """Encodes many streams chunk by chunk; see the module docstring."""

    @property
    def sample_rate(self) -> int: ...

    @property
    def frame_shift_seconds(self) -> float: ...

    @property
    def latency_seconds(self) -> float:
        """Audio a frame waits for before it can be encoded: the chunk and the look-ahead past it."""
        ...

    def open(self) -> EncoderStream:
        """A new stream at its start."""
        ...

    def encode(self, streams: Sequence[EncoderStream]) -> list[Tensor]:
        """The next chunk's encoder frames ``[T_i, D]`` of each stream (all ``ready``), in one batch."""
        ...


@dataclass(frozen=True)
class BufferedOptions:
    """Chunk and context of buffered streaming, in seconds (rounded to whole encoder frames, the chunk to at least
    one). Latency is ``chunk_seconds + right_context_seconds``."""

    chunk_seconds: float = 0.48
    left_context_seconds: float = 2.0
    right_context_seconds: float = 0.48

    def __post_init__(self) -> None:
        if self.chunk_seconds <= 0 or self.left_context_seconds < 0 or self.right_context_seconds < 0:
            raise ValueError(f"chunk must be positive and contexts non-negative, got {self}")


class BufferedStream:
    """One stream of a :class:`BufferedEncoder`: the samples from the left context of its next chunk onwards."""

    def __init__(self, step: int, chunk: int, left: int, right: int) -> None:
        self.step, self.chunk, self.left, self.right = step, chunk, left, right
        self.pieces: list[Tensor] = []
        self.base = 0  # the sample index of the first one kept
        self.received = 0  # samples received in all
        self.emitted = 0  # encoder frames given out
        self.finished = False
        self.last_given = False

    def accept(self, samples: Tensor) -> None:
        if self.finished:
            raise ValueError("samples after input_finished()")
        if samples.dim() != 1:
            raise ValueError(f"samples must be one channel [N], got shape {tuple(samples.shape)}")
        self.pieces.append(samples.float())
        self.received += samples.shape[0]

    def input_finished(self) -> None:
        self.finished = True

    @property
    def done(self) -> bool:
        return self.last_given or (self.finished and self.received == 0)

    @property
    def ready(self) -> bool:
        if self.done:
            return False
        # Strictly more than the window: a window that reaches the end of the input is the last, and keeps every
        # frame to the end, whichever way the audio was cut into pieces.
        return self.finished or self.received > (self.emitted + self.chunk + self.right) * self.step

    def window(self) -> tuple[Tensor, int, bool]:
        """The samples of the next window, the frames of left context at its start, and whether it is the last."""
        first = max(0, self.emitted - self.left) * self.step
        end = (self.emitted + self.chunk + self.right) * self.step
        last = self.finished and end >= self.received
        samples = torch.cat(self.pieces) if len(self.pieces) != 1 else self.pieces[0]
        self.pieces = [samples]
        stop = self.received if last else end
        return samples[first - self.base : stop - self.base], self.emitted - first // self.step, last

    def advance(self, kept: int, last: bool) -> None:
        """``kept`` more frames given out; samples before the next window's left context are dropped."""
        self.emitted += kept
        self.last_given = last
        first = max(0, self.emitted - self.left) * self.step
        if first > self.base and self.pieces:
            self.pieces = [self.pieces[0][first - self.base :]]
            self.base = first


class BufferedEncoder:
    """Buffered streaming through any :class:`~transdec.protocol.SpeechModel`'s whole-recording ``encode``."""

    def __init__(self, model: SpeechModel, options: BufferedOptions = BufferedOptions()) -> None:
        self.model, self.options = model, options
        self.sample_rate, self.frame_shift_seconds = model.sample_rate, model.frame_shift_seconds
        shift = model.frame_shift_seconds
        self.step = round(shift * model.sample_rate)  # samples per encoder frame
        self.chunk = max(1, round(options.chunk_seconds / shift))  # encoder frames, as are left and right
        self.left = round(options.left_context_seconds / shift)
        self.right = round(options.right_context_seconds / shift)
        self.latency_seconds = (self.chunk + self.right) * shift

    def open(self) -> BufferedStream:
        return BufferedStream(self.step, self.chunk, self.left, self.right)

    @torch.inference_mode()
    def encode(self, streams: Sequence[BufferedStream]) -> list[Tensor]:
        windows = [stream.window() for stream in streams]
        batch, lengths = pad_batch([samples for samples, _, _ in windows], dtype=torch.float32)
        device = self.model.device
        encoded, counts = self.model.encode(batch.to(device), lengths.to(device))
        frames = []
        for row, (stream, (_, skip, last), count) in enumerate(zip(streams, windows, counts.tolist())):
            keep = max(0, count - skip) if last else max(0, min(self.chunk, count - skip))
            frames.append(encoded[row, skip : skip + keep])
            stream.advance(keep, last)
        return frames
