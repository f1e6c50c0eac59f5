"""Building n-gram LMs: the built-in Kneser-Ney estimator against lmplz's ARPA files, and `transdec lm build`."""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from transdec.cli import main
from transdec.lm import NGramLM, read_arpa
from transdec.lm.arpa import LN10, Arpa
from transdec.lm.kneser_ney import FALLBACK_DISCOUNT, DiscountError, discount_from_counts, estimate

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "lm"
LMPLZ = shutil.which("lmplz")
needs_lmplz = pytest.mark.skipif(LMPLZ is None, reason="lmplz is not on PATH (recipes/build_lmplz.sh builds it)")
TEXT = ["logic is a systematic method", "of coming to the wrong conclusion", "with confidence",
        "", "the wrong method is a method", "logic is logic"]


def token_sentences(path: Path) -> list[list[str]]:
    """A token corpus as lmplz reads it: lines split on "\\n", words on " " (token characters may be Unicode
    spaces, which str.split would take for separators)."""
    return [[w for w in line.split(" ") if w] for line in path.read_text(encoding="utf-8").split("\n") if line]


def assert_same_lm(ours: Path, reference: Path, tolerance: float = 1e-4) -> None:
    """Both ARPA files hold the same n-grams with the same log10 probabilities and backoffs."""
    mine, theirs = read_arpa(ours), read_arpa(reference)
    assert mine.order == theirs.order
    for n, (section, expected) in enumerate(zip(mine.ngrams, theirs.ngrams), 1):
        assert section.keys() == expected.keys(), f"the {n}-grams differ"
        for words, (logprob, backoff) in expected.items():
            got = section[words]
            assert abs(got[0] - logprob) / LN10 <= tolerance, (words, got, logprob)
            assert abs(got[1] - backoff) / LN10 <= tolerance, (words, got, backoff)


# ----- the estimator against lmplz -----

@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_every_ngram_matches_lmplz(order, tmp_path):
    lm = estimate(token_sentences(FIXTURES / "corpus.txt"), order, fallback=None)  # lmplz needed no fallback
    lm.write_arpa(tmp_path / "lm.arpa")
    assert_same_lm(tmp_path / "lm.arpa", FIXTURES / f"lmplz_order{order}.arpa")


def test_tiny_text_with_fallback_discounts_matches_lmplz(tmp_path):
    sentences = token_sentences(FIXTURES / "tiny.txt")
    lm = estimate(sentences, 4)
    # lmplz's printed discounts; orders 2 and 3 count one n-gram by its raw count (kneser_ney._count)
    assert lm.fallback_orders == [1] and lm.discounts[0] == FALLBACK_DISCOUNT
    for discount, expected in zip(lm.discounts[1:], [(0.814815, 1.51111, 3), (0.875, 1.125, 3),
                                                      (0.418182, 1.92159, 3)]):
        assert (discount.d1, discount.d2, discount.d3) == pytest.approx(expected, abs=1e-5)
    lm.write_arpa(tmp_path / "lm.arpa")
    assert_same_lm(tmp_path / "lm.arpa", FIXTURES / "lmplz_tiny_order4.arpa")
    with pytest.raises(DiscountError, match="1-grams with adjusted count"):
        estimate(sentences, 4, fallback=None)


def test_discounts_follow_chen_and_goodman():
    # Y = 10 / (10 + 2 * 5) = 0.5; Dj = j - (j + 1) Y n(j+1) / nj
    discount = discount_from_counts([10, 5, 4, 2], order=3)
    assert (discount.d1, discount.d2, discount.d3) == pytest.approx((0.5, 0.8, 2.0), abs=1e-6)
    with pytest.raises(DiscountError, match="no 2-grams with adjusted count 2"):
        discount_from_counts([3, 0, 1, 1], order=2)
    with pytest.raises(DiscountError, match="outside"):
        discount_from_counts([1, 1, 5, 0], order=1)  # D2 = 2 - 3 * (1/3) * 5 < 0


def test_written_lm_scores_like_kenlm(tmp_path):
    kenlm = pytest.importorskip("kenlm")
    sentences = token_sentences(FIXTURES / "corpus.txt")
    estimate(sentences, 4, fallback=None).write_arpa(tmp_path / "lm.arpa")
    reference = kenlm.Model(str(tmp_path / "lm.arpa"))
    arpa = read_arpa(tmp_path / "lm.arpa")
    words = sorted({w for s in sentences for w in s})
    rng = random.Random(0)
    # sentences from the corpus and random ones (unseen n-grams); kenlm splits on ASCII spaces only as well
    for sentence in [*sentences[:20], *([rng.choice(words) for _ in range(rng.randrange(1, 12))] for _ in range(20))]:
        expected = reference.score(" ".join(sentence), bos=True, eos=True)
        assert _sentence_log10(arpa, sentence) == pytest.approx(expected, abs=1e-4)


