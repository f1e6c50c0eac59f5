"""Each item's own phrases, boosted in the batch it is decoded in.

A manifest item may carry its own phrase list (``"boost_phrases": ["Anna Karenina", ["Vronsky", 2.0]]``): the
names of a call's participants, the terms of a lecture. The lists of a batch become one :class:`BoostingTree` with a
root per item, so the batch is still decoded in one call and each utterance is boosted by its own phrases only;
a list given for the whole run (``--boost-phrases``) is a separate fusion, added to every item's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transdec.biasing.boost import DEFAULT_WEIGHT, Boost
from transdec.biasing.phrases import BoostPhrase, tokenize_phrases
from transdec.biasing.tree import BoostingTree
from transdec.decoding.api import DecodingConfig

#: The manifest field that holds an item's own phrases.
ITEM_PHRASES_FIELD = "boost_phrases"


@dataclass(frozen=True)
class BoostOptions:
    """How phrases are boosted: ``weight`` per matched token (nats), growing with the depth of the match by
    ``depth_scaling``, and, for cased models, the case variants of every phrase as well."""

    weight: float = DEFAULT_WEIGHT
    depth_scaling: float = 0.0
    case_variants: bool = False


def item_phrases(value: object, where: str) -> list[BoostPhrase]:
    """The phrases of a manifest entry's ``boost_phrases`` value: a list of texts or ``[text, weight]`` pairs.

    Raises:
        ValueError: the value has another form; the message starts with ``where``.
    """
    if not isinstance(value, list):
        raise ValueError(f"{where}: {ITEM_PHRASES_FIELD} must be a list of phrases, got {type(value).__name__}")
    phrases = []
    for number, phrase in enumerate(value):
        if isinstance(phrase, str):
            phrases.append(BoostPhrase(phrase))
        elif (isinstance(phrase, list) and len(phrase) == 2 and isinstance(phrase[0], str)
              and isinstance(phrase[1], (int, float)) and not isinstance(phrase[1], bool)):
            phrases.append(BoostPhrase(phrase[0], float(phrase[1])))
        else:
            raise ValueError(f"{where}: {ITEM_PHRASES_FIELD}[{number}] must be a text or [text, weight], got {phrase!r}")
    return phrases


def item_boost(phrase_lists: Sequence[Sequence[BoostPhrase] | None], tokenizer, vocab_size: int,
               options: BoostOptions, device: torch.device) -> Boost | None:
    """The fusion boosting utterance ``b`` of a batch by ``phrase_lists[b]`` (``None`` or empty: nothing); None
    where no list holds a phrase."""
    if not any(phrase_lists):
        return None
    tokenized = [tokenize_phrases(list(phrases or ()), tokenizer, options.case_variants) for phrases in phrase_lists]
    tree = BoostingTree.build(tokenized, vocab_size, options.depth_scaling).to(device)
    return Boost(tree.for_utterances(torch.arange(len(phrase_lists), device=device)), options.weight)


def with_boost(decoding: DecodingConfig, boost: Boost | None) -> DecodingConfig:
    """``decoding`` with ``boost`` as one more fusion; ``decoding`` itself for None."""
    return decoding if boost is None else dataclasses.replace(decoding, fusions=(*decoding.fusions, boost))


def bind_boosts(decoding: DecodingConfig, tokenizer) -> DecodingConfig:
    """``decoding`` with every :class:`Boost` given text phrases and no tokenizer bound to ``tokenizer``."""
    fusions = tuple(fusion.bind(tokenizer) if isinstance(fusion, Boost) else fusion for fusion in decoding.fusions)
    same = all(new is old for new, old in zip(fusions, decoding.fusions))
    return decoding if same else dataclasses.replace(decoding, fusions=fusions)
