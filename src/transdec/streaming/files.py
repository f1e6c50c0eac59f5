"""``transdec stream``: audio files (or a microphone) streamed through a :class:`Recognizer`, all at once.

Every file is one stream, read and fed in pieces as if it were being recorded: at real-time speed (``realtime``),
or as fast as the recogniser takes it; when there are more files than streams, the next starts when one ends.
Final segments are written as they end (text lines, or JSON lines with word times); partial results, when asked
for, go to standard error whenever they change.
"""

from __future__ import annotations

import json
import queue
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TextIO

import numpy as np

from transdec.audio import AudioError, check_samples, open_audio, read_frames
from transdec.streaming.recognizer import Recognizer, Segment, Stream


@dataclass(frozen=True)
class FeedOptions:
    """How the audio is fed: ``piece_seconds`` at a time, at real-time speed or as fast as possible."""

    piece_seconds: float = 0.1
    realtime: bool = False


def segment_record(segment: Segment) -> dict:
    """A final segment as JSON writes it: times to the millisecond, words with their times and confidences."""
    return {"start": round(segment.start, 3), "end": round(segment.end, 3), "text": segment.text,
            "words": [{**asdict(word), "start": round(word.start, 3), "end": round(word.end, 3),
                       "confidence": round(word.confidence, 4)} for word in segment.words]}


def format_segment(name: str, segment: Segment, jsonl: bool, several: bool) -> str:
    if jsonl:
        return json.dumps({"path": name, **segment_record(segment)}, ensure_ascii=False)
    prefix = f"{name}\t" if several else ""
    return f"{prefix}[{segment.start:7.2f} - {segment.end:7.2f}] {segment.text}"


class _FileFeed:
    """One file read piece by piece as its stream takes it, so memory holds a piece, not the recording."""

    def __init__(self, path: str, model_rate: int) -> None:
        self.path = path
        self.file = open_audio(path, model_rate)
        self.rate = self.file.samplerate
        self.read_samples = 0
        self.opened_at = time.perf_counter()

    @property
    def done(self) -> bool:
        return self.file.closed

    def read(self, count: int) -> np.ndarray:
        """Up to ``count`` more mono samples at :attr:`rate` (closing the file at its end)."""
        try:
            audio = read_frames(self.file, self.path, count)
        except AudioError:
            self.file.close()
            raise
        check_samples(self.path, audio, self.read_samples, self.rate)
        self.read_samples += len(audio)
        if len(audio) < count:
            self.file.close()
            if self.read_samples == 0:
                raise AudioError(f"{self.path}: the recording holds no samples")
        return audio.mean(axis=1) if audio.shape[1] > 1 else audio[:, 0]


def stream_files(recognizer: Recognizer, paths: Sequence[str], feed: FeedOptions = FeedOptions(),
                 jsonl: bool = False, partials: bool = False, out: TextIO | None = None,
                 err: TextIO | None = None) -> int:
    """Stream ``paths``, as many together as the recognizer's ``max_streams``, the next file starting when a
    stream ends; returns 0, or 1 if some file could not be read (each is reported, the others go on). Files are
    read a piece at a time. ``out`` and ``err`` default to standard output and error."""
    out, err = out or sys.stdout, err or sys.stderr
    model_rate = recognizer.encoder.sample_rate
    waiting = list(paths)
    active: dict[str, tuple[_FileFeed, Stream]] = {}
    shown: dict[str, str] = {}
    several = len(paths) > 1
    failed = 0

    def fail(error: AudioError) -> None:
        nonlocal failed
        print(f"transdec stream: {error}", file=err)
        failed += 1

    while waiting or active:
        while waiting and len(active) < recognizer.options.max_streams:
            path = waiting.pop(0)
            try:
                active[path] = (_FileFeed(path, model_rate), recognizer.open())
                shown[path] = ""
            except AudioError as error:
                fail(error)
        for path, (source, stream) in list(active.items()):
            if source.done:
                continue
            # Real time: the audio "recorded" since the file started has arrived; otherwise one more piece.
            piece = max(1, round(feed.piece_seconds * source.rate))
            wanted = (int((time.perf_counter() - source.opened_at) * source.rate) - source.read_samples
                      if feed.realtime else piece)
            try:
                samples = source.read(max(0, wanted))
            except AudioError as error:
                fail(error)
                stream.close()
                del active[path]
                continue
            stream.accept_waveform(samples, source.rate)
            if source.done:
                stream.input_finished()
        while recognizer.decode():
            pass
        for path, (source, stream) in list(active.items()):
            report(path, stream, shown, jsonl, partials, several, out, err)
            if stream.done:
                stream.close()
                del active[path]
        if feed.realtime and active:  # wait for the next piece
            time.sleep(feed.piece_seconds)
    return 1 if failed else 0


def report(name: str, stream: Stream, shown: dict[str, str], jsonl: bool, partials: bool, several: bool,
           out: TextIO, err: TextIO) -> None:
    """Write the stream's new final segments, and its partial result if it changed."""
    for segment in stream.new_segments():
        print(format_segment(name, segment, jsonl, several), file=out, flush=True)
        shown[name] = ""
    if partials and not stream.done:
        text = stream.result().text
        if text != shown[name]:
            shown[name] = text
            print(f"{name}: {text}" if several else text, file=err, flush=True)


def stream_microphone(recognizer: Recognizer, device: str | int | None = None, seconds: float | None = None,
                      feed: FeedOptions = FeedOptions(), jsonl: bool = False, partials: bool = True,
                      out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Stream a microphone (``device``: a sounddevice name or index, ``None`` the default input) until
    ``seconds`` have been recorded or Ctrl-C; the last segment is finished either way."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        import sounddevice
    except (ImportError, OSError) as error:  # OSError: the PortAudio library is missing
        raise ValueError(f"--mic needs sounddevice and PortAudio ({error}); pip install 'transdec[mic]'") from error
    rate = recognizer.encoder.sample_rate
    blocks: queue.Queue[np.ndarray] = queue.Queue()

    def record(data: np.ndarray, frames: int, when: object, status: object) -> None:
        blocks.put(data[:, 0].copy())

    stream = recognizer.open()
    shown = {"mic": ""}
    recorded = 0
    with sounddevice.InputStream(samplerate=rate, channels=1, dtype="float32", device=device,
                                 blocksize=max(1, round(feed.piece_seconds * rate)), callback=record):
        try:
            while seconds is None or recorded < seconds * rate:
                block = blocks.get()
                stream.accept_waveform(block, rate)
                recorded += len(block)
                while recognizer.decode():
                    pass
                report("mic", stream, shown, jsonl, partials, False, out, err)
        except KeyboardInterrupt:
            pass
    stream.input_finished()
    while not stream.done:
        recognizer.decode()
    report("mic", stream, shown, jsonl, partials, False, out, err)
    stream.close()
    return 0
