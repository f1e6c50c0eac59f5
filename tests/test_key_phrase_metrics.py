"""Key-phrase precision, recall and F-score (NeMo's definition) and the word errors outside key phrases; the
context biasing evaluation set's text step (recipes/biasing_corpus.py), without audio."""

from __future__ import annotations

import importlib.util
import random
import re
import sys
from pathlib import Path

import pytest

from transdec.metrics import align_words, key_phrase_scores, key_phrase_word_errors, word_errors

RECIPES = Path(__file__).resolve().parent.parent / "recipes"

KEYS = ["tavela brakison", "morvandia", "zentrix", "vorlax commutator", "olen chublu klostaski"]
# (reference, hypothesis, (true positives, false positives, reference occurrences)) under KEYS
CASES = [
    ("we met tavela brakison in morvandia", "we met tavela brakison in morvandia", (2, 0, 2)),
    # a key phrase recognised as another one is a miss, not also a false positive (NeMo's one-word rule)
    ("she lives in morvandia", "she lives in zentrix", (0, 0, 1)),
    ("she lives in the city", "she lives in zentrix city", (0, 1, 0)),
    # a word inserted inside a reference phrase is ignored; a word deleted from it is a miss
    ("tavela brakison came", "tavela uh brakison came", (1, 0, 1)),
    ("tavela brakison came", "tavela came", (0, 0, 1)),
    ("tavela came home", "tavela brakison came home", (0, 1, 0)),
    ("zentrix zentrix", "zentrix", (1, 0, 2)),
    ("the vorlax commutator is broken", "the vorlax computer is broken", (0, 0, 1)),
    ("olen chublu klostaski is here", "olen chublu klostaski is here", (1, 0, 1)),
    ("ask olen chublu klostaski", "ask olen klostaski", (0, 0, 1)),
]
# NeMo 3.0.0's context_biasing.compute_fscore (what scripts/asr_context_biasing/compute_key_words_fscore.py
# prints) on all of CASES with KEYS, computed once in a NeMo environment: (precision, recall, F-score). Its
# denominators carry 1e-8 more.
NEMO_ALL_CASES = (0.7142857132653061, 0.49999999949999996, 0.5882352885813149)


def test_alignment_breaks_ties_as_kaldialign():
    """kaldialign 0.12's alignments of these pairs (checked in NeMo's environment, and on 20,000 random pairs)."""
    assert align_words("d a c e d d".split(), "d c e b".split()) == [
        ("d", "d"), ("a", None), ("c", "c"), ("e", "e"), ("d", "b"), ("d", None)]
    assert align_words("a b".split(), "b a".split()) == [("a", None), ("b", "b"), (None, "a")]
    assert align_words([], ["a"]) == [(None, "a")]
    assert align_words(["a"], []) == [("a", None)]


@pytest.mark.parametrize("reference, hypothesis, counts", CASES)
def test_key_phrase_counts_per_utterance(reference, hypothesis, counts):
    scores = key_phrase_scores([reference], [hypothesis], KEYS)
    assert (scores.true_positives, scores.false_positives, scores.reference_occurrences) == counts


def test_key_phrase_scores_match_nemo():
    references, hypotheses, _ = zip(*CASES)
    scores = key_phrase_scores(references, hypotheses, KEYS)
    assert (scores.true_positives, scores.false_positives, scores.reference_occurrences) == (5, 2, 10)
    assert scores.precision == pytest.approx(5 / 7) and scores.recall == pytest.approx(0.5)
    assert scores.fscore == pytest.approx(2 * (5 / 7) * 0.5 / (5 / 7 + 0.5))
    assert (scores.precision, scores.recall, scores.fscore) == pytest.approx(NEMO_ALL_CASES, abs=1e-7)
    per_phrase = {phrase: (c.true_positives, c.false_positives, c.reference_occurrences)
                  for phrase, c in scores.per_phrase.items()}
    assert per_phrase == {"tavela brakison": (2, 1, 3), "morvandia": (1, 0, 2), "zentrix": (1, 1, 2),
                          "vorlax commutator": (0, 0, 1), "olen chublu klostaski": (1, 0, 2)}


