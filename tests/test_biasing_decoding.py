"""Phrase boosting fused into the decoders: greedy decoders against the reference (alone, with an n-gram LM, with a
phrase list per utterance), beam searches against brute force, and final scores that never reward an unfinished
phrase."""

import collections
import copy
import math

import pytest
import torch

from arpa_fixtures import random_arpa
from brute_force import all_paths, best_path, sequence_scores
from helpers import (HEADS, TINY_HEADS, assert_same_hypotheses, boosted, encoder_batch, model_for, same,
                     tiny_problem)
from transdec.biasing import Boost, BoostingTree
from transdec.biasing.reference import ReferenceBoosting
from transdec.decoding import (DecodingConfig, Fusion, Scoring, decode, greedy_frame_looping, greedy_label_looping,
                               greedy_reference, greedy_wind)
from transdec.decoding.beam.aes_pp import beam_aes_pp
from transdec.decoding.beam.alsd import beam_alsd
from transdec.decoding.beam.alsd_pp import beam_alsd_pp
from transdec.decoding.beam.graves import beam_graves
from transdec.decoding.beam.maes import beam_maes
from transdec.decoding.beam.wind import beam_wind
from transdec.decoding.beam.wind_batched import beam_wind_batched
from transdec.lm import NGramLM

LENGTHS = [0, 1, 24, 13, 7, 24, 5, 19]


@pytest.fixture(scope="module")
def lms(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm")
    result = {}
    for kind, head in HEADS.items():
        path = folder / f"{kind}.arpa"
        path.write_text(random_arpa(head.num_tokens, 3, seed=7, missing_tokens=1))
        result[kind] = NGramLM.load(path, head.num_tokens, dtype=torch.float64)
    return result


@pytest.mark.parametrize("kind, predictor, with_lm", [(kind, predictor, False) for kind in HEADS
                                                       for predictor in ("lstm", "stateless")]
                         + [(kind, "lstm", True) for kind in HEADS])
def test_greedy_decoders_equal_the_reference_with_boosting(kind, predictor, with_lm, lms):
    model = model_for(kind, predictor, "label_heavy")
    frames, lengths = encoder_batch(LENGTHS, seed=4)
    boost, _, _, _ = boosted(model, frames, lengths)
    fusions = [boost] + ([Fusion(lms[kind], 0.5, token_bonus=0.2, blank_scoring=True)] if with_lm else [])
    expected = greedy_reference(model, frames, lengths, max_symbols_per_frame=3, fusions=fusions).hypotheses()
    without = greedy_reference(model, frames, lengths, max_symbols_per_frame=3, fusions=fusions[1:]).hypotheses()
    assert [h.tokens for h in expected] != [h.tokens for h in without], "boosting must change some decision"
    for window in (1, 4):
        got = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3, window_size=window, fusions=fusions)
        assert_same_hypotheses(got.hypotheses(), expected)
        got = greedy_wind(model, frames, lengths, max_symbols_per_frame=3, window_size=window, fusions=fusions)
        assert_same_hypotheses(got.hypotheses(), expected)
    if kind == "rnnt":
        got = greedy_frame_looping(model, frames, lengths, max_symbols_per_frame=3, fusions=fusions)
        assert_same_hypotheses(got.hypotheses(), expected)


@pytest.mark.parametrize("kind", list(HEADS))
def test_each_utterance_is_boosted_by_its_own_list(kind):
    """Decoded alone with its list, each utterance gives what it gives in the batch with every list; a greedy score
    is the acoustic score plus the weighted bonuses of its tokens (an unfinished phrase's included)."""
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch(LENGTHS, seed=5)
    boost, tree, index, lists = boosted(model, frames, lengths, weight=1.5, seed=1)
    batched = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3, fusions=[boost]).hypotheses()
    plain = greedy_reference(model, frames, lengths, max_symbols_per_frame=3).hypotheses()
    reference = ReferenceBoosting(lists, 0.5)
    for b, length in enumerate(LENGTHS):
        alone = greedy_reference(model, frames[b : b + 1, :length], lengths[b : b + 1], max_symbols_per_frame=3,
                                 fusions=[Boost(tree.for_utterances([index[b]]), 1.5)]).hypotheses()[0]
        assert same(alone, batched[b])
        if alignment(batched[b]) == alignment(plain[b]):  # the same path: only the bonuses differ
            bonuses, _, _ = reference.score(batched[b].tokens, index[b])
            assert batched[b].score == pytest.approx(plain[b].score + 1.5 * sum(bonuses), abs=1e-9)
    with pytest.raises(ValueError, match="made for batches of 8 utterances, the batch has 2"):
        decode(model, frames[:2], lengths[:2], DecodingConfig(fusions=[boost]))


