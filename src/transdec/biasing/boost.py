"""Phrase boosting as a fusion: ``DecodingConfig(fusions=[Boost(phrases, tokenizer=model.tokenizer)])``.

:class:`Boost` is a :class:`~transdec.decoding.scoring.Fusion` whose scorer is a
:class:`~transdec.biasing.tree.BoostingTree`: every decoder, greedy or beam, adds ``weight`` times the tree's bonus
to each token's score (the same path as an n-gram LM's log-probs), and beam searches rank their final hypotheses with
the bonus a hypothesis ending mid-phrase gives back (:meth:`~transdec.decoding.scoring.Scoring.final_bonus`).
Greedy results keep the scores of the tokens they chose: a greedy decode that ends mid-phrase keeps that phrase's
open bonus in its score (it ranks nothing, so nothing depends on it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import torch

from transdec.biasing.phrases import BoostPhrase, tokenize_phrases
from transdec.biasing.tree import BoostingTree
from transdec.decoding.scoring import Fusion

#: The default boost per matched token, in nats (a phrase's weight multiplies it). One nat makes a token of a phrase
#: being matched count as if the model found it e (about 2.7) times likelier: enough to win against a competitor the
#: model finds a little likelier (a rare name against a common word that sounds alike), not enough to override clear
#: acoustic evidence. Since a match that fails is taken back (and, in beam searches, one that is left unfinished),
#: false starts cost a hypothesis nothing in the end. Beam searches with many rare words often gain from 1.5 - 3;
#: greedy decoding, which cannot undo a token it emitted for a phrase that then fails, is safer at 1 or below.
DEFAULT_WEIGHT = 1.0

#: What a phrase may be given as: a text, a text with its weight, token ids, or token ids with their weight.
PhraseInput = Union[str, BoostPhrase, Sequence[int], tuple[Sequence[int], float]]


@dataclass(frozen=True, init=False, eq=False)
class Boost(Fusion):
    """Boost ``phrases`` by ``weight`` nats per matched token (see :mod:`transdec.biasing.tree` for the rule).

    ``phrases`` are texts (``str`` or :class:`~transdec.biasing.phrases.BoostPhrase`, tokenized by ``tokenizer``,
    with their :func:`~transdec.biasing.phrases.case_variants_of` too with ``case_variants``), token-id lists
    (``[ids]`` or ``(ids, weight)``), or a :class:`~transdec.biasing.tree.BoostingTree` built beforehand (one with
    per-utterance lists: :meth:`~transdec.biasing.tree.BoostingTree.for_utterances`). The tree is built at
    construction when it can be: from a tree, from token ids with ``vocab_size`` or a ``tokenizer``, from texts with a
    ``tokenizer``. Otherwise the Boost is *unbound* (``scorer`` is None) until :meth:`bind` gives it the model's
    tokenizer; decoding with an unbound Boost is a ValueError saying so.

    ``depth_scaling`` makes a token's bonus grow with its depth ``d`` in the phrase: ``1 + depth_scaling * (d - 1)``
    times the weight. Boosts compare (and hash) by their tree and weights, as the fusions CUDA graphs are cached by.
    """

    phrases: tuple[Any, ...] = field(default=(), repr=False)
    tokenizer: Any = field(default=None, repr=False)
    depth_scaling: float = 0.0
    case_variants: bool = False
    vocab_size: int | None = None

    def __init__(self, phrases: BoostingTree | Sequence[PhraseInput], weight: float = DEFAULT_WEIGHT,
                 tokenizer: Any = None, depth_scaling: float = 0.0, case_variants: bool = False, *,
                 vocab_size: int | None = None) -> None:
        if tokenizer is not None:
            tokenizer_tokens = getattr(tokenizer, "vocab_size", None)
            if vocab_size is not None and tokenizer_tokens is not None and vocab_size != tokenizer_tokens:
                raise ValueError(f"Boost: vocab_size={vocab_size} but the tokenizer has {tokenizer_tokens} tokens")
            vocab_size = tokenizer_tokens if tokenizer_tokens is not None else vocab_size
        if isinstance(phrases, BoostingTree):
            if depth_scaling or case_variants:
                raise ValueError("Boost: depth_scaling and case_variants are fixed when a BoostingTree is built; "
                                 "give them to BoostingTree.build / tokenize_phrases")
            if vocab_size is not None and vocab_size != phrases.vocab_size:
                raise ValueError(f"Boost: the tree is for {phrases.vocab_size} tokens, the tokenizer has {vocab_size}")
            scorer, items, depth_scaling, vocab_size = phrases, (), phrases.depth_scaling, phrases.vocab_size
        else:
            items = _phrase_items(phrases)
            has_text = any(isinstance(p, BoostPhrase) for p in items)
            scorer = None
            if vocab_size is not None and (tokenizer is not None or not has_text):
                scorer = _build(items, tokenizer, vocab_size, depth_scaling, case_variants)
        values = {"scorer": scorer, "weight": weight, "token_bonus": 0.0, "blank_scoring": False, "phrases": items,
                  "tokenizer": tokenizer, "depth_scaling": float(depth_scaling), "case_variants": bool(case_variants),
                  "vocab_size": vocab_size}
        for name, value in values.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    @property
    def unbound_reason(self) -> str | None:
        """Why :attr:`scorer` is None (what to pass), or None when it is built."""
        if self.scorer is not None:
            return None
        if any(isinstance(p, BoostPhrase) for p in self.phrases):
            return ("a Boost of text phrases needs the model's tokenizer: Boost(phrases, tokenizer=model.tokenizer), "
                    "or boost.bind(model.tokenizer)")
        return ("a Boost of token ids needs the model's vocabulary size: Boost(ids, vocab_size=model.head.num_tokens) "
                "or tokenizer=model.tokenizer")

    def bind(self, tokenizer: Any) -> Boost:
        """This Boost built with ``tokenizer`` (the model's) where it is unbound; itself where it is built."""
        if self.scorer is not None:
            return self
        return Boost(self.phrases, self.weight, tokenizer, self.depth_scaling, self.case_variants,
                     vocab_size=self.vocab_size)

    def to(self, device: torch.device | str) -> Boost:
        """This Boost with its tree on ``device`` (the decoder's); an unbound one as it is."""
        if self.scorer is None:
            return self
        moved = object.__new__(Boost)
        for name in (f.name for f in dataclasses.fields(self)):
            object.__setattr__(moved, name, getattr(self, name))
        object.__setattr__(moved, "scorer", self.scorer.to(device))
        return moved

    def _key(self) -> tuple:
        # An unbound Boost is its phrases; a built one its tree (whose phrases it no longer needs to compare).
        return (self.scorer, self.weight, self.depth_scaling, self.case_variants, self.vocab_size,
                self.phrases if self.scorer is None else None)

    def __eq__(self, other: object) -> bool:
        return type(other) is Boost and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _phrase_items(phrases: Any) -> tuple[Any, ...]:
    """``phrases`` as a tuple of :class:`BoostPhrase` (texts) and ``(tuple of ids, weight)`` (token ids)."""
    if isinstance(phrases, (str, BoostPhrase)):
        phrases = [phrases]
    items = []
    for number, phrase in enumerate(phrases):
        if isinstance(phrase, BoostPhrase):
            items.append(phrase)
        elif isinstance(phrase, str):
            items.append(BoostPhrase(phrase))
        elif (isinstance(phrase, tuple) and len(phrase) == 2 and isinstance(phrase[0], Sequence)
              and not isinstance(phrase[0], str)):
            items.append((_token_ids(phrase[0], number), phrase[1]))
        else:
            items.append((_token_ids(phrase, number), 1.0))
    if not items:
        raise ValueError("Boost needs at least one phrase")
    return tuple(items)


def _token_ids(tokens: Any, number: int) -> tuple[int, ...]:
    if isinstance(tokens, torch.Tensor):
        tokens = tokens.tolist()
    if not isinstance(tokens, Sequence) or isinstance(tokens, str) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise ValueError(f"Boost phrase {number}: expected a text, a BoostPhrase, token ids or (token ids, weight), "
                         f"got {tokens!r}")
    return tuple(tokens)


def _build(items: tuple[Any, ...], tokenizer: Any, vocab_size: int, depth_scaling: float,
           case_variants: bool) -> BoostingTree:
    phrases: list[tuple[Sequence[int], float]] = []
    for item in items:
        if isinstance(item, BoostPhrase):
            phrases.extend(tokenize_phrases([item], tokenizer, case_variants))
        else:
            phrases.append(item)
    return BoostingTree.build([phrases], vocab_size, depth_scaling)
