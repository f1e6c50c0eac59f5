"""AES++: adaptive expansion search batched over utterances and beams (beam-search paper, Sec. 2.2).

Frame-synchronous: frame ``t`` expands the hypotheses that stand at ``t``; the others (moved past ``t`` by a
TDT duration or a big blank, or finished) wait in the beam. With ``S = min(num_steps, max_symbols_per_frame)``:

1. The *current set* starts as the hypotheses at ``t``. At each step one joint call scores every member at
   frame ``t``, and each member keeps as candidates its ``K + expansion_beta`` best emissions (``K =
   beam_size``; an emission is a label, and for TDT a label with a duration), less those scoring more than
   ``expansion_gamma`` below its best (mAES's expansion pruning, per member).
2. Candidates that leave the frame without a token (the blank; a big blank; a TDT blank with its duration)
   go to the *pool*, at the frame they move to.
3. Token candidates compete for ``K`` places per utterance; one predictor call feeds the winners their
   tokens. Those that leave the frame (a TDT token with a duration) go to the pool; those that stay make the
   next current set. A sequence can arise twice in a frame (``y + k`` from ``y``, and ``y + k`` already in
   the beam): two different paths, both kept until the pool merges them (mAES instead drops the second and
   adds its prefix's share by prefix search).
4. At step ``S`` the members have emitted ``S`` tokens at the frame: when ``S`` is ``max_symbols_per_frame`` the
   forced blank is their only candidate (:mod:`transdec.decoding.greedy.reference`), and when it is a smaller
   ``num_steps`` every emission that leaves the frame is (mAES's rule); so a frame holds at most ``S`` tokens
   that stay at it, and it is always left by a scored emission.
5. Pool entries with the same tokens at the same frame (or both finished) are merged (``merge``: keep the
   best, or the best with the log of the summed probabilities); the ``K`` best are the new beam.

Utterances past their end keep their beam. The n-best are the final beam by score (per token with
``length_norm``). All ``B x K`` hypotheses share every joint and predictor call; tokens go into the tree of
:class:`~transdec.decoding.beam_hyps.BatchedBeamHyps` (``S + 1`` nodes per hypothesis and frame searched), and
equal token sequences are found by their hashes.

With fusions, ``pruning="early"`` ranks the candidates of steps 1 and 3 by the Transducer's log-probs alone;
the pool is always ranked by the fused scores.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from transdec.decoding.beam.alsd_pp import greedy_decoding
from transdec.decoding.beam.batched_search import BatchedBeamSearch, decode_batch
from transdec.decoding.beam.greedy_guard import kept_greedy
from transdec.decoding.beam_hyps import (BatchedBeamHyps, extended_hashes, live_entries, merge_equal,
                                         pairwise_equal, same_sequences, step_rows)
from transdec.decoding.cuda import joint_kernel
from transdec.decoding.cuda.in_place import set_state
from transdec.decoding.emissions import lookup_tables, tdt_advance
from transdec.decoding.options import ExpansionOptions, GraphOptions, PruningOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats
from transdec.decoding.scoring import Fusion, LabelScores, Scoring, ScorerState
from transdec.protocol import DecodingModel, HeadSpec, PredictorState


@dataclass(frozen=True)
class AesOptions(ExpansionOptions, PruningOptions, GraphOptions):
    """Options of AES++: mAES's expansion, with fusions when their scores count, and how to run the frames on a
    GPU (which never changes the output)."""


@takes_options(AesOptions)
@torch.inference_mode()
def beam_aes_pp(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: AesOptions,
                fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """AES++ over ``encoder_out [B, T, D]`` with valid ``lengths [B]``; ``result.nbest`` has each utterance's
    ``nbest`` best hypotheses.

    ``cuda_graphs`` (CUDA only; see :mod:`transdec.decoding.beam.aes_pp_graphs`): ``"while_loops"`` runs the whole
    search as one CUDA graph with a device-side loop over frames, ``"step_graphs"`` replays each frame as a graph
    from a host loop, ``"off"`` runs eagerly, ``"auto"`` takes the fastest that works here (a mode that cannot be
    used warns once). Graphs take only ``fusions`` whose scorers are ``graph_safe``: with any other ``"auto"``
    means ``"off"`` and a graph mode is a ValueError."""
    return kept_greedy(decode_batch("beam_aes_pp", AesSearch, model, encoder_out, lengths, options, fusions),
                       options, lambda: greedy_decoding(model, encoder_out, lengths, options, fusions))


class _Emissions:
    """Every emission a hypothesis can take, flattened to ``C`` columns: each label, and for TDT each label
    with each duration; per column its label, duration value and the frames it moves."""

    def __init__(self, head: HeadSpec, device: torch.device) -> None:
        self.kind = head.kind
        advance_by_label, duration_values = lookup_tables(head, device)
        labels = torch.arange(head.num_labels, device=device)
        if head.kind == "tdt":
            count = len(duration_values)
            self.labels = labels.repeat_interleave(count)
            self.durations = duration_values.repeat(head.num_labels)
            # A TDT blank moves at least one frame, as in greedy decoding.
            self.advance = tdt_advance(self.labels, self.durations, head.blank_id)
        else:
            self.labels, self.durations, self.advance = labels, torch.zeros_like(labels), advance_by_label
        self.is_token = self.labels < head.num_tokens
        self.stays = self.advance == 0
        forced_column = head.blank_id * len(duration_values) + head.forced_duration_index if head.kind == "tdt" \
            else head.blank_id
        self.not_forced = torch.arange(self.labels.shape[0], device=device) != forced_column

    def scores(self, scored: LabelScores) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(scores, am_logprobs, label_logprobs)``, each ``[N, C]``, of the ``N`` rows of ``scored``."""
        if scored.duration_logprobs is None:
            return scored.scores, scored.label_logprobs, scored.label_logprobs
        durations = scored.duration_logprobs.unsqueeze(1)  # [N, 1, K]
        count = durations.shape[2]
        return ((scored.scores.unsqueeze(2) + durations).flatten(1),
                (scored.label_logprobs.unsqueeze(2) + durations).flatten(1),
                scored.label_logprobs.repeat_interleave(count, dim=1))


