"""Graves' beam search (Graves 2012, "Sequence Transduction with Recurrent Neural Networks", Sec. 3.2), one
utterance at a time: a readable baseline and specification.

Terms. A *path* is one sequence of emissions under the decoding rules of
:mod:`transdec.decoding.greedy.reference` (a blank moves time by 1, a big blank by its duration, a TDT emission by
its duration (a blank by at least 1), a token of an RNN-T or multi-blank head stays at its frame, and after
``max_symbols_per_frame`` tokens at one frame the forced blank is the only emission). Its score is the sum
of its emissions' scores from :class:`~transdec.decoding.scoring.Scoring` (fused; for TDT plus the duration's
log-prob). The search works on token *sequences*: the entry of a sequence holds the paths to it that the search has
combined, as their total (``merge="logsumexp"``, the paper's rule) or their best (``merge="max"``), see
:class:`~transdec.decoding.beam.frame_search.PathSum`.

The search, frame by frame (``t = 0 .. T-1``), with ``W = beam_size``:

1. ``A`` is the set of sequences waiting at frame ``t`` (they have left frame ``t - 1`` or an earlier one).
2. Prefix step: each ``y`` in ``A`` also takes every path that starts at a proper prefix ``ŷ`` of ``y`` that is in
   ``A`` and emits the rest of ``y`` at frame ``t`` (the paper's ``Pr(y) += Σ Pr(ŷ) Pr(y | ŷ, t)``).
3. While ``A`` is not empty and fewer than ``W`` entries of ``B`` score higher than the best of ``A``: take the best
   ``y*`` out of ``A`` and expand it by every emission (every label output, for TDT with every duration; the
   paper's ``for k in Y``). An emission that leaves frame ``t`` (a blank of any kind,
   a TDT emission with a positive duration, a token that reaches ``max_symbols_per_frame`` with the forced blank
   after it) adds the extended
   path set to ``B``, merged with what ``B`` holds for the same sequence at the same frame; a token that stays at
   ``t`` adds ``y* + k`` to ``A``, except when ``y* + k`` was in ``A`` at the start of the frame: the prefix step
   has already counted every path to it, those through ``y*`` included.
4. Only the ``W`` best entries of ``B`` are kept.

``B`` is every entry waiting at a later frame or finished. For RNN-T that is exactly the paper's ``B``, the
sequences that have left frame ``t`` (by its blank, or by the forced blank); for TDT and multi-blank heads, whose
emissions can skip frames, it is the natural generalisation (the one NeMo's TDT beam search takes): an entry is a
sequence *at a frame*, a sequence that arrives at one frame by two routes is one entry, at two frames two entries,
and entries of every later frame and finished ones compete in one beam. A path that moves past the last frame is
finished.

``max_symbols_per_frame = n``: the paths combined in one entry of ``A`` can have emitted different numbers of
tokens at frame ``t`` (the prefix step adds paths with up to ``n - 1`` tokens there), and those have different
futures. So an entry of ``A`` keeps its paths in ``n`` buckets by that number, each a :class:`PathSum`; it is
ranked by their combination, and a token from bucket ``n - 1`` leaves the frame by the forced blank. With
``None`` there is one bucket and no limit; a frame's expansion then ends only by the beam criterion.

The n-best are the finished entries ranked by score (by score per token with ``length_norm``; Graves ranks by
``log Pr(y) / |y|``, which ``length_norm=True`` gives). A :class:`~transdec.decoding.hypothesis.Hypothesis` reports
the sequence, the alignment (timestamps, durations, token log-probs) of the best single path among those its
entry combined, ``score`` (the combined fused score) and ``am_score`` (the same paths' combined score without
fusions; with ``"max"``, the best path's).

Fusion (``fusions``, e.g. an LM) and ``pruning``: with ``"late"`` (the default) every ranking above (the order of
``A``, the beam criterion, the ``W`` best of ``B``) is by fused scores. With ``"early"`` the emissions made at
frame ``t`` count there with their Transducer scores alone (the fused score of the paths before ``t`` plus the
Transducer's of the rest, :attr:`~transdec.decoding.beam.frame_search.PathSum.rank`); their fusion scores join the
``W`` entries kept, for the next frames and the n-best (beam-search paper, Sec. 2.3: the Transducer selects, the
LM rescores what it selected). With ``"max"`` an entry keeps its best path by fused
score either way, and ranks by the best rank among its paths. Without fusions, or with nothing pruned, the two are
the same search.

Computing it. The search above is what is computed; two things make it affordable with a large vocabulary, and
neither changes a result (up to ties between equal scores):

* ``y*`` has a child in ``A`` for every token, but few are ever taken out of ``A``. Its children all hold ``y*``'s
  paths that can still emit at ``t`` (the buckets below ``n - 1``), each extended by its token, so they rank in
  the order of their tokens' scores: :class:`_StayingChildren` makes each child when it would reach the top of
  ``A`` (from a top-k of ``y*``'s joint row; all of it sorted only if more are taken), and takes no place in ``A``
  before.
* Token emissions of ``y*`` that leave the frame (TDT tokens with a positive duration; tokens from bucket
  ``n - 1``) would add an entry to ``B`` per token and duration. An entry made only by them ranks below the ``W``
  best entries they make (each of those ranks at least as high as its share from ``y*``), so it could neither
  be kept at the end of the frame nor change the beam criterion (``W`` entries of ``B`` would outrank ``A``'s best
  before it did). :class:`_LeavingTokens` makes only its ``W`` best targets, and adds its share to every entry of
  ``B`` that exists for any other reason (when either appears first), so no entry misses any of its paths.

One joint call scores the rows of all entries of ``A`` after the prefix step (and of the prefixes it walks
through); each entry taken out of ``A`` later needs a row of its own.

Exactness: every path is counted at most once, so an entry's score never exceeds the summed probability (or, with
``"max"``, the best path) of its sequence. When ``W`` exceeds the number of sequences a frame can reach and
``max_symbols_per_frame`` is finite, ``A`` runs empty at every frame, every path is counted, and the best
hypothesis is the sequence with the highest total probability (``"max"``: the best path).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transdec.decoding.beam.alsd_pp import greedy_decoding
from transdec.decoding.beam.frame_search import (Buckets, FrameSearch, LeavingTokens, PathSum, ScoredRow, Tokens,
                                            check_summing_merge, combine, summing_merge_option)
from transdec.decoding.beam.greedy_guard import kept_greedy
from transdec.decoding.beam.utterance import search_frames_of_each
from transdec.decoding.options import PruningOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, Hypothesis
from transdec.decoding.scoring import Fusion
from transdec.protocol import DecodingModel


@dataclass(frozen=True)
class GravesOptions(PruningOptions):
    """Options of Graves' beam search. ``merge`` is ``"logsumexp"`` (the paper's summation, the default) or ``"max"``
    (the best path to each sequence); ``"none"`` is a ValueError. ``pruning`` (with fusions): whether a frame's
    entries are ranked by their fused scores or with that frame's emissions by the Transducer's alone (see the
    module docstring)."""

    merge: str = summing_merge_option()

    def __post_init__(self) -> None:
        check_summing_merge(self.merge, "beam_graves")
        super().__post_init__()


class _StayingChildren:
    """The children ``y* + k`` in ``A`` of an entry ``y*`` taken out of ``A`` (``k`` a token that stays at the
    frame), made one at a time, best first (see the module docstring)."""

    #: Children ranked by the first top-k; most entries have no more than these taken out of ``A``.
    FIRST = 8

    def __init__(self, search: FrameSearch, frame: int, tokens: Tokens, buckets: Buckets, row: ScoredRow,
                 initial: set[Tokens]) -> None:
        self.search, self.frame, self.tokens, self.row, self.initial = search, frame, tokens, row, initial
        # The buckets that may emit one more token here; a token from bucket n - 1 takes the forced blank (_expand).
        self.parents = buckets if search.max_symbols is None else buckets[: search.max_symbols - 1]
        base = search.total(self.parents)
        self.duration_index = search.stay_duration or 0
        self.labels: list[int] = []
        self.ranks: list[float] = []
        self.position = 0  # labels[:position] are made or skipped
        self.complete = base is None  # whether labels holds every token (or there are no children)
        if base is not None:
            self.offset = base.rank
            if row.duration_logprobs is not None:
                self.offset += row.duration_logprob_list[self.duration_index]
            # Ranked in the row's precision: its values are exact as Python floats, so the order is the same.
            self.token_ranks = row.label_ranks(search.early)[: search.head.num_tokens]
            self._rank_first(min(self.FIRST, search.head.num_tokens))
        self._skip_initial()

    def _rank_first(self, count: int) -> None:
        """Order the ``count`` best tokens (all of them, in a stable order, once more are needed)."""
        self.complete = count == self.token_ranks.shape[0]
        if self.complete:
            ranks, labels = self.token_ranks.sort(descending=True, stable=True)
        else:
            ranks, labels = self.token_ranks.topk(count)
        made = set(self.labels[: self.position])
        offset = self.offset
        ranked = [(rank + offset, label) for rank, label in zip(ranks.tolist(), labels.tolist()) if label not in made]
        self.labels = self.labels[: self.position] + [label for _, label in ranked]
        self.ranks = self.ranks[: self.position] + [rank for rank, _ in ranked]

    def _skip_initial(self) -> None:
        """Children that were in ``A`` after the prefix step hold every path to them already: not made again."""
        while True:
            while self.position < len(self.labels) and self.tokens + (self.labels[self.position],) in self.initial:
                self.position += 1
            if self.position < len(self.labels) or self.complete:
                return
            self._rank_first(self.token_ranks.shape[0])

    def key(self) -> float | None:
        """The rank of the next child (None: no more)."""
        return self.ranks[self.position] if self.position < len(self.labels) else None

    def take(self) -> tuple[Tokens, Buckets]:
        """The next child and its paths by bucket."""
        search = self.search
        label = self.labels[self.position]
        self.position += 1
        self._skip_initial()
        move = search.move(self.row, label, self.duration_index)
        buckets: Buckets = [None] * search.num_buckets
        for emitted, paths in enumerate(self.parents):
            if paths is not None:
                buckets[emitted + 1 if search.max_symbols is not None else 0] = search.extend(paths, move, self.frame)
        return self.tokens + (label,), buckets


class _LeavingTokens(LeavingTokens):
    """The token emissions of an entry ``y*`` taken out of ``A`` that leave the frame: for TDT each token with each
    positive duration (from all of ``y*``'s paths). (With ``max_symbols_per_frame`` a token from bucket ``n - 1``
    leaves too, by the forced blank after it; :func:`_expand` sends those at once.)"""

    def __init__(self, search: FrameSearch, frame: int, tokens: Tokens, buckets: Buckets, row: ScoredRow) -> None:
        self.search, self.frame, self.tokens, self.row = search, frame, tokens, row
        # target frame -> (paths, duration index) of every emission there; several where they meet (at the end).
        self.sources: dict[int, list[tuple[PathSum, int]]] = {}
        end = search.num_frames
        if search.head.kind == "tdt":
            everything = search.total(buckets)
            for index, duration in enumerate(search.head.durations):
                if duration > 0:
                    self.sources.setdefault(min(frame + duration, end), []).append((everything, index))

    def share(self, frame: int, token: int) -> PathSum | None:
        search, result = self.search, None
        for paths, duration_index in self.sources.get(frame, ()):
            move = search.move(self.row, token, duration_index)
            result = combine(result, search.extend(paths, move, self.frame), search.merge)
        return result

    def best_targets(self, count: int) -> list[tuple[int, int]]:
        search = self.search
        # Ranks in float64, as the entries' own (Python floats): the targets kept must outrank those left out.
        label_ranks = self.row.label_ranks(search.early)[: search.head.num_tokens].double()
        frames, tables = list(self.sources), []
        for frame in frames:
            table = None
            for paths, duration_index in self.sources[frame]:
                offset = paths.rank
                if self.row.duration_logprobs is not None:
                    offset += self.row.duration_logprob_list[duration_index]
                ranks = label_ranks + offset
                if table is not None:
                    merged = torch.logaddexp if search.merge == "logsumexp" else torch.maximum
                    ranks = merged(table, ranks)
                table = ranks
            tables.append(table)
        flat = torch.cat(tables)  # [F * V]
        num_tokens = search.head.num_tokens
        return [(frames[i // num_tokens], i % num_tokens) for i in flat.topk(min(count, flat.numel())).indices.tolist()]


@takes_options(GravesOptions)
@torch.inference_mode()
def beam_graves(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: GravesOptions,
                fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Beam search over ``encoder_out [B, T, D]`` with valid ``lengths [B]``, one utterance after another: the n-best
    per utterance (``result.nbest``), best first, and the best in ``result.hyps``."""
    return kept_greedy(search_frames_of_each(model, encoder_out, lengths, options, fusions, _search,
                                             early=options.pruning == "early"),
                       options, lambda: greedy_decoding(model, encoder_out, lengths, options, fusions))


