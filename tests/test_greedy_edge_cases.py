"""Documented edge cases of greedy decoding, scripted so that the expected output is written by hand.

Every decoder runs each case; frame-looping is exact at batch size 1 for every head (the batch minimum
of one advance is that advance), so it is held to the same expectations here.
"""

import math
import warnings

import pytest
import torch

from scripted_model import ScriptedModel
from transdec.decoding import greedy_frame_looping, greedy_label_looping, greedy_reference
from transdec.protocol import HeadSpec

RNNT = HeadSpec("rnnt", num_tokens=5)
TDT = HeadSpec("tdt", num_tokens=5, durations=(0, 1, 2, 3, 4))
MULTIBLANK = HeadSpec("multiblank", num_tokens=5, big_blank_durations=(2, 4, 8))
DECODERS = [greedy_reference, greedy_label_looping, greedy_frame_looping]


def decode_one(decoder, model: ScriptedModel, length: int, max_symbols_per_frame=10):
    frames, lengths = model.encoder_out([length])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return decoder(model, frames, lengths, max_symbols_per_frame=max_symbols_per_frame).hypotheses()[0]


def log_softmax_at(values: list[float], index: int) -> float:
    return values[index] - math.log(sum(math.exp(v) for v in values))


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("head", [RNNT, TDT, MULTIBLANK], ids=lambda h: h.kind)
def test_empty_input_gives_empty_hypothesis(decoder, head):
    hyp = decode_one(decoder, ScriptedModel(head, num_frames=3), length=0)
    assert hyp.tokens == [] and hyp.timestamps == [] and hyp.score == 0.0


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("head", [RNNT, TDT, MULTIBLANK], ids=lambda h: h.kind)
def test_empty_batch(decoder, head):
    model = ScriptedModel(head, num_frames=3)
    result = decoder(model, torch.zeros(0, 3, 1, dtype=torch.float64), torch.zeros(0, dtype=torch.long))
    assert result.hypotheses() == []


@pytest.mark.parametrize("decoder", DECODERS)
def test_all_blank_scores_every_frame(decoder):
    hyp = decode_one(decoder, ScriptedModel(RNNT, num_frames=4), length=4)
    blank_logprob = log_softmax_at([0.0] * 5 + [5.0], 5)
    assert hyp.tokens == []
    assert hyp.score == pytest.approx(4 * blank_logprob, abs=1e-12)


@pytest.mark.parametrize("decoder", DECODERS)
def test_labels_at_one_frame_then_blank(decoder):
    model = ScriptedModel(RNNT, num_frames=3)
    model.script(t=1, u=0, label=2)
    model.script(t=1, u=1, label=4)
    hyp = decode_one(decoder, model, length=3)
    assert (hyp.tokens, hyp.timestamps, hyp.durations) == ([2, 4], [1, 1], [0, 0])
    label_logprob = log_softmax_at([0.0] * 5 + [5.0], 5)  # scripted winners all score 5 against zeros
    assert hyp.token_logprobs == pytest.approx([label_logprob] * 2, abs=1e-12)
    assert hyp.score == pytest.approx(5 * label_logprob, abs=1e-12)  # 2 labels and 3 blanks


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("max_symbols, expected", [(1, [1]), (3, [1, 2, 3]), (10, [1, 2, 3, 4])])
def test_max_symbols_forces_a_scored_blank(decoder, max_symbols, expected):
    model = ScriptedModel(RNNT, num_frames=2)
    for u, label in enumerate([1, 2, 3, 4]):
        model.script(t=0, u=u, label=label)
    hyp = decode_one(decoder, model, length=2, max_symbols_per_frame=max_symbols)
    assert hyp.tokens == expected
    assert hyp.timestamps == [0] * len(expected)
    step_logprob = log_softmax_at([0.0] * 5 + [5.0], 5)
    # After the limit the blank is taken although label 2, 3 or 4 scores higher: it costs its own log-prob.
    forced_blank = log_softmax_at([0.0] * 5 + [5.0], 0)
    frame_0 = step_logprob if len(expected) == 4 else forced_blank  # the labels ran out before the limit
    assert hyp.score == pytest.approx(len(expected) * step_logprob + frame_0 + step_logprob, abs=1e-12)


