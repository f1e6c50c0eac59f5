"""Context biasing (phrase boosting) as a token scorer: an Aho-Corasick trie of phrases stored as tensors.

The rule (:mod:`transdec.biasing.reference` spells it out in plain Python, the specification this module is tested
against). Phrases are token-id sequences, each with a weight ``w_p``. Every prefix of a phrase is a trie node; a node
``n`` at depth ``d`` has the *token bonus* ``b(n) = w * (1 + depth_scaling * (d - 1))``, ``w`` the largest weight of
the phrases through ``n``. Then, per node:

* ``ns(n)``: the sum of ``b`` along the path root -> ``n``;
* ``end(n)``: a phrase ends at ``n``;
* ``E(n)``: the deepest end node on the path root -> ``n``, ``n`` included (the root if there is none), and ``E'(n)``
  the deepest one strictly above ``n``;
* ``U(n) = ns(n) - ns(E(n))``: the *open* part of the match, not earned yet;
* ``A(n) = U(n) + (ns(n) - ns(E'(n)) if end(n) else 0)``: arriving at an end node earns its phrase's part for good.

``U(root) = A(root) = 0``. A hypothesis' state is a node. Reading token ``t`` in state ``n`` goes to ``δ(n, t)``,
the standard Aho-Corasick goto (the deepest node on ``n``'s failure chain, ``n`` included, with a child on ``t``;
else the root), and the token's bonus is ``A(δ(n, t)) - U(n)``. Over a token stream the bonuses add up to the
earned parts of the phrases completed plus ``U`` of the last state, so:

* an open partial match that fails is taken back (its ``U`` is subtracted, the suffix match it falls back to is
  credited again);
* a completed phrase is kept, and so is a phrase that is a prefix of a longer one when the longer one fails;
* :meth:`BoostingTree.end_bonus` (``-U(n)``) is what a hypothesis that ends mid-match loses: with it the total is
  exactly the earned parts of the completed phrases (beam searches add it to their final hypotheses, see
  :meth:`~transdec.decoding.scoring.Scoring.final_bonus`).

Limitation: a phrase that only occurs as an Aho-Corasick *output link*, inside a longer open match and not as a
prefix of it, earns nothing (phrases ``abcd`` and ``bc``, stream ``abce``: the state after ``abc`` is the node
``abc``, the match fails at ``e`` and ``bc`` is never a state). Following every output link would need a bonus that
depends on more than the state.

:meth:`BoostingTree.token_logprobs` gives these bonuses for every token, for a batch of states; it is named so
because of :class:`~transdec.decoding.scoring.TokenScorer`, but returns bonuses in nats, not log-probabilities
(they are 0 for most tokens and never normalised).

Storage. Without a dense ``[num_nodes, V]`` table (thousands of phrases make tens of thousands of nodes): each root
has its whole goto row ``[R, V]``, and every other node only the goto arcs that differ from its root's row: the
union of the children of the nodes on its failure chain below the root (the deepest one wins), sorted by (node,
token) and stored back to back (CSR: ``arc_start``, ``arc_count``). Each node has at most ``width`` arcs, so the
states of a batch read theirs as one gather ``[N, width]`` (masked past each node's count) scattered onto their
root rows; :meth:`BoostingTree.advance` looks the token up in the same gather. Every shape is fixed by the tree,
nothing is read back to the host: the scorer is ``graph_safe``, decoders capture it in CUDA graphs. (Padding each
node's arcs to ``width`` in storage would cost ``num_nodes * width``, ``width`` being set by the busiest node, often
a hundred times the arcs themselves.)

Several phrase lists. :meth:`BoostingTree.build` takes one list per trie, each with its own root, all in the same
tables (node ids offset), and :meth:`BoostingTree.for_utterances` makes a view that starts each utterance of a batch
at its list's root. A batch with per-utterance phrase lists is then still one scorer, one state tensor and one gather
per step, however many lists there are: the decoders need no change (their states are opaque rows), and a CUDA graph
captured for the view serves any batch of the same lists.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import torch

from transdec.tensor_files import read_tensor_file

#: One phrase: its token ids and weight.
Phrase = tuple[Sequence[int], float]

FORMAT = "transdec-boosting-1"
#: Trees of at most this many nodes times tokens also keep every node's bonuses and goto targets as dense tables
#: ``[M, V]`` (at most 96 MB): a decoding step then reads a state's row with one gather instead of the dozen small
#: kernels of the sparse lookup, which is most of what boosting costs a batched greedy search.
DENSE_ENTRIES = 1 << 23
_TENSORS = ("root_node", "root_next", "root_gain", "node_root", "node_open", "node_parent", "node_token",
            "arc_start", "arc_count", "arc_token", "arc_next", "arc_gain")


class BoostingTree:
    """Phrase tries as tensors (see the module docstring) implementing
    :class:`~transdec.decoding.scoring.TokenScorer`; a state is a node id ``[N]`` (long).

    Attributes (``R`` roots, ``M`` nodes, ``A`` arcs plus one dummy, ``V`` tokens):
        root_node: ``[R]`` the node id of each root.
        root_next: ``[R, V]`` each root's goto target for every token.
        root_gain: ``[R, V + 1]`` ``A`` of those targets, and a spare column of zeros (see :meth:`token_logprobs`).
        node_root: ``[M]`` the root index (``0 .. R-1``) of each node's trie.
        node_open: ``[M]`` ``U(n)``, the open part of the match in node ``n``.
        node_parent, node_token: ``[M]`` each node's parent and the token to it (-1 at roots).
        arc_start, arc_count: ``[M]`` where each node's arcs start in the arc arrays, and how many there are.
        arc_token, arc_next, arc_gain: ``[A]`` each arc's token, target node and ``A`` of the target.
        utterance_roots: None, or in a view of :meth:`for_utterances`, ``[B]`` the root node of each utterance.
    """

    #: Fixed-shape kernels only, nothing read back: decoders may capture it in CUDA graphs.
    graph_safe = True

    def __init__(self, vocab_size: int, width: int, depth_scaling: float, tensors: dict[str, torch.Tensor],
                 utterance_roots: torch.Tensor | None = None) -> None:
        self.vocab_size, self.width, self.depth_scaling = vocab_size, width, depth_scaling
        for name in _TENSORS:
            setattr(self, name, tensors[name])
        self._tensors = tensors  # shared by views: their equality means "the same tables"
        if "dense_bonus" not in tensors and self.num_nodes * vocab_size <= DENSE_ENTRIES:
            tensors["dense_bonus"], tensors["dense_next"] = self._dense_tables()
        self.dense_bonus, self.dense_next = tensors.get("dense_bonus"), tensors.get("dense_next")
        self.utterance_roots = utterance_roots
        # Views of the same tables and roots are equal, so CUDA graph caches keyed on the fusions hit again when a
        # new view of the same lists comes (the graph reads the first view's roots, which are the same values).
        self._roots_key = None if utterance_roots is None else tuple(utterance_roots.tolist())

    # ----- building, saving, loading -----

    @classmethod
    def build(cls, phrase_lists: Sequence[Sequence[Phrase]], vocab_size: int, depth_scaling: float = 0.0,
              dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> BoostingTree:
        """One trie per list of ``(token_ids, weight)`` phrases (a list may be empty: no bonus), for a model of
        ``vocab_size`` tokens. ``dtype`` is the bonuses'."""
        if not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
        if not (isinstance(depth_scaling, (int, float)) and math.isfinite(depth_scaling) and depth_scaling >= 0):
            raise ValueError(f"depth_scaling must be a finite number >= 0, got {depth_scaling!r}")
        if isinstance(phrase_lists, (str, bytes)) or len(phrase_lists) == 0:
            raise ValueError("phrase_lists must be a sequence of phrase lists, at least one (which may be empty)")
        trie = _Trie(vocab_size, float(depth_scaling))
        for number, phrases in enumerate(phrase_lists):
            trie.add_root(number, phrases)
        tensors = trie.tensors(dtype)  # sets trie.width
        return cls(vocab_size, trie.width, float(depth_scaling), tensors).to(device)

    def save(self, path: str | os.PathLike[str]) -> None:
        """The tables in one file for :meth:`load` (a view's utterance roots are not saved)."""
        torch.save({"format": FORMAT, "vocab_size": self.vocab_size, "width": self.width,
                    "depth_scaling": self.depth_scaling, "tensors": {n: getattr(self, n).cpu() for n in _TENSORS}},
                   path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: torch.device | str = "cpu",
             dtype: torch.dtype | None = None) -> BoostingTree:
        """A tree saved by :meth:`save`; errors name the file."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such boosting tree file")
        saved = read_tensor_file(path, FORMAT, "saved transdec boosting tree", _TENSORS)
        tensors = saved["tensors"]
        if not (isinstance(saved.get("vocab_size"), int) and isinstance(saved.get("width"), int)
                and isinstance(saved.get("depth_scaling"), float)):
            raise ValueError(f"{path}: a damaged saved transdec boosting tree file (missing vocab_size, width or "
                             "depth_scaling)")
        if tuple(tensors["root_next"].shape[1:]) != (saved["vocab_size"],):
            raise ValueError(f"{path}: a damaged saved transdec boosting tree file (root rows do not match "
                             "vocab_size)")
        return cls(saved["vocab_size"], saved["width"], saved["depth_scaling"], tensors).to(device, dtype)

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> BoostingTree:
        """The tree on ``device`` (bonuses in ``dtype`` if given); a view stays a view of the same lists."""
        tensors = {}
        for name in _TENSORS:
            tensor = getattr(self, name).to(device)
            tensors[name] = tensor.to(dtype) if dtype is not None and tensor.is_floating_point() else tensor
        roots = None if self.utterance_roots is None else self.utterance_roots.to(device)
        if all(tensors[name] is getattr(self, name) for name in _TENSORS) and roots is self.utterance_roots:
            return self  # already there: the same tree (and CUDA graph cache entries) as before
        return BoostingTree(self.vocab_size, self.width, self.depth_scaling, tensors, roots)

    # ----- per-utterance lists -----

    @property
    def num_roots(self) -> int:
        return self.root_node.shape[0]

    @property
    def num_nodes(self) -> int:
        return self.node_root.shape[0]

    @property
    def device(self) -> torch.device:
        return self.root_gain.device

    def for_utterances(self, list_index: torch.Tensor | Sequence[int]) -> BoostingTree:
        """A view sharing these tables in which utterance ``b`` of a batch starts at the root of list
        ``list_index[b]`` (``[B]``): :meth:`initial_state` of ``n = B * K`` rows gives utterance ``b``'s root to
        rows ``b * K .. b * K + K - 1`` (the utterance-major layout of every batched decoder)."""
        index = torch.as_tensor(list_index, dtype=torch.long).cpu()
        if index.dim() != 1:
            raise ValueError(f"list_index must be one list index per utterance [B], got shape {tuple(index.shape)}")
        if index.numel() and not (0 <= int(index.min()) and int(index.max()) < self.num_roots):
            raise ValueError(f"list_index must lie in 0 .. {self.num_roots - 1} (the tree has {self.num_roots} "
                             f"phrase lists), got {index.tolist()}")
        roots = self.root_node.cpu()[index].to(self.device)
        return BoostingTree(self.vocab_size, self.width, self.depth_scaling, self._tensors, roots)

    @property
    def num_utterances(self) -> int | None:
        """``B`` of a view of :meth:`for_utterances`, else None (every row starts at root 0)."""
        return None if self.utterance_roots is None else self.utterance_roots.shape[0]

    def for_utterance(self, index: int) -> BoostingTree:
        """The scorer of utterance ``index`` decoded on its own (one utterance, its list's root); the tree itself
        when it is no view."""
        if self.utterance_roots is None:
            return self
        if not 0 <= index < self.utterance_roots.shape[0]:
            raise ValueError(f"utterance {index} of a boosting view made for {self.utterance_roots.shape[0]} "
                             "utterances: decode the batch for_utterances was made for")
        return BoostingTree(self.vocab_size, self.width, self.depth_scaling, self._tensors,
                            self.utterance_roots[index : index + 1])

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, BoostingTree) and other._tensors is self._tensors
                and other._roots_key == self._roots_key)

    def __hash__(self) -> int:
        return hash((id(self._tensors), self._roots_key))

    def __repr__(self) -> str:
        view = "" if self.utterance_roots is None else f", utterances={self.utterance_roots.shape[0]}"
        return (f"BoostingTree(lists={self.num_roots}, nodes={self.num_nodes}, vocab_size={self.vocab_size}, "
                f"width={self.width}{view})")

    # ----- CUDA graphs -----

    def graph_key(self) -> tuple:
        """What a CUDA graph captured on :meth:`graph_buffer` depends on: the shapes of the tables the scoring reads
        (each rounded up to a power of two; with dense tables the arcs are not read), the utterances of a view,
        dtype and device; not their values. Any tree of the same key is written into that buffer (:meth:`copy_to`)
        and decoded by the same graph, so trees made per batch (per-request phrases) do not make a graph each."""
        dense = self.dense_bonus is not None
        arcs = None if dense else (_bucket(self.arc_token.shape[0]), _bucket(self.width, 1))
        return (self.vocab_size, _bucket(self.num_roots), _bucket(self.num_nodes), dense, arcs, self.num_utterances,
                self.root_gain.dtype, self.device)

    def graph_buffer(self) -> BoostingTree:
        """A tree of zeros with the tables of :meth:`graph_key`'s shapes, for a graph to capture (load it with
        :meth:`copy_to`)."""
        vocab, dense = self.vocab_size, self.dense_bonus is not None
        roots, nodes = _bucket(self.num_roots), _bucket(self.num_nodes)
        arcs, width = (1, 1) if dense else (_bucket(self.arc_token.shape[0]), _bucket(self.width, 1))
        shapes = {"root_node": (roots,), "root_next": (roots, vocab), "root_gain": (roots, vocab + 1),
                  **{name: (nodes,) for name in _TENSORS if name.startswith("node_")},
                  **{name: (arcs,) for name in _TENSORS if name.startswith("arc_")},
                  "arc_start": (nodes,), "arc_count": (nodes,)}
        if dense:
            shapes["dense_bonus"] = shapes["dense_next"] = (nodes, vocab)
        tensors = {name: torch.zeros(shape, dtype=getattr(self, name).dtype, device=self.device)
                   for name, shape in shapes.items()}
        roots_buffer = None if self.utterance_roots is None else torch.zeros_like(self.utterance_roots)
        return BoostingTree(vocab, width, self.depth_scaling, tensors, roots_buffer)

    def copy_to(self, buffer: BoostingTree) -> None:
        """Write this tree's tables (and a view's roots) into ``buffer``, made by :meth:`graph_buffer` of a tree of
        the same :meth:`graph_key`; zeros past them (entries no state reaches)."""
        if buffer.graph_key() != self.graph_key():
            raise ValueError("copy_to: the buffer was made for a tree of other shapes")
        dense = self.dense_bonus is not None
        names = [name for name in _TENSORS if not (dense and name.startswith("arc_"))]
        names += ["dense_bonus", "dense_next"] if dense else []
        for name in names:
            value, target = getattr(self, name), getattr(buffer, name)
            target.zero_()
            target[tuple(slice(0, size) for size in value.shape)].copy_(value)
        if self.utterance_roots is not None:
            buffer.utterance_roots.copy_(self.utterance_roots)

    # ----- TokenScorer -----

    def initial_state(self, batch_size: int, device: torch.device) -> torch.Tensor:
        """``[batch_size]`` root node ids: root 0, or in a view each utterance's root repeated ``K`` times."""
        if self.utterance_roots is None:  # list 0's root is node 0
            return torch.zeros(batch_size, dtype=torch.long, device=device)
        utterances = self.utterance_roots.shape[0]
        if utterances == 0 or batch_size % utterances:
            raise ValueError(f"a boosting view for {utterances} utterances cannot start {batch_size} hypotheses: "
                             "decode the batch for_utterances was made for")
        # Utterance b's root in rows b*K .. b*K + K-1; expand and reshape, so nothing is read back to the host.
        roots = self.utterance_roots.to(device)
        return roots.unsqueeze(1).expand(utterances, batch_size // utterances).reshape(batch_size)

    def _arcs(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(arc indices, valid)``, each ``[N, width]``: the arcs of each state, padding masked."""
        offsets = torch.arange(self.width, device=state.device)
        valid = offsets < self.arc_count[state].unsqueeze(1)
        # The arc arrays end with a dummy arc, so the clamped padding always indexes something.
        arcs = (self.arc_start[state].unsqueeze(1) + offsets).clamp(max=self.arc_token.shape[0] - 1)
        return arcs, valid

    def token_logprobs(self, state: torch.Tensor) -> torch.Tensor:
        """``[N, V]``: the bonus (nats, not a log-prob) of every next token for states ``[N]``:
        ``A(δ(n, t)) - U(n)``."""
        return self.dense_bonus[state] if self.dense_bonus is not None else self._sparse_bonus(state)

    def end_bonus(self, state: torch.Tensor) -> torch.Tensor:
        """``[N]``: ``-U(n)``, the open bonus a hypothesis ending in state ``n`` gives back."""
        return -self.node_open[state]

    def advance(self, state: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The states ``δ(n, t)`` after each of ``state [N]`` reads ``tokens [N]``."""
        return self.dense_next[state, tokens] if self.dense_next is not None else self._sparse_next(state, tokens)

    def _sparse_bonus(self, state: torch.Tensor) -> torch.Tensor:
        arcs, valid = self._arcs(state)
        # Each state's root row with one spare column: padded arcs scatter there and it is cut off.
        rows = self.root_gain[self.node_root[state]]  # [N, V + 1]
        rows.scatter_(1, torch.where(valid, self.arc_token[arcs], self.vocab_size), self.arc_gain[arcs])
        return rows[:, : self.vocab_size] - self.node_open[state].unsqueeze(1)

    def _sparse_next(self, state: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        arcs, valid = self._arcs(state)
        hit = valid & (self.arc_token[arcs] == tokens.unsqueeze(1))  # at most one per row
        from_arc = torch.where(hit, self.arc_next[arcs], 0).sum(dim=1)
        from_root = self.root_next[self.node_root[state], tokens]
        return torch.where(hit.any(dim=1), from_arc, from_root)

    def _dense_tables(self, rows_at_once: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
        """``(bonus [M, V], next [M, V])`` of every node, by the sparse lookup (so equal to it)."""
        nodes = torch.arange(self.num_nodes, device=self.root_gain.device)
        bonus, targets = [], []
        for chunk in nodes.split(rows_at_once):
            bonus.append(self._sparse_bonus(chunk))
            arcs, valid = self._arcs(chunk)
            row_targets = torch.cat([self.root_next[self.node_root[chunk]], chunk.unsqueeze(1)], dim=1)  # [n, V+1]
            row_targets.scatter_(1, torch.where(valid, self.arc_token[arcs], self.vocab_size),
                                 torch.where(valid, self.arc_next[arcs], chunk.unsqueeze(1)))
            targets.append(row_targets[:, : self.vocab_size])
        return torch.cat(bonus), torch.cat(targets)

    def select_state(self, mask: torch.Tensor, if_true: torch.Tensor, if_false: torch.Tensor) -> torch.Tensor:
        return torch.where(mask, if_true, if_false)

    def gather_state(self, state: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return state[indices]

    # ----- inspection -----

    def prefix(self, node: int) -> tuple[int, tuple[int, ...]]:
        """``(list index, tokens)`` of ``node``: the phrase list of its trie and the token path root -> node."""
        parents, tokens = self.node_parent.tolist(), self.node_token.tolist()
        path = []
        while parents[node] >= 0:
            path.append(tokens[node])
            node = parents[node]
        return int(self.node_root[node]), tuple(reversed(path))


def _bucket(size: int, minimum: int = 16) -> int:
    """``size`` rounded up to a power of two (at least ``minimum``): the table sizes graphs are captured for."""
    return max(minimum, 1 << (size - 1).bit_length())


class _Trie:
    """The tries of :meth:`BoostingTree.build` in Python lists, one node id per node, roots included."""

    def __init__(self, vocab_size: int, depth_scaling: float) -> None:
        self.vocab_size, self.depth_scaling = vocab_size, depth_scaling
        self.children: list[dict[int, int]] = []
        self.parent: list[int] = []
        self.token: list[int] = []
        self.root: list[int] = []  # root index of each node
        self.weight: list[float] = []  # max weight of the phrases through each node
        self.end: list[bool] = []
        self.roots: list[int] = []
        self.fail: list[int] = []
        self.open: list[float] = []  # U
        self.gain: list[float] = []  # A
        self.arcs: list[dict[int, int]] = []  # the arcs that differ from the root's row
        self.width = 1

    def _new_node(self, parent: int, token: int, root_index: int) -> int:
        self.children.append({})
        self.parent.append(parent)
        self.token.append(token)
        self.root.append(root_index)
        self.weight.append(-math.inf)
        self.end.append(False)
        return len(self.children) - 1

    def add_root(self, root_index: int, phrases: Sequence[Phrase]) -> None:
        root = self._new_node(-1, -1, root_index)
        self.roots.append(root)
        for number, phrase in enumerate(phrases):
            try:
                tokens, weight = phrase
                tokens = [int(t) for t in tokens]
            except (TypeError, ValueError):
                raise ValueError(f"phrase list {root_index}, phrase {number}: expected (token_ids, weight), "
                                 f"got {phrase!r}") from None
            if not tokens:
                raise ValueError(f"phrase list {root_index}, phrase {number}: no tokens")
            if not all(0 <= t < self.vocab_size for t in tokens):
                raise ValueError(f"phrase list {root_index}, phrase {number}: token ids {tokens} must lie in "
                                 f"0 .. {self.vocab_size - 1}")
            if not (isinstance(weight, (int, float)) and math.isfinite(weight)):
                raise ValueError(f"phrase list {root_index}, phrase {number}: weight must be a finite number, "
                                 f"got {weight!r}")
            node = root
            for token in tokens:
                if token not in self.children[node]:
                    self.children[node][token] = self._new_node(node, token, root_index)
                node = self.children[node][token]
                self.weight[node] = max(self.weight[node], float(weight))
            self.end[node] = True

    def tensors(self, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """Failure links, ``U``, ``A`` and the arcs in breadth-first order (everything a node needs lies above
        it or on its failure chain, which is shallower), then the tables."""
        count = len(self.children)
        self.fail, self.open, self.gain = [0] * count, [0.0] * count, [0.0] * count
        self.arcs = [{} for _ in range(count)]
        node_score = [0.0] * count  # ns
        last_end = [0.0] * count  # ns(E(n))
        depth = [0] * count
        queue = deque(self.roots)
        for root in self.roots:
            self.fail[root] = root
        while queue:
            node = queue.popleft()
            root = self.roots[self.root[node]]
            for token, child in self.children[node].items():
                depth[child] = depth[node] + 1
                bonus = self.weight[child] * (1.0 + self.depth_scaling * (depth[child] - 1))
                node_score[child] = node_score[node] + bonus
                above = last_end[node]  # ns(E'(child))
                last_end[child] = node_score[child] if self.end[child] else above
                self.open[child] = node_score[child] - last_end[child]
                self.gain[child] = self.open[child] + (node_score[child] - above if self.end[child] else 0.0)
                # The failure link: the deepest proper suffix in the trie, found along the parent's chain.
                fallback = self.fail[node]
                while node != root and fallback != root and token not in self.children[fallback]:
                    fallback = self.fail[fallback]
                target = self.children[fallback].get(token) if node != root else None
                self.fail[child] = target if target is not None and target != child else root
                # Arcs: the children of the failure target's chain below the root, overridden by its own.
                self.arcs[child] = {**self.arcs[self.fail[child]], **self.children[child]}
                queue.append(child)
        arc_from, arc_token, arc_next = [], [], []
        for node in range(count):
            for token in sorted(self.arcs[node]):
                arc_from.append(node)
                arc_token.append(token)
                arc_next.append(self.arcs[node][token])
        # A dummy arc at the end: padded gathers index it (masked), and the arrays are never empty.
        arc_from_t = torch.tensor(arc_from, dtype=torch.long)
        arc_count = torch.bincount(arc_from_t, minlength=count)
        self.width = max(1, int(arc_count.max()) if count else 1)
        gain = torch.tensor(self.gain, dtype=torch.float64)
        arc_next_t = torch.tensor(arc_next + [self.roots[0]], dtype=torch.long)
        vocab = self.vocab_size
        root_next = torch.tensor(self.roots, dtype=torch.long).unsqueeze(1).repeat(1, vocab)  # [R, V]
        for index, root in enumerate(self.roots):
            if self.children[root]:
                root_next[index, list(self.children[root])] = torch.tensor(list(self.children[root].values()))
        # Each root row has a spare column for token_logprobs' padded scatter.
        root_gain = torch.cat([gain[root_next], torch.zeros(len(self.roots), 1, dtype=torch.float64)], dim=1)
        return {
            "root_node": torch.tensor(self.roots, dtype=torch.long),
            "root_next": root_next,
            "root_gain": root_gain.to(dtype),
            "node_root": torch.tensor(self.root, dtype=torch.long),
            "node_open": torch.tensor(self.open, dtype=torch.float64).to(dtype),
            "node_parent": torch.tensor(self.parent, dtype=torch.long),
            "node_token": torch.tensor(self.token, dtype=torch.long),
            "arc_start": torch.cumsum(arc_count, 0) - arc_count,
            "arc_count": arc_count,
            "arc_token": torch.tensor(arc_token + [vocab], dtype=torch.long),
            "arc_next": arc_next_t,
            "arc_gain": gain[arc_next_t].to(dtype),
        }
