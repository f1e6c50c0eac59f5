"""AES++ and batched WIND beam search as CUDA graphs run them, on the CPU: the in-place steps (an AES++ frame, a
WIND round) against the default search, the fixed capacity, the ``cuda_graphs`` option, and the graph wrappers with
each "replay" running the captured step eagerly (float64 random models; the real graphs are tested in
test_beam_cuda.py)."""

import argparse
import itertools
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arpa_fixtures import random_arpa
from graph_fakes import replay_eagerly
from helpers import HEADS, PREDICTORS, BigramScorer, boosted, encoder_batch, rerun_in_place, same
from helpers import model_for as shared_model_for
from transdec.decoding import DecodingConfig, Fusion, decode
from transdec.decoding.beam import aes_pp_graphs, wind_batched_graphs
from transdec.decoding.beam.aes_pp import AesOptions, AesSearch, beam_aes_pp
from transdec.decoding.beam.wind_batched import WindBatchedOptions, WindSearch, beam_wind_batched
from transdec.decoding.cuda import graph_cache, search_graphs
from transdec.decoding.cuda.graph_cache import CudaGraphFallbackWarning
from transdec.decoding.flags import add_decoding_arguments, decoding_configs
from transdec.decoding.scoring import Scoring
from transdec.lm import NGramLM
from transdec.model.synthetic import random_decoder

BATCHES = [[0, 1, 24, 13, 7, 19], [11], [24, 24, 3]]


@pytest.fixture(autouse=True)
def inference_mode():
    """The searches run under beam_aes_pp's inference mode; here they are driven directly."""
    with torch.inference_mode():
        yield


def model_for(kind: str, predictor: str, profile: str = "label_heavy"):
    """The shared (cached) models, made outside inference mode so that other tests can train them."""
    with torch.inference_mode(False):
        return shared_model_for(kind, predictor, profile)


def in_place_result(model, frames, lengths, fusions=(), search=AesSearch, options_class=AesOptions, **options):
    search = search(model, frames, lengths, options_class(**options), Scoring(model.head, fusions), in_place=True)
    search.run()
    return search.result()


def assert_same_nbest(got, expected):
    """Equal n-best lists: tokens, timestamps and durations exactly, scores and log-probs to 1e-9."""
    assert [len(n) for n in got] == [len(n) for n in expected]
    for got_list, expected_list in zip(got, expected):
        assert all(same(a, b) and a.am_score == pytest.approx(b.am_score, abs=1e-9)
                   for a, b in zip(got_list, expected_list))


def assert_same_result(got, expected):
    assert_same_nbest(got.nbest, expected.nbest)
    assert (got.stats.predictor_calls, got.stats.joint_calls) == (
        expected.stats.predictor_calls, expected.stats.joint_calls)


@pytest.mark.parametrize("kind, predictor", list(itertools.product(HEADS, PREDICTORS)))
@settings(max_examples=6, deadline=None)
@given(beam_size=st.integers(1, 4), merge=st.sampled_from(["max", "logsumexp", "none"]),
       pruning=st.sampled_from(["late", "early"]), num_steps=st.integers(1, 3),
       max_symbols=st.sampled_from([None, 1, 2, 3]), beta=st.integers(0, 2), batch=st.integers(0, 2))
def test_in_place_frames_equal_the_default_search(kind, predictor, beam_size, merge, pruning, num_steps,
                                                  max_symbols, beta, batch):
    """Every option, head and predictor: the n-best lists and the call counts of the default search, frames
    without a hypothesis to expand and expansion steps with nothing left to expand included."""
    model = model_for(kind, predictor)
    lengths = BATCHES[batch]
    frames, lengths_tensor = encoder_batch(lengths, seed=batch)  # NaN padding: a read of it would show
    options = dict(beam_size=beam_size, nbest=beam_size, merge=merge, pruning=pruning, num_steps=num_steps,
                   max_symbols_per_frame=max_symbols, expansion_beta=beta)
    expected = beam_aes_pp(model, frames, lengths_tensor, **options)
    assert_same_result(in_place_result(model, frames, lengths_tensor, **options), expected)


