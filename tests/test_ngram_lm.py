"""The tensor n-gram LM against the kenlm module, its ARPA parser against corruptions, and fusion with it."""

import math
import random
from pathlib import Path

import pytest
import torch

from arpa_fixtures import random_arpa, word
from helpers import HEADS, LM_FIXTURES, LM_VOCAB, encoder_batch, fixed_shape_cases, model_for, same, with_backoffs
from transdec.lm import ArpaError, NGramLM, read_arpa

EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "espeak_logic.flac")


@pytest.fixture(params=[2, 3, 4, 6])
def arpa_file(request, tmp_path):
    path = tmp_path / f"lm{request.param}.arpa"
    path.write_text(random_arpa(LM_VOCAB, request.param, seed=request.param))
    return path


def test_sentence_scores_equal_kenlm(arpa_file):
    kenlm = pytest.importorskip("kenlm")
    reference = kenlm.Model(str(arpa_file))
    lm = NGramLM.load(arpa_file, LM_VOCAB, dtype=torch.float64)
    rng = random.Random(0)
    sentences = [[rng.randrange(LM_VOCAB) for _ in range(rng.randrange(0, 12))] for _ in range(60)]
    state = lm.initial_state(len(sentences), torch.device("cpu"))
    totals = torch.zeros(len(sentences), dtype=torch.float64)
    for position in range(max(len(s) for s in sentences)):
        active = torch.tensor([position < len(s) for s in sentences])
        tokens = torch.tensor([s[position] if position < len(s) else 0 for s in sentences])
        logprobs = lm.token_logprobs(state).gather(1, tokens.unsqueeze(1)).squeeze(1)
        totals += torch.where(active, logprobs, 0.0)
        state = lm.select_state(active, lm.advance(state, tokens), state)
    totals += lm.end_logprobs(state)
    for sentence, total in zip(sentences, totals.tolist()):
        text = " ".join(word(t) for t in sentence)  # tokens LM_VOCAB-2 and LM_VOCAB-1 are unseen: kenlm scores <unk>
        assert total / math.log(10) == pytest.approx(reference.score(text, bos=True, eos=True), abs=1e-4)


def test_every_token_distribution_from_every_state_matches_kenlm(arpa_file):
    kenlm = pytest.importorskip("kenlm")
    reference = kenlm.Model(str(arpa_file))
    lm = NGramLM.load(arpa_file, LM_VOCAB, dtype=torch.float64)
    rng = random.Random(1)
    for _ in range(20):
        history = [rng.randrange(LM_VOCAB) for _ in range(rng.randrange(0, 6))]
        state = lm.initial_state(1, torch.device("cpu"))
        for token in history:
            state = lm.advance(state, torch.tensor([token]))
        ours = lm.token_logprobs(state)[0] / math.log(10)
        prefix = " ".join(word(t) for t in history)
        base = reference.score(prefix, bos=True, eos=False)
        for token in range(LM_VOCAB):
            expected = reference.score(f"{prefix} {word(token)}".strip(), bos=True, eos=False) - base
            assert float(ours[token]) == pytest.approx(expected, abs=1e-4)


def test_compiled_form_is_identical(arpa_file, tmp_path):
    lm = NGramLM.load(arpa_file, LM_VOCAB)
    lm.save(tmp_path / "lm.pt")
    again = NGramLM.load(tmp_path / "lm.pt", LM_VOCAB)
    states = torch.arange(lm.backoff.shape[0])
    assert torch.equal(lm.all_logprobs(states), again.all_logprobs(states))
    with pytest.raises(ArpaError, match=f"for {LM_VOCAB} tokens, the model has 7"):
        NGramLM.load(tmp_path / "lm.pt", 7)


