"""`transdec transcribe` run as a user runs it: a subprocess, with good and bad inputs mixed."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from transdec import transcribe_files
from transdec.cli import main
from transdec.model.checkpoint import save_model
from transdec.protocol import HeadSpec
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import TransducerModel
from transdec.sources import read_manifest_items
from transdec.transcribe import Transcript, WordTiming

from helpers import TEXTS, cli, tiny_config


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
    assert "phone.wav: sample rate 8000 Hz is below" in result.stderr and "--allow-upsampling" in result.stderr
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


# Issue 41: what a new user ran into. These run the command in-process (`helpers.cli`), which is much faster than a
# subprocess and lets a test stand in for the transcriber to crash or interrupt a run at a chosen point.

def strict_json(line: str):
    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=refuse)


@pytest.fixture(scope="module")
def nan_wav(workspace: Path) -> Path:
    audio = (0.2 * np.random.default_rng(1).standard_normal(16000)).astype(np.float32)
    audio[800:900] = np.nan
    path = workspace / "bad" / "nan.wav"
    path.parent.mkdir(exist_ok=True)
    soundfile.write(path, audio, 16000, subtype="FLOAT")
    return path


def test_audio_with_nan_samples_is_refused_and_the_rest_is_done(workspace: Path, nan_wav: Path, tmp_path: Path,
                                                                 capsys) -> None:
    out = tmp_path / "out.jsonl"
    code, _, err = cli(capsys, "transcribe", nan_wav, workspace / "audio", "--model", workspace / "model.pt",
                       "--format", "jsonl", "--output", out)
    assert code == 1
    assert "nan.wav: 100 sample(s) are NaN or infinite" in err
    rows = [strict_json(line) for line in out.read_text().splitlines()]
    assert [Path(r["audio_filepath"]).name for r in rows] == ["a.wav", "b.flac"]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": str(nan_wav), "text": "x"}) + "\n"
                        + json.dumps({"audio_filepath": str(workspace / "audio" / "a.wav"), "text": "x"}) + "\n")
    code, table, err = cli(capsys, "evaluate", manifest, "--model", workspace / "model.pt", "--output-dir",
                           tmp_path / "eval")
    assert code == 1 and "m.jsonl:1: " in err and "nan.wav: 100 sample(s) are NaN or infinite" in err
    assert "| greedy_label | 1 |" in table
    strict_json((tmp_path / "eval" / "summary.json").read_text())
    for path in (tmp_path / "eval").glob("predictions_*.jsonl"):
        assert [strict_json(line)["audio_filepath"] for line in path.read_text().splitlines()] == [
            str(workspace / "audio" / "a.wav")]


def test_float_audio_far_beyond_full_scale_is_refused_and_the_rest_is_done(workspace: Path, tmp_path: Path,
                                                                          capsys) -> None:
    loud = tmp_path / "loud.wav"
    soundfile.write(loud, np.full(16000, 1e30, np.float32), 16000, subtype="FLOAT")
    code, out, err = cli(capsys, "transcribe", loud, workspace / "audio" / "a.wav", "--model",
                         workspace / "model.pt", "--format", "jsonl")
    assert code == 1 and "loud.wav: samples as large as 1e+30" in err
    assert [Path(strict_json(line)["audio_filepath"]).name for line in out.splitlines()] == ["a.wav"]
    code, out, err = cli(capsys, "stream", loud, "--model", workspace / "model.pt")
    assert code == 1 and "loud.wav: samples as large as 1e+30" in err and not out


def test_manifest_lines_with_nan_are_bad_lines(tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"audio_filepath": "a.wav", "duration": NaN}\n{"audio_filepath": "b.wav"}\n')
    items, errors = read_manifest_items(manifest)
    assert [item.path.name for item in items] == ["b.wav"] and items[0].origin == f"{manifest}:2"
    assert [e.where for e in errors] == [f"{manifest}:1"] and "(NaN is not a JSON value)" in errors[0].message


def test_json_output_never_holds_nan(workspace: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    def nan_confidence(model, waveforms, *args):
        return [Transcript("x", [1], [WordTiming("x", 0.0, 0.08, float("nan"))], 1.0) for _ in waveforms]

    monkeypatch.setattr(transcribe_files, "transcribe", nan_confidence)
    code, out, err = cli(capsys, "transcribe", workspace / "audio", "--model", workspace / "model.pt",
                         "--format", "jsonl")
    assert code == 1 and out == ""
    assert "a.wav: the transcript holds NaN or infinity" in err and "2 item(s) failed, 0 transcribed" in err


def test_beam_search_nbest_in_jsonl(workspace: Path, capsys) -> None:
    code, out, _ = cli(capsys, "transcribe", workspace / "audio", "--model", workspace / "model.pt",
                       "--decoding", "beam_alsd_pp", "--beam-size", "3", "--nbest", "2", "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(rows) == 2
    for row in rows:
        assert len(row["nbest"]) == 2 and row["nbest"][0]["text"] == row["text"]
        assert row["nbest"][0]["score"] >= row["nbest"][1]["score"]


def test_front_end_sherpa_decodes_sherpa_onnx_s_features(capsys) -> None:
    """--front-end sherpa: the transcripts of load_model(..., front_end="sherpa"), not of the model's features."""
    pytest.importorskip("kaldi_native_fbank")
    from transdec.loading import load_model

    files = sorted(str(p) for p in (Path(__file__).resolve().parent.parent / "examples").glob("*.flac"))
    code, out, _ = cli(capsys, "transcribe", *files, "--front-end", "sherpa", "--format", "jsonl")
    assert code == 0
    got = [json.loads(line)["text"] for line in out.splitlines()]
    assert got == [t.text for t in load_model("tiny-en-rnnt", front_end="sherpa").transcribe(files)]
    assert got != [t.text for t in load_model("tiny-en-rnnt").transcribe(files)]  # the features did change
    with pytest.raises(ValueError, match="front_end must be 'model' or 'sherpa'"):
        load_model("tiny-en-rnnt", front_end="kaldi")


