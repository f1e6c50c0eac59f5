"""The measuring scripts behind docs/ (recipes/*.py that score models, bench/*.py that read manifests) run end to end
on a tiny model and corpus: their figures are only checked by eye, so at least they must not break."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from test_model_and_training import HEADS, TEXTS, tiny_config, write_corpus
from transdec.model.checkpoint import save_model
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import TransducerModel

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def corpus_and_model(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("scripts")
    manifest = write_corpus(folder / "data", 4)
    model = TransducerModel(tiny_config(HEADS[0]), Tokenizer.train(TEXTS * 3, HEADS[0].num_tokens))
    save_model(model, folder / "tiny.pt")
    return manifest, folder / "tiny.pt"


SCRIPTS = {
    "model_report": ["recipes/model_report.py", "--models", "{model}", "--speed-utterances", "2", "--repeats", "1"],
    "long_form_wer": ["recipes/long_form_wer.py", "--models", "{model}", "--seconds", "2.5", "--recordings", "2"],
    "wind": ["bench/wind.py", "--models", "{model}", "--utterances", "2", "--windows", "1,2", "--batch-sizes", "2",
             "--repeats", "1", "--no-synthetic"],
    "train_step": ["bench/train_step.py", "--steps", "1", "--vocab-size", "24", "--layers", "1", "--threads", "1",
                   "--batch-seconds", "3"],
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_runs_on_a_tiny_model(corpus_and_model: tuple[Path, Path], name: str) -> None:
    manifest, model = corpus_and_model
    command = [sys.executable, *(arg.format(model=model) for arg in SCRIPTS[name]), "--manifest", str(manifest)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "|" in result.stdout  # a table was printed