def test_key_phrases_are_lower_cased_and_deduplicated():
    scores = key_phrase_scores(["we met tavela brakison"], ["we met tavela brakison"],
                               ["Tavela  Brakison", "tavela brakison", ""])
    assert list(scores.per_phrase) == ["tavela brakison"]
    assert (scores.true_positives, scores.false_positives, scores.reference_occurrences) == (1, 0, 1)


def test_no_key_phrase_anywhere_scores_zero():
    scores = key_phrase_scores(["a b c"], ["a b d"], ["zentrix"])
    assert (scores.precision, scores.recall, scores.fscore) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        key_phrase_scores(["a"], [], ["zentrix"])


def test_word_errors_split_between_key_phrases_and_other_words():
    references = ["we met tavela brakison in morvandia", "she lives in the city", "she lives in the city"]
    hypotheses = ["we met tavela brick son in morvandia", "she lives in the zentrix city", "she lives in city"]
    key_phrases = [["tavela brakison", "morvandia"], [], ["zentrix"]]
    split = key_phrase_word_errors(references, hypotheses, key_phrases)
    # "brakison" -> "brick" is a key-phrase substitution, the inserted "son" an insertion among the other words
    key, other = split.key_phrase_words, split.other_words
    assert (key.substitutions, key.deletions, key.insertions, key.reference_words) == (1, 0, 0, 3)
    # "zentrix" is inserted where the second utterance has no key phrase: an other-word error there
    assert (other.substitutions, other.deletions, other.insertions, other.reference_words) == (0, 1, 2, 13)
    assert other.wer == pytest.approx(3 / 13)
    total = word_errors(references, hypotheses)
    assert (key.substitutions + key.deletions + key.insertions + other.substitutions + other.deletions
            + other.insertions) == total.substitutions + total.deletions + total.insertions
    assert key.reference_words + other.reference_words == total.reference_words
    # with the boosting list for every utterance, the spurious "zentrix" counts on the key-phrase side
    boost = [["tavela brakison", "morvandia", "zentrix"]] * 3
    split = key_phrase_word_errors(references, hypotheses, boost)
    assert (split.key_phrase_words.insertions, split.other_words.insertions) == (1, 1)
    with pytest.raises(ValueError):
        key_phrase_word_errors(references, hypotheses, key_phrases[:2])


# ------------------------------------------------------------------------------------------------ recipe


