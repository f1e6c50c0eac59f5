"""What the frame-synchronous per-utterance searches (Graves' search and mAES) share: token-sequence entries, the
paths they combine, the emissions one joint call offers, and the search state of one utterance.

Terms (see :mod:`transdec.decoding.beam.graves` for the search built on them). A *path* is one sequence of
emissions under the decoding rules of :mod:`transdec.decoding.greedy.reference`; its score is the sum of its
emissions' scores from :class:`~transdec.decoding.scoring.Scoring`. An *entry* is a token sequence at a frame with
the paths to it that the search has combined (:class:`PathSum`), as their total (``merge="logsumexp"``) or their
best (``"max"``).

Every joint call scores all labels of a hypothesis, but the searches only ever look at a few emissions of each:
rows stay tensors (:class:`ScoredRow`) and :meth:`FrameSearch.move` makes the emission a search asks for.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from transdec.decoding.options import BeamOptions
from transdec.decoding.results import DecodingStats, Hypothesis
from transdec.decoding.scoring import Scoring
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


class Move(NamedTuple):
    """One emission a joint call offers (a named tuple: the searches make many of them).

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


@dataclass(frozen=True)
class PathSum:
    """Paths to one token sequence that the search combined.

    Attributes:
        score: their combined fused score: the log of their summed probabilities, or the best one's (``"max"``).
        am_score: the same without fusion terms (``"max"``: the best path's).
        best_score: the fused score of the best single path among them.
        alignment: per token of the best path: ``(frame, duration, label log-prob)``.
        rank: what the search ranks them by, combined like ``score`` (``"max"``: the best rank of any of them). It
            is ``score``, except that with early pruning the emissions of the frame being searched count with their
            Transducer scores alone (:meth:`FrameSearch.prune` makes it ``score`` again for the entries kept).
    """

    score: float = 0.0
    am_score: float = 0.0
    best_score: float = 0.0
    alignment: tuple[tuple[int, int, float], ...] = ()
    rank: float = 0.0

    def extended(self, move: Move, frame: int, early: bool = False) -> PathSum:
        """These paths followed by ``move`` at ``frame`` (``early``: ranked by its Transducer score)."""
        alignment = self.alignment
        if move.is_token:
            alignment = alignment + ((frame, move.duration, move.label_logprob),)
        return PathSum(self.score + move.score, self.am_score + move.am_score, self.best_score + move.score, alignment,
                       self.rank + (move.am_score if early else move.score))


def combine(a: PathSum | None, b: PathSum | None, rule: str) -> PathSum | None:
    """Two disjoint path sets to the same sequence and search state as one (either may be None: nothing)."""
    if a is None:
        return b
    if b is None:
        return a
    if rule == "max":
        # The best path by fused score; ranked by the best rank (the same path's unless pruning is early).
        best = a if a.score >= b.score else b
        rank = max(a.rank, b.rank)
        return best if best.rank == rank else dataclasses.replace(best, rank=rank)
    best = a if a.best_score >= b.best_score else b
    return PathSum(_logaddexp(a.score, b.score), _logaddexp(a.am_score, b.am_score), best.best_score, best.alignment,
                   _logaddexp(a.rank, b.rank))


def logsumexp(values: Iterable[float]) -> float:
    """``ln(sum(exp(v)))`` of log-probabilities, -inf for none possible."""
    values = list(values)
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def _logaddexp(a: float, b: float) -> float:
    top, low = (a, b) if a >= b else (b, a)
    if low == -math.inf:
        return top
    return top + math.log1p(math.exp(low - top))


