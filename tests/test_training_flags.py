"""`transdec train`'s flags are made from TrainConfig and ModelOptions: one flag per field, with the field's
default and help, parsed back into the same configs; and the generator itself on small dataclasses."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Literal

import pytest

import transdec.training.trainer as trainer
from transdec import cli
from transdec.decoding.flags import add_decoding_arguments, decoding_configs
from transdec.decoding.options import option
from transdec.model.conformer import ConformerConfig
from transdec.model.transducer_model import ModelConfig, PredictorConfig
from transdec.protocol import HeadSpec
from transdec.training.flags import add_config_arguments, config_flags, config_from_args
from transdec.training.model_options import DURATION_HEAD_SIGMA, ModelOptions
from transdec.training.specaugment import SpecAugmentConfig
from transdec.training.trainer import TrainConfig

REQUIRED = ["--train-manifest", "train.jsonl", "--dev-manifest", "dev.jsonl", "--exp-dir", "exp"]


def train_parser() -> argparse.ArgumentParser:
    """The parser of ``transdec train``'s flags."""
    subparsers = argparse.ArgumentParser(prog="transdec").add_subparsers()
    cli._add_train_parser(subparsers)
    return subparsers.choices["train"]


def train_actions() -> dict[str, argparse.Action]:
    return {action.dest: action for action in train_parser()._actions}


def field_default(config_class: type, dest: str) -> object:
    """The dataclass default of the field at ``dest`` (``specaugment.freq_masks``: SpecAugmentConfig's)."""
    *parents, name = dest.split(".")
    for parent in parents:
        config_class = typing.get_type_hints(config_class)[parent]
    return {f.name: f for f in dataclasses.fields(config_class)}[name].default


@pytest.fixture
def started(monkeypatch) -> list[tuple[TrainConfig, ModelConfig]]:
    """The configs each ``transdec train`` run would start its Trainer with (nothing is trained)."""
    runs: list[tuple[TrainConfig, ModelConfig]] = []

    class Recorder:
        def __init__(self, config: TrainConfig, model_config: ModelConfig) -> None:
            runs.append((config, model_config))

        def train(self) -> None:
            pass

    monkeypatch.setattr(trainer, "Trainer", Recorder)
    monkeypatch.setattr(cli.train, "device_problem", lambda name: None)  # "cuda" parses on a machine without one
    monkeypatch.setenv("TRANSDEC_GLIBC_MALLOC", "default")  # leave this process's allocator as it is
    return runs


def train(runs: list, *flags: str) -> tuple[TrainConfig, ModelConfig]:
    assert cli.main(["train", *REQUIRED, *flags]) == 0
    return runs[-1]


# ------------------------------------------------------------------------------------------ transdec train


@pytest.mark.parametrize("config_class", [TrainConfig, ModelOptions])
def test_every_field_has_a_flag_with_help(config_class: type, capsys) -> None:
    actions = train_actions()
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    listed = capsys.readouterr().out
    flags = list(config_flags(config_class))
    assert len(flags) >= len(dataclasses.fields(config_class))  # nested configs add theirs
    for flag in flags:
        assert flag.dest in actions, flag.dest
        assert flag.name in actions[flag.dest].option_strings and flag.name in listed
        assert flag.field.metadata["help"], f"{flag.dest} has no help"


def test_the_flags_defaults_are_the_dataclasses(started) -> None:
    args = train_parser().parse_args(REQUIRED)
    assert config_from_args(args, TrainConfig) == TrainConfig("train.jsonl", "dev.jsonl", "exp")
    assert config_from_args(args, ModelOptions) == ModelOptions()
    config, model_config = train(started)
    assert config == TrainConfig("train.jsonl", "dev.jsonl", "exp")
    assert config.specaugment == SpecAugmentConfig() and config.pad_to_seconds == 0.0
    assert model_config == ModelConfig(HeadSpec("rnnt", 128), encoder=ConformerConfig(), predictor=PredictorConfig(),
                                       sigma=0.0, ctc_head=True)


@pytest.mark.parametrize("config_class", [TrainConfig, ModelOptions])
def test_each_flag_default_is_its_fields(config_class: type) -> None:
    actions = train_actions()
    for flag in config_flags(config_class):
        default = field_default(config_class, flag.dest)
        if default is dataclasses.MISSING:
            assert actions[flag.dest].required, flag.dest
        else:
            assert actions[flag.dest].default == default and not actions[flag.dest].required, flag.dest


