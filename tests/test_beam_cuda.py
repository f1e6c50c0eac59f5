"""Beam searches and the n-gram LM on a GPU give what they give on the CPU (float64, so bit-close); ALSD++ under
CUDA graphs gives what it gives eagerly, and ALSD++ and label-looping keep doing so with the n-gram LM fused inside
the graphs."""

import warnings

import pytest
import torch

from arpa_fixtures import random_arpa
from helpers import HEADS, assert_same_hypotheses, encoder_batch, model_for, same
from transdec.decoding import DecodingConfig, Fusion, decode, greedy_label_looping, greedy_reference
from transdec.decoding.cuda import graph_cache
from transdec.decoding.beam.aes_pp import beam_aes_pp
from transdec.decoding.beam.alsd_pp import beam_alsd_pp
from transdec.decoding.beam.aes_pp_graphs import NAME as AES_GRAPHS
from transdec.decoding.beam.alsd_pp_graphs import NAME as ALSD_GRAPHS
from transdec.decoding.beam.wind_batched_graphs import NAME as WIND_GRAPHS
from transdec.decoding.cuda.conditional_graphs import conditional_graphs_unavailable
from transdec.decoding.cuda.graph_cache import CudaGraphFallbackWarning
from transdec.decoding.beam.wind_batched import beam_wind_batched
from transdec.lm import NGramLM, ngram_kernels

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def on_cuda(model):
    import copy

    return copy.deepcopy(model).to("cuda")


@pytest.mark.parametrize("kind", list(HEADS))
def test_alsd_pp_on_cuda_equals_cpu(kind, tmp_path):
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch([0, 9, 24, 13], seed=3)
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(HEADS[kind].num_tokens, 3, seed=7, missing_tokens=1))
    lm = NGramLM.load(path, HEADS[kind].num_tokens, dtype=torch.float64)
    cpu = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=3, fusions=[Fusion(lm, 0.5)]).nbest
    gpu = beam_alsd_pp(on_cuda(model), frames.cuda(), lengths.cuda(), 3, beam_size=4, nbest=3,
                       fusions=[Fusion(lm.to("cuda"), 0.5)]).nbest
    for a_list, b_list in zip(cpu, gpu):
        assert len(a_list) == len(b_list) and all(same(a, b) for a, b in zip(a_list, b_list))


@pytest.mark.parametrize("search, kind", [(beam_aes_pp, "rnnt"), (beam_aes_pp, "tdt"), (beam_aes_pp, "multiblank"),
                                          (beam_wind_batched, "rnnt")])
def test_frame_searches_on_cuda_equal_cpu(search, kind):
    model = model_for(kind, "stateless", "label_heavy")
    frames, lengths = encoder_batch([0, 9, 24, 13], seed=4)
    cpu = search(model, frames, lengths, beam_size=4, nbest=3).nbest
    gpu = search(on_cuda(model), frames.cuda(), lengths.cuda(), beam_size=4, nbest=3).nbest
    for a_list, b_list in zip(cpu, gpu):
        assert len(a_list) == len(b_list) and all(same(a, b) for a, b in zip(a_list, b_list))


