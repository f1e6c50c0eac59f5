"""Joint logits to the scores decisions are made on: the one place every decoder turns joint output into scores.

Every decoder, greedy or beam, reads the joint's raw logits ``[N, ..., C]`` through :class:`Scoring`:

* the label logits (tokens and every blank) are log-softmax normalised; for TDT the duration logits are
  normalised on their own (see :mod:`transdec.protocol`);
* each :class:`Fusion` then adds an external model's token scores (shallow fusion, e.g. an n-gram LM).

External models plug in as a :class:`TokenScorer`: a batched model over the token vocabulary with its own
per-hypothesis state. Decoders carry that state next to the predictor's: they ask :meth:`Scoring.context`
for the token scores once per label (the state only changes when a token is emitted, like the predictor
output), pass it with every joint call, and :meth:`Scoring.advance` the state of the hypotheses that
emitted a token. Nothing in the search code knows what the external model is.

A scorer whose class sets ``graph_safe = True`` promises that on CUDA tensors its methods only launch kernels of
fixed shapes and read nothing back to the host; label-looping and ALSD++ then capture it in their CUDA graphs
(:class:`~transdec.lm.NGramLM` does). Other scorers are run eagerly, and a graph mode asked for with them is an error.

Fusion rules, with ``p`` the Transducer's label distribution, ``p_LM`` the scorer's over tokens and ``λ``
the weight (beam-search paper, Sec. 2.3):

* ``blank_scoring=False`` (eq. 2): ``ln p[k] + λ ln p_LM[k] + bonus`` for tokens, ``ln p[k]`` for blanks;
* ``blank_scoring=True`` (eq. 3): ``ln p[k] + λ ln((1 - p_blank) p_LM[k]) + bonus`` for tokens and
  ``(1 + λ) ln p[k]`` for each blank, ``p_blank`` being the probability of all blanks together, so that a
  high LM weight does not turn into more deletions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from transdec.protocol import HeadSpec

#: A token scorer's per-hypothesis state; opaque to decoders, like a predictor's.
ScorerState = Any


@runtime_checkable
class TokenScorer(Protocol):
    """A model over the ``V`` tokens scored for ``N`` hypotheses at once, e.g. an n-gram LM on tensors."""

    def initial_state(self, batch_size: int, device: torch.device) -> ScorerState:
        """State of ``batch_size`` hypotheses before any token (after ``<s>`` for an LM)."""
        ...

    def token_logprobs(self, state: ScorerState) -> torch.Tensor:
        """``[N, V]``: the log-probability of every next token, given each hypothesis' state."""
        ...

    def advance(self, state: ScorerState, tokens: torch.Tensor) -> ScorerState:
        """The state after each hypothesis reads ``tokens [N]`` (token ids ``< V``); ``state`` is not modified."""
        ...

    def select_state(self, mask: torch.Tensor, if_true: ScorerState, if_false: ScorerState) -> ScorerState:
        """Per hypothesis, ``if_true`` where ``mask [N]`` is True, else ``if_false``."""
        ...

    def gather_state(self, state: ScorerState, indices: torch.Tensor) -> ScorerState:
        """The states of hypotheses ``indices [N']`` (repeats allowed)."""
        ...


@dataclass(frozen=True)
class Fusion:
    """Shallow fusion of one :class:`TokenScorer` (see the module docstring for the rules).

    Attributes:
        scorer: the external model.
        weight: ``λ``, its weight against the Transducer's log-probs.
        token_bonus: added to every token's score (an insertion bonus against the deletions LM fusion causes).
        blank_scoring: eq. 3 instead of eq. 2.
    """

    scorer: TokenScorer
    weight: float
    token_bonus: float = 0.0
    blank_scoring: bool = False

    def __post_init__(self) -> None:
        for name in ("weight", "token_bonus"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"Fusion {name} must be a finite number, got {value!r}")


@dataclass
class LabelScores:
    """Scores of every label output of ``N`` joint calls (``...`` is any extra axis of the logits, e.g. a window).

    Attributes:
        scores: ``[N, ..., L]`` what decisions are made on: the label log-probs with every fusion added.
        label_logprobs: ``[N, ..., L]`` the Transducer's own label log-probs.
        duration_logprobs: TDT only (else None): ``[N, ..., K]`` the duration log-probs.
    """

    scores: torch.Tensor
    label_logprobs: torch.Tensor
    duration_logprobs: torch.Tensor | None


