"""ALSD++ as CUDA graphs run it, on the CPU: the in-place steps against the default search, fixed-capacity
hypotheses against growing ones, the ``cuda_graphs`` option, and the graph host loop with each "replay" running
the captured step eagerly (float64 random models; the real graphs are tested in test_beam_cuda.py).
"""

import itertools
import types
import warnings

import pytest
import torch

from graph_fakes import replay_eagerly
from helpers import HEADS, BigramScorer, encoder_batch, rerun_in_place, same
from helpers import model_for as shared_model_for
from transdec.decoding import DecodingConfig, Fusion, decode
from transdec.decoding.beam import alsd_pp_graphs as beam_graphs
from transdec.decoding.cuda import graph_cache, search_graphs
from transdec.decoding.beam.alsd_pp import AlsdPlusOptions, AlsdSearch, beam_alsd_pp
from transdec.decoding.beam_hyps import BatchedBeamHyps
from transdec.decoding.flags import add_decoding_arguments, decoding_configs
from transdec.decoding.cuda.graph_cache import CudaGraphFallbackWarning
from transdec.decoding.scoring import Scoring
from transdec.model.synthetic import random_decoder

BATCHES = [[0, 1, 24, 13, 7, 19], [11], [24, 24, 3]]


@pytest.fixture(autouse=True)
def inference_mode():
    """The searches run under beam_alsd_pp's inference mode; here they are driven directly."""
    with torch.inference_mode():
        yield


def model_for(kind: str, predictor: str, profile: str):
    """The models other test files share (cached): made outside inference mode, so that tests which decode with
    autograd on can still use them."""
    with torch.inference_mode(False):
        return shared_model_for(kind, predictor, profile)


def in_place_search(model, frames, lengths, max_symbols, fusions=(), **options) -> AlsdSearch:
    options = AlsdPlusOptions(max_symbols_per_frame=max_symbols, **options)
    return AlsdSearch(model, frames, lengths, options, Scoring(model.head, fusions), in_place=True)


def assert_same_nbest(got, expected):
    """Equal n-best lists: tokens, timestamps and durations exactly, scores and log-probs to 1e-9."""
    assert [len(n) for n in got] == [len(n) for n in expected]
    for got_list, expected_list in zip(got, expected):
        assert all(same(a, b) and a.am_score == pytest.approx(b.am_score, abs=1e-9)
                   for a, b in zip(got_list, expected_list))


@pytest.mark.parametrize("pruning", ["late", "early"])
@pytest.mark.parametrize("merge", ["max", "logsumexp"])
@pytest.mark.parametrize("beam_size", [1, 2, 4])
@pytest.mark.parametrize("kind, predictor", list(itertools.product(HEADS, ["lstm", "stateless"])))
def test_in_place_steps_equal_the_default_search(kind, predictor, beam_size, merge, pruning):
    model = model_for(kind, predictor, "label_heavy")
    options = dict(beam_size=beam_size, nbest=beam_size, merge=merge, pruning=pruning)
    for seed, lengths in enumerate(BATCHES):
        frames, lengths_tensor = encoder_batch(lengths, seed=seed)  # NaN padding: a read of it would show
        expected = beam_alsd_pp(model, frames, lengths_tensor, max_symbols_per_frame=3, **options)
        search = in_place_search(model, frames, lengths_tensor, 3, **options)
        search.run()
        got = search.result()
        assert_same_nbest(got.nbest, expected.nbest)
        assert (got.stats.predictor_calls, got.stats.joint_calls) == (
            expected.stats.predictor_calls, expected.stats.joint_calls)


def test_in_place_steps_with_a_fusion_equal_the_default_search():
    """The in-place steps carry a scorer's state like the predictor's."""
    model = model_for("tdt", "stateless", "label_heavy")
    frames, lengths = encoder_batch([24, 13, 7], seed=6)
    fusions = [Fusion(BigramScorer(HEADS["tdt"].num_tokens, seed=3), 0.8, token_bonus=0.1, blank_scoring=True)]
    expected = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=2, fusions=fusions).nbest
    search = in_place_search(model, frames, lengths, 3, fusions, beam_size=4, nbest=2)
    search.run()
    assert_same_nbest(search.nbest(), expected)


