"""Graves' beam search (Graves 2012, "Sequence Transduction with Recurrent Neural Networks", Sec. 3.2), one
utterance at a time: a readable baseline and specification.

Terms. A *path* is one sequence of emissions under the decoding rules of
:mod:`transdec.decoding.greedy_reference` (a blank moves time by 1, a big blank by its duration, a TDT emission by
its duration (a blank by at least 1), a token of an RNN-T or multi-blank head stays at its frame, and
``max_symbols_per_frame`` tokens at one frame force time on by one frame, scoring nothing). Its score is the sum
of its emissions' scores from :class:`~transdec.decoding.scoring.Scoring` (fused; for TDT plus the duration's
log-prob). The search works on token *sequences*: the entry of a sequence holds the paths to it that the search has
combined, as their total (``merge="logsumexp"``, the paper's rule) or their best (``merge="max"``), see
:class:`PathSum`.

The search, frame by frame (``t = 0 .. T-1``), with ``W = beam_size``:

1. ``A`` is the set of sequences waiting at frame ``t`` (they have left frame ``t - 1`` or an earlier one).
2. Prefix step: each ``y`` in ``A`` also takes every path that starts at a proper prefix ``ŷ`` of ``y`` that is in
   ``A`` and emits the rest of ``y`` at frame ``t`` (the paper's ``Pr(y) += Σ Pr(ŷ) Pr(y | ŷ, t)``).
3. While ``A`` is not empty and fewer than ``W`` entries of ``B`` score higher than the best of ``A``: take the best
   ``y*`` out of ``A`` and expand it by every emission (every label output, for TDT with every duration; the
   paper's ``for k in Y``). An emission that leaves frame ``t`` (a blank of any kind,
   a TDT emission with a positive duration, a token that reaches ``max_symbols_per_frame``) adds the extended
   path set to ``B``, merged with what ``B`` holds for the same sequence at the same frame; a token that stays at
   ``t`` adds ``y* + k`` to ``A``, except when ``y* + k`` was in ``A`` at the start of the frame: the prefix step
   has already counted every path to it, those through ``y*`` included.
4. Only the ``W`` best entries of ``B`` are kept.

``B`` is every entry waiting at a later frame or finished. For RNN-T that is exactly the paper's ``B``, the
sequences that have left frame ``t`` (by its blank, or by the forced move); for TDT and multi-blank heads, whose
emissions can skip frames, it is the natural generalisation (the one NeMo's TDT beam search takes): an entry is a
sequence *at a frame*, a sequence that arrives at one frame by two routes is one entry, at two frames two entries,
and entries of every later frame and finished ones compete in one beam. A path that moves past the last frame is
finished.

``max_symbols_per_frame = n``: the paths combined in one entry of ``A`` can have emitted different numbers of
tokens at frame ``t`` (the prefix step adds paths with up to ``n - 1`` tokens there), and those have different
futures. So an entry of ``A`` keeps its paths in ``n`` buckets by that number, each a :class:`PathSum`; it is
ranked by their combination, and a token from bucket ``n - 1`` leaves the frame (greedy's forced move). With
``None`` there is one bucket and no limit; a frame's expansion then ends only by the beam criterion.

The n-best are the finished entries ranked by score (by score per token with ``length_norm``; Graves ranks by
``log Pr(y) / |y|``, which ``length_norm=True`` gives). A :class:`~transdec.decoding.results.Hypothesis` reports
the sequence, the alignment (timestamps, durations, token log-probs) of the best single path among those its
entry combined, ``score`` (the combined fused score) and ``am_score`` (the same paths' combined score without
fusions; with ``"max"``, the best path's).

Exactness: every path is counted at most once, so an entry's score never exceeds the summed probability (or, with
``"max"``, the best path) of its sequence. When ``W`` exceeds the number of sequences a frame can reach and
``max_symbols_per_frame`` is finite, ``A`` runs empty at every frame, every path is counted, and the best
hypothesis is the sequence with the highest total probability (``"max"``: the best path).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import BeamOptions
from transdec.decoding.registry import register_strategy
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, LabelScores, Scoring
from transdec.protocol import DecodingModel, HeadSpec

#: A token sequence (no blanks), the key of every entry of these searches.
Tokens = tuple[int, ...]

SUMMING_MERGE_RULES = ("logsumexp", "max")


def summing_merge_option() -> Any:
    """The ``merge`` field of the searches that sum prefixes: every beam search's (one command-line flag serves them
    all), with the papers' summation as default."""
    beam_merge = next(f for f in dataclasses.fields(BeamOptions) if f.name == "merge")
    return dataclasses.field(default="logsumexp", metadata=beam_merge.metadata)


