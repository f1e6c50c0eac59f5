"""A transcript in each of OpenAI's ``response_format`` s: json, text, verbose_json, srt and vtt.

A Transducer gives word times, not segments, so segments are made from the words: a new one starts at a pause
of :data:`SEGMENT_PAUSE_SECONDS` or more between words, or where a segment would pass
:data:`SEGMENT_MAX_SECONDS`. Subtitles (srt, vtt) show one segment per cue.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from transdec.transcribe import Transcript, WordTiming

FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
GRANULARITIES = ("word", "segment")
#: A pause between words at least this long starts a new segment.
SEGMENT_PAUSE_SECONDS = 0.8
#: A segment ends before a word that would make it longer than this.
SEGMENT_MAX_SECONDS = 10.0


@dataclass
class TextSegment:
    start: float
    end: float
    words: list[WordTiming]

    @property
    def text(self) -> str:
        return " ".join(word.word for word in self.words)


def segments_of(words: Sequence[WordTiming], pause: float = SEGMENT_PAUSE_SECONDS,
                max_seconds: float = SEGMENT_MAX_SECONDS) -> list[TextSegment]:
    """The words grouped into segments (see the module docstring)."""
    segments: list[TextSegment] = []
    for word in words:
        last = segments[-1] if segments else None
        if last is None or word.start - last.end >= pause or word.end - last.start > max_seconds:
            segments.append(TextSegment(word.start, word.end, [word]))
        else:
            last.words.append(word)
            last.end = word.end
    return segments


def verbose_json(transcript: Transcript, language: str | None, words: bool) -> dict:
    """OpenAI's ``verbose_json``: language, duration, text and segments, and the words with ``words``.

    Each word also has its ``confidence`` (transdec's: the geometric mean of its tokens' probabilities). Whisper's
    own segment fields are filled so that clients reading them work: ``seek`` 0, ``temperature`` 0 (decoding is
    deterministic), ``avg_logprob`` the mean of the words' log-confidences, ``compression_ratio`` computed as
    Whisper does, ``no_speech_prob`` 0 and ``tokens`` empty (the tokens are the model's, not Whisper's).
    """
    body: dict = {"task": "transcribe", "language": language or "unknown", "duration": _seconds(transcript.duration),
                  "text": transcript.text, "segments": []}
    for number, segment in enumerate(segments_of(transcript.words)):
        logprobs = [math.log(max(word.confidence, 1e-30)) for word in segment.words]
        body["segments"].append({
            "id": number, "seek": 0, "start": _seconds(segment.start), "end": _seconds(segment.end),
            "text": segment.text, "tokens": [], "temperature": 0.0,
            "avg_logprob": round(sum(logprobs) / len(logprobs), 4),
            "compression_ratio": round(_compression_ratio(segment.text), 4), "no_speech_prob": 0.0})
    if words:
        body["words"] = [{"word": word.word, "start": _seconds(word.start), "end": _seconds(word.end),
                          "confidence": round(word.confidence, 4)} for word in transcript.words]
    return body


def subtitles(transcript: Transcript, kind: str) -> str:
    """SubRip (``srt``) or WebVTT (``vtt``) cues, one per segment."""
    cues = []
    for number, segment in enumerate(segments_of(transcript.words), 1):
        if kind == "srt":
            cues.append(f"{number}\n{_timestamp(segment.start, ',')} --> {_timestamp(segment.end, ',')}\n"
                        f"{segment.text}\n")
        else:
            cues.append(f"{_timestamp(segment.start, '.')} --> {_timestamp(segment.end, '.')}\n{segment.text}\n")
    body = "\n".join(cues)
    return f"WEBVTT\n\n{body}" if kind == "vtt" else body


def _timestamp(seconds: float, separator: str) -> str:
    milliseconds = round(seconds * 1000)
    hours, rest = divmod(milliseconds, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}{separator}{rest % 1000:03d}"


def _seconds(value: float) -> float:
    """Times to the millisecond: frame times are multiples of the frame shift, which floats show as
    0.24000000000000002."""
    return round(value, 3)


def _compression_ratio(text: str) -> float:
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0
