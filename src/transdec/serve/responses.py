"""A transcript in each of OpenAI's ``response_format`` s: json, text, verbose_json, srt and vtt.

A Transducer gives word times, not segments, so segments are made from the words by :mod:`transdec.subtitles`, the
rule ``transdec transcribe --format srt|vtt|tsv`` cuts its cues by, with its defaults: a new segment starts at a
pause of 0.8 s or more between words, where a segment would pass 10 s, or where its text would pass 84
characters. Subtitles (srt, vtt) show one segment per cue.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

from transdec.subtitles import Cue, CueRule, cues_of, document
from transdec.transcribe import Transcript, WordTiming

FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
GRANULARITIES = ("word", "segment")
#: How the server cuts segments and cues: the defaults of ``transdec transcribe``'s cue flags, so that its subtitles
#: equal the server's for the same audio.
SEGMENT_RULE = CueRule()


def segments_of(words: Sequence[WordTiming]) -> list[Cue]:
    """The words grouped into segments (see the module docstring)."""
    return cues_of(words, SEGMENT_RULE)


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
    return document(transcript.words, kind, SEGMENT_RULE)


def _seconds(value: float) -> float:
    """Times to the millisecond: frame times are multiples of the frame shift, which floats show as
    0.24000000000000002."""
    return round(value, 3)


def _compression_ratio(text: str) -> float:
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0
