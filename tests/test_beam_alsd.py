"""ALSD (per utterance) and ALSD++ (batched): brute force, greedy at beam 1, each other, batch invariance."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brute_force import all_paths, best_path, sequence_scores
from helpers import HEADS, PREDICTORS, TINY_HEADS, BigramScorer, encoder_batch, model_for, same, tiny_problem
from transdec.decoding import DecodingConfig, Fusion, decode, greedy_label_looping
from transdec.decoding.beam.alsd import beam_alsd
from transdec.decoding.beam.alsd_pp import beam_alsd_pp


@pytest.mark.parametrize("kind, predictor", list(itertools.product(TINY_HEADS, PREDICTORS)))
@pytest.mark.parametrize("search", [beam_alsd, beam_alsd_pp])
def test_a_wide_beam_finds_the_optimum(search, kind, predictor):
    """With no pruning, max merging finds the best path and log-sum-exp merging the sequence with the highest
    summed probability; narrower beams never beat them."""
    model, frames, lengths = tiny_problem(kind, predictor, seed=3)
    for b, length in enumerate(lengths.tolist()):
        one = (frames[b : b + 1, :length], lengths[b : b + 1])
        paths = all_paths(model, frames[b, :length], max_symbols_per_frame=2)
        best = best_path(paths)
        by_sequence = sequence_scores(paths)
        top_sequence = max(by_sequence, key=by_sequence.get)
        # Wide enough to prune nothing: TDT's paths (durations 0-2, two tokens a frame) need the widest.
        wide = 2048 if kind == "tdt" else 1024
        found = search(model, *one, max_symbols_per_frame=2, beam_size=wide, merge="max").hypotheses()[0]
        assert (tuple(found.tokens), tuple(found.timestamps), tuple(found.durations)) == (
            best.tokens, best.timestamps, best.durations)
        assert found.score == pytest.approx(best.score, abs=1e-9)
        summed = search(model, *one, max_symbols_per_frame=2, beam_size=wide, merge="logsumexp").hypotheses()[0]
        assert tuple(summed.tokens) == top_sequence
        assert summed.score == pytest.approx(by_sequence[top_sequence], abs=1e-9)
        for beam in (1, 2, 3):
            narrow = search(model, *one, max_symbols_per_frame=2, beam_size=beam, merge="max").hypotheses()[0]
            assert narrow.score <= best.score + 1e-12


@pytest.mark.parametrize("kind, predictor", list(itertools.product(HEADS, PREDICTORS)))
@pytest.mark.parametrize("search", [beam_alsd, beam_alsd_pp])
def test_beam_one_is_greedy(search, kind, predictor):
    """One hypothesis taking its best emission at every step is greedy decoding, for every head."""
    model = model_for(kind, predictor, "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7], seed=1)
    greedy = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3).hypotheses()
    beam = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=1).hypotheses()
    assert all(same(a, b) for a, b in zip(beam, greedy))


@pytest.mark.parametrize("kind, predictor", list(itertools.product(HEADS, PREDICTORS)))
@pytest.mark.parametrize("beam_size, merge", [(2, "max"), (4, "logsumexp"), (4, "none"), (6, "max")])
def test_batched_equals_per_utterance(kind, predictor, beam_size, merge):
    model = model_for(kind, predictor, "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7, 19], seed=2)
    nbest = min(beam_size, 3)
    expected = beam_alsd(model, frames, lengths, max_symbols_per_frame=3, beam_size=beam_size, nbest=nbest, merge=merge).nbest
    got = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=beam_size, nbest=nbest, merge=merge).nbest
    assert [len(n) for n in got] == [len(n) for n in expected]
    for got_list, expected_list in zip(got, expected):
        assert all(same(a, b) for a, b in zip(got_list, expected_list))
        assert all(a.am_score == pytest.approx(b.am_score, abs=1e-9) for a, b in zip(got_list, expected_list))
        assert [h.score for h in got_list] == sorted((h.score for h in got_list), reverse=True)


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("slots", [1, 2, 4])
def test_dominance_slots_alike_in_both(kind, slots):
    """Some of a step's kept candidates by dominance (beam_size: all of them), alike in both searches."""
    model = model_for(kind, PREDICTORS[0], "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7, 19], seed=4)
    options = dict(max_symbols_per_frame=3, beam_size=4, nbest=3, dominance_slots=slots)
    expected = beam_alsd(model, frames, lengths, **options).nbest
    got = beam_alsd_pp(model, frames, lengths, **options).nbest
    for got_list, expected_list in zip(got, expected, strict=True):
        assert len(got_list) == len(expected_list) and all(same(a, b) for a, b in zip(got_list, expected_list))
    with pytest.raises(ValueError, match="dominance_slots"):
        beam_alsd_pp(model, frames, lengths, dominance_slots=-1)


@pytest.mark.parametrize("kind", list(HEADS))
@settings(max_examples=6, deadline=None)
@given(lengths=st.lists(st.integers(0, 16), min_size=1, max_size=6), position=st.integers(0, 5), seed=st.integers(0, 999))
def test_an_utterance_decodes_the_same_in_any_batch(kind, lengths, position, seed):
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths_tensor = encoder_batch(lengths, seed=seed, extra_padding=5)
    position = position % len(lengths)
    alone = beam_alsd_pp(model, frames[position : position + 1, : lengths[position]],
                         lengths_tensor[position : position + 1], max_symbols_per_frame=3, beam_size=4, nbest=4).nbest[0]
    batched = beam_alsd_pp(model, frames, lengths_tensor, max_symbols_per_frame=3, beam_size=4, nbest=4).nbest[position]
    assert len(alone) == len(batched) and all(same(a, b) for a, b in zip(alone, batched))


def test_nbest_is_sorted_unique_and_length_norm_reranks():
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([20, 11], seed=5)
    result = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=6, nbest=6)
    for hyps in result.nbest:
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps) > 1
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    normed = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=6, nbest=6, length_norm=True)
    for hyps in normed.nbest:
        per_token = [h.score / max(len(h.tokens), 1) for h in hyps]
        assert per_token == sorted(per_token, reverse=True)
    assert result.hypotheses()[0] == result.nbest[0][0]


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("pruning", ["late", "early"])
def test_fusion_is_scored_alike_in_both(kind, pruning):
    model = model_for(kind, "stateless", "label_heavy")
    frames, lengths = encoder_batch([24, 13, 7], seed=6)
    fusions = [Fusion(BigramScorer(HEADS[kind].num_tokens, seed=3), 0.8, token_bonus=0.1, blank_scoring=True)]
    expected = beam_alsd(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=2, pruning=pruning, fusions=fusions).nbest
    got = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=2, pruning=pruning, fusions=fusions).nbest
    plain = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=2).nbest
    assert [[h.tokens for h in n] for n in got] != [[h.tokens for h in n] for n in plain]
    for got_list, expected_list in zip(got, expected):
        assert all(same(a, b) and a.am_score == pytest.approx(b.am_score, abs=1e-9)
                   for a, b in zip(got_list, expected_list))
        assert all(a.am_score != pytest.approx(a.score) for a in got_list)


