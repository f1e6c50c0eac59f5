"""``transdec average``: the last checkpoints of a training run (or of several) averaged into one model file."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("average", help="average the last checkpoints of a run into one model file")
    p.add_argument("--exp-dir", required=True, nargs="+",
                   help="run directory; several average the last checkpoints of each (a run and its continuation)")
    p.add_argument("--last", type=int, default=5, help="checkpoints per run")
    p.add_argument("--output", required=True)
    p.add_argument("--half", action="store_true", help="store weights as float16 (half the size)")


def run(args: argparse.Namespace) -> None:
    from transdec.training.trainer import average_checkpoints

    model = average_checkpoints(args.exp_dir, args.last, args.output, half=args.half)
    print(f"wrote {args.output}: {model.num_parameters()} parameters")
