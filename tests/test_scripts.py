"""The measuring scripts behind docs/ (recipes/*.py that score models, bench/*.py that read manifests) run end to end
on a tiny model and corpus: their figures are only checked by eye, so at least they must not break. The training
recipe (recipes/train_bundled.sh) lists every stage's commands, and `transdec` accepts them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import transdec
from helpers import TEXTS, TRAINING_HEADS, tiny_config, write_corpus
from transdec import cli
from transdec.loading import load_model
from transdec.model.checkpoint import save_model
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import TransducerModel

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def corpus_and_model(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("scripts")
    manifest = write_corpus(folder / "data", 4)
    model = TransducerModel(tiny_config(TRAINING_HEADS[0]), Tokenizer.train(TEXTS * 3, TRAINING_HEADS[0].num_tokens))
    save_model(model, folder / "tiny.pt")
    return manifest, folder / "tiny.pt"


SCRIPTS = {
    "model_report": ["recipes/model_report.py", "--models", "{model}", "--speed-utterances", "2", "--repeats", "1"],
    "long_form_wer": ["recipes/long_form_wer.py", "--models", "{model}", "--seconds", "2.5", "--recordings", "2"],
    "wind": ["bench/wind.py", "--models", "{model}", "--utterances", "2", "--windows", "1,2", "--batch-sizes", "2",
             "--repeats", "1", "--no-synthetic"],
    "wind_costs": ["bench/wind_costs.py", "--model", "{model}", "--utterances", "2", "--repeats", "1"],
    "train_step": ["bench/train_step.py", "--steps", "1", "--vocab-size", "24", "--layers", "1", "--threads", "1",
                   "--batch-seconds", "3", "--precisions", "float32", "bf16"],
}


def run_script(*args: str | Path) -> subprocess.CompletedProcess:
    """Runs ``python ARGS...`` from the repository root."""
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_runs_on_a_tiny_model(corpus_and_model: tuple[Path, Path], name: str) -> None:
    manifest, model = corpus_and_model
    result = run_script(*(arg.format(model=model) for arg in SCRIPTS[name]), "--manifest", manifest)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "|" in result.stdout  # a table was printed


def test_encoder_lengths_bench_runs_on_a_cpu(corpus_and_model) -> None:
    _, model = corpus_and_model
    result = run_script("bench/encoder_lengths.py", "--model", model, "--device", "cpu", "--batch", "2",
                        "--seconds", "3.2", "--repeats", "1", "--warmup", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    for policy in ("none", "pad", "no_cudnn", "pad_no_cudnn"):
        assert result.stdout.count(f"| {policy} |") == 2  # a row in both tables


def test_set_attention_context_changes_only_the_attention_context(corpus_and_model, tmp_path: Path) -> None:
    _, model = corpus_and_model
    output = tmp_path / "local.pt"
    result = run_script("recipes/set_attention_context.py", model, output, "--frames", "4")
    assert result.returncode == 0, result.stderr[-3000:]
    local, original = load_model(output), load_model(model)
    assert local.config.encoder.attention_context == 4 and local.encoder.receptive_field == 1 * (4 + 3 // 2) + 1
    assert original.encoder.receptive_field is None
    assert all(torch.equal(a, b) for a, b in zip(local.state_dict().values(), original.state_dict().values()))


def test_grow_encoder_inserts_blocks_that_keep_the_function(corpus_and_model, tmp_path: Path) -> None:
    _, model = corpus_and_model
    output = tmp_path / "grown.pt"
    result = run_script("recipes/grow_encoder.py", model, output, "--after", "0")
    assert result.returncode == 0, result.stderr[-3000:]
    grown, original = load_model(output).double().eval(), load_model(model).double().eval()
    assert len(grown.encoder.blocks) == len(original.encoder.blocks) + 1
    torch.manual_seed(1)
    features, lengths = torch.randn(2, 90, original.config.encoder.feature_dim, dtype=torch.float64), torch.tensor([90, 41])
    with torch.no_grad():
        torch.testing.assert_close(grown.encoder(features, lengths)[0], original.encoder(features, lengths)[0],
                                   atol=1e-3, rtol=0)  # the layer norms' epsilon: up to ~1e-4 seen
    new_block = grown.encoder.blocks[1]
    assert not torch.equal(new_block.ff1.net[1].weight, torch.zeros_like(new_block.ff1.net[1].weight))
    assert torch.equal(new_block.attention.out.weight, torch.zeros_like(new_block.attention.out.weight))
    grown_weights = grown.state_dict()
    assert all(torch.equal(grown_weights[name], weight) for name, weight in original.state_dict().items()
               if ".blocks." not in name)
    again = tmp_path / "again.pt"
    assert run_script("recipes/grow_encoder.py", model, again, "--after", "0").returncode == 0
    first, second = load_model(output).state_dict(), load_model(again).state_dict()
    assert all(torch.equal(weight, second[name]) for name, weight in first.items())  # seeded: reproducible

    bad = run_script("recipes/grow_encoder.py", model, tmp_path / "x.pt", "--after", "5")
    assert bad.returncode != 0 and "--after must name distinct blocks among 0..0" in bad.stderr


def test_mix_manifest_balances_voices_reproducibly(tmp_path: Path) -> None:
    for name, voices in {"a": ["piper", "espeak", "espeak"], "b": ["espeak"] * 40 + ["piper"]}.items():
        (tmp_path / f"{name}.jsonl").write_text("".join(
            json.dumps({"audio_filepath": f"{name}{i}.wav", "duration": 1.0, "text": "x", "voice": voice}) + "\n"
            for i, voice in enumerate(voices)))

    def mix(output: str, seed: int) -> list[str]:
        result = run_script("recipes/mix_manifest.py", tmp_path / output, "--data", tmp_path, "--splits", "a", "b",
                            "--piper-copies", "a=3", "--espeak-share", "0.5", "--espeak-whole", "a",
                            "--seed", seed)
        assert result.returncode == 0, result.stderr[-3000:]
        return [json.loads(line)["audio_filepath"].removesuffix(".wav") for line in open(tmp_path / output)]

    rows = mix("one.jsonl", 7)
    assert rows[:5] == ["a0", "a0", "a0", "a1", "a2"] and rows[-1] == "b40"  # Piper x3 in a, x1 (default) in b
    assert 5 < len(rows) - 6 < 35  # about half of b's 40 espeak-ng rows
    assert mix("two.jsonl", 7) == rows and mix("three.jsonl", 8) != rows


def test_mix_manifest_lists_rows_once_per_rare_word(tmp_path: Path) -> None:
    texts = ["the cat", "the cat", "the cat", "the dog", "a dog and an owl", "the the"]
    voices = ["espeak", "espeak", "espeak", "piper", "espeak", "espeak"]
    (tmp_path / "a.jsonl").write_text("".join(
        json.dumps({"audio_filepath": f"a{i}.wav", "duration": 1.0, "text": text, "voice": voice}) + "\n"
        for i, (text, voice) in enumerate(zip(texts, voices))))
    result = run_script("recipes/mix_manifest.py", tmp_path / "mix.jsonl", "--data", tmp_path, "--splits", "a",
                        "--piper-copies", "a=2", "--rare-below", "3", "--rare-max-copies", "3")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line)["audio_filepath"].removesuffix(".wav") for line in open(tmp_path / "mix.jsonl")]
    # read < 3 times: dog (2), a, and, an, owl (1); "cat" (3) and "the" (6) are not rare
    assert rows == ["a3"] * 2 + ["a4"] * 3  # Piper x2 times one rare word; four rare words, at most 3 copies


def test_error_profile_counts_wrong_words_by_training_count(tmp_path: Path) -> None:
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in ["the cat"] * 12))
    predictions = [("test-espeak-000000", "espeak", "the cat sat", "the cat set"),
                   ("test-piper-000001", "piper", "the cat", "the cap cat")]
    (tmp_path / "pred.jsonl").write_text("".join(
        json.dumps({"audio_filepath": f"audio/{uid}.flac", "voice": voice, "text": ref, "pred_text": hyp}) + "\n"
        for uid, voice, ref, hyp in predictions))
    (tmp_path / "plan.jsonl").write_text("".join(
        json.dumps({"id": uid, "espeak_voice": "en-gb+m3" if voice == "espeak" else ""}) + "\n"
        for uid, voice, _, _ in predictions))
    result = run_script("recipes/error_profile.py", tmp_path / "pred.jsonl", "--train", tmp_path / "train.jsonl",
                        "--plan", tmp_path / "plan.jsonl")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "espeak: 1 errors in 3 words, WER 33.33%; 0 insertions" in lines
    assert "piper: 1 errors in 2 words, WER 50.00%; 1 insertions" in lines
    assert any(line.startswith("| read in training 0 | 1 | 33.3% | 1 | 100.0%") for line in lines)  # "sat"
    assert any(line.startswith("| en-gb | 3 | 100.0% | 1 |") for line in lines)


def test_average_models_averages_files_of_one_shape(corpus_and_model, tmp_path: Path) -> None:
    _, model = corpus_and_model
    original = load_model(model)
    other = load_model(model)
    with torch.no_grad():
        for weight in other.parameters():
            weight.add_(1.0)
    save_model(other, tmp_path / "other.pt")
    result = run_script("recipes/average_models.py", model, tmp_path / "other.pt", "--output", tmp_path / "soup.pt")
    assert result.returncode == 0, result.stderr[-3000:]
    soup = load_model(tmp_path / "soup.pt").state_dict()
    for name, weight in original.named_parameters():
        torch.testing.assert_close(soup[name].float(), weight + 0.5, atol=1e-3, rtol=1e-3)  # stored as float16

    tdt = TransducerModel(tiny_config(TRAINING_HEADS[1]), original.tokenizer)
    save_model(tdt, tmp_path / "tdt.pt")
    bad = run_script("recipes/average_models.py", model, tmp_path / "tdt.pt", "--output", tmp_path / "x.pt")
    assert bad.returncode != 0 and "is not shaped like" in bad.stderr


def test_paired_wer_counts_utterances_each_model_gets_better(tmp_path: Path) -> None:
    rows = [("the cat sat", "the cat sat", "the cat sat", "espeak"),  # a tie
            ("a dog ran off", "a dog ran of", "a dog ran off", "espeak"),  # B better by one word
            ("one two three", "one two three", "one too three", "piper"),  # B worse by one word
            ("red green blue", "red green", "red green blu", "piper")]  # one error each
    for name, column in (("a", 1), ("b", 2)):
        (tmp_path / f"{name}.jsonl").write_text("".join(
            json.dumps({"audio_filepath": f"{i}.wav", "text": row[0], "pred_text": row[column], "voice": row[3]})
            + "\n" for i, row in enumerate(rows)))
    result = run_script("recipes/paired_wer.py", tmp_path / "a.jsonl", tmp_path / "b.jsonl", "--resamples", "200")
    assert result.returncode == 0, result.stderr[-3000:]
    table = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
             for line in result.stdout.splitlines()[2:]}
    assert table["all: 4"][:7] == ["13", "2", "2", "15.38%", "15.38%", "1", "1"]
    assert table["all: 4"][7] == "1.000"
    assert table["espeak: 2"][:7] == ["7", "1", "0", "14.29%", "0.00%", "1", "0"]

    (tmp_path / "c.jsonl").write_text((tmp_path / "a.jsonl").read_text().replace("0.wav", "9.wav"))
    bad = run_script("recipes/paired_wer.py", tmp_path / "a.jsonl", tmp_path / "c.jsonl")
    assert bad.returncode != 0 and "not predictions for the same utterances" in bad.stderr


RECIPE_SETTINGS = ("PY", "TRANSDEC", "TRAIN_OPTIONS", "RNNT_MIN", "TDT_MIN", "MB_MIN", "FT_MIN", "FT_PEAK")


def recipe_dry_run(tmp_path: Path, *options: str) -> list[str]:
    """The lines ``recipes/train_bundled.sh --dry-run OPTIONS`` prints, with its data and runs under ``tmp_path``
    and its default settings."""
    env = {name: value for name, value in os.environ.items() if name not in RECIPE_SETTINGS}
    result = subprocess.run(["bash", "recipes/train_bundled.sh", "--dry-run", "--data", str(tmp_path / "data"),
                             "--exp", str(tmp_path / "exp"), *options], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def recipe_commands(lines: list[str]) -> list[list[str]]:
    """The commands of a dry run (``+ COMMAND [> FILE]``), each without its output redirection."""
    commands = [shlex.split(line[2:]) for line in lines if line.startswith("+ ")]
    return [command[:command.index(">")] if ">" in command else command for command in commands]


def option(command: list[str], name: str) -> str | None:
    """The value of the last ``name`` in ``command`` (a later option overrides an earlier one), else None."""
    values = [command[i + 1] for i, word in enumerate(command[:-1]) if word == name]
    return values[-1] if values else None


def test_training_recipe_lists_every_stage_and_writes_nothing(tmp_path: Path) -> None:
    lines = recipe_dry_run(tmp_path)
    assert [line.split(":")[0] for line in lines if line.startswith("== ")] == [f"== stage {n}" for n in range(8)]
    commands = recipe_commands(lines)
    scripts = {command[1] for command in commands if command[1].startswith("recipes/")}
    assert scripts == {"recipes/synthetic_corpus.py", "recipes/mix_manifest.py", "recipes/grow_encoder.py",
                       "recipes/model_report.py", "recipes/long_form_wer.py"}
    assert all((ROOT / script).is_file() for script in scripts)
    assert [option(command, "--exp-dir") for command in commands if command[1] == "train"] == [
        str(tmp_path / "exp" / run) for run in ("rnnt-6", "tdt-6", "multiblank-6", "rnnt-8", "multiblank-8")]
    assert not (tmp_path / "data").exists() and not (tmp_path / "exp").exists()


def test_training_recipe_trains_the_bundled_shapes(tmp_path: Path) -> None:
    commands = recipe_commands(recipe_dry_run(tmp_path))
    runs = {option(command, "--exp-dir"): command for command in commands if command[1] == "train"}
    finals = {Path(option(command, "--output")).stem: option(command, "--exp-dir") for command in commands
              if command[1] == "average" and "--half" in command}
    assert sorted(finals) == sorted(["tiny-en-rnnt", "tiny-en-tdt", "tiny-en-multiblank"])
    for name, run in finals.items():
        config, train = transdec.load_model(name).config, runs[run]
        assert option(train, "--head") == config.head.kind
        assert int(option(train, "--vocab-size")) == config.head.num_tokens
        assert int(option(train, "--layers")) == config.encoder.num_layers
        assert int(option(train, "--attention-context")) == config.encoder.attention_context
        assert option(train, "--predictor") == config.predictor.kind
        assert int(option(train, "--predictor-hidden")) == config.predictor.hidden_size
        assert int(option(train, "--joint-dim")) == config.joint_dim
        assert float(option(train, "--dropout")) == config.encoder.dropout


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_transdec_accepts_the_training_recipe_commands(tmp_path: Path, device: str, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TRANSDEC_GLIBC_MALLOC", "default")  # leave this process's allocator as it is
    commands = recipe_commands(recipe_dry_run(tmp_path, "--device", device))
    transdec_commands = [command[1:] for command in commands if command[0].endswith("transdec")]
    assert len(transdec_commands) == 5 + 5 + 3  # each run trained and averaged, then the three model files
    for argv in transdec_commands:
        try:
            cli.main(argv)  # parses, then stops at the missing manifest or checkpoints (or the missing GPU)
        except (SystemExit, FileNotFoundError):
            pass
        assert "usage:" not in capsys.readouterr().err, argv  # argparse accepted every option
        if argv[0] == "train":
            assert (option(argv, "--device") or "cpu") == device and ("--bf16" in argv) == (device == "cuda")


def test_training_recipe_stages_and_skips(tmp_path: Path) -> None:
    lines = recipe_dry_run(tmp_path, "--stage", "3", "--stop-stage", "4")
    assert [line for line in lines if line.startswith("== ")] == [
        "== stage 3: tokenizer and RNN-T from scratch", "== stage 4: TDT and multi-blank from the RNN-T"]
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "rnnt-6.pt").write_text("a finished run")
    lines = recipe_dry_run(tmp_path, "--stage", "3", "--stop-stage", "4")
    assert f"# {tmp_path / 'exp' / 'rnnt-6.pt'} exists: skipped" in lines
    assert [option(command, "--exp-dir") for command in recipe_commands(lines) if command[1] == "train"] == [
        str(tmp_path / "exp" / "tdt-6"), str(tmp_path / "exp" / "multiblank-6")]
    bad = subprocess.run(["bash", "recipes/train_bundled.sh", "--device", "tpu"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--device must be cpu or cuda" in bad.stderr