# --- Beam searches against brute force ------------------------------------------------------------------------------

#: Phrase lists over the two tokens of the tiny heads: prefixes of each other, repeats, one-token phrases.
TINY_LISTS = [[([0, 1], 1.5), ([1, 1, 0], 1.0), ([0, 1, 1, 1], 0.5)], [([0, 0], 2.0), ([1, 0, 1], 1.0), ([1], 0.3)]]
TINY_WEIGHT = 0.8
REFERENCE = ReferenceBoosting(TINY_LISTS, 0.5)


def tiny_boost():
    """A Boost with list ``b`` for utterance ``b`` of a tiny problem, and the per-utterance fusions of each."""
    tree = BoostingTree.build(TINY_LISTS, 2, depth_scaling=0.5, dtype=torch.float64)
    boost = Boost(tree.for_utterances([0, 1]), TINY_WEIGHT)
    return boost, [Scoring(TINY_HEADS["rnnt"], [boost]).for_utterance(b).fusions for b in range(2)]


def alignment(hyp):
    return tuple(hyp.tokens), tuple(hyp.timestamps), tuple(hyp.durations)


def check_wide(search, model, frames, lengths, paths_of=all_paths, **options):
    """Pruning nothing, a search finds the best fused path (max merging) and the sequence with the highest summed
    fused probability (log-sum-exp merging), each utterance boosted by its own list; the brute-force scores include
    the final bonus. Returns the number of paths whose final bonus is not 0."""
    boost, per_utterance = tiny_boost()
    open_paths = 0
    best_found = search(model, frames, lengths, fusions=[boost], merge="max", **options).hypotheses()
    summed = search(model, frames, lengths, fusions=[boost], merge="logsumexp", **options).hypotheses()
    for b, length in enumerate(lengths.tolist()):
        paths = paths_of(model, frames[b, :length], 2, per_utterance[b])
        open_paths += sum(1 for p in paths if REFERENCE.score(p.tokens, b)[2] != 0)
        best = best_path(paths)
        assert alignment(best_found[b]) == (best.tokens, best.timestamps, best.durations)
        assert best_found[b].score == pytest.approx(best.score, abs=1e-9)
        assert best_found[b].am_score == pytest.approx(best.am_score, abs=1e-9)
        by_sequence = sequence_scores(paths)
        top = max(by_sequence, key=by_sequence.get)
        assert tuple(summed[b].tokens) == top and summed[b].score == pytest.approx(by_sequence[top], abs=1e-9)
    return open_paths


def tiny(kind, predictor, seed):
    """``tiny_problem``, with TDT's utterances cut to 3 frames (a million paths at four)."""
    model, frames, lengths = tiny_problem(kind, predictor, seed)
    return model, frames, lengths.clamp(max=3) if kind == "tdt" else lengths


@pytest.mark.parametrize("search, kind", [(beam_alsd, "rnnt"), (beam_alsd, "multiblank"), (beam_alsd_pp, "rnnt"),
                                          (beam_alsd_pp, "multiblank"), (beam_alsd_pp, "tdt")])
def test_alsd_finds_the_boosted_optimum(search, kind):
    model, frames, lengths = tiny(kind, "lstm", seed=3)
    opened = check_wide(search, model, frames, lengths, max_symbols_per_frame=2, beam_size=1024)
    assert opened > 0, "some paths must end mid-phrase"


@pytest.mark.parametrize("kind", list(TINY_HEADS))
def test_aes_finds_the_boosted_optimum(kind):
    model, frames, lengths = tiny(kind, "stateless", seed=3)

    def aes_paths(model, frames, limit, fusions):
        """AES++'s paths: at most 1 token staying at a frame, each frame left by a scored emission."""
        paths = all_paths(model, frames, limit, fusions)
        staying = lambda p: collections.Counter(t for t, d in zip(p.timestamps, p.durations) if d == 0)  # noqa: E731
        return [p for p in paths if max(staying(p).values(), default=0) <= 1]

    check_wide(beam_aes_pp, model, frames, lengths, aes_paths, max_symbols_per_frame=None,
               num_steps=1, beam_size=256, expansion_beta=8, expansion_gamma=math.inf)


