"""Subtitles from word times: a transcript's words cut into cues, written as SubRip (``srt``), WebVTT (``vtt``) or
Whisper's tab-separated values (``tsv``).

A Transducer gives word times, not sentences, so cues are cut from the words (:func:`cues_of`): a new cue starts at
a pause of :attr:`CueRule.pause_seconds` or more between two words, before a word that would make the cue last
longer than :attr:`CueRule.max_seconds`, and before a word that would make its text longer than
:attr:`CueRule.max_chars` characters. A cue runs from its first word's start to its last word's end (or to the next
cue's start, should that be earlier: cues never overlap). This is the one
rule of every subtitle transdec writes: ``transdec transcribe --format srt|vtt|tsv`` and the server's
``verbose_json`` segments and ``srt``/``vtt`` responses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from transdec.transcribe import WordTiming

__all__ = ["SUBTITLE_FORMATS", "Cue", "CueRule", "cues_of", "document", "srt", "timestamp", "tsv", "vtt"]

#: The subtitle formats, each also the extension of its files.
SUBTITLE_FORMATS = ("srt", "vtt", "tsv")


@dataclass(frozen=True)
class CueRule:
    """Where a cue ends (see the module docstring).

    The defaults are the server's segments (a pause of 0.8 s, 10 s at most) and two subtitle lines of 42
    characters, the usual limit of broadcast subtitles. ``max_chars=None``: no limit on a cue's text. A word that
    alone passes a limit makes a cue of its own: words are never split.
    """

    pause_seconds: float = 0.8
    max_seconds: float = 10.0
    max_chars: int | None = 84

    def __post_init__(self) -> None:
        if not (math.isfinite(self.pause_seconds) and self.pause_seconds > 0):
            raise ValueError(f"pause_seconds must be a positive number, got {self.pause_seconds}")
        if not (math.isfinite(self.max_seconds) and self.max_seconds > 0):
            raise ValueError(f"max_seconds must be a positive number, got {self.max_seconds}")
        if self.max_chars is not None and self.max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, got {self.max_chars}")


@dataclass
class Cue:
    """Consecutive words shown together, from the first one's ``start`` to the last one's ``end`` (seconds), or to
    the next cue's start where the model emitted the two words around the cut at one frame (see :func:`cues_of`)."""

    start: float
    end: float
    words: list[WordTiming] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(word.word for word in self.words)


def cues_of(words: Sequence[WordTiming], rule: CueRule = CueRule()) -> list[Cue]:
    """The words, in order, grouped into cues by ``rule``.

    Cues never overlap: where a limit ends a cue between two words the model emitted at one encoder frame (the next
    word starts before the last one's end, a frame after its last token), the cue ends where the next one starts; and
    where that would leave the cue no time at all, the word joins it instead, past the limit.
    """
    cues: list[Cue] = []
    length = 0  # characters of the last cue's text, kept rather than joined again for every word
    for word in words:
        last = cues[-1] if cues else None
        if last is not None and word.start - last.end < rule.pause_seconds:
            too_long = word.end - last.start > rule.max_seconds or (
                rule.max_chars is not None and length + 1 + len(word.word) > rule.max_chars)
            if not too_long or word.start <= last.start:
                last.words.append(word)
                last.end = max(last.end, word.end)
                length += 1 + len(word.word)
                continue
            last.end = min(last.end, word.start)
        cues.append(Cue(word.start, word.end, [word]))
        length = len(word.word)
    return cues


def document(words: Sequence[WordTiming], output_format: str, rule: CueRule = CueRule(),
             word_timestamps: bool = False) -> str:
    """The words as a whole subtitle document in ``output_format`` (one of :data:`SUBTITLE_FORMATS`), cut into cues
    by ``rule``; ``word_timestamps``: each word's start inside a WebVTT cue (``vtt`` only, see :func:`vtt`)."""
    cues = cues_of(words, rule)
    if output_format == "srt":
        return srt(cues)
    if output_format == "vtt":
        return vtt(cues, word_timestamps)
    if output_format == "tsv":
        return tsv(cues)
    raise ValueError(f"unknown subtitle format {output_format!r}; expected one of {', '.join(SUBTITLE_FORMATS)}")


def srt(cues: Sequence[Cue]) -> str:
    """SubRip: each cue numbered from 1, ``HH:MM:SS,mmm --> HH:MM:SS,mmm`` and its text, a blank line between
    cues; no cues, an empty document."""
    return "\n".join(f"{number}\n{timestamp(cue.start, ',')} --> {timestamp(cue.end, ',')}\n{_cue_text(cue.text)}\n"
                     for number, cue in enumerate(cues, 1))


def vtt(cues: Sequence[Cue], word_timestamps: bool = False) -> str:
    """WebVTT: the ``WEBVTT`` header, then each cue's ``HH:MM:SS.mmm --> HH:MM:SS.mmm`` and its text, a blank line
    between cues; ``&``, ``<`` and ``>`` escaped as WebVTT requires.

    ``word_timestamps``: each word after a cue's first is preceded by its start as a WebVTT timestamp tag
    (``logic <00:00:00.400>is``), which players use to show words as they are spoken. A tag must lie strictly
    between the cue's start and end and after the tag before it, so a word that starts in the same millisecond as
    the word before it (two words from one encoder frame) gets none and appears with that word.
    """
    blocks = []
    for cue in cues:
        if word_timestamps:
            parts, shown = [_vtt_escape(cue.words[0].word)], _milliseconds(cue.start)
            for word in cue.words[1:]:
                at = _milliseconds(word.start)
                if shown < at < _milliseconds(cue.end):
                    parts.append(f"<{timestamp(word.start, '.')}>{_vtt_escape(word.word)}")
                    shown = at
                else:
                    parts.append(_vtt_escape(word.word))
            text = _cue_text(" ".join(parts))
        else:
            text = _vtt_escape(_cue_text(cue.text))
        blocks.append(f"{timestamp(cue.start, '.')} --> {timestamp(cue.end, '.')}\n{text}\n")
    return "WEBVTT\n\n" + "\n".join(blocks)


def tsv(cues: Sequence[Cue]) -> str:
    """Whisper's tab-separated values: a header line ``start<TAB>end<TAB>text``, then a line per cue with its start
    and end in integer milliseconds (which no locale writes with a decimal comma) and its text, tabs in it made
    spaces."""
    lines = ["start\tend\ttext"]
    lines += [f"{_milliseconds(cue.start)}\t{_milliseconds(cue.end)}\t{_one_line(cue.text).replace(chr(9), ' ')}"
              for cue in cues]
    return "\n".join(lines) + "\n"


def timestamp(seconds: float, separator: str = ",") -> str:
    """``HH:MM:SS,mmm`` (SubRip; ``separator="."``: WebVTT), rounded to the millisecond."""
    milliseconds = _milliseconds(seconds)
    hours, rest = divmod(milliseconds, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}{separator}{rest % 1000:03d}"


def _milliseconds(seconds: float) -> int:
    return round(seconds * 1000)


def _one_line(text: str) -> str:
    """A line break inside a cue's text would end the cue (or the row) early."""
    return " ".join(text.splitlines())


def _cue_text(text: str) -> str:
    """A cue's text made safe for SubRip and WebVTT: one line, and no ``-->``, which a parser takes for a timing line
    (Whisper writes ``->`` too)."""
    return _one_line(text).replace("-->", "->")


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
