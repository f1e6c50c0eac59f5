"""BatchedBeamHyps: ``beam`` hypotheses for each of ``B`` utterances as tensors, their tokens in a tree.

Per hypothesis (``[B, K]`` tensors): score, score without fusions, frame, tokens emitted at that frame, number
of tokens, last token and a rolling hash of the tokens. The tokens themselves are never copied: every search
step writes one node per hypothesis, ``[B, K]`` columns of ``[B, K, S]`` tensors (the emitted token or -1 for
none, its frame, TDT duration and log-prob, and the slot of the hypothesis it extends at the step before), so
a hypothesis is read back by following parent pointers from its last node (beam-search paper, Fig. 1).
Memory grows with the number of steps, one node per hypothesis per step, not with beam x length copies.

With ``fixed_capacity`` the node buffers never grow, the step count is a device tensor and every update is written
into the tensors made at the start, so that the steps need no host sync and a CUDA graph can capture them
(:mod:`transdec.decoding.beam.alsd_pp_graphs`); the count is read back once, by :meth:`BatchedBeamHyps.hypotheses`.

The hash of a token sequence ``y`` is ``H(y + [k]) = (H(y) * P + k + 1) mod M`` with primes ``P`` and ``M``
chosen so that the product fits in int64; hypotheses are the same tokens when hash, length and last token agree.

:func:`step_rows` feeds the predictor the tokens of the hypotheses that emitted one, as the batched searches need;
:func:`merge_equal` (with :func:`same_sequences` and :func:`ranks_ahead`) merges equal hypotheses of a beam or a pool,
:func:`live_entries` drops a pool's empty entries before that, and :func:`best_and_undominated` is ALSD++'s pruning
rule (:mod:`transdec.decoding.beam.alsd`).
"""

from __future__ import annotations

import numpy as np
import torch

from transdec.decoding.hypothesis import Hypothesis
from transdec.protocol import Joint, Predictor, PredictorState

HASH_BASE = 1_000_003
HASH_MODULUS = 1_000_000_000_039  # prime; HASH_MODULUS * HASH_BASE < 2**63


