"""Modified adaptive expansion search (mAES; Kim, Lee and Kim 2020, "Accelerating RNN Transducer Inference via
Adaptive Expansion Search", Algorithm 2), one utterance at a time: a readable baseline and specification.

Paths, their scores, entries and the merging of paths into entries (``merge``: ``"logsumexp"``, the paper's
recombination, or ``"max"``) are as in :mod:`transdec.decoding.beam_graves`, whose
:class:`~transdec.decoding.beam_graves.FrameSearch` this search shares. Frame by frame (``t = 0 .. T-1``), with
``W = beam_size``:

1. ``A`` is the set of sequences waiting at frame ``t``; the prefix search adds to each the paths from its
   prefixes in ``A`` that emit the rest of it at frame ``t`` (Graves' prefix step). Every prefix counts, up to
   ``max_symbols_per_frame - 1`` tokens shorter (ESPnet and NeMo also bound the difference by a ``prefix_alpha``,
   1 by default; this search has no such option).
2. Up to ``num_steps`` expansion steps. In each, every hypothesis of the current set (at the first step ``A``, then
   the tokens the previous step added) is scored by one joint call and expanded by its *candidates*: its
   ``W + expansion_beta`` best emissions by fused score (for TDT, label and duration pairs), less those scoring
   more than ``expansion_gamma`` below its best one (both per hypothesis). A candidate that leaves the frame (a
   blank of any kind, a TDT emission with a positive duration, a token that reaches ``max_symbols_per_frame``)
   goes to ``B``; a token that stays makes a hypothesis of the next set, unless that sequence was in ``A``, whose
   prefix search has counted every path to it. The steps end early when no token stays.
3. After the last step, each hypothesis its tokens made leaves the frame by every blank output (the paper's final
   blank; for multi-blank heads each blank and big blank, for TDT heads the blank with each duration, each a path
   of its own).
4. Only the ``W`` best entries of ``B`` are kept.

As in Graves' search, ``B`` holds every entry waiting at a later frame or finished; for TDT (NeMo's TDT mAES:
durations move the frame index) and multi-blank heads entries of different frames compete in one beam. Entries of
``A`` keep their paths in buckets by the number of tokens emitted at frame ``t``, so that ``max_symbols_per_frame``
holds for every path exactly as in greedy decoding (a token from the last bucket moves on one frame, scoring
nothing). The expansions alone add at most ``num_steps`` tokens per frame; paths from the prefix search can have
more, up to the limit.

Prediction network caching: the predictor runs once per distinct token sequence of the utterance, and the joint
once per sequence and frame (:class:`~transdec.decoding.beam_graves.FrameSearch`).

The n-best are the finished entries by score (per token with ``length_norm``), reported as in
:mod:`transdec.decoding.beam_graves`. Every path is counted at most once, so a score never exceeds its sequence's
summed probability (``"max"``: its best path). With ``W + expansion_beta`` at least the number of emissions,
``expansion_gamma = inf``, ``num_steps >= max_symbols_per_frame`` and ``W`` above the number of sequences a frame can
reach, every path is counted: the best hypothesis is the sequence with the highest total probability (``"max"``:
the best path).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transdec.decoding.beam_graves import Buckets, FrameSearch, Move, Tokens, check_summing_merge, summing_merge_option
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import ExpansionOptions
from transdec.decoding.registry import register_strategy
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel


@dataclass(frozen=True)
class MaesOptions(ExpansionOptions):
    """Options of mAES. ``merge`` is ``"logsumexp"`` (the paper's recombination, the default) or ``"max"`` (the best
    path to each sequence); ``"none"`` is a ValueError."""

    merge: str = summing_merge_option()

    def __post_init__(self) -> None:
        check_summing_merge(self.merge, "beam_maes")
        super().__post_init__()


@register_strategy("beam_maes", MaesOptions,
                   "modified adaptive expansion search with prefix search (Kim et al. 2020), one utterance at a time")
@torch.inference_mode()
def beam_maes(
    model: DecodingModel,
    encoder_out: torch.Tensor,
    lengths: torch.Tensor,
    max_symbols_per_frame: int | None = 10,
    beam_size: int = 4,
    nbest: int = 1,
    merge: str = "logsumexp",
    length_norm: bool = False,
    expansion_beta: int = 2,
    expansion_gamma: float = 2.3,
    num_steps: int = 2,
    fusions: Sequence[Fusion] = (),
) -> DecodingResult:
    """mAES over ``encoder_out [B, T, D]`` with valid ``lengths [B]``, one utterance after another.

    Returns the n-best per utterance (``result.nbest``), best first, and the best in ``result.hyps``.
    """
    lengths = checked_lengths(encoder_out, lengths)
    options = MaesOptions(max_symbols_per_frame=max_symbols_per_frame, beam_size=beam_size, nbest=nbest, merge=merge,
                          length_norm=length_norm, expansion_beta=expansion_beta, expansion_gamma=expansion_gamma,
                          num_steps=num_steps)
    scoring = Scoring(model.head, fusions)
    stats = DecodingStats()
    nbest_lists = [_search(FrameSearch(model, scoring, encoder_out[b, :length], max_symbols_per_frame, merge, stats),
                           options)
                   for b, length in enumerate(lengths.tolist())]
    return DecodingResult.from_nbest(nbest_lists, stats, encoder_out.device, encoder_out.dtype)


def _search(search: FrameSearch, options: MaesOptions) -> list[Hypothesis]:
    """mAES of one utterance (see the module docstring)."""
    num_candidates = options.beam_size + options.expansion_beta
    for frame in range(search.num_frames):
        arrivals = search.pending.pop(frame, None)
        if not arrivals:  # every path skipped this frame
            continue
        hypotheses = search.prefix_step(frame, arrivals)
        initial = set(hypotheses)
        for step in range(options.num_steps):
            expanded: dict[Tokens, Buckets] = {}
            for tokens, buckets in hypotheses.items():
                chosen = candidates(search.moves(frame, tokens), num_candidates, options.expansion_gamma)
                # A child has one parent, so the sets from different hypotheses never share a sequence.
                expanded.update(search.expand(frame, tokens, buckets, chosen, initial))
            if not expanded:
                break
            if step == options.num_steps - 1:
                for tokens, buckets in expanded.items():
                    blanks = [m for m in search.moves(frame, tokens) if not m.is_token]
                    search.expand(frame, tokens, buckets, blanks, initial)
            hypotheses = expanded
        search.prune(options.beam_size)
    return search.finished(options.nbest, options.length_norm)


def candidates(moves: list[Move], count: int, gamma: float) -> list[Move]:
    """mAES's expansion pruning of one hypothesis: its ``count`` best ``moves``, less those more than ``gamma``
    below the best (ties keep label, then duration order)."""
    ranked = sorted(moves, key=lambda m: -m.score)[:count]
    threshold = ranked[0].score - gamma if ranked and not math.isinf(gamma) else -math.inf
    return [m for m in ranked if m.score >= threshold]
