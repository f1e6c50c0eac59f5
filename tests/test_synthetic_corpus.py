"""The corpus recipe: WordNet usage examples and definitions as new training sources, and Piper audio fixed by
the plan."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy
import pytest

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "synthetic_corpus.py"


def load_recipe():
    spec = importlib.util.spec_from_file_location("synthetic_corpus", RECIPE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


LICENCE_LINE = '  1 This software and database is provided "AS IS" and WordNet makes no warranties\n'


def write_wordnet(directory: Path, nouns: str, verbs: str) -> None:
    """WordNet's four data files, with these noun and verb lines after a licence line."""
    (directory / "data.noun").write_text(LICENCE_LINE + nouns)
    (directory / "data.verb").write_text(verbs)
    (directory / "data.adj").write_text("")
    (directory / "data.adv").write_text("")


def test_wordnet_sentences_are_the_quoted_examples_outside_the_licence(tmp_path: Path) -> None:
    write_wordnet(
        tmp_path,
        '00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived; "an entity exists"\n'
        '00002137 03 n 02 abstraction 0 | a general concept; "the abstraction of the idea"; "think it over"\n',
        '00001 v | to breathe; "I can breathe better when the air is clean"\n')
    corpus = load_recipe()
    assert corpus.wordnet_sentences(tmp_path) == [
        "an entity exists", "the abstraction of the idea", "think it over",
        "I can breathe better when the air is clean"]


def test_wordnet_glosses_are_first_clauses_without_quotes_or_parentheses(tmp_path: Path) -> None:
    write_wordnet(
        tmp_path,
        '00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived; "an entity exists"\n'
        '00002137 03 n 02 Strauss 0 | German composer (1864-1949)\n'
        '00002138 03 n 02 saying 0 | "as the saying goes"\n',
        "00001 v | draw air into, and expel out of, the lungs; take a breath\n")
    corpus = load_recipe()
    assert corpus.wordnet_glosses(tmp_path) == ["that which is perceived",
                                                "draw air into, and expel out of, the lungs"]


def test_piper_audio_depends_only_on_the_plan() -> None:
    """The Piper voice's noise comes from the plan's seed, not from ONNX Runtime's per-session generator, so
    an utterance sounds the same whatever was synthesised before it in the same process (needs the recipes
    extra; skipped without it)."""
    pytest.importorskip("piper")
    pytest.importorskip("onnx")
    corpus = load_recipe()
    plan = {"voice": "piper", "tts_text": "Are you making all this up?", "length_scale": 1.0, "noise_scale": 0.667,
            "noise_w_scale": 0.8, "gain_db": 0.0, "snr_db": None, "seed": 7}
    other = dict(plan, tts_text="Something else first, to move any generator on.", seed=8)
    first = corpus.synthesise(plan)
    corpus.synthesise(other)
    again = corpus.synthesise(plan)
    assert numpy.array_equal(first, again)
    assert not numpy.array_equal(first, corpus.synthesise(dict(plan, seed=9)))