@dataclass
class _Set:
    """Hypotheses ``[B, P]`` within a frame: scores, token identity, frame, where their predictor state is, and
    the tokens added at this frame."""

    scores: torch.Tensor
    am_scores: torch.Tensor
    hashes: torch.Tensor
    lengths: torch.Tensor
    last_tokens: torch.Tensor
    time: torch.Tensor
    origins: torch.Tensor  # the beam slot at the start of the frame each one extends
    rows: torch.Tensor  # its row in the predictor state it was made with
    new_tokens: torch.Tensor  # [B, P, S + 1], -1 past the tokens added at this frame
    new_durations: torch.Tensor  # [B, P, S + 1]
    new_logprobs: torch.Tensor  # [B, P, S + 1], the tokens' label log-probs

    def gather(self, index: torch.Tensor) -> _Set:
        """Entries ``index [B, N]`` of each utterance."""
        def take(x: torch.Tensor) -> torch.Tensor:
            if x.dim() == 3:
                return x.gather(1, index.unsqueeze(2).expand(-1, -1, x.shape[2]))
            return x.gather(1, index)

        return _Set(*(take(getattr(self, name)) for name in _FIELDS))

    def only(self, mask: torch.Tensor) -> _Set:
        """The same entries, those outside ``mask [B, P]`` dropped (score -inf)."""
        return dataclasses.replace(self, scores=torch.where(mask, self.scores, -torch.inf))


_FIELDS = tuple(_Set.__dataclass_fields__)


def _cat(sets: list[_Set]) -> _Set:
    return _Set(*(torch.cat([getattr(s, name) for s in sets], dim=1) for name in _FIELDS))