def test_local_attention_for_nemo_models(capsys) -> None:
    """--local-attention LEFT[,RIGHT] switches a NeMo model's encoder as use_local_attention does; other models
    and bad windows are one-line errors."""
    pytest.importorskip("omegaconf")
    from transdec.loading import load_model

    root = Path(__file__).resolve().parent
    nemo = root / "fixtures" / "nemo" / "fc_rnnt.nemo"
    files = sorted(str(p) for p in (root.parent / "examples").glob("*.flac"))
    code, out, _ = cli(capsys, "transcribe", *files, "--model", nemo, "--local-attention", "3,2", "--format", "jsonl")
    assert code == 0
    model = load_model(nemo)
    model.use_local_attention(3, 2)
    assert [json.loads(line)["tokens"] for line in out.splitlines()] == [t.tokens for t in model.transcribe(files)]
    code, _, err = cli(capsys, "transcribe", *files, "--local-attention", "8")
    assert code == 2 and "--local-attention is for NeMo models; tiny-en-rnnt is not one" in err
    code, _, err = cli(capsys, "transcribe", *files, "--model", nemo, "--local-attention", "0,4")
    assert code == 2 and "positive frame counts" in err


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_or_crashed_run_keeps_the_old_output(workspace: Path, tmp_path: Path, capsys, monkeypatch,
                                                            stop: type[BaseException]) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old results\n")
    real = transcribe_files.transcribe
    calls = []

    def transcribe_then_stop(*args):
        calls.append(1)
        if len(calls) == 2:
            raise stop()
        return real(*args)

    monkeypatch.setattr(transcribe_files, "transcribe", transcribe_then_stop)
    # One item per batch, the shorter first: b.flac is done, a.wav is not.
    args = ("transcribe", workspace / "audio", "--model", workspace / "model.pt", "--output", out, "--batch-size", "1")
    if stop is KeyboardInterrupt:
        code, _, err = cli(capsys, *args)
        assert code == 130
    else:
        with pytest.raises(RuntimeError):
            main([str(a) for a in args])
        err = capsys.readouterr().err
    assert out.read_text() == "old results\n"
    assert f"1 result(s) so far are in {out}.partial, {out} was not written" in err
    partial = (tmp_path / "out.jsonl.partial").read_text().splitlines()
    assert len(partial) == 1 and partial[0].startswith(str(workspace / "audio" / "sub" / "b.flac"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "out.jsonl.partial"]  # no temp file left


def test_a_finished_run_replaces_the_output_and_leaves_no_temp_file(workspace: Path, tmp_path: Path,
                                                                    capsys) -> None:
    out = tmp_path / "out.txt"
    out.write_text("old results\n")
    code, _, _ = cli(capsys, "transcribe", workspace / "audio", "--model", workspace / "model.pt", "--output", out)
    assert code == 0 and len(out.read_text().splitlines()) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.parametrize("args, message", [
    (["--batch-size", "0"], "argument --batch-size: must be at least 1, got 0"),
    (["--batch-size", "-1"], "argument --batch-size: must be at least 1, got -1"),
    (["--device", "nonsense"], "--device nonsense: "),
    (["--output", "{tmp}"], "--output {tmp}: is a directory"),
    (["--output", "{tmp}/no/such/out.jsonl"], "--output {tmp}/no/such/out.jsonl: no such directory {tmp}/no/such"),
    (["--decoding", "beam"], "unknown decoding strategy 'beam'"),
])
def test_transcribe_checks_arguments_before_loading_the_model(workspace: Path, tmp_path: Path, capsys,
                                                              args: list[str], message: str) -> None:
    args = [a.format(tmp=tmp_path) for a in args]
    code, out, err = cli(capsys, "transcribe", workspace / "audio", "--model", "no-such-model", *args)
    assert code == 2 and out == ""
    assert message.format(tmp=tmp_path) in err.splitlines()[-1]
    assert "no model file" not in err and "Traceback" not in err
    assert err.count("\n") == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_one_line(workspace: Path, capsys) -> None:
    for command in (["transcribe", workspace / "audio"], ["evaluate", workspace / "m.jsonl"]):
        code, _, err = cli(capsys, *command, "--device", "cuda", "--model", "no-such-model")
        assert code == 2 and err.count("\n") == 1 and "--device cuda: " in err and "no model file" not in err


def test_train_checks_the_device_first(tmp_path: Path, capsys) -> None:
    code, _, err = cli(capsys, "train", "--train-manifest", tmp_path / "no.jsonl", "--dev-manifest",
                       tmp_path / "no.jsonl", "--exp-dir", tmp_path / "exp", "--device", "nonsense")
    assert code == 2 and err.startswith("transdec train: error: --device nonsense: ") and err.count("\n") == 1
    assert not (tmp_path / "exp").exists()


@pytest.mark.parametrize("args, message", [
    (["{tmp}/no-such.jsonl"], "{tmp}/no-such.jsonl: no such file"),
    (["{workspace}/m.jsonl", "--output-dir", "{workspace}/m.jsonl"],
     "--output-dir {workspace}/m.jsonl: {workspace}/m.jsonl is not a directory"),
    (["{workspace}/m.jsonl", "--output-dir", "{workspace}/m.jsonl/eval"],
     "--output-dir {workspace}/m.jsonl/eval: {workspace}/m.jsonl is not a directory"),
    (["{workspace}/m.jsonl", "--batch-size", "0"], "argument --batch-size: must be at least 1, got 0"),
    (["{workspace}/m.jsonl", "--warmup", "-1"], "argument --warmup: must be at least 0, got -1"),
])
def test_evaluate_checks_arguments_before_loading_the_model(workspace: Path, tmp_path: Path, capsys,
                                                            args: list[str], message: str) -> None:
    args = [a.format(tmp=tmp_path, workspace=workspace) for a in args]
    code, out, err = cli(capsys, "evaluate", *args, "--model", "no-such-model")
    assert code == 2 and out == ""
    assert message.format(tmp=tmp_path, workspace=workspace) in err.splitlines()[-1]
    assert "no model file" not in err and "Traceback" not in err


def test_nothing_to_transcribe_or_evaluate_is_an_error(workspace: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no audio here")
    (tmp_path / "empty.jsonl").write_text("\n")
    model = workspace / "model.pt"
    code, out, err = cli(capsys, "transcribe", tmp_path / "empty", "--model", model)
    assert code == 1 and out == "" and f"{tmp_path / 'empty'}: no audio files in this directory" in err
    code, out, err = cli(capsys, "transcribe", tmp_path / "empty.jsonl", "--model", model)
    assert code == 1 and out == "" and f"{tmp_path / 'empty.jsonl'}: the manifest has no entries" in err
    code, out, err = cli(capsys, "evaluate", tmp_path / "empty.jsonl", "--model", model)
    assert code == 1 and out == "" and f"{tmp_path / 'empty.jsonl'}: the manifest has no entries" in err
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"audio_filepath": "missing.wav", "text": "x"}) + "\n")
    code, out, err = cli(capsys, "evaluate", broken, "--model", model, "--output-dir", tmp_path / "eval")
    assert code == 1 and out == "" and f"{broken}: none of its 1 item(s) could be evaluated" in err
    assert not (tmp_path / "eval").exists() or not list((tmp_path / "eval").iterdir())
    out_file = tmp_path / "out.txt"
    out_file.write_text("old results\n")
    code, out, err = cli(capsys, "transcribe", broken, "--model", model, "--output", out_file)
    assert code == 1 and f"nothing was transcribed, so {out_file} was not written" in err
    assert out_file.read_text() == "old results\n"


