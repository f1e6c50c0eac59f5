"""Describe a model without decoding anything: class, head, tokenizer, parameters, front end, encoder (layers, attention
and its context, subsampling), streaming; for a NeMo checkpoint transdec cannot load, every setting that stops it.
"""

from __future__ import annotations

import argparse

from transdec.cli.common import MODEL_HELP, add_onnx_variant_argument, fail

#: The command's line in ``transdec --help``, and its exit codes, as its own help ends.
HELP = "what a model is and whether transdec loads it, without decoding"
EXIT_CODES = ("exit codes: 0 transdec loads the model; 1 it does not (the reasons are listed); 2 a usage error or a "
              "file that is no model")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("inspect", help=HELP, description=__doc__, epilog=EXIT_CODES)
    p.add_argument("model", help=MODEL_HELP)
    add_onnx_variant_argument(p)
    p.add_argument("--format", choices=["text", "json"], default="text")


def run(args: argparse.Namespace) -> int:
    from transdec.inspect_model import format_report, inspect_model

    try:
        report = inspect_model(args.model, args.onnx_variant)
    except ImportError as error:
        return fail("transdec inspect", f"{args.model}: {error} (pip install 'transdec[onnx]')")
    except (OSError, ValueError) as error:
        return fail("transdec inspect", error)
    print(format_report(report, args.format))
    return 0 if report["supported"] else 1