def test_flags_give_the_configs(started) -> None:
    config, model_config = train(
        started, "--max-steps", "7", "--peak-lr", "1e-3", "--warmup-steps", "3", "--final-lr-ratio", "0.1",
        "--batch-seconds", "50", "--ctc-weight", "0", "--freq-masks", "3", "--time-width", "0.1", "--bf16",
        "--threads", "2", "--time-limit", "5", "--budget", "30", "--init-from", "m.pt", "--init-encoder-only",
        "--prune-range", "5", "--reload-manifest", "--pad-to-seconds", "2", "--keep-checkpoints", "2",
        "--head", "tdt", "--durations", "0", "1", "2", "--vocab-size", "64", "--d-model", "128", "--layers", "2",
        "--heads", "2", "--attention-context", "32", "--subsampling", "striding", "--subsampling-factor", "4",
        "--predictor", "stateless", "--predictor-hidden", "64", "--context-size", "3", "--joint-dim", "100",
        "--dropout", "0.2")
    assert config == TrainConfig(
        "train.jsonl", "dev.jsonl", "exp", max_steps=7, peak_lr=1e-3, warmup_steps=3, final_lr_ratio=0.1,
        batch_seconds=50.0, ctc_weight=0.0, specaugment=SpecAugmentConfig(freq_masks=3, time_width=0.1), bf16=True,
        threads=2, time_limit_minutes=5.0, budget_minutes=30.0, init_from="m.pt", init_encoder_only=True,
        prune_range=5, reload_manifest=True, pad_to_seconds=2.0, keep_checkpoints=2)
    assert model_config == ModelConfig(
        HeadSpec("tdt", 64, durations=(0, 1, 2)),
        encoder=ConformerConfig(model_dim=128, num_layers=2, num_heads=2, attention_context=32,
                                subsampling="striding", subsampling_factor=4, dropout=0.2),
        predictor=PredictorConfig("stateless", hidden_size=64, context_size=3), joint_dim=100,
        sigma=DURATION_HEAD_SIGMA, ctc_head=False)


def test_recipe_style_command_parses(started) -> None:
    """A command as the training recipe writes it: the flags that existed before the generator."""
    config, model_config = train(
        started, "--head", "multiblank", "--big-blank-durations", "2", "4", "--layers", "6",
        "--long-form-share", "0.2", "--long-form-seconds", "30", "--long-form-pause", "0.5", "--max-duration", "12",
        "--eval-every", "9", "--save-every", "8", "--seed", "4", "--loader-threads", "1", "--predictor-layers", "2",
        "--conv-kernel", "9", "--time-masks", "4")
    assert (config.long_form_share, config.long_form_seconds, config.long_form_pause, config.max_duration) == \
        (0.2, 30.0, 0.5, 12.0)
    assert (config.eval_every, config.save_every, config.seed, config.loader_threads) == (9, 8, 4, 1)
    assert config.specaugment.time_masks == 4
    assert model_config.head.big_blank_durations == (2, 4)
    assert (model_config.predictor.num_layers, model_config.encoder.conv_kernel) == (2, 9)


@pytest.mark.parametrize("flags, head, sigma", [
    ([], HeadSpec("rnnt", 128), 0.0),
    (["--head", "tdt"], HeadSpec("tdt", 128, durations=(0, 1, 2, 3, 4)), DURATION_HEAD_SIGMA),
    (["--head", "multiblank", "--sigma", "0.1"], HeadSpec("multiblank", 128, big_blank_durations=(2, 4, 8)), 0.1),
    (["--head", "rnnt", "--durations", "0", "1"], HeadSpec("rnnt", 128), 0.0),  # durations are TDT's only
])
def test_the_head_takes_its_durations_and_sigma(started, flags: list[str], head: HeadSpec, sigma: float) -> None:
    _, model_config = train(started, *flags)
    assert (model_config.head, model_config.sigma) == (head, sigma)


@pytest.mark.parametrize("flags, padding", [([], 0.0), (["--device", "cuda"], 1.0), (["--device", "cuda:1"], 1.0),
                                            (["--device", "cuda", "--pad-to-seconds", "0"], 0.0),
                                            (["--device", "cuda", "--pad-to-seconds", "none"], 1.0)])
def test_padding_defaults_to_whole_seconds_on_cuda(started, flags: list[str], padding: float) -> None:
    assert train(started, *flags)[0].pad_to_seconds == padding
    assert TrainConfig("a", "b", "c", device=flags[1] if flags else "cpu").pad_to_seconds == (1.0 if flags else 0.0)