def _search(search: FrameSearch, options: GravesOptions) -> list[Hypothesis]:
    """Graves' search of one utterance (see the module docstring)."""
    for frame, entries in search.prefix_steps():
        initial = set(entries)
        # A as a heap: an entry's paths are complete when it enters A (the prefix step's, or its one parent's), so
        # its rank never changes; the counter breaks ties by arrival. An item is an entry or a parent's children.
        heap: list[tuple[float, int, tuple[Tokens, Buckets] | _StayingChildren]] = [
            (-search.total(buckets).rank, order, (tokens, buckets))
            for order, (tokens, buckets) in enumerate(entries.items())]
        heapq.heapify(heap)
        order = len(heap)
        while heap and search.count_above(-heap[0][0]) < options.beam_size:
            _, _, item = heapq.heappop(heap)
            if isinstance(item, _StayingChildren):
                tokens, buckets = item.take()
                if item.key() is not None:
                    heapq.heappush(heap, (-item.key(), order, item))
                    order += 1
            else:
                tokens, buckets = item
            children = _expand(search, frame, tokens, buckets, initial, options.beam_size)
            if children is not None:
                heapq.heappush(heap, (-children.key(), order, children))
                order += 1
        search.prune(options.beam_size)
    return search.finished(options.nbest, options.length_norm)


