"""Command-line flags made from the registered strategies' options, and configs made from the parsed flags.

Each field of each registered options class becomes one flag (``window_size`` -> ``--window-size``) with
the field's help; a field several strategies share is one flag that applies to all of them. A flag the
user does not give leaves each strategy's own default. A command may offer some strategies only (``transdec
stream``: those that stream), and leave the strategy to the options given.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any, Callable

from collections.abc import Sequence

from transdec.decoding.api import DecodingConfig, strategy_named
from transdec.decoding.registry import STRATEGIES

_DEST_PREFIX = "decoding_option."
#: Where the parsed arguments keep the strategies a command offers.
_OFFERED = "decoding_strategies"


@dataclasses.dataclass
class _Flag:
    """One option name across the strategies that have it."""

    name: str
    field: dataclasses.Field
    value_type: Any  # the field's type without None
    optional: bool  # whether None is a value (given as ``none``)
    defaults: dict[str, Any]  # strategy name -> its default


def _flags(names: Sequence[str] | None = None) -> dict[str, _Flag]:
    """One flag per option name of the strategies ``names`` (default: every registered one)."""
    flags: dict[str, _Flag] = {}
    for strategy in (STRATEGIES[name] for name in names or STRATEGIES):
        hints = typing.get_type_hints(strategy.options)
        for field in dataclasses.fields(strategy.options):
            value_type, optional = hints[field.name], False
            if isinstance(value_type, types.UnionType) or typing.get_origin(value_type) is typing.Union:
                members = [t for t in typing.get_args(value_type) if t is not type(None)]
                optional, value_type = len(members) < len(typing.get_args(value_type)), members[0]
            flag = flags.setdefault(field.name, _Flag(field.name, field, value_type, optional, {}))
            if (flag.value_type, flag.optional) != (value_type, optional):
                raise TypeError(f"option {field.name!r} of {strategy.name} has another type than in "
                                f"{', '.join(flag.defaults)}; one flag cannot parse both")
            flag.defaults[strategy.name] = field.default
    return flags


def _parser_of(flag: _Flag) -> Callable[[str], Any]:
    """A parser of the flag's text into the field's type: ``none`` for None where the field allows it."""
    value_type, optional = flag.value_type, flag.optional
    choices = flag.field.metadata.get("choices")

    def parse(text: str) -> Any:
        if optional and text.lower() == "none":
            return None
        if choices is not None:
            if text not in choices:
                raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)}" + (" or none" if optional else ""))
            return choices[text] if isinstance(choices, dict) else text
        if value_type is bool:  # bool("false") is True
            if text.lower() not in ("true", "false"):
                raise argparse.ArgumentTypeError(f"expected true, false or none, got {text!r}")
            return text.lower() == "true"
        try:
            return value_type(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {value_type.__name__} value: {text!r}") from None

    parse.__name__ = getattr(value_type, "__name__", "value")
    return parse


def add_decoding_arguments(parser: argparse.ArgumentParser, default: str | None, several: bool = False,
                           strategies: Sequence[str] | None = None, leave_out: Sequence[str] = ()) -> None:
    """Add ``--decoding`` (one strategy, or a comma-separated list if ``several``) and every option of the
    ``strategies`` offered (default: every registered one) but those in ``leave_out`` (the command does not use
    them). ``default`` None: the first strategy offered that takes every option given."""
    offered = list(strategies or STRATEGIES)
    listing = "; ".join(f"{name}: {STRATEGIES[name].summary}" for name in offered)
    default_text = "%(default)s" if default else "the first of these that takes every option given"
    parser.add_argument("--decoding", default=default, metavar="STRATEGY" + ("[,STRATEGY...]" if several else ""),
                        help=("comma-separated strategies, each run on every batch" if several else "decoding strategy")
                        + f" (default: {default_text}). {listing}")
    parser.set_defaults(**{_OFFERED: offered})
    group = parser.add_argument_group("decoding options (each names the strategies it applies to)")
    for flag in (flag for flag in _flags(offered).values() if flag.name not in leave_out):
        name, dest = "--" + flag.name.replace("_", "-"), _DEST_PREFIX + flag.name
        if flag.value_type is bool and not flag.optional:  # a switch: --length-norm / --no-length-norm
            group.add_argument(name, dest=dest, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                               help=_help(flag, len(offered)))
        else:
            group.add_argument(name, dest=dest, type=_parser_of(flag), default=argparse.SUPPRESS,
                               metavar=_metavar(flag), help=_help(flag, len(offered)))


def _metavar(flag: _Flag) -> str:
    choices = flag.field.metadata.get("choices")
    if choices:
        return "{" + ",".join(choices) + "}"
    name = {int: "N", float: "X"}.get(flag.value_type, "VALUE")
    return name + "|none" if flag.optional else name


def _help(flag: _Flag, offered: int) -> str:
    """The field's help, then its default(s) unless the help gives it, then which of the ``offered`` strategies take
    it."""
    text = flag.field.metadata.get("help", "")
    notes = []
    if "default" not in text:
        by_value: dict[str, list[str]] = {}
        for name, value in flag.defaults.items():
            by_value.setdefault("none" if value is None else str(value), []).append(name)
        if len(by_value) == 1:
            notes.append(f"default {next(iter(by_value))}")
        else:
            notes.append("default " + ", ".join(f"{value} for {' and '.join(names)}" for value, names in by_value.items()))
    applies = "all strategies" if len(flag.defaults) == offered else "for " + ", ".join(flag.defaults)
    notes.append(applies)
    return f"{text} ({'; '.join(notes)})"


def decoding_configs(args: argparse.Namespace) -> list[DecodingConfig]:
    """One config per strategy named by ``--decoding``, each with the options given that it takes (no
    ``--decoding``: the first strategy offered that takes them all).

    Raises ValueError for an unknown strategy or a given option that none of the named strategies takes.
    """
    given = {dest[len(_DEST_PREFIX):]: value for dest, value in vars(args).items() if dest.startswith(_DEST_PREFIX)}
    flags = _flags()
    decoding = args.decoding
    if decoding is None:
        offered = getattr(args, _OFFERED)
        takes_all = [name for name in offered if all(name in flags[option].defaults for option in given)]
        if not takes_all:
            raise ValueError(f"no strategy of {', '.join(offered)} takes all of "
                             f"{', '.join('--' + option.replace('_', '-') for option in given)}")
        decoding = takes_all[0]
    names = [name.strip() for name in decoding.split(",")]
    strategies = [strategy_named(name) for name in names]
    for option in given:
        if not any(s.name in flags[option].defaults for s in strategies):
            raise ValueError(f"--{option.replace('_', '-')} does not apply to {', '.join(names)}; it is an option of "
                             f"{', '.join(flags[option].defaults)}")
    return [DecodingConfig(s.name, **{k: v for k, v in given.items() if s.name in flags[k].defaults})
            for s in strategies]
