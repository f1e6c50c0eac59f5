"""Interpolated modified Kneser-Ney n-gram estimation, computed the way KenLM's ``lmplz`` computes it by default.

The estimate, for an LM of order ``N`` over sentences ``<s> w1 ... wk </s>``:

* **Counts.** N-grams never reach across a sentence start: the window ending at a word is cut at its ``<s>``.
  A cut window is a lower-order n-gram that starts with ``<s>`` (``<s> w1`` for the first word). The
  highest-order n-grams, and every n-gram that starts with ``<s>``, keep their raw counts (nothing can precede
  ``<s>``); every other lower-order n-gram ``g`` gets the *adjusted* count: the number of distinct n-grams
  ``x g`` one order higher. ``<unk>`` and the ``<s>`` unigram have count 0.
* **Discounts** per order from the counts of counts ``n1 .. n4`` of that order's (adjusted) counts:
  ``Y = n1 / (n1 + 2 n2)``, ``Dj = j - (j + 1) Y n(j+1) / nj`` for ``j = 1, 2, 3`` (Chen and Goodman's
  equation 26; ``D3`` is used for every count of 3 or more). When one is undefined or outside ``[0, j]``
  (tiny or artificial text) lmplz stops, or with ``--discount_fallback`` uses ``0.5, 1, 1.5`` for that order;
  :func:`estimate` does the same (its ``fallback`` argument).
* **Probabilities.** For context ``h`` with extensions ``h w``: ``u(h w) = (a(h w) - D(a)) / sum_w a(h w)``
  and the interpolation weight ``gamma(h) = (D1 N1(h) + D2 N2(h) + D3 N3+(h)) / sum_w a(h w)``, where
  ``Nj(h)`` counts the extensions with count ``j`` (``3+``: 3 or more). Then
  ``p(w | h) = u(h w) + gamma(h) p(w | h')`` with ``h'`` the context without its first word, and for
  unigrams ``p(w) = u(w) + gamma() / (V - 1)`` with ``V`` unigram types (``<unk>`` and ``</s>`` counted,
  ``<s>`` not): ``<unk>`` gets only that uniform share. ``p(<s>)`` is written as 1 (log10 0), as lmplz does,
  so that ``<s>`` can be scored as part of a sentence without changing its probability.
* **Backoffs.** An n-gram below the highest order that is the context of some longer n-gram gets
  ``gamma`` of itself as its backoff weight; any other gets 1 (log10 0). Nothing is pruned.

Arithmetic is float64 except the discounts, which follow lmplz's float32 formula bit for bit; lmplz's
probabilities are float32, so the two agree to about 1e-6 in log10. Counting works on integer arrays with numpy
(each n-gram is the pair (index of its first ``n - 1`` words among the ``(n-1)``-grams, last word)), so a
corpus of a million tokens takes seconds (``docs/lm.md``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

UNK, BOS, EOS = "<unk>", "<s>", "</s>"
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
#: The highest order :func:`estimate` builds (the ARPA reader and the kenlm module go to 6 as well).
MAX_ORDER = 6


class DiscountError(ValueError):
    """Modified Kneser-Ney discounts cannot be computed for an order (too little or artificial text)."""


@dataclass(frozen=True)
class Discount:
    """The discounts of one order: ``d1``, ``d2`` and ``d3`` for adjusted counts 1, 2 and 3 or more."""

    d1: float
    d2: float
    d3: float

    def amounts(self) -> np.ndarray:
        """``[0, d1, d2, d3]``: the discount of a count ``c`` is ``amounts()[min(c, 3)]``."""
        return np.array([0.0, self.d1, self.d2, self.d3])


#: What ``lmplz --discount_fallback`` substitutes for an order whose discounts cannot be computed.
FALLBACK_DISCOUNT = Discount(0.5, 1.0, 1.5)


def discount_from_counts(counts_of_counts: Sequence[int], order: int) -> Discount:
    """Chen and Goodman's estimate from ``n1, n2, n3, n4`` (how many n-grams have adjusted count 1 .. 4).

    Computed in float32 in the same operation order as lmplz, so that both give the same discounts.

    Raises:
        DiscountError: some ``nj`` (``j <= 3``) is 0, or a discount falls outside ``[0, j]``.
    """
    n = [0, *counts_of_counts[:4]]
    for j in range(1, 4):
        if n[j] == 0:
            raise DiscountError(f"no {order}-grams with adjusted count {j}, so the Kneser-Ney discount for count "
                                f"{j + 1 if j < 3 else '3+'} is undefined (too little or artificial text?)")
    f32 = np.float32
    y = f32(n[1]) / f32(n[1] + 2.0 * n[2])
    amounts = []
    for j in range(1, 4):
        amount = f32(j) - f32(j + 1) * y * f32(n[j + 1]) / f32(n[j])
        if amount < 0.0 or amount > j:
            raise DiscountError(f"the {order}-gram discount for adjusted count {j} is {float(amount):.6g}, outside "
                                f"[0, {j}] (too little or artificial text?)")
        amounts.append(float(amount))
    return Discount(*amounts)


@dataclass
class NGramTable:
    """The n-grams of one order, sorted by their word ids.

    Attributes:
        words: ``[K, n]`` word ids (indices into :attr:`KneserNeyLM.vocabulary`).
        context: ``[K]`` the row of the order below that holds the first ``n - 1`` words (0 for unigrams).
        log10_prob: ``[K]`` interpolated log10 probabilities.
        log10_backoff: ``[K]`` log10 backoff weights (0 where the n-gram is no context, and at the highest order).
    """

    words: np.ndarray
    context: np.ndarray
    log10_prob: np.ndarray
    log10_backoff: np.ndarray


@dataclass
class KneserNeyLM:
    """An estimated LM: its vocabulary (``<unk>``, ``<s>``, ``</s>``, then the words in order of first
    appearance), one :class:`NGramTable` per order and the discounts used."""

    vocabulary: list[str]
    tables: list[NGramTable]
    discounts: list[Discount]
    #: orders (1-based) whose discounts are the fallback because the estimate failed.
    fallback_orders: list[int] = field(default_factory=list)

    @property
    def order(self) -> int:
        return len(self.tables)

    def write_arpa(self, path: str | os.PathLike[str]) -> None:
        """Write the LM as an ARPA file laid out as lmplz writes it (a backoff column on every order but the
        highest, probabilities and backoffs with 7 significant digits)."""
        with open(Path(path), "w", encoding="utf-8", newline="\n") as out:
            out.write("\\data\\\n")
            for n, table in enumerate(self.tables, 1):
                out.write(f"ngram {n}={len(table.words)}\n")
            texts: list[str] = self.vocabulary
            for n, table in enumerate(self.tables, 1):
                if n > 1:  # n-gram text = text of its first n - 1 words (an (n-1)-gram) + its last word
                    texts = [f"{texts[c]} {self.vocabulary[w]}"
                             for c, w in zip(table.context.tolist(), table.words[:, -1].tolist())]
                out.write(f"\n\\{n}-grams:\n")
                probs = table.log10_prob.tolist()
                if n < self.order:
                    backoffs = table.log10_backoff.tolist()
                    out.writelines(f"{p:.7g}\t{t}\t{b:.7g}\n" for p, t, b in zip(probs, texts, backoffs))
                else:
                    out.writelines(f"{p:.7g}\t{t}\n" for p, t in zip(probs, texts))
            out.write("\n\\end\\\n")


@dataclass
class _Order:
    """Working arrays of one order ``n`` (see :func:`_count`)."""

    context: np.ndarray     # [K] row of the first n - 1 words among the (n-1)-grams (0 for unigrams: the root)
    word: np.ndarray        # [K] last word id
    suffix: np.ndarray      # [K] row of the last n - 1 words among the (n-1)-grams (unused for unigrams)
    raw: np.ndarray         # [K] occurrences in the text
    starts_bos: np.ndarray  # [K] whether the n-gram starts with <s>
    count: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # [K] adjusted count
    statistic: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # [K] count for discounts


def estimate(sentences: Iterable[Sequence[str]], order: int,
             fallback: Discount | None = FALLBACK_DISCOUNT) -> KneserNeyLM:
    """Estimate an interpolated modified Kneser-Ney LM of ``order`` from ``sentences`` (each a sequence of
    words), as ``lmplz -o ORDER`` (with ``--discount_fallback`` unless ``fallback`` is None) would.

    Raises:
        ValueError: ``order`` outside ``1 .. MAX_ORDER``, no sentences, or a sentence containing ``<s>``,
            ``</s>`` or ``<unk>`` (lmplz refuses those too).
        DiscountError: discounts cannot be computed for some order and ``fallback`` is None.
    """
    if not 1 <= order <= MAX_ORDER:
        raise ValueError(f"the order must be 1 .. {MAX_ORDER}, got {order}")
    vocabulary, tokens, depth = _stream(sentences)
    orders = _count(tokens, depth, order, len(vocabulary))
    discounts, fallback_orders = [], []
    for n, level in enumerate(orders, 1):
        counts_of_counts = np.bincount(np.minimum(level.statistic, 5), minlength=6)[1:5].tolist()
        try:
            discounts.append(discount_from_counts(counts_of_counts, n))
        except DiscountError:
            if fallback is None:
                raise
            discounts.append(fallback)
            fallback_orders.append(n)
    tables = _probabilities(orders, discounts, len(vocabulary))
    return KneserNeyLM(vocabulary, tables, discounts, fallback_orders)


def _stream(sentences: Iterable[Sequence[str]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The text as one array of word ids, each sentence ``<s> words </s>``, and each position's depth (how many
    tokens of its sentence precede it: 0 for ``<s>``)."""
    ids: dict[str, int] = {UNK: UNK_ID, BOS: BOS_ID, EOS: EOS_ID}
    tokens: list[int] = []
    lengths: list[int] = []
    for sentence in sentences:
        if isinstance(sentence, str):
            raise TypeError("each sentence must be a sequence of words, not a string")
        start = len(tokens)
        tokens.append(BOS_ID)
        for word in sentence:
            token = ids.setdefault(word, len(ids))
            if token <= EOS_ID:
                raise ValueError(f"the text contains the reserved word {word!r} (<s>, </s> and <unk> are added by "
                                 "the estimator)")
            tokens.append(token)
        tokens.append(EOS_ID)
        lengths.append(len(tokens) - start)
    if not lengths:
        raise ValueError("no sentences to estimate an LM from")
    token_array = np.array(tokens, dtype=np.int64)
    starts = np.repeat(np.cumsum([0, *lengths[:-1]]), lengths)
    depth = np.arange(len(tokens), dtype=np.int64) - starts
    vocabulary = list(ids)
    return vocabulary, token_array, depth


