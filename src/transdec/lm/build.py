"""Building a token-level n-gram LM for a model from plain text (``transdec lm build``).

Each non-blank line of the text is one sentence. It is tokenized with the model's own tokenizer and written
in NeMo's convention (token ``i`` as the character ``chr(i + 100)``, tokens separated by spaces), so that the
LM's words are exactly the model's tokens. The text is used as it is: normalise it first as the model's
transcripts are (the bundled models write lower case without punctuation), or unknown characters become the
tokenizer's ``<unk>`` token (the report counts them).

The estimate is interpolated modified Kneser-Ney without pruning, from KenLM's ``lmplz`` when one is found
(``--lmplz PATH`` or on ``PATH``; ``recipes/build_lmplz.sh`` builds it) or from the built-in estimator
(:mod:`transdec.lm.kneser_ney`, the same numbers for small and medium corpora). Both are asked to fall back to
fixed discounts (0.5, 1, 1.5: ``lmplz --discount_fallback``) for an order whose discounts cannot be estimated,
which happens with tiny or repetitive texts; the report lists such orders. ``discount_fallback=False`` makes
that an error instead, as plain ``lmplz`` does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from transdec.lm.kneser_ney import FALLBACK_DISCOUNT, MAX_ORDER, DiscountError, estimate
from transdec.lm.arpa import read_arpa
from transdec.lm.ngram import TOKEN_OFFSET, NGramLM
from transdec.model.tokenizer import Tokenizer

ESTIMATORS = ("auto", "lmplz", "builtin")
#: Lines tokenized per sentencepiece call.
_BATCH_LINES = 10_000


class LMBuildError(ValueError):
    """The LM cannot be built: bad options, an unreadable or empty text, or lmplz failing."""


@dataclass
class BuildReport:
    """What :func:`build_lm` did."""

    output: Path
    estimator: str  # "lmplz" or "builtin"
    order: int
    sentences: int
    tokens: int
    unknown_tokens: int  # tokens that are the tokenizer's <unk> (characters it does not know)
    ngrams: list[int]  # per order, from the written ARPA's header
    seconds: float  # everything: reading and tokenizing the text, estimating, writing (and compiling)
    fallback_orders: list[int] = field(default_factory=list)
    lmplz: str | None = None
    compiled: Path | None = None

    def summary(self) -> str:
        counts = " ".join(f"{n}={c}" for n, c in enumerate(self.ngrams, 1))
        tool = f"lmplz ({self.lmplz})" if self.lmplz else "the built-in estimator"
        lines = [f"wrote {self.output}: order {self.order}, {self.sentences} sentences, {self.tokens} tokens, "
                 f"n-grams {counts}; built with {tool} in {self.seconds:.1f} s"]
        if self.compiled:
            lines.append(f"wrote {self.compiled}: the compiled form (NGramLM.load reads it faster)")
        if self.fallback_orders:
            lines.append(f"orders {self.fallback_orders}: too little text to estimate Kneser-Ney discounts; used "
                         "the fallback discounts 0.5, 1, 1.5")
        if self.unknown_tokens:
            lines.append(f"{self.unknown_tokens} tokens are the tokenizer's <unk> (characters it does not know): "
                         "normalise the text as the model's transcripts are")
        return "\n".join(lines)


def find_lmplz(explicit: str | os.PathLike[str] | None = None) -> str | None:
    """The lmplz to run: ``explicit`` if given (it must be an executable file), else the one on ``PATH``."""
    if explicit is not None:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LMBuildError(f"--lmplz {explicit}: not an executable file")
        return str(path)
    return shutil.which("lmplz")


def token_words(tokens: list[int]) -> list[str]:
    """Token ids as LM words in NeMo's convention."""
    return [chr(token + TOKEN_OFFSET) for token in tokens]


def read_sentences(text: str | os.PathLike[str], tokenizer: Tokenizer) -> Iterator[list[int]]:
    """Token ids of each non-blank line of the UTF-8 file ``text`` (blank lines separate nothing: skipped)."""
    path = Path(text)
    if path.is_dir():
        raise LMBuildError(f"{path}: is a directory, not a text file")
    number = 0
    try:
        with open(path, "rb") as lines:  # decoded line by line, so that an error names its line
            batch: list[str] = []
            for number, raw in enumerate(lines, 1):
                line = raw.decode("utf-8").strip()
                if line:
                    batch.append(line)
                if len(batch) == _BATCH_LINES:
                    yield from tokenizer.encode_batch(batch)
                    batch = []
            yield from tokenizer.encode_batch(batch)
    except UnicodeDecodeError as error:
        raise LMBuildError(f"{path}: not UTF-8 text (line {number}: {error.reason})") from None
    except OSError as error:
        raise LMBuildError(f"{path}: cannot read the text ({error.strerror or error})") from None