def test_decode_and_options_reach_the_search():
    model = model_for("tdt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([12, 5], seed=7)
    result = decode(model, frames, lengths, DecodingConfig("beam_alsd_pp", beam_size=3, nbest=2))
    assert [len(n) for n in result.nbest_hypotheses()] == [2, 2]
    with pytest.raises(ValueError, match="nbest must lie"):
        DecodingConfig("beam_alsd_pp", beam_size=2, nbest=3)
    with pytest.raises(ValueError, match="merge must be one of"):
        DecodingConfig("beam_alsd_pp", merge="sum")
    with pytest.raises(ValueError, match="max_length_ratio"):
        DecodingConfig("beam_alsd", max_length_ratio=-1.0)


def test_max_length_ratio_ends_the_per_utterance_search():
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([16], seed=8)
    full = beam_alsd(model, frames, lengths, max_symbols_per_frame=3, beam_size=4)
    capped = beam_alsd(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, max_length_ratio=0.0)
    assert full.stats.joint_calls > capped.stats.joint_calls
    assert len(capped.hypotheses()[0].tokens) <= len(full.hypotheses()[0].tokens) + 16


def test_early_pruning_ranks_by_the_transducer_alone():
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([24, 13, 7, 19], seed=9)
    fusions = [Fusion(BigramScorer(HEADS["rnnt"].num_tokens, seed=5), 2.0)]
    late = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=3, nbest=3, fusions=fusions).nbest
    early = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=3, nbest=3, pruning="early", fusions=fusions).nbest
    assert [[h.tokens for h in n] for n in late] != [[h.tokens for h in n] for n in early]
    plain = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=3, nbest=3, pruning="early").nbest
    late_plain = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=3, nbest=3).nbest
    assert all(same(a, b) for x, y in zip(plain, late_plain) for a, b in zip(x, y))  # no fusion: no difference