@dataclass(slots=True)
class AesState:
    """Everything AES++ carries from one frame to the next, for ``B x K`` hypotheses (``K = beam_size``); the
    search's configuration (model parts, options, the input lengths) is not in it.

    Between two frames this is the whole search so far: suspending a search means keeping this object, resuming it
    giving it back to a search of the same configuration; ``encoder_proj`` is the one field made from the input
    frames, which a search resumed on new frames makes anew. With ``in_place`` every tensor in it is the one the
    first :meth:`AesSearch.start` made, written into from then on and never rebound.
    """

    hyps: BatchedBeamHyps  # the beams [B, K]: scores, frames, tokens, and the tree of their tokens
    encoder_proj: torch.Tensor  # [B, T, J]: the encoder output projected for the joint
    predictor_state: PredictorState  # B*K rows: each hypothesis' predictor state after its last token
    predictor_proj: torch.Tensor  # [B*K, J]: each hypothesis' predictor output after its last token, projected
    scorer_state: tuple[ScorerState, ...]  # each fusion's state, B*K rows
    frame: int | torch.Tensor  # the next frame to search; in place a [] long tensor
    stats: DecodingStats | None = None  # without in_place: predictor and joint calls, counted on the host
    calls: torch.Tensor | None = None  # [2] long, in place only: predictor and joint calls, counted on the device
    active_any: torch.Tensor | None = None  # [] bool, in place only: the loop condition (frames left to search)