@pytest.mark.parametrize("kind", list(TINY_HEADS))
@pytest.mark.parametrize("search", [beam_graves, beam_maes])
def test_frame_searches_sum_every_boosted_path(search, kind):
    """Pruning nothing, every finished sequence has its brute-force total, final bonus included."""
    model, frames, lengths = tiny(kind, "lstm", seed=4)
    wide = dict(beam_size=100_000, nbest=100_000)
    if search is beam_maes:
        wide.update(expansion_beta=100, expansion_gamma=math.inf, num_steps=2)
    boost, per_utterance = tiny_boost()
    batched = search(model, frames, lengths, max_symbols_per_frame=2, fusions=[boost], **wide).nbest
    paths = [all_paths(model, frames[b, :length], 2, per_utterance[b]) for b, length in enumerate(lengths.tolist())]
    for b in range(len(paths)):
        by_sequence = sequence_scores(paths[b])
        assert len(batched[b]) == len(by_sequence)
        assert tuple(batched[b][0].tokens) == max(by_sequence, key=by_sequence.get)
        for hyp in batched[b]:
            assert hyp.score == pytest.approx(by_sequence[tuple(hyp.tokens)], abs=1e-9)
    best = search(model, frames, lengths, max_symbols_per_frame=2, fusions=[boost], merge="max", **wide).hypotheses()
    for b in range(len(paths)):
        optimum = best_path(paths[b])
        assert alignment(best[b]) == (optimum.tokens, optimum.timestamps, optimum.durations)
        assert best[b].score == pytest.approx(optimum.score, abs=1e-9)


@pytest.mark.parametrize("search", [beam_wind, beam_wind_batched])
def test_wind_beams_find_the_boosted_optimum(search):
    model, frames, lengths = tiny_problem("rnnt", "stateless", seed=3)
    wide = 512 if search is beam_wind else 160
    check_wide(search, model, frames, lengths, max_symbols_per_frame=2, beam_size=wide, window_size=2)


SEARCHES = [(beam_alsd, {}), (beam_alsd_pp, {}), (beam_alsd_pp, dict(pruning="early")), (beam_aes_pp, {}),
            (beam_graves, {}), (beam_maes, {}), (beam_wind, dict(window_size=3)),
            (beam_wind_batched, dict(window_size=3))]


@pytest.mark.parametrize("search, options", SEARCHES)
def test_final_scores_reward_only_completed_phrases(search, options):
    """With narrow beams too, every n-best hypothesis' score is its acoustic score plus the weighted parts its
    completed phrases earned (what the reference adds up): an unfinished phrase's bonus is given back."""
    kind = "rnnt"
    model = model_for(kind, "stateless", "label_heavy")
    frames, lengths = encoder_batch([24, 13, 0, 19], seed=6)
    boost, _, index, lists = boosted(model, frames, lengths, weight=1.5, seed=2)
    reference = ReferenceBoosting(lists, 0.5)
    max_symbols = None if search is beam_aes_pp else 3
    for merge in ("max", "logsumexp"):
        nbest = search(model, frames, lengths, max_symbols_per_frame=max_symbols, beam_size=4, nbest=3, merge=merge,
                       fusions=[boost], **options).nbest
        for b, hyps in enumerate(nbest):
            assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
            for hyp in hyps:
                _, states, _ = reference.score(hyp.tokens, index[b])
                earned = sum(reference.earned(s) for s in states)
                assert hyp.score == pytest.approx(hyp.am_score + 1.5 * earned, abs=1e-9)


# --- CUDA graphs for trees made per batch ------------------------------------------------------------------------

