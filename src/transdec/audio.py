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

#: The largest sample magnitude taken as audio (24 dB over full scale). Float audio lies in [-1, 1], a little over
#: after processing; far larger values are no audio the models heard (integer PCM stored as float, corrupt files)
#: and would decode to confident garbage, so they are refused as NaN is.
MAX_AMPLITUDE = 16.0
#: What libsndfile reports as the frame count of a stream whose header does not give its length.
UNKNOWN_LENGTH = 2**63 - 1


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
            lies past its end, or a sample is NaN, infinite or beyond :data:`MAX_AMPLITUDE`.
    """
    path = Path(path)
    with open_audio(path, sample_rate, allow_upsampling) as f:
        native_rate = f.samplerate
        start = int(round(offset * native_rate))
        length = known_length(f)
        if offset < 0 or (length is not None and start > length):
            raise AudioError(f"{path}: offset {offset} s is outside the recording ({f.frames / native_rate:.2f} s)")
        try:
            if start:
                f.seek(start)
        except (soundfile.LibsndfileError, RuntimeError, ValueError) as error:
            raise AudioError(f"{path}: offset {offset} s is outside the recording ({error})") from error
        audio = read_frames(f, path, -1 if duration is None else int(round(duration * native_rate)))
    if audio.shape[0] == 0:
        raise AudioError(f"{path}: the recording holds no samples" + (" at that offset" if offset else ""))
    check_samples(path, audio, start, native_rate)
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


def known_length(f: soundfile.SoundFile) -> int | None:
    """The frames of an open file, None where its header does not say (a FLAC stream written through a pipe)."""
    return None if f.frames >= UNKNOWN_LENGTH else f.frames


def read_frames(f: soundfile.SoundFile, path: str | os.PathLike[str], count: int = -1) -> np.ndarray:
    """Up to ``count`` frames (-1: all) from the current position of ``f`` as float32 ``[N, channels]``.

    For a stream of unknown length libsndfile decodes the frames, but soundfile's position update after a read
    seeks to the end of such a stream and fails there, so these are read through libsndfile's own call.

    Raises:
        AudioError: the file cannot be decoded (the message names ``path``).
    """
    try:
        if known_length(f) is not None:
            return f.read(count, dtype="float32", always_2d=True)
        pieces, left = [], count if count >= 0 else UNKNOWN_LENGTH
        while left > 0:
            block = np.empty((min(left, 1 << 16), f.channels), dtype=np.float32)
            read = soundfile._snd.sf_readf_float(f._file, soundfile._ffi.cast("float *", block.ctypes.data),
                                                 len(block))
            soundfile._error_check(f._errorcode)
            pieces.append(block[:read])
            left -= read
            if read < len(block):
                break
        return np.concatenate(pieces) if pieces else np.zeros((0, f.channels), dtype=np.float32)
    except (soundfile.LibsndfileError, RuntimeError, ValueError) as error:
        raise AudioError(f"{path}: not readable as audio ({error})") from error


def check_samples(path: str | os.PathLike[str], audio: np.ndarray, start: int, rate: int) -> None:
    """Refuse samples of ``audio [N, channels]`` (read from sample ``start`` of ``path``) that are no audio: NaN,
    infinite, or beyond :data:`MAX_AMPLITUDE`. Float files can hold them, and the model would turn them into
    garbage tokens."""
    problem = sample_problem(audio, start, rate)
    if problem:
        raise AudioError(f"{path}: {problem}")


def sample_problem(audio: np.ndarray, start: int, rate: int) -> str | None:
    """What makes samples ``audio [N, channels]`` (from sample ``start``) no audio, or None."""
    bad = ~np.isfinite(audio).all(axis=1)
    if bad.any():
        return (f"{int(bad.sum())} sample(s) are NaN or infinite, the first at "
                f"{(start + int(bad.argmax())) / rate:.3f} s")
    peak = np.abs(audio).max(axis=1) if audio.size else np.zeros(0)
    loud = peak > MAX_AMPLITUDE
    if loud.any():
        return (f"samples as large as {float(peak.max()):.3g} (the first at {(start + int(loud.argmax())) / rate:.3f} "
                f"s), where float audio lies in [-1, 1]: refused beyond {MAX_AMPLITUDE:g} (integer PCM stored as "
                "float? divide it by 32768)")
    return None


def as_waveform(audio: AudioInput, sample_rate: int, name: str = "the audio array") -> np.ndarray:
    """Mono float32 samples ``[N]`` of a file (read by :func:`load_audio`), or of a 1-D array (or one
    channel of a 2-D one) that holds samples at ``sample_rate``; ``name`` names the array in errors.

    Integer PCM is scaled to [-1, 1) as soundfile reads it: signed by ``2 ** (bits - 1)``, unsigned (8-bit
    WAV) centred on ``2 ** (bits - 1)`` first.

    Raises:
        AudioError: a file that cannot be used (see :func:`load_audio`).
        ValueError: an array of several channels or of a non-numeric dtype, or with NaN or infinite samples or
            samples beyond :data:`MAX_AMPLITUDE`.
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
    problem = sample_problem(array[:, None], 0, sample_rate)
    if problem:
        raise ValueError(f"{name}: {problem}")
    return array.astype(np.float32, copy=False)


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