def test_version_and_bare_command(capsys) -> None:
    from transdec import __version__

    code, out, _ = cli(capsys, "--version")
    assert code == 0 and out.strip() == f"transdec {__version__}"
    code, out, err = cli(capsys)
    assert code == 2 and "Traceback" not in err and "transcribe" in err and "evaluate" in err


def test_manifest_errors_name_the_line(workspace: Path, capsys) -> None:
    code, _, err = cli(capsys, "transcribe", workspace / "m.jsonl", "--model", workspace / "model.pt")
    assert code == 1
    assert f"{workspace / 'm.jsonl'}:2: {workspace / 'missing.wav'}: no such file" in err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("command", ["transcribe", "evaluate"])
def test_progress_bar_only_on_a_terminal(workspace: Path, capsys, monkeypatch, command: str) -> None:
    manifest = workspace / "texts.jsonl"
    manifest.write_text("".join(json.dumps({"audio_filepath": f"audio/{name}", "text": "x"}) + "\n"
                                for name in ("a.wav", "sub/b.flac")))
    args = [command, manifest, "--model", workspace / "model.pt"]
    code, _, err = cli(capsys, *args)
    assert code == 0 and "100%" not in err
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli(capsys, *args)[0] == 0
    assert f"{command}" in terminal.getvalue() and "100%" in terminal.getvalue()