def _sentence_log10(arpa: Arpa, sentence: list[str]) -> float:
    """log10 p(sentence </s> | <s>) by the ARPA backoff rule (an independent reading of the file)."""
    history, total = ["<s>"], 0.0
    for word in [*sentence, "</s>"]:
        context = history[-(arpa.order - 1):] if arpa.order > 1 else []
        backoff = 0.0
        while True:
            words = (*context, word)
            if words in arpa.ngrams[len(words) - 1]:
                total += backoff + arpa.ngrams[len(words) - 1][words][0]
                break
            if context:
                backoff += arpa.ngrams[len(context) - 1].get(tuple(context), (0.0, 0.0))[1]
                context = context[1:]
            else:  # unseen word
                total += backoff + arpa.ngrams[0][("<unk>",)][0]
                break
        history.append(word)
    return total / LN10


@needs_lmplz
@pytest.mark.parametrize("seed", range(6))
def test_random_texts_match_lmplz_run_now(seed, tmp_path):
    rng = random.Random(seed)
    vocab = [chr(100 + i) for i in range(rng.choice([3, 8, 40]))]
    sentences = [[rng.choice(vocab) for _ in range(rng.randrange(0, 14))] for _ in range(rng.choice([5, 60, 400]))]
    order = [6, 1, 2, 3, 4, 5][seed]
    text = tmp_path / "text.txt"
    text.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    subprocess.run([LMPLZ, "-o", str(order), "-S", "100M", "--discount_fallback", "--text", str(text), "--arpa",
                    str(tmp_path / "lmplz.arpa")], check=True, capture_output=True)
    estimate(sentences, order).write_arpa(tmp_path / "ours.arpa")
    assert_same_lm(tmp_path / "ours.arpa", tmp_path / "lmplz.arpa")


def test_estimator_refuses_bad_input():
    with pytest.raises(ValueError, match="order must be 1 .. 6"):
        estimate([["a"]], 0)
    with pytest.raises(ValueError, match="order must be 1 .. 6"):
        estimate([["a"]], 7)
    with pytest.raises(ValueError, match="no sentences"):
        estimate([], 3)
    with pytest.raises(ValueError, match="reserved word '</s>'"):
        estimate([["a", "</s>"]], 3)


# ----- transdec lm build -----

@pytest.fixture(scope="module")
def tokenizer():
    from transdec.loading import load_model

    return load_model("tiny-en-rnnt").tokenizer


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("\n".join(TEXT) + "\n", encoding="utf-8")
    return path