def lm_scores(lm: NGramLM, histories: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """log10 of each history's sentence score (with ``</s>``) and of every token after each history."""
    states = []
    for history in histories:
        state = lm.initial_state(1, torch.device("cpu"))
        total = torch.zeros(1, dtype=torch.float64)
        for token in history:
            total += lm.token_logprobs(state)[:, token]
            state = lm.advance(state, torch.tensor([token]))
        states.append((state, total + lm.end_logprobs(state)))
    state = torch.cat([s for s, _ in states])
    return torch.cat([t for _, t in states]) / math.log(10), lm.token_logprobs(state) / math.log(10)


def kenlm_scores(model, histories: list[list[int]], vocab_size: int) -> tuple[list[float], list[list[float]]]:
    """The same as :func:`lm_scores` from the kenlm module."""
    sentences, tokens = [], []
    for history in histories:
        prefix = " ".join(word(t) for t in history)
        sentences.append(model.score(prefix, bos=True, eos=True))
        base = model.score(prefix, bos=True, eos=False)
        tokens.append([model.score(f"{prefix} {word(t)}".strip(), bos=True, eos=False) - base
                       for t in range(vocab_size)])
    return sentences, tokens


def as_bigram_model(text: str) -> str:
    """An order-1 ARPA as the order-2 model that scores the same: every unigram with backoff 0 and a single bigram,
    ``<s> </s>``, with ``</s>``'s unigram probability (the kenlm module refuses order-1 models)."""
    lines, unigrams, end = [], False, None
    for line in text.split("\n"):
        fields = line.split("\t")
        if line.startswith("ngram 1="):
            line += "\nngram 2=1"
        elif line.startswith("\\1-grams:"):
            unigrams = True
        elif line.startswith("\\end\\"):
            lines += ["\\2-grams:", f"{end}\t<s> </s>", ""]
        elif unigrams and len(fields) == 2:
            end = fields[0] if fields[1] == "</s>" else end
            line += "\t0" if fields[1] != "</s>" else ""
        lines.append(line)
    return "\n".join(lines)


def test_order_1_lm_scores_equal_kenlm(tmp_path):
    # lmplz writes order-1 ARPAs (here over tiny-en-rnnt's 256 tokens); every state is the empty context.
    kenlm = pytest.importorskip("kenlm")
    path = LM_FIXTURES / "lmplz_order1.arpa"
    lm = NGramLM.load(path, 256, dtype=torch.float64)
    assert lm.order == 1 and lm.bos_state == 0
    reference = tmp_path / "order2.arpa"
    reference.write_text(as_bigram_model(path.read_text(encoding="utf-8")), encoding="utf-8")
    # kenlm's Python wrapper splits sentences at any whitespace, so tokens written as Unicode spaces (U+0085,
    # U+00A0) cannot be given to it one by one
    tokens_kenlm_reads = [t for t in range(256) if not word(t).isspace()]
    rng = random.Random(2)
    histories = [[rng.choice(tokens_kenlm_reads) for _ in range(rng.randrange(0, 8))] for _ in range(20)]
    sentences, tokens = lm_scores(lm, histories)
    want_sentences, want_tokens = kenlm_scores(kenlm.Model(str(reference)), histories, 256)
    assert sentences.tolist() == pytest.approx(want_sentences, abs=1e-4)
    for got, want in zip(tokens.tolist(), want_tokens):
        assert [got[t] for t in tokens_kenlm_reads] == pytest.approx([want[t] for t in tokens_kenlm_reads], abs=1e-4)


def test_order_1_compiled_form_is_identical(tmp_path):
    lm = NGramLM.load(LM_FIXTURES / "lmplz_order1.arpa", 256)
    lm.save(tmp_path / "lm.pt")
    again = NGramLM.load(tmp_path / "lm.pt", 256)
    assert lm.bos_state == again.bos_state == 0
    assert torch.equal(lm.token_logprobs(torch.zeros(1, dtype=torch.long)),
                       again.token_logprobs(torch.zeros(1, dtype=torch.long)))


@pytest.mark.parametrize("order", [2, 3, 4])
def test_minus_infinity_backoffs_score_as_kenlm_in_the_limit(order, tmp_path):
    # lmplz writes a backoff of -inf for a context whose discounts are all 0. The kenlm module refuses such a file
    # ("Bad backoff"), so the reference is kenlm on the same file with a finite backoff of -50 there: every score
    # that does not back off through such a context is kenlm's, every one that does is -inf (kenlm's, -50 or lower,
    # in the limit).
    kenlm = pytest.importorskip("kenlm")
    text = random_arpa(LM_VOCAB, order, seed=10 + order)
    infinite, finite = tmp_path / "inf.arpa", tmp_path / "finite.arpa"
    infinite.write_text(with_backoffs(text, "-inf"))
    finite.write_text(with_backoffs(text, "-50"))
    assert any(b == -math.inf for section in read_arpa(infinite).ngrams for _, b in section.values())
    lm = NGramLM.load(infinite, LM_VOCAB, dtype=torch.float64)
    rng = random.Random(order)
    histories = [[rng.randrange(LM_VOCAB) for _ in range(rng.randrange(0, 6))] for _ in range(40)]
    sentences, tokens = lm_scores(lm, histories)
    want_sentences, want_tokens = kenlm_scores(kenlm.Model(str(finite)), histories, LM_VOCAB)
    got, want = sentences.tolist() + tokens.flatten().tolist(), want_sentences + sum(want_tokens, [])
    assert all(g == -math.inf if w < -45 else g == pytest.approx(w, abs=1e-4) for g, w in zip(got, want))
    assert any(w < -45 for w in want) and any(w > -45 for w in want)
    again = tmp_path / "lm.pt"
    lm.save(again)
    states = torch.arange(lm.backoff.shape[0])
    assert torch.equal(lm.all_logprobs(states), NGramLM.load(again, LM_VOCAB, dtype=torch.float64).all_logprobs(states))


def test_searched_scores_equal_the_level_walk(tmp_path):
    # The fixed-shape resolution that CUDA graphs capture gives, in float64, exactly what the CPU's walk gives.
    from transdec.lm.ngram_kernels import token_logprobs_searched

    for name, lm in fixed_shape_cases(tmp_path):
        states = torch.arange(lm.backoff.shape[0]).repeat(2)
        assert torch.equal(token_logprobs_searched(lm, states), lm.token_logprobs(states)), name


LM_KERNEL_CHECK = """
import sys, pathlib, torch
from helpers import fixed_shape_cases
from transdec.lm import ngram_kernels
assert ngram_kernels.kernel_available(torch.device("cpu"))
folder = pathlib.Path(sys.argv[1])
generator = torch.Generator().manual_seed(0)
for case, (name, lm) in enumerate(fixed_shape_cases(folder)):
    # The interpreter runs program by program: a sample of states, always with the one with the most arcs.
    count = lm.backoff.shape[0]
    states = torch.cat([torch.randint(0, count, (6,), generator=generator), lm.arc_count.argmax().view(1)])
    for dtype, block in [(torch.float64, 8)] + ([(torch.float32, 256)] if case == 0 else []):
        typed = lm.to("cpu", dtype)
        got = ngram_kernels.token_logprobs_kernel(typed, states, block=block)
        expected = typed.all_logprobs(states).gather(1, typed.token_column.expand(len(states), -1))
        assert torch.equal(got, expected), (name, dtype, block)
print("ok")
"""


def test_scoring_kernel_equals_the_level_walk(tmp_path):
    """The Triton kernel of the GPU path, through Triton's interpreter (set before Triton's first import, hence a
    child process)."""
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys

    tests = os.path.dirname(__file__)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", LM_KERNEL_CHECK, str(tmp_path)], cwd=tests, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_positive_infinity_and_nan_are_still_errors(tmp_path):
    text = random_arpa(LM_VOCAB, 3, seed=3)
    for value in ("inf", "nan"):
        path = tmp_path / "bad.arpa"
        path.write_text(with_backoffs(text, value))
        with pytest.raises(ArpaError, match="backoffs below"):
            read_arpa(path)


def test_vocabulary_mismatch_is_an_error(arpa_file):
    with pytest.raises(ArpaError, match="not a token of a 5-token model"):
        NGramLM.load(arpa_file, 5)


CORRUPTIONS = {
    "count": (lambda lines: [l.replace("ngram 1=", "ngram 1=9") if l.startswith("ngram 1=") else l for l in lines],
              "announces"),
    "number": (lambda lines: [l.replace("-", "x", 1) if l.count("\t") and i == 8 else l for i, l in enumerate(lines)],
               "not a number"),
    "truncated": (lambda lines: lines[: len(lines) // 2], "announces|expected"),
    "no data": (lambda lines: lines[1:], "no \\\\data\\\\ section"),
    "no end": (lambda lines: lines[:-1], "expected \\\\end\\\\"),
    "words": (lambda lines: [l.replace("\t", "\t\u2603 ", 1) if l.count("\t") == 1 and i > 20 else l
                             for i, l in enumerate(lines)], "needs 2 words|needs 3 words|not a number"),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_malformed_files_name_the_line(name, tmp_path):
    corrupt, message = CORRUPTIONS[name]
    lines = random_arpa(LM_VOCAB, 3, seed=3).splitlines()
    path = tmp_path / "bad.arpa"
    path.write_text("\n".join(corrupt(lines)) + "\n")
    with pytest.raises(ArpaError, match=message) as error:
        read_arpa(path)
    assert str(path) in str(error.value)


def test_random_corruptions_raise_only_arpa_errors(tmp_path):
    rng = random.Random(5)
    text = random_arpa(LM_VOCAB, 3, seed=4)
    path = tmp_path / "fuzz.arpa"
    for _ in range(300):
        chars = list(text)
        for _ in range(rng.randrange(1, 4)):
            position = rng.randrange(len(chars))
            choice = rng.random()
            if choice < 0.4:
                del chars[position : position + rng.randrange(1, 30)]
            elif choice < 0.8:
                chars[position] = rng.choice("\t\n -0.9ex\\")
            else:
                chars.insert(position, rng.choice(["\n", "\t", "-inf", "nan", "\\2-grams:", "ngram 2=1\n"]))
        path.write_text("".join(chars))
        try:
            NGramLM.load(path, LM_VOCAB)
        except ArpaError:
            pass


def test_fused_decoders_agree_with_their_references(tmp_path):
    from transdec.decoding import Fusion, greedy_label_looping, greedy_reference
    from transdec.decoding.beam.alsd import beam_alsd
    from transdec.decoding.beam.alsd_pp import beam_alsd_pp

    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(HEADS["tdt"].num_tokens, 3, seed=7, missing_tokens=1))
    lm = NGramLM.load(path, HEADS["tdt"].num_tokens, dtype=torch.float64)
    fusions = [Fusion(lm, 0.6, token_bonus=0.2, blank_scoring=True)]
    model = model_for("tdt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([0, 9, 24, 13], seed=3)
    greedy = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3, window_size=4, fusions=fusions).hypotheses()
    assert all(same(a, b) for a, b in zip(greedy, greedy_reference(model, frames, lengths, max_symbols_per_frame=3, fusions=fusions).hypotheses()))
    batched = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=3, fusions=fusions).nbest
    single = beam_alsd(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=3, fusions=fusions).nbest
    for got, want in zip(batched, single):
        assert len(got) == len(want) and all(same(a, b) for a, b in zip(got, want))


def test_cli_takes_an_lm(tmp_path, capsys):
    from transdec.cli import main

    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(256, 3, seed=1, ngrams_per_order=500, missing_tokens=10))
    example = EXAMPLE
    assert main(["transcribe", example, "--lm", str(path), "--lm-weight", "0"]) == 0
    plain_text = capsys.readouterr().out
    assert main(["transcribe", example]) == 0 and capsys.readouterr().out == plain_text
    assert main(["transcribe", example, "--lm", str(path), "--lm-weight", "5", "--decoding", "beam_alsd_pp"]) == 0
    assert capsys.readouterr().out != plain_text
    assert main(["transcribe", example, "--lm", str(tmp_path / "missing.arpa")]) == 2
    assert "missing.arpa: no such LM file" in capsys.readouterr().err


def test_evaluate_sweeps_lm_weights(tmp_path, capsys):
    import json

    import soundfile

    from transdec.cli import main

    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(256, 3, seed=1, ngrams_per_order=500, missing_tokens=10))
    manifest = tmp_path / "m.jsonl"
    audio, rate = soundfile.read(EXAMPLE)
    manifest.write_text(json.dumps({"audio_filepath": EXAMPLE, "duration": len(audio) / rate,
                                    "text": "logic is a systematic method of coming to the wrong conclusion with "
                                            "confidence"}) + "\n")
    code = main(["evaluate", str(manifest), "--decoding", "greedy_label", "--lm", str(path), "--lm-weight", "0,4",
                 "--output-dir", str(tmp_path / "eval"), "--warmup", "0"])
    table = capsys.readouterr().out
    assert code == 0 and "| greedy_label+lm0 |" in table and "| greedy_label+lm4 |" in table
    assert (tmp_path / "eval" / "predictions_greedy_label+lm4.jsonl").is_file()
    assert main(["transcribe", EXAMPLE, "--lm", str(path), "--lm-weight", "0,4"]) == 2
    assert "transcribe takes one weight" in capsys.readouterr().err