def test_in_place_search_reuses_its_tensors_for_new_inputs():
    """What replay relies on: one search made on a frame bucket, new batches written into its inputs, start()."""
    model = model_for("multiblank", "lstm", "label_heavy")
    buffer_frames, buffer_lengths = torch.zeros(4, 64, 16, dtype=torch.float64), torch.zeros(4, dtype=torch.long)
    search = in_place_search(model, buffer_frames, buffer_lengths, 3, beam_size=4, nbest=3)
    state = search.state
    tensors = {name: value for name, value in vars(state.hyps).items() if isinstance(value, torch.Tensor)}
    for seed, lengths in enumerate([[24, 3, 0, 17], [1, 24, 24, 9], [0, 0, 0, 0]]):
        frames, lengths_tensor = encoder_batch(lengths, seed=seed)
        rerun_in_place(search, frames, lengths_tensor)
        expected = beam_alsd_pp(model, frames, lengths_tensor, max_symbols_per_frame=3, beam_size=4, nbest=3)
        assert_same_nbest(search.nbest(), expected.nbest)
        assert search.decoding_stats().joint_calls == expected.stats.joint_calls
    assert search.state is state and all(getattr(state.hyps, name) is value for name, value in tensors.items())


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("max_symbols", [1, 2, 3])
def test_the_fixed_capacity_bounds_every_search(kind, max_symbols):
    """``T * (max_symbols_per_frame + 1)`` steps: steps_taken() raises past it, and an RNN-T search of one
    hypothesis with one symbol per frame (a token, then the forced blank, at every frame) fills it exactly."""
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch([24, 0, 24, 5], seed=max_symbols, extra_padding=0)
    search = in_place_search(model, frames, lengths, max_symbols, beam_size=4)
    search.run()
    assert search.state.hyps.capacity == 24 * (max_symbols + 1)
    assert search.state.hyps.steps_taken() <= search.state.hyps.capacity
    if kind == "rnnt" and max_symbols == 1:
        with torch.inference_mode(False):
            never_blank = random_decoder(HEADS["rnnt"], "lstm", encoder_dim=16, seed=1, dtype=torch.float64)
            with torch.no_grad():
                never_blank.joint.output.bias[HEADS["rnnt"].blank_id] -= 1000.0
        search = in_place_search(never_blank, frames, lengths, max_symbols, beam_size=1)
        search.run()
        assert search.state.hyps.steps_taken() == search.state.hyps.capacity


def test_in_place_search_needs_a_symbol_limit():
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([5], seed=0)
    with pytest.raises(ValueError, match="max_symbols_per_frame"):
        in_place_search(model, frames, lengths, None)


def random_tree_steps(hyps_list, steps: int, seed: int) -> None:
    """Drive several BatchedBeamHyps through the same random reorders, steps and assignments."""
    generator = torch.Generator().manual_seed(seed)
    batch_size, beam = hyps_list[0].scores.shape
    for step in range(steps):
        parents = torch.randint(0, beam, (batch_size, beam), generator=generator)
        tokens = torch.randint(-1, 5, (batch_size, beam), generator=generator)
        durations = torch.randint(0, 3, (batch_size, beam), generator=generator)
        logprobs = -torch.rand(batch_size, beam, generator=generator, dtype=torch.float64)
        scores = -torch.rand(batch_size, beam, generator=generator, dtype=torch.float64).cumsum(1) - step
        scores[torch.rand(batch_size, beam, generator=generator) < 0.1] = -torch.inf
        for hyps in hyps_list:
            hyps.reorder(parents)
            hyps.add_step(parents, tokens, hyps.time, durations, logprobs)
            hyps.assign(scores=scores, am_scores=hyps.am_scores + logprobs, time=hyps.time + (tokens < 0))