def build(capsys, *arguments: str) -> tuple[int, str, str]:
    code = main(["lm", "build", "--model", "tiny-en-rnnt", *arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_builds_a_loadable_lm_with_the_builtin_estimator(capsys, text_file, tmp_path, tokenizer):
    arpa, compiled = tmp_path / "lm.arpa", tmp_path / "lm.pt"
    code, out, err = build(capsys, "--text", str(text_file), "--order", "3", "-o", str(arpa),
                           "--estimator", "builtin", "--compile", str(compiled))
    assert code == 0, err
    assert "5 sentences" in out and "built-in estimator" in out
    # the LM's words are the model's tokens of the text
    expected = {chr(t + 100) for line in TEXT for t in tokenizer.encode(line)}
    assert {w[0] for w in read_arpa(arpa).ngrams[0]} == expected | {"<s>", "</s>", "<unk>"}
    # it equals the estimator run on the tokenized text, and loads for the model, also compiled
    direct = tmp_path / "direct.arpa"
    estimate([[chr(t + 100) for t in tokenizer.encode(line)] for line in TEXT if line], 3).write_arpa(direct)
    assert_same_lm(arpa, direct, tolerance=1e-9)
    lm = NGramLM.load(arpa, tokenizer.vocab_size, dtype=torch.float64)
    fast = NGramLM.load(compiled, tokenizer.vocab_size, dtype=torch.float64)
    state = lm.initial_state(1, torch.device("cpu"))
    tokens = tokenizer.encode(TEXT[0])
    total = 0.0
    for token in tokens:
        total += float(lm.token_logprobs(state)[0, token])
        assert torch.equal(lm.token_logprobs(state), fast.token_logprobs(state))
        state = lm.advance(state, torch.tensor([token]))
    total += float(lm.end_logprobs(state)[0])
    by_the_file = _sentence_log10(read_arpa(arpa), [chr(t + 100) for t in tokens])
    assert total / math.log(10) == pytest.approx(by_the_file, abs=1e-6)


@needs_lmplz
def test_cli_with_lmplz_equals_the_builtin_estimator(capsys, text_file, tmp_path):
    code, out, err = build(capsys, "--text", str(text_file), "--order", "4", "-o", str(tmp_path / "lmplz.arpa"),
                           "--estimator", "lmplz", "--lmplz", LMPLZ)
    assert code == 0, err
    assert f"built with lmplz ({LMPLZ})" in out
    code, builtin, err = build(capsys, "--text", str(text_file), "--order", "4", "-o", str(tmp_path / "builtin.arpa"),
                               "--estimator", "builtin")
    assert code == 0, err
    assert_same_lm(tmp_path / "builtin.arpa", tmp_path / "lmplz.arpa")
    # five sentences: the 4-grams need the fallback discounts, and both say so
    assert out.splitlines()[1:] == builtin.splitlines()[1:] == ["orders [4]: too little text to estimate "
                                                                 "Kneser-Ney discounts; used the fallback discounts "
                                                                 "0.5, 1, 1.5"]


def test_auto_uses_lmplz_only_when_found(capsys, text_file, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    code, out, err = build(capsys, "--text", str(text_file), "-o", str(tmp_path / "lm.arpa"))
    assert code == 0, err
    assert "built-in estimator" in out
    code, _, err = build(capsys, "--text", str(text_file), "-o", str(tmp_path / "lm.arpa"), "--estimator", "lmplz")
    assert code == 2 and "no lmplz on PATH" in err and "recipes/build_lmplz.sh" in err


def test_order_1_lm_builds_and_compiles(capsys, text_file, tmp_path, tokenizer):
    arpa, compiled = tmp_path / "lm.arpa", tmp_path / "lm.pt"
    code, out, err = build(capsys, "--text", str(text_file), "--order", "1", "-o", str(arpa),
                           "--estimator", "builtin", "--compile", str(compiled))
    assert code == 0, err
    lm = NGramLM.load(arpa, tokenizer.vocab_size, dtype=torch.float64)
    fast = NGramLM.load(compiled, tokenizer.vocab_size, dtype=torch.float64)
    state = lm.initial_state(1, torch.device("cpu"))
    assert torch.equal(lm.token_logprobs(state), fast.token_logprobs(state))
    # a unigram LM: the next token's score does not depend on what came before
    token = tokenizer.encode(TEXT[0])[0]
    assert torch.equal(lm.token_logprobs(lm.advance(state, torch.tensor([token]))), lm.token_logprobs(state))
    unigrams = read_arpa(arpa).ngrams[0]
    assert float(lm.token_logprobs(state)[0, token]) == pytest.approx(unigrams[(chr(token + 100),)][0], abs=1e-9)


def test_cli_errors_are_one_line(capsys, text_file, tmp_path):
    out = str(tmp_path / "lm.arpa")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n", encoding="utf-8")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    not_executable = tmp_path / "lmplz"
    not_executable.write_text("")
    cases = [
        (["--text", str(blank), "-o", out], "no text to build an LM from"),
        (["--text", str(text_file), "-o", out, "--order", "0"], "--order 0: the order must be 1 .. 6"),
        (["--text", str(text_file), "-o", out, "--order", "7"], "--order 7: the order must be 1 .. 6"),
        (["--text", str(tmp_path / "missing.txt"), "-o", out], "missing.txt: cannot read the text"),
        (["--text", str(tmp_path), "-o", out], "is a directory, not a text file"),
        (["--text", str(latin1), "-o", out], "latin1.txt: not UTF-8 text (line 2"),
        (["--text", str(text_file), "-o", str(tmp_path / "no" / "lm.arpa")], "no such directory"),
        (["--text", str(text_file), "-o", out, "--lmplz", str(not_executable)], "not an executable file"),
    ]
    for arguments, message in cases:
        code, _, err = build(capsys, *arguments)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (arguments, err)
    assert not Path(out).exists() and not Path(out + ".partial").exists()
    if os.geteuid() != 0:  # root reads anything
        unreadable = tmp_path / "unreadable.txt"
        unreadable.write_text("a\n")
        unreadable.chmod(0)
        code, _, err = build(capsys, "--text", str(unreadable), "-o", out)
        assert code == 2 and "cannot read the text (Permission denied)" in err


def test_no_discount_fallback_is_an_error_on_tiny_text(capsys, text_file, tmp_path):
    code, _, err = build(capsys, "--text", str(text_file), "-o", str(tmp_path / "lm.arpa"), "--estimator", "builtin",
                         "--no-discount-fallback")
    assert code == 2 and "Kneser-Ney discount" in err and "fallback" in err


def test_a_failing_lmplz_is_reported_and_leaves_no_output(capsys, text_file, tmp_path):
    fake = tmp_path / "lmplz"
    fake.write_text("#!/bin/sh\necho 'Reading the text' >&2\necho 'ERROR: something is wrong' >&2\nexit 3\n")
    fake.chmod(0o755)
    out = tmp_path / "lm.arpa"
    code, _, err = build(capsys, "--text", str(text_file), "-o", str(out), "--lmplz", str(fake))
    assert code == 2 and "lmplz failed (exit status 3): Reading the text / ERROR: something is wrong" in err
    assert not out.exists() and not Path(str(out) + ".partial").exists()
