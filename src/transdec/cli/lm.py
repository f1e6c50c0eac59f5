"""Tokenize each non-blank line of a UTF-8 text with the model's tokenizer (normalise the text as the model's
transcripts are first) and estimate an interpolated modified Kneser-Ney LM over the tokens (NeMo's convention: token
i written as chr(i + 100)), with KenLM's lmplz when it is found (recipes/build_lmplz.sh builds it), else with the
built-in estimator, which gives the same probabilities.
"""

from __future__ import annotations

import argparse

from transdec.cli.common import MODEL_HELP, add_group_parser, add_onnx_variant_argument, fail


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    build = add_group_parser(
        subparsers, ("lm", "build token-level n-gram LMs for a model",
                           "N-gram language models over a model's tokens (docs/lm.md)."),
        ("build", "estimate an ARPA LM from text, tokenized with the model's tokenizer", __doc__))
    build.add_argument("--text", required=True, help="the corpus: one sentence per line")
    build.add_argument("--model", required=True, help="the model whose tokens the LM predicts: " + MODEL_HELP)
    add_onnx_variant_argument(build)
    build.add_argument("--order", type=int, default=4, help="n-gram order, 1-6 (default %(default)s)")
    build.add_argument("-o", "--output", required=True, metavar="ARPA", help="the ARPA file to write")
    build.add_argument("--estimator", choices=["auto", "lmplz", "builtin"], default="auto",
                       help="auto (default): lmplz when found, else the built-in estimator")
    build.add_argument("--lmplz", default=None, metavar="PATH", help="the lmplz executable (default: lmplz on PATH)")
    build.add_argument("--lmplz-memory", default="1G", metavar="SIZE",
                       help="lmplz's sorting memory (its -S: e.g. 1G or 20%%; default %(default)s)")
    build.add_argument("--no-discount-fallback", action="store_true",
                       help="fail where a tiny or repetitive text gives no usable Kneser-Ney discounts for an order "
                            "(default: use 0.5, 1, 1.5 there, as lmplz --discount_fallback)")
    build.add_argument("--compile", default=None, metavar="PT",
                       help="also write the compiled form (.pt) that --lm loads faster")


def run(args: argparse.Namespace) -> int:
    from transdec.lm.build import LMBuildError, build_lm
    from transdec.lm.kneser_ney import MAX_ORDER
    from transdec.loading import load_model

    try:
        if not 1 <= args.order <= MAX_ORDER:  # checked before the model loads
            raise LMBuildError(f"--order {args.order}: the order must be 1 .. {MAX_ORDER}")
        tokenizer = load_model(args.model, onnx_variant=args.onnx_variant).tokenizer
        report = build_lm(args.text, tokenizer, args.order, args.output, estimator=args.estimator, lmplz=args.lmplz,
                          discount_fallback=not args.no_discount_fallback, lmplz_memory=args.lmplz_memory,
                          compile_to=args.compile)
    except (FileNotFoundError, ValueError) as error:  # LMBuildError is a ValueError
        return fail("transdec lm build", error)
    print(report.summary())
    return 0
