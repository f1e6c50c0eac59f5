"""`transdec inspect`: what a model is, for every kind transdec reads, and every reason a NeMo checkpoint does not
load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import NEMO_FIXTURES, cli, repack


def test_a_bundled_model(capsys) -> None:
    code, out, _ = cli(capsys, "inspect", "tiny-en-tdt")
    assert code == 0
    for line in ("supported: True", "  kind: tdt", "  durations: [0, 1, 2, 3, 4]", "  vocab_size: 256",
                 "  attention: local", "  subsampling_factor: 8"):
        assert line in out.splitlines(), line


def test_a_nemo_checkpoint_as_json(capsys) -> None:
    code, out, _ = cli(capsys, "inspect", NEMO_FIXTURES / "fc_multiblank.nemo", "--format", "json")
    report = json.loads(out)
    assert code == 0 and report["supported"] and report["problems"] == []
    assert report["model_class"] == "EncDecRNNTBPEModel" and report["head"]["big_blank_durations"] == [2, 4]
    assert report["encoder"]["att_context_size"] == [10, 3] and report["parameters"] > 0


def test_every_unsupported_setting_is_listed(tmp_path: Path, capsys) -> None:
    def streaming_and_more(config: dict) -> None:
        config["encoder"].update(causal_downsampling=True, att_context_style="chunked_limited_with_rc",
                                 att_context_size=[[70, 13], [70, 1]])
        config["preprocessor"]["frame_splicing"] = 3
        config["joint"]["jointnet"]["activation"] = "gelu"

    path = repack("fc_rnnt", tmp_path / "streaming.nemo", streaming_and_more)
    code, out, _ = cli(capsys, "inspect", path, "--format", "json")
    report = json.loads(out)
    assert code == 1 and not report["supported"]
    assert [p.split("=")[0] for p in report["problems"]] == [
        "preprocessor.frame_splicing", "encoder.att_context_style", "joint.jointnet.activation"]
    assert "cache-aware streaming" in report["streaming"]


def test_an_onnx_export(tmp_path: Path, capsys) -> None:
    pytest.importorskip("onnxruntime")
    from onnx_helpers import exported

    code, out, _ = cli(capsys, "inspect", exported("tiny-en-rnnt", tmp_path))
    assert code == 0 and "format: ONNX export (nemo layout)" in out and "receptive_field_frames: " in out


def test_what_is_no_model(tmp_path: Path, capsys) -> None:
    code, _, err = cli(capsys, "inspect", tmp_path / "nothing.pt")
    assert code == 2 and err.count("\n") == 1 and "no such file or directory" in err
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = cli(capsys, "inspect", tmp_path / "notes.txt")
    assert code == 2 and err.count("\n") == 1 and "not a transdec model file" in err
