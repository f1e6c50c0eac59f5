"""The ``model.transcribe(...)`` method that every :class:`~transdec.protocol.SpeechModel` class offers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: transcription is a layer above the models
    from transdec.audio import AudioInput
    from transdec.decoding import DecodingConfig
    from transdec.transcribe import Transcript


class Transcribing:
    """``transcribe`` as a method, for a class that implements :class:`~transdec.protocol.SpeechModel`."""

    def transcribe(self, inputs: AudioInput | Sequence[AudioInput], decoding: DecodingConfig | None = None,
                   batch_size: int = 16, **options: Any) -> list[Transcript]:
        """Audio files or 1-D sample arrays -> one :class:`~transdec.transcribe.Transcript` each (see
        :func:`transdec.transcribe.transcribe`)."""
        # Imported on first use: the models import this module, and transcription imports the models.
        from transdec.transcribe import transcribe

        return transcribe(self, inputs, decoding, batch_size, **options)  # type: ignore[arg-type]
