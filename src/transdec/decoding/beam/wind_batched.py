"""WIND beam search (WIND paper, Algorithm 3) batched over utterances, RNN-T heads.

The search of :mod:`transdec.decoding.beam.wind`, with the same results under ``merge="max"``: each utterance
takes the hypotheses waiting at its earliest frame ``t``, keeps the ``K = beam_size`` best, feeds each its last
token, and expands it with one joint call over the window ``t .. t+n-1`` (``n = min(window_size, T - t)``) along
its chain of blanks: the tokens among the ``K`` best labels of each window position the chain reaches, and the
blank over the whole window if the chain passes it. Here every utterance does that in the same round: one
predictor call for the last tokens of all ``B x K`` hypotheses taken, one joint call over their ``B x K x n``
window frames.

Waiting hypotheses live in a fixed store of ``P = K * (window_size + 2)`` slots per utterance
(:class:`~transdec.decoding.beam_hyps.BatchedBeamHyps`, tokens in its tree). New hypotheses are merged into it
on arrival (the same tokens at the same frame with the same number of tokens emitted there, or both finished),
and each frame keeps only its ``K`` best: the ``K`` a frame will give when its turn comes are among them, so
with ``"max"`` this is exact, and every waiting hypothesis lies within one window of the earliest frame, which
bounds the store. The same holds of a round's expansions: only the ``K`` best landing at each window position
(equal ones merged first) can enter the store, so a round adds ``(n + 1) K`` of them. Tokens a round leaves at
``t`` that score below the ``K`` best waiting at every frame of their window are dropped (they could enter no
frame), which saves most rounds of a frame's token loops. With ``"logsumexp"`` a hypothesis dropped early does
not add its share to a later equal one, as it would in the per-utterance search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from transdec.decoding.beam.alsd_pp import greedy_decoding
from transdec.decoding.beam.batched_search import BatchedBeamSearch, decode_batch
from transdec.decoding.beam.greedy_guard import kept_greedy
from transdec.decoding.beam_hyps import (BatchedBeamHyps, extended_hashes, live_entries, merge_equal,
                                         pairwise_equal, ranks_ahead, same_sequences, step_rows)
from transdec.decoding.beam.wind import WindBeamOptions
from transdec.decoding.cuda import joint_kernel
from transdec.decoding.cuda.in_place import set_state
from transdec.decoding.inputs import check_rnnt_head
from transdec.decoding.options import GraphOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats
from transdec.decoding.scoring import Fusion, LabelScores, Scoring, ScorerState
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
    return kept_greedy(decode_batch("beam_wind_batched", WindSearch, model, encoder_out, lengths, options, fusions),
                       options, lambda: greedy_decoding(model, encoder_out, lengths, options, fusions))


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
        self._drop_hopeless(store, t)
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
        """The expansions ``[B, (n + 1) * K]`` that the hypotheses in slots ``taken [B, K]`` (``valid`` where there
        is one) keep over their window, after feeding them their pending tokens, at most ``K`` landing at each
        window position and ``K`` whole-window blanks; and the fed states (bank 1: predictor state and projection
        ``[B*K, J]``, scorer states)."""
        predictor_state, projection, scorer_state = self._fed_states(taken, valid)
        scored, inside = self._window_scores(t, projection, scorer_state, valid)
        tokens, whole_window = self._chain_expansions(t, taken, valid, scored, inside)
        per_position = self._best_per_position(tokens)
        return ({name: torch.cat([per_position[name], whole_window[name]], dim=1) for name in _FIELDS},
                (predictor_state, projection, scorer_state))

    def _fed_states(self, taken: torch.Tensor, valid: torch.Tensor) -> tuple[PredictorState, torch.Tensor, tuple]:
        """The predictor state, projection ``[B*K, J]`` and scorer states of the hypotheses in slots ``taken [B, K]``
        after feeding them their pending tokens (where ``valid``)."""
        state, head = self.state, self.head
        size = state.hyps.scores.shape[1]
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
        return predictor_state, projection, scorer_state

    def _window_scores(self, t: torch.Tensor, projection: torch.Tensor, scorer_state: tuple,
                       valid: torch.Tensor) -> tuple[LabelScores, torch.Tensor]:
        """The scores of every label at every window position of each taken hypothesis (``[B*K, n, L]``, one joint
        call for all), and which positions lie inside the utterance (``[B*K, n]``)."""
        state, beam, window = self.state, self.beam, self.window
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
        return scored, inside

    def _chain_expansions(self, t: torch.Tensor, taken: torch.Tensor, valid: torch.Tensor, scored: LabelScores,
                          inside: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Each taken hypothesis' expansions along its chain of blanks (see :mod:`transdec.decoding.beam.wind`): the
        tokens among the ``K`` best labels of each window position it reaches, ``[B, n, K * K]`` (a position's
        candidates from every taken hypothesis; -inf where none), and its whole-window blank, ``[B, K]``."""
        head, beam, window = self.head, self.beam, self.window
        batch_size, count = taken.shape[0], inside.shape[0]
        blank = head.blank_id
        # A hypothesis with max_symbols_per_frame tokens at t has no token at window position 0 (the forced blank).
        allowed = inside.unsqueeze(2).expand(-1, -1, head.num_labels)  # [B*K, n, L]
        if self.options.max_symbols_per_frame is not None:
            hyps = self.state.hyps
            forced = hyps.tokens_at_frame.gather(1, taken).view(-1, 1, 1) >= self.options.max_symbols_per_frame
            is_token_at_start = ((torch.arange(window, device=t.device) == 0).view(1, -1, 1)
                                 & (torch.arange(head.num_labels, device=t.device) < head.num_tokens).view(1, 1, -1))
            allowed = allowed & ~(forced & is_token_at_start)
        scores = scored.scores.masked_fill(~allowed, -torch.inf)
        best, labels = scores.topk(min(beam, head.num_labels), dim=2)  # [B*K, n, k]
        ranked = best > -torch.inf
        # The chain goes on past a position where the blank is among its K best (and past the utterance's end).
        goes_on = ((labels == blank) & ranked).any(dim=2) | ~inside  # [B*K, n]
        reached = torch.cat([torch.ones_like(goes_on[:, :1]), goes_on[:, :-1].long().cumprod(dim=1).bool()], dim=1)
        is_token = reached.unsqueeze(2) & ranked & (labels != blank)

        def runs(values: torch.Tensor) -> torch.Tensor:
            """``[B*K, n + 1]``: the blanks' total before each window position, the last over the whole window."""
            blanks = values[:, :, blank].masked_fill(~inside, 0.0)
            return torch.cat([blanks.new_zeros(count, 1), blanks.cumsum(dim=1)], dim=1)

        score_runs, am_runs = runs(scored.scores), runs(scored.label_logprobs)
        label_logprobs = scored.label_logprobs.gather(2, labels)  # [B*K, n, k]
        width = labels.shape[2]

        def taken_field(name: str) -> torch.Tensor:  # [B*K, 1, 1]
            return getattr(self.state.hyps, name).gather(1, taken).view(-1, 1, 1)

        offset = torch.arange(window, device=t.device).view(1, -1, 1)  # [1, n, 1]
        frame = t.repeat_interleave(beam, dim=0).view(-1, 1, 1) + offset  # [B*K, n, 1]
        token = torch.where(is_token, labels, 0)
        tokens = {
            "scores": torch.where(is_token & valid.view(-1, 1, 1), taken_field("scores") + score_runs[:, :window, None]
                                  + best, -torch.inf),
            "am_scores": taken_field("am_scores") + am_runs[:, :window, None] + label_logprobs,
            "time": frame.expand(-1, -1, width),
            "tokens_at_frame": torch.where(offset == 0, taken_field("tokens_at_frame"), 0).expand(-1, -1, width) + 1,
            "hashes": extended_hashes(taken_field("hashes"), token),
            "lengths": (taken_field("lengths") + 1).expand(-1, window, width),
            "last_tokens": token,
            "parents": taken.view(-1, 1, 1).expand(-1, window, width),
            "tokens": token,
            "timestamps": frame.expand(-1, -1, width),
            "logprobs": label_logprobs,
            "pending": token,
            "bank": torch.ones_like(token),
            "rows": torch.arange(count, device=t.device).view(-1, 1, 1).expand(-1, window, width),
        }
        # Candidates by landing position: [B*K, n, k] -> [B, n, K * k].
        tokens = {name: value.reshape(batch_size, beam, window, width).transpose(1, 2).reshape(
            batch_size, window, beam * width) for name, value in tokens.items()}
        through = goes_on.all(dim=1) & valid.view(-1)  # [B*K]: the chain passes the whole window
        length = inside.sum(dim=1)  # [B*K]: window positions inside the utterance

        def per_taken(name: str) -> torch.Tensor:  # [B, K]
            return getattr(self.state.hyps, name).gather(1, taken)

        whole_window = {
            "scores": torch.where(through, per_taken("scores").view(-1) + score_runs.gather(1, length.unsqueeze(1))[:, 0],
                                  -torch.inf).view(batch_size, beam),
            "am_scores": per_taken("am_scores") + am_runs.gather(1, length.unsqueeze(1)).view(batch_size, beam),
            "time": per_taken("time") + length.view(batch_size, beam),
            "tokens_at_frame": torch.zeros_like(taken),
            "hashes": per_taken("hashes"),
            "lengths": per_taken("lengths"),
            "last_tokens": per_taken("last_tokens"),
            "parents": taken,
            "tokens": torch.full_like(taken, -1),
            "timestamps": per_taken("time"),
            "logprobs": torch.zeros_like(per_taken("scores")),
            "pending": torch.full_like(taken, -1),
            "bank": torch.ones_like(taken),
            "rows": torch.arange(count, device=t.device).view(batch_size, beam),
        }
        return tokens, whole_window

    def _best_per_position(self, tokens: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The ``K`` best candidates landing at each window position, ``[B, n, C] -> [B, n * K]``, equal ones
        merged first: only those can be among the ``K`` a frame keeps (with ``"max"``, exactly)."""
        batch_size, window, width = tokens["scores"].shape
        flat = {name: value.reshape(batch_size * window, width) for name, value in tokens.items()}
        if self.options.merge != "none":
            alive = flat["scores"] > -torch.inf
            same = (same_sequences(flat["hashes"], flat["lengths"], flat["last_tokens"])
                    & pairwise_equal(flat["tokens_at_frame"]) & alive.unsqueeze(2) & alive.unsqueeze(1))
            flat["scores"], flat["am_scores"] = merge_equal(same, flat["scores"], flat["am_scores"], self.options.merge)
        _, index = flat["scores"].topk(min(self.beam, width), dim=1)
        return {name: value.gather(1, index).view(batch_size, -1) for name, value in flat.items()}

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

    def _drop_hopeless(self, store: dict[str, torch.Tensor], t: torch.Tensor) -> None:
        """Drop the entries at frame ``t [B, 1]`` (the tokens this round's hypotheses emitted at ``t``) that score
        below the ``K`` best already waiting at every frame their window reaches (``t+1 .. t+n``, the finished for a
        window that ends the utterance). Everything such an entry leads to lands at one of those frames scoring no
        more than it does, where ``K`` better hypotheses (which can only be displaced by better ones) leave it no
        place, or back at ``t``, to be dropped by the same test: with ``"max"`` (and ``"none"``) the result is the
        search's without the test, with ``"logsumexp"`` such an entry no longer adds its share to an equal later
        one. It saves the rounds of a frame's token loops that cannot win, most of a search's rounds."""
        scores, time = store["scores"], store["time"]
        finished = time >= self.lengths  # [B, N]
        landing = t + torch.arange(1, self.window + 1, device=t.device)  # [B, n]
        ends = landing >= self.lengths
        at = torch.where(ends.unsqueeze(2), finished.unsqueeze(1),
                         (time.unsqueeze(1) == landing.unsqueeze(2)) & ~finished.unsqueeze(1))  # [B, n, N]
        kth = torch.where(at, scores.unsqueeze(1), -torch.inf).topk(self.beam, dim=2).values[:, :, -1]  # [B, n]
        reached = landing <= self.lengths  # the window of an entry at t: up to t + n, n = min(window, T - t)
        bound = torch.where(reached, kth, torch.inf).min(dim=1, keepdim=True).values  # [B, 1]
        store["scores"] = scores.masked_fill((time == t) & ~finished & (scores < bound), -torch.inf)

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
