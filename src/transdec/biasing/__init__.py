"""Context biasing (phrase boosting): phrases the decoder should prefer, fused like an n-gram LM.

``DecodingConfig(fusions=[Boost(["Anna Karenina", "Vronsky"], tokenizer=model.tokenizer)])`` boosts every token of a
phrase being matched by ``weight`` nats, takes a match that fails back, and keeps the phrases completed:

* :mod:`transdec.biasing.tree`: :class:`BoostingTree`, the phrases as an Aho-Corasick trie on tensors (the scoring
  rule, per-utterance phrase lists);
* :mod:`transdec.biasing.reference`: the same rule in plain Python, the specification;
* :mod:`transdec.biasing.phrases`: phrases as text, phrase files, tokenizing for a model;
* :mod:`transdec.biasing.boost`: :class:`Boost`, the fusion.
"""

from transdec.biasing.boost import DEFAULT_WEIGHT, Boost
from transdec.biasing.phrases import BoostPhrase, case_variants_of, read_phrase_file, tokenize_phrases
from transdec.biasing.tree import BoostingTree

__all__ = ["DEFAULT_WEIGHT", "Boost", "BoostPhrase", "BoostingTree", "case_variants_of", "read_phrase_file",
           "tokenize_phrases"]
