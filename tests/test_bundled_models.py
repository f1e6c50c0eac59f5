"""The bundled models on the bundled example recordings: the right text, and the same text when a long
recording is encoded in chunks. Skipped for a model that is not in this installation."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import transdec
from transdec.audio import load_audio
from transdec.long_audio import ChunkingConfig
from transdec.model.checkpoint import BUNDLED_MODELS, bundled_model_path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
EXPECTED = {
    "piper_are_you_making_this_up.flac": "are you making all this up as you go along",
    "piper_allens_axiom.flac": "allen's axiom when all else fails read the instructions",
}
#: The example the README's first command transcribes, which every bundled model gets right.
README_EXAMPLE = ("espeak_logic.flac", "logic is a systematic method of coming to the wrong conclusion with confidence")


@pytest.fixture(scope="module", params=BUNDLED_MODELS)
def model(request):
    try:
        bundled_model_path(request.param)
    except FileNotFoundError:
        pytest.skip(f"{request.param} is not in this installation")
    return transdec.load_model(request.param)


@pytest.fixture(scope="module")
def example_results(model):
    return model.transcribe([EXAMPLES / name for name in EXPECTED])


def test_examples_give_timed_words(example_results) -> None:
    for result in example_results:
        assert result.text and result.text.split() == [w.word for w in result.words]
        assert all(0 <= w.start < w.end <= result.duration + 0.08 and 0 < w.confidence <= 1 for w in result.words)


def test_readme_says_what_its_first_command_prints() -> None:
    """The README's first command, run as a user runs it: the README says what the default model prints and
    which text is right."""
    try:
        bundled_model_path("tiny-en-rnnt")
    except FileNotFoundError:
        pytest.skip("tiny-en-rnnt is not in this installation")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    example = re.search(r"transdec transcribe (examples/\S+)", readme).group(1)
    printed = subprocess.run([sys.executable, "-m", "transdec.cli", "transcribe", example], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.strip()
    said = " ".join(readme.split())  # the README wraps its lines
    assert f'It prints "{printed}"' in said
    assert (Path(example).name, printed) == README_EXAMPLE


def test_every_model_transcribes_the_readme_example_right(model) -> None:
    name, text = README_EXAMPLE
    assert model.transcribe([EXAMPLES / name])[0].text == text


# The bundled models are still weak (held-out WER 6.1-8.5%, docs/models.md): they get the examples wrong.
# Strict, so that a better model makes this fail until the mark is removed.
WEAK_MODELS = pytest.mark.xfail(strict=True, reason="bundled models still weak (docs/models.md)")


@WEAK_MODELS
def test_examples_are_transcribed_right(example_results) -> None:
    assert [r.text for r in example_results] == list(EXPECTED.values())


def test_long_recording_in_chunks_gives_the_unchunked_text(model) -> None:
    """About 45 s of speech: short enough to encode whole, long enough for several chunk edges. The bundled
    models use local attention, so with the default context (their receptive field) chunking is exact."""
    pause = np.zeros(model.sample_rate // 2, dtype=np.float32)
    clips = [load_audio(EXAMPLES / name, model.sample_rate) for name in EXPECTED]
    pieces = []
    while sum(len(p) for p in pieces) < 45 * model.sample_rate:
        for clip in clips:
            pieces += [clip, pause]
    recording = np.concatenate(pieces)
    whole = model.transcribe([recording], chunking=None)[0]
    # Default context: the receptive field of a local-attention encoder (exact up to rounding), else 5 s.
    for chunking in (ChunkingConfig(), ChunkingConfig(chunk_seconds=10.0), ChunkingConfig(chunk_seconds=4.0)):
        chunked = model.transcribe([recording], chunking=chunking)[0]
        assert chunked.text == whole.text