class AesSearch(BatchedBeamSearch):
    """One batched AES++ search: :meth:`step` searches one frame, :meth:`run` all of them, and :attr:`state`
    (:class:`AesState`) holds everything the frames carry.

    With ``in_place=True`` a frame never reads anything back: every update is copied into the tensors the first
    :meth:`start` made, the frame index, call counts and the loop condition ``state.active_any`` live on the device,
    every expansion step of a frame runs (with nothing left to expand it changes nothing but writes empty nodes),
    the predictor runs on every hypothesis, and the pool is merged whole instead of first dropping its empty
    entries. A CUDA graph can then capture :meth:`start` and :meth:`step` and replay them on new inputs written
    into ``encoder_out`` and ``lengths`` (:mod:`transdec.decoding.beam.aes_pp_graphs`). The hypotheses then get a
    fixed capacity of ``T * (S + 1)`` steps, a node per expansion step and frame.
    """

    def __init__(self, model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: AesOptions,
                 scoring: Scoring, in_place: bool = False) -> None:
        self._take_inputs(model, encoder_out, lengths, options, scoring, in_place)
        batch_size, beam, device = encoder_out.shape[0], options.beam_size, encoder_out.device
        self.steps = min(options.num_steps, options.max_symbols_per_frame or options.num_steps)
        # Whether the last step's members are at max_symbols_per_frame tokens (then only the forced blank is left).
        self.forced_last = options.max_symbols_per_frame is not None and self.steps == options.max_symbols_per_frame
        self.emissions = _Emissions(self.head, device)
        self.slots = torch.arange(beam, device=device).expand(batch_size, beam)
        self.flat_base = (torch.arange(batch_size, device=device) * beam).unsqueeze(1)  # [B, 1]
        self.state: AesState | None = None
        self.start()

    def start(self) -> None:
        """:meth:`BatchedBeamSearch.start`, at frame 0 (a counter on the device in place)."""
        batch_size, beam = self.slots.shape
        device = self.encoder_out.device
        initial = self._start_fields(batch_size * beam)
        self._start_state(AesState, (batch_size, beam), max(self.max_time * (self.steps + 1), 1), initial,
                          eager={"frame": 0}, in_place={"frame": torch.zeros((), dtype=torch.long, device=device)})
        if self.in_place:
            self.state.frame.zero_()
            self.state.active_any.copy_((self.lengths > 0).any())

    def run(self) -> None:
        """Search every frame (in place: from the state :meth:`start` left)."""
        if self.in_place:
            while bool(self.state.active_any):
                self.step()
        else:
            for _ in range(int(self.lengths.max()) if len(self.lengths) else 0):
                self.step()

    def step(self) -> None:
        """Search the next frame: expand the hypotheses standing at it until each has left it."""
        state = self.state
        t = state.frame
        hyps = state.hyps
        batch_size, beam = hyps.scores.shape
        active = (hyps.time == t) & (t < self.lengths) & (hyps.scores > -torch.inf)  # [B, K]
        if not self.in_place and not bool(active.any()):
            state.frame += 1
            return
        width = self.steps + 1
        device = self.slots.device
        start = _Set(hyps.scores, hyps.am_scores, hyps.hashes, hyps.lengths, hyps.last_tokens, hyps.time, self.slots,
                     self.flat_base + self.slots,
                     torch.full((batch_size, beam, width), -1, dtype=torch.long, device=device),
                     torch.zeros(batch_size, beam, width, dtype=torch.long, device=device),
                     torch.zeros(batch_size, beam, width, dtype=hyps.scores.dtype, device=device))
        if self.joint_layer is None:
            frames = self._frames_at(t).unsqueeze(1).expand(-1, beam, -1).flatten(0, 1)  # [B*K, J]
        else:
            frame_of_hypothesis = t.expand(batch_size * beam).contiguous()  # [B*K], for the joint kernel
        pool = [start.only(~active)]  # the waiting and the finished keep their place
        sources = [(state.predictor_state, state.predictor_proj, state.scorer_state)]
        pool_sources = [0]
        current = start.only(active)
        predictor_state, projection, scorer_state = sources[0]
        steps_taken = 0
        for step in range(width):
            if self.joint_layer is None:
                logits = self.joint.combine(frames, projection)
            else:
                logits = joint_kernel.joint_logits(self.joint_layer, state.encoder_proj, projection,
                                                   frame_of_hypothesis)[:, 0]
            scored = self.scoring(logits, self.scoring.context(scorer_state))
            if self.in_place:
                state.calls[1].add_((current.scores > -torch.inf).any())
            else:
                state.stats.joint_calls += 1
            steps_taken = step + 1
            candidates, scores, am_logprobs, label_logprobs = self._expansions(scored, current, last=step == self.steps)
            pool.append(self._blank_exits(current, candidates, scores, am_logprobs, t))
            pool_sources.append(len(sources) - 1)
            chosen, labels = self._best_tokens(current, candidates, scores, am_logprobs, label_logprobs, step, t)
            fed = (chosen.scores > -torch.inf).view(-1)
            if not self.in_place and not bool(fed.any()):
                break
            parent_rows = chosen.rows.view(-1)
            flat_labels = labels.view(-1)
            parent_state = self.predictor.gather_state(predictor_state, parent_rows)
            if self.in_place:
                # Every row, with the blank where there is no token: no host sync, the same shapes every step.
                out, predictor_state = self.predictor.step(
                    torch.where(fed, flat_labels, self.head.predictor_blank_id), parent_state)
                projection = self.joint.project_predictor(out)
                state.calls[0].add_(fed.any())
            else:
                predictor_state, projection = step_rows(self.predictor, self.joint, flat_labels, parent_state, fed,
                                                        self.head.predictor_blank_id)
                state.stats.predictor_calls += 1
            scorer_state = self.scoring.advance(self.scoring.gather_state(scorer_state, parent_rows), flat_labels, fed)
            sources.append((predictor_state, projection, scorer_state))
            chosen.rows = self.flat_base + self.slots
            leaves = chosen.time > t
            pool.append(chosen.only(leaves))
            pool_sources.append(len(sources) - 1)
            current = chosen.only(~leaves)
            if not self.in_place and not bool((current.scores > -torch.inf).any()):
                break
        self._select(pool, pool_sources, sources, t, steps_taken)
        if self.in_place:
            state.frame.add_(1)
            state.active_any.copy_((state.frame < self.lengths).any())
        else:
            state.frame += 1

    def _frames_at(self, t: int | torch.Tensor) -> torch.Tensor:
        """``[B, J]``: the projected encoder output at frame ``t``."""
        if isinstance(t, int):
            return self.state.encoder_proj[:, t]
        return self.state.encoder_proj.index_select(1, t.clamp(max=self.max_time - 1).view(1)).squeeze(1)

    def _set(self, name: str, value: Any) -> None:
        set_state(self.state, name, value, self.in_place)

    def _expansions(self, scored: LabelScores, current: _Set, last: bool):
        """Each member's kept candidates ``[B*K, W]`` (column index into the emissions, -1 where not kept) and the
        ``[B*K, C]`` scores, Transducer log-probs and label log-probs of every emission. At the ``last`` step only
        emissions that leave the frame count."""
        options = self.options
        scores, am_logprobs, label_logprobs = self.emissions.scores(scored)
        if last:
            scores = scores.masked_fill(self.emissions.not_forced if self.forced_last else self.emissions.stays,
                                        -torch.inf)
        ranking = am_logprobs.masked_fill(torch.isinf(scores), -torch.inf) if options.pruning == "early" else scores
        width = min(options.beam_size + options.expansion_beta, ranking.shape[1])
        top_ranks, candidates = ranking.topk(width, dim=1)  # [B*K, W]
        keep = (current.scores > -torch.inf).view(-1, 1) & (top_ranks > -torch.inf)
        if not math.isinf(options.expansion_gamma):
            keep = keep & (top_ranks >= top_ranks[:, :1] - options.expansion_gamma)
        return candidates.masked_fill(~keep, -1), scores, am_logprobs, label_logprobs

    def _blank_exits(self, current: _Set, candidates: torch.Tensor, scores: torch.Tensor, am_logprobs: torch.Tensor,
                     t: int) -> _Set:
        """``[B, K * W]``: the members that leave the frame by their blank candidates."""
        batch_size, beam = current.scores.shape
        width = candidates.shape[1]
        column = candidates.clamp(min=0)
        exits = (candidates >= 0) & ~self.emissions.is_token[column]
        members = current.gather(self.slots.repeat_interleave(width, dim=1))
        return dataclasses.replace(
            members,
            scores=torch.where(exits, current.scores.view(-1, 1) + scores.gather(1, column),
                               -torch.inf).view(batch_size, beam * width),
            am_scores=(current.am_scores.view(-1, 1) + am_logprobs.gather(1, column)).view(batch_size, beam * width),
            time=(t + self.emissions.advance[column]).view(batch_size, beam * width),
        )

    def _best_tokens(self, current: _Set, candidates: torch.Tensor, scores: torch.Tensor, am_logprobs: torch.Tensor,
                     label_logprobs: torch.Tensor, step: int, t: int) -> tuple[_Set, torch.Tensor]:
        """The ``K`` best token extensions ``[B, K]`` per utterance of the members of ``current``, and their
        tokens; the predictor has yet to read them (``rows`` point at their parents' state)."""
        batch_size, beam = current.scores.shape
        width = candidates.shape[1]
        column = candidates.clamp(min=0)
        tokens = (candidates >= 0) & self.emissions.is_token[column]
        totals = torch.where(tokens, current.scores.view(-1, 1) + scores.gather(1, column), -torch.inf)
        if self.options.pruning == "early":
            ranking = torch.where(tokens, current.scores.view(-1, 1) + am_logprobs.gather(1, column), -torch.inf)
        else:
            ranking = totals
        top_ranks, index = ranking.view(batch_size, beam * width).topk(beam, dim=1)  # [B, K]
        parents = index // width
        flat = (self.flat_base + parents).view(-1)
        chosen_column = column.view(batch_size, beam * width).gather(1, index).view(-1)
        labels = self.emissions.labels[chosen_column].view(batch_size, beam)
        extended = current.gather(parents)
        new_tokens, new_durations = extended.new_tokens.clone(), extended.new_durations.clone()
        new_logprobs = extended.new_logprobs.clone()
        new_tokens[:, :, step] = labels
        new_durations[:, :, step] = self.emissions.durations[chosen_column].view(batch_size, beam)
        new_logprobs[:, :, step] = label_logprobs[flat, chosen_column].view(batch_size, beam)
        chosen = _Set(
            torch.where(top_ranks > -torch.inf, totals.view(batch_size, beam * width).gather(1, index), -torch.inf),
            extended.am_scores + am_logprobs[flat, chosen_column].view(batch_size, beam),
            extended_hashes(extended.hashes, labels), extended.lengths + 1, labels,
            t + self.emissions.advance[chosen_column].view(batch_size, beam), extended.origins, extended.rows,
            new_tokens, new_durations, new_logprobs)
        return chosen, labels

    def _select(self, parts: list[_Set], part_sources: list[int], sources: list, t: int | torch.Tensor,
                steps_taken: int) -> None:
        """Merge equal hypotheses of the pool (``parts``, made with the predictor state ``sources[part_sources[i]]``),
        keep each utterance's ``K`` best as the beam, and write their tokens into the tree."""
        hyps = self.state.hyps
        beam = hyps.beam_size
        pool = _cat(parts)
        # Each entry's predictor and fusion states: its row of the source its pool part was made from.
        source = torch.cat([torch.full((part.scores.shape[1],), number, device=pool.scores.device)
                            for part, number in zip(parts, part_sources, strict=True)]).expand_as(pool.rows)
        # Most of the pool is empty (candidates not kept): drop that before the pairwise merge (in place the pool
        # keeps its size: how much is empty is known only on the device).
        kept = None if self.in_place else live_entries(pool.scores, beam)
        if kept is not None:
            pool, source = pool.gather(kept), source.gather(1, kept)
        if self.options.merge != "none":
            self._merge(pool)
        _, index = pool.scores.topk(beam, dim=1)  # [B, K]
        chosen = pool.gather(index)
        source_of_chosen = source.gather(1, index).view(-1)
        rows = chosen.rows.view(-1)
        predictor_state, projection, scorer_state = (None, None, None)
        for number, (source_state, source_projection, source_scorer) in enumerate(sources):
            mask = source_of_chosen == number
            if predictor_state is None:
                predictor_state = self.predictor.gather_state(source_state, rows)
                projection = source_projection[rows]
                scorer_state = self.scoring.gather_state(source_scorer, rows)
                continue
            if not self.in_place and not bool(mask.any()):
                continue
            predictor_state = self.predictor.select_state(mask, self.predictor.gather_state(source_state, rows),
                                                          predictor_state)
            projection = torch.where(mask.unsqueeze(1), source_projection[rows], projection)
            scorer_state = self.scoring.select_state(mask, self.scoring.gather_state(source_scorer, rows),
                                                     scorer_state)
        self._set("predictor_state", predictor_state)
        self._set("predictor_proj", projection)
        self._set("scorer_state", scorer_state)
        hyps.reorder(chosen.origins)
        times = torch.full_like(chosen.origins, t) if isinstance(t, int) else t.expand_as(chosen.origins)
        for step in range(steps_taken):
            hyps.add_step(chosen.origins if step == 0 else self.slots, chosen.new_tokens[:, :, step], times,
                          chosen.new_durations[:, :, step], chosen.new_logprobs[:, :, step])
        hyps.assign(scores=chosen.scores, am_scores=chosen.am_scores, time=chosen.time)

    def _merge(self, pool: _Set) -> None:
        """Merge entries with the same tokens at the same frame (or both finished) into the best of them."""
        alive = pool.scores > -torch.inf
        finished = pool.time >= self.lengths
        same_place = pairwise_equal(pool.time) | (finished.unsqueeze(2) & finished.unsqueeze(1))
        same = (same_sequences(pool.hashes, pool.lengths, pool.last_tokens) & same_place
                & alive.unsqueeze(2) & alive.unsqueeze(1))  # [B, P, P]
        pool.scores, pool.am_scores = merge_equal(same, pool.scores, pool.am_scores, self.options.merge)
