"""`transdec transcribe` run as a user runs it: a subprocess, with good and bad inputs mixed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from transdec.model.checkpoint import save_model
from transdec.model.protocol import HeadSpec
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import TransducerModel

from test_model_and_training import TEXTS, tiny_config


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    torch.manual_seed(0)
    model = TransducerModel(tiny_config(HeadSpec("rnnt", 24)), Tokenizer.train(TEXTS * 3, 24))
    save_model(model, folder / "model.pt")
    rng = np.random.default_rng(0)
    (folder / "audio" / "sub").mkdir(parents=True)
    for name, seconds in [("a.wav", 1.0), ("sub/b.flac", 0.6)]:
        soundfile.write(folder / "audio" / name, (0.2 * rng.standard_normal(int(16000 * seconds))).astype(np.float32),
                        16000)
    soundfile.write(folder / "c_22k.wav", (0.2 * rng.standard_normal(22050)).astype(np.float32), 22050)
    (folder / "empty.wav").write_bytes(b"")
    soundfile.write(folder / "phone.wav", (0.2 * rng.standard_normal(8000)).astype(np.float32), 8000)
    whole = (folder / "c_22k.wav").read_bytes()
    (folder / "cut.wav").write_bytes(whole[: len(whole) // 2])
    (folder / "text.wav").write_text("not audio")
    manifest = [
        {"audio_filepath": "audio/a.wav", "duration": 1.0, "text": "x"},
        {"audio_filepath": "missing.wav", "duration": 1.0},
        {"audio_filepath": "c_22k.wav", "offset": 0.25, "duration": 0.5},
    ]
    (folder / "m.jsonl").write_text("\n".join(json.dumps(m) for m in manifest) + "\n{broken\n")
    return folder


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "transdec.cli", "transcribe", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_folder_and_files_to_jsonl_with_bad_items_reported(workspace: Path) -> None:
    out = workspace / "out.jsonl"
    result = run("audio", "empty.wav", "c_22k.wav", "text.wav", "cut.wav", "phone.wav", "--model", "model.pt",
                 "--format", "jsonl", "--output", str(out), cwd=workspace)
    assert result.returncode == 1
    assert "empty.wav: the file is empty" in result.stderr
    assert "text.wav: not readable as audio" in result.stderr
    assert "cut.wav: the file is truncated" in result.stderr
    assert "phone.wav: sample rate 8000 Hz is below" in result.stderr
    assert "4 item(s) failed, 3 transcribed" in result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [Path(r["audio_filepath"]).name for r in lines] == ["a.wav", "b.flac", "c_22k.wav"]
    assert lines[2]["duration"] == pytest.approx(1.0)
    assert all({"text", "tokens", "words"} <= set(r) for r in lines)
    assert not list(workspace.glob("*.partial"))


def test_manifest_output_keeps_entries_and_reports_bad_lines(workspace: Path) -> None:
    result = run("m.jsonl", "--model", "model.pt", "--format", "manifest", cwd=workspace)
    assert result.returncode == 1
    assert "m.jsonl:4: not a manifest entry" in result.stderr
    assert "missing.wav: no such file" in result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["audio_filepath"] for r in rows] == ["audio/a.wav", "c_22k.wav"]
    assert all("pred_text" in r for r in rows) and rows[0]["text"] == "x"


def test_text_output_and_unknown_model(workspace: Path) -> None:
    ok = run("audio/a.wav", "--model", "model.pt", cwd=workspace)
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 1
    bad = run("audio/a.wav", "--model", "no-such-model", cwd=workspace)
    assert bad.returncode == 2 and "no model file 'no-such-model'" in bad.stderr


def test_evaluate_reports_strategies_side_by_side(workspace: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "transdec.cli", "evaluate", "m.jsonl", "--model", "model.pt",
                             "--decoding", "greedy_label,greedy_frame", "--output-dir", "eval"], cwd=workspace,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1  # the broken line and the two entries without text
    assert "m.jsonl:4: not a manifest entry" in result.stderr
    assert "missing.wav: the manifest entry has no reference text" in result.stderr
    summary = json.loads((workspace / "eval" / "summary.json").read_text())
    assert [s["strategy"] for s in summary["strategies"]] == ["greedy_label", "greedy_frame"]
    assert summary["failed_items"] == 3 and summary["normalizer"] == "whisper"
    label, frame = summary["strategies"]
    assert label["wer"] == frame["wer"]  # RNN-T frame-looping is exact
    assert label["encoder_seconds"] == frame["encoder_seconds"]  # one encoder pass serves every strategy
    assert "| greedy_label | 1 |" in result.stdout
