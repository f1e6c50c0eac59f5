"""WIND beam search (WIND paper, Algorithm 3) batched over utterances, RNN-T heads.

The search of :mod:`transdec.decoding.beam.wind`, with the same results under ``merge="max"``: each utterance
takes the hypotheses waiting at its earliest frame ``t``, keeps the ``K = beam_size`` best, feeds each its last
token, and expands it with one joint call over the window ``t .. t+n-1`` (``n = min(window_size, T - t)``) into
its ``K`` best of "blanks up to window position ``k``, then token ``v`` at ``t+k``" and "blanks over the whole
window". Here every utterance does that in the same round: one predictor call for the last tokens of all
``B x K`` hypotheses taken, one joint call over their ``B x K x n`` window frames.

Waiting hypotheses live in a fixed store of ``P = K * (window_size + 2)`` slots per utterance
(:class:`~transdec.decoding.beam_hyps.BatchedBeamHyps`, tokens in its tree). New hypotheses are merged into it
on arrival (the same tokens at the same frame with the same number of tokens emitted there, or both finished),
and each frame keeps only its ``K`` best: the ``K`` a frame will give when its turn comes are among them, so
with ``"max"`` this is exact, and every waiting hypothesis lies within one window of the earliest frame, which
bounds the store. With ``"logsumexp"`` a hypothesis dropped early does not add its share to a later equal one,
as it would in the per-utterance search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from transdec.decoding.beam.batched_search import BatchedBeamSearch, decode_batch
from transdec.decoding.beam_hyps import (BatchedBeamHyps, extended_hashes, live_entries, merge_equal,
                                         pairwise_equal, ranks_ahead, same_sequences, step_rows)
from transdec.decoding.beam.wind import WindBeamOptions
from transdec.decoding.cuda import joint_kernel
from transdec.decoding.cuda.in_place import set_state
from transdec.decoding.inputs import check_rnnt_head
from transdec.decoding.options import GraphOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats
from transdec.decoding.scoring import Fusion, Scoring, ScorerState
from transdec.protocol import DecodingModel, PredictorState


@dataclass(frozen=True)
class WindBatchedOptions(WindBeamOptions, GraphOptions):
    """Options of batched WIND beam search: the beam options, the window, and how to run the rounds on a GPU
    (which never changes the output)."""


@takes_options(WindBatchedOptions)
@torch.inference_mode()
def beam_wind_batched(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                      options: WindBatchedOptions, fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """WIND beam search over ``encoder_out [B, T, D]`` with valid ``lengths [B]``, all utterances at once.

    ``cuda_graphs`` (CUDA only; see :mod:`transdec.decoding.beam.wind_batched_graphs`): ``"while_loops"`` runs the
    whole search as one CUDA graph with a device-side loop over rounds, ``"step_graphs"`` replays each round as a
    graph from a host loop, ``"off"`` runs eagerly, ``"auto"`` takes the fastest that works here (a mode that
    cannot be used warns once). Graphs need a ``max_symbols_per_frame`` and take only graph-safe ``fusions``: with
    any other ``"auto"`` means ``"off"`` and a graph mode is a ValueError."""
    check_rnnt_head(model.head, "beam_wind_batched")
    return decode_batch("beam_wind_batched", WindSearch, model, encoder_out, lengths, options, fusions)


# The fields of a store entry or a new hypothesis within a round, each [B, N]: what BatchedBeamHyps keeps per slot,
# the node it adds to the tree (parent slot, token or -1, frame, log-prob), the token its predictor has yet to read
# (-1: none) and where its predictor state is (bank 0: the store, bank 1: the hypotheses expanded this round; row in
# it). A round's end writes them into its WindBeamState.
_FIELDS = ("scores", "am_scores", "time", "tokens_at_frame", "hashes", "lengths", "last_tokens", "parents", "tokens",
           "timestamps", "logprobs", "pending", "bank", "rows")


@dataclass(slots=True)
class WindBeamState:
    """Everything batched WIND beam search carries from one round to the next: the store of ``P = K * (window_size
    + 2)`` waiting hypotheses per utterance; the search's configuration (model parts, options, the input lengths)
    is not in it.

    Between two rounds this is the whole search so far: suspending a search means keeping this object, resuming it
    giving it back to a search of the same configuration; ``encoder_proj`` is the one field made from the input
    frames, which a search resumed on new frames makes anew.
    """

    hyps: BatchedBeamHyps  # the store [B, P]: scores, frames, tokens, and the tree of their tokens
    encoder_proj: torch.Tensor  # [B, T, J]: the encoder output projected for the joint
    pending: torch.Tensor  # [B, P] long: the token each entry's predictor has yet to read (-1: none)
    predictor_state: PredictorState  # B*P rows: each entry's predictor state after every token but the pending one
    predictor_proj: torch.Tensor  # [B*P, J]: the predictor output after the same tokens, projected
    scorer_state: tuple[ScorerState, ...]  # each fusion's state, B*P rows, after the same tokens
    stats: DecodingStats | None = None  # without in_place: predictor and joint calls, counted on the host
    calls: torch.Tensor | None = None  # [2] long, in place only: predictor and joint calls, counted on the device
    active_any: torch.Tensor | None = None  # [] bool, in place only: the loop condition (a hypothesis waits)


class WindSearch(BatchedBeamSearch):
    """One batched WIND beam search: :meth:`step` runs one round, :meth:`run` all of them, and :attr:`state`
    (:class:`WindBeamState`) holds everything the rounds carry.

    With ``in_place=True`` (which needs ``options.max_symbols_per_frame``) a round never reads anything back: every
    update is copied into the tensors the first :meth:`start` made, call counts and the loop condition
    ``state.active_any`` live on the device, the predictor runs on every taken hypothesis, and the store is merged
    whole instead of first dropping its empty entries. A CUDA graph can then capture :meth:`start` and :meth:`step`
    and replay them on new inputs written into ``encoder_out`` and ``lengths``
    (:mod:`transdec.decoding.beam.wind_batched_graphs`). The store's tree then gets a fixed capacity of
    ``T * (m + 1)`` rounds (``m = max_symbols_per_frame``): a frame is an utterance's earliest for at most ``m + 1``
    rounds, as the hypotheses a round leaves there have each emitted one more token at it than those it took.
    """

    def __init__(self, model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                 options: WindBatchedOptions, scoring: Scoring, in_place: bool = False) -> None:
        self._take_inputs(model, encoder_out, lengths, options, scoring, in_place)
        batch_size, device = encoder_out.shape[0], encoder_out.device
        self.beam, self.window = options.beam_size, options.window_size
        size = self.beam * (self.window + 2)
        self.rows = torch.arange(batch_size, device=device).unsqueeze(1)  # [B, 1]
        self.slots = torch.arange(size, device=device).expand(batch_size, size)
        if in_place and options.max_symbols_per_frame is None:
            raise ValueError("an in-place WIND beam search needs a max_symbols_per_frame to bound its rounds")
        self.state: WindBeamState | None = None
        self.start()

    def start(self) -> None:
        """:meth:`BatchedBeamSearch.start`, no entry with a token waiting for the predictor."""
        batch_size, size = self.slots.shape
        initial = self._start_fields(batch_size * size)
        initial["pending"] = torch.full((batch_size, size), -1, dtype=torch.long, device=self.encoder_out.device)
        capacity = max(self.max_time * ((self.options.max_symbols_per_frame or 0) + 1), 1)  # in place only
        self._start_state(WindBeamState, (batch_size, size), capacity, initial)
        if self.in_place:
            self._update_active_any()

    def step(self) -> bool:
        """One round: expand every utterance's best hypotheses at its earliest frame. Without ``in_place``: False
        (and nothing done) once all are finished. In place it always runs (callers check ``active_any`` first)."""
        state, beam = self.state, self.beam
        hyps = state.hyps
        batch_size, size = hyps.scores.shape
        waiting = (hyps.scores > -torch.inf) & (hyps.time < self.lengths)
        if not self.in_place and not bool(waiting.any()):
            return False
        never = self.max_time + self.window + 1
        t = torch.where(waiting, hyps.time, never).min(dim=1, keepdim=True).values  # [B, 1]
        here = waiting & (hyps.time == t)
        taken_scores, taken = torch.where(here, hyps.scores, -torch.inf).topk(beam, dim=1)  # [B, K]
        new, fed = self._expand(t, taken, taken_scores > -torch.inf)
        old = {name: getattr(hyps, name) for name in ("scores", "am_scores", "time", "tokens_at_frame", "hashes",
                                                      "lengths", "last_tokens")}
        old["scores"] = torch.where(here, -torch.inf, hyps.scores)  # those at t were taken or pruned
        old.update(parents=self.slots, tokens=torch.full_like(self.slots, -1), timestamps=torch.zeros_like(self.slots),
                   logprobs=torch.zeros_like(hyps.scores), pending=state.pending, bank=torch.zeros_like(self.slots),
                   rows=self.rows * size + self.slots)
        store = {name: torch.cat([old[name], new[name]], dim=1) for name in _FIELDS}
        # Most entries are empty (free slots, pruned candidates): drop them before the pairwise comparisons (in
        # place the store keeps its size: how much is empty is known only on the device).
        kept = None if self.in_place else live_entries(store["scores"], size)
        if kept is not None:
            store = {name: value.gather(1, kept) for name, value in store.items()}
        self._merge(store)
        self._keep_best_per_frame(store)
        _, index = store["scores"].topk(size, dim=1)
        chosen = {name: value.gather(1, index) for name, value in store.items()}
        self._write(chosen, fed)
        if self.in_place:
            self._update_active_any()
        return True

    def _update_active_any(self) -> None:
        """The loop condition, on the device: whether a live hypothesis has frames left."""
        hyps = self.state.hyps
        self.state.active_any.copy_(((hyps.scores > -torch.inf) & (hyps.time < self.lengths)).any())

    def _expand(self, t: torch.Tensor, taken: torch.Tensor,
                valid: torch.Tensor) -> tuple[dict[str, torch.Tensor], tuple[PredictorState, torch.Tensor, tuple]]:
        """The ``K`` best window expansions ``[B, K * K]`` of the hypotheses in slots ``taken [B, K]`` (``valid``
        where there is one), after feeding them their pending tokens, and the fed states (bank 1: predictor state
        and projection ``[B*K, J]``, scorer states)."""
        state, head, beam, window = self.state, self.head, self.beam, self.window
        hyps = state.hyps
        batch_size, size = hyps.scores.shape
        flat = (self.rows * size + taken).view(-1)  # [B*K]
        predictor_state = self.predictor.gather_state(state.predictor_state, flat)
        projection = state.predictor_proj[flat]
        scorer_state = self.scoring.gather_state(state.scorer_state, flat)
        pending = state.pending.gather(1, taken).view(-1)
        feed = (pending >= 0) & valid.view(-1)
        if self.in_place:
            # Every row, with the blank where there is no token: no host sync, the same shapes every round.
            out, fed_state = self.predictor.step(torch.where(feed, pending, head.predictor_blank_id), predictor_state)
            fed_projection = self.joint.project_predictor(out)
            state.calls[0].add_(feed.any())
            feeding = True
        else:
            feeding = bool(feed.any())
            if feeding:
                fed_state, fed_projection = step_rows(self.predictor, self.joint, pending, predictor_state, feed,
                                                      head.predictor_blank_id)
                state.stats.predictor_calls += 1
        if feeding:
            predictor_state = self.predictor.select_state(feed, fed_state, predictor_state)
            projection = torch.where(feed.unsqueeze(1), fed_projection, projection)
            scorer_state = self.scoring.advance(scorer_state, pending, feed)

        positions = t + torch.arange(window, device=t.device)  # [B, n]
        inside = (positions < self.lengths).repeat_interleave(beam, dim=0)  # [B*K, n]
        if self.joint_layer is None:
            frames = state.encoder_proj[self.rows, positions.clamp(max=self.max_time - 1)]  # [B, n, J]
            frames = frames.repeat_interleave(beam, dim=0)  # [B*K, n, J]
            logits = self.joint.combine(frames, projection.unsqueeze(1))
        else:
            logits = joint_kernel.joint_logits(self.joint_layer, state.encoder_proj, projection,
                                               t.repeat_interleave(beam, dim=0), window)  # [B*K, n, C]
        scored = self.scoring(logits, self.scoring.context(scorer_state))
        if self.in_place:
            state.calls[1].add_(valid.any())
        else:
            state.stats.joint_calls += 1
        count = inside.shape[0]

        def blank_runs(values: torch.Tensor) -> torch.Tensor:
            """``[B*K, n + 1]``: the blanks' total before each window position, the last over the whole window."""
            blanks = values[:, :, head.blank_id].masked_fill(~inside, 0.0)
            return torch.cat([blanks.new_zeros(count, 1), blanks.cumsum(dim=1)], dim=1)

        # A hypothesis with max_symbols_per_frame tokens at t has no token at window position 0 (the forced blank).
        allowed = inside
        if self.options.max_symbols_per_frame is not None:
            forced = hyps.tokens_at_frame.gather(1, taken).view(-1, 1) >= self.options.max_symbols_per_frame
            allowed = inside & ~(forced & (torch.arange(window, device=t.device) == 0))

        def with_runs(values: torch.Tensor, runs: torch.Tensor) -> torch.Tensor:
            """``[B*K, n * V + 1]``: blanks then each token at each position, then blanks over the whole window."""
            tokens = (runs[:, :window].unsqueeze(2) + values[:, :, : head.num_tokens]).masked_fill(
                ~allowed.unsqueeze(2), -torch.inf)
            return torch.cat([tokens.flatten(1), runs.gather(1, inside.sum(dim=1, keepdim=True))], dim=1)

        scores = with_runs(scored.scores, blank_runs(scored.scores))
        am_logprobs = with_runs(scored.label_logprobs, blank_runs(scored.label_logprobs))
        top_scores, top = scores.topk(min(beam, scores.shape[1]), dim=1)  # [B*K, C]
        width = top.shape[1]
        whole_window = top == window * head.num_tokens
        offset = torch.where(whole_window, 0, top // head.num_tokens)
        token = torch.where(whole_window, -1, top % head.num_tokens)
        logprob = scored.label_logprobs[:, :, : head.num_tokens].flatten(1).gather(1, top.clamp(
            max=window * head.num_tokens - 1))

        def per_taken(x: torch.Tensor) -> torch.Tensor:  # [B, K] -> [B*K, 1]
            return x.reshape(-1, 1)

        parent = hyps.time.gather(1, taken)  # the frame t of each taken hypothesis, [B, K]
        taken_fields = {name: per_taken(getattr(hyps, name).gather(1, taken))
                        for name in ("scores", "am_scores", "tokens_at_frame", "hashes", "lengths", "last_tokens")}
        emitted = token >= 0
        tokens_at_frame = torch.where(emitted, torch.where(offset == 0, taken_fields["tokens_at_frame"], 0) + 1, 0)
        time = per_taken(parent) + torch.where(whole_window, inside.sum(dim=1, keepdim=True), offset)
        new = {
            "scores": torch.where(per_taken(valid) & (top_scores > -torch.inf), taken_fields["scores"] + top_scores,
                                  -torch.inf),
            "am_scores": taken_fields["am_scores"] + am_logprobs.gather(1, top),
            "time": time,
            "tokens_at_frame": tokens_at_frame,
            "hashes": torch.where(emitted, extended_hashes(taken_fields["hashes"], token), taken_fields["hashes"]),
            "lengths": taken_fields["lengths"] + emitted,
            "last_tokens": torch.where(emitted, token, taken_fields["last_tokens"]),
            "parents": per_taken(taken).expand(-1, width),
            "tokens": token,
            "timestamps": per_taken(parent) + offset,
            "logprobs": logprob,
            "pending": token,
            "bank": torch.ones_like(token),
            "rows": torch.arange(count, device=top.device).unsqueeze(1).expand(-1, width),
        }
        return ({name: value.reshape(batch_size, beam * width) for name, value in new.items()},
                (predictor_state, projection, scorer_state))

    def _merge(self, store: dict[str, torch.Tensor]) -> None:
        """Merge equal entries (same tokens at the same frame with the same tokens there, or both finished)."""
        if self.options.merge == "none":
            return
        alive = store["scores"] > -torch.inf
        finished = store["time"] >= self.lengths
        same_place = ((pairwise_equal(store["time"]) & pairwise_equal(store["tokens_at_frame"]))
                      | (finished.unsqueeze(2) & finished.unsqueeze(1)))
        same = (same_sequences(store["hashes"], store["lengths"], store["last_tokens"]) & same_place
                & alive.unsqueeze(2) & alive.unsqueeze(1))  # [B, N, N]
        store["scores"], store["am_scores"] = merge_equal(same, store["scores"], store["am_scores"],
                                                          self.options.merge)

    def _keep_best_per_frame(self, store: dict[str, torch.Tensor]) -> None:
        """Drop all but the ``K`` best entries of each frame (the finished count as one frame)."""
        scores = store["scores"]
        alive = scores > -torch.inf
        place = torch.where(store["time"] >= self.lengths, -1, store["time"])
        same = (place.unsqueeze(2) == place.unsqueeze(1)) & alive.unsqueeze(2) & alive.unsqueeze(1)
        rank = (same & ranks_ahead(scores)).sum(dim=1)  # entries of the same frame ahead of each one
        store["scores"] = scores.masked_fill(rank >= self.beam, -torch.inf)

    def _write(self, chosen: dict[str, torch.Tensor], fed: tuple[PredictorState, torch.Tensor, tuple]) -> None:
        """Make ``chosen [B, P]`` the store: tree nodes, per-slot fields and predictor states (bank 0: the store's,
        bank 1: ``fed``, those of the hypotheses expanded this round)."""
        state = self.state
        hyps = state.hyps
        hyps.reorder(chosen["parents"])
        hyps.add_step(chosen["parents"], chosen["tokens"], chosen["timestamps"], torch.zeros_like(chosen["tokens"]),
                      chosen["logprobs"])
        hyps.assign(scores=chosen["scores"], am_scores=chosen["am_scores"], time=chosen["time"],
                    tokens_at_frame=chosen["tokens_at_frame"])
        self._set("pending", chosen["pending"])
        from_fed = (chosen["bank"] == 1).view(-1)
        rows = chosen["rows"].view(-1)
        fed_rows, old_rows = rows.masked_fill(~from_fed, 0), rows.masked_fill(from_fed, 0)
        fed_state, fed_projection, fed_scorer_state = fed
        self._set("predictor_state", self.predictor.select_state(
            from_fed, self.predictor.gather_state(fed_state, fed_rows),
            self.predictor.gather_state(state.predictor_state, old_rows)))
        self._set("predictor_proj", torch.where(from_fed.unsqueeze(1), fed_projection[fed_rows],
                                                state.predictor_proj[old_rows]))
        self._set("scorer_state", self.scoring.select_state(
            from_fed, self.scoring.gather_state(fed_scorer_state, fed_rows),
            self.scoring.gather_state(state.scorer_state, old_rows)))

    def _set(self, name: str, value: Any) -> None:
        set_state(self.state, name, value, self.in_place)