def test_ngram_scores_on_cuda_equal_cpu(tmp_path):
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(40, 4, seed=2, ngrams_per_order=200))
    lm = NGramLM.load(path, 40, dtype=torch.float64)
    states = torch.arange(lm.backoff.shape[0])
    tokens = torch.randint(0, 40, states.shape, generator=torch.Generator().manual_seed(0))
    gpu = lm.to("cuda")
    expected = lm.token_logprobs(states)
    torch.testing.assert_close(gpu.token_logprobs(states.cuda()).cpu(), expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(ngram_kernels.token_logprobs_searched(gpu, states.cuda()).cpu(), expected,
                               rtol=1e-12, atol=0)
    if ngram_kernels.kernel_available(torch.device("cuda")):
        torch.testing.assert_close(ngram_kernels.token_logprobs_kernel(gpu, states.cuda()).cpu(), expected,
                                   rtol=1e-12, atol=0)
    assert torch.equal(gpu.advance(states.cuda(), tokens.cuda()).cpu(), lm.advance(states, tokens))


def ngram_lm(kind: str, folder) -> NGramLM:
    path = folder / "lm.arpa"
    path.write_text(random_arpa(HEADS[kind].num_tokens, 3, seed=7, missing_tokens=1))
    return NGramLM.load(path, HEADS[kind].num_tokens, dtype=torch.float64)


def assert_same_nbest(got, expected):
    assert [len(n) for n in got] == [len(n) for n in expected]
    for got_list, expected_list in zip(got, expected):
        assert all(same(a, b) and a.am_score == pytest.approx(b.am_score, abs=1e-9)
                   for a, b in zip(got_list, expected_list))


def alsd_graph_sets(model) -> list:
    """The ALSD++ graph sets cached for ``model``."""
    return [graphs for key, graphs in graph_cache.GRAPHS.get(model, {}).items() if key[0] == ALSD_GRAPHS]


@pytest.fixture
def graph_failures_forgotten():
    """Each test finds out for itself whether graphs work (decoding remembers failures per process)."""
    graph_cache.FAILED_MODES.clear()
    yield
    graph_cache.FAILED_MODES.clear()


# Two batches per batch size, of one frame bucket (64), padded with NaN: the second must reuse the first's graphs.
ALSD_BATCHES = {1: [[24], [17]], 3: [[24, 0, 13], [5, 24, 1]],
                8: [[0, 1, 24, 0, 1, 13, 7, 24], [24, 3, 9, 24, 2, 0, 17, 11]]}


def needs_mode(mode: str) -> None:
    """Skip where ``mode`` cannot run at all (while_loops without cuda-python or an old driver)."""
    reason = conditional_graphs_unavailable(torch.device("cuda")) if mode in ("while_loops", "auto") else None
    if reason:
        pytest.skip(reason)


@pytest.mark.parametrize("graph_mode", ["while_loops", "step_graphs"])
@pytest.mark.parametrize("beam_size, predictor", [(2, "stateless"), (4, "lstm")])
@pytest.mark.parametrize("batch_size", list(ALSD_BATCHES))
@pytest.mark.parametrize("kind", list(HEADS))
def test_alsd_pp_graphs_equal_eager_and_cpu(kind, batch_size, beam_size, predictor, graph_mode,
                                            graph_failures_forgotten):
    needs_mode(graph_mode)
    cpu_model = model_for(kind, predictor, "label_heavy")
    model = on_cuda(cpu_model)
    # Beam 2 also takes the sort of early pruning and the log-sum-exp merge into the graph.
    options = dict(beam_size=beam_size, nbest=beam_size, merge="logsumexp" if beam_size == 2 else "max",
                   pruning="early" if beam_size == 2 else "late")
    first_graphs = None
    for seed, lengths in enumerate(ALSD_BATCHES[batch_size]):
        frames, lengths_tensor = encoder_batch(lengths, seed=seed)
        reference = beam_alsd_pp(cpu_model, frames, lengths_tensor, max_symbols_per_frame=3, **options)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CudaGraphFallbackWarning)  # the mode asked for is the mode that ran
            results = {mode: beam_alsd_pp(model, frames.cuda(), lengths_tensor.cuda(), 3, cuda_graphs=mode, **options)
                       for mode in ("off", graph_mode)}
        for result in results.values():
            assert_same_nbest(result.nbest, reference.nbest)
        graphed = results[graph_mode].stats
        assert (graphed.predictor_calls, graphed.joint_calls) == (
            reference.stats.predictor_calls, reference.stats.joint_calls)
        graph_sets = alsd_graph_sets(model)
        assert len(graph_sets) == 1
        if first_graphs is None:
            first_graphs = graph_sets[0]
        assert graph_sets[0] is first_graphs  # the second batch was a cache hit


