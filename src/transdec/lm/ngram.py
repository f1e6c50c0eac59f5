"""An n-gram LM over the ASR model's tokens, stored as tensors and queried for a whole batch of states at once.

A *state* is a context the LM knows: the empty context (state 0, the root) or an n-gram of order ``1 .. N-1``
from the ARPA file. Each state has its backoff weight and the state of its context without the first word
(its *backoff state*), and its *arcs*: one per n-gram that extends it by a word, with that n-gram's
log-probability and the state after it (the longest suffix of the extended context that is a state). Arcs are
sorted by (state, word), so that ``state * W + word`` keys can be found by binary search.

``p(w | h)`` is the arc's probability if state ``h`` has an arc for ``w``, else ``backoff(h) + p(w | h')`` with
``h'`` the backoff state, as KenLM computes it. :meth:`NGramLM.token_logprobs` resolves that for every token
of ``N`` states in at most ``N-1`` batched steps (one gather-scatter of the arcs of all states at one level) and
a dense unigram row at the root, so a whole beam is scored in a few tensor operations on any device. On a GPU the
same rule runs as one kernel per call with fixed shapes (:mod:`transdec.lm.ngram_kernels`), so that decoders can
capture the LM in CUDA graphs (``graph_safe``).

Two shapes lmplz writes that the kenlm module refuses to load are read as kenlm's rules define them: an order-1 LM
(the root is its only state: every token scores its unigram, as in the order-2 model with no bigrams), and a backoff
of ``-inf`` (lmplz's for a context whose discounts are all 0: the words without an arc there get probability 0).

Words are mapped to token ids by NeMo's convention for token-level LMs: token ``i`` is the word ``chr(i + 100)``.
``<s>`` starts every sentence, ``</s>`` ends it (:meth:`end_logprobs`), and tokens the LM never saw score as
``<unk>``. It implements :class:`~transdec.decoding.scoring.TokenScorer`, so
``Fusion(NGramLM.load("lm.arpa", vocab_size), weight)`` fuses it into any decoder.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from transdec.lm import ngram_kernels
from transdec.lm.arpa import Arpa, ArpaError, read_arpa
from transdec.tensor_files import read_tensor_file

#: NeMo's token-level LM convention: token id ``i`` is written as the character ``chr(i + TOKEN_OFFSET)``.
TOKEN_OFFSET = 100
_TENSORS = ("backoff", "backoff_to", "arc_start", "arc_count", "arc_token", "arc_logprob", "arc_to", "arc_key",
            "root_logprobs", "token_column")


def nemo_token_id(word: str) -> int | None:
    """The token id NeMo's convention gives ``word`` (one character), or None for any other word."""
    return ord(word) - TOKEN_OFFSET if len(word) == 1 and ord(word) >= TOKEN_OFFSET else None


