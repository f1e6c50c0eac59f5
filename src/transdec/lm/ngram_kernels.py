"""Every token's n-gram log-probability for a batch of LM states, in fixed-shape work that CUDA graphs can capture.

:meth:`NGramLM.token_logprobs <transdec.lm.ngram.NGramLM.token_logprobs>` on a CPU walks the arcs of all states
level by level with data-dependent shapes (fast there, but each level reads its sizes back from the device).
Here each ``(state, token)`` pair is resolved on its own: down the state's backoff chain, a binary search for
the token among the arcs of each sparse context (arcs are sorted by state, then word), the first arc found
giving ``backoff sum + arc log-prob``, and the dense row of the unigram context the chain ends in otherwise.
That is KenLM's rule, as in :mod:`transdec.lm.ngram`, with no host sync and the same shapes on every call:

* :func:`token_logprobs_kernel`: one Triton program per state and block of tokens (NGPU-LM's layout); the
  backoff chain has at most ``order - 1`` sparse levels and each search at most ``ceil(log2(arcs + 1))`` steps,
  both unrolled;
* :func:`token_logprobs_searched`: the same resolution in PyTorch operations, a ``searchsorted`` over all arc
  keys per level, for GPUs without Triton and for checking the kernel.
"""

from __future__ import annotations

import os
from typing import Protocol

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU wheels of torch come without Triton
    triton = None


class NGramTables(Protocol):
    """The tensors of an n-gram LM that scoring reads: :class:`~transdec.lm.ngram.NGramLM` has them. Typed by its
    tables rather than by that class, since :mod:`transdec.lm.ngram` calls this module. ``S`` states, ``A`` arcs
    (sorted by state, then word), ``V`` tokens, ``W = V + 2`` word columns."""

    order: int
    vocab_size: int
    num_dense: int  # states 0 .. num_dense - 1 (the root, the unigram contexts) have a dense row
    search_steps: int
    token_column: torch.Tensor  # [V]: each token's word column
    backoff: torch.Tensor  # [S]
    backoff_to: torch.Tensor  # [S]
    arc_start: torch.Tensor  # [S]
    arc_count: torch.Tensor  # [S]
    arc_token: torch.Tensor  # [A]: the word column
    arc_logprob: torch.Tensor  # [A]
    arc_key: torch.Tensor  # [A]: state * W + word column
    root_logprobs: torch.Tensor  # [W]
    dense: torch.Tensor  # [num_dense, W]: resolved log-probabilities

    @property
    def width(self) -> int: ...


def kernel_available(device: torch.device) -> bool:
    """Whether :func:`token_logprobs_kernel` runs for tensors on ``device`` (on CPU only through Triton's
    interpreter); ``TRANSDEC_LM_KERNEL=0`` turns it off, for comparisons."""
    if triton is None or os.environ.get("TRANSDEC_LM_KERNEL") == "0":
        return False
    return device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def search_steps(lm: NGramTables) -> int:
    """Binary-search steps that find a word among the arcs of any one state: ``ceil(log2(max arcs + 1))``."""
    most = int(lm.arc_count.max()) if lm.arc_count.numel() else 0
    return max(1, most.bit_length())


def token_logprobs_searched(lm: NGramTables, states: torch.Tensor) -> torch.Tensor:
    """``[N, V]``: ln p(token | state) for ``states [N]``, each pair resolved by :func:`torch.searchsorted`."""
    columns = lm.token_column.unsqueeze(0)  # [1, V]
    scores = torch.zeros(states.shape[0], lm.vocab_size, dtype=lm.root_logprobs.dtype, device=states.device)
    found = torch.zeros(scores.shape, dtype=torch.bool, device=states.device)
    total_backoff = torch.zeros(states.shape[0], 1, dtype=scores.dtype, device=states.device)
    current = states.unsqueeze(1)  # [N, 1]
    last_arc = max(lm.arc_key.shape[0] - 1, 0)
    for _ in range(lm.order - 1):  # from the longest context down; the first arc found wins
        sparse = current >= lm.num_dense
        keys = current * lm.width + columns  # [N, V]
        index = torch.searchsorted(lm.arc_key, keys).clamp(max=last_arc)
        hit = sparse & ~found & (lm.arc_key[index] == keys)
        scores = torch.where(hit, total_backoff + lm.arc_logprob[index], scores)
        found = found | hit
        total_backoff = total_backoff + torch.where(sparse, lm.backoff[current], 0.0)
        current = torch.where(sparse, lm.backoff_to[current], current)
    rest = lm.dense[current.squeeze(1)].gather(1, columns.expand(states.shape[0], -1))
    return torch.where(found, scores, total_backoff + rest)


def token_logprobs_kernel(lm: NGramTables, states: torch.Tensor, block: int = 256) -> torch.Tensor:
    """:func:`token_logprobs_searched` as one Triton kernel launch."""
    out = torch.empty(states.shape[0], lm.vocab_size, dtype=lm.root_logprobs.dtype, device=states.device)
    if states.shape[0] == 0:
        return out
    grid = (states.shape[0], triton.cdiv(lm.vocab_size, block))
    _token_logprobs[grid](
        states, lm.token_column, lm.arc_start, lm.arc_count, lm.arc_token, lm.arc_logprob, lm.backoff,
        lm.backoff_to, lm.dense, out, lm.vocab_size, lm.width, lm.num_dense,
        LEVELS=lm.order - 1, SEARCH_STEPS=lm.search_steps, BLOCK=block,
    )
    return out


if triton is not None:

    @triton.jit
    def _token_logprobs(states, token_column, arc_start, arc_count, arc_token, arc_logprob, backoff, backoff_to,
                        dense, out, num_tokens, width, num_dense,
                        LEVELS: tl.constexpr, SEARCH_STEPS: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        tokens = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        valid = tokens < num_tokens
        columns = tl.load(token_column + tokens, mask=valid, other=0)
        state = tl.load(states + row)
        total_backoff = tl.zeros([BLOCK], dtype=out.dtype.element_ty)
        result = tl.zeros([BLOCK], dtype=out.dtype.element_ty)
        found = tokens < 0
        for _level in tl.static_range(LEVELS):
            sparse = state >= num_dense
            first = tl.load(arc_start + state)
            end = first + tl.where(sparse, tl.load(arc_count + state), 0)
            low = tl.zeros([BLOCK], dtype=tl.int64) + first
            high = tl.zeros([BLOCK], dtype=tl.int64) + end
            for _step in tl.static_range(SEARCH_STEPS):  # the first arc whose word is not below the column
                open_range = low < high
                middle = (low + high) // 2
                word = tl.load(arc_token + middle, mask=open_range, other=0)
                below = word < columns
                low = tl.where(open_range & below, middle + 1, low)
                high = tl.where(open_range & ~below, middle, high)
            hit = valid & ~found & (low < end)
            word = tl.load(arc_token + low, mask=hit, other=-1)
            hit = hit & (word == columns)
            logprob = tl.load(arc_logprob + low, mask=hit, other=0.0)
            result = tl.where(hit, total_backoff + logprob, result)
            found = found | hit
            total_backoff += tl.where(sparse, tl.load(backoff + state), 0.0)
            state = tl.where(sparse, tl.load(backoff_to + state), state)
        rest = tl.load(dense + state * width + columns, mask=valid, other=0.0)
        result = tl.where(found, result, total_backoff + rest)
        tl.store(out + row * num_tokens + tokens, result, mask=valid)