def test_fixed_capacity_hyps_equal_growing_ones():
    growing = BatchedBeamHyps(3, 4, torch.device("cpu"), torch.float64, capacity=8)
    fixed = BatchedBeamHyps(3, 4, torch.device("cpu"), torch.float64, fixed_capacity=150)
    node_tokens = fixed.node_tokens
    random_tree_steps([growing, fixed], 150, seed=0)
    assert growing.steps == fixed.steps_taken() == 150 and growing.capacity > 8  # it grew, and fixed did not
    assert fixed.node_tokens is node_tokens and fixed.steps is None
    for name in ("scores", "am_scores", "time", "tokens_at_frame", "lengths", "last_tokens", "hashes"):
        assert torch.equal(getattr(growing, name), getattr(fixed, name)), name
    assert fixed.best(4) == growing.best(4) and fixed.best(2, length_norm=True) == growing.best(2, length_norm=True)
    fixed.reset()
    fresh = BatchedBeamHyps(3, 4, torch.device("cpu"), torch.float64, fixed_capacity=150)
    random_tree_steps([fixed, fresh], 20, seed=1)
    assert fixed.best(4) == fresh.best(4)


def test_a_fixed_capacity_overrun_is_reported_not_written_past():
    hyps = BatchedBeamHyps(2, 2, torch.device("cpu"), torch.float64, fixed_capacity=3)
    random_tree_steps([hyps], 4, seed=0)
    with pytest.raises(RuntimeError, match="overran the fixed capacity of 3"):
        hyps.best(1)


def test_cuda_graphs_option():
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([9, 4], seed=0)
    with pytest.raises(ValueError, match="cuda_graphs must be one of"):
        DecodingConfig("beam_alsd_pp", cuda_graphs="always")
    with pytest.raises(ValueError, match="cuda_graphs must be one of"):
        beam_alsd_pp(model, frames, lengths, cuda_graphs="on")
    fusions = [Fusion(BigramScorer(HEADS["rnnt"].num_tokens, seed=0), 0.5)]
    with pytest.raises(ValueError, match="takes only graph-safe fusions"):
        beam_alsd_pp(model, frames, lengths, cuda_graphs="step_graphs", fusions=fusions)
    fused = [beam_alsd_pp(model, frames, lengths, cuda_graphs=mode, fusions=fusions).nbest for mode in ("auto", "off")]
    assert_same_nbest(*fused)
    expected = beam_alsd_pp(model, frames, lengths, beam_size=3, nbest=2, cuda_graphs="off").nbest
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # on a CPU no mode tries graphs, so none warns
        for mode in ("auto", "while_loops", "step_graphs"):
            config = DecodingConfig("beam_alsd_pp", beam_size=3, nbest=2, cuda_graphs=mode)
            assert_same_nbest(decode(model, frames, lengths, config).nbest, expected)


def test_cuda_graphs_flag_reaches_alsd_pp():
    parser = __import__("argparse").ArgumentParser()
    add_decoding_arguments(parser, default="greedy_label")
    for mode in ("while_loops", "step_graphs"):
        config, = decoding_configs(parser.parse_args(["--decoding", "beam_alsd_pp", "--cuda-graphs", mode]))
        assert config.options == AlsdPlusOptions(cuda_graphs=mode)


@pytest.fixture
def eager_replay(monkeypatch):
    """Graph capture replaced by "replay = run the step eagerly", so that beam_graphs' host loop, self-check,
    cache and fallback run on the CPU; yields a fresh model whose cached graph sets are dropped afterwards."""
    replay_eagerly(monkeypatch, search_graphs)
    graph_cache.FAILED_MODES.clear()
    with torch.inference_mode(False):
        model = random_decoder(HEADS["tdt"], "lstm", encoder_dim=16, num_layers=2, blank_rate=0.3, seed=11,
                               dtype=torch.float64)
    yield model
    graph_cache.GRAPHS.pop(model, None)
    graph_cache.FAILED_MODES.clear()


def test_graph_host_loop_equals_eager_and_reuses_the_graphs(eager_replay):
    model = eager_replay
    options = AlsdPlusOptions(beam_size=4, nbest=3, max_symbols_per_frame=3, cuda_graphs="step_graphs")
    for seed, lengths in enumerate([[24, 3, 0, 17], [1, 24, 24, 9], [70, 2, 65, 0]]):
        frames, lengths_tensor = encoder_batch(lengths, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CudaGraphFallbackWarning)
            got = beam_graphs.decode_with_graphs(model, frames, lengths_tensor, options)
        expected = beam_alsd_pp(model, frames, lengths_tensor, max_symbols_per_frame=3, beam_size=4, nbest=3, cuda_graphs="off")
        assert got is not None
        assert_same_nbest(got.nbest, expected.nbest)
        assert (got.stats.predictor_calls, got.stats.joint_calls) == (
            expected.stats.predictor_calls, expected.stats.joint_calls)
    # Frame buckets 64 (the first two batches) and 128.
    assert sorted(key[2] for key in graph_cache.GRAPHS[model]) == [64, 128]