@pytest.mark.parametrize("predictor", PREDICTORS)
@settings(max_examples=12, deadline=None)
@given(beam_size=st.integers(1, 4), merge=st.sampled_from(["max", "logsumexp", "none"]), window=st.sampled_from([1, 2, 3, 8]),
       max_symbols=st.integers(1, 3), batch=st.integers(0, 2), length_norm=st.booleans())
def test_in_place_wind_rounds_equal_the_default_search(predictor, beam_size, merge, window, max_symbols, batch,
                                                       length_norm):
    model = model_for("rnnt", predictor)
    lengths = BATCHES[batch]
    frames, lengths_tensor = encoder_batch(lengths, seed=batch)
    options = dict(beam_size=beam_size, nbest=beam_size, merge=merge, window_size=window,
                   max_symbols_per_frame=max_symbols, length_norm=length_norm)
    expected = beam_wind_batched(model, frames, lengths_tensor, **options)
    got = in_place_result(model, frames, lengths_tensor, search=WindSearch, options_class=WindBatchedOptions, **options)
    assert_same_result(got, expected)


def test_in_place_wind_rounds_with_fusions_and_their_bound(tmp_path):
    """The n-gram LM's state travels with the store's; ``T * (m + 1)`` rounds bound the tree, and the in-place
    search needs the ``m``."""
    model = model_for("rnnt", "lstm")
    frames, lengths = encoder_batch([24, 13, 7, 0], seed=6, extra_padding=0)
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(HEADS["rnnt"].num_tokens, 3, seed=7, missing_tokens=1))
    fusions = [Fusion(NGramLM.load(path, HEADS["rnnt"].num_tokens, dtype=torch.float64), 0.5, token_bonus=0.2)]
    options = dict(beam_size=4, nbest=3, window_size=3, max_symbols_per_frame=2)
    search = WindSearch(model, frames, lengths, WindBatchedOptions(**options), Scoring(model.head, fusions),
                        in_place=True)
    search.run()
    assert_same_result(search.result(), beam_wind_batched(model, frames, lengths, fusions=fusions, **options))
    assert search.state.hyps.steps_taken() <= search.state.hyps.capacity == 24 * 3
    with pytest.raises(ValueError, match="max_symbols_per_frame"):
        WindSearch(model, frames, lengths, WindBatchedOptions(max_symbols_per_frame=None), Scoring(model.head),
                   in_place=True)


@pytest.mark.parametrize("kind", list(HEADS))
def test_in_place_frames_with_fusions_equal_the_default_search(kind, tmp_path):
    """A scorer's state travels with the predictor's: a bigram scorer, and the n-gram LM with early pruning."""
    model = model_for(kind, "lstm")
    frames, lengths = encoder_batch([24, 13, 7, 0], seed=6)
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(HEADS[kind].num_tokens, 3, seed=7, missing_tokens=1))
    lm = NGramLM.load(path, HEADS[kind].num_tokens, dtype=torch.float64)
    for fusions, pruning in (([Fusion(BigramScorer(HEADS[kind].num_tokens, seed=3), 0.8, token_bonus=0.1,
                                      blank_scoring=True)], "late"),
                             ([Fusion(lm, 0.5, token_bonus=0.2)], "early")):
        options = dict(beam_size=4, nbest=3, pruning=pruning, merge="logsumexp")
        expected = beam_aes_pp(model, frames, lengths, fusions=fusions, **options)
        assert_same_result(in_place_result(model, frames, lengths, fusions, **options), expected)


@pytest.mark.parametrize("search, options_class, kind", [(AesSearch, AesOptions, "tdt"), (AesSearch, AesOptions, "rnnt"),
                                                          (WindSearch, WindBatchedOptions, "rnnt")])
def test_in_place_steps_with_per_utterance_boosting_equal_the_default_search(search, options_class, kind):
    """A boosting view (a phrase list per utterance) and its final bonus, in place as by default."""
    model = model_for(kind, "lstm")
    frames, lengths = encoder_batch([24, 13, 7, 0, 19], seed=8)
    boost, _, _, _ = boosted(model, frames, lengths, seed=2)
    options = dict(beam_size=4, nbest=3, max_symbols_per_frame=3)
    default = search(model, frames, lengths, options_class(**options), Scoring(model.head, [boost]))
    default.run()
    assert_same_result(in_place_result(model, frames, lengths, [boost], search=search, options_class=options_class,
                                       **options), default.result())