def extended_hashes(hashes: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The hashes of token sequences after each reads one more token ``tokens`` (ids >= 0)."""
    return (hashes * HASH_BASE + tokens + 1) % HASH_MODULUS


class BatchedBeamHyps:
    """The beams of a batch (see the module docstring). Slots with score ``-inf`` hold no hypothesis.

    By default the node buffers start with ``capacity`` steps and double when full, ``steps`` counts the steps
    written and updates rebind the attributes. With ``fixed_capacity`` (the most steps the search can take)
    nothing is ever reallocated: ``step_index`` (a ``[1]`` long tensor) counts the steps, ``steps`` is None, and
    updates, :meth:`assign` included, copy into the existing tensors.

    Attributes:
        scores, am_scores: ``[B, K]`` float, with and without fusions (``-inf``: no hypothesis).
        time, tokens_at_frame: ``[B, K]`` long, each hypothesis' frame and the tokens it emitted there.
        lengths, last_tokens, hashes: ``[B, K]`` long, its number of tokens, last token (-1: none) and their hash.
        node_tokens, node_parents, node_times, node_durations: ``[B, K, S]`` long, a node per step (``S``: the
            capacity): the token or -1, the slot it extends at the step before, its frame and TDT duration.
        node_logprobs: ``[B, K, S]`` float, the token's label log-prob.
        steps / step_index: the steps written (see above).
    """

    def __init__(self, batch_size: int, beam_size: int, device: torch.device, float_dtype: torch.dtype,
                 capacity: int = 64, fixed_capacity: int | None = None) -> None:
        shape = (batch_size, beam_size)
        self.scores = torch.full(shape, -torch.inf, dtype=float_dtype, device=device)
        self.scores[:, 0] = 0.0  # one empty hypothesis per utterance to start from
        self.am_scores = torch.zeros_like(self.scores)
        self.time = torch.zeros(shape, dtype=torch.long, device=device)
        self.tokens_at_frame = torch.zeros_like(self.time)
        self.lengths = torch.zeros_like(self.time)
        self.last_tokens = torch.full_like(self.time, -1)
        self.hashes = torch.zeros_like(self.time)
        self.fixed = fixed_capacity is not None
        if self.fixed:
            if fixed_capacity < 1:
                raise ValueError(f"fixed_capacity must be at least 1, got {fixed_capacity}")
            capacity = fixed_capacity
            self.steps: int | None = None
            self.step_index: torch.Tensor | None = torch.zeros(1, dtype=torch.long, device=device)
        else:
            self.steps, self.step_index = 0, None
        self.node_tokens = torch.zeros(*shape, capacity, dtype=torch.long, device=device)
        self.node_parents = torch.zeros_like(self.node_tokens)
        self.node_times = torch.zeros_like(self.node_tokens)
        self.node_durations = torch.zeros_like(self.node_tokens)
        self.node_logprobs = torch.zeros(*shape, capacity, dtype=float_dtype, device=device)

    @property
    def batch_size(self) -> int:
        return self.scores.shape[0]

    @property
    def beam_size(self) -> int:
        return self.scores.shape[1]

    @property
    def capacity(self) -> int:
        """Steps the node buffers hold now."""
        return self.node_tokens.shape[2]

    def reorder(self, parents: torch.Tensor) -> None:
        """Make slot ``k`` of each utterance a copy of its slot ``parents [B, K]`` (the hypothesis it extends)."""
        names = ("scores", "am_scores", "time", "tokens_at_frame", "lengths", "last_tokens", "hashes")
        if self.fixed:
            self.assign(**{name: getattr(self, name).gather(1, parents) for name in names})
            return
        for name in names:
            setattr(self, name, getattr(self, name).gather(1, parents))

    def assign(self, **values: torch.Tensor) -> None:
        """Set per-slot fields (``scores=...``, ``time=...``, each ``[B, K]``): rebinds them, or with a fixed
        capacity copies into the tensors a graph may have captured."""
        for name, value in values.items():
            if self.fixed:
                getattr(self, name).copy_(value)
            else:
                setattr(self, name, value)

    def reset(self) -> None:
        """Back to one empty hypothesis per utterance, in place (the node buffers are only read up to the step
        count, so they keep their old values)."""
        self.scores.fill_(-torch.inf)
        self.scores[:, 0].fill_(0.0)
        for tensor in (self.am_scores, self.time, self.tokens_at_frame, self.lengths, self.hashes):
            tensor.zero_()
        self.last_tokens.fill_(-1)
        if self.fixed:
            self.step_index.zero_()
        else:
            self.steps = 0

    def add_step(self, parents: torch.Tensor, tokens: torch.Tensor, times: torch.Tensor, durations: torch.Tensor,
                 logprobs: torch.Tensor) -> None:
        """Write this step's nodes: ``tokens [B, K]`` (-1 where no token was emitted) at frame ``times``, with
        their ``durations`` and ``logprobs``, extending slot ``parents`` of the step before; update the hashes."""
        if self.fixed:
            self._add_fixed_step(parents, tokens, times, durations, logprobs)
            return
        if self.steps == self.node_tokens.shape[2]:
            self._grow()
        for buffer, value in ((self.node_tokens, tokens), (self.node_parents, parents), (self.node_times, times),
                              (self.node_durations, durations), (self.node_logprobs, logprobs)):
            buffer[:, :, self.steps] = value
        self.steps += 1
        emitted = tokens >= 0
        self.hashes = torch.where(emitted, extended_hashes(self.hashes, tokens), self.hashes)
        self.lengths = self.lengths + emitted
        self.last_tokens = torch.where(emitted, tokens, self.last_tokens)

    def same_tokens(self) -> torch.Tensor:
        """``[B, K, K]``: whether two slots of an utterance hold the same token sequence."""
        return same_sequences(self.hashes, self.lengths, self.last_tokens)

    def best(self, count: int, length_norm: bool = False,
             final_bonus: torch.Tensor | float = 0.0) -> list[list[Hypothesis]]:
        """Each utterance's ``count`` best hypotheses by score plus ``final_bonus [B, K]`` (the fusions' end of
        the hypotheses, :meth:`~transdec.decoding.scoring.Scoring.final_bonus`), per token with ``length_norm``,
        best first; their scores include the bonus."""
        scores = self.scores + final_bonus
        ranking = scores / self.lengths.clamp(min=1) if length_norm else scores
        top_scores, top = ranking.topk(count, dim=1)
        return self.hypotheses(torch.where(top_scores > -torch.inf, top, -1), scores)

    def hypotheses(self, slots: torch.Tensor, scores: torch.Tensor | None = None) -> list[list[Hypothesis]]:
        """The hypotheses in ``slots [B, N]`` (-1: none), read back through the tree, each utterance's in order;
        their scores are ``scores [B, K]`` (default: :attr:`scores`)."""
        steps = self.steps_taken()
        slots_np = slots.cpu().numpy()
        rows, columns = np.nonzero(slots_np >= 0)
        current = slots_np[rows, columns]
        # Each hypothesis' slot at every step, from its last node back along the parent pointers.
        parents = self.node_parents[:, :, :steps].cpu().numpy()
        path = np.empty((len(rows), steps), dtype=np.int64)
        for step in range(steps - 1, -1, -1):
            path[:, step] = current
            current = parents[rows, current, step]
        at = (rows[:, None], path, np.arange(steps)[None, :])
        tokens = self.node_tokens[:, :, :steps].cpu().numpy()[at]
        times = self.node_times[:, :, :steps].cpu().numpy()[at]
        durations = self.node_durations[:, :, :steps].cpu().numpy()[at]
        logprobs = self.node_logprobs[:, :, :steps].cpu().numpy()[at]
        totals = (self.scores if scores is None else scores).cpu().numpy()
        am_totals = self.am_scores.cpu().numpy()
        result: list[list[Hypothesis]] = [[] for _ in range(self.batch_size)]
        for n, (b, slot) in enumerate(zip(rows.tolist(), slots_np[rows, columns].tolist())):
            emitted = tokens[n] >= 0
            result[b].append(Hypothesis(tokens[n][emitted].tolist(), times[n][emitted].tolist(),
                                        durations[n][emitted].tolist(), logprobs[n][emitted].tolist(),
                                        float(totals[b, slot]), float(am_totals[b, slot])))
        return result

    def steps_taken(self) -> int:
        """The number of steps written (with a fixed capacity, one read of the device counter)."""
        if not self.fixed:
            return self.steps
        steps = int(self.step_index)
        if steps > self.capacity:  # the writes past the end all went to the last node
            raise RuntimeError(f"{steps} search steps overran the fixed capacity of {self.capacity}")
        return steps

    def _add_fixed_step(self, parents: torch.Tensor, tokens: torch.Tensor, times: torch.Tensor,
                        durations: torch.Tensor, logprobs: torch.Tensor) -> None:
        """:meth:`add_step` with the node index on the device and every update in place."""
        # Clamped: an index out of range would be a device-side assert, which ends the whole CUDA context; the
        # searches bound their steps, and steps_taken() reports an overrun instead.
        index = self.step_index.clamp(max=self.capacity - 1)
        for buffer, value in ((self.node_tokens, tokens), (self.node_parents, parents), (self.node_times, times),
                              (self.node_durations, durations), (self.node_logprobs, logprobs)):
            buffer.index_copy_(2, index, value.to(buffer.dtype).unsqueeze(2))
        self.step_index += 1
        emitted = tokens >= 0
        self.hashes.copy_(torch.where(emitted, extended_hashes(self.hashes, tokens), self.hashes))
        self.lengths += emitted
        self.last_tokens.copy_(torch.where(emitted, tokens, self.last_tokens))

    def _grow(self) -> None:
        for name in ("node_tokens", "node_parents", "node_times", "node_durations", "node_logprobs"):
            buffer = getattr(self, name)
            setattr(self, name, torch.cat([buffer, torch.zeros_like(buffer)], dim=2))


def step_rows(predictor: Predictor, joint: Joint, labels: torch.Tensor, state: PredictorState, mask: torch.Tensor,
              fill_label: int) -> tuple[PredictorState, torch.Tensor]:
    """``(state, projection [N, J])`` after the rows where ``mask [N]`` read ``labels [N]``; the other rows hold
    anything (callers select or drop them). ``fill_label`` is a valid predictor input for rows without a label.

    On a CPU the predictor's arithmetic dominates and often few rows have a label: the predictor runs on those rows
    only and the results are spread back with a gather, the protocol's only way to move states between rows. On a
    GPU one call on every row costs about as much and needs no host sync.
    """
    if mask.device.type != "cpu":
        out, new_state = predictor.step(torch.where(mask, labels, fill_label), state)
        return new_state, joint.project_predictor(out)
    rows = mask.nonzero().squeeze(1)
    out, new_state = predictor.step(labels[rows], predictor.gather_state(state, rows))
    position = torch.zeros_like(labels).index_put_((rows,), torch.arange(len(rows), device=rows.device))
    return predictor.gather_state(new_state, position), joint.project_predictor(out)[position]


def pairwise_equal(x: torch.Tensor) -> torch.Tensor:
    """``[B, N, N]``: whether entries ``i`` and ``j`` of ``x [B, N]`` are equal."""
    return x.unsqueeze(2) == x.unsqueeze(1)


def same_sequences(hashes: torch.Tensor, lengths: torch.Tensor, last_tokens: torch.Tensor) -> torch.Tensor:
    """``[B, N, N]``: whether two entries hold the same token sequence (hash, length and last token agree)."""
    return pairwise_equal(hashes) & pairwise_equal(lengths) & pairwise_equal(last_tokens)


def merge_equal(same: torch.Tensor, scores: torch.Tensor, am_scores: torch.Tensor,
                rule: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scores, am_scores)`` after merging each group of equal live entries (``same [B, N, N]``) into the one
    that :func:`ranks_ahead`: the others get score -inf; with ``"logsumexp"`` it gets the log of the group's summed
    probabilities, with ``"max"`` it keeps its own."""
    merged_away = (same & ranks_ahead(scores)).any(dim=1)
    if rule == "logsumexp":
        scores = torch.where(same, scores.unsqueeze(1), -torch.inf).logsumexp(dim=2)
        am_scores = torch.where(same, am_scores.unsqueeze(1), -torch.inf).logsumexp(dim=2)
    return scores.masked_fill(merged_away, -torch.inf), am_scores