@pytest.mark.parametrize("graph_mode", ["while_loops", "step_graphs"])
@pytest.mark.parametrize("kind", list(HEADS))
def test_alsd_pp_graphs_with_an_ngram_lm_equal_cpu(kind, graph_mode, tmp_path, graph_failures_forgotten):
    needs_mode(graph_mode)
    cpu_model = model_for(kind, "lstm", "label_heavy")
    model = on_cuda(cpu_model)
    lm = ngram_lm(kind, tmp_path)
    on_cpu, on_gpu = ([Fusion(scorer, 0.5, token_bonus=0.1, blank_scoring=kind == "tdt")] for scorer in (lm, lm.to("cuda")))
    for seed, lengths in enumerate(ALSD_BATCHES[3]):
        frames, lengths_tensor = encoder_batch(lengths, seed=seed)
        reference = beam_alsd_pp(cpu_model, frames, lengths_tensor, max_symbols_per_frame=3, beam_size=4, nbest=3, fusions=on_cpu)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CudaGraphFallbackWarning)
            got = beam_alsd_pp(model, frames.cuda(), lengths_tensor.cuda(), 3, beam_size=4, nbest=3,
                               cuda_graphs=graph_mode, fusions=on_gpu)
        assert_same_nbest(got.nbest, reference.nbest)
    assert len(alsd_graph_sets(model)) == 1


@pytest.mark.parametrize("graph_mode", ["while_loops", "step_graphs"])
@pytest.mark.parametrize("kind", list(HEADS))
def test_label_looping_graphs_with_an_ngram_lm_equal_the_reference(kind, graph_mode, tmp_path,
                                                                   graph_failures_forgotten):
    needs_mode(graph_mode)
    cpu_model = model_for(kind, "lstm", "label_heavy")
    model = on_cuda(cpu_model)
    lm = ngram_lm(kind, tmp_path)
    on_cpu, on_gpu = ([Fusion(scorer, 0.7, token_bonus=0.2)] for scorer in (lm, lm.to("cuda")))
    frames, lengths = encoder_batch([0, 1, 24, 13, 7, 24], seed=2)
    expected = greedy_reference(cpu_model, frames, lengths, max_symbols_per_frame=3, fusions=on_cpu).hypotheses()
    for window in (1, 4):
        with warnings.catch_warnings():
            warnings.simplefilter("error", CudaGraphFallbackWarning)
            got = greedy_label_looping(model, frames.cuda(), lengths.cuda(), 3, window_size=window,
                                       cuda_graphs=graph_mode, fusions=on_gpu)
        assert_same_hypotheses(got.hypotheses(), expected)


def test_alsd_pp_auto_uses_graphs_with_graph_safe_fusions_only(graph_failures_forgotten):
    needs_mode("auto")
    cpu_model = model_for("tdt", "lstm", "label_heavy")
    model = on_cuda(cpu_model)
    frames, lengths = encoder_batch([70, 3, 64, 65], seed=5)  # frame bucket 128
    config = DecodingConfig("beam_alsd_pp", beam_size=4, nbest=2, max_symbols_per_frame=3)
    expected = decode(cpu_model, frames, lengths, config).nbest
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphFallbackWarning)
        assert_same_nbest(decode(model, frames.cuda(), lengths.cuda(), config).nbest, expected)
    assert [key[6].cuda_graphs for key in graph_cache.GRAPHS[model] if key[0] == ALSD_GRAPHS] == ["while_loops"]
    fusions = [Fusion(DummyLM(HEADS["tdt"].num_tokens), 0.0)]
    config = DecodingConfig("beam_alsd_pp", config.options, fusions=fusions)
    assert_same_nbest(decode(model, frames.cuda(), lengths.cuda(), config).nbest, expected)  # weight 0: no change
    assert len(alsd_graph_sets(model)) == 1


class DummyLM:
    """A token scorer that gives every token the same log-prob, with a state of zeros."""

    def __init__(self, num_tokens: int) -> None:
        self.num_tokens = num_tokens

    def initial_state(self, batch_size, device):
        return torch.zeros(batch_size, dtype=torch.long, device=device)

    def token_logprobs(self, state):
        return torch.full((state.shape[0], self.num_tokens), -1.0, dtype=torch.float64, device=state.device)

    def advance(self, state, tokens):
        return state.clone()

    def select_state(self, mask, if_true, if_false):
        return torch.where(mask, if_true, if_false)

    def gather_state(self, state, indices):
        return state[indices]


