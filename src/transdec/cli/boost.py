"""Read a phrase list (one phrase per line, an optional TAB and weight), tokenize it with the model's tokenizer and
write the boosting tree that --boost-phrases loads without tokenizing again (worth it for long lists).
"""

from __future__ import annotations

import argparse

from transdec.cli.argtypes import seconds
from transdec.cli.common import MODEL_HELP, add_group_parser, add_onnx_variant_argument, fail, output_problem


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    build = add_group_parser(
        subparsers, ("boost", "compile phrase lists for context biasing",
                              "Phrase boosting trees for a model (docs/biasing.md)."),
        ("build", "tokenize a phrase list with the model's tokenizer and compile its boosting tree", __doc__))
    build.add_argument("phrases", help="the phrase list, UTF-8 text")
    build.add_argument("--model", required=True, help=MODEL_HELP)
    add_onnx_variant_argument(build)
    build.add_argument("-o", "--output", required=True, metavar="PT", help="the tree file to write (.pt)")
    build.add_argument("--depth-scaling", type=seconds, default=0.0, metavar="S",
                       help="the bonus of a phrase's n-th token is weight * (1 + S * (n - 1)) (default 0)")
    build.add_argument("--case-variants", action="store_true",
                       help="for cased models: each phrase as written, lower case, Capitalised and UPPER case")


def run(args: argparse.Namespace) -> int:
    from transdec.biasing import BoostingTree, read_phrase_file, tokenize_phrases
    from transdec.loading import load_model

    try:
        if not args.output.endswith(".pt"):
            raise ValueError(f"-o {args.output}: the tree file must end in .pt (that is how --boost-phrases tells "
                             "it from a phrase list)")
        problem = output_problem(args.output)
        if problem:
            raise ValueError(problem.replace("--output", "-o"))
        phrases = read_phrase_file(args.phrases)
        model = load_model(args.model, onnx_variant=args.onnx_variant)
        tokenized = tokenize_phrases(phrases, model.tokenizer, args.case_variants)
        tree = BoostingTree.build([tokenized], model.head.num_tokens, args.depth_scaling)
        tree.save(args.output)
    except (FileNotFoundError, ValueError) as error:
        return fail("transdec boost build", error)
    print(f"wrote {args.output}: {len(phrases)} phrases, {len(tokenized)} token sequences, {tree.num_nodes} nodes")
    return 0
