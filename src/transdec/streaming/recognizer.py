"""Streaming recognition: many audio streams, each decoded as its audio arrives, all in one batch per step.

::

    recognizer = Recognizer(model)
    stream = recognizer.open()
    stream.accept_waveform(samples, sample_rate)  # as audio arrives, any amount at a time
    recognizer.decode()                           # one batched step for every stream with a chunk ready
    stream.result()                               # the segment so far: text, tokens, word times
    stream.new_segments()                         # segments ended since the last call (endpoints)
    stream.input_finished()                       # then decode until stream.done

The encoder half turns each stream's audio into encoder frames a chunk at a time
(:mod:`transdec.streaming.encoders`: buffered windows for any model, caches for cache-aware NeMo encoders); the
decoder half is the stream search that the decoding strategy registers
(:class:`~transdec.decoding.stream_search.StreamSearch`: label-looping greedy or ALSD++ beam search), which carries
each stream's search across chunks, exactly as if it had all the frames at once. After an endpoint
(:mod:`transdec.streaming.endpoint`) a stream's segment is final and a new one starts, with the predictor afresh,
where the last one ended.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from transdec.audio import as_waveform
from transdec.decoding import DecodingConfig, Fusion
from transdec.decoding.api import stream_search, streaming_config
from transdec.decoding.stream_search import StreamSearch
from transdec.protocol import SpeechModel
from transdec.streaming.encoders import BufferedEncoder, BufferedOptions, EncoderStream, StreamingEncoder
from transdec.streaming.endpoint import EndpointOptions
from transdec.transcribe import WordTiming, words_of


@dataclass
class Segment:
    """A stretch of a stream between endpoints: its text, token ids and words, with times in seconds from the
    stream's start; ``final`` once an endpoint (or the end of the input) closed it."""

    text: str
    tokens: list[int] = field(default_factory=list)
    words: list[WordTiming] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0
    final: bool = False


@dataclass(frozen=True)
class StreamingOptions:
    """How a :class:`Recognizer` streams.

    Attributes:
        max_streams: streams open at once (the decoder's batch).
        buffered: chunk and context of buffered streaming, for models without a streaming encoder.
        decoding: the search, a strategy that streams with its options and fusions
            (:func:`~transdec.decoding.registry.streaming_strategies`: greedy label-looping, with a WIND window per
            joint call where ``window_size > 1``, or ALSD++ beam search, a segment's result its best hypothesis). An
            options object stands for the strategy that streams with it (``AlsdPlusOptions(beam_size=8)``:
            ``beam_alsd_pp``); a strategy that does not stream is a ValueError naming those that do.
        endpoint: the endpoint rules; ``None``: one segment per stream, final at the end of its input.
    """

    max_streams: int = 16
    buffered: BufferedOptions = BufferedOptions()
    decoding: DecodingConfig = DecodingConfig()  # or a DecodingOptions, made the config it stands for
    endpoint: EndpointOptions | None = EndpointOptions()

    def __post_init__(self) -> None:
        object.__setattr__(self, "decoding", streaming_config(self.decoding))


class Stream:
    """One audio stream of a :class:`Recognizer`."""

    def __init__(self, recognizer: Recognizer, audio: EncoderStream, slot: int) -> None:
        self.recognizer, self.audio, self.slot = recognizer, audio, slot
        self.segments: list[Segment] = []  # the final ones, in order
        self.segment_start = 0  # the frame the current segment started at
        self.done = False
        self._reported = 0
        self._resampler = None
        self._input_rate: int | None = None

    def accept_waveform(self, samples: np.ndarray | torch.Tensor, sample_rate: int) -> None:
        """Append mono samples ``[N]`` (float in [-1, 1] or integer PCM) at ``sample_rate``; other rates than the
        model's are resampled as they come (one rate per stream)."""
        if self._input_rate is not None and sample_rate != self._input_rate:
            raise ValueError(f"this stream's audio is at {self._input_rate} Hz, got a piece at {sample_rate} Hz")
        self._input_rate = sample_rate
        waveform = as_waveform(samples, sample_rate, "the streamed samples")
        model_rate = self.recognizer.encoder.sample_rate
        if sample_rate != model_rate:
            if self._resampler is None:
                import soxr

                self._resampler = soxr.ResampleStream(sample_rate, model_rate, 1, dtype="float32")
            waveform = self._resampler.resample_chunk(waveform)
        self.audio.accept(torch.from_numpy(np.ascontiguousarray(waveform)))

    def input_finished(self) -> None:
        """No more audio: what is left is decoded, and the last segment becomes final."""
        if self._resampler is not None:
            self.audio.accept(torch.from_numpy(self._resampler.resample_chunk(np.zeros(0, np.float32), last=True)))
        self.audio.input_finished()

    def result(self) -> Segment:
        """The current segment as decoded so far (the last final one, once the stream is done)."""
        if self.done:
            return self.segments[-1] if self.segments else Segment("")
        return self.recognizer._segment(self, final=False)

    def new_segments(self) -> list[Segment]:
        """The final segments not returned by an earlier call."""
        segments = self.segments[self._reported :]
        self._reported = len(self.segments)
        return segments

    def close(self) -> None:
        """Free the stream's place in the batch."""
        self.recognizer._close(self)