@pytest.mark.parametrize("decoder", DECODERS)
def test_tdt_label_duration_moves_time_and_can_run_past_the_end(decoder):
    model = ScriptedModel(TDT, num_frames=4)
    model.script(t=0, u=0, label=3, duration=2)
    model.script(t=2, u=1, label=1, duration=4)  # 2 + 4 > 4 frames: decoding ends
    hyp = decode_one(decoder, model, length=4)
    assert (hyp.tokens, hyp.timestamps, hyp.durations) == ([3, 1], [0, 2], [2, 4])


@pytest.mark.parametrize("decoder", DECODERS)
def test_tdt_blank_with_duration_zero_moves_one_frame(decoder):
    model = ScriptedModel(TDT, num_frames=3)
    model.script(t=0, u=0, label=TDT.blank_id, duration=0)
    model.script(t=1, u=0, label=2, duration=0)
    model.script(t=1, u=1, label=TDT.blank_id, duration=3)
    hyp = decode_one(decoder, model, length=3)
    assert (hyp.tokens, hyp.timestamps, hyp.durations) == ([2], [1], [0])


@pytest.mark.parametrize("decoder", DECODERS)
def test_tdt_duration_zero_labels_obey_max_symbols(decoder):
    model = ScriptedModel(TDT, num_frames=2)
    for u in range(5):
        model.script(t=0, u=u, label=1, duration=0)
    hyp = decode_one(decoder, model, length=2, max_symbols_per_frame=3)
    assert (hyp.tokens, hyp.timestamps) == ([1, 1, 1], [0, 0, 0])


@pytest.mark.parametrize("decoder", DECODERS)
def test_tdt_score_includes_duration_logprobs(decoder):
    model = ScriptedModel(TDT, num_frames=1)
    model.script(t=0, u=0, label=2, duration=1)
    hyp = decode_one(decoder, model, length=1)
    label_logprob = log_softmax_at([0.0] * 5 + [5.0], 5)
    duration_logprob = log_softmax_at([0.0] * 4 + [5.0], 4)
    assert hyp.token_logprobs == pytest.approx([label_logprob], abs=1e-12)
    assert hyp.score == pytest.approx(label_logprob + duration_logprob, abs=1e-12)


@pytest.mark.parametrize("decoder", DECODERS)
def test_big_blanks_jump_by_their_duration_and_past_the_end(decoder):
    model = ScriptedModel(MULTIBLANK, num_frames=8)
    model.script(t=0, u=0, label=MULTIBLANK.big_blank_id(0))  # duration 2
    model.script(t=2, u=0, label=3)
    model.script(t=2, u=1, label=MULTIBLANK.big_blank_id(1))  # duration 4: to frame 6
    model.script(t=6, u=1, label=MULTIBLANK.big_blank_id(2))  # duration 8: past the end
    model.script(t=7, u=1, label=4)  # skipped, never reached
    hyp = decode_one(decoder, model, length=8)
    assert (hyp.tokens, hyp.timestamps, hyp.durations) == ([3], [2], [0])
    step_logprob = log_softmax_at([0.0] * 8 + [5.0], 8)
    assert hyp.score == pytest.approx(4 * step_logprob, abs=1e-12)


def test_big_blank_layout_matches_nemo():
    assert MULTIBLANK.blank_id == 8
    assert [MULTIBLANK.big_blank_id(i) for i in range(3)] == [7, 6, 5]
    assert MULTIBLANK.predictor_blank_id == 5


@pytest.mark.parametrize("head", [RNNT, TDT, MULTIBLANK], ids=lambda h: h.kind)
def test_reference_counts_every_emission_by_frames_advanced(head):
    from transdec.model.synthetic import random_decoder, random_encoder_output

    model = random_decoder(head, blank_rate=0.5, seed=3, dtype=torch.float64)
    frames, lengths = random_encoder_output([20, 7, 0, 13], 16, seed=4, dtype=torch.float64)
    result = greedy_reference(model, frames, lengths, max_symbols_per_frame=3)
    emissions = result.stats.emissions
    assert sum(emissions.values()) == result.stats.joint_calls
    assert sum(n for (kind, _), n in emissions.items() if kind == "token") == sum(
        len(h.tokens) for h in result.hypotheses()
    )
    allowed = {1} | set(head.big_blank_durations) | set(head.durations)
    assert {d for kind, d in emissions if kind == "blank"} <= allowed