def load_recipe():
    spec = importlib.util.spec_from_file_location("biasing_corpus", RECIPES / "biasing_corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def small_vocabulary(recipe) -> set[str]:
    """The carriers' words, and 3,000 words of the kind the phrase maker makes (which it must then avoid)."""
    words = {word for template in recipe.ONE_SLOT + recipe.TWO_SLOTS for word in recipe.template_words(template)}
    rng, made = random.Random(7), set()
    while len(made) < 3000:
        if recipe.pronounceable(word := recipe.made_up_word(rng, rng.choice(list(recipe.ENDINGS)))):
            made.add(word)
    return words | made


def fake_rare(count: int = 400) -> list[str]:
    """Stand-ins for WordNet's rare technical words."""
    return [f"zqx{chr(97 + i // 26 % 26)}{chr(97 + i % 26)}ine" for i in range(count)]


def phrase_words(phrases) -> set[str]:
    return {word for phrase in phrases for word in phrase.text.split()}


def test_plan_keeps_phrases_out_of_the_vocabulary_and_the_splits_apart():
    recipe = load_recipe()
    vocabulary = small_vocabulary(recipe)
    plan = recipe.plan_biasing(vocabulary, fake_rare(), seed=1)
    by_split = {split: [p for p in plan.phrases if p.split == split] for split in ("dev", "test", "distractor")}
    assert len(by_split["distractor"]) == 600
    assert {len(utts) for utts in plan.utterances.values()} == {100, 300} and len(plan.utterances["dev"]) == 100
    words = {split: phrase_words(phrases) for split, phrases in by_split.items()}
    for split, split_words in words.items():
        assert not split_words & vocabulary, split
    assert not words["dev"] & words["test"] and not words["distractor"] & (words["dev"] | words["test"])
    assert sum(len(p.text.split()) for p in plan.phrases) == len(set().union(*words.values()))  # no word twice
    assert {p.kind for p in plan.phrases} == set(recipe.KINDS)
    assert all(1 <= len(p.text.split()) <= 3 for p in plan.phrases)
    for split, utts in plan.utterances.items():
        own = {p.text for p in by_split[split]}
        used = [phrase for utt in utts for phrase in utt["key_phrases"]]
        assert set(used) == own  # every key phrase of the split in some utterance of it, no other
        assert sum(utt["voice"] == "espeak" for utt in utts) == len(utts) // 2
        for utt in utts:
            assert 1 <= len(utt["key_phrases"]) <= 2 and len(set(utt["key_phrases"])) == len(utt["key_phrases"])
            text = f" {utt['text']} "
            assert all(f" {phrase} " in text for phrase in utt["key_phrases"])
            carrier = text
            for phrase in utt["key_phrases"]:
                carrier = carrier.replace(f" {phrase} ", " ", 1)
            assert set(carrier.split()) <= vocabulary
            assert not set(utt["text"].split()) & words["distractor"]
            assert utt["id"].startswith(f"{split}-{utt['voice']}-") and utt["split"] == split
    lists = recipe.phrase_lists(plan)
    assert len(lists["phrases.txt"]) == len(plan.phrases) == len(set(lists["phrases.txt"]))
    for split in ("dev", "test"):
        assert set(lists[f"{split}_phrases.txt"]) == {p.text for p in by_split[split] + by_split["distractor"]}


def test_plan_is_fixed_by_the_seed():
    recipe = load_recipe()
    vocabulary = small_vocabulary(recipe)
    first = recipe.plan_biasing(vocabulary, fake_rare(), seed=1)
    assert recipe.plan_biasing(vocabulary, fake_rare(), seed=1) == first
    other = recipe.plan_biasing(vocabulary, fake_rare(), seed=2)
    assert [p.text for p in other.phrases] != [p.text for p in first.phrases]


def test_carriers_must_use_the_training_words():
    recipe = load_recipe()
    vocabulary = small_vocabulary(recipe) - {"wedding"}
    with pytest.raises(SystemExit, match="wedding"):
        recipe.plan_biasing(vocabulary, fake_rare(), seed=1)


def test_made_up_words_are_pronounceable():
    recipe = load_recipe()
    rng = random.Random(0)
    words = [word for kind in recipe.ENDINGS for _ in range(300)
             if recipe.pronounceable(word := recipe.made_up_word(rng, kind))]
    assert len(words) > 600
    assert all(re.fullmatch(r"[a-z]{4,10}", w) for w in words)
    assert not recipe.pronounceable("strkan") and not recipe.pronounceable("baeo")


def test_rare_words_are_technical_wordnet_nouns_outside_the_vocabulary(tmp_path: Path):
    (tmp_path / "data.noun").write_text(
        '  1 This software and database is provided "AS IS" and WordNet makes no warranties\n'
        "03000001 06 n 02 clinometer 0 tachometer 0 | an instrument\n"
        "03000002 27 n 01 ribavirin 0 | an antiviral drug\n"
        "03000003 18 n 01 lapidarist 0 | a person\n"
        "03000004 06 n 02 Anemometer 0 wind_gauge 0 | a gauge\n")
    recipe = load_recipe()
    assert recipe.rare_words({"tachometer"}, tmp_path) == ["clinometer", "ribavirin"]


@pytest.mark.slow
def test_plan_with_the_real_training_text():
    """The words of the corpus sources (Debian's bible-kjv, fortunes, wordnet-base; ~10 s)."""
    recipe = load_recipe()
    try:
        vocabulary = recipe.training_vocabulary()
        rare = recipe.rare_words(vocabulary)
    except SystemExit as missing:
        pytest.skip(str(missing))
    plan = recipe.plan_biasing(vocabulary, rare, seed=1)
    assert not phrase_words(plan.phrases) & vocabulary
    assert {"wedding", "station", "abraham"} <= vocabulary


def test_text_files_are_not_silently_replaced(tmp_path: Path):
    recipe = load_recipe()
    recipe.write_if_same(tmp_path / "plan_dev.jsonl", "a\n")
    recipe.write_if_same(tmp_path / "plan_dev.jsonl", "a\n")
    with pytest.raises(SystemExit, match="other contents"):
        recipe.write_if_same(tmp_path / "plan_dev.jsonl", "b\n")
