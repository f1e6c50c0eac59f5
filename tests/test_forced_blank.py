"""The forced blank after ``max_symbols_per_frame`` tokens at one frame: every decoder takes it as a scored
emission, so that no score exceeds the probability of its token sequence, and the rule is the same in greedy and
beam search (beam 1 is greedy)."""

from __future__ import annotations

import pytest
import torch

from brute_force import all_paths, sequence_scores
from helpers import TINY_HEADS
from transdec.decoding import DecodingConfig, decode
from transdec.model.synthetic import random_decoder, random_encoder_output
from transdec.protocol import HeadSpec

STRATEGIES = {
    "greedy_reference": {}, "greedy_label": {}, "greedy_wind": {"window_size": 3},
    "beam_alsd": {"beam_size": 3, "nbest": 3}, "beam_alsd_pp": {"beam_size": 3, "nbest": 3},
    "beam_aes_pp": {"beam_size": 3, "nbest": 3}, "beam_maes": {"beam_size": 3, "nbest": 3},
    "beam_graves": {"beam_size": 3, "nbest": 3},
    "beam_wind": {"beam_size": 3, "nbest": 3, "window_size": 2},
    "beam_wind_batched": {"beam_size": 3, "nbest": 3, "window_size": 2},
}
RNNT_ONLY = ("beam_wind", "beam_wind_batched")


def label_heavy_problem(kind: str, seed: int):
    """A tiny decoder that rarely prefers a blank, so that the limit of 2 tokens per frame binds often."""
    model = random_decoder(TINY_HEADS[kind], "lstm", encoder_dim=8, num_layers=1, blank_rate=0.1, seed=seed,
                           dtype=torch.float64)
    frames, lengths = random_encoder_output([4, 3], 8, seed=seed, dtype=torch.float64)
    return model, frames, lengths


@pytest.mark.parametrize("kind", list(TINY_HEADS))
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_no_score_exceeds_the_probability_of_its_tokens(strategy: str, kind: str) -> None:
    if strategy in RNNT_ONLY and kind != "rnnt":
        pytest.skip("an RNN-T search")
    model, frames, lengths = label_heavy_problem(kind, seed=11)
    options = dict(STRATEGIES[strategy])
    if strategy in ("beam_aes_pp", "beam_maes"):
        options["num_steps"] = 2
    config = DecodingConfig(strategy, max_symbols_per_frame=2, **options)
    for b, length in enumerate(lengths.tolist()):
        by_sequence = sequence_scores(all_paths(model, frames[b, :length], max_symbols_per_frame=2))
        result = decode(model, frames[b : b + 1, :length], lengths[b : b + 1], config)
        for hyp in result.nbest[0] if result.nbest else result.hypotheses():
            assert tuple(hyp.tokens) in by_sequence  # a path the rules allow
            assert hyp.score <= by_sequence[tuple(hyp.tokens)] + 1e-9


@pytest.mark.parametrize("kind", ["rnnt", "multiblank"])
def test_the_limit_binds_in_these_problems(kind: str) -> None:
    model, frames, lengths = label_heavy_problem(kind, seed=11)
    hyps = decode(model, frames, lengths, DecodingConfig("greedy_reference", max_symbols_per_frame=2)).hypotheses()
    assert any(max(h.timestamps.count(t) for t in h.timestamps) == 2 for h in hyps if h.tokens)


def test_the_forced_blank_of_each_head() -> None:
    assert HeadSpec("rnnt", 4).forced_advance == 1
    assert HeadSpec("multiblank", 4, big_blank_durations=(2, 4)).forced_advance == 1
    tdt = HeadSpec("tdt", 4, durations=(0, 1, 2, 4))
    assert (tdt.forced_advance, tdt.forced_duration_index) == (1, 1)
    without_one = HeadSpec("tdt", 4, durations=(0, 2, 4))
    assert (without_one.forced_advance, without_one.forced_duration_index) == (2, 1)


@pytest.mark.parametrize("kind", list(TINY_HEADS))
def test_beam_one_is_greedy_where_the_limit_binds(kind: str) -> None:
    model, frames, lengths = label_heavy_problem(kind, seed=12)
    greedy = decode(model, frames, lengths, DecodingConfig("greedy_reference", max_symbols_per_frame=1)).hypotheses()
    beam = decode(model, frames, lengths, DecodingConfig("beam_alsd_pp", beam_size=1, max_symbols_per_frame=1))
    for a, b in zip(greedy, beam.hypotheses()):
        assert (a.tokens, a.timestamps, a.durations) == (b.tokens, b.timestamps, b.durations)
        assert a.score == pytest.approx(b.score, abs=1e-9)