#: An entry of the current frame: its paths by the number of tokens they emitted at this frame (None: no path).
Buckets = list[PathSum | None]


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
class ScoredRow:
    """One row of a joint call: every emission after one token sequence at one frame.

    Attributes:
        scores: ``[L]`` fused label scores (a view into the call's output).
        label_logprobs: ``[L]`` the Transducer's label log-probs.
        duration_logprobs: ``[K]`` TDT duration log-probs, else None.
        duration_logprob_list: the same as Python floats (empty for other heads).
    """

    scores: torch.Tensor
    label_logprobs: torch.Tensor
    duration_logprobs: torch.Tensor | None
    duration_logprob_list: list[float]

    def label_scores(self, label: int) -> tuple[float, float]:
        """The fused score and the Transducer's log-prob of ``label``: a search reads a few labels of a row, so
        they are read one by one rather than the whole row converted."""
        score = self.scores[label].item()
        return score, score if self.label_logprobs is self.scores else self.label_logprobs[label].item()

    def label_ranks(self, early: bool) -> torch.Tensor:
        """``[L]``: what labels are ranked by: the fused scores, or with ``early`` the Transducer's alone."""
        return self.label_logprobs if early else self.scores


@dataclass
class _PredictorEntry:
    """The predictor after one token sequence: joint projection ``[J]``, the predictor and fusion states of the call
    that fed it (batched) with its row there, and each fusion's ``[1, V]`` token log-probs."""

    projection: torch.Tensor
    state: Any
    scorer_state: Any
    row: int
    context: tuple[torch.Tensor, ...]


class LeavingTokens:
    """Interface of a lazy source of entries: the token emissions of one sequence that leave the current frame.

    A search that registers one with :meth:`FrameSearch.open_exits` promises that every entry it does not make is
    outranked by ``beam_size`` entries that it does make, so leaving it out changes nothing; :meth:`share` adds its
    paths to any entry that exists for another reason.
    """

    tokens: Tokens

    def share(self, frame: int, token: int) -> PathSum | None:
        """Its paths to ``tokens + (token,)`` waiting at ``frame`` (None: none)."""
        raise NotImplementedError

    def best_targets(self, count: int) -> list[tuple[int, int]]:
        """``(frame, token)`` of (at least) its ``count`` best-ranked targets."""
        raise NotImplementedError


