"""WIND beam search, per utterance (``beam_wind``) and batched (ALSD++ with a window): exact against brute force
with a wide beam for every window, batch invariant, fused."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brute_force import all_paths, best_path, sequence_scores
from helpers import HEADS, BigramScorer, encoder_batch, model_for, same, tiny_problem
from transdec.decoding import DecodingConfig, Fusion, decode
from transdec.decoding.beam.wind import beam_wind
from transdec.decoding.beam.wind_batched import beam_wind_batched


@pytest.mark.parametrize("search", [beam_wind, beam_wind_batched])
@pytest.mark.parametrize("predictor", ["lstm", "stateless"])
@pytest.mark.parametrize("window", [1, 2, 3, 8])
def test_a_wide_beam_finds_the_optimum_for_every_window(search, predictor, window):
    model, frames, lengths = tiny_problem("rnnt", predictor, seed=3)
    for b, length in enumerate(lengths.tolist()):
        one = (frames[b : b + 1, :length], lengths[b : b + 1])
        paths = all_paths(model, frames[b, :length], max_symbols_per_frame=2)
        best = best_path(paths)
        by_sequence = sequence_scores(paths)
        top = max(by_sequence, key=by_sequence.get)
        wide = 512 if search is beam_wind else 160  # the batched store holds beam_size * (window_size + 2)
        found = search(model, *one, max_symbols_per_frame=2, beam_size=wide, window_size=window).hypotheses()[0]
        assert (tuple(found.tokens), tuple(found.timestamps)) == (best.tokens, best.timestamps)
        assert found.score == pytest.approx(best.score, abs=1e-9)
        summed = search(model, *one, max_symbols_per_frame=2, beam_size=wide, window_size=window, merge="logsumexp").hypotheses()[0]
        assert tuple(summed.tokens) == top and summed.score == pytest.approx(by_sequence[top], abs=1e-9)
        for beam in (1, 2):
            narrow = search(model, *one, max_symbols_per_frame=2, beam_size=beam, window_size=window).hypotheses()[0]
            assert narrow.score <= best.score + 1e-12


def test_batch_invariance_nbest_and_fusion():
    model = model_for("rnnt", "stateless", "label_heavy")
    frames, lengths = encoder_batch([0, 17, 9, 24], seed=2, extra_padding=4)
    batched = beam_wind(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=3, window_size=4).nbest
    for i, length in enumerate(lengths.tolist()):
        alone = beam_wind(model, frames[i : i + 1, :length], lengths[i : i + 1], max_symbols_per_frame=3, beam_size=4,
                          nbest=3, window_size=4).nbest[0]
        assert len(alone) == len(batched[i]) and all(same(a, b) for a, b in zip(alone, batched[i]))
        assert [h.score for h in alone] == sorted((h.score for h in alone), reverse=True)
    fusions = [Fusion(BigramScorer(HEADS["rnnt"].num_tokens, seed=4), 1.5)]
    fused = decode(model, frames, lengths, DecodingConfig("beam_wind", beam_size=4, fusions=fusions)).hypotheses()
    assert [h.tokens for h in fused] != [h.tokens for h in decode(model, frames, lengths, DecodingConfig(
        "beam_wind", beam_size=4)).hypotheses()]
    for search in (beam_wind, beam_wind_batched):
        with pytest.raises(ValueError, match="needs an RNN-T head"):
            search(model_for("tdt", "lstm", "label_heavy"), frames, lengths)


@pytest.mark.parametrize("predictor", ["lstm", "stateless"])
def test_window_one_beam_one_is_greedy(predictor):
    from transdec.decoding import greedy_label_looping

    model = model_for("rnnt", predictor, "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7], seed=1)
    greedy = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3).hypotheses()
    beam = beam_wind(model, frames, lengths, max_symbols_per_frame=3, beam_size=1, window_size=1).hypotheses()
    assert all(same(a, b) for a, b in zip(beam, greedy))



def assert_same_nbest(got, expected):
    assert [len(n) for n in got] == [len(n) for n in expected]
    for got_list, expected_list in zip(got, expected):
        assert all(same(a, b) and a.am_score == pytest.approx(b.am_score, abs=1e-9)
                   for a, b in zip(got_list, expected_list))


@pytest.mark.parametrize("predictor", ["lstm", "stateless"])
@pytest.mark.parametrize("window", [1, 2, 4, 8, 64])
@pytest.mark.parametrize("beam_size", [2, 4])
def test_batched_equals_per_utterance(predictor, window, beam_size):
    model = model_for("rnnt", predictor, "label_heavy")
    frames, lengths = encoder_batch([0, 17, 9, 24, 1, 13], seed=2, extra_padding=4)
    expected = beam_wind(model, frames, lengths, max_symbols_per_frame=3, beam_size=beam_size, nbest=2, window_size=window).nbest
    got = beam_wind_batched(model, frames, lengths, max_symbols_per_frame=3, beam_size=beam_size, nbest=2, window_size=window)
    assert_same_nbest(got.nbest, expected)
    fusions = [Fusion(BigramScorer(HEADS["rnnt"].num_tokens, seed=3), 0.8, token_bonus=0.2, blank_scoring=True)]
    expected = beam_wind(model, frames, lengths, max_symbols_per_frame=3, beam_size=beam_size, nbest=2, window_size=window,
                         fusions=fusions).nbest
    assert_same_nbest(beam_wind_batched(model, frames, lengths, max_symbols_per_frame=3, beam_size=beam_size, nbest=2, window_size=window,
                                        fusions=fusions).nbest, expected)


@settings(max_examples=8, deadline=None)
@given(lengths=st.lists(st.integers(0, 20), min_size=1, max_size=6), position=st.integers(0, 5),
       seed=st.integers(0, 999), window=st.sampled_from([1, 3, 8]))
def test_batched_decodes_an_utterance_the_same_in_any_batch(lengths, position, seed, window):
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths_tensor = encoder_batch(lengths, seed=seed, extra_padding=5)
    position = position % len(lengths)
    alone = beam_wind_batched(model, frames[position : position + 1, : lengths[position]],
                              lengths_tensor[position : position + 1], max_symbols_per_frame=3, beam_size=4, nbest=4,
                              window_size=window).nbest[0]
    batched = beam_wind_batched(model, frames, lengths_tensor, max_symbols_per_frame=3, beam_size=4, nbest=4, window_size=window).nbest
    assert_same_nbest([batched[position]], [alone])


def test_a_window_saves_joint_calls_along_the_blank_chain():
    """At beam 1 (greedy) a hypothesis' blanks through its window take no joint call of their own."""
    model = model_for("rnnt", "lstm", "blank_heavy")
    frames, lengths = encoder_batch([40, 31], seed=3)
    frame_by_frame = beam_wind_batched(model, frames, lengths, max_symbols_per_frame=3, beam_size=1, window_size=1)
    windowed = beam_wind_batched(model, frames, lengths, max_symbols_per_frame=3, beam_size=1, window_size=8)
    assert windowed.stats.joint_calls < 0.5 * frame_by_frame.stats.joint_calls


