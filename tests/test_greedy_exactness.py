"""Batched greedy decoders against the per-utterance reference on random models (float64, CPU).

Matrix: RNN-T, TDT and multi-blank heads x LSTM and stateless predictors x blank-heavy and
label-heavy models x max_symbols_per_frame 1, 3, 10, with batches of 1-32 utterances of random
lengths (0 and 1 included). Frames past each length are NaN, so any read of padding would show.
"""

import itertools
import warnings

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from helpers import ENCODER_DIM, HEADS, MATRIX, assert_same_hypotheses, encoder_batch, model_for
from transdec.decoding import greedy_frame_looping, greedy_label_looping, greedy_reference
from transdec.model.synthetic import random_encoder_output

batches = st.lists(st.integers(min_value=0, max_value=24), min_size=1, max_size=32)


def check_against_reference(decoder, kind, predictor, profile, max_symbols, lengths, seed):
    model = model_for(kind, predictor, profile)
    frames, lengths_tensor = encoder_batch(lengths, seed)
    expected = greedy_reference(model, frames, lengths_tensor, max_symbols_per_frame=max_symbols).hypotheses()
    result = decoder(model, frames, lengths_tensor, max_symbols_per_frame=max_symbols)
    assert_same_hypotheses(result.hypotheses(), expected)
    return result, expected


@pytest.mark.parametrize("kind, predictor, profile, max_symbols", MATRIX)
@settings(max_examples=8)
@given(lengths=batches, seed=st.integers(0, 2**16))
@example(lengths=[24] * 32, seed=0)
@example(lengths=[0, 1, 24, 0, 1, 13, 7, 24] * 4, seed=1)
@example(lengths=[1], seed=2)
def test_label_looping_equals_reference(kind, predictor, profile, max_symbols, lengths, seed):
    result, expected = check_against_reference(
        greedy_label_looping, kind, predictor, profile, max_symbols, lengths, seed
    )
    # One predictor call per label of the longest hypothesis, plus the start-of-sequence call, which
    # goes unused when that hypothesis's last label itself ends the utterance (a duration past the end).
    longest = max(len(h.tokens) for h in expected)
    if max(lengths) == 0:
        assert result.stats.predictor_calls == 0
    else:
        assert longest <= result.stats.predictor_calls <= longest + 1


@pytest.mark.parametrize("predictor, profile, max_symbols", [m[1:] for m in MATRIX if m[0] == "rnnt"])
@settings(max_examples=8)
@given(lengths=batches, seed=st.integers(0, 2**16))
@example(lengths=[24] * 32, seed=0)
@example(lengths=[0, 1, 24, 0, 1, 13, 7, 24] * 4, seed=1)
def test_frame_looping_rnnt_equals_reference(predictor, profile, max_symbols, lengths, seed):
    result, _ = check_against_reference(greedy_frame_looping, "rnnt", predictor, profile, max_symbols, lengths, seed)
    assert result.exact


@pytest.mark.parametrize("kind, predictor, profile", list(itertools.product(HEADS, ["lstm", "stateless"], ["blank_heavy", "label_heavy"])))
def test_profiles_exercise_tokens_blanks_and_growth(kind, predictor, profile):
    """Guards against vacuous exactness tests: each random model emits both tokens and blanks."""
    model = model_for(kind, predictor, profile)
    frames, lengths = encoder_batch([24] * 8, seed=0)
    result = greedy_reference(model, frames, lengths, max_symbols_per_frame=10)
    tokens = int(result.hyps.lengths.sum())
    blanks = result.stats.joint_calls - tokens
    assert tokens >= 10 and blanks >= 10, f"{tokens} tokens and {blanks} blanks are too few to test anything"


def test_label_heavy_profiles_hit_the_symbol_limit_and_grow_storage():
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([24] * 4, seed=0)
    result = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=10)
    timestamps = result.hypotheses()[0].timestamps
    assert max(timestamps.count(t) for t in set(timestamps)) == 10
    assert result.hyps.capacity > 24  # started at T and doubled


@pytest.mark.parametrize("kind", ["tdt", "multiblank"])
def test_frame_looping_is_marked_inexact_for_duration_heads(kind):
    model = model_for(kind, "lstm", "blank_heavy")
    frames, lengths = encoder_batch([10, 20], seed=0)
    with pytest.warns(UserWarning, match="inexact"):
        result = greedy_frame_looping(model, frames, lengths)
    assert not result.exact


@pytest.mark.parametrize("kind", ["tdt", "multiblank"])
def test_frame_looping_inexactness_is_real(kind):
    """The baseline's batch-minimum advance does change results; label-looping does not."""
    model = model_for(kind, "stateless", "blank_heavy")
    frames, lengths = encoder_batch([24] * 32, seed=3)
    expected = greedy_reference(model, frames, lengths).hypotheses()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inexact = greedy_frame_looping(model, frames, lengths).hypotheses()
    assert any(a.tokens != b.tokens or a.timestamps != b.timestamps for a, b in zip(inexact, expected))


@pytest.mark.slow
@pytest.mark.parametrize("kind, predictor, profile, max_symbols", MATRIX)
@settings(max_examples=60)
@given(lengths=batches, seed=st.integers(0, 2**16))
def test_label_looping_equals_reference_thorough(kind, predictor, profile, max_symbols, lengths, seed):
    check_against_reference(greedy_label_looping, kind, predictor, profile, max_symbols, lengths, seed)


@pytest.mark.parametrize("kind", list(HEADS))
@settings(max_examples=15)
@given(data=st.data())
def test_utterance_decodes_the_same_alone_and_inside_any_batch(kind, data):
    """Position in the batch, neighbours and padding length (NaN frames) never change a result."""
    model = model_for(kind, "lstm", "label_heavy")
    length = data.draw(st.integers(0, 20), label="length")
    neighbours = data.draw(st.lists(st.integers(0, 20), max_size=15), label="neighbours")
    position = data.draw(st.integers(0, len(neighbours)), label="position")
    padding = data.draw(st.integers(0, 10), label="padding")

    alone_frames, alone_lengths = random_encoder_output([length], ENCODER_DIM, seed=5, dtype=torch.float64)
    alone = greedy_label_looping(model, alone_frames, alone_lengths).hypotheses()[0]

    lengths = neighbours[:position] + [length] + neighbours[position:]
    frames, lengths_tensor = encoder_batch(lengths, seed=6, extra_padding=padding)
    frames[position, :length] = alone_frames[0]
    inside = greedy_label_looping(model, frames, lengths_tensor).hypotheses()[position]
    assert_same_hypotheses([inside], [alone])
