"""Beam searches and the n-gram LM on a GPU give what they give on the CPU (float64, so bit-close)."""

import pytest
import torch

from arpa_fixtures import random_arpa
from test_beam_alsd import same
from test_greedy_exactness import HEADS, encoder_batch, model_for
from transdec.decoding import Fusion
from transdec.decoding.beam_aes_pp import beam_aes_pp
from transdec.decoding.beam_alsd_pp import beam_alsd_pp
from transdec.decoding.beam_wind_batched import beam_wind_batched
from transdec.lm import NGramLM

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
    cpu = beam_alsd_pp(model, frames, lengths, 3, beam_size=4, nbest=3, fusions=[Fusion(lm, 0.5)]).nbest
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
    torch.testing.assert_close(gpu.token_logprobs(states.cuda()).cpu(), lm.token_logprobs(states))
    assert torch.equal(gpu.advance(states.cuda(), tokens.cuda()).cpu(), lm.advance(states, tokens))