def build_lm(text: str | os.PathLike[str], tokenizer: Tokenizer, order: int, output: str | os.PathLike[str],
             estimator: str = "auto", lmplz: str | os.PathLike[str] | None = None, discount_fallback: bool = True,
             lmplz_memory: str = "1G", compile_to: str | os.PathLike[str] | None = None) -> BuildReport:
    """Build an ARPA LM of ``order`` over ``tokenizer``'s tokens from the lines of ``text`` (module docstring).

    Args:
        estimator: ``"lmplz"``, ``"builtin"`` or ``"auto"`` (lmplz when found, else the built-in estimator).
        lmplz: the lmplz executable (default: the one on ``PATH``).
        discount_fallback: use fixed discounts for orders whose discounts cannot be estimated (else an error).
        lmplz_memory: lmplz's sorting memory (its ``-S``: bytes with a suffix, or a percentage of the RAM).
        compile_to: also save the LM in :class:`~transdec.lm.NGramLM`'s compiled ``.pt`` form here.

    Raises:
        LMBuildError: a bad option, an unreadable or empty text, an unwritable output, or lmplz failing.
    """
    started = time.perf_counter()
    if not 1 <= order <= MAX_ORDER:
        raise LMBuildError(f"--order {order}: the order must be 1 .. {MAX_ORDER} (the ARPA reader and kenlm's "
                           f"query code stop at {MAX_ORDER})")
    if estimator not in ESTIMATORS:
        raise LMBuildError(f"--estimator {estimator}: expected one of {', '.join(ESTIMATORS)}")
    if tokenizer.vocab_size - 1 + TOKEN_OFFSET >= 0xD800:
        raise LMBuildError(f"a {tokenizer.vocab_size}-token vocabulary does not fit NeMo's convention (chr(i + "
                           f"{TOKEN_OFFSET}) reaches the UTF-16 surrogates)")
    output = Path(output)
    for path in (output, *([Path(compile_to)] if compile_to else [])):
        _check_writable(path)
    lmplz_path = find_lmplz(lmplz) if estimator != "builtin" else None
    if estimator == "lmplz" and lmplz_path is None:
        raise LMBuildError("--estimator lmplz: no lmplz on PATH (build one with recipes/build_lmplz.sh, or pass "
                           "--lmplz PATH)")
    sentences = list(read_sentences(text, tokenizer))
    tokens = sum(len(s) for s in sentences)
    if tokens == 0:
        raise LMBuildError(f"{text}: no text to build an LM from (no line has any)")
    unknown = sum(s.count(0) for s in sentences) if tokenizer.id_to_piece(0) == "<unk>" else 0
    partial = output.with_name(output.name + ".partial")  # the output appears only when complete
    try:
        if lmplz_path is not None:
            fallback_orders = _run_lmplz(lmplz_path, sentences, order, partial, discount_fallback, lmplz_memory)
        else:
            fallback_orders = _run_builtin(sentences, order, partial, discount_fallback)
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
    report = BuildReport(output=output, estimator="lmplz" if lmplz_path else "builtin", order=order,
                         sentences=len(sentences), tokens=tokens, unknown_tokens=unknown,
                         ngrams=_arpa_counts(output), seconds=0.0, fallback_orders=fallback_orders, lmplz=lmplz_path)
    if compile_to is not None:
        NGramLM.from_arpa(read_arpa(output), tokenizer.vocab_size, str(output)).save(compile_to)
        report.compiled = Path(compile_to)
    report.seconds = time.perf_counter() - started
    return report


def _check_writable(path: Path) -> None:
    if path.is_dir():
        raise LMBuildError(f"{path}: is a directory")
    folder = path.parent
    if not folder.is_dir():
        raise LMBuildError(f"{path}: no such directory {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise LMBuildError(f"{path}: cannot write in {folder}")


def _run_builtin(sentences: list[list[int]], order: int, output: Path, discount_fallback: bool) -> list[int]:
    try:
        lm = estimate((token_words(s) for s in sentences), order, FALLBACK_DISCOUNT if discount_fallback else None)
    except DiscountError as error:
        raise LMBuildError(f"{error}; allow the fallback discounts to build it anyway") from None
    lm.write_arpa(output)
    return lm.fallback_orders


def _run_lmplz(lmplz: str, sentences: list[list[int]], order: int, output: Path, discount_fallback: bool,
               memory: str) -> list[int]:
    """Run lmplz on the sentences as token words; the orders (1-based) it gave fallback discounts."""
    with tempfile.TemporaryDirectory(prefix="transdec-lm-") as folder:
        corpus = Path(folder) / "corpus.txt"
        # Only "\n" separates lines and " " words for lmplz, so every token character is safe in the file.
        with open(corpus, "w", encoding="utf-8", newline="\n") as out:
            out.writelines(" ".join(token_words(s)) + "\n" for s in sentences)
        command = [lmplz, "-o", str(order), "--text", str(corpus), "--arpa", str(output), "-S", memory,
                   "-T", str(Path(folder) / "sort")]
        if discount_fallback:
            command.append("--discount_fallback")
        result = subprocess.run(command, capture_output=True, text=True, errors="replace")
    if result.returncode != 0:
        tail = [line for line in result.stderr.splitlines() if line.strip()][-4:]
        raise LMBuildError(f"lmplz failed (exit status {result.returncode}): " + " / ".join(tail))
    # lmplz numbers orders from 0 in this message ("order 0" are the unigrams).
    return sorted(int(n) + 1 for n in re.findall(r"Substituting fallback discounts for order (\d+)", result.stderr))


def _arpa_counts(path: Path) -> list[int]:
    """The n-gram counts of an ARPA file's ``\\data\\`` header."""
    counts: list[int] = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            match = re.match(r"ngram (\d+)=(\d+)", line.strip())
            if match:
                counts.append(int(match.group(2)))
            elif counts and line.strip().startswith("\\"):
                break
    return counts