def test_in_place_search_reuses_its_tensors_for_new_inputs():
    """What replay relies on: one search made on a frame bucket, new batches written into its inputs, start()."""
    model = model_for("tdt", "lstm")
    buffer_frames, buffer_lengths = torch.zeros(4, 64, 16, dtype=torch.float64), torch.zeros(4, dtype=torch.long)
    options = AesOptions(beam_size=4, nbest=3, num_steps=2)
    search = AesSearch(model, buffer_frames, buffer_lengths, options, Scoring(model.head), in_place=True)
    state = search.state
    tensors = {name: value for name, value in vars(state.hyps).items() if isinstance(value, torch.Tensor)}
    frame, flag = state.frame, state.active_any
    for seed, lengths in enumerate([[24, 3, 0, 17], [1, 24, 24, 9], [0, 0, 0, 0]]):
        frames, lengths_tensor = encoder_batch(lengths, seed=seed)
        rerun_in_place(search, frames, lengths_tensor)
        assert_same_result(search.result(), beam_aes_pp(model, frames, lengths_tensor, options))
        # Every frame wrote a node per expansion step, and the storage holds the whole frame bucket's.
        assert state.hyps.steps_taken() == max(lengths) * 3 <= state.hyps.capacity == 64 * 3
    assert search.state is state and state.frame is frame and state.active_any is flag
    assert all(getattr(state.hyps, name) is value for name, value in tensors.items())


@pytest.mark.parametrize("strategy, search, options_class", [("beam_aes_pp", beam_aes_pp, AesOptions),
                                                             ("beam_wind_batched", beam_wind_batched, WindBatchedOptions)])
def test_cuda_graphs_option(strategy, search, options_class):
    model = model_for("rnnt", "lstm")
    frames, lengths = encoder_batch([9, 4], seed=0)
    with pytest.raises(ValueError, match="cuda_graphs must be one of"):
        search(model, frames, lengths, cuda_graphs="on")
    fusions = [Fusion(BigramScorer(HEADS["rnnt"].num_tokens, seed=0), 0.5)]
    with pytest.raises(ValueError, match="takes only graph-safe fusions"):
        search(model, frames, lengths, cuda_graphs="step_graphs", fusions=fusions)
    expected = search(model, frames, lengths, beam_size=3, nbest=2, cuda_graphs="off").nbest
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # on a CPU no mode tries graphs, so none warns
        for mode in ("auto", "while_loops", "step_graphs"):
            config = DecodingConfig(strategy, beam_size=3, nbest=2, cuda_graphs=mode)
            assert_same_nbest(decode(model, frames, lengths, config).nbest, expected)
    parser = argparse.ArgumentParser()
    add_decoding_arguments(parser, default="greedy_label")
    config, = decoding_configs(parser.parse_args(["--decoding", strategy, "--cuda-graphs", "step_graphs"]))
    assert config.options == options_class(cuda_graphs="step_graphs")


@pytest.fixture
def eager_replay(monkeypatch):
    """Capture replaced by "replay = run the step eagerly" and conditional graphs interpreted on the host, so that
    the graph wrappers' loops, self-check, cache and fallback run on the CPU; a fresh model whose graph sets are
    dropped afterwards."""
    replay_eagerly(monkeypatch, search_graphs, interpret_conditionals=True)
    graph_cache.FAILED_MODES.clear()
    with torch.inference_mode(False):
        model = random_decoder(HEADS["tdt"], "lstm", encoder_dim=16, num_layers=2, blank_rate=0.3, seed=11,
                               dtype=torch.float64)
    yield model
    graph_cache.GRAPHS.pop(model, None)
    graph_cache.FAILED_MODES.clear()