class NGramLM:
    """An ARPA n-gram LM as tensors (see the module docstring); ``V`` tokens, word columns ``W = V + 2``
    (the tokens, then ``</s>``, then ``<unk>``)."""

    #: On CUDA every method launches kernels of fixed shapes and reads nothing back, so decoders may capture it in
    #: CUDA graphs (see :class:`~transdec.decoding.scoring.TokenScorer`).
    graph_safe = True

    def __init__(self, order: int, vocab_size: int, bos_state: int, tensors: dict[str, torch.Tensor]) -> None:
        self.order, self.vocab_size, self.bos_state = order, vocab_size, bos_state
        for name in _TENSORS:
            setattr(self, name, tensors[name])
        # The root and the unigram contexts (states 0 .. num_dense - 1, numbered first) get their whole resolved
        # distribution as a dense row: every backoff chain ends in them, so scoring needs at most N-2 sparse
        # levels and then one gather (a few MB for a 1024-token vocabulary).
        self.num_dense = 1 + int((self.backoff_to[1:] == 0).sum()) if order > 1 else 1
        self.dense = torch.empty(0, self.width, dtype=self.root_logprobs.dtype, device=self.root_logprobs.device)
        self.dense = self._sparse_logprobs(torch.arange(self.num_dense, device=self.root_logprobs.device))
        self.search_steps = ngram_kernels.search_steps(self)

    @property
    def width(self) -> int:
        return self.vocab_size + 2

    @property
    def device(self) -> torch.device:
        return self.arc_key.device

    # ----- building, saving, loading -----

    @classmethod
    def from_arpa(cls, arpa: Arpa, vocab_size: int, source: str = "the LM") -> NGramLM:
        """Build the tensors of ``arpa`` for a model with ``vocab_size`` tokens (NeMo's word convention)."""
        end, unk = vocab_size, vocab_size + 1
        columns: dict[str, int] = {"</s>": end, "<unk>": unk}
        for word in arpa.vocabulary:
            if word in ("<s>", "</s>", "<unk>"):
                continue
            token = nemo_token_id(word)
            if token is None or token >= vocab_size:
                raise ArpaError(f"{source}: the word {word!r} is not a token of a {vocab_size}-token model in NeMo's "
                                f"convention (token i written as chr(i + {TOKEN_OFFSET})): LM and model do not match")
            columns[word] = token
        if ("<s>",) not in arpa.ngrams[0]:
            raise ArpaError(f"{source}: no <s> unigram")
        states: dict[tuple[str, ...], int] = {(): 0}
        for section in arpa.ngrams[: arpa.order - 1]:
            for words in section:
                states[words] = len(states)

        def longest_state(words: tuple[str, ...]) -> int:
            while words not in states:
                words = words[1:]
            return states[words]

        backoff = torch.zeros(len(states), dtype=torch.float64)
        backoff_to = torch.zeros(len(states), dtype=torch.long)
        for words, state in states.items():
            if words:
                backoff[state] = arpa.ngrams[len(words) - 1][words][1]
                backoff_to[state] = longest_state(words[1:])
        arcs: list[tuple[int, int, float, int]] = []  # (from, column, logprob, to)
        for section in arpa.ngrams:
            for words, (logprob, _) in section.items():
                if words[-1] == "<s>":  # never predicted
                    continue
                arcs.append((states[words[:-1]], columns[words[-1]], logprob,
                             longest_state(words[-(arpa.order - 1):] if arpa.order > 1 else ())))
        arcs.sort(key=lambda arc: (arc[0], arc[1]))
        width = vocab_size + 2
        arc_from = torch.tensor([a[0] for a in arcs], dtype=torch.long)
        arc_token = torch.tensor([a[1] for a in arcs], dtype=torch.long)
        arc_count = torch.bincount(arc_from, minlength=len(states))
        root_logprobs = torch.full((width,), -torch.inf, dtype=torch.float64)
        root_arcs = arc_from == 0
        root_logprobs[arc_token[root_arcs]] = torch.tensor([a[2] for a in arcs], dtype=torch.float64)[root_arcs]
        token_column = torch.arange(vocab_size)
        unseen = root_logprobs[:vocab_size] == -torch.inf
        if bool(unseen.any()):
            if root_logprobs[unk] == -torch.inf:
                raise ArpaError(f"{source}: tokens {unseen.nonzero().squeeze(1).tolist()[:10]} have no unigram and "
                                "there is no <unk> to score them")
            token_column[unseen] = unk
        tensors = {
            "backoff": backoff, "backoff_to": backoff_to,
            "arc_start": torch.cumsum(arc_count, 0) - arc_count, "arc_count": arc_count,
            "arc_token": arc_token, "arc_logprob": torch.tensor([a[2] for a in arcs], dtype=torch.float64),
            "arc_to": torch.tensor([a[3] for a in arcs], dtype=torch.long), "arc_key": arc_from * width + arc_token,
            "root_logprobs": root_logprobs, "token_column": token_column,
        }
        # A 1-gram LM has one state, the empty context, and ``<s>`` starts there (kenlm scores unigrams alone).
        return cls(arpa.order, vocab_size, states[("<s>",)] if arpa.order > 1 else 0, tensors)

    @classmethod
    def load(cls, path: str | os.PathLike[str], vocab_size: int, device: torch.device | str = "cpu",
             dtype: torch.dtype = torch.float32) -> NGramLM:
        """An LM from an ARPA file or from a compiled ``.pt`` file made by :meth:`save`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such LM file")
        if path.suffix == ".pt":
            saved = read_tensor_file(path, "transdec-ngram-1", "compiled transdec n-gram LM", _TENSORS, ArpaError)
            if saved.get("vocab_size") != vocab_size:
                raise ArpaError(f"{path}: the LM is for {saved.get('vocab_size')} tokens, the model has {vocab_size}")
            if not all(isinstance(saved.get(k), int) for k in ("order", "bos_state")):
                raise ArpaError(f"{path}: a damaged compiled transdec n-gram LM file (missing order, bos_state)")
            lm = cls(saved["order"], vocab_size, saved["bos_state"], saved["tensors"])
        else:
            lm = cls.from_arpa(read_arpa(path), vocab_size, str(path))
        return lm.to(device, dtype)

    def save(self, path: str | os.PathLike[str]) -> None:
        """The tensors in one file that :meth:`load` reads back much faster than the ARPA text."""
        torch.save({"format": "transdec-ngram-1", "order": self.order, "vocab_size": self.vocab_size,
                    "bos_state": self.bos_state, "tensors": {n: getattr(self, n).cpu() for n in _TENSORS}}, path)

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> NGramLM:
        tensors = {}
        for name in _TENSORS:
            tensor = getattr(self, name).to(device)
            tensors[name] = tensor.to(dtype) if dtype is not None and tensor.is_floating_point() else tensor
        return NGramLM(self.order, self.vocab_size, self.bos_state, tensors)

    # ----- queries -----

    def all_logprobs(self, states: torch.Tensor) -> torch.Tensor:
        """``[N, W]``: ln p(word | state) of every word column for ``states [N]``, backoff resolved."""
        return self._sparse_logprobs(states, dense_below=self.num_dense)

    def _sparse_logprobs(self, states: torch.Tensor, dense_below: int = 1) -> torch.Tensor:
        """:meth:`all_logprobs` following arcs down to states below ``dense_below``, whose rows of
        :attr:`dense` (or, for 1, the root's unigrams) complete the distribution."""
        # NaN marks a word not resolved yet: -inf is a real score (after a context whose backoff is -inf, which
        # lmplz writes when its discounts are all 0, every word without an arc has probability 0).
        scores = torch.full((states.shape[0], self.width), torch.nan, dtype=self.root_logprobs.dtype,
                            device=states.device)
        total_backoff = torch.zeros(states.shape[0], dtype=scores.dtype, device=states.device)
        current = states
        for _ in range(self.order - 1):  # from the longest context down; the first arc found wins
            rows = (current >= dense_below).nonzero().squeeze(1)
            if rows.numel() == 0:
                break
            state = current[rows]
            counts = self.arc_count[state]
            arc_rows = torch.repeat_interleave(rows, counts)
            first = torch.repeat_interleave(self.arc_start[state] - (torch.cumsum(counts, 0) - counts), counts)
            arcs = first + torch.arange(arc_rows.shape[0], device=states.device)
            columns = self.arc_token[arcs]
            unset = scores[arc_rows, columns].isnan()
            scores[arc_rows[unset], columns[unset]] = (total_backoff[arc_rows] + self.arc_logprob[arcs])[unset]
            sparse = current >= dense_below
            total_backoff = total_backoff + torch.where(sparse, self.backoff[current], 0.0)
            current = torch.where(sparse, self.backoff_to[current], current)
        rest = self.root_logprobs.unsqueeze(0) if dense_below == 1 else self.dense[current]
        return torch.where(scores.isnan(), total_backoff.unsqueeze(1) + rest, scores)

    def token_logprobs(self, state: torch.Tensor) -> torch.Tensor:
        """``[N, V]``: ln p(token | state) of every token (tokens the LM never saw score as ``<unk>``)."""
        if ngram_kernels.kernel_available(state.device):
            return ngram_kernels.token_logprobs_kernel(self, state)
        if state.is_cuda:
            return ngram_kernels.token_logprobs_searched(self, state)
        return self.all_logprobs(state).gather(1, self.token_column.expand(state.shape[0], -1))

    def end_logprobs(self, state: torch.Tensor) -> torch.Tensor:
        """``[N]``: ln p(</s> | state)."""
        return self.all_logprobs(state)[:, self.vocab_size]

    def initial_state(self, batch_size: int, device: torch.device) -> torch.Tensor:
        return torch.full((batch_size,), self.bos_state, dtype=torch.long, device=device)

    def advance(self, state: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The states after each of ``state [N]`` reads ``tokens [N]``."""
        columns = self.token_column[tokens]
        result = torch.full_like(state, -1)
        current = state
        for _ in range(self.order):  # the root has an arc for every column a token maps to
            keys = current * self.width + columns
            index = torch.searchsorted(self.arc_key, keys).clamp(max=self.arc_key.shape[0] - 1)
            found = (self.arc_key[index] == keys) & (result < 0)
            result = torch.where(found, self.arc_to[index], result)
            current = torch.where(current > 0, self.backoff_to[current], 0)
        return result

    def select_state(self, mask: torch.Tensor, if_true: torch.Tensor, if_false: torch.Tensor) -> torch.Tensor:
        return torch.where(mask, if_true, if_false)

    def gather_state(self, state: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return state[indices]
