"""The corpus recipe: WordNet usage examples and definitions and GCIDE's quotations as new training sources, and
Piper audio fixed by the plan."""

from __future__ import annotations

import argparse
import gzip
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


GCIDE_ENTRIES = """\
Abhor \\Ab*hor"\\, v. t.
   1. To shrink back with shrinking; to loathe. "An abject liar." --Macaulay.
      [1913 Webster]

            It doth abhor me now I speak the word. --Shak.
      [1913 Webster]

            I utterly abhor, yea, from my soul
            Refuse you for my judge.              --Shak.
      [1913 Webster]

            That he might . . . abandon them from him. --Udall.

            Whan that Aprille with his shoures soote. --Chaucer.

            The C\u00e6sar of the north. --Anon.

            His (the pope's) commands. --Macaulay.
"""


def test_gcide_quotations_are_indented_quotes_in_modern_ascii_english(tmp_path: Path) -> None:
    path = tmp_path / "gcide.dict.dz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(GCIDE_ENTRIES)
    corpus = load_recipe()
    assert corpus.gcide_quotations(path) == ["It doth abhor me now I speak the word.",
                                             "I utterly abhor, yea, from my soul Refuse you for my judge.",
                                             "That he might abandon them from him."]


def test_missing_text_sources_name_the_debian_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = load_recipe()
    with pytest.raises(SystemExit, match="computers not found: install Debian's fortunes"):
        corpus.fortune_sentences(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit, match="install Debian's bible-kjv"):
        corpus.kjv_sentences()
    with pytest.raises(SystemExit, match="install Debian's dict-gcide"):
        corpus.gcide_quotations(tmp_path / "gcide.dict.dz")
    with pytest.raises(SystemExit, match="data.noun not found: install Debian's wordnet-base"):
        corpus.wordnet_sentences(tmp_path)


def test_new_texts_leave_out_sentences_sharing_five_words_with_held_out_ones() -> None:
    corpus = load_recipe()
    args = argparse.Namespace(seed=1, dev_per_mille=0, test_per_mille=0)
    held_out = corpus.word_ngrams("and it came to pass in those days")
    sentences = ["And it came to pass, that he went.", "And it came to the city.", "A new sentence here."]
    planned = corpus.plan_new_texts(args, "train_new", sentences, 2, taken=set(), held_out_ngrams=held_out)
    assert sorted({utt.text for utt in planned}) == ["a new sentence here", "and it came to the city"]
    assert [utt.voice for utt in planned] == ["espeak", "espeak", "piper", "piper"]


def test_fresh_test_split_takes_the_test_sentences_after_the_test_set(monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = load_recipe()
    words = ["alpha", "bravo", "delta", "echo", "golf", "hotel", "india", "kilo", "lima", "mike"]
    sentences = [f"The {a} and the {b} went {c}." for a in words for b in words for c in words]
    monkeypatch.setattr(corpus, "kjv_sentences", lambda: sentences)
    monkeypatch.setattr(corpus, "fortune_sentences", lambda: [])
    args = argparse.Namespace(seed=1, dev_per_mille=100, test_per_mille=300, train_espeak=10, train_piper=10,
                              dev_size=10, test_per_voice=20, test_fresh_per_voice=30, train_piper_extra=0,
                              train_wordnet=0, train_glosses=0, train_gcide=0)
    plans = corpus.plan_corpus(args)
    args.test_fresh_per_voice = 0
    assert {split: [vars(u) for u in plan] for split, plan in plans.items() if split != "test_fresh"} == {
        split: [vars(u) for u in plan] for split, plan in corpus.plan_corpus(args).items()}
    fresh, test = plans["test_fresh"], plans["test"]
    assert [u.voice for u in fresh] == ["espeak"] * 30 + ["piper"] * 30
    assert len({u.text for u in fresh}) == 60
    assert not {u.text for u in fresh} & {u.text for split in ("test", "dev", "train") for u in plans[split]}
    assert all(corpus.split_of(u.text, 100, 300) == "test" for u in fresh + test)
    args.test_fresh_per_voice = 10**6
    with pytest.raises(SystemExit, match="test_fresh: asked for"):
        corpus.plan_corpus(args)


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
