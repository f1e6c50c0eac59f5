"""An uploaded audio file becomes samples at the model's rate, with the checks ``transdec transcribe`` makes and the
server's duration limit."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

from transdec.audio import AudioError, known_length, load_audio, open_audio


class AudioTooLong(ValueError):
    """A recording longer than the server takes."""


def read_upload(data: bytes, filename: str, sample_rate: int, max_seconds: float,
                allow_upsampling: bool = False) -> np.ndarray:
    """Mono float32 samples of an uploaded file (any format libsndfile reads, resampled to ``sample_rate``).

    The bytes go through a temporary file so that every check of :func:`transdec.audio.load_audio` applies
    (empty, truncated or unreadable files, too low a rate, NaN samples); messages name ``filename``.

    Raises:
        AudioError: the upload is no usable audio.
        AudioTooLong: it lasts more than ``max_seconds``, found from its header before it is decoded where the
            header says.
    """
    name = _safe_name(filename)
    with tempfile.TemporaryDirectory(prefix="transdec-upload-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            with open_audio(path, sample_rate, allow_upsampling) as f:
                length = known_length(f)
                if length is not None and length / f.samplerate > max_seconds:
                    raise AudioTooLong(f"{filename}: {length / f.samplerate:.1f} s of audio, more than the "
                                       f"server's limit of {max_seconds:g} s")
            audio = load_audio(path, sample_rate, allow_upsampling=allow_upsampling)
        except AudioError as error:
            raise AudioError(str(error).replace(str(path), filename)) from None
    if len(audio) / sample_rate > max_seconds:  # headers that do not tell the length
        raise AudioTooLong(f"{filename}: {len(audio) / sample_rate:.1f} s of audio, more than the server's limit of "
                           f"{max_seconds:g} s")
    return audio


def _safe_name(filename: str) -> str:
    """The upload's base name, reduced to characters safe in a path (its extension helps libsndfile guess raw
    formats, the rest only names the file in messages)."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", Path(filename or "audio").name)[-100:].lstrip(".")
    return base or "audio"
