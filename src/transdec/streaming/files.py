"""``transdec stream``: audio files (or a microphone) streamed through a :class:`Recognizer`, all at once.

Every file is one stream, fed in pieces as if it were being recorded: at real-time speed (``realtime``), or as
fast as the recogniser takes it. Final segments are written as they end (text lines, or JSON lines with word
times); partial results, when asked for, go to standard error whenever they change.
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

from transdec.audio import AudioError, load_audio
from transdec.streaming.recognizer import Recognizer, Segment, Stream


@dataclass(frozen=True)
class FeedOptions:
    """How the audio is fed: ``piece_seconds`` at a time, at real-time speed or as fast as possible."""

    piece_seconds: float = 0.1
    realtime: bool = False


def format_segment(name: str, segment: Segment, jsonl: bool, several: bool) -> str:
    if jsonl:
        record = {"path": name, "start": round(segment.start, 3), "end": round(segment.end, 3), "text": segment.text,
                  "words": [{**asdict(word), "start": round(word.start, 3), "end": round(word.end, 3),
                             "confidence": round(word.confidence, 4)} for word in segment.words]}
        return json.dumps(record, ensure_ascii=False)
    prefix = f"{name}\t" if several else ""
    return f"{prefix}[{segment.start:7.2f} - {segment.end:7.2f}] {segment.text}"


def stream_files(recognizer: Recognizer, paths: Sequence[str], feed: FeedOptions = FeedOptions(),
                 jsonl: bool = False, partials: bool = False, out: TextIO | None = None,
                 err: TextIO | None = None) -> int:
    """Stream ``paths`` together; returns 0, or 1 if some file could not be read (each is reported, the others
    go on). ``out`` and ``err`` default to standard output and error."""
    out, err = out or sys.stdout, err or sys.stderr
    rate = recognizer.encoder.sample_rate
    audio: dict[str, np.ndarray] = {}
    failed = 0
    for path in paths:
        try:
            audio[path] = load_audio(path, rate)
        except AudioError as error:
            print(f"transdec stream: {error}", file=err)
            failed += 1
    if len(audio) > recognizer.options.max_streams:
        raise ValueError(f"{len(audio)} files but --max-streams {recognizer.options.max_streams}")
    streams = {path: recognizer.open() for path in audio}
    fed = dict.fromkeys(audio, 0)
    piece = max(1, round(feed.piece_seconds * rate))
    shown = dict.fromkeys(audio, "")
    several = len(audio) > 1
    begin = time.perf_counter()
    while not all(stream.done for stream in streams.values()):
        # Real time: the audio "recorded" so far has arrived; otherwise one more piece of every stream.
        arrived = int((time.perf_counter() - begin) * rate) if feed.realtime else None
        for path, stream in streams.items():
            samples = audio[path]
            if fed[path] < len(samples):
                end = min(len(samples), fed[path] + piece if arrived is None else arrived)
                stream.accept_waveform(samples[fed[path] : end], rate)
                fed[path] = end
                if end == len(samples):
                    stream.input_finished()
        while recognizer.decode():
            pass
        for path, stream in streams.items():
            report(path, stream, shown, jsonl, partials, several, out, err)
        if arrived is not None:  # wait for the next piece
            time.sleep(max(0.0, (arrived // piece + 1) * piece / rate - (time.perf_counter() - begin)))
    for stream in streams.values():
        stream.close()
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