def test_evaluate_encodes_long_recordings_in_windows_and_warms_up_on_their_start(
        workspace: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    from transdec import long_audio

    calls = []
    original = long_audio.encode_long
    monkeypatch.setattr(long_audio, "encode_long", lambda model, waveform, *a: calls.append(len(waveform))
                        or original(model, waveform, *a))
    long_wav = tmp_path / "long.wav"
    samples = 16000 * 100
    soundfile.write(long_wav, (0.2 * np.random.default_rng(1).standard_normal(samples)).astype(np.float32), 16000)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": str(long_wav), "text": "x"}) + "\n")
    code, table, _ = cli(capsys, "evaluate", manifest, "--model", workspace / "model.pt", "--decoding", "greedy_label")
    assert code == 0 and "| greedy_label | 1 |" in table
    assert calls == [samples]  # the timed pass only: the warm-up encoded its first 30 s whole


# ----------------------------------------------------------------------------------------- defects, one by one

ARPA = Path(__file__).parent / "fixtures" / "lm" / "lmplz_tiny_order4.arpa"


@pytest.mark.parametrize("command", ["transcribe", "evaluate"])
@pytest.mark.parametrize("args, message", [
    (["--lm-weight", "nan", "--lm", "{arpa}"], "argument --lm-weight: weights must be finite numbers, got 'nan'"),
    (["--lm-weight", "0.5,inf", "--lm", "{arpa}"], "weights must be finite numbers, got '0.5,inf'"),
    (["--lm-token-bonus", "nan", "--lm", "{arpa}"], "argument --lm-token-bonus: must be a finite number, got 'nan'"),
    (["--lm-weight", "0.3"], "--lm-weight without --lm: there is no LM to weight"),
    (["--lm-token-bonus", "1", "--lm-blank-scoring"], "--lm-token-bonus, --lm-blank-scoring without --lm"),
])
def test_lm_options_must_be_finite_and_need_an_lm(workspace: Path, capsys, command: str, args: list[str],
                                                  message: str) -> None:
    target = workspace / ("audio" if command == "transcribe" else "m.jsonl")
    code, out, err = cli(capsys, command, target, *[a.format(arpa=ARPA) for a in args])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"transdec {command}: error: ") and message in err