def _expand(search: FrameSearch, frame: int, tokens: Tokens, buckets: Buckets, initial: set[Tokens],
            beam_size: int) -> _StayingChildren | None:
    """Expand ``y* = tokens`` by every emission: blanks go to ``B``, leaving tokens to ``B`` lazily, and its children
    that stay are returned (None if there are none)."""
    row = search.row(frame, tokens)
    everything = search.total(buckets)
    for move in search.blank_moves(row):
        search.send(frame + move.advance, tokens, search.extend(everything, move, frame))
    leaving = _LeavingTokens(search, frame, tokens, buckets, row)
    if leaving.sources:
        search.open_exits(leaving, beam_size)
    if search.max_symbols is not None and search.tokens_can_stay and buckets[-1] is not None:
        # The paths with max_symbols_per_frame - 1 tokens here: each token is their last at this frame, and the
        # forced blank after it (scored on the child's own joint row) takes them on. Every child, in one call.
        children = [tokens + (token,) for token in range(search.head.num_tokens)]
        search.rows(frame, children)
        for token, child in enumerate(children):
            paths = search.extend(buckets[-1], search.move(row, token, search.stay_duration or 0), frame)
            forced = search.forced_blank(frame, child)
            search.send(frame + forced.advance, child, search.extend(paths, forced, frame))
    if not search.tokens_can_stay:
        return None
    children = _StayingChildren(search, frame, tokens, buckets, row, initial)
    return children if children.key() is not None else None
