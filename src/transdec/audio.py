"""Reading audio files: any format libsndfile reads, mixed to mono, resampled with soxr, with clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import soundfile


class AudioError(ValueError):
    """An audio file that cannot be used; the message names the file and the problem."""


def load_audio(path: str | os.PathLike[str], sample_rate: int, offset: float = 0.0,
               duration: float | None = None) -> np.ndarray:
    """Mono float32 samples of ``path`` at ``sample_rate``, from ``offset`` seconds for ``duration`` seconds.

    Raises:
        AudioError: the file is missing, empty, unreadable or truncated, or ``offset`` lies past its end.
    """
    path = Path(path)
    if not path.is_file():
        raise AudioError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise AudioError(f"{path}: the file is empty")
    try:
        with soundfile.SoundFile(str(path)) as f:
            native_rate = f.samplerate
            start = int(round(offset * native_rate))
            if offset < 0 or (start > f.frames and f.frames >= 0):
                raise AudioError(f"{path}: offset {offset} s is outside the recording ({f.frames / native_rate:.2f} s)")
            if start:
                f.seek(start)
            frames = -1 if duration is None else int(round(duration * native_rate))
            audio = f.read(frames, dtype="float32", always_2d=True)
    except AudioError:
        raise
    except (soundfile.LibsndfileError, RuntimeError, ValueError) as error:
        raise AudioError(f"{path}: not readable as audio ({error})") from error
    audio = audio.mean(axis=1) if audio.shape[1] > 1 else audio[:, 0]
    if native_rate != sample_rate:
        import soxr

        audio = soxr.resample(audio, native_rate, sample_rate).astype(np.float32, copy=False)
    return np.ascontiguousarray(audio)
