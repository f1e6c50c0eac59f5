"""NeMo manifests, read by one reader for transcription, evaluation and training, and padded batches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from transdec.manifest import ManifestEntry, read_manifest
from transdec.padding import pad_batch, round_up
from transdec.sources import read_manifest_items
from transdec.training.data import collate, read_training_manifest


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """``audio/a.wav`` (1 s) and ``audio/b.wav`` (2 s), a ramp so that a segment shows where it was cut."""
    (tmp_path / "audio").mkdir()
    for name, seconds in (("a.wav", 1.0), ("b.wav", 2.0)):
        samples = np.linspace(-0.5, 0.5, int(16000 * seconds), dtype=np.float32)
        soundfile.write(tmp_path / "audio" / name, samples, 16000, subtype="FLOAT")
    return tmp_path


def write(path: Path, *lines: object) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_entries_keep_fields_and_resolve_relative_paths_against_the_manifest(folder: Path) -> None:
    absolute = str(folder / "audio" / "b.wav")
    manifest = write(folder / "m.jsonl",
                     {"audio_filepath": "audio/a.wav", "duration": 1.0, "text": "hi", "voice": "piper"},
                     "",
                     {"audio_filepath": absolute, "offset": 0.5, "duration": 1.0})
    entries, errors = read_manifest(manifest)
    assert errors == []
    assert entries[0] == ManifestEntry(folder / "audio" / "a.wav", f"{manifest}:1", 1.0, "hi", None,
                                       {"audio_filepath": "audio/a.wav", "duration": 1.0, "text": "hi",
                                        "voice": "piper"})
    assert entries[1].audio_filepath == Path(absolute) and entries[1].origin == f"{manifest}:3"
    # Without an offset the duration describes the whole file; with one it is the segment to read.
    assert [e.segment for e in entries] == [(0.0, None), (0.5, 1.0)]


def test_inference_reports_each_bad_line_with_its_number_and_keeps_the_rest(folder: Path) -> None:
    manifest = write(folder / "m.jsonl",
                     {"audio_filepath": "audio/a.wav"},
                     '{"audio_filepath": "audio/b.wav", "duration": NaN}',
                     "{broken",
                     {"duration": 1.0},
                     {"audio_filepath": "audio/b.wav", "duration": "2 s"},
                     {"audio_filepath": "audio/b.wav", "text": 5},
                     [1, 2],
                     {"audio_filepath": "missing.wav"})
    entries, errors = read_manifest(manifest)
    # A missing file is not a bad line here: transcription reports it, by line, when it reads it.
    assert [e.origin for e in entries] == [f"{manifest}:1", f"{manifest}:8"]
    assert [e.where for e in errors] == [f"{manifest}:{n}" for n in range(2, 8)]
    assert all(e.message.startswith("not a manifest entry (") for e in errors)
    assert "NaN is not a JSON value" in errors[0].message and "no audio_filepath" in errors[2].message
    assert "duration must be a non-negative number" in errors[3].message
    assert "text must be a string" in errors[4].message
    items, item_errors = read_manifest_items(manifest)
    assert item_errors == errors
    assert [(i.path, i.offset, i.duration, i.origin) for i in items] == [
        (folder / "audio" / "a.wav", 0.0, None, f"{manifest}:1"), (folder / "missing.wav", 0.0, None, f"{manifest}:8")]
    assert items[0].entry == {"audio_filepath": "audio/a.wav"}  # written back out as it was


def test_required_fields_and_missing_files_are_bad_lines_when_asked(folder: Path) -> None:
    manifest = write(folder / "m.jsonl",
                     {"audio_filepath": "audio/a.wav", "duration": 1.0, "text": "hi"},
                     {"audio_filepath": "audio/b.wav", "duration": 2.0},
                     {"audio_filepath": "gone.wav", "duration": 2.0, "text": "x"})
    entries, errors = read_manifest(manifest, required=("duration", "text"), check_files=True)
    assert [e.text for e in entries] == ["hi"]
    assert [str(e) for e in errors] == [f"{manifest}:2: not a manifest entry (no text)",
                                        f"{manifest}:3: {folder / 'gone.wav'}: no such file"]
    with pytest.raises(ValueError, match="unknown manifest fields"):
        read_manifest(manifest, required=("speaker",))


def test_training_raises_naming_every_bad_line(folder: Path) -> None:
    manifest = write(folder / "train.jsonl",
                     {"audio_filepath": "audio/a.wav", "duration": 1.0, "text": "hi"},
                     {"audio_filepath": "audio/b.wav", "text": "no duration"},
                     '{"audio_filepath": "audio/b.wav", "duration": Infinity, "text": "x"}')
    with pytest.raises(ValueError) as raised:
        read_training_manifest(manifest)
    message = str(raised.value)
    assert "2 bad line(s)" in message and f"{manifest}:2: not a manifest entry (no duration)" in message
    assert f"{manifest}:3: not a manifest entry (Infinity is not a JSON value)" in message
    assert f"{manifest}:1" not in message


def test_training_reads_an_entry_s_segment(folder: Path) -> None:
    manifest = write(folder / "train.jsonl",
                     {"audio_filepath": "audio/b.wav", "offset": 0.5, "duration": 1.0, "text": "part"},
                     {"audio_filepath": "audio/a.wav", "duration": 0.9, "text": "whole"})
    entries = read_training_manifest(manifest)
    assert [e.duration for e in entries] == [1.0, 0.9]
    batch = collate(entries, [[0], [1]], [[3, 4], [5]], 16000)
    ramp = soundfile.read(folder / "audio" / "b.wav", dtype="float32")[0]
    assert batch.waveform_lengths.tolist() == [16000, 16000]  # the whole of a.wav, not its written 0.9 s
    np.testing.assert_array_equal(batch.waveforms[0].numpy(), ramp[8000:24000])
    assert batch.targets.tolist() == [[3, 4], [5, 0]] and batch.target_lengths.tolist() == [2, 1]


def test_pad_batch_pads_with_zeros_to_a_multiple() -> None:
    padded, lengths = pad_batch([np.ones(3, np.float32), torch.full((5,), 2.0)], multiple=4)
    assert padded.dtype == torch.float32 and lengths.dtype == torch.int64
    assert padded.tolist() == [[1, 1, 1, 0, 0, 0, 0, 0], [2, 2, 2, 2, 2, 0, 0, 0]] and lengths.tolist() == [3, 5]
    assert pad_batch([[1, 2], [3]])[0].tolist() == [[1, 2], [3, 0]]
    assert pad_batch([[1, 2], [3]])[0].dtype == torch.int64
    assert pad_batch([[1, 2, 3, 4]], multiple=4)[0].shape == (1, 4)  # an exact multiple stays as it is
    tokens, token_lengths = pad_batch([[], []], multiple=16, dtype=torch.int64, min_length=1)
    assert tokens.shape == (2, 16) and tokens.dtype == torch.int64 and token_lengths.tolist() == [0, 0]
    assert [round_up(n, 5) for n in (0, 1, 5, 6)] == [0, 5, 5, 10]


def test_pad_batch_keeps_trailing_dimensions_and_takes_an_empty_list() -> None:
    frames = [torch.randn(2, 3), torch.randn(4, 3)]
    padded, lengths = pad_batch(frames)
    assert padded.shape == (2, 4, 3) and lengths.tolist() == [2, 4]
    assert torch.equal(padded[0, :2], frames[0]) and not padded[0, 2:].any()
    empty, empty_lengths = pad_batch([])
    assert empty.shape == (0, 0) and empty.dtype == torch.float32 and empty_lengths.shape == (0,)
    assert pad_batch([], multiple=8, dtype=torch.int64, min_length=1)[0].shape == (0, 8)
    with pytest.raises(ValueError, match="multiple must be at least 1"):
        pad_batch([[1.0]], multiple=0)
    with pytest.raises(ValueError, match="a row is a scalar"):
        pad_batch([1.0, 2.0])
