"""Reading ARPA n-gram language models as KenLM's ``lmplz`` writes them.

An ARPA file has a ``\\data\\`` header with one ``ngram N=count`` line per order, then one ``\\N-grams:`` section
per order whose lines are ``log10prob<TAB>w1 ... wN[<TAB>log10backoff]``, and ``\\end\\``. Every malformed
line is an :class:`ArpaError` naming the file and the line number.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

LN10 = math.log(10.0)


class ArpaError(ValueError):
    """A malformed ARPA file; the message names the file and the line."""


@dataclass
class Arpa:
    """The n-grams of an ARPA file, probabilities converted to natural logs.

    Attributes:
        order: the highest order N.
        ngrams: per order (index 0 = unigrams), each n-gram (a tuple of words) -> ``(ln prob, ln backoff)``
            (backoff 0.0 where the file gives none; -inf where a context leaves nothing to back off to).
    """

    order: int
    ngrams: list[dict[tuple[str, ...], tuple[float, float]]] = field(default_factory=list)

    @property
    def vocabulary(self) -> list[str]:
        return [words[0] for words in self.ngrams[0]]


def read_arpa(path: str | os.PathLike[str]) -> Arpa:
    """Parse an ARPA file (see the module docstring); raises :class:`ArpaError` on any malformed line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ArpaError(f"{path}: not UTF-8 text ({error})") from None
    # Only \n ends a line and only spaces and tabs separate words: NeMo's token characters chr(i + 100) include
    # characters Python's splitlines() and split() would take for separators (e.g. U+0085).
    lines = [line.rstrip("\r") for line in text.split("\n")]
    number = 0

    def fail(message: str, line: int | None = None) -> ArpaError:
        where = f"{path}:{line if line is not None else number}"
        return ArpaError(f"{where}: {message}")

    # Header: skip anything before \data\ (lmplz writes nothing there, other tools a comment).
    while number < len(lines) and _stripped(lines[number]) != "\\data\\":
        number += 1
    if number == len(lines):
        raise ArpaError(f"{path}: no \\data\\ section: not an ARPA file")
    number += 1
    counts: dict[int, int] = {}
    while number < len(lines) and _stripped(lines[number]).startswith("ngram "):
        number += 1
        key, _, value = _stripped(lines[number - 1])[len("ngram "):].partition("=")
        try:
            order, count = int(key), int(value)
        except ValueError:
            raise fail(f"expected 'ngram N=count', got {_stripped(lines[number - 1])!r}") from None
        if order != len(counts) + 1 or count < 0:
            raise fail(f"ngram counts must list orders 1, 2, ... in turn with counts >= 0, got {order}={count}")
        counts[order] = count
    if not counts:
        raise fail("the \\data\\ section lists no 'ngram N=count' line", number + 1)
    arpa = Arpa(order=len(counts))
    for order in range(1, arpa.order + 1):
        while number < len(lines) and not _stripped(lines[number]):
            number += 1
        if number == len(lines) or _stripped(lines[number]) != f"\\{order}-grams:":
            raise fail(f"expected the \\{order}-grams: section", min(number + 1, len(lines)))
        number += 1
        section: dict[tuple[str, ...], tuple[float, float]] = {}
        while number < len(lines) and _stripped(lines[number]) and not lines[number].startswith("\\"):
            number += 1
            section_entry(lines[number - 1], order, section, fail)
        if len(section) != counts[order]:
            raise fail(f"the \\data\\ section announces {counts[order]} {order}-grams, the section has {len(section)}")
        arpa.ngrams.append(section)
    while number < len(lines) and not _stripped(lines[number]):
        number += 1
    if number == len(lines) or _stripped(lines[number]) != "\\end\\":
        raise fail("expected \\end\\ (is the file truncated?)", min(number + 1, len(lines)))
    _check_prefixes(arpa, path)
    return arpa


def _stripped(line: str) -> str:
    return line.strip(" \t")


def section_entry(line: str, order: int, section: dict, fail) -> None:
    """Parse one n-gram line into ``section``."""
    fields = line.split("\t")
    if len(fields) == 1:  # some writers separate with spaces only
        fields = [f for f in line.split(" ") if f]
        fields = [fields[0], " ".join(fields[1 : 1 + order]), *fields[1 + order :]] if fields else [line]
    if len(fields) not in (2, 3):
        raise fail(f"expected 'log10prob<TAB>words[<TAB>backoff]', got {line!r}")
    words = tuple(w for w in fields[1].split(" ") if w)
    if len(words) != order:
        raise fail(f"a {order}-gram needs {order} words, got {len(words)}: {fields[1]!r}")
    try:
        logprob = float(fields[0])
        backoff = float(fields[2]) if len(fields) == 3 else 0.0
    except ValueError:
        raise fail(f"not a number in {line!r}") from None
    # A backoff of -inf is what lmplz writes for a context whose discounts are all 0: nothing is left for the words
    # it never saw, which then have probability 0.
    if math.isnan(backoff) or backoff == math.inf or math.isnan(logprob) or logprob > 0:
        raise fail(f"log10 probabilities must be <= 0 and backoffs below +inf, got {line!r}")
    if words in section:
        raise fail(f"the {order}-gram {fields[1]!r} appears twice")
    section[words] = (logprob * LN10, backoff * LN10)


def _check_prefixes(arpa: Arpa, path: Path) -> None:
    """Every n-gram's context (its first N-1 words) must itself be an n-gram (backoff needs it), and every word
    a unigram."""
    for order in range(2, arpa.order + 1):
        lower = arpa.ngrams[order - 2]
        for words in arpa.ngrams[order - 1]:
            unknown = [w for w in words if (w,) not in arpa.ngrams[0]]
            if unknown:
                raise ArpaError(f"{path}: the {order}-gram {' '.join(words)!r} has words that are no unigram: {unknown}")
            if words[:-1] not in lower:
                raise ArpaError(f"{path}: the {order}-gram {' '.join(words)!r} has no {order - 1}-gram "
                                f"{' '.join(words[:-1])!r} for its context")
