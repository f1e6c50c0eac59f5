"""The flags that fuse scorers into decoding: the n-gram LM (``--lm*``) and phrase boosting (``--boost-*``), how
they are checked, and the fusions they make for a loaded model."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from transdec.biasing.boost import DEFAULT_WEIGHT as DEFAULT_BOOST_WEIGHT
from transdec.cli.argtypes import finite, seconds, weights


def add_lm_arguments(p: argparse.ArgumentParser) -> None:
    """The ``--lm*`` group: a token-level n-gram LM and how its scores are weighted."""
    group = p.add_argument_group("language model (shallow fusion into any decoding strategy)")
    group.add_argument("--lm", default=None, metavar="FILE",
                       help="token-level n-gram LM: an ARPA file in NeMo's convention (token i written as "
                            "chr(i + 100)) or its compiled .pt form")
    group.add_argument("--lm-weight", type=weights, default=None, metavar="WEIGHT[,WEIGHT...]",
                       help="weight of the LM's log-probs (default 0.5); evaluate takes several, comma-separated, and "
                            "reports each strategy with each (a sweep for a dev set)")
    group.add_argument("--lm-token-bonus", type=finite, default=None,
                       help="added to every token's score, against the deletions LM fusion causes (default 0)")
    group.add_argument("--lm-blank-scoring", action="store_true",
                       help="the beam-search paper's blank scoring: tokens get ln(1 - p_blank) too, blanks (1 + weight)"
                            " times their log-prob")


def add_boost_arguments(p: argparse.ArgumentParser, items: bool = True) -> None:
    """The ``--boost-*`` group; ``items``: with ``--item-phrases``, for the commands that read manifests."""
    group = p.add_argument_group("context biasing (phrase boosting, fused like the LM; docs/biasing.md)")
    group.add_argument("--boost-phrases", default=None, metavar="FILE",
                       help="phrases to boost: a UTF-8 text file, one phrase per line with an optional TAB and weight "
                            "(a factor on --boost-weight), or the .pt tree `transdec boost build` compiles from one")
    if items:
        group.add_argument("--item-phrases", action="store_true",
                           help="boost each manifest item by the phrases in its own \"boost_phrases\" field (a list "
                                "of texts or [text, weight] pairs) as well")
    group.add_argument("--boost-weight", type=finite, default=None,
                       help=f"bonus per matched token, in nats, taken back if the phrase is not completed "
                            f"(default {DEFAULT_BOOST_WEIGHT:g})")
    group.add_argument("--boost-depth-scaling", type=seconds, default=None, metavar="S",
                       help="the bonus of a phrase's n-th token is weight * (1 + S * (n - 1)) (default 0)")
    group.add_argument("--boost-case-variants", action="store_true",
                       help="for cased models: boost each phrase as written, lower case, Capitalised and UPPER case")


def lm_problem(args: argparse.Namespace) -> str | None:
    """Why the LM options do not fit together (their settings without ``--lm``), or None; fills in defaults."""
    if not args.lm:
        given = [flag for flag, value in (("--lm-weight", args.lm_weight), ("--lm-token-bonus", args.lm_token_bonus),
                                          ("--lm-blank-scoring", args.lm_blank_scoring or None)) if value is not None]
        if given:
            return f"{', '.join(given)} without --lm: there is no LM to weight"
    args.lm_weight = args.lm_weight or [0.5]
    args.lm_token_bonus = args.lm_token_bonus or 0.0
    return None


def require_one_lm_weight(args: argparse.Namespace, command: str) -> None:
    """Refuse a sweep of ``--lm-weight`` values where ``command`` decodes with one (only evaluate sweeps)."""
    if len(args.lm_weight) != 1:
        raise ValueError(f"--lm-weight: {command} takes one weight")


def boost_options(args: argparse.Namespace):
    """The ``--boost-*`` options; a ValueError when they are given with nothing to boost."""
    from transdec.biasing.items import BoostOptions

    boosting = args.boost_phrases or getattr(args, "item_phrases", False)
    given = [flag for flag, value in (("--boost-weight", args.boost_weight),
                                      ("--boost-depth-scaling", args.boost_depth_scaling),
                                      ("--boost-case-variants", args.boost_case_variants or None)) if value is not None]
    if given and not boosting:
        raise ValueError(f"{', '.join(given)} without --boost-phrases: there are no phrases to boost")
    if args.boost_phrases and not Path(args.boost_phrases).is_file():
        raise ValueError(f"--boost-phrases {args.boost_phrases}: no such file")
    if args.boost_phrases and args.boost_phrases.endswith(".pt") and (args.boost_depth_scaling is not None
                                                                         or args.boost_case_variants):
        raise ValueError("--boost-depth-scaling and --boost-case-variants are fixed when the tree is built "
                         "(transdec boost build); give them there")
    return BoostOptions(DEFAULT_BOOST_WEIGHT if args.boost_weight is None else args.boost_weight,
                        args.boost_depth_scaling or 0.0, args.boost_case_variants)


def lm_fusions(args: argparse.Namespace, model) -> list:
    """The ``--lm`` fusion at each ``--lm-weight`` (the LM read once, for the model's vocabulary); none without."""
    if not args.lm:
        return []
    from transdec.decoding import Fusion
    from transdec.lm import NGramLM

    lm = NGramLM.load(args.lm, model.head.num_tokens, device=args.device)
    return [Fusion(lm, weight, args.lm_token_bonus, args.lm_blank_scoring) for weight in args.lm_weight]


def boost_fusions(args: argparse.Namespace, model, options) -> list:
    """The ``--boost-phrases`` fusion (its phrases tokenized for the model, or its compiled tree) with ``options``
    (:func:`boost_options`); none without."""
    if not args.boost_phrases:
        return []
    from transdec.biasing import Boost, BoostingTree, read_phrase_file, tokenize_phrases

    if args.boost_phrases.endswith(".pt"):
        tree = BoostingTree.load(args.boost_phrases)
        if tree.vocab_size != model.head.num_tokens:
            raise ValueError(f"--boost-phrases {args.boost_phrases}: built for {tree.vocab_size} tokens, the model "
                             f"has {model.head.num_tokens}")
    else:
        phrases = tokenize_phrases(read_phrase_file(args.boost_phrases), model.tokenizer, options.case_variants)
        tree = BoostingTree.build([phrases], model.head.num_tokens, options.depth_scaling)
    return [Boost(tree.to(args.device), options.weight)]


def with_fusions(args: argparse.Namespace, model, configs: list, boost) -> list:
    """``configs`` with the ``--lm`` fusion added, one config per ``--lm-weight``, and the ``--boost-phrases``
    one with ``boost`` (:func:`boost_options`)."""
    lms = lm_fusions(args, model)
    boosts = boost_fusions(args, model, boost)
    configs = ([dataclasses.replace(config, fusions=(*config.fusions, lm)) for config in configs for lm in lms]
               or configs)
    return [dataclasses.replace(config, fusions=(*config.fusions, *boosts)) for config in configs]