def test_fusion_weights_must_be_finite() -> None:
    from transdec.decoding import Fusion

    for bad in (dict(weight=float("nan")), dict(weight=float("inf")), dict(weight=0.5, token_bonus=float("-inf"))):
        with pytest.raises(ValueError, match="must be a finite number"):
            Fusion(object(), **bad)


def test_damaged_compiled_lms_are_one_line_errors(workspace: Path, tmp_path: Path, capsys) -> None:
    from transdec.lm import NGramLM

    compiled = tmp_path / "lm.pt"
    NGramLM.load(ARPA, 256).save(compiled)
    truncated, junk = tmp_path / "truncated.pt", tmp_path / "junk.pt"
    truncated.write_bytes(compiled.read_bytes()[: compiled.stat().st_size // 2])
    junk.write_bytes(b"not an LM at all")
    for path in (truncated, junk):
        code, _, err = cli(capsys, "transcribe", workspace / "audio", "--lm", path)
        assert code == 2 and err.count("\n") == 1
        assert err.startswith(f"transdec transcribe: error: {path}: not a compiled transdec n-gram LM")


def test_ctc_greedy_without_a_ctc_head_is_refused_before_any_audio(capsys) -> None:
    nemo = Path(__file__).parent / "fixtures" / "nemo" / "fc_rnnt.nemo"
    code, out, err = cli(capsys, "transcribe", "no-such.wav", "--model", nemo, "--decoding", "ctc_greedy")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--decoding ctc_greedy needs a model with a CTC head" in err


def test_a_missing_optional_package_is_one_line(workspace: Path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "kaldi_native_fbank", None)  # as if not installed: importing it fails
    code, _, err = cli(capsys, "transcribe", workspace / "audio", "--front-end", "sherpa")
    assert code == 2 and err.count("\n") == 1 and "kaldi-native-fbank" in err and "transdec[sherpa]" in err


def test_export_onto_a_file_is_one_line(tmp_path: Path, capsys) -> None:
    pytest.importorskip("onnx")
    target = tmp_path / "model"
    target.write_text("a file, not a directory")
    code, _, err = cli(capsys, "export", "onnx", "tiny-en-rnnt", target)
    assert code == 2 and err.count("\n") == 1 and "exists and is not a directory" in err


def test_interrupt_while_starting_up_is_one_line(monkeypatch, capsys) -> None:
    import builtins

    from transdec import console

    real_import = builtins.__import__

    def interrupted_import(name, *args, **kwargs):
        if name == "transdec.cli":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted_import)
    assert console.main() == 130
    assert capsys.readouterr().err == "transdec: interrupted\n"


def test_item_errors_start_with_the_command_and_cannot_write_says_why(workspace: Path, capsys) -> None:
    code, _, err = cli(capsys, "transcribe", workspace / "text.wav", workspace / "audio", "--model",
                       workspace / "model.pt")
    assert code == 1 and all(line.startswith("transdec transcribe: ") for line in err.splitlines())
    if Path("/proc/version").is_file():
        code, _, err = cli(capsys, "transcribe", workspace / "audio", "--output", "/proc/version")
        assert code == 2 and "cannot create the temporary file /proc/version." in err


def test_load_model_messages_say_what_loads(tmp_path: Path) -> None:
    from transdec.loading import load_model

    with pytest.raises(ValueError, match="a directory without .onnx files; expected .* an ONNX export directory"):
        load_model(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="not a transdec model file .*, a .nemo checkpoint or an ONNX export"):
        load_model(tmp_path / "notes.txt")
    model = load_model("tiny-en-rnnt")
    with pytest.raises(ValueError, match="samples as large as 1e\\+300 .* refused beyond 16"):
        model.transcribe([np.full(1600, 1e300)])


def test_export_message_names_every_file(tmp_path: Path, capsys) -> None:
    pytest.importorskip("onnx")
    code, out, _ = cli(capsys, "export", "onnx", "tiny-en-rnnt", tmp_path / "export")
    assert code == 0 and out.rstrip().endswith("tokens.txt, tokenizer.model")


def test_sigterm_keeps_every_finished_result_and_resume_finishes_the_run(workspace: Path, tmp_path: Path) -> None:
    """A real run stopped by SIGTERM after some items: the finished ones are in OUTPUT.partial at once, nothing
    else is left behind, and --resume writes the output an uninterrupted run writes."""
    import signal
    import time

    clips = sorted((workspace / "audio").rglob("*.*"))
    manifest = tmp_path / "many.jsonl"
    manifest.write_text("".join(json.dumps({"audio_filepath": str(clips[i % 2])}) + "\n" for i in range(60)))
    model = str(workspace / "model.pt")
    expected = subprocess.run([sys.executable, "-m", "transdec", "transcribe", str(manifest), "--model", model,
                               "--format", "manifest"], capture_output=True, text=True, timeout=120).stdout
    out = tmp_path / "out.jsonl"
    args = [sys.executable, "-m", "transdec", "transcribe", str(manifest), "--model", model, "--format", "manifest",
            "--batch-size", "1", "--output", str(out)]
    process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:  # results reach the temporary file as they are done
        temps = list(tmp_path.glob("out.jsonl.*.tmp"))
        if temps and len(temps[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    err = process.communicate(timeout=60)[1]
    assert process.returncode == 130, err
    partial = (tmp_path / "out.jsonl.partial").read_text().splitlines()
    assert 3 <= len(partial) < 60 and f"{len(partial)} result(s) so far are in {out}.partial" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many.jsonl", "out.jsonl.partial"]
    resumed = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {len(partial)} item(s)" in resumed.stderr
    assert out.read_text() == expected  # in input order, as the uninterrupted run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many.jsonl", "out.jsonl"]


def test_a_resumed_run_writes_in_input_order_whatever_the_interruption_left(tmp_path: Path, capsys) -> None:
    """Results finish out of order (batches sorted by length, Ray's replicas); an interruption keeps every finished
    one, gaps and all, and the resumed run fills the gaps in place: the output is the uninterrupted run's."""
    from transdec.sources import AudioItem
    from transdec.transcribe import Transcript
    from transdec.transcribe_files import write_transcripts

    items = [AudioItem(tmp_path / f"clip{i}.wav") for i in range(10)] + [AudioItem(tmp_path / "clip3.wav")]
    finish_order = [2, 0, 7, 3, 1, 9, 10, 5]

    def interrupted(todo, progress):
        for position in finish_order:
            yield position, todo[position], Transcript(f"text of {todo[position].path.stem}")
        raise KeyboardInterrupt

    def rest(todo, progress):
        for position in reversed(range(len(todo))):
            yield position, todo[position], Transcript(f"text of {todo[position].path.stem}")

    out = tmp_path / "out.jsonl"
    assert write_transcripts(items, [], interrupted, "jsonl", str(out)) == 130
    partial = Path(f"{out}.partial").read_text().splitlines()
    assert [json.loads(line)["audio_filepath"][-9:-4] for line in partial] == [
        "clip0", "clip1", "clip2", "clip3", "clip5", "clip7", "clip9", "clip3"]
    assert write_transcripts(items, [], rest, "jsonl", str(out), resume=True) == 0
    assert [json.loads(line)["audio_filepath"] for line in out.read_text().splitlines()] == [
        str(item.path) for item in items]
    assert "resuming: 8 item(s)" in capsys.readouterr().err
