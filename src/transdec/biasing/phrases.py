"""Boosting phrases as text: one phrase with its weight, phrase files, and tokenizing phrases for a model.

A phrase file is UTF-8 text with one phrase per line, optionally followed by a TAB and the phrase's weight (a factor
on the boosting weight, 1 if left out); blank lines and lines starting with ``#`` are skipped::

    # people
    Anna Karenina
    Vronsky<TAB>2.0
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class BoostPhrase:
    """A phrase to boost: its ``text`` and ``weight``, a factor on the boosting weight of each of its tokens."""

    text: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"a boost phrase needs a non-empty text, got {self.text!r}")
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or not math.isfinite(self.weight):
            raise ValueError(f"boost phrase {self.text!r}: weight must be a finite number, got {self.weight!r}")


def read_phrase_file(path: str | os.PathLike[str]) -> list[BoostPhrase]:
    """The phrases of a phrase file (see the module docstring).

    Raises:
        ValueError: a line is not UTF-8, has an empty phrase, a weight that is not a finite number or more than one
            TAB (the message names ``file:line``), or the file holds no phrase.
    """
    path = Path(path)
    phrases = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        where = f"{path}:{number}"
        try:
            line = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as error:
            raise ValueError(f"{where}: not UTF-8 text ({error.reason} at byte {error.start})") from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # a byte order mark some editors write
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) > 2:
            raise ValueError(f"{where}: expected 'phrase' or 'phrase<TAB>weight', got {len(fields) - 1} TABs")
        text = fields[0].strip()
        if not text:
            raise ValueError(f"{where}: a weight without a phrase")
        weight = 1.0
        if len(fields) == 2:
            try:
                weight = float(fields[1])
            except ValueError:
                raise ValueError(f"{where}: the weight {fields[1].strip()!r} is not a number") from None
            if not math.isfinite(weight):
                raise ValueError(f"{where}: the weight must be finite, got {fields[1].strip()!r}")
        phrases.append(BoostPhrase(text, weight))
    if not phrases:
        raise ValueError(f"{path}: no phrases (one per line; blank lines and lines starting with '#' are skipped)")
    return phrases


def case_variants_of(text: str) -> list[str]:
    """``text`` as written, in lower case, with Capitalised words and in UPPER case; without repeats."""
    lower = text.lower()
    capitalised = " ".join(word[:1].upper() + word[1:] for word in lower.split(" "))
    return list(dict.fromkeys([text, lower, capitalised, text.upper()]))


def tokenize_phrases(phrases: Iterable[str | BoostPhrase], tokenizer: Any,
                     case_variants: bool = False) -> list[tuple[list[int], float]]:
    """``(token ids, weight)`` of each phrase for :meth:`~transdec.biasing.BoostingTree.build`, by the model
    tokenizer's ``encode(text) -> list[int]``.

    With ``case_variants`` (for models whose tokens are cased) each phrase also comes as its other
    :func:`case_variants_of`, each with the phrase's weight; variants that tokenize alike are kept once. A phrase
    that tokenizes to nothing, or that the tokenizer cannot encode (a ValueError), is skipped with a warning.
    """
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(f"boosting text phrases needs a tokenizer with encode(text) -> list[int]; "
                        f"{type(tokenizer).__name__} has none")
    result = []
    for phrase in phrases:
        phrase = phrase if isinstance(phrase, BoostPhrase) else BoostPhrase(phrase)
        seen: set[tuple[int, ...]] = set()
        for text in case_variants_of(phrase.text) if case_variants else [phrase.text]:
            try:
                tokens = [int(t) for t in tokenizer.encode(text)]
            except ValueError as error:
                warnings.warn(f"boost phrase {text!r} skipped: the tokenizer cannot encode it ({error})", stacklevel=2)
                continue
            if not tokens:
                warnings.warn(f"boost phrase {text!r} skipped: it tokenizes to nothing", stacklevel=2)
                continue
            if tuple(tokens) not in seen:
                seen.add(tuple(tokens))
                result.append((tokens, float(phrase.weight)))
    return result