def live_entries(scores: torch.Tensor, at_least: int) -> torch.Tensor | None:
    """Indices ``[B, M]`` of every live entry (score above -inf) of ``scores [B, N]``, best first, ``M`` at least
    ``at_least``; None when nothing can be dropped. Pools are mostly empty, and pairwise merging is ``N^2``."""
    alive = int((scores > -torch.inf).sum(dim=1).max())
    if alive >= scores.shape[1]:
        return None
    return scores.topk(max(alive, at_least), dim=1).indices


def ranks_ahead(scores: torch.Tensor) -> torch.Tensor:
    """``[B, N, N]``: whether entry ``i`` of ``scores [B, N]`` ranks ahead of entry ``j`` (a higher score, or the
    same and earlier), so that of equal entries exactly one is ahead of all the others."""
    index = torch.arange(scores.shape[1], device=scores.device)
    score_i, score_j = scores.unsqueeze(2), scores.unsqueeze(1)
    return (score_i > score_j) | ((score_i == score_j) & (index.view(1, -1, 1) < index.view(1, 1, -1)))


def best_and_undominated(ranking: torch.Tensor, frames: torch.Tensor, count: int, slots: int) -> torch.Tensor:
    """Indices ``[B, count]`` of entries of ``ranking [B, N]`` (-inf: none): the ``count - slots`` best ranked, then
    those of the others dominated by the fewest entries, the best ranked among equal counts; in ranking order (ties:
    the earlier entry first). An entry dominates another when it stands at the same or a later frame (``frames
    [B, N]``) and ranks strictly higher; empty entries come last. ``slots=0`` is the ``count`` best ranked."""
    by_rank = ranking.sort(dim=1, descending=True, stable=True).indices
    if slots == 0:
        return by_rank[:, :count]
    size = ranking.shape[1]
    live = ranking > -torch.inf
    dominates = ((frames.unsqueeze(1) >= frames.unsqueeze(2)) & (ranking.unsqueeze(1) > ranking.unsqueeze(2))
                 & live.unsqueeze(1))  # [B, i, j]: j dominates i
    dominated_by = dominates.sum(dim=2).masked_fill(~live, size)
    counts = dominated_by.gather(1, by_rank)  # [B, N] in rank order
    best = count - min(slots, count)
    counts[:, :best] = counts[:, :best].masked_fill(live.gather(1, by_rank)[:, :best], -1)  # the best ranked first
    _, by_count = counts.sort(dim=1, stable=True)
    chosen = by_rank.gather(1, by_count[:, :count]).sort(dim=1).values  # back in entry order, then by rank
    return chosen.gather(1, ranking.gather(1, chosen).sort(dim=1, descending=True, stable=True).indices)
