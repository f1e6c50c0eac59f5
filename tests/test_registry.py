"""Strategies are registered with an options class; decode() and the command line follow the registry."""

import argparse
import dataclasses
import types

import pytest
import torch

from helpers import encoder_batch, model_for
from transdec.decoding import (
    STRATEGIES,
    DecodingConfig,
    GreedyOptions,
    LabelLoopingOptions,
    decode,
    greedy_reference,
    register_strategy,
)
from transdec.decoding.flags import add_decoding_arguments, decoding_configs
from transdec.decoding.options import option
from transdec.decoding.registry import takes_options


def test_every_strategy_takes_its_options_as_arguments():
    for strategy in STRATEGIES.values():
        config = DecodingConfig(strategy.name)
        assert isinstance(config.options, strategy.options)
        model = model_for("rnnt", "lstm", "label_heavy")  # the head every strategy takes
        frames, lengths = encoder_batch([6, 3], seed=0)
        if strategy.name == "ctc_greedy":  # decodes a hybrid model's CTC head
            ctc = torch.nn.Linear(frames.shape[-1], model.head.num_tokens + 1).double()
            model = types.SimpleNamespace(head=model.head, predictor=model.predictor, joint=model.joint, ctc=ctc)
        assert len(decode(model, frames, lengths, config).hypotheses()) == 2


def test_config_from_keywords_or_options():
    assert DecodingConfig("greedy_label", window_size=4).options == LabelLoopingOptions(window_size=4)
    assert DecodingConfig("greedy_wind").options.window_size == 8
    assert DecodingConfig(options=LabelLoopingOptions(cuda_graphs="off")).options.cuda_graphs == "off"
    with pytest.raises(ValueError, match="takes LabelLoopingOptions, got GreedyOptions"):
        DecodingConfig("greedy_label", GreedyOptions())
    with pytest.raises(ValueError, match="not both"):
        DecodingConfig("greedy_label", LabelLoopingOptions(), window_size=2)
    with pytest.raises(ValueError, match=r"'greedy_reference' has no option\(s\) \['beam_size'\]"):
        DecodingConfig("greedy_reference", beam_size=4)
    with pytest.raises(ValueError, match="cuda_graphs must be one of"):
        LabelLoopingOptions(cuda_graphs="always")


@dataclasses.dataclass(frozen=True)
class EchoOptions(GreedyOptions):
    repeat: int = option(1, "times to run the reference")


@pytest.fixture
def echo_strategy():
    """A strategy from outside the package: the reference run ``repeat`` times."""

    @takes_options(EchoOptions)
    def echo(model, encoder_out, lengths, options, fusions=()):
        for _ in range(options.repeat):
            result = greedy_reference(model, encoder_out, lengths, fusions=fusions,
                                      max_symbols_per_frame=options.max_symbols_per_frame)
        return result

    register_strategy("echo", echo, EchoOptions, "the reference, repeated")
    yield
    del STRATEGIES["echo"]


def test_a_registered_strategy_reaches_decode_and_the_flags(echo_strategy):
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([6, 3], seed=0)
    result = decode(model, frames, lengths, DecodingConfig("echo", repeat=2))
    assert result.hypotheses() == greedy_reference(model, frames, lengths).hypotheses()

    parser = argparse.ArgumentParser()
    add_decoding_arguments(parser, default="greedy_label", several=True)
    assert "--repeat" in parser.format_help() and "times to run the reference" in parser.format_help()
    configs = decoding_configs(parser.parse_args(["--decoding", "echo,greedy_label", "--repeat", "3",
                                                  "--max-symbols-per-frame", "none"]))
    assert configs[0].options == EchoOptions(repeat=3, max_symbols_per_frame=None)
    assert configs[1].options == LabelLoopingOptions(max_symbols_per_frame=None)


def test_registration_checks_the_function_against_its_options():
    with pytest.raises(TypeError, match=r"takes no argument\(s\) \['options'\]"):
        register_strategy("bad", lambda model, encoder_out, lengths, fusions=(): None, EchoOptions, "")
    with pytest.raises(ValueError, match="already registered"):
        register_strategy("greedy_label", lambda *a, **k: None, LabelLoopingOptions, "")
    assert "bad" not in STRATEGIES


def test_strategy_functions_take_their_options_object_or_keywords():
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([6, 3], seed=0)
    by_object = greedy_reference(model, frames, lengths, GreedyOptions(max_symbols_per_frame=2)).hypotheses()
    assert greedy_reference(model, frames, lengths, max_symbols_per_frame=2).hypotheses() == by_object
    with pytest.raises(TypeError, match="takes GreedyOptions, got LabelLoopingOptions"):
        greedy_reference(model, frames, lengths, LabelLoopingOptions())
    with pytest.raises(TypeError, match="not both"):
        greedy_reference(model, frames, lengths, GreedyOptions(), max_symbols_per_frame=2)
    with pytest.raises(ValueError, match="max_symbols_per_frame"):
        greedy_reference(model, frames, lengths, max_symbols_per_frame=0)


@pytest.mark.parametrize("argv, message", [
    (["--decoding", "greedy_frame", "--window-size", "4"], "--window-size does not apply to greedy_frame"),
    (["--decoding", "beam"], "unknown decoding strategy 'beam'"),
    (["--decoding", "greedy_label", "--window-size", "0"], "window_size must be a positive integer"),
])
def test_flags_that_do_not_fit_are_errors(argv, message):
    parser = argparse.ArgumentParser()
    add_decoding_arguments(parser, default="greedy_label")
    with pytest.raises(ValueError, match=message):
        decoding_configs(parser.parse_args(argv))


def test_flag_values_are_parsed_to_the_field_types(capsys):
    parser = argparse.ArgumentParser()
    add_decoding_arguments(parser, default="greedy_label")
    config, = decoding_configs(parser.parse_args(["--compute-dtype", "bfloat16", "--cpu-threads", "2"]))
    assert config.options.compute_dtype is torch.bfloat16 and config.options.cpu_threads == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["--cuda-graphs", "always"])
    assert "choose from auto, while_loops, step_graphs, off" in capsys.readouterr().err


def test_beam_options_are_flags(capsys):
    parser = argparse.ArgumentParser()
    add_decoding_arguments(parser, default="greedy_label")
    config, = decoding_configs(parser.parse_args(["--decoding", "beam_alsd_pp", "--beam-size", "3", "--nbest", "2",
                                                  "--merge", "logsumexp", "--length-norm"]))
    assert (config.options.beam_size, config.options.nbest, config.options.merge, config.options.length_norm) == (
        3, 2, "logsumexp", True)
    with pytest.raises(ValueError, match="--beam-size does not apply to greedy_label"):
        decoding_configs(parser.parse_args(["--beam-size", "3"]))
