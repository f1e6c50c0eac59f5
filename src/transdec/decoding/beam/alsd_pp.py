"""ALSD++: alignment-length synchronous beam search batched over utterances and beams (beam-search paper, Sec. 2).

The search is the one :mod:`transdec.decoding.beam.alsd` spells out per utterance, with identical results:
every hypothesis takes one emission per step; each utterance keeps its ``beam_size`` best-ranked candidates (with
``dominance_slots``, some of them by dominance instead); hypotheses with the same tokens in the same state are
merged; finished hypotheses stay in the beam with their scores. Here every step is a few tensor operations on
all ``B x K`` hypotheses at once: one joint call, one ranking of the ``K (K + 1)`` candidates per utterance
(:func:`~transdec.decoding.beam_hyps.best_and_undominated`), one predictor call for the hypotheses that emitted a
token (state gathered from the hypothesis each one extends, with the protocol's ``gather_state`` /
``select_state``), and merging by comparing token-sequence hashes
(:class:`~transdec.decoding.beam_hyps.BatchedBeamHyps`), ``K x K`` integer comparisons per utterance. The
tokens are kept in a tree of parent pointers, never copied.

Each hypothesis keeps its own frame, so RNN-T blanks move it by one frame, multi-blank big blanks by their
durations and TDT emissions by their durations, exactly as greedy decoding does; ``beam_size=1`` gives the
greedy label-looping result (tokens, timestamps, durations and score) for every head. Candidates per
hypothesis are its ``K`` best emissions (for TDT the ``K`` best pairs of its ``K`` best labels and ``K`` best
durations).

On CUDA the search runs as CUDA graphs (:mod:`transdec.decoding.beam.alsd_pp_graphs`, ``cuda_graphs``): with
``in_place=True`` :class:`AlsdSearch` writes every update into tensors made once, counts on the device and
runs the predictor on every hypothesis, so a step never reads anything back, and its loop condition is a device
flag. The results are the same in every mode.

The n-best are ranked with the fusions' final bonus (:meth:`~transdec.decoding.scoring.Scoring.final_bonus`), read
once the search is over.

The step itself (:class:`AlsdSteps`) is shared with :class:`~transdec.decoding.beam.streaming.BeamStreams`, which
runs it on streams whose frames arrive in chunks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from transdec.decoding.beam.batched_search import BatchedBeamSearch, decode_batch
from transdec.decoding.beam.greedy_guard import kept_greedy
from transdec.decoding.beam_hyps import (BatchedBeamHyps, best_and_undominated, merge_equal, pairwise_equal,
                                         step_rows)
from transdec.decoding.cuda import joint_kernel
from transdec.decoding.cuda.in_place import set_state
from transdec.decoding.emissions import lookup_tables, tdt_advance
from transdec.decoding.options import CandidateOptions, GraphOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats
from transdec.decoding.scoring import Fusion, LabelScores, ScorerState, Scoring
from transdec.protocol import DecodingModel, PredictorState


@dataclasses.dataclass(frozen=True)
class AlsdPlusOptions(CandidateOptions, GraphOptions):
    """Options of ALSD++: the beam options and how to run the steps on a GPU (which never changes the output)."""


@takes_options(AlsdPlusOptions)
@torch.inference_mode()
def beam_alsd_pp(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: AlsdPlusOptions,
                 fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Beam search over ``encoder_out [B, T, D]`` with valid ``lengths [B]``; ``result.nbest`` has each
    utterance's ``nbest`` best hypotheses.

    ``cuda_graphs`` (CUDA only; see :mod:`transdec.decoding.beam.alsd_pp_graphs`): ``"while_loops"`` runs the whole
    search as one CUDA graph with a device-side loop, ``"step_graphs"`` replays each search step as a graph from a
    host loop, ``"off"`` runs the steps eagerly, ``"auto"`` takes the fastest that works here (a mode that cannot
    be used warns once). Graphs need a ``max_symbols_per_frame``; they take ``fusions`` whose scorers are
    ``graph_safe`` (the n-gram LM): with any other ``"auto"`` means ``"off"`` and a graph mode is a ValueError."""
    return kept_greedy(decode_batch("beam_alsd_pp", AlsdSearch, model, encoder_out, lengths, options, fusions),
                       options, lambda: greedy_decoding(model, encoder_out, lengths, options, fusions))