def check_summing_merge(merge: str, strategy: str) -> None:
    """The merge rules of the searches that sum prefixes: ``"none"`` (keep the paths apart) is meaningless there."""
    if merge not in SUMMING_MERGE_RULES:
        raise ValueError(f"{strategy} merges the paths to a token sequence by construction: merge must be one of "
                         f"{SUMMING_MERGE_RULES}, got {merge!r}")


@dataclass(frozen=True)
class GravesOptions(BeamOptions):
    """Options of Graves' beam search. ``merge`` is ``"logsumexp"`` (the paper's summation, the default) or ``"max"``
    (the best path to each sequence); ``"none"`` is a ValueError."""

    merge: str = summing_merge_option()

    def __post_init__(self) -> None:
        check_summing_merge(self.merge, "beam_graves")
        super().__post_init__()


@dataclass(frozen=True)
class PathSum:
    """Paths to one token sequence that the search combined.

    Attributes:
        score: their combined fused score: the log of their summed probabilities, or the best one's (``"max"``).
        am_score: the same without fusion terms (``"max"``: the best path's).
        best_score: the fused score of the best single path among them.
        alignment: per token of the best path: ``(frame, duration, label log-prob)``.
    """

    score: float = 0.0
    am_score: float = 0.0
    best_score: float = 0.0
    alignment: tuple[tuple[int, int, float], ...] = ()

    def extended(self, move: Move, frame: int) -> PathSum:
        """These paths followed by ``move`` at ``frame``."""
        alignment = self.alignment
        if move.is_token:
            alignment = alignment + ((frame, move.duration, move.label_logprob),)
        return PathSum(self.score + move.score, self.am_score + move.am_score, self.best_score + move.score, alignment)


def combine(a: PathSum | None, b: PathSum, rule: str) -> PathSum:
    """Two disjoint path sets to the same sequence and search state as one (``a`` may be None: nothing yet)."""
    if a is None:
        return b
    if rule == "max":
        return a if a.score >= b.score else b
    best = a if a.best_score >= b.best_score else b
    return PathSum(logsumexp((a.score, b.score)), logsumexp((a.am_score, b.am_score)), best.best_score,
                   best.alignment)


def logsumexp(values: Iterable[float]) -> float:
    """``ln(sum(exp(v)))`` of log-probabilities, -inf for none possible."""
    values = list(values)
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


#: An entry of the current frame: its paths by the number of tokens they emitted at this frame (None: no path).
Buckets = list[PathSum | None]


class Move(NamedTuple):
    """One emission a joint call offers (a named tuple: the searches make millions of them).

    Attributes:
        label: the label output (token, blank or big blank).
        duration: the TDT duration, 0 for other heads.
        advance: frames it moves time by: 0 for a token that stays, the duration for a TDT token, at least 1
            for a TDT blank, 1 for the blank, a big blank's duration.
        score: decision score: the fused label score, plus the duration's log-prob for TDT.
        am_score: the same without fusions.
        label_logprob: the Transducer's log-prob of the label alone.
        is_token: whether the label is a token (not a blank of any kind).
    """

    label: int
    duration: int
    advance: int
    score: float
    am_score: float
    label_logprob: float
    is_token: bool


def moves_of(head: HeadSpec, scored: LabelScores) -> list[Move]:
    """Every emission of one joint call (``scored``: scores ``[1, L]``, TDT durations ``[1, K]``), by label, then
    duration."""
    scores = scored.scores[0].tolist()
    label_logprobs = scored.label_logprobs[0].tolist()
    blank_id, num_tokens = head.blank_id, head.num_tokens  # properties: read once, not per label
    if head.kind == "tdt":
        duration_logprobs = scored.duration_logprobs[0].tolist()
        return [
            Move(label, duration, max(duration, 1) if label == blank_id else duration,
                 scores[label] + duration_logprob, label_logprobs[label] + duration_logprob, label_logprobs[label],
                 label < num_tokens)
            for label in range(head.num_labels)
            for duration, duration_logprob in zip(head.durations, duration_logprobs)
        ]
    return [Move(label, 0, advance, scores[label], label_logprobs[label], label_logprobs[label], label < num_tokens)
            for label, advance in enumerate(_label_advances(head))]