def test_alsd_pp_graphs_follow_weight_updates(graph_failures_forgotten):
    model = on_cuda(model_for("rnnt", "lstm", "label_heavy"))
    frames, lengths = encoder_batch([20, 12], seed=1)
    frames, lengths = frames.cuda(), lengths.cuda()
    beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, cuda_graphs="step_graphs")
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(-1.5)
    expected = beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, cuda_graphs="off").nbest
    assert_same_nbest(beam_alsd_pp(model, frames, lengths, max_symbols_per_frame=3, cuda_graphs="step_graphs").nbest, expected)
    assert len(alsd_graph_sets(model)) == 1  # the stale set was dropped


@pytest.mark.parametrize("graph_mode", ["while_loops", "step_graphs"])
@pytest.mark.parametrize("batch_size", list(ALSD_BATCHES))
@pytest.mark.parametrize("kind", list(HEADS))
def test_aes_pp_graphs_equal_eager_and_cpu(kind, batch_size, graph_mode, tmp_path, graph_failures_forgotten):
    """AES++ frames as graphs, without and with the n-gram LM: the CPU's n-best and call counts, and the second
    batch of a bucket reuses the first's graphs."""
    needs_mode(graph_mode)
    cpu_model = model_for(kind, "lstm", "label_heavy")
    model = on_cuda(cpu_model)
    lm = ngram_lm(kind, tmp_path)
    for on_cpu, on_gpu in (([], []), ([Fusion(lm, 0.5, token_bonus=0.1)], [Fusion(lm.to("cuda"), 0.5, token_bonus=0.1)])):
        options = dict(beam_size=4, nbest=3, merge="logsumexp", num_steps=2, pruning="early" if on_cpu else "late")
        for seed, lengths in enumerate(ALSD_BATCHES[batch_size]):
            frames, lengths_tensor = encoder_batch(lengths, seed=seed)
            reference = beam_aes_pp(cpu_model, frames, lengths_tensor, fusions=on_cpu, **options)
            with warnings.catch_warnings():
                warnings.simplefilter("error", CudaGraphFallbackWarning)
                got = beam_aes_pp(model, frames.cuda(), lengths_tensor.cuda(), cuda_graphs=graph_mode, fusions=on_gpu,
                                  **options)
            assert_same_nbest(got.nbest, reference.nbest)
            assert (got.stats.predictor_calls, got.stats.joint_calls) == (
                reference.stats.predictor_calls, reference.stats.joint_calls)
    sets = [key for key in graph_cache.GRAPHS[model] if key[0] == AES_GRAPHS]
    assert len(sets) == 2  # one per fusion set


@pytest.mark.parametrize("graph_mode", ["while_loops", "step_graphs"])
@pytest.mark.parametrize("window", [1, 4])
@pytest.mark.parametrize("batch_size", list(ALSD_BATCHES))
def test_wind_beam_graphs_equal_eager_and_cpu(batch_size, window, graph_mode, tmp_path, graph_failures_forgotten):
    """Batched WIND beam rounds as graphs, without and with the n-gram LM: the CPU's n-best and call counts."""
    needs_mode(graph_mode)
    cpu_model = model_for("rnnt", "lstm", "label_heavy")
    model = on_cuda(cpu_model)
    lm = ngram_lm("rnnt", tmp_path)
    for on_cpu, on_gpu in (([], []), ([Fusion(lm, 0.5, token_bonus=0.1)], [Fusion(lm.to("cuda"), 0.5, token_bonus=0.1)])):
        options = dict(beam_size=4, nbest=3, window_size=window, max_symbols_per_frame=3)
        for seed, lengths in enumerate(ALSD_BATCHES[batch_size]):
            frames, lengths_tensor = encoder_batch(lengths, seed=seed)
            reference = beam_wind_batched(cpu_model, frames, lengths_tensor, fusions=on_cpu, **options)
            with warnings.catch_warnings():
                warnings.simplefilter("error", CudaGraphFallbackWarning)
                got = beam_wind_batched(model, frames.cuda(), lengths_tensor.cuda(), cuda_graphs=graph_mode,
                                        fusions=on_gpu, **options)
            assert_same_nbest(got.nbest, reference.nbest)
            assert (got.stats.predictor_calls, got.stats.joint_calls) == (
                reference.stats.predictor_calls, reference.stats.joint_calls)
    assert len([key for key in graph_cache.GRAPHS[model] if key[0] == WIND_GRAPHS]) == 2  # one per fusion set
