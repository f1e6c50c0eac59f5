"""Audio loading: formats, mono mix-down, resampling, offset/duration, and errors that name the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile

from transdec.audio import AudioError, load_audio


def tone(seconds: float, rate: int, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    audio = 0.5 * np.sin(2 * np.pi * 440 * t).astype(np.float32)
    return np.stack([audio] * channels, axis=1) if channels > 1 else audio


@pytest.mark.parametrize("suffix", [".wav", ".flac", ".ogg"])
def test_formats_load_as_mono_float32(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"a{suffix}"
    soundfile.write(path, tone(0.5, 16000, channels=2), 16000)
    audio = load_audio(path, 16000)
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert abs(len(audio) - 8000) <= 1
    assert np.abs(audio[:8000] - tone(0.5, 16000)).max() < 0.05  # lossy ogg is close, not equal


def test_resampling_and_offset_duration(tmp_path: Path) -> None:
    path = tmp_path / "a.wav"
    soundfile.write(path, tone(2.0, 22050), 22050)
    assert len(load_audio(path, 16000)) == 32000
    part = load_audio(path, 16000, offset=0.5, duration=1.0)  # offset and duration are in seconds
    assert len(part) == 16000


def test_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(AudioError, match="missing.wav: no such file"):
        load_audio(tmp_path / "missing.wav", 16000)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    with pytest.raises(AudioError, match="empty.wav: the file is empty"):
        load_audio(empty, 16000)
    text = tmp_path / "notes.wav"
    text.write_text("this is not audio")
    with pytest.raises(AudioError, match="notes.wav: not readable as audio"):
        load_audio(text, 16000)
    short = tmp_path / "short.wav"
    soundfile.write(short, tone(0.1, 16000), 16000)
    with pytest.raises(AudioError, match="short.wav: offset 5.0 s is outside"):
        load_audio(short, 16000, offset=5.0)


def test_truncated_low_rate_and_sampleless_files_are_refused(tmp_path: Path) -> None:
    for suffix in (".wav", ".flac"):
        full = tmp_path / f"full{suffix}"
        soundfile.write(full, tone(1.0, 16000), 16000)
        cut = tmp_path / f"cut{suffix}"
        cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
        with pytest.raises(AudioError, match=f"cut{suffix}: (the file is truncated|not readable as audio)"):
            load_audio(cut, 16000)
    low = tmp_path / "phone.wav"
    soundfile.write(low, tone(1.0, 8000), 8000)
    with pytest.raises(AudioError, match="phone.wav: sample rate 8000 Hz is below the model's 16000 Hz "
                                         r"\(use --allow-upsampling"):
        load_audio(low, 16000)
    assert len(load_audio(low, 16000, allow_upsampling=True)) == 16000
    silent = tmp_path / "nothing.wav"
    soundfile.write(silent, np.zeros(0, dtype=np.float32), 16000)
    with pytest.raises(AudioError, match="nothing.wav: the recording holds no samples"):
        load_audio(silent, 16000)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_infinite_samples_are_refused(tmp_path: Path, bad: float) -> None:
    audio = tone(1.0, 16000)
    audio[4000:4010] = bad
    path = tmp_path / "broken.wav"
    soundfile.write(path, audio, 16000, subtype="FLOAT")  # float WAV keeps NaN and infinity as they are
    with pytest.raises(AudioError, match=r"broken.wav: 10 sample\(s\) are NaN or infinite, the first at 0.250 s"):
        load_audio(path, 16000)
    with pytest.raises(AudioError, match="the first at 0.250 s"):  # times count from the file's start
        load_audio(path, 16000, offset=0.125)


def test_a_flac_stream_whose_header_gives_no_length_is_read_to_its_end(tmp_path: Path) -> None:
    """Encoders writing to a pipe leave the total sample count 0 ("unknown"); the recording is read by decoding."""
    from helpers import flac_without_length

    whole = tmp_path / "whole.flac"
    soundfile.write(whole, tone(2.5, 16000), 16000, subtype="PCM_16")
    piped = flac_without_length(whole, tmp_path / "piped.flac")
    with soundfile.SoundFile(piped) as f:
        assert f.frames > 2**62  # libsndfile's "unknown length"
    np.testing.assert_array_equal(load_audio(piped, 16000), load_audio(whole, 16000))
    np.testing.assert_array_equal(load_audio(piped, 16000, offset=0.5, duration=1.0),
                                  load_audio(whole, 16000, offset=0.5, duration=1.0))
    np.testing.assert_array_equal(load_audio(piped, 16000, offset=2.0, duration=9.0),
                                  load_audio(whole, 16000, offset=2.0))
    with pytest.raises(AudioError, match="piped.flac: offset 3.0 s is outside the recording"):
        load_audio(piped, 16000, offset=3.0)


@pytest.mark.parametrize("peak", [1e30, 32767.0, 17.0])
def test_float_samples_far_outside_plus_minus_one_are_refused(tmp_path: Path, peak: float) -> None:
    """Float audio lies in [-1, 1] (a little over after processing); far larger values decode to garbage."""
    from transdec.audio import MAX_AMPLITUDE, as_waveform

    audio = tone(1.0, 16000)
    audio[8000:8100] *= peak / 0.5
    path = tmp_path / "loud.wav"
    soundfile.write(path, audio, 16000, subtype="FLOAT")
    with pytest.raises(AudioError, match=rf"loud.wav: samples as large as .* \(the first at 0.50\d s\).* refused "
                                         rf"beyond {MAX_AMPLITUDE:g}"):
        load_audio(path, 16000)
    with pytest.raises(ValueError, match="the audio array: samples as large as"):
        as_waveform(audio, 16000)
    audio[8000:8100] = 1.5  # over full scale, as processed audio may be: still audio
    soundfile.write(path, audio, 16000, subtype="FLOAT")
    assert np.abs(load_audio(path, 16000)).max() == 1.5