def greedy_decoding(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: Any,
                    fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Greedy decoding of ``encoder_out [B, T, D]`` with the same ``fusions`` as a beam search's result, its scores
    ranked with the beam's: ALSD++ at beam 1 (greedy decoding exactly, for every head), with the
    ``max_symbols_per_frame``, ``cuda_graphs`` and ``cpu_threads`` of any strategy's ``options``. What
    ``keep_greedy`` adds to a beam search's n-best."""
    greedy = AlsdPlusOptions(beam_size=1, max_symbols_per_frame=options.max_symbols_per_frame,
                             cuda_graphs=getattr(options, "cuda_graphs", "auto"), cpu_threads=options.cpu_threads)
    return decode_batch("beam_alsd_pp", AlsdSearch, model, encoder_out, lengths, greedy, fusions)


@dataclasses.dataclass(slots=True)
class AlsdState:
    """Everything ALSD++ carries from one step to the next, for ``B x K`` hypotheses (``K = beam_size``); the
    search's configuration (model parts, options, the input buffers ``encoder_out`` and ``lengths``) is not in it.

    :meth:`AlsdSearch.start` makes it and the steps update it. With ``in_place`` every tensor in it is the one the
    first ``start()`` made, written into from then on and never rebound: CUDA graphs captured the steps on them.

    Between two steps this is the whole search so far: suspending a search means keeping this object, resuming it
    giving it back to a search of the same configuration; ``encoder_proj`` is the one field made from the input
    frames, which a search resumed on new frames makes anew.
    """

    hyps: BatchedBeamHyps  # the beams [B, K]: scores, frames, tokens at the frame, and the tree of their tokens
    encoder_proj: torch.Tensor  # [B, T, J]: the encoder output projected for the joint (streams: from an offset)
    predictor_state: PredictorState  # B*K rows: each hypothesis' predictor state after its last token
    predictor_proj: torch.Tensor  # [B*K, J]: each hypothesis' predictor output after its last token, projected
    scorer_state: tuple[ScorerState, ...]  # each fusion's state, B*K rows
    context: tuple[torch.Tensor, ...]  # each fusion's token log-probs [B*K, V] in `scorer_state`
    stats: DecodingStats | None = None  # without in_place: predictor and joint calls, counted on the host
    calls: torch.Tensor | None = None  # [2] long, in place only: predictor and joint calls, counted on the device
    active_any: torch.Tensor | None = None  # [] bool, in place only: the loop condition (a live hypothesis has frames)


class AlsdSteps:
    """The ALSD++ search step on the ``B x K`` hypotheses of an :class:`AlsdState` (:attr:`state`), whatever
    supplies their frames: :class:`AlsdSearch` (whole utterances) and
    :class:`~transdec.decoding.beam.streaming.BeamStreams` (streams, chunk by chunk) run the same step.

    :meth:`expand` gives every active hypothesis its best emissions and keeps each utterance's ``beam_size`` best
    candidates; :meth:`merge` then merges equal hypotheses. With ``in_place`` every update is copied into the
    tensors of :attr:`state` (see :class:`AlsdSearch`).
    """

    def __init__(self, model: DecodingModel, options: CandidateOptions, scoring: Scoring, batch_size: int,
                 device: torch.device, in_place: bool = False) -> None:
        # Only the parts: graph caches keyed on the model must not keep it alive.
        self.head, self.predictor, self.joint = model.head, model.predictor, model.joint
        self.options, self.scoring, self.in_place = options, scoring, in_place
        self.rows = torch.arange(batch_size, device=device).unsqueeze(1)  # [B, 1]
        self.advance_by_label, self.duration_values = lookup_tables(self.head, device)
        # In place (under CUDA graphs), one kernel computes the joint with the frame gather in it.
        self.joint_layer = joint_kernel.fused_layer(self.joint, device) if in_place else None
        self.state: AlsdState | None = None

    def joint_at(self, encoder_proj: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """Raw joint logits ``[B*K, C]`` of each hypothesis (``predictor_proj``) at its column ``columns [B, K]``
        of ``encoder_proj [B, T, J]`` (clipped to the last)."""
        if self.joint_layer is not None:
            return joint_kernel.joint_logits(self.joint_layer, encoder_proj, self.state.predictor_proj, columns)[:, 0]
        frames = encoder_proj[self.rows, columns.clamp(max=encoder_proj.shape[1] - 1)]  # [B, K, J]
        return self.joint.combine(frames.flatten(0, 1), self.state.predictor_proj)

    def expand(self, active: torch.Tensor, logits: torch.Tensor, waiting: torch.Tensor | None = None) -> None:
        """One search step without the merging: every active hypothesis (``active [B, K]``) scored by the joint at
        its frame (``logits [B*K, C]``, from :meth:`joint_at`) and extended by its best emissions; the other
        live ones are candidates as they are; each utterance keeps ``beam_size`` candidates by dominance (see
        :mod:`transdec.decoding.beam.alsd`), in score order. Rows ``waiting [B]`` (None: none) take no step: every hypothesis stays in its slot, unchanged (the
        step writes a node without a token for each)."""
        state, head = self.state, self.head
        hyps = state.hyps
        batch_size, beam = hyps.scores.shape
        scored = self.scoring(logits, state.context)
        if self.in_place:
            state.calls[1].add_(1)
        else:
            state.stats.joint_calls += 1
        emission = self._best_emissions(scored, hyps.tokens_at_frame.view(-1))  # fields [B*K, E]

        # Candidates: each active hypothesis' best emissions, and for a finished one itself, unchanged.
        scores = hyps.scores.view(-1, 1)
        flat_active = active.view(-1, 1)
        early = self.options.pruning == "early"
        candidates = torch.cat([torch.where(flat_active, scores + emission["score"], -torch.inf),
                                torch.where(flat_active, -torch.inf, scores)], dim=1)  # [B*K, E + 1]
        width = candidates.shape[1]
        if early:  # rank by the Transducer's log-probs, score by the fused ones
            ranking = torch.cat([torch.where(flat_active, scores + emission["am_logprob"], -torch.inf),
                                 torch.where(flat_active, -torch.inf, scores)], dim=1)
        else:
            ranking = candidates
        # The frame each candidate stands at after its emission (a finished hypothesis: its own).
        if head.kind == "tdt":
            advance = tdt_advance(emission["label"], emission["duration"], head.blank_id)
        else:
            advance = self.advance_by_label[emission["label"]]
        time = hyps.time.view(-1, 1)
        frames = torch.cat([time + advance, time], dim=1)  # [B*K, E + 1]
        top = best_and_undominated(ranking.view(batch_size, beam * width), frames.view(batch_size, beam * width),
                                   beam, self.options.dominance_slots)
        # Slots in score order, as merging expects: the best of equal hypotheses is the best scored.
        top_scores, order = candidates.view(batch_size, beam * width).gather(1, top).sort(
            dim=1, descending=True, stable=True)
        top = top.gather(1, order)  # [B, K]
        parents, which = top // width, top % width
        if waiting is not None:
            keep = waiting.unsqueeze(1)  # [B, 1]
            parents = torch.where(keep, torch.arange(beam, device=parents.device), parents)
            which = which.masked_fill(keep, width - 1)
            top_scores = torch.where(keep, hyps.scores, top_scores)
        stays = which == width - 1
        flat_parents = (self.rows * beam + parents).view(-1)  # [B*K]
        pick = (flat_parents, which.clamp(max=width - 2).view(-1))
        labels = emission["label"][pick].view(batch_size, beam)
        durations = emission["duration"][pick].view(batch_size, beam)
        am_logprobs = emission["am_logprob"][pick].view(batch_size, beam)
        label_logprobs = emission["label_logprob"][pick].view(batch_size, beam)

        hyps.reorder(parents)
        # An empty slot (score -inf, picked when an utterance has fewer than K candidates) emits nothing: its label
        # comes from arbitrary ties, and would make predictor calls depend on them.
        tokens = ~stays & (labels < head.num_tokens) & (top_scores > -torch.inf)
        if head.kind == "tdt":
            advance = tdt_advance(labels, durations, head.blank_id)
        else:
            advance = self.advance_by_label[labels]
        advance = advance.masked_fill(stays, 0)
        tokens_at_frame = torch.where(tokens & (advance == 0), hyps.tokens_at_frame + 1,
                                      torch.where(stays, hyps.tokens_at_frame, 0))
        time = hyps.time + advance
        hyps.add_step(parents, torch.where(tokens, labels, -1), hyps.time, durations, label_logprobs)
        hyps.assign(scores=top_scores, am_scores=hyps.am_scores + am_logprobs.masked_fill(stays, 0.0), time=time,
                    tokens_at_frame=tokens_at_frame)
        self._feed(flat_parents, labels.view(-1), tokens.view(-1))

    def _best_emissions(self, scored: LabelScores, tokens_at_frame: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each hypothesis' ``E`` best emissions ``[B*K, E]``: its ``K`` best labels (times its ``K`` best
        durations for TDT) with their decision scores, scores without fusions and label log-probs; for a
        hypothesis with ``max_symbols_per_frame`` tokens at its frame (``tokens_at_frame [B*K]``), the forced
        blank alone."""
        emission = self._top_emissions(scored)
        limit = self.options.max_symbols_per_frame
        if limit is None:
            return emission
        forced = (tokens_at_frame >= limit).unsqueeze(1)  # [B*K, 1]
        head = self.head
        only = forced & (torch.arange(emission["label"].shape[1], device=forced.device) == 0)  # its first column
        blank = head.blank_id
        label_logprob = scored.label_logprobs[:, blank : blank + 1]
        duration_logprob = (scored.duration_logprobs[:, head.forced_duration_index : head.forced_duration_index + 1]
                            if head.kind == "tdt" else torch.zeros_like(label_logprob))
        forced_values = {"label": blank, "duration": head.forced_advance if head.kind == "tdt" else 0,
                         "score": scored.scores[:, blank : blank + 1] + duration_logprob,
                         "am_logprob": label_logprob + duration_logprob, "label_logprob": label_logprob}
        for name, value in forced_values.items():
            other = -torch.inf if name in ("score", "am_logprob") else emission[name]
            emission[name] = torch.where(only, value, torch.where(forced, other, emission[name]))
        return emission

    def _top_emissions(self, scored: LabelScores) -> dict[str, torch.Tensor]:
        """:meth:`_best_emissions` without the forced blank."""
        beam = self.options.beam_size
        by = scored.label_logprobs if self.options.pruning == "early" else scored.scores
        _, labels = by.topk(min(beam, scored.scores.shape[1]), dim=1)  # [N, k1]
        label_scores = scored.scores.gather(1, labels)
        label_logprobs = scored.label_logprobs.gather(1, labels)
        if scored.duration_logprobs is None:
            return {"label": labels, "duration": torch.zeros_like(labels), "score": label_scores,
                    "am_logprob": label_logprobs, "label_logprob": label_logprobs}
        duration_logprobs, duration_index = scored.duration_logprobs.topk(
            min(beam, scored.duration_logprobs.shape[1]), dim=1)  # [N, k2]
        n, k1, k2 = labels.shape[0], labels.shape[1], duration_index.shape[1]

        def outer(per_label: torch.Tensor, per_duration: torch.Tensor) -> torch.Tensor:
            return (per_label.unsqueeze(2) + per_duration.unsqueeze(1)).view(n, k1 * k2)

        pairs = {
            "label": labels.unsqueeze(2).expand(n, k1, k2).reshape(n, k1 * k2),
            "duration": self.duration_values[duration_index].unsqueeze(1).expand(n, k1, k2).reshape(n, k1 * k2),
            "score": outer(label_scores, duration_logprobs),
            "am_logprob": outer(label_logprobs, duration_logprobs),
            "label_logprob": label_logprobs.unsqueeze(2).expand(n, k1, k2).reshape(n, k1 * k2),
        }
        # The best label-duration pairs are among these; the K best of them are the hypothesis' candidates.
        _, best = pairs["am_logprob" if self.options.pruning == "early" else "score"].topk(min(beam, k1 * k2), dim=1)
        return {name: value.gather(1, best) for name, value in pairs.items()}

    def _feed(self, parents: torch.Tensor, labels: torch.Tensor, tokens: torch.Tensor) -> None:
        """Take each hypothesis' predictor and fusion state from its parent ``[B*K]`` and advance the rows that
        emitted a token (``tokens [B*K]``) by their ``labels``: one predictor call for the whole batch."""
        state = self.state
        predictor_state = self.predictor.gather_state(state.predictor_state, parents)
        predictor_proj = state.predictor_proj[parents]
        scorer_state = self.scoring.gather_state(state.scorer_state, parents)
        if self.in_place:
            # Every row, with the blank where there is no token: no host sync, and the same shapes every step.
            out, new_state = self.predictor.step(torch.where(tokens, labels, self.head.predictor_blank_id),
                                                 predictor_state)
            projected = self.joint.project_predictor(out)
            state.calls[0].add_(tokens.any())
        else:
            state.predictor_state, state.predictor_proj, state.scorer_state = (predictor_state, predictor_proj,
                                                                               scorer_state)
            if not bool(tokens.any()):
                state.context = self.scoring.context(scorer_state)
                return
            new_state, projected = step_rows(self.predictor, self.joint, labels, predictor_state, tokens,
                                             self.head.predictor_blank_id)
            state.stats.predictor_calls += 1
        self._set("predictor_state", self.predictor.select_state(tokens, new_state, predictor_state))
        self._set("predictor_proj", torch.where(tokens.unsqueeze(1), projected, predictor_proj))
        self._set("scorer_state", self.scoring.advance(scorer_state, labels, tokens))
        self._set("context", self.scoring.context(state.scorer_state))

    def merge(self, lengths: torch.Tensor, rows: torch.Tensor | None = None) -> None:
        """Merge hypotheses with the same tokens in the same state into the best of them (see the module
        docstring of :mod:`transdec.decoding.beam.alsd`); a hypothesis at or past ``lengths [B, 1]`` is finished.
        Only in ``rows [B]`` (None: every row)."""
        hyps = self.state.hyps
        finished = hyps.time >= lengths
        alive = hyps.scores > -torch.inf
        same_state = (finished.unsqueeze(2) & finished.unsqueeze(1)) | (
            ~finished.unsqueeze(2) & ~finished.unsqueeze(1) & pairwise_equal(hyps.time)
            & pairwise_equal(hyps.tokens_at_frame))
        same = hyps.same_tokens() & same_state & alive.unsqueeze(2) & alive.unsqueeze(1)  # [B, K, K]
        if rows is not None:
            same = same & rows.view(-1, 1, 1)
        # Slots are in score order, so the one of a group that ranks ahead is its lowest slot.
        scores, am_scores = merge_equal(same, hyps.scores, hyps.am_scores, self.options.merge)
        if rows is not None:  # the other rows are no group at all, not even of one: they keep their scores
            scores = torch.where(rows.unsqueeze(1), scores, hyps.scores)
            am_scores = torch.where(rows.unsqueeze(1), am_scores, hyps.am_scores)
        hyps.assign(scores=scores, am_scores=am_scores)

    def _set(self, name: str, value: Any) -> None:
        set_state(self.state, name, value, self.in_place)


class AlsdSearch(AlsdSteps, BatchedBeamSearch):
    """One batched search; :meth:`step` runs one search step, :meth:`run` all of them, and :attr:`state`
    (:class:`AlsdState`) holds everything the steps carry.

    With ``in_place=True`` (which needs ``options.max_symbols_per_frame``) the steps only touch tensors and
    never read them back: every update is copied into the tensors the first :meth:`start` made, call counts
    and the loop condition ``state.active_any`` (a 0-dim bool) live on the device, and the predictor runs on every
    hypothesis. A CUDA graph can then capture :meth:`start` and :meth:`step` and replay them on new inputs
    written into ``encoder_out`` and ``lengths`` (:mod:`transdec.decoding.beam.alsd_pp_graphs`).

    The hypotheses then get a fixed capacity of ``T * (m + 1)`` steps (``m = max_symbols_per_frame``): a step
    runs only while some hypothesis is searching, and one searching at step ``n`` took an emission at each of the
    ``n - 1`` steps before (a finished hypothesis only stays, and so do all hypotheses extending it). At any
    one frame it took at most ``m + 1`` of them (``m`` tokens, then the forced blank), the last of which moved it
    on, and it moved on at most ``T - 1`` times, each by a frame or more, as it is still below frame ``T``:
    ``n - 1 <= (T - 1) * (m + 1) + m``, so ``n <= T * (m + 1)``.

    Without ``in_place``, updates rebind the state's fields and the predictor runs on the hypotheses that emitted a
    token only, which costs less on a CPU.
    """

    def __init__(self, model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                 options: CandidateOptions, scoring: Scoring, in_place: bool = False) -> None:
        super().__init__(model, options, scoring, encoder_out.shape[0], encoder_out.device, in_place)
        self.encoder_out = encoder_out
        self.max_time = encoder_out.shape[1]
        self.lengths = lengths.unsqueeze(1)  # [B, 1], a view: new lengths written into `lengths` reach it
        if in_place and options.max_symbols_per_frame is None:
            raise ValueError("an in-place ALSD++ search needs a max_symbols_per_frame to bound its steps")
        self.capacity = max(self.max_time * ((options.max_symbols_per_frame or 0) + 1), 1)  # in place only
        self.start()

    def start(self) -> None:
        """:meth:`BatchedBeamSearch.start`, the fusions' context made once for the first step."""
        initial = self._start_fields(self.rows.shape[0] * self.options.beam_size)
        initial["context"] = self.scoring.context(initial["scorer_state"])
        self._start_state(AlsdState, (self.rows.shape[0], self.options.beam_size), self.capacity, initial)
        if self.in_place:
            self._update_active_any()

    def step(self) -> bool:
        """One emission for every hypothesis. Without ``in_place``: False (and nothing done) once every
        hypothesis is finished. In place it always steps (callers check ``active_any`` first) and returns True."""
        hyps = self.state.hyps
        active = (hyps.time < self.lengths) & (hyps.scores > -torch.inf)  # [B, K]
        if not self.in_place and not bool(active.any()):
            return False
        self.expand(active, self.joint_at(self.state.encoder_proj, hyps.time))
        if self.options.merge != "none":
            self.merge(self.lengths)
        if self.in_place:
            self._update_active_any()
        return True

    def _update_active_any(self) -> None:
        """The loop condition, on the device: whether any live hypothesis has frames left."""
        hyps = self.state.hyps
        self.state.active_any.copy_(((hyps.time < self.lengths) & (hyps.scores > -torch.inf)).any())

