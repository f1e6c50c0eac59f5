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

Two methods a scorer may have besides the protocol's: ``end_bonus(state) -> [N]``, added (weighted) to the scores of
the final hypotheses of beam searches (:meth:`Scoring.final_bonus`: phrase boosting gives back the bonus of a
phrase left unfinished), and ``for_utterance(b)``, the scorer of utterance ``b`` for the decoders that search one
utterance at a time (:meth:`Scoring.for_utterance`: per-utterance phrase lists).

A scorer whose class sets ``graph_safe = True`` promises that on CUDA tensors its methods only launch kernels of
fixed shapes and read nothing back to the host; label-looping and the batched beam searches (ALSD++, AES++, WIND)
then capture it in their CUDA graphs (:class:`~transdec.lm.NGramLM` and the boosting tree do). Other scorers are
run eagerly, and a graph mode asked for with them is an error. A scorer whose values change between batches but
whose shapes do not (a boosting tree made per batch) may also offer ``graph_key()``, ``graph_buffer()`` and
``copy_to(buffer)``: graphs then read it from buffers (:func:`~transdec.decoding.cuda.graph_cache.fusions_key`).

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
            if fusion.scorer is None:  # e.g. a Boost of text phrases that no tokenizer has turned into tokens yet
                raise ValueError(getattr(fusion, "unbound_reason", None) or f"a {type(fusion).__name__} has no scorer")
            scorer_tokens = getattr(fusion.scorer, "vocab_size", head.num_tokens)
            if scorer_tokens != head.num_tokens:
                raise ValueError(f"a fused {type(fusion.scorer).__name__} scores {scorer_tokens} tokens, the model "
                                 f"has {head.num_tokens}")

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

    def for_utterance(self, index: int) -> Scoring:
        """The scoring of utterance ``index`` of the batch, for decoders that search one utterance at a time with
        ``initial_state(1, ...)``: each scorer with a ``for_utterance(index)`` method (a scorer with per-utterance
        states, such as :meth:`transdec.biasing.BoostingTree.for_utterances`) is narrowed to that utterance, the
        others are used as they are."""
        if not any(hasattr(f.scorer, "for_utterance") for f in self.fusions):
            return self
        return Scoring(self.head, [Fusion(f.scorer.for_utterance(index), f.weight, f.token_bonus, f.blank_scoring)
                                   if hasattr(f.scorer, "for_utterance") else f for f in self.fusions])

    @staticmethod
    def check_batch_size(fusions: Sequence[Fusion], batch_size: int) -> None:
        """A ValueError if a scorer made for a batch of a given size (``num_utterances``) gets another."""
        for fusion in fusions:
            utterances = getattr(fusion.scorer, "num_utterances", None)
            if utterances is not None and utterances != batch_size:
                raise ValueError(f"a fused {type(fusion.scorer).__name__} was made for batches of {utterances} "
                                 f"utterances, the batch has {batch_size}")

    @property
    def has_final_bonus(self) -> bool:
        """Whether a fused scorer has an ``end_bonus`` (see :meth:`final_bonus`)."""
        return any(hasattr(f.scorer, "end_bonus") for f in self.fusions)

    def final_bonus(self, state: tuple[ScorerState, ...]) -> torch.Tensor | float:
        """``[N]``: what ends the hypotheses in ``state``: the sum of ``weight * scorer.end_bonus(state) [N]`` over
        the fusions whose scorer has that optional method (0.0, a float, when none has).

        A scorer whose token scores hold bonuses that are only earned later (phrase boosting gives a phrase's
        bonus token by token and takes it back when the match fails) gives back what a hypothesis ending there has
        not earned. Beam searches add it to the scores of their final hypotheses before ranking them; greedy
        decoding keeps its scores as they are (it ranks nothing at the end).
        """
        total: torch.Tensor | float = 0.0
        for fusion, scorer_state in zip(self.fusions, state, strict=True):
            if hasattr(fusion.scorer, "end_bonus") and fusion.weight:
                total = total + fusion.weight * fusion.scorer.end_bonus(scorer_state)
        return total

    def context(self, state: tuple[ScorerState, ...]) -> tuple[torch.Tensor, ...]:
        """Per fusion, what it adds for hypotheses in ``state``; constant until a token is emitted, so computed
        once per label rather than at every joint call: ``[N, L]`` (its weighted token scores and token bonus, 0 for
        the blanks) for eq. 2, its token log-probs ``[N, V]`` for eq. 3 (whose part depends on the joint's blank
        probability)."""
        return tuple(self._context(f, f.scorer.token_logprobs(s)) for f, s in zip(self.fusions, state, strict=True))

    def _context(self, fusion: Fusion, token_logprobs: torch.Tensor) -> torch.Tensor:
        if fusion.blank_scoring:
            return token_logprobs
        # A weight of 0 switches the scorer off even where it gives -inf (0 * -inf would be NaN).
        token_part = fusion.weight * token_logprobs if fusion.weight else torch.zeros_like(token_logprobs)
        if fusion.token_bonus:
            token_part = token_part + fusion.token_bonus
        return torch.nn.functional.pad(token_part, (0, self.head.num_labels - self.head.num_tokens))

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
        for fusion, fusion_context in zip(self.fusions, context, strict=True):
            scores = self._fuse(fusion, scores, label_logprobs, fusion_context)
        return LabelScores(scores, label_logprobs, duration_logprobs)

    def _fuse(self, fusion: Fusion, scores: torch.Tensor, label_logprobs: torch.Tensor,
              context: torch.Tensor) -> torch.Tensor:
        """``scores [N, ..., L]`` with one fusion's :meth:`context` added by its rule."""
        # [N, X] -> [N, 1, ..., X]: one context per hypothesis, shared by the extra axes of the logits.
        if scores.dim() > 2:
            context = context.view(context.shape[0], *[1] * (scores.dim() - 2), context.shape[-1])
        if context.dtype != scores.dtype:
            context = context.to(scores.dtype)
        if not fusion.blank_scoring:
            return scores + context
        num_tokens = self.head.num_tokens
        token_part = (fusion.weight * context if fusion.weight else torch.zeros_like(context)) + fusion.token_bonus
        blank_logprobs = label_logprobs[..., num_tokens:]
        # ln(1 - p_blank) = ln(sum of token probabilities), which stays finite when p_blank rounds to 1.
        log_not_blank = label_logprobs[..., :num_tokens].logsumexp(dim=-1, keepdim=True)
        return torch.cat([
            scores[..., :num_tokens] + token_part + fusion.weight * log_not_blank,
            scores[..., num_tokens:] + fusion.weight * blank_logprobs,
        ], dim=-1)