class Recognizer:
    """Streams of one model, decoded together; see the module docstring.

    ``fusions`` are scored besides those of ``options.decoding``. ``encoder``: how audio becomes frames; default the
    model's own streaming encoder where it is a cache-aware one (``model.cache_aware``: NeMo's cache-aware streaming
    checkpoints, with the look-ahead they were loaded with), else buffered windows (``options.buffered``).
    """

    def __init__(self, model: SpeechModel, options: StreamingOptions = StreamingOptions(),
                 fusions: Sequence[Fusion] = (), encoder: StreamingEncoder | None = None) -> None:
        self.model, self.options = model, options
        if encoder is None:
            own = getattr(model, "streaming_encoder", None) if getattr(model, "cache_aware", False) else None
            encoder = own() if own is not None else BufferedEncoder(model, options.buffered)
        self.encoder: StreamingEncoder = encoder
        decoding = dataclasses.replace(options.decoding, fusions=(*options.decoding.fusions, *fusions))
        self.decoder: StreamSearch = stream_search(model, decoding, options.max_streams, device=model.device)
        self.streams: list[Stream] = []

    def open(self) -> Stream:
        """A new stream; ValueError when ``max_streams`` are open."""
        stream = Stream(self, self.encoder.open(), self.decoder.open())
        self.streams.append(stream)
        return stream

    def _close(self, stream: Stream) -> None:
        if stream in self.streams:
            self.decoder.close(stream.slot)
            self.streams.remove(stream)

    @torch.inference_mode()
    def decode(self, streams: Sequence[Stream] | None = None) -> int:
        """One step: the next chunk of every stream (of ``streams``, default all open ones) that has one ready is
        encoded and decoded, all in one batch. Returns how many streams stepped (0: all wait for audio)."""
        candidates = self.streams if streams is None else streams
        ready = [stream for stream in candidates if not stream.done and stream.audio.ready]
        if ready:
            for stream, frames in zip(ready, self.encoder.encode([stream.audio for stream in ready])):
                self.decoder.accept(stream.slot, frames)
                if stream.audio.done:
                    self.decoder.finish(stream.slot)
            self.decoder.decode()
        for stream in candidates:
            if not stream.done and stream.audio.done:
                self._end_segment(stream)
                stream.done = True
        if self.options.endpoint is not None:
            for stream in ready:
                if not stream.done:
                    self._check_endpoint(stream, self.options.endpoint)
        return len(ready)

    def _check_endpoint(self, stream: Stream, endpoint: EndpointOptions) -> None:
        hypothesis = self.decoder.best(stream.slot)
        position = self.decoder.position(stream.slot)
        last = hypothesis.timestamps[-1] + 1 if hypothesis.tokens else stream.segment_start
        shift = self.encoder.frame_shift_seconds
        if endpoint.detected(bool(hypothesis.tokens), (position - last) * shift,
                             (position - stream.segment_start) * shift):
            self._end_segment(stream)
            self.decoder.restart(stream.slot)
            stream.segment_start = self.decoder.position(stream.slot)

    def _end_segment(self, stream: Stream) -> None:
        segment = self._segment(stream, final=True)
        if segment.tokens:
            stream.segments.append(segment)

    def _segment(self, stream: Stream, final: bool) -> Segment:
        hypothesis = self.decoder.best(stream.slot)
        shift = self.encoder.frame_shift_seconds
        return Segment(self.model.tokenizer.decode(hypothesis.tokens), hypothesis.tokens,
                       words_of(self.model, hypothesis), stream.segment_start * shift,
                       self.decoder.position(stream.slot) * shift, final)