def test_step_graphs_equal_eager_and_reuse_the_graphs(eager_replay, tmp_path):
    model = eager_replay
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(HEADS["tdt"].num_tokens, 3, seed=7, missing_tokens=1))
    lm = NGramLM.load(path, HEADS["tdt"].num_tokens, dtype=torch.float64)
    for fusions in ((), (Fusion(lm, 0.6, token_bonus=0.1),)):
        options = AesOptions(beam_size=4, nbest=3, merge="logsumexp", cuda_graphs="step_graphs")
        for seed, lengths in enumerate([[24, 3, 0, 17], [1, 24, 24, 9], [70, 2, 65, 0]]):
            frames, lengths_tensor = encoder_batch(lengths, seed=seed)
            with warnings.catch_warnings():
                warnings.simplefilter("error", CudaGraphFallbackWarning)
                got = aes_pp_graphs.decode_with_graphs(model, frames, lengths_tensor, options, fusions)
            expected = beam_aes_pp(model, frames, lengths_tensor, beam_size=4, nbest=3, merge="logsumexp",
                                   cuda_graphs="off", fusions=fusions)
            assert got is not None
            assert_same_result(got, expected)
    # Per fusion set, frame buckets 64 (the first two batches) and 128.
    keys = [key for key in graph_cache.GRAPHS[model] if key[0] == aes_pp_graphs.NAME]
    assert sorted((len(key[7]), key[2]) for key in keys) == [(0, 64), (0, 128), (1, 64), (1, 128)]


def test_wind_step_graphs_equal_eager(monkeypatch):
    replay_eagerly(monkeypatch, search_graphs)
    model = model_for("rnnt", "lstm")
    options = WindBatchedOptions(beam_size=4, nbest=3, window_size=4, max_symbols_per_frame=3, cuda_graphs="step_graphs")
    try:
        for seed, lengths in enumerate([[24, 3, 0, 17], [1, 24, 24, 9]]):
            frames, lengths_tensor = encoder_batch(lengths, seed=seed)
            with warnings.catch_warnings():
                warnings.simplefilter("error", CudaGraphFallbackWarning)
                got = wind_batched_graphs.decode_with_graphs(model, frames, lengths_tensor, options)
            assert_same_result(got, beam_wind_batched(model, frames, lengths_tensor, options))
        assert [key[2] for key in graph_cache.GRAPHS[model] if key[0] == wind_batched_graphs.NAME] == [64]
        with pytest.warns(CudaGraphFallbackWarning, match="max_symbols_per_frame"):
            assert wind_batched_graphs.decode_with_graphs(model, frames, lengths_tensor,
                                                          WindBatchedOptions(max_symbols_per_frame=None)) is None
    finally:
        graph_cache.GRAPHS.pop(model, None)
        graph_cache.FAILED_MODES.clear()


def test_the_while_loop_runs_on_the_state_flag(eager_replay):
    """One graph for the whole search: the frame graph inside a While on ``state.active_any`` (interpreted)."""
    model = eager_replay
    options = AesOptions(beam_size=3, nbest=2, num_steps=3, cuda_graphs="while_loops")
    graphed = search_graphs.GraphedSteps(
        lambda fusions, frames, lengths, in_place: AesSearch(model, frames, lengths, options,
                                                             Scoring(model.head, fusions), in_place=in_place),
        4, 64, 16, torch.float64, torch.device("cpu"), "while_loops")
    for seed, lengths in enumerate([[24, 3, 0, 17], [1, 24, 24, 9], [0, 0, 0, 0]]):
        frames, lengths_tensor = encoder_batch(lengths, seed=seed)
        assert_same_result(graphed.decode(frames, lengths_tensor), beam_aes_pp(model, frames, lengths_tensor, options))


def test_graphs_that_disagree_with_eager_decoding_fall_back(eager_replay, monkeypatch):
    def broken_capture(steps, pool, stream, keep):
        def replay():  # a frame "graph" that also moves every hypothesis a frame on
            steps()
            if steps.__name__ == "step":
                steps.__self__.state.hyps.time.add_(1)

        return type("Graph", (), {"replay": staticmethod(replay)})()

    monkeypatch.setattr(search_graphs, "capture_graph", broken_capture)
    frames, lengths = encoder_batch([24, 13], seed=0)
    options = AesOptions(beam_size=2, cuda_graphs="step_graphs")
    with pytest.warns(CudaGraphFallbackWarning, match="differently from eager decoding"):
        assert aes_pp_graphs.decode_with_graphs(eager_replay, frames, lengths, options) is None
    assert graph_cache.FAILED_MODES[aes_pp_graphs.NAME, "step_graphs", frames.device]
