"""Endpoint detection: when a stream's current segment is over, from what the decoder has emitted.

A segment ends when any rule holds. Silence is what the decoder says it is: the frames since the segment's last
token (since its start if it has none), so no separate voice-activity detector is needed. The default rules are
the usual ones of streaming Transducer recognisers (sherpa-onnx's among them): 2.4 s of silence without speech,
1.2 s of silence after speech, or 20 s of segment whatever follows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EndpointRule:
    """Holds when the segment has at least ``trailing_silence_seconds`` after its last token, is at least
    ``min_length_seconds`` long, and (if ``needs_speech``) holds a token."""

    needs_speech: bool
    trailing_silence_seconds: float
    min_length_seconds: float = 0.0


DEFAULT_RULES = (EndpointRule(needs_speech=False, trailing_silence_seconds=2.4),
                 EndpointRule(needs_speech=True, trailing_silence_seconds=1.2),
                 EndpointRule(needs_speech=False, trailing_silence_seconds=0.0, min_length_seconds=20.0))


@dataclass(frozen=True)
class EndpointOptions:
    """The rules of which any one ends a segment."""

    rules: tuple[EndpointRule, ...] = DEFAULT_RULES

    def detected(self, has_speech: bool, trailing_silence: float, length: float) -> bool:
        """Whether a segment of ``length`` seconds, ``trailing_silence`` of them after its last token, ends here."""
        return any((has_speech or not rule.needs_speech) and trailing_silence >= rule.trailing_silence_seconds
                   and length >= rule.min_length_seconds for rule in self.rules)