def test_graph_host_loop_with_an_ngram_lm_equals_eager(eager_replay, tmp_path):
    from arpa_fixtures import random_arpa
    from transdec.lm import NGramLM

    model = eager_replay
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(HEADS["tdt"].num_tokens, 3, seed=7, missing_tokens=1))
    fusions = (Fusion(NGramLM.load(path, HEADS["tdt"].num_tokens, dtype=torch.float64), 0.6, token_bonus=0.1),)
    options = AlsdPlusOptions(beam_size=4, nbest=3, max_symbols_per_frame=3, cuda_graphs="step_graphs")
    for seed, lengths in enumerate([[24, 3, 0, 17], [1, 24, 24, 9]]):
        frames, lengths_tensor = encoder_batch(lengths, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CudaGraphFallbackWarning)
            got = beam_graphs.decode_with_graphs(model, frames, lengths_tensor, options, fusions)
        expected = beam_alsd_pp(model, frames, lengths_tensor, max_symbols_per_frame=3, beam_size=4, nbest=3, cuda_graphs="off",
                                fusions=fusions)
        assert_same_nbest(got.nbest, expected.nbest)
    assert [key[7] for key in graph_cache.GRAPHS[model]] == [fusions]  # one graph set, keyed on the fusions


def test_graphs_that_disagree_with_eager_decoding_fall_back(eager_replay, monkeypatch):
    model = eager_replay

    def broken_capture(steps, pool, stream, keep):
        def replay():  # a step "graph" that also skips a frame: its timestamps differ from eager decoding's
            steps()
            if steps.__name__ == "step":
                steps.__self__.state.hyps.time.add_(1)

        return types.SimpleNamespace(replay=replay)

    monkeypatch.setattr(search_graphs, "capture_graph", broken_capture)
    frames, lengths = encoder_batch([24, 13], seed=0)
    options = AlsdPlusOptions(beam_size=2, max_symbols_per_frame=3, cuda_graphs="step_graphs")
    with pytest.warns(CudaGraphFallbackWarning, match="differently from eager decoding"):
        assert beam_graphs.decode_with_graphs(model, frames, lengths, options) is None
    assert graph_cache.FAILED_MODES[beam_graphs.NAME, "step_graphs", frames.device]
    with pytest.warns(CudaGraphFallbackWarning, match="not usable here"):  # known to fail: not tried again
        assert beam_graphs.decode_with_graphs(model, frames, lengths, options) is None
    assert model not in graph_cache.GRAPHS or not graph_cache.GRAPHS[model]


def test_auto_skips_while_loops_where_conditional_nodes_cannot_run(eager_replay):
    """"auto" tries one graph per search first; where that cannot run (here: no CUDA device for the conditional
    nodes) it warns once why and replays step graphs."""
    frames, lengths = encoder_batch([24, 13], seed=0)
    options = AlsdPlusOptions(beam_size=2, max_symbols_per_frame=3)  # cuda_graphs="auto"
    with pytest.warns(CudaGraphFallbackWarning, match="'while_loops' of beam_alsd_pp is not usable here") as caught:
        got = beam_graphs.decode_with_graphs(eager_replay, frames, lengths, options)
    assert len(caught) == 1 and got is not None
    expected = beam_alsd_pp(eager_replay, frames, lengths, max_symbols_per_frame=3, beam_size=2, cuda_graphs="off")
    assert_same_nbest(got.nbest, expected.nbest)
    assert [key[6].cuda_graphs for key in graph_cache.GRAPHS[eager_replay]] == ["step_graphs"]


def test_graphs_need_a_symbol_limit(eager_replay):
    frames, lengths = encoder_batch([5], seed=0)
    options = AlsdPlusOptions(max_symbols_per_frame=None)
    with pytest.warns(CudaGraphFallbackWarning, match="max_symbols_per_frame"):
        assert beam_graphs.decode_with_graphs(eager_replay, frames, lengths, options) is None
