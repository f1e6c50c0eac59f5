"""The decode() entry point: dispatch, validation, CPU thread handling; the process-wide malloc setting."""

import os
import platform
import subprocess
import sys

import pytest
import torch

import transdec
from transdec.decoding import STRATEGIES, DecodingConfig, decode
from transdec.protocol import HeadSpec
from transdec.model.synthetic import random_decoder, random_encoder_output
from transdec.runtime import MALLOC_ENV, configure_malloc, decoding_threads

MODEL = random_decoder(HeadSpec("rnnt", 9), blank_rate=0.8, seed=1, dtype=torch.float64)


def batch(lengths=(5, 9, 0)):
    return random_encoder_output(list(lengths), 16, seed=0, dtype=torch.float64)


# ctc_greedy decodes a CTC head, which MODEL lacks (tests/test_ctc_greedy.py).
TRANSDUCER_STRATEGIES = sorted(set(STRATEGIES) - {"ctc_greedy"})


@pytest.mark.parametrize("strategy", TRANSDUCER_STRATEGIES)
def test_every_strategy_runs_through_decode(strategy):
    """Greedy strategies agree with the reference, and so do beam searches narrowed to greedy's choices (wider
    ones may beat it; Graves' search at width one can still prefer a shorter prefix, so it only has to run)."""
    frames, lengths = batch()
    narrow = {"beam_alsd": {}, "beam_alsd_pp": {}, "beam_maes": {"expansion_beta": 0, "num_steps": 10},
              "beam_aes_pp": {"expansion_beta": 0, "num_steps": 10}, "beam_graves": {}, "beam_wind": {"window_size": 1},
              "beam_wind_batched": {"window_size": 1}}
    options = {"beam_size": 1, **narrow[strategy]} if strategy.startswith("beam") else {}
    hyps = decode(MODEL, frames, lengths, DecodingConfig(strategy, **options)).hypotheses()
    reference = decode(MODEL, frames, lengths, DecodingConfig(strategy="greedy_reference")).hypotheses()
    if strategy != "beam_graves":
        assert [h.tokens for h in hyps] == [h.tokens for h in reference]


def test_default_is_label_looping_and_top_level_exports():
    frames, lengths = batch()
    result = transdec.decode(MODEL, frames, lengths)
    assert isinstance(result.hypotheses()[0], transdec.Hypothesis)
    assert transdec.DecodingConfig().strategy == "greedy_label"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(strategy="beam"), "unknown decoding strategy 'beam'"),
        (dict(max_symbols_per_frame=0), "max_symbols_per_frame"),
        (dict(cpu_threads=0), "cpu_threads"),
    ],
)
def test_config_rejects_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DecodingConfig(**kwargs)


@pytest.mark.parametrize(
    "frames, lengths, message",
    [
        (torch.zeros(2, 5), torch.tensor([5, 5]), r"\[B, T, D\] tensor, got \(2, 5\)"),
        (torch.zeros(2, 5, 16), torch.tensor([5]), r"lengths must be \[B\] = \[2\]"),
        (torch.zeros(2, 5, 16), torch.tensor([5, 6]), r"lie in \[0, T=5\]"),
        (torch.zeros(2, 5, 16), torch.tensor([5, -1]), r"lie in \[0, T=5\]"),
        (torch.zeros(2, 5, 16), torch.tensor([5.0, 1.0]), "integers"),
        (torch.zeros(2, 5, 16, dtype=torch.long), torch.tensor([5, 1]), "floating point"),
        (torch.zeros(2, 5, 7, dtype=torch.float64), torch.tensor([5, 1]), "feature size 7, the joint expects 16"),
    ],
)
@pytest.mark.parametrize("strategy", TRANSDUCER_STRATEGIES)
def test_shape_mismatches_are_named(strategy, frames, lengths, message):
    with pytest.raises(ValueError, match=message):
        decode(MODEL, frames, lengths, DecodingConfig(strategy=strategy))


def test_lengths_may_be_a_list():
    frames, _ = batch((4, 2))
    assert len(decode(MODEL, frames, [4, 2]).hypotheses()) == 2


def test_cpu_threads_are_restored_after_decoding():
    before = torch.get_num_threads()
    frames, lengths = batch()
    decode(MODEL, frames, lengths, DecodingConfig(cpu_threads=1))
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError):
        decode(MODEL, frames, torch.tensor([1]), DecodingConfig(cpu_threads=1))
    assert torch.get_num_threads() == before


def test_cpu_decoding_loop_runs_on_one_thread_by_default():
    before = torch.get_num_threads()
    with decoding_threads("cpu") as used:
        assert used == 1 == torch.get_num_threads()
    assert torch.get_num_threads() == before


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
@pytest.mark.parametrize("setting, default, kept", [
    (None, "keep", "True"), (None, "default", "False"), ("default", "keep", "False"), ("keep", "default", "True"),
])
def test_malloc_setting_follows_the_environment_then_the_default(setting, default, kept):
    # A child process each: the setting is process-wide.
    env = {k: v for k, v in os.environ.items() if k != MALLOC_ENV}
    if setting is not None:
        env[MALLOC_ENV] = setting
    code = f"from transdec.runtime import configure_malloc; print(configure_malloc({default!r}))"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == kept


def test_unknown_malloc_setting_is_an_error(monkeypatch):
    monkeypatch.setenv(MALLOC_ENV, "fast")
    with pytest.raises(ValueError, match="TRANSDEC_GLIBC_MALLOC must be one of keep, default, got 'fast'"):
        configure_malloc("default")