@pytest.mark.parametrize("window", [1, 3, 8])
@pytest.mark.parametrize("merge", ["max", "none"])
def test_dropping_hopeless_tokens_saves_rounds_and_changes_nothing(monkeypatch, window, merge):
    """Tokens at a frame that score below the K best waiting at every frame of their window take no round: the
    n-best lists are those of the search that expands them."""
    from transdec.decoding.beam.wind_batched import WindSearch

    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([0, 17, 9, 24, 13], seed=4, extra_padding=2)
    options = dict(max_symbols_per_frame=3, beam_size=3, nbest=3, window_size=window, merge=merge)
    dropping = beam_wind_batched(model, frames, lengths, **options)
    monkeypatch.setattr(WindSearch, "_drop_hopeless", lambda self, store, t: None)
    expanding = beam_wind_batched(model, frames, lengths, **options)
    assert_same_nbest(dropping.nbest, expanding.nbest)
    assert dropping.stats.joint_calls < expanding.stats.joint_calls


@pytest.mark.parametrize("search", [beam_wind, beam_wind_batched])
@pytest.mark.parametrize("window", [2, 5, 8])
def test_beam_one_is_greedy_for_every_window(search, window):
    """Each position's best label decides whether the blank chain goes on: greedy decoding's choice, frame by
    frame."""
    from transdec.decoding import greedy_label_looping

    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7], seed=1)
    greedy = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3).hypotheses()
    beam = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=1, window_size=window).hypotheses()
    assert all(same(a, b) for a, b in zip(beam, greedy))
