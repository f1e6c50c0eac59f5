"""WIND windows (batched label-looping and the batch-1 path) against the per-utterance reference.

Same random-model matrix as tests/test_greedy_exactness.py, for windows 1, 2, 3, 8, 16 and 64 (longer than
every utterance here), with utterances of length 0 and 1 and NaN padding.
"""

import functools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from helpers import MATRIX, assert_same_hypotheses, encoder_batch, model_for
from transdec.decoding import DecodingConfig, decode, greedy_label_looping, greedy_reference, greedy_wind

WINDOWS = [1, 2, 3, 8, 16, 64]
batches = st.lists(st.integers(min_value=0, max_value=24), min_size=1, max_size=16)


@functools.lru_cache(maxsize=None)
def reference(kind, predictor, profile, max_symbols, lengths, seed):
    model = model_for(kind, predictor, profile)
    frames, lengths_tensor = encoder_batch(list(lengths), seed)
    return greedy_reference(model, frames, lengths_tensor, max_symbols_per_frame=max_symbols).hypotheses()


def check(decoder, window, kind, predictor, profile, max_symbols, lengths, seed):
    model = model_for(kind, predictor, profile)
    frames, lengths_tensor = encoder_batch(lengths, seed)
    result = decoder(model, frames, lengths_tensor, max_symbols_per_frame=max_symbols, window_size=window)
    assert_same_hypotheses(result.hypotheses(), reference(kind, predictor, profile, max_symbols, tuple(lengths), seed))
    return result


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("kind, predictor, profile, max_symbols", MATRIX)
@settings(max_examples=3, deadline=None)
@given(lengths=batches, seed=st.integers(0, 2**16))
@example(lengths=[0, 1, 24, 0, 1, 13, 7, 24], seed=1)
def test_label_looping_wind_equals_reference(window, kind, predictor, profile, max_symbols, lengths, seed):
    check(greedy_label_looping, window, kind, predictor, profile, max_symbols, lengths, seed)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("kind, predictor, profile, max_symbols", MATRIX)
@settings(max_examples=2, deadline=None)
@given(lengths=batches, seed=st.integers(0, 2**16))
@example(lengths=[0, 1, 24, 13], seed=1)
def test_batch1_wind_equals_reference(window, kind, predictor, profile, max_symbols, lengths, seed):
    check(greedy_wind, window, kind, predictor, profile, max_symbols, lengths, seed)


@pytest.mark.parametrize("kind", ["rnnt", "tdt", "multiblank"])
def test_windows_cut_joint_calls(kind):
    model = model_for(kind, "lstm", "blank_heavy")
    frames, lengths = encoder_batch([24] * 4, seed=0)
    calls = [greedy_label_looping(model, frames, lengths, window_size=w).stats.joint_calls for w in (1, 8)]
    assert calls[1] < calls[0]


def test_first_non_blank_is_not_the_rule_for_jumping_heads():
    """A multi-blank window where a label sits on a frame the reference jumps over: it must be ignored."""
    from scripted_model import ScriptedModel
    from transdec.protocol import HeadSpec

    head = HeadSpec("multiblank", num_tokens=5, big_blank_durations=(2, 4, 8))
    # Frame 0: big blank of duration 2 (skips frame 1); frame 1: token 3 (never visited); frame 2: token 4.
    model = ScriptedModel(head, num_frames=6)
    model.script(0, 0, head.big_blank_id(0))
    model.script(1, 0, 3)
    model.script(2, 0, 4)
    frames, lengths = model.encoder_out([6])
    expected = greedy_reference(model, frames, lengths).hypotheses()[0]
    assert expected.tokens[0] == 4 and expected.timestamps[0] == 2
    for window in (2, 3, 8):
        for decoder in (greedy_label_looping, greedy_wind):
            got = decoder(model, frames, lengths, window_size=window).hypotheses()[0]
            assert (got.tokens, got.timestamps) == (expected.tokens, expected.timestamps)


def test_config_routes_the_window_and_rejects_it_elsewhere():
    model = model_for("rnnt", "lstm", "blank_heavy")
    frames, lengths = encoder_batch([10, 5], seed=0)
    a = decode(model, frames, lengths, DecodingConfig(window_size=4)).hypotheses()
    b = decode(model, frames, lengths, DecodingConfig(strategy="greedy_wind", window_size=4)).hypotheses()
    assert_same_hypotheses(a, b)
    with pytest.raises(ValueError, match="has no option.*window_size"):
        DecodingConfig(strategy="greedy_frame", window_size=4)
    with pytest.raises(ValueError, match="positive integer"):
        DecodingConfig(window_size=0)


@pytest.mark.slow
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("kind, predictor, profile, max_symbols", MATRIX)
@settings(max_examples=25, deadline=None)
@given(lengths=batches, seed=st.integers(0, 2**16))
def test_wind_equals_reference_thorough(window, kind, predictor, profile, max_symbols, lengths, seed):
    check(greedy_label_looping, window, kind, predictor, profile, max_symbols, lengths, seed)
    check(greedy_wind, window, kind, predictor, profile, max_symbols, lengths, seed)
