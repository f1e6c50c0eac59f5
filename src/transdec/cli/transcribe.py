"""Transcribe audio files (any format libsndfile reads, resampled as needed), folders of them (recursively) and NeMo
JSONL manifests. Bad items are reported and skipped, and each result is written as soon as it and the items before it
are done.
"""

from __future__ import annotations

import argparse
import functools

from transdec.cli.argtypes import at_least
from transdec.cli.common import (add_device_argument, add_length_policy_arguments, add_long_audio_arguments,
                                 add_model_argument, chunking, device_problem, fail, load_for_decoding,
                                 output_problem, require_one_strategy)
from transdec.cli.fusions import (add_boost_arguments, add_lm_arguments, boost_options, lm_problem,
                                  require_one_lm_weight)
from transdec.decoding.flags import add_decoding_arguments, decoding_configs
from transdec.scale.flags import absolute_paths, add_ray_arguments, ray_options

#: The command's line in ``transdec --help``, and its exit codes, as its own help ends.
HELP = "transcribe audio files, folders and NeMo manifests"
EXIT_CODES = ("exit codes: 0 all transcribed; 1 some items failed (each is reported) or there was nothing to "
              "transcribe; 2 a usage error (a bad option, a missing model, an output that cannot be written); 130 "
              "interrupted (Ctrl-C or SIGTERM), with the results so far in OUTPUT.partial when --output is given")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("transcribe", help=HELP, description=__doc__, epilog=EXIT_CODES)
    p.add_argument("paths", nargs="+", metavar="PATH")
    add_model_argument(p)
    p.add_argument("--batch-size", type=at_least(1), default=16)
    add_device_argument(p)
    add_length_policy_arguments(p)
    add_long_audio_arguments(p)
    add_lm_arguments(p)
    add_boost_arguments(p)
    p.add_argument("--format", choices=["text", "jsonl", "manifest"], default="text",
                   help="text: one transcript per line; jsonl: text, words with times and confidences; "
                        "manifest: the input entries with pred_text added")
    p.add_argument("--output", default=None,
                   help="write here instead of standard output; an existing file is replaced only when the run "
                        "is complete (if interrupted, every result finished so far goes to OUTPUT.partial)")
    p.add_argument("--resume", action="store_true",
                   help="with --output: keep the results in OUTPUT.partial and transcribe only the items it lacks")
    p.add_argument("--allow-upsampling", action="store_true", help="accept audio below the model's sample rate")
    add_ray_arguments(p)
    add_decoding_arguments(p, default="greedy_label")


def run(args: argparse.Namespace) -> int:
    from transdec.transcribe_files import transcribe_files

    try:  # every option is checked before the model is loaded; a bad one is one line, not a traceback
        decodings = decoding_configs(args)
        require_one_strategy(args, decodings, "transcribe")
        ray = ray_options(args)
        problem = (lm_problem(args) or (args.ray is None and device_problem(args.device))
                   or (args.output and output_problem(args.output))
                   or (args.resume and not args.output and "--resume needs --output (it resumes OUTPUT.partial)"))
        if problem:
            raise ValueError(problem)
        require_one_lm_weight(args, "transcribe")
        boost = boost_options(args)
        if args.ray is None:  # on a cluster, each replica loads the model (ray_transcribe checks it first)
            model, decodings = load_for_decoding(args, decodings, boost)
    except (FileNotFoundError, ValueError) as error:
        return fail("transdec transcribe", error)
    if args.ray is not None:
        from transdec.scale import ray_transcribe

        absolute_paths(args)  # the replicas load the model, LM and phrases from other directories
        return ray_transcribe(functools.partial(_ray_replica, args, decodings), args.paths,
                              batch_size=args.batch_size, output_format=args.format, output=args.output,
                              resume=args.resume, allow_upsampling=args.allow_upsampling, chunking=chunking(args),
                              item_boost=boost if args.item_phrases else None, device=args.device, options=ray)
    return transcribe_files(model, args.paths, decodings[0], args.batch_size, args.format, args.output,
                            args.allow_upsampling, chunking(args), args.resume, boost if args.item_phrases else None)


def _ray_replica(args: argparse.Namespace, decodings: list, device: str):
    """A Ray replica's model on ``device`` and its decoding, with the fusions of the flags (a ReplicaLoader)."""
    args = argparse.Namespace(**{**vars(args), "device": device})
    model, decodings = load_for_decoding(args, decodings, boost_options(args))
    return model, decodings[0]
