"""The boosting rule of :mod:`transdec.biasing.tree` in plain Python: the specification the tensors are tested against.

Nodes are token prefixes ``(list index, tokens)``, computed straight from the definitions each time they are asked
for: no failure links are stored, the goto is found by walking suffixes (the Aho-Corasick goto ``δ(n, t)`` is the
longest suffix of ``n``'s tokens followed by ``t`` that is a node of the trie), and ``ns``, ``E``, ``U`` and ``A`` by
walking the path from the root. Slow, and only meant for tests and for reading.
"""

from __future__ import annotations

from collections.abc import Sequence

from transdec.biasing.tree import Phrase

#: A state: the phrase list (its root) and the tokens of the node.
State = tuple[int, tuple[int, ...]]


class ReferenceBoosting:
    """The phrase lists of :meth:`~transdec.biasing.tree.BoostingTree.build` as dictionaries of prefixes."""

    def __init__(self, phrase_lists: Sequence[Sequence[Phrase]], depth_scaling: float = 0.0) -> None:
        self.depth_scaling = depth_scaling
        self.weights: list[dict[tuple[int, ...], float]] = []  # every node (prefix) -> max weight through it
        self.ends: list[set[tuple[int, ...]]] = []
        for phrases in phrase_lists:
            weights: dict[tuple[int, ...], float] = {(): 0.0}
            ends: set[tuple[int, ...]] = set()
            for tokens, weight in phrases:
                tokens = tuple(int(t) for t in tokens)
                for length in range(1, len(tokens) + 1):
                    prefix = tokens[:length]
                    weights[prefix] = max(weights.get(prefix, float(weight)), float(weight))
                ends.add(tokens)
            self.weights.append(weights)
            self.ends.append(ends)

    def initial_state(self, list_index: int = 0) -> State:
        return list_index, ()

    def token_bonus(self, state: State) -> float:
        """``b(n)``."""
        index, tokens = state
        return self.weights[index][tokens] * (1.0 + self.depth_scaling * (len(tokens) - 1)) if tokens else 0.0

    def node_score(self, state: State) -> float:
        """``ns(n)``: the token bonuses along the path root -> n."""
        index, tokens = state
        return sum(self.token_bonus((index, tokens[:length])) for length in range(1, len(tokens) + 1))

    def last_end(self, state: State, strictly_above: bool = False) -> State:
        """``E(n)`` (or ``E'(n)``): the deepest end node on the path root -> n."""
        index, tokens = state
        for length in range(len(tokens) - (1 if strictly_above else 0), 0, -1):
            if tokens[:length] in self.ends[index]:
                return index, tokens[:length]
        return index, ()

    def open_part(self, state: State) -> float:
        """``U(n) = ns(n) - ns(E(n))``."""
        return self.node_score(state) - self.node_score(self.last_end(state))

    def earned(self, state: State) -> float:
        """What arriving at ``n`` earns for good: ``ns(n) - ns(E'(n))`` at an end node, else 0."""
        index, tokens = state
        if tokens not in self.ends[index]:
            return 0.0
        return self.node_score(state) - self.node_score(self.last_end(state, strictly_above=True))

    def goto(self, state: State, token: int) -> State:
        """``δ(n, t)``: the longest suffix of n's tokens followed by ``t`` that is a node (the root at worst)."""
        index, tokens = state
        text = tokens + (token,)
        while text not in self.weights[index]:
            text = text[1:]
        return index, text

    def bonus(self, state: State, token: int) -> float:
        """The bonus of reading ``token`` in ``state``: ``A(δ(n, t)) - U(n)``."""
        target = self.goto(state, token)
        return self.open_part(target) + self.earned(target) - self.open_part(state)

    def end_bonus(self, state: State) -> float:
        """``-U(n)``: what a hypothesis ending in ``state`` gives back."""
        return -self.open_part(state)

    def score(self, tokens: Sequence[int], list_index: int = 0) -> tuple[list[float], list[State], float]:
        """The bonus of each token of ``tokens``, the state after each, and the end bonus after the last."""
        state = self.initial_state(list_index)
        bonuses, states = [], []
        for token in tokens:
            bonuses.append(self.bonus(state, token))
            state = self.goto(state, token)
            states.append(state)
        return bonuses, states, self.end_bonus(state)