@functools.lru_cache(maxsize=32)
def _label_advances(head: HeadSpec) -> tuple[int, ...]:
    """:func:`label_advance` of every label output of ``head``."""
    return tuple(label_advance(head, label) for label in range(head.num_labels))


def label_advance(head: HeadSpec, label: int) -> int:
    """Frames an RNN-T or multi-blank label moves time by: 1 for the blank, a big blank's duration, 0 for a token."""
    if label == head.blank_id:
        return 1
    if label >= head.num_tokens:  # big blank i sits at blank_id - 1 - i
        return head.big_blank_durations[head.blank_id - 1 - label]
    return 0


@dataclass
class _PredictorEntry:
    """The predictor after one token sequence: joint projection ``[J]``, its state and the fusion state."""

    projection: torch.Tensor
    state: Any
    scorer_state: Any
    context: tuple[torch.Tensor, ...]


class FrameSearch:
    """What the frame-synchronous searches of one utterance share (Graves' search and mAES).

    It holds the entries waiting at later frames (``pending``: frame -> sequence -> :class:`PathSum`; frame ``T``
    holds the finished ones), caches the predictor by token sequence (each sequence is fed once per utterance) and
    the joint by sequence within the current frame, and implements the prefix step, expansion and pruning of the
    module docstring.
    """

    def __init__(self, model: DecodingModel, scoring: Scoring, frames: torch.Tensor,
                 max_symbols_per_frame: int | None, merge: str, stats: DecodingStats) -> None:
        """``frames [T, D]``: the utterance's encoder frames."""
        self.head, self.scoring, self.stats, self.merge = model.head, scoring, stats, merge
        self._predictor, self._joint = model.predictor, model.joint
        self.device = frames.device
        self.num_frames = frames.shape[0]
        self.encoder_proj = self._joint.project_encoder(frames.unsqueeze(0))[0]  # [T, J]
        self.max_symbols = max_symbols_per_frame
        self.num_buckets = max_symbols_per_frame or 1
        # Which joint output lets a token stay at its frame: any token of RNN-T and multi-blank heads, a TDT token
        # only with duration 0 (a TDT head without duration 0 has no such emission, so no prefix step).
        self.tokens_can_stay = self.head.kind != "tdt" or 0 in self.head.durations
        self.pending: dict[int, dict[Tokens, PathSum]] = {0: {(): PathSum()}}
        self._predictor_cache: dict[Tokens, _PredictorEntry] = {}
        self._moves_frame = -1
        self._moves_cache: dict[Tokens, tuple[list[Move], dict[int, Move]]] = {}
        state = self._predictor.initial_state(1)
        self._feed((), self.head.predictor_blank_id, state, scoring.initial_state(1, self.device))

    # Model calls, cached.

    def _feed(self, tokens: Tokens, label: int, state: Any, scorer_state: Any) -> None:
        """Run the predictor on ``label`` from ``state`` and cache the result as the entry of ``tokens``."""
        labels = torch.tensor([label], device=self.device)
        out, state = self._predictor.step(labels, state)
        self.stats.predictor_calls += 1
        if tokens:  # the start-of-sequence blank is not a token: the fusion state stays initial
            emitted = torch.ones(1, dtype=torch.bool, device=self.device)
            scorer_state = self.scoring.advance(scorer_state, labels, emitted)
        self._predictor_cache[tokens] = _PredictorEntry(self._joint.project_predictor(out)[0], state, scorer_state,
                                                        self.scoring.context(scorer_state))

    def predictor_entry(self, tokens: Tokens) -> _PredictorEntry:
        """The predictor after ``tokens``, feeding whatever suffix of it has not been fed yet."""
        known = len(tokens)
        while tokens[:known] not in self._predictor_cache:
            known -= 1
        for length in range(known + 1, len(tokens) + 1):
            parent = self._predictor_cache[tokens[: length - 1]]
            self._feed(tokens[:length], tokens[length - 1], parent.state, parent.scorer_state)
        return self._predictor_cache[tokens]

    def moves(self, frame: int, tokens: Tokens) -> list[Move]:
        """Every emission after ``tokens`` at ``frame`` (one joint call per sequence and frame)."""
        return self._scored(frame, tokens)[0]

    def stay_move(self, frame: int, tokens: Tokens, token: int) -> Move:
        """The emission of ``token`` after ``tokens`` at ``frame`` that stays at the frame."""
        return self._scored(frame, tokens)[1][token]

    def _scored(self, frame: int, tokens: Tokens) -> tuple[list[Move], dict[int, Move]]:
        if frame != self._moves_frame:
            self._moves_frame, self._moves_cache = frame, {}
        if tokens not in self._moves_cache:
            entry = self.predictor_entry(tokens)
            logits = self._joint.combine(self.encoder_proj[frame], entry.projection).unsqueeze(0)  # [1, C]
            self.stats.joint_calls += 1
            moves = moves_of(self.head, self.scoring(logits, entry.context))
            stay = {m.label: m for m in moves if m.is_token and m.advance == 0}
            self._moves_cache[tokens] = (moves, stay)
        return self._moves_cache[tokens]

    # The steps of the search.

    def total(self, buckets: Buckets) -> PathSum:
        """An entry's paths of every bucket combined: what it is ranked by and what leaves the frame."""
        result = None
        for paths in buckets:
            if paths is not None:
                result = combine(result, paths, self.merge)
        return result

    def prefix_step(self, frame: int, arrivals: dict[Tokens, PathSum]) -> dict[Tokens, Buckets]:
        """The entries ``A`` of ``frame``: each sequence waiting there, with the paths from its waiting prefixes.

        The paths from a prefix ``j`` tokens shorter emit ``j`` tokens at this frame, so they go to bucket ``j``;
        prefixes ``max_symbols_per_frame`` or more tokens shorter cannot reach the sequence within the frame.
        """
        entries: dict[Tokens, Buckets] = {}
        for tokens, paths in arrivals.items():
            buckets: Buckets = [None] * self.num_buckets
            buckets[0] = paths
            entries[tokens] = buckets
            if not self.tokens_can_stay:
                continue
            longest = len(tokens) if self.max_symbols is None else min(len(tokens), self.max_symbols - 1)
            shorter_by = [j for j in range(1, longest + 1) if tokens[: len(tokens) - j] in arrivals]
            for j in shorter_by:
                extended = arrivals[tokens[: len(tokens) - j]]
                for position in range(len(tokens) - j, len(tokens)):
                    extended = extended.extended(self.stay_move(frame, tokens[:position], tokens[position]), frame)
                bucket = j if self.max_symbols is not None else 0
                buckets[bucket] = combine(buckets[bucket], extended, self.merge)
        return entries

    def expand(self, frame: int, tokens: Tokens, buckets: Buckets, moves: Iterable[Move],
               initial: set[Tokens]) -> dict[Tokens, Buckets]:
        """Extend the entry ``tokens`` of ``frame`` by ``moves``.

        Moves that leave the frame go to :attr:`pending`; returns the entries of the tokens that stay, by sequence,
        leaving out the sequences in ``initial`` (the frame's entries after the prefix step, which already hold
        every path to them from this frame's entries).
        """
        children: dict[Tokens, Buckets] = {}
        everything = None
        for move in moves:
            if not move.is_token or move.advance > 0:
                if everything is None:
                    everything = self.total(buckets)
                self.send(frame + move.advance, tokens + (move.label,) if move.is_token else tokens,
                          everything.extended(move, frame))
                continue
            child = tokens + (move.label,)
            child_buckets: Buckets = [None] * self.num_buckets
            for emitted, paths in enumerate(buckets):
                if paths is None:
                    continue
                extended = paths.extended(move, frame)
                if self.max_symbols is not None and emitted + 1 >= self.max_symbols:
                    self.send(frame + 1, child, extended)  # the forced move: on by one frame, scoring nothing
                elif child not in initial:
                    bucket = emitted + 1 if self.max_symbols is not None else 0
                    child_buckets[bucket] = combine(child_buckets[bucket], extended, self.merge)
            if any(paths is not None for paths in child_buckets):
                children[child] = child_buckets
        return children

    def send(self, frame: int, tokens: Tokens, paths: PathSum) -> None:
        """Add ``paths`` to the entry of ``tokens`` waiting at ``frame`` (past the end: finished)."""
        waiting = self.pending.setdefault(min(frame, self.num_frames), {})
        waiting[tokens] = combine(waiting.get(tokens), paths, self.merge)

    def waiting(self) -> Iterable[PathSum]:
        """Every entry waiting at a later frame or finished (``B``); call after taking the current frame's out."""
        for entries in self.pending.values():
            yield from entries.values()

    def prune(self, beam_size: int) -> None:
        """Keep the ``beam_size`` best waiting entries (ties: the earlier frame, then the earlier arrival)."""
        ranked = sorted(((frame, tokens, paths) for frame in sorted(self.pending)
                         for tokens, paths in self.pending[frame].items()), key=lambda e: -e[2].score)
        self.pending = {}
        for frame, tokens, paths in ranked[:beam_size]:
            self.pending.setdefault(frame, {})[tokens] = paths

    def finished(self, nbest: int, length_norm: bool) -> list[Hypothesis]:
        """The ``nbest`` best finished entries, best first (by score, or per token with ``length_norm``)."""
        entries = list(self.pending.get(self.num_frames, {}).items())
        if length_norm:
            entries.sort(key=lambda e: -e[1].score / max(len(e[0]), 1))
        else:
            entries.sort(key=lambda e: -e[1].score)
        return [_hypothesis(tokens, paths) for tokens, paths in entries[:nbest]]