def test_no_specaugment_wins_over_the_mask_counts(started) -> None:
    config, _ = train(started, "--no-specaugment", "--freq-masks", "5", "--freq-width", "9")
    assert config.specaugment == SpecAugmentConfig(freq_masks=0, freq_width=9, time_masks=0)


def test_switches_and_none_can_be_given_either_way(started) -> None:
    config, _ = train(started, "--bf16", "--no-bf16", "--threads", "2", "--threads", "none")
    assert config.bf16 is False and config.threads is None


@pytest.mark.parametrize("flags, message", [
    (["--subsampling-factor", "6"], "argument --subsampling-factor: invalid choice: 6 (choose from 4, 8)"),
    (["--head", "ctc"], "argument --head: invalid choice: 'ctc'"),
    (["--layers", "two"], "argument --layers: invalid int value: 'two'"),
    (["--layers", "none"], "argument --layers: invalid int value: 'none'"),
])
def test_a_bad_value_is_a_usage_error(capsys, flags: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit:
        cli.main(["train", *REQUIRED, *flags])
    assert exit.value.code == 2 and message in capsys.readouterr().err


def test_a_model_shape_that_cannot_be_built_is_one_line(started, capsys) -> None:
    assert cli.main(["train", *REQUIRED, "--d-model", "100", "--heads", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("transdec train: error: model_dim 100 must split") and err.count("\n") == 1
    assert not started


# ---------------------------------------------------------------------------------------------- the generator


@dataclass
class Inner:
    rate: float = option(0.5, "a rate: 5% is 0.05")
    names: tuple[str, ...] = option(("a", "b"), "some names")


@dataclass
class Outer:
    path: str = option(dataclasses.MISSING, "where")
    count: int = option(3, "how many", metavar="N")
    limit_minutes: float | None = option(None, "a limit (default: none)", flag="limit")
    mode: Literal["fast", "exact"] = option("exact", "how")
    size: int = option(8, "a size", choices=(4, 8))
    on: bool = option(True, "a switch that is on")
    inner: Inner = field(default_factory=lambda: Inner(rate=0.25))


def outer_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Outer)
    return parser


def test_the_generator_takes_defaults_from_the_dataclass_and_its_factories() -> None:
    args = outer_parser().parse_args(["--path", "p"])
    assert config_from_args(args, Outer) == Outer("p", inner=Inner(rate=0.25))


def test_the_generator_parses_each_kind_of_field() -> None:
    args = outer_parser().parse_args(["--path", "p", "--count", "4", "--limit", "2.5", "--mode", "fast", "--size",
                                      "4", "--no-on", "--rate", "1", "--names", "x", "y", "z"])
    assert config_from_args(args, Outer) == Outer("p", 4, 2.5, "fast", 4, False, Inner(1.0, ("x", "y", "z")))


def test_the_generators_help() -> None:
    text = " ".join(outer_parser().format_help().split())
    assert "--path PATH where" in text and "--count N how many (default: 3)" in text
    assert "--limit LIMIT a limit (default: none)" in text and "(default: none) (default" not in text
    assert "--mode {fast,exact} how (default: exact)" in text
    assert "--on, --no-on a switch that is on (default: on)" in text
    assert "a rate: 5% is 0.05 (default: 0.25)" in text  # the nested config's factory gives the default
    assert "--names NAMES [NAMES ...] some names (default: a b)" in text


def test_a_required_field_is_a_required_flag(capsys) -> None:
    with pytest.raises(SystemExit):
        outer_parser().parse_args([])
    assert "the following arguments are required: --path" in capsys.readouterr().err


@pytest.mark.parametrize("annotation", [list[int], dict[str, int], tuple[int, int], bool | None, int | str])
def test_a_type_no_flag_parses_is_refused(annotation) -> None:
    config_class = dataclasses.make_dataclass("Odd", [("value", annotation, option(None, "odd"))])
    with pytest.raises(TypeError, match="no flag parses"):
        list(config_flags(config_class))


def test_the_decoding_flags_still_parse() -> None:
    parser = argparse.ArgumentParser()
    add_decoding_arguments(parser, "greedy_label")
    configs = decoding_configs(parser.parse_args(["--max-symbols-per-frame", "3"]))
    assert configs[0].options.max_symbols_per_frame == 3