def _count(tokens: np.ndarray, depth: np.ndarray, order: int, vocab_size: int) -> list[_Order]:
    """The n-grams of every order with raw and adjusted counts.

    The n-gram of order ``n`` ending at position ``j`` exists when ``depth[j] >= n - 1`` (it does not reach
    before its ``<s>``); it starts with ``<s>`` when ``depth[j] == n - 1``. Order ``n``'s n-grams are numbered
    by sorting the keys ``row of the (n-1)-gram ending at j - 1`` x vocab + ``word at j``, which sorts them by
    their word ids, as the (n-1)-grams were.
    """
    unigrams = np.arange(vocab_size, dtype=np.int64)
    words_at = tokens[depth >= 1]  # every position but <s> is a unigram occurrence
    levels = [_Order(context=np.zeros(vocab_size, dtype=np.int64), word=unigrams, suffix=unigrams,
                     raw=np.bincount(words_at, minlength=vocab_size), starts_bos=unigrams == BOS_ID)]
    last = _last_window(tokens, depth, order)
    last_rows = [int(tokens[last])]  # per order, the row of the n-gram ending at position `last`
    row = tokens.copy()  # row[j]: the row of the n-gram ending at j, for the current n (unigrams: the word id)
    for n in range(2, order + 1):
        positions = np.nonzero(depth >= n - 1)[0]
        keys = row[positions - 1] * vocab_size + tokens[positions]
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        suffix = row[positions[first]]  # row of the (n-1)-gram ending at the same position: the last n-1 words
        levels.append(_Order(context=unique // vocab_size, word=unique % vocab_size, suffix=suffix,
                             raw=np.bincount(inverse, minlength=len(unique)),
                             starts_bos=depth[positions[first]] == n - 1))
        row = np.full_like(tokens, -1)
        row[positions] = inverse
        last_rows.append(int(row[last]))
    # Adjusted counts: raw at the highest order and for n-grams that start with <s>; else the number of distinct
    # n-grams one order higher whose last n words they are (no n-gram ends with <s>, so <s> and <unk> get 0).
    levels[-1].count = levels[-1].raw
    for n in range(order - 1, 0, -1):
        level = levels[n - 1]
        extensions = np.bincount(levels[n].suffix, minlength=len(level.word))
        level.count = np.where(level.starts_bos, level.raw, extensions)
    levels[0].count[BOS_ID] = 0
    # lmplz's counts of counts take each n-gram's adjusted count, except for the n-grams it still holds when its
    # pass over the highest-order n-grams ends: the suffixes of the last window (in its order, see
    # _last_window) below the highest order and not reaching before the window's <s>. Those it counts with their
    # raw count (its adjust_counts.cc, the loop after the main one). The discounts, not the probabilities,
    # depend on that, so it is reproduced here for the discounts only.
    for level in levels:
        level.statistic = level.count
    for n in range(1, min(order - 1, int(depth[last]) + 1) + 1):
        level = levels[n - 1]
        level.statistic = level.count.copy()
        level.statistic[last_rows[n - 1]] = level.raw[last_rows[n - 1]]
    return levels


