"""Audio in: the one way a file or an in-memory array becomes mono float32 samples at the model's rate.

Files are read with libsndfile (any format it reads), mixed to mono and resampled with soxr; arrays are
checked and scaled. Every problem is an error that names the file or array.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import soundfile
import torch

#: What the Python API transcribes: a file path, or 1-D samples at the model's rate.
AudioInput = str | os.PathLike | np.ndarray | torch.Tensor


class AudioError(ValueError):
    """An audio file that cannot be used; the message names the file and the problem."""


def load_audio(path: str | os.PathLike[str], sample_rate: int, offset: float = 0.0,
               duration: float | None = None, allow_upsampling: bool = False) -> np.ndarray:
    """Mono float32 samples of ``path`` at ``sample_rate``, from ``offset`` seconds for ``duration`` seconds.

    Higher sample rates are resampled down with soxr. Lower ones are refused unless ``allow_upsampling``:
    upsampling cannot restore the missing bandwidth, and a model trained on wideband speech is often
    much worse on it, which a user should decide knowingly.

    Raises:
        AudioError: the file is missing, empty, unreadable or truncated, its rate is too low, ``offset``
            lies past its end, or a sample is NaN or infinite.
    """
    path = Path(path)
    with open_audio(path, sample_rate, allow_upsampling) as f:
        native_rate = f.samplerate
        try:
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
    if audio.shape[0] == 0:
        raise AudioError(f"{path}: the recording holds no samples" + (" at that offset" if offset else ""))
    check_finite(path, audio, start, native_rate)
    audio = audio.mean(axis=1) if audio.shape[1] > 1 else audio[:, 0]
    if native_rate != sample_rate:
        import soxr

        audio = soxr.resample(audio, native_rate, sample_rate).astype(np.float32, copy=False)
    return np.ascontiguousarray(audio)


def open_audio(path: str | os.PathLike[str], sample_rate: int, allow_upsampling: bool = False) -> soundfile.SoundFile:
    """``path`` opened for reading after the checks :func:`load_audio` makes before reading (missing, empty,
    truncated or unreadable file; a rate below ``sample_rate`` unless ``allow_upsampling``), for callers that
    read it piece by piece; close it (or use it as a context manager)."""
    path = Path(path)
    if not path.is_file():
        raise AudioError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise AudioError(f"{path}: the file is empty")
    _check_wav_not_truncated(path)
    try:
        f = soundfile.SoundFile(str(path))
    except (soundfile.LibsndfileError, RuntimeError, ValueError) as error:
        raise AudioError(f"{path}: not readable as audio ({error})") from error
    if f.samplerate < sample_rate and not allow_upsampling:
        f.close()
        raise AudioError(f"{path}: sample rate {f.samplerate} Hz is below the model's {sample_rate} Hz "
                         "(use --allow-upsampling, or allow_upsampling=True in load_audio, to transcribe it anyway)")
    return f


def check_finite(path: str | os.PathLike[str], audio: np.ndarray, start: int, rate: int) -> None:
    """Refuse NaN or infinite samples in ``audio [N, channels]``, read from sample ``start`` of ``path``: float
    files can hold them, and the model would turn them into garbage tokens."""
    bad = ~np.isfinite(audio).all(axis=1)
    if bad.any():
        raise AudioError(f"{path}: {int(bad.sum())} sample(s) are NaN or infinite, the first at "
                         f"{(start + int(bad.argmax())) / rate:.3f} s")


def as_waveform(audio: AudioInput, sample_rate: int, name: str = "the audio array") -> np.ndarray:
    """Mono float32 samples ``[N]`` of a file (read by :func:`load_audio`), or of a 1-D array (or one
    channel of a 2-D one) that holds samples at ``sample_rate``; ``name`` names the array in errors.

    Integer PCM is scaled to [-1, 1) as soundfile reads it: signed by ``2 ** (bits - 1)``, unsigned (8-bit
    WAV) centred on ``2 ** (bits - 1)`` first.

    Raises:
        AudioError: a file that cannot be used (see :func:`load_audio`).
        ValueError: an array of several channels or of a non-numeric dtype, or with NaN or infinite samples.
    """
    if isinstance(audio, (str, os.PathLike)):
        return load_audio(audio, sample_rate)
    if isinstance(audio, torch.Tensor):
        audio = audio.detach().cpu()
        array = (audio.float() if audio.is_floating_point() else audio).numpy()
    else:
        array = np.asarray(audio)
    if array.ndim == 2 and 1 in array.shape:
        array = array.reshape(-1)
    if array.ndim != 1:
        raise ValueError(f"{name}: an audio array must be 1-D mono samples at {sample_rate} Hz (or one channel), got "
                         f"shape {array.shape}; mix the channels to mono first (their mean)")
    if array.dtype.kind in "iu":
        full_scale = 2.0 ** (8 * array.itemsize - 1)
        centre = full_scale if array.dtype.kind == "u" else 0.0
        return (array.astype(np.float32) - np.float32(centre)) / np.float32(full_scale)
    if array.dtype.kind != "f":
        raise ValueError(f"{name}: audio samples must be floating point or integer PCM, got {array.dtype}")
    bad = ~np.isfinite(array)
    if not bad.any() and array.size and np.abs(array).max() > np.finfo(np.float32).max:
        raise ValueError(f"{name}: samples as large as {np.abs(array).max():.3g} do not fit float32, and audio samples "
                         "lie in [-1, 1] (scale the array, or pass integer PCM as an integer array)")
    array = array.astype(np.float32, copy=False)
    if bad.any():
        raise ValueError(f"{name}: {int(bad.sum())} sample(s) are NaN or infinite, the first at "
                         f"{int(bad.argmax()) / sample_rate:.3f} s")
    return array


def check_float_waveforms(waveforms: torch.Tensor) -> None:
    """Refuse integer PCM given to a model's ``encode``: its scale is not that of audio in [-1, 1]."""
    if isinstance(waveforms, torch.Tensor) and not waveforms.is_floating_point():
        raise ValueError(f"waveforms must be floating point (audio in [-1, 1]), got {waveforms.dtype}; "
                         "scale integer PCM first (int16 / 32768, int32 / 2**31)")


def _check_wav_not_truncated(path: Path) -> None:
    """libsndfile silently reads what is left of a cut-off WAV file; compare with what its header promises."""
    with open(path, "rb") as f:
        if f.read(4) != b"RIFF":
            return
        f.seek(12)
        file_size = path.stat().st_size
        while True:
            header = f.read(8)
            if len(header) < 8:
                return
            chunk, size = header[:4], int.from_bytes(header[4:], "little")
            if chunk == b"data":
                present = file_size - f.tell()
                # 0 and 0xFFFFFFFF mark a size that streaming writers never filled in.
                if size not in (0, 0xFFFFFFFF) and size > present:
                    raise AudioError(f"{path}: the file is truncated (its header promises {size} bytes of audio, "
                                     f"{present} are present)")
                return
            f.seek(size + (size & 1), os.SEEK_CUR)
