"""The ``model.transcribe(...)`` method that every :class:`~transdec.protocol.SpeechModel` class offers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transdec.audio import AudioInput
from transdec.decoding import DecodingConfig
from transdec.transcribe import Transcript, transcribe


class Transcribing:
    """``transcribe`` as a method, for a class that implements :class:`~transdec.protocol.SpeechModel`."""

    def transcribe(self, inputs: AudioInput | Sequence[AudioInput], decoding: DecodingConfig | None = None,
                   batch_size: int = 16, **options: Any) -> list[Transcript]:
        """Audio files or 1-D sample arrays -> one :class:`~transdec.transcribe.Transcript` each (see
        :func:`transdec.transcribe.transcribe`)."""
        return transcribe(self, inputs, decoding, batch_size, **options)  # type: ignore[arg-type]
