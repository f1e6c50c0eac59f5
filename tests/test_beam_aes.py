"""AES++ (batched adaptive expansion search, every head): brute force, greedy at beam 1, batch invariance, fusion."""

import collections
import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from brute_force import all_paths
from helpers import HEADS, PREDICTORS, TINY_HEADS, BigramScorer, encoder_batch, model_for, same, tiny_problem
from transdec.decoding import DecodingConfig, Fusion, greedy_label_looping
from transdec.decoding.beam.aes_pp import beam_aes_pp
from transdec.model.synthetic import random_decoder

WIDE = dict(beam_size=256, expansion_beta=8, expansion_gamma=math.inf)


def aes_paths(model, frames, steps):
    """Every path AES++ can take: at most ``steps`` tokens that stay at a frame, each frame left by a scored
    emission (a blank, or a TDT token with a duration)."""
    paths = all_paths(model, frames, max_symbols_per_frame=steps + 1)
    staying = lambda p: collections.Counter(t for t, d in zip(p.timestamps, p.durations) if d == 0)  # noqa: E731
    return [p for p in paths if max(staying(p).values(), default=0) <= steps]


def logsumexp(values):
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


@pytest.mark.parametrize("kind, predictor", list(itertools.product(TINY_HEADS, PREDICTORS)))
@pytest.mark.parametrize("steps", [1, 2])
def test_a_wide_search_finds_the_optimum(kind, predictor, steps):
    model, frames, lengths = tiny_problem(kind, predictor, seed=3)
    if kind == "tdt":  # a million paths at four frames
        lengths = lengths.clamp(max=3)
    for b, length in enumerate(lengths.tolist()):
        one = (frames[b : b + 1, :length], lengths[b : b + 1])
        paths = aes_paths(model, frames[b, :length], steps)
        best = max(paths, key=lambda p: p.score)
        grouped = collections.defaultdict(list)
        for path in paths:
            grouped[path.tokens].append(path.score)
        summed = {tokens: logsumexp(scores) for tokens, scores in grouped.items()}
        top = max(summed, key=summed.get)
        found = beam_aes_pp(model, *one, None, num_steps=steps, **WIDE).hypotheses()[0]
        assert (tuple(found.tokens), tuple(found.timestamps), tuple(found.durations)) == (
            best.tokens, best.timestamps, best.durations)
        assert found.score == pytest.approx(best.score, abs=1e-9)
        found = beam_aes_pp(model, *one, None, num_steps=steps, merge="logsumexp", **WIDE).hypotheses()[0]
        assert tuple(found.tokens) == top and found.score == pytest.approx(summed[top], abs=1e-9)
        for beam in (1, 2):
            narrow = beam_aes_pp(model, *one, None, num_steps=steps, beam_size=beam).hypotheses()[0]
            assert narrow.score <= best.score + 1e-12
        fusions = [Fusion(BigramScorer(model.head.num_tokens, seed=3), 0.6)]
        late = beam_aes_pp(model, *one, None, num_steps=steps, fusions=fusions, **WIDE).hypotheses()[0]
        early = beam_aes_pp(model, *one, None, num_steps=steps, fusions=fusions, pruning="early",
                            **WIDE).hypotheses()[0]
        assert same(early, late)


@pytest.mark.parametrize("predictor", ["lstm", "stateless"])
def test_beam_one_takes_greedy_path(predictor):
    """One hypothesis and one candidate per step is greedy decoding with ``num_steps`` symbols per frame; only the
    score differs where a frame fills up (AES++ leaves it by a scored blank, greedy moves on for free)."""
    model = model_for("rnnt", predictor, "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7], seed=1)
    greedy = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=2).hypotheses()
    beam = beam_aes_pp(model, frames, lengths, max_symbols_per_frame=None, beam_size=1, expansion_beta=0, num_steps=2).hypotheses()
    for got, want in zip(beam, greedy):
        assert (got.tokens, got.timestamps, got.token_logprobs) == (want.tokens, want.timestamps,
                                                                    pytest.approx(want.token_logprobs))


@pytest.mark.parametrize("kind, predictor", list(itertools.product(HEADS, PREDICTORS)))
def test_beam_one_is_greedy_where_no_frame_fills_up(kind, predictor):
    """Where greedy decoding never reaches its limit of tokens at a frame, beam 1 with as many steps is greedy
    decoding exactly, score included."""
    model = model_for(kind, predictor, "blank_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7, 18], seed=1)
    greedy = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=6).hypotheses()
    beam = beam_aes_pp(model, frames, lengths, max_symbols_per_frame=None, beam_size=1, expansion_beta=0, num_steps=6).hypotheses()
    compared = 0
    for got, want in zip(beam, greedy):
        staying = collections.Counter(t for t, d in zip(want.timestamps, want.durations) if d == 0)
        if max(staying.values(), default=0) < 6:
            assert same(got, want)
            compared += 1
    assert compared >= 3


@settings(max_examples=8, deadline=None)
@given(lengths=st.lists(st.integers(0, 16), min_size=1, max_size=6), position=st.integers(0, 5), seed=st.integers(0, 999),
       kind=st.sampled_from(sorted(HEADS)))
def test_an_utterance_decodes_the_same_in_any_batch(lengths, position, seed, kind):
    model = model_for(kind, "stateless", "label_heavy")
    frames, lengths_tensor = encoder_batch(lengths, seed=seed, extra_padding=5)
    position = position % len(lengths)
    alone = beam_aes_pp(model, frames[position : position + 1, : lengths[position]],
                        lengths_tensor[position : position + 1], beam_size=4, nbest=4).nbest[0]
    batched = beam_aes_pp(model, frames, lengths_tensor, beam_size=4, nbest=4).nbest[position]
    assert len(alone) == len(batched) and all(same(a, b) for a, b in zip(alone, batched))


def test_nbest_fusion_and_options():
    # Frames are always left by a scored blank, so on the usual random models an empty path wins; this one makes
    # tokens likely enough to be searched for.
    model = random_decoder(HEADS["rnnt"], "lstm", encoder_dim=16, num_layers=2, blank_rate=0.1, seed=7,
                           dtype=torch.float64)
    frames, lengths = encoder_batch([24, 13, 7], seed=6)
    plain = beam_aes_pp(model, frames, lengths, beam_size=4, nbest=4)
    for hyps in plain.nbest:
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps)
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    fusions = [Fusion(BigramScorer(HEADS["rnnt"].num_tokens, seed=3), 0.8, blank_scoring=True)]
    fused = beam_aes_pp(model, frames, lengths, beam_size=4, nbest=4, fusions=fusions)
    assert [h.tokens for h in fused.hypotheses()] != [h.tokens for h in plain.hypotheses()]
    assert all(h.am_score != pytest.approx(h.score) for h in fused.hypotheses() if h.tokens)
    assert any(h.tokens for h in plain.hypotheses())
    for bad in (dict(expansion_beta=-1), dict(expansion_gamma=-0.5), dict(num_steps=0), dict(pruning="never")):
        with pytest.raises(ValueError):
            DecodingConfig("beam_aes_pp", **bad)