class Scoring:
    """Reads joint logits for one head with optional fusions; holds no per-hypothesis state itself.

    The state of the fused scorers is a tuple with one entry per fusion (empty without fusion), so decoders
    can carry it whatever the fusions are.
    """

    def __init__(self, head: HeadSpec, fusions: Sequence[Fusion] = ()) -> None:
        self.head = head
        self.fusions = tuple(fusions)
        for fusion in self.fusions:
            if not isinstance(fusion, Fusion):
                raise TypeError(f"fusions must be Fusion objects, got {type(fusion).__name__}")

    @property
    def acoustic_only(self) -> bool:
        """True without fusion: scores are the Transducer's log-probs, which fused kernels can compute alone."""
        return not self.fusions

    @property
    def graph_safe(self) -> bool:
        """True when every fused scorer may be captured in a CUDA graph (see the module docstring)."""
        return all(getattr(f.scorer, "graph_safe", False) for f in self.fusions)

    def initial_state(self, batch_size: int, device: torch.device) -> tuple[ScorerState, ...]:
        return tuple(f.scorer.initial_state(batch_size, device) for f in self.fusions)

    def context(self, state: tuple[ScorerState, ...]) -> tuple[torch.Tensor, ...]:
        """Each fusion's token log-probs ``[N, V]`` for hypotheses in ``state``; constant until a token is emitted."""
        return tuple(f.scorer.token_logprobs(s) for f, s in zip(self.fusions, state, strict=True))

    def advance(self, state: tuple[ScorerState, ...], tokens: torch.Tensor, mask: torch.Tensor) -> tuple[ScorerState, ...]:
        """The state after the hypotheses where ``mask [N]`` is True emitted ``tokens [N]``; others keep theirs.

        Tokens of rows outside ``mask`` may be anything (a blank id): they are replaced by token 0 before
        the scorer sees them.
        """
        if not self.fusions:
            return state
        safe_tokens = torch.where(mask, tokens, 0)
        return self.select_state(mask, tuple(f.scorer.advance(s, safe_tokens) for f, s in zip(self.fusions, state,
                                                                                             strict=True)), state)

    def gather_state(self, state: tuple[ScorerState, ...], indices: torch.Tensor) -> tuple[ScorerState, ...]:
        return tuple(f.scorer.gather_state(s, indices) for f, s in zip(self.fusions, state, strict=True))

    def select_state(self, mask: torch.Tensor, if_true: tuple[ScorerState, ...],
                     if_false: tuple[ScorerState, ...]) -> tuple[ScorerState, ...]:
        """Per hypothesis, ``if_true`` where ``mask [N]`` is True, else ``if_false``."""
        return tuple(f.scorer.select_state(mask, a, b) for f, a, b in zip(self.fusions, if_true, if_false, strict=True))

    def __call__(self, logits: torch.Tensor, context: tuple[torch.Tensor, ...] = ()) -> LabelScores:
        """Scores from raw joint logits ``[N, ..., C]`` and the :meth:`context` of the same ``N`` hypotheses."""
        head = self.head
        if logits.dtype in (torch.float16, torch.bfloat16):  # a joint in lower precision: normalise in float32
            logits = logits.float()
        if head.kind == "tdt":
            label_logprobs = logits[..., : head.num_labels].log_softmax(dim=-1)
            duration_logprobs = logits[..., head.num_labels :].log_softmax(dim=-1)
        else:
            label_logprobs, duration_logprobs = logits.log_softmax(dim=-1), None
        scores = label_logprobs
        for fusion, token_logprobs in zip(self.fusions, context, strict=True):
            scores = self._fuse(fusion, scores, label_logprobs, token_logprobs)
        return LabelScores(scores, label_logprobs, duration_logprobs)

    def _fuse(self, fusion: Fusion, scores: torch.Tensor, label_logprobs: torch.Tensor,
              token_logprobs: torch.Tensor) -> torch.Tensor:
        """``scores [N, ..., L]`` with one fusion's ``token_logprobs [N, V]`` added by its rule."""
        num_tokens = self.head.num_tokens
        # [N, V] -> [N, 1, ..., V]: one context per hypothesis, shared by the extra axes of the logits.
        token_logprobs = token_logprobs.view(token_logprobs.shape[0], *[1] * (scores.dim() - 2), num_tokens)
        # A weight of 0 switches the scorer off even where it gives -inf (0 * -inf would be NaN).
        token_part = (fusion.weight * token_logprobs.to(scores.dtype) if fusion.weight else
                      torch.zeros_like(token_logprobs, dtype=scores.dtype)) + fusion.token_bonus
        if not fusion.blank_scoring:
            return torch.cat([scores[..., :num_tokens] + token_part, scores[..., num_tokens:]], dim=-1)
        blank_logprobs = label_logprobs[..., num_tokens:]
        # ln(1 - p_blank) = ln(sum of token probabilities), which stays finite when p_blank rounds to 1.
        log_not_blank = label_logprobs[..., :num_tokens].logsumexp(dim=-1, keepdim=True)
        return torch.cat([
            scores[..., :num_tokens] + token_part + fusion.weight * log_not_blank,
            scores[..., num_tokens:] + fusion.weight * blank_logprobs,
        ], dim=-1)