def test_graphs_decode_each_batch_s_own_tree_with_one_capture(monkeypatch):
    """Per-request phrases make a new tree (view) per batch: the graphs read it from buffers of the tree's padded
    shapes, so batches with other trees of the same shapes reuse one capture and still decode with their own tree
    (graph replay run eagerly on the CPU; the real graphs are in test_boosting_in_cuda_graphs_equals_cpu)."""
    import warnings

    from graph_fakes import replay_eagerly
    from transdec.decoding.beam import alsd_pp_graphs
    from transdec.decoding.beam.alsd_pp import AlsdPlusOptions
    from transdec.decoding.cuda import graph_cache, search_graphs
    from transdec.decoding.cuda.graph_cache import CudaGraphFallbackWarning
    from transdec.decoding.greedy import label_looping_graphs
    from transdec.model.synthetic import random_decoder

    replay_eagerly(monkeypatch, label_looping_graphs, search_graphs)
    model = random_decoder(HEADS["tdt"], "lstm", encoder_dim=16, num_layers=2, blank_rate=0.3, seed=11,
                           dtype=torch.float64)
    graph_cache.FAILED_MODES.clear()
    try:
        boosts = []
        for seed in range(3):
            frames, lengths = encoder_batch([24, 13, 7, 24], seed=seed)
            boost, _, _, _ = boosted(model, frames, lengths, seed=seed)
            boosts.append((frames, lengths, boost))
        keys = {boost.scorer.graph_key() for _, _, boost in boosts}
        assert len(keys) == 1 and len({boost for _, _, boost in boosts}) == 3  # three trees, one shape
        options = AlsdPlusOptions(beam_size=3, nbest=2, max_symbols_per_frame=3, cuda_graphs="step_graphs")
        for frames, lengths, boost in boosts:
            with warnings.catch_warnings():
                warnings.simplefilter("error", CudaGraphFallbackWarning)
                greedy = label_looping_graphs.decode_with_graphs(model, frames, lengths, 3, 1, "step_graphs",
                                                                 fusions=[boost])
                beam = alsd_pp_graphs.decode_with_graphs(model, frames, lengths, options, [boost])
            assert_same_hypotheses(greedy.hypotheses(), greedy_reference(
                model, frames, lengths, max_symbols_per_frame=3, fusions=[boost]).hypotheses())
            expected = beam_alsd_pp(model, frames, lengths, options, fusions=[boost]).nbest
            assert all(len(g) == len(e) and all(same(a, b) for a, b in zip(g, e))
                       for g, e in zip(beam.nbest, expected))
        assert len(graph_cache.GRAPHS[model]) == 2  # one graph set for greedy, one for beam search
    finally:
        graph_cache.GRAPHS.pop(model, None)
        graph_cache.FAILED_MODES.clear()


# --- CUDA -----------------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", list(HEADS))
def test_boosting_in_cuda_graphs_equals_cpu(kind):
    """Label-looping and ALSD++ capture the boosting tree in their CUDA graphs (it is graph-safe): the same results
    as eager decoding on the CPU."""
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch(LENGTHS, seed=7)
    boost, _, _, _ = boosted(model, frames, lengths)
    gpu_model = copy.deepcopy(model).to("cuda")
    gpu_boost = boost.to("cuda")
    expected = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3, fusions=[boost]).hypotheses()
    for mode in ("step_graphs", "off"):
        got = greedy_label_looping(gpu_model, frames.cuda(), lengths.cuda(), max_symbols_per_frame=3,
                                   cuda_graphs=mode, fusions=[gpu_boost]).hypotheses()
        assert_same_hypotheses(got, expected)
    expected = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=3,
                            fusions=[boost]).nbest
    for mode in ("step_graphs", "off"):
        got = beam_alsd_pp(gpu_model, frames.cuda(), lengths.cuda(), max_symbols_per_frame=3, beam_size=4, nbest=3,
                           cuda_graphs=mode, fusions=[gpu_boost]).nbest
        for got_list, expected_list in zip(got, expected):
            assert len(got_list) == len(expected_list) and all(same(a, b) for a, b in zip(got_list, expected_list))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_per_batch_trees_share_one_capture_on_cuda():
    """Three batches, each with its own per-utterance tree of the same padded shapes: one graph set per decoder, and
    each batch decoded with its own tree as on the CPU."""
    from transdec.decoding.beam.alsd_pp_graphs import NAME as ALSD_GRAPHS
    from transdec.decoding.cuda import graph_cache

    model = model_for("tdt", "lstm", "label_heavy")
    gpu_model = copy.deepcopy(model).to("cuda")
    for seed in range(3):
        frames, lengths = encoder_batch([24, 13, 7, 24], seed=seed)
        boost, _, _, _ = boosted(model, frames, lengths, seed=seed)
        gpu_boost = boost.to("cuda")
        expected = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3, fusions=[boost]).hypotheses()
        got = greedy_label_looping(gpu_model, frames.cuda(), lengths.cuda(), max_symbols_per_frame=3,
                                   cuda_graphs="step_graphs", fusions=[gpu_boost]).hypotheses()
        assert_same_hypotheses(got, expected)
        expected = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=3,
                                fusions=[boost]).nbest
        got = beam_alsd_pp(gpu_model, frames.cuda(), lengths.cuda(), max_symbols_per_frame=3, beam_size=4, nbest=3,
                           cuda_graphs="step_graphs", fusions=[gpu_boost]).nbest
        for got_list, expected_list in zip(got, expected):
            assert len(got_list) == len(expected_list) and all(same(a, b) for a, b in zip(got_list, expected_list))
    keys = list(graph_cache.GRAPHS[gpu_model])
    assert len([key for key in keys if key[0] == ALSD_GRAPHS]) == 1 and len(keys) == 2