def _hypothesis(tokens: Tokens, paths: PathSum) -> Hypothesis:
    return Hypothesis(list(tokens), [a[0] for a in paths.alignment], [a[1] for a in paths.alignment],
                      [a[2] for a in paths.alignment], paths.score, paths.am_score)


@register_strategy("beam_graves", GravesOptions,
                   "Graves' frame-synchronous beam search with prefix summation (Graves 2012), one utterance at a time")
@torch.inference_mode()
def beam_graves(
    model: DecodingModel,
    encoder_out: torch.Tensor,
    lengths: torch.Tensor,
    max_symbols_per_frame: int | None = 10,
    beam_size: int = 4,
    nbest: int = 1,
    merge: str = "logsumexp",
    length_norm: bool = False,
    fusions: Sequence[Fusion] = (),
) -> DecodingResult:
    """Beam search over ``encoder_out [B, T, D]`` with valid ``lengths [B]``, one utterance after another.

    Returns the n-best per utterance (``result.nbest``), best first, and the best in ``result.hyps``.
    """
    lengths = checked_lengths(encoder_out, lengths)
    options = GravesOptions(max_symbols_per_frame=max_symbols_per_frame, beam_size=beam_size, nbest=nbest,
                            merge=merge, length_norm=length_norm)
    scoring = Scoring(model.head, fusions)
    stats = DecodingStats()
    nbest_lists = [_search(FrameSearch(model, scoring, encoder_out[b, :length], max_symbols_per_frame, merge, stats),
                           options)
                   for b, length in enumerate(lengths.tolist())]
    return DecodingResult.from_nbest(nbest_lists, stats, encoder_out.device, encoder_out.dtype)


def _search(search: FrameSearch, options: GravesOptions) -> list[Hypothesis]:
    """Graves' search of one utterance (see the module docstring)."""
    for frame in range(search.num_frames):
        arrivals = search.pending.pop(frame, None)
        if not arrivals:  # every path skipped this frame
            continue
        entries = search.prefix_step(frame, arrivals)
        initial = set(entries)
        # A as a heap: an entry's paths are complete when it enters A (the prefix step's, or its one parent's), so
        # its rank never changes; the counter breaks ties by arrival.
        heap = [(-search.total(buckets).score, order, tokens)
                for order, (tokens, buckets) in enumerate(entries.items())]
        heapq.heapify(heap)
        order = len(heap)
        while heap:
            best_of_a = -heap[0][0]
            if sum(paths.score > best_of_a for paths in search.waiting()) >= options.beam_size:
                break
            _, _, tokens = heapq.heappop(heap)
            children = search.expand(frame, tokens, entries.pop(tokens), search.moves(frame, tokens), initial)
            for child, buckets in children.items():
                entries[child] = buckets
                heapq.heappush(heap, (-search.total(buckets).score, order, child))
                order += 1
        search.prune(options.beam_size)
    return search.finished(options.nbest, options.length_norm)
