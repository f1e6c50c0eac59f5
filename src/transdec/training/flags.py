"""Command-line flags made from config dataclasses, and configs made from the parsed flags.

Each field becomes one flag (``peak_lr`` -> ``--peak-lr``) whose default is the field's, so a default is
written once, in the dataclass. A field that is itself a dataclass adds a flag for each of its fields
(``specaugment.freq_masks`` -> ``--freq-masks``). The field's metadata, set with
:func:`transdec.decoding.options.option`, gives the flag's ``help`` and may give:

``flag``
    the flag's name when it is not the field's (``time_limit_minutes`` -> ``--time-limit``);
``metavar``
    the value's name in the help;
``choices``
    the values allowed (a ``Literal`` type gives them too).

The field's type gives the flag's: ``int``, ``float`` and ``str`` take one value, ``T | None`` also takes
``none``, ``tuple[T, ...]`` one or more values, and ``bool`` is a switch (``--bf16`` / ``--no-bf16``).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

Config = TypeVar("Config")


@dataclasses.dataclass(frozen=True)
class ConfigFlag:
    """The flag of one field: ``dest`` is the field's dotted path from the top config."""

    dest: str
    field: dataclasses.Field
    value_type: Any  # the field's type without None, or a tuple's item type
    optional: bool  # whether None is a value (given as ``none``)
    several: bool  # whether the field is a tuple of values
    default: Any  # dataclasses.MISSING where the field has no default: the flag is then required

    @property
    def word(self) -> str:
        """The flag's name without its dashes, in the field's spelling (``time_limit``)."""
        return self.field.metadata.get("flag", self.field.name)

    @property
    def name(self) -> str:
        return "--" + self.word.replace("_", "-")

    @property
    def choices(self) -> tuple | None:
        if "choices" in self.field.metadata:
            return tuple(self.field.metadata["choices"])
        if typing.get_origin(self.value_type) is typing.Literal:
            return typing.get_args(self.value_type)
        return None


def config_flags(config_class: type, defaults: Any = None, prefix: str = "") -> Iterator[ConfigFlag]:
    """The flags of ``config_class``'s fields, nested dataclasses' fields included, in field order.

    ``defaults`` is an instance whose values are the defaults (for a nested config: the one its parent
    makes); without it each field's own default is taken.
    """
    hints = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        default = getattr(defaults, field.name) if defaults is not None else _field_default(field)
        hint = hints[field.name]
        if dataclasses.is_dataclass(hint):
            yield from config_flags(hint, hint() if default is dataclasses.MISSING else default,
                                    f"{prefix}{field.name}.")
        else:
            yield _flag(f"{prefix}{field.name}", field, hint, default)


def _field_default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _flag(dest: str, field: dataclasses.Field, hint: Any, default: Any) -> ConfigFlag:
    """The flag of a field of type ``hint``; TypeError for a type no flag can parse."""
    value_type, optional = hint, False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        members = [t for t in typing.get_args(hint) if t is not type(None)]
        optional = len(members) < len(typing.get_args(hint))
        value_type = members[0] if len(members) == 1 else None
    several = typing.get_origin(value_type) is tuple
    if several:
        items = typing.get_args(value_type)
        value_type = items[0] if len(items) == 2 and items[1] is Ellipsis else None
    parsable = value_type in (int, float, str) or typing.get_origin(value_type) is typing.Literal
    if not (parsable or (value_type is bool and not optional and not several)):
        raise TypeError(f"{dest}: no flag parses a {hint}")
    return ConfigFlag(dest, field, value_type, optional, several, default)


def add_config_arguments(parser: argparse._ActionsContainer, config_class: type) -> None:
    """Add one flag per field of ``config_class`` (see the module docstring) to a parser or argument group."""
    for flag in config_flags(config_class):
        options: dict[str, Any] = {"dest": flag.dest, "help": _help(flag)}
        if flag.default is dataclasses.MISSING:
            options["required"] = True
        else:
            options["default"] = flag.default
        if flag.value_type is bool:
            parser.add_argument(flag.name, action=argparse.BooleanOptionalAction, **options)
            continue
        choices = flag.choices
        metavar = flag.field.metadata.get("metavar")
        if metavar is None and choices is None:  # argparse would name it after the dest, dots and all
            metavar = flag.word.upper()
        parser.add_argument(flag.name, type=_parser_of(flag), choices=choices, metavar=metavar,
                            nargs="+" if flag.several else None, **options)


def _parser_of(flag: ConfigFlag) -> Callable[[str], Any]:
    """A parser of one value of the flag: ``none`` is None where the field allows it."""
    # A Literal's values are strings or numbers; argparse checks the parsed value against them.
    value_type = flag.value_type if flag.choices is None else type(flag.choices[0])

    def parse(text: str) -> Any:
        if flag.optional and text.lower() == "none":
            return None
        return value_type(text)  # argparse turns a ValueError into "invalid <name> value"

    parse.__name__ = value_type.__name__
    return parse


def _help(flag: ConfigFlag) -> str:
    """The field's help, then its default unless the help tells it; a switch's only where it is on."""
    text = flag.field.metadata.get("help", "").replace("%", "%%")  # argparse %-formats help
    if flag.default is dataclasses.MISSING or flag.default is False or "default" in text:
        return text
    if flag.default is True:
        return f"{text} (default: on)"
    return f"{text} (default: {_shown(flag.default)})"


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def config_from_args(args: argparse.Namespace, config_class: type[Config], prefix: str = "") -> Config:
    """The ``config_class`` that the flags :func:`add_config_arguments` added were parsed into."""
    hints = typing.get_type_hints(config_class)
    values = {}
    for field in dataclasses.fields(config_class):
        if dataclasses.is_dataclass(hints[field.name]):
            values[field.name] = config_from_args(args, hints[field.name], f"{prefix}{field.name}.")
        else:
            value = getattr(args, prefix + field.name)
            values[field.name] = tuple(value) if isinstance(value, list) else value  # nargs gives a list
    return config_class(**values)
