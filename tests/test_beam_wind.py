"""WIND beam search: exact against brute force with a wide beam for every window, batch invariant, fused."""

import pytest
import torch

from brute_force import all_paths, best_path, sequence_scores
from test_beam_alsd import same, tiny_problem
from test_greedy_exactness import HEADS, encoder_batch, model_for
from test_scoring import BigramScorer
from transdec.decoding import DecodingConfig, Fusion, decode
from transdec.decoding.beam_wind import beam_wind


@pytest.mark.parametrize("predictor", ["lstm", "stateless"])
@pytest.mark.parametrize("window", [1, 2, 3, 8])
def test_a_wide_beam_finds_the_optimum_for_every_window(predictor, window):
    model, frames, lengths = tiny_problem("rnnt", predictor, seed=3)
    for b, length in enumerate(lengths.tolist()):
        one = (frames[b : b + 1, :length], lengths[b : b + 1])
        paths = all_paths(model, frames[b, :length], max_symbols_per_frame=2)
        best = best_path(paths)
        by_sequence = sequence_scores(paths)
        top = max(by_sequence, key=by_sequence.get)
        found = beam_wind(model, *one, 2, beam_size=512, window_size=window).hypotheses()[0]
        assert (tuple(found.tokens), tuple(found.timestamps)) == (best.tokens, best.timestamps)
        assert found.score == pytest.approx(best.score, abs=1e-9)
        summed = beam_wind(model, *one, 2, beam_size=512, window_size=window, merge="logsumexp").hypotheses()[0]
        assert tuple(summed.tokens) == top and summed.score == pytest.approx(by_sequence[top], abs=1e-9)
        for beam in (1, 2):
            narrow = beam_wind(model, *one, 2, beam_size=beam, window_size=window).hypotheses()[0]
            assert narrow.score <= best.score + 1e-12


def test_batch_invariance_nbest_and_fusion():
    model = model_for("rnnt", "stateless", "label_heavy")
    frames, lengths = encoder_batch([0, 17, 9, 24], seed=2, extra_padding=4)
    batched = beam_wind(model, frames, lengths, 3, beam_size=4, nbest=3, window_size=4).nbest
    for i, length in enumerate(lengths.tolist()):
        alone = beam_wind(model, frames[i : i + 1, :length], lengths[i : i + 1], 3, beam_size=4, nbest=3,
                          window_size=4).nbest[0]
        assert len(alone) == len(batched[i]) and all(same(a, b) for a, b in zip(alone, batched[i]))
        assert [h.score for h in alone] == sorted((h.score for h in alone), reverse=True)
    fusions = [Fusion(BigramScorer(HEADS["rnnt"].num_tokens, seed=3), 1.5)]
    fused = decode(model, frames, lengths, DecodingConfig("beam_wind", beam_size=4, fusions=fusions)).hypotheses()
    assert [h.tokens for h in fused] != [h.tokens for h in decode(model, frames, lengths, DecodingConfig(
        "beam_wind", beam_size=4)).hypotheses()]
    with pytest.raises(ValueError, match="needs an RNN-T head"):
        beam_wind(model_for("tdt", "lstm", "label_heavy"), frames, lengths)


@pytest.mark.parametrize("predictor", ["lstm", "stateless"])
def test_window_one_beam_one_is_greedy(predictor):
    from transdec.decoding import greedy_label_looping

    model = model_for("rnnt", predictor, "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7], seed=1)
    greedy = greedy_label_looping(model, frames, lengths, 3).hypotheses()
    beam = beam_wind(model, frames, lengths, 3, beam_size=1, window_size=1).hypotheses()
    assert all(same(a, b) for a, b in zip(beam, greedy))
