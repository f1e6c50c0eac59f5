"""Modified adaptive expansion search (mAES; Kim, Lee and Kim 2020, "Accelerating RNN Transducer Inference via
Adaptive Expansion Search", Algorithm 2), one utterance at a time: a readable baseline and specification.

Paths, their scores, entries and the merging of paths into entries (``merge``: ``"logsumexp"``, the paper's
recombination, or ``"max"``) are as in :mod:`transdec.decoding.beam.graves`, whose
:class:`~transdec.decoding.beam.frame_search.FrameSearch` this search shares. Frame by frame (``t = 0 .. T-1``), with
``W = beam_size``:

1. ``A`` is the set of sequences waiting at frame ``t``; the prefix search adds to each the paths from its
   prefixes in ``A`` that emit the rest of it at frame ``t`` (Graves' prefix step). Every prefix counts, up to
   ``max_symbols_per_frame - 1`` tokens shorter (ESPnet and NeMo also bound the difference by a ``prefix_alpha``,
   1 by default; this search has no such option).
2. Up to ``num_steps`` expansion steps. In each, every hypothesis of the current set (at the first step ``A``, then
   the tokens the previous step added) is scored by one joint call and expanded by its *candidates*: its
   ``W + expansion_beta`` best emissions by score (for TDT, label and duration pairs; see ``pruning``), less those
   scoring more than ``expansion_gamma`` below its best one (both per hypothesis). A candidate that leaves the frame (a
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

With fusions (``fusions``, e.g. an LM), ``pruning="late"`` (the default) ranks a hypothesis' candidates (its
``W + expansion_beta`` best, and ``expansion_gamma`` below the best) by their fused scores; ``"early"`` by the
Transducer's alone, the fusion scores joining the candidates kept (as ESPnet's and NeMo's mAES fuse an LM, and
as AES++ does). ``B`` is always ranked by the fused scores.

Prediction network caching: the predictor runs once per distinct token sequence of the utterance, and the joint
once per sequence and frame (:class:`~transdec.decoding.beam.frame_search.FrameSearch`). One predictor call feeds the
new sequences of an expansion step and one joint call scores all its hypotheses (the final blank step likewise);
candidates are found by a top-k over those rows, and only they become Python objects.

The n-best are the finished entries by score (per token with ``length_norm``), reported as in
:mod:`transdec.decoding.beam.graves`. Every path is counted at most once, so a score never exceeds its sequence's
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

from transdec.decoding.beam.alsd_pp import greedy_decoding
from transdec.decoding.beam.frame_search import (Buckets, FrameSearch, Move, ScoredRow, Tokens, check_summing_merge,
                                            stacked, summing_merge_option)
from transdec.decoding.beam.greedy_guard import kept_greedy
from transdec.decoding.beam.utterance import search_frames_of_each
from transdec.decoding.options import ExpansionOptions, PruningOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, Hypothesis
from transdec.decoding.scoring import Fusion
from transdec.protocol import DecodingModel


@dataclass(frozen=True)
class MaesOptions(ExpansionOptions, PruningOptions):
    """Options of mAES. ``merge`` is ``"logsumexp"`` (the paper's recombination, the default) or ``"max"`` (the best
    path to each sequence); ``"none"`` is a ValueError. ``pruning`` (with fusions): whether expansion candidates are
    ranked by their fused scores or by the Transducer's alone (see the module docstring)."""

    merge: str = summing_merge_option()

    def __post_init__(self) -> None:
        check_summing_merge(self.merge, "beam_maes")
        super().__post_init__()


@takes_options(MaesOptions)
@torch.inference_mode()
def beam_maes(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: MaesOptions,
              fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """mAES over ``encoder_out [B, T, D]`` with valid ``lengths [B]``, one utterance after another; ``result.nbest``
    has each utterance's n-best, best first, ``result.hyps`` the best."""
    return kept_greedy(search_frames_of_each(model, encoder_out, lengths, options, fusions, _search),
                       options, lambda: greedy_decoding(model, encoder_out, lengths, options, fusions))


def _search(search: FrameSearch, options: MaesOptions) -> list[Hypothesis]:
    """mAES of one utterance (see the module docstring)."""
    num_candidates = options.beam_size + options.expansion_beta
    early = options.pruning == "early"
    for frame, hypotheses in search.prefix_steps():
        initial = set(hypotheses)
        for step in range(options.num_steps):
            rows = search.rows(frame, hypotheses)
            chosen = candidates(search, rows, num_candidates, options.expansion_gamma, early)
            expanded: dict[Tokens, Buckets] = {}
            for (tokens, buckets), moves in zip(hypotheses.items(), chosen):
                # A child has one parent, so the sets from different hypotheses never share a sequence.
                expanded.update(search.expand(frame, tokens, buckets, moves, initial))
            if not expanded:
                break
            if step == options.num_steps - 1:
                for (tokens, buckets), row in zip(expanded.items(), search.rows(frame, expanded)):
                    search.expand(frame, tokens, buckets, search.blank_moves(row), initial)
            hypotheses = expanded
        search.prune(options.beam_size)
    return search.finished(options.nbest, options.length_norm)


def candidates(search: FrameSearch, rows: list[ScoredRow], count: int, gamma: float, early: bool) -> list[list[Move]]:
    """mAES's expansion pruning of each hypothesis (one joint row each): its ``count`` best emissions, less those more
    than ``gamma`` below the best, ranked by fused scores or with ``early`` by the Transducer's (ties keep label,
    then duration order)."""
    label_ranks, duration_logprobs = stacked(rows, early)  # [H, L], TDT [H, K]
    label_ranks = label_ranks.double()
    if duration_logprobs is None:
        ranks, labels = label_ranks.topk(min(count, label_ranks.shape[1]), dim=1)
        durations = torch.zeros_like(labels)
    else:
        # The best label and duration pairs pair the best labels with the best durations (scored independently).
        top_labels, label_index = label_ranks.topk(min(count, label_ranks.shape[1]), dim=1)  # [H, c]
        top_durations, duration_index = duration_logprobs.double().topk(min(count, duration_logprobs.shape[1]), dim=1)
        pairs = (top_labels.unsqueeze(2) + top_durations.unsqueeze(1)).flatten(1)  # [H, c * c']
        ranks, pair = pairs.topk(min(count, pairs.shape[1]), dim=1)
        width = top_durations.shape[1]
        labels, durations = label_index.gather(1, pair // width), duration_index.gather(1, pair % width)
    chosen = []
    for row, rank_list, label_list, duration_list in zip(rows, ranks.tolist(), labels.tolist(), durations.tolist()):
        ranked = sorted(zip(rank_list, label_list, duration_list), key=lambda c: (-c[0], c[1], c[2]))
        threshold = ranked[0][0] - gamma if not math.isinf(gamma) else -math.inf
        chosen.append([search.move(row, label, duration) for rank, label, duration in ranked if rank >= threshold])
    return chosen
