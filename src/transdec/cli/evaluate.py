"""Evaluate on a NeMo manifest with reference texts: WER and CER after normalisation, RTFx of encoder + decoder and of
the decoder alone (encoder timed separately), pooled over all utterances, which are sorted by duration and batched.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transdec.cli.argtypes import at_least
from transdec.cli.common import (add_device_argument, add_length_policy_arguments, add_long_audio_arguments,
                                 add_model_argument, chunking, device_problem, fail, load_for_decoding,
                                 output_dir_problem)
from transdec.cli.fusions import add_boost_arguments, add_lm_arguments, boost_options, lm_problem
from transdec.decoding.flags import add_decoding_arguments, decoding_configs

#: The command's line in ``transdec --help``, and its exit codes, as its own help ends.
HELP = "WER, CER and RTFx on a manifest, several strategies side by side"
EXIT_CODES = ("exit codes: 0 every item evaluated; 1 some items could not be (each is reported) or none could; 2 a "
              "usage error (a bad option, a missing manifest or model); 130 interrupted")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("evaluate", help=HELP, description=__doc__, epilog=EXIT_CODES)
    p.add_argument("manifest")
    add_model_argument(p)
    p.add_argument("--batch-size", type=at_least(1), default=16)
    p.add_argument("--warmup", type=at_least(0), default=1, metavar="BATCHES", help="untimed batches before timing")
    p.add_argument("--normalizer", choices=["whisper", "none"], default="whisper",
                   help="whisper: Whisper's English normaliser (whisper-normalizer); none: whitespace only")
    add_device_argument(p)
    add_length_policy_arguments(p)
    add_long_audio_arguments(p)
    add_lm_arguments(p)
    add_boost_arguments(p)
    p.add_argument("--output-dir", default=None, help="write predictions_<strategy>.jsonl and summary.json here")
    p.add_argument("--allow-upsampling", action="store_true", help="accept audio below the model's sample rate")
    add_decoding_arguments(p, default="greedy_label,greedy_frame", several=True)


def run(args: argparse.Namespace) -> int:
    from transdec.evaluate import EvaluationError, evaluate_manifest, format_table

    try:
        strategies = decoding_configs(args)
        problem = (lm_problem(args) or device_problem(args.device)
                   or (args.output_dir and output_dir_problem(args.output_dir)))
        if not Path(args.manifest).is_file():
            problem = f"{args.manifest}: no such file"
        if problem:
            raise ValueError(problem)
        boost = boost_options(args)
        model, strategies = load_for_decoding(args, strategies, boost)
    except (FileNotFoundError, ValueError) as error:
        return fail("transdec evaluate", error)
    try:
        reports, failed = evaluate_manifest(model, args.manifest, strategies, args.batch_size, args.warmup,
                                            args.normalizer, args.output_dir, args.allow_upsampling, chunking(args),
                                            boost if args.item_phrases else None)
    except EvaluationError as error:
        return fail("transdec evaluate", error, code=1)
    print(f"model {args.model}, normaliser {args.normalizer}, batch size {args.batch_size}, device {args.device}, "
          f"length policy {model.default_length_policy(args.device)}")
    print(format_table(reports))
    if failed:
        print(f"{failed} item(s) could not be evaluated", file=sys.stderr)
    return 1 if failed else 0