class FrameSearch:
    """The state of one utterance's frame-synchronous search.

    It holds the entries waiting at later frames (``pending``: frame -> sequence -> :class:`PathSum`; frame ``T``
    holds the finished ones), caches the predictor by token sequence (each sequence is fed once per utterance) and
    the joint rows by sequence within the current frame (one joint call for every row a step needs), and implements
    the prefix step, expansion by given moves, and pruning.
    """

    def __init__(self, model: DecodingModel, scoring: Scoring, frames: torch.Tensor,
                 max_symbols_per_frame: int | None, merge: str, stats: DecodingStats, early: bool = False) -> None:
        """``frames [T, D]``: the utterance's encoder frames; ``early``: rank by :attr:`PathSum.rank` with this
        frame's emissions counted without fusion."""
        self.head, self.scoring, self.stats, self.merge, self.early = model.head, scoring, stats, merge, early
        self._predictor, self._joint = model.predictor, model.joint
        self.device = frames.device
        self.num_frames = frames.shape[0]
        self.encoder_proj = self._joint.project_encoder(frames.unsqueeze(0))[0]  # [T, J]
        self.max_symbols = max_symbols_per_frame
        self.num_buckets = max_symbols_per_frame or 1
        self._advances = _label_advances(self.head)
        self.stay_duration = self.head.durations.index(0) if 0 in self.head.durations else None
        # Which joint output lets a token stay at its frame: any token of RNN-T and multi-blank heads, a TDT token
        # only with duration 0 (a TDT head without duration 0 has no such emission, so no prefix step).
        self.tokens_can_stay = self.head.kind != "tdt" or self.stay_duration is not None
        self.pending: dict[int, dict[Tokens, PathSum]] = {0: {(): PathSum()}}
        # The ranks of every entry in pending, sorted: the beam criterion asks how many rank above a value per entry
        # taken out of A, and B grows by several entries each time.
        self._ranks: list[float] = []
        self.exits: dict[Tokens, LeavingTokens] = {}
        self._predictor_cache: dict[Tokens, _PredictorEntry] = {}
        self._rows_frame = -1
        self._rows: dict[Tokens, ScoredRow] = {}
        self._feed_start()

    # Model calls, cached.

    def _feed_start(self) -> None:
        """The entry of the empty sequence: the predictor after the start-of-sequence blank (not a token: the fusion
        state stays initial)."""
        labels = torch.tensor([self.head.predictor_blank_id], device=self.device)
        out, state = self._predictor.step(labels, self._predictor.initial_state(1))
        self.stats.predictor_calls += 1
        scorer_state = self.scoring.initial_state(1, self.device)
        self._predictor_cache[()] = _PredictorEntry(self._joint.project_predictor(out)[0], state, scorer_state, 0,
                                                    self.scoring.context(scorer_state))

    def _feed(self, sequences: list[Tokens]) -> None:
        """Feed each of ``sequences`` its last token after its prefix (which must be cached), in one predictor call,
        and cache the results."""
        parents = [self._predictor_cache[tokens[:-1]] for tokens in sequences]
        state, scorer_state = self._gather(parents)
        labels = torch.tensor([tokens[-1] for tokens in sequences], device=self.device)
        out, state = self._predictor.step(labels, state)
        self.stats.predictor_calls += 1
        scorer_state = self.scoring.advance(scorer_state, labels, torch.ones_like(labels, dtype=torch.bool))
        projections = self._joint.project_predictor(out)  # [H, J]
        context = self.scoring.context(scorer_state)  # [H, V] each
        for i, tokens in enumerate(sequences):
            self._predictor_cache[tokens] = _PredictorEntry(projections[i], state, scorer_state, i,
                                                            tuple(c[i : i + 1] for c in context))

    def _gather(self, entries: list[_PredictorEntry]) -> tuple[Any, Any]:
        """The predictor and fusion states of ``entries`` as one batch ``[H]``: gathered from each call that fed some
        of them, and put together by masks (the protocol has no concatenation)."""
        calls: dict[int, tuple[_PredictorEntry, list[int]]] = {}
        for position, entry in enumerate(entries):
            calls.setdefault(id(entry.state), (entry, []))[1].append(position)
        state = scorer_state = None
        for first, positions in calls.values():
            rows = [0] * len(entries)
            for position in positions:
                rows[position] = entries[position].row
            index = torch.tensor(rows, device=self.device)
            gathered = self._predictor.gather_state(first.state, index)
            gathered_scorer = self.scoring.gather_state(first.scorer_state, index)
            if state is None:
                state, scorer_state = gathered, gathered_scorer
                continue
            mask = torch.zeros(len(entries), dtype=torch.bool, device=self.device)
            mask[positions] = True
            state = self._predictor.select_state(mask, gathered, state)
            scorer_state = self.scoring.select_state(mask, gathered_scorer, scorer_state)
        return state, scorer_state

    def predictor_entries(self, sequences: Iterable[Tokens]) -> list[_PredictorEntry]:
        """The predictor after each of ``sequences``, feeding what has not been fed yet: every missing prefix too,
        one predictor call per round of sequences whose prefixes are known."""
        sequences = list(sequences)
        missing: set[Tokens] = set()
        for tokens in sequences:
            known = len(tokens)
            while tokens[:known] not in self._predictor_cache:
                missing.add(tokens[:known])
                known -= 1
        while missing:
            ready = sorted(tokens for tokens in missing if tokens[:-1] in self._predictor_cache)
            self._feed(ready)
            missing.difference_update(ready)
        return [self._predictor_cache[tokens] for tokens in sequences]

    def rows(self, frame: int, sequences: Iterable[Tokens]) -> list[ScoredRow]:
        """The joint rows of ``sequences`` at ``frame``, scoring those not scored yet at it in one joint call."""
        if frame != self._rows_frame:
            self._rows_frame, self._rows = frame, {}
        sequences = list(sequences)
        missing = [tokens for tokens in dict.fromkeys(sequences) if tokens not in self._rows]
        if missing:
            entries = self.predictor_entries(missing)
            projections = torch.stack([entry.projection for entry in entries])  # [H, J]
            logits = self._joint.combine(self.encoder_proj[frame], projections)  # [H, C]
            context = tuple(torch.cat(parts) for parts in zip(*(entry.context for entry in entries)))  # [H, V] each
            scored = self.scoring(logits, context)
            self.stats.joint_calls += 1
            durations = scored.duration_logprobs
            duration_lists = durations.tolist() if durations is not None else [[]] * len(missing)
            same = scored.label_logprobs is scored.scores  # without fusions
            for i, tokens in enumerate(missing):
                scores = scored.scores[i]
                self._rows[tokens] = ScoredRow(scores, scores if same else scored.label_logprobs[i],
                                               durations[i] if durations is not None else None, duration_lists[i])
        return [self._rows[tokens] for tokens in sequences]

    def row(self, frame: int, tokens: Tokens) -> ScoredRow:
        """The joint row of ``tokens`` at ``frame``."""
        return self.rows(frame, (tokens,))[0]

    # Emissions.

    def move(self, row: ScoredRow, label: int, duration_index: int = 0) -> Move:
        """The emission of ``label`` (for TDT with the duration ``durations[duration_index]``) in ``row``."""
        score, label_logprob = row.label_scores(label)
        if self.head.kind == "tdt":
            duration = self.head.durations[duration_index]
            duration_logprob = row.duration_logprob_list[duration_index]
            advance = max(duration, 1) if label == self.head.blank_id else duration
            return Move(label, duration, advance, score + duration_logprob, label_logprob + duration_logprob,
                        label_logprob, label < self.head.num_tokens)
        return Move(label, 0, self._advances[label], score, label_logprob, label_logprob, label < self.head.num_tokens)

    def blank_moves(self, row: ScoredRow) -> list[Move]:
        """Every emission of ``row`` without a token: the blank, each big blank, for TDT the blank with each
        duration."""
        num_tokens, num_labels = self.head.num_tokens, self.head.num_labels
        if self.head.kind == "tdt":
            return [self.move(row, num_tokens, d) for d in range(len(self.head.durations))]
        return [self.move(row, label) for label in range(num_tokens, num_labels)]

    def forced_blank(self, frame: int, tokens: Tokens) -> Move:
        """The forced blank after ``tokens`` at ``frame``: the only emission once a path has emitted
        ``max_symbols_per_frame`` tokens there (see :mod:`transdec.decoding.greedy.reference`)."""
        return self.move(self.row(frame, tokens), self.head.blank_id, self.head.forced_duration_index)

    def stay_move(self, frame: int, tokens: Tokens, token: int) -> Move:
        """The emission of ``token`` after ``tokens`` at ``frame`` that stays at the frame."""
        return self.move(self.row(frame, tokens), token, self.stay_duration or 0)

    def extend(self, paths: PathSum, move: Move, frame: int) -> PathSum:
        """``paths`` followed by ``move`` at ``frame``, ranked as this search ranks."""
        return paths.extended(move, frame, self.early)

    # The steps of the search.

    def prefix_steps(self) -> Iterator[tuple[int, dict[Tokens, Buckets]]]:
        """Each frame in turn with what its prefix step leaves (:meth:`prefix_step`); frames every path skipped are
        passed over."""
        for frame in range(self.num_frames):
            arrivals = self.start_frame(frame)
            if arrivals is not None:
                yield frame, self.prefix_step(frame, arrivals)

    def start_frame(self, frame: int) -> dict[Tokens, PathSum] | None:
        """Take the entries waiting at ``frame`` out of :attr:`pending` (None if there are none)."""
        self.exits = {}
        arrivals = self.pending.pop(frame, None) or None
        self._ranks = sorted(paths.rank for waiting in self.pending.values() for paths in waiting.values())
        return arrivals

    def total(self, buckets: Buckets) -> PathSum | None:
        """Paths of every bucket combined: what an entry is ranked by and what leaves the frame."""
        result = None
        for paths in buckets:
            result = combine(result, paths, self.merge)
        return result

    def prefix_step(self, frame: int, arrivals: dict[Tokens, PathSum]) -> dict[Tokens, Buckets]:
        """The entries ``A`` of ``frame``: each sequence waiting there, with the paths from its waiting prefixes.

        The paths from a prefix ``j`` tokens shorter emit ``j`` tokens at this frame, so they go to bucket ``j``;
        prefixes ``max_symbols_per_frame`` or more tokens shorter cannot reach the sequence within the frame. One
        joint call scores the rows of the arrivals and of every prefix the step walks through.
        """
        shorter: dict[Tokens, list[int]] = {}
        for tokens in arrivals:
            longest = len(tokens) if self.max_symbols is None else min(len(tokens), self.max_symbols - 1)
            if self.tokens_can_stay:
                shorter[tokens] = [j for j in range(1, longest + 1) if tokens[: len(tokens) - j] in arrivals]
        walked = [tokens[:position] for tokens, js in shorter.items() if js
                  for position in range(len(tokens) - max(js), len(tokens))]
        self.rows(frame, list(arrivals) + walked)
        entries: dict[Tokens, Buckets] = {}
        for tokens, paths in arrivals.items():
            buckets: Buckets = [None] * self.num_buckets
            buckets[0] = paths
            entries[tokens] = buckets
            for j in shorter.get(tokens, ()):
                extended = arrivals[tokens[: len(tokens) - j]]
                for position in range(len(tokens) - j, len(tokens)):
                    extended = self.extend(extended, self.stay_move(frame, tokens[:position], tokens[position]), frame)
                bucket = j if self.max_symbols is not None else 0
                buckets[bucket] = combine(buckets[bucket], extended, self.merge)
        return entries

    def expand(self, frame: int, tokens: Tokens, buckets: Buckets, moves: Iterable[Move],
               initial: set[Tokens]) -> dict[Tokens, Buckets]:
        """Extend the entry ``tokens`` of ``frame`` by ``moves``.

        Moves that leave the frame (a blank of any kind, a TDT emission with a positive duration) go to
        :attr:`pending`, and so does a token that reaches ``max_symbols_per_frame``, with the forced blank after it;
        returns the entries of the tokens that stay, by sequence, leaving out the sequences in ``initial`` (the
        frame's entries after the prefix step, which already hold every path to them from this frame's entries).
        """
        children: dict[Tokens, Buckets] = {}
        everything = None
        for move in moves:
            if not move.is_token or move.advance > 0:
                if everything is None:
                    everything = self.total(buckets)
                self.send(frame + move.advance, tokens + (move.label,) if move.is_token else tokens,
                          self.extend(everything, move, frame))
                continue
            child = tokens + (move.label,)
            child_buckets: Buckets = [None] * self.num_buckets
            for emitted, paths in enumerate(buckets):
                if paths is None:
                    continue
                extended = self.extend(paths, move, frame)
                if self.max_symbols is not None and emitted + 1 >= self.max_symbols:
                    forced = self.forced_blank(frame, child)
                    self.send(frame + forced.advance, child, self.extend(extended, forced, frame))
                elif child not in initial:
                    bucket = emitted + 1 if self.max_symbols is not None else 0
                    child_buckets[bucket] = combine(child_buckets[bucket], extended, self.merge)
            if any(paths is not None for paths in child_buckets):
                children[child] = child_buckets
        return children

    def send(self, frame: int, tokens: Tokens, paths: PathSum) -> None:
        """Add ``paths`` to the entry of ``tokens`` waiting at ``frame`` (past the end: finished). A new entry also
        takes the paths a registered :class:`LeavingTokens` of its prefix has to it."""
        frame = min(frame, self.num_frames)
        waiting = self.pending.setdefault(frame, {})
        if tokens not in waiting:
            exits = self.exits.get(tokens[:-1]) if tokens else None
            if exits is not None:
                paths = combine(exits.share(frame, tokens[-1]), paths, self.merge)
        self._add(waiting, tokens, paths)

    def open_exits(self, exits: LeavingTokens, beam_size: int) -> None:
        """Register the leaving token emissions of one sequence (at most one per sequence and frame): add their
        paths to the entries that exist, and make the entries of their ``beam_size`` best targets."""
        self.exits[exits.tokens] = exits
        prefix_length = len(exits.tokens)
        for frame, waiting in self.pending.items():
            for tokens in [t for t in waiting if len(t) == prefix_length + 1 and t[:-1] == exits.tokens]:
                self._add(waiting, tokens, exits.share(frame, tokens[-1]))
        for frame, token in exits.best_targets(beam_size):
            waiting = self.pending.setdefault(frame, {})
            tokens = exits.tokens + (token,)
            if tokens not in waiting:
                self._add(waiting, tokens, exits.share(frame, token))

    def _add(self, waiting: dict[Tokens, PathSum], tokens: Tokens, paths: PathSum | None) -> None:
        """Combine ``paths`` into the entry of ``tokens`` in ``waiting`` (one frame of :attr:`pending`)."""
        if paths is None:
            return
        old = waiting.get(tokens)
        if old is not None:
            del self._ranks[bisect.bisect_left(self._ranks, old.rank)]
        waiting[tokens] = new = combine(old, paths, self.merge)
        bisect.insort(self._ranks, new.rank)

    def count_above(self, rank: float) -> int:
        """How many waiting entries (``B``) rank above ``rank``; call after taking the current frame's out."""
        return len(self._ranks) - bisect.bisect_right(self._ranks, rank)

    def prune(self, beam_size: int) -> None:
        """Keep the ``beam_size`` best waiting entries (ties: the earlier frame, then the earlier arrival); with early
        pruning, the kept entries' fusion scores of this frame now count in their rank."""
        ranked = sorted(((frame, tokens, paths) for frame in sorted(self.pending)
                         for tokens, paths in self.pending[frame].items()), key=lambda e: -e[2].rank)
        self.pending = {}
        for frame, tokens, paths in ranked[:beam_size]:
            if self.early:
                paths = dataclasses.replace(paths, rank=paths.score)
            self.pending.setdefault(frame, {})[tokens] = paths

    def finished(self, nbest: int, length_norm: bool) -> list[Hypothesis]:
        """The ``nbest`` best finished entries, best first (by score, or per token with ``length_norm``), each with
        the fusions' final bonus (:meth:`~transdec.decoding.scoring.Scoring.final_bonus`)."""
        entries = list(self.pending.get(self.num_frames, {}).items())
        if self.scoring.has_final_bonus and entries:
            bonuses = self._final_bonuses([tokens for tokens, _ in entries])
            entries = [(tokens, dataclasses.replace(paths, score=paths.score + bonus))
                       for (tokens, paths), bonus in zip(entries, bonuses)]
        if length_norm:
            entries.sort(key=lambda e: -e[1].score / max(len(e[0]), 1))
        else:
            entries.sort(key=lambda e: -e[1].score)
        return [_hypothesis(tokens, paths) for tokens, paths in entries[:nbest]]

    def _final_bonuses(self, sequences: list[Tokens]) -> list[float]:
        """The final bonus after each of ``sequences``: its fusion states replayed token by token (the predictor
        need not have read a finished sequence's last token)."""
        state = self.scoring.initial_state(len(sequences), self.device)
        for position in range(max(len(tokens) for tokens in sequences)):
            labels = torch.tensor([tokens[position] if position < len(tokens) else 0 for tokens in sequences],
                                  device=self.device)
            mask = torch.tensor([position < len(tokens) for tokens in sequences], device=self.device)
            state = self.scoring.advance(state, labels, mask)
        return self.scoring.final_bonus(state).tolist()


def _hypothesis(tokens: Tokens, paths: PathSum) -> Hypothesis:
    return Hypothesis(list(tokens), [a[0] for a in paths.alignment], [a[1] for a in paths.alignment],
                      [a[2] for a in paths.alignment], paths.score, paths.am_score)


def stacked(rows: Sequence[ScoredRow], early: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``[H, L]`` label ranks and (TDT) ``[H, K]`` duration log-probs of ``rows``."""
    labels = torch.stack([row.label_ranks(early) for row in rows])
    durations = torch.stack([row.duration_logprobs for row in rows]) if rows[0].duration_logprobs is not None else None
    return labels, durations
