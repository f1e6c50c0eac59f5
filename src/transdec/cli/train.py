"""Train a Conformer Transducer on JSONL manifests. Running the same command again resumes from the newest checkpoint in
--exp-dir; the model options are then taken from it.
"""

from __future__ import annotations

import argparse
import dataclasses

from transdec.cli.common import device_problem, fail
from transdec.training.flags import add_config_arguments, config_from_args
from transdec.training.model_options import ModelOptions
from transdec.training.trainer import TrainConfig


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train", help="train a Transducer model (rerun the same command to resume)",
        description=__doc__)
    model = p.add_argument_group("model (ignored when resuming)")
    train = p.add_argument_group("training")
    # Added first, so that the usage line starts with the required manifests and run directory.
    add_config_arguments(train, TrainConfig)
    train.add_argument("--no-specaugment", action="store_true", help="no SpecAugment: no frequency or time masks")
    add_config_arguments(model, ModelOptions)


def _train_config(args: argparse.Namespace) -> TrainConfig:
    """The parsed ``transdec train`` flags' TrainConfig; ``--no-specaugment`` overrides the mask counts."""
    config = config_from_args(args, TrainConfig)
    if args.no_specaugment:
        config.specaugment = dataclasses.replace(config.specaugment, freq_masks=0, time_masks=0)
    return config


def run(args: argparse.Namespace) -> int | None:
    from transdec.training.trainer import Trainer

    config = _train_config(args)
    try:  # a bad device or model shape is one line, not a traceback
        problem = device_problem(config.device)
        if problem:
            raise ValueError(problem)
        model_config = config_from_args(args, ModelOptions).model_config(ctc_head=config.ctc_weight > 0)
    except ValueError as error:
        return fail("transdec train", error)
    Trainer(config, model_config).train()