def _last_window(tokens: np.ndarray, depth: np.ndarray, order: int) -> int:
    """The position where the last ``order``-token window ends when windows (padded before each sentence with
    ``<s>``) are sorted by their last word id, then the one before, and so on: lmplz's order of the n-grams it
    adjusts counts on. Word ids are numbered as lmplz numbers them (the specials, then order of first appearance)."""
    candidates = np.nonzero(depth >= 1)[0]
    for back in range(order):
        # the word `back` tokens before each candidate's end, <s> where that reaches before the sentence
        words = np.where(depth[candidates] >= back, tokens[candidates - np.minimum(back, depth[candidates])], BOS_ID)
        candidates = candidates[words == words.max()]
    return int(candidates[0])


def _probabilities(levels: list[_Order], discounts: list[Discount], vocab_size: int) -> list[NGramTable]:
    """Interpolated probabilities and backoffs of every order (the module docstring's formulas)."""
    order = len(levels)
    gammas: list[np.ndarray] = []  # per order: gamma of each context (a row of the order below; the root for 1)
    probs: list[np.ndarray] = []
    words: list[np.ndarray] = []
    for n, (level, discount) in enumerate(zip(levels, discounts), 1):
        contexts = 1 if n == 1 else len(levels[n - 2].word)
        count = level.count.astype(np.float64)
        capped = np.minimum(level.count, 3)
        denominator = np.bincount(level.context, weights=count, minlength=contexts)
        discounted = np.bincount(level.context, weights=discount.amounts()[capped] * (level.count > 0),
                                 minlength=contexts)
        with np.errstate(divide="ignore", invalid="ignore"):  # contexts without extensions are never used
            gamma = np.where(denominator > 0, discounted / denominator, 0.0)
            prob = (count - discount.amounts()[capped]) / denominator[level.context]
        if n == 1:
            prob = prob + gamma[0] / (vocab_size - 1)  # uniform over the vocabulary but <s>, which is never predicted
            prob[BOS_ID] = 1.0
            words.append(level.word[:, None])
        else:
            prob = prob + gamma[level.context] * probs[-1][level.suffix]
            words.append(np.concatenate([words[-1][level.context], level.word[:, None]], axis=1))
        gammas.append(gamma)
        probs.append(prob)
    tables = []
    for n, (level, prob) in enumerate(zip(levels, probs), 1):
        backoff = np.ones(len(prob))
        if n < order:  # an n-gram that is a context has a gamma; <unk> and </s> are never contexts
            is_context = np.bincount(levels[n].context, minlength=len(prob)) > 0
            is_context &= (level.word != UNK_ID) & (level.word != EOS_ID)
            backoff = np.where(is_context, gammas[n], 1.0)
        with np.errstate(divide="ignore"):  # a zero gamma (all discounts of a context 0) is -inf, as lmplz writes
            log10_prob = np.minimum(0.0, np.log10(prob))  # rounding may put a probability a hair above 1
            log10_backoff = np.log10(backoff)
        tables.append(NGramTable(words=words[n - 1], context=level.context, log10_prob=log10_prob,
                                 log10_backoff=log10_backoff))
    return tables
