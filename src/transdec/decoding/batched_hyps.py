"""BatchedHyps: the hypotheses of a whole batch as tensors, updated by masks rather than Python loops."""

from __future__ import annotations

import torch

from transdec.decoding.hypothesis import Hypothesis


class BatchedHyps:
    """Tokens of ``B`` hypotheses in ``[B, L]`` tensors whose capacity ``L`` doubles when full (or, with
    ``fixed_capacity``, never changes, so that CUDA graphs can write into them; the caller then guarantees
    that no row outgrows ``L - 1``).

    Attributes:
        lengths: ``[B]`` number of tokens in each hypothesis.
        tokens, timestamps, durations: ``[B, L]`` int64; entries at or past ``lengths`` are undefined.
        token_logprobs: ``[B, L]`` float.
        scores: ``[B]`` float, the path log-probability (see :class:`~transdec.decoding.hypothesis.Hypothesis`).
    """

    def __init__(
        self,
        batch_size: int,
        capacity: int,
        device: torch.device,
        float_dtype: torch.dtype,
        fixed_capacity: bool = False,
    ) -> None:
        capacity = max(capacity, 1)
        self.fixed_capacity = fixed_capacity
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.tokens = torch.zeros(batch_size, capacity, dtype=torch.long, device=device)
        self.timestamps = torch.zeros_like(self.tokens)
        self.durations = torch.zeros_like(self.tokens)
        self.token_logprobs = torch.zeros(batch_size, capacity, dtype=float_dtype, device=device)
        self.scores = torch.zeros(batch_size, dtype=float_dtype, device=device)
        self._rows = torch.arange(batch_size, device=device)
        # A host-side bound on lengths.max(): each add_labels call grows any length by at most one, so
        # counting calls tells when to grow without reading lengths back from the device.
        self._length_bound = 0

    @property
    def batch_size(self) -> int:
        return self.tokens.shape[0]

    @property
    def capacity(self) -> int:
        return self.tokens.shape[1]

    def add_labels(
        self,
        mask: torch.Tensor,
        tokens: torch.Tensor,
        timestamps: torch.Tensor | int,
        durations: torch.Tensor | None,
        token_logprobs: torch.Tensor,
    ) -> None:
        """Append one token to each hypothesis where ``mask [B]`` is True.

        ``tokens``, ``timestamps``, ``durations`` and ``token_logprobs`` are ``[B]`` (``timestamps`` may
        be one frame for all; ``durations`` None means 0). Rows where ``mask`` is False are written past
        their length, which leaves them unchanged.
        """
        if self._length_bound >= self.capacity and not self.fixed_capacity:
            self._grow()
        index = (self._rows, self.lengths)
        self.tokens[index] = tokens
        self.timestamps[index] = timestamps
        if durations is not None:
            self.durations[index] = durations
        self.token_logprobs[index] = token_logprobs
        self.lengths += mask
        self._length_bound += 1

    def add_scores(self, mask: torch.Tensor, logprobs: torch.Tensor) -> None:
        """Add ``logprobs [B]`` to the scores where ``mask [B]`` is True."""
        self.scores += torch.where(mask, logprobs, 0.0)

    def reset(self) -> None:
        """Empty every hypothesis, in place."""
        self.lengths.zero_()
        self.scores.zero_()
        self._length_bound = 0

    def trimmed_copy(self) -> BatchedHyps:
        """A copy with the capacity cut to the longest hypothesis (one host sync), sharing no storage."""
        longest = int(self.lengths.max()) if self.batch_size else 0
        copy = BatchedHyps(self.batch_size, longest, self.tokens.device, self.scores.dtype)
        for name in ("tokens", "timestamps", "durations", "token_logprobs"):
            getattr(copy, name)[:, :longest] = getattr(self, name)[:, :longest]
        copy.lengths.copy_(self.lengths)
        copy.scores.copy_(self.scores)
        copy._length_bound = longest
        return copy

    def recount(self) -> None:
        """Bound the lengths by what the hypotheses hold (one host sync), instead of by the calls made so far:
        for hypotheses that live through many decode calls (streams)."""
        self._length_bound = int(self.lengths.max()) if self.batch_size else 0

    def _grow(self) -> None:
        def doubled(buffer: torch.Tensor) -> torch.Tensor:
            return torch.cat([buffer, torch.zeros_like(buffer)], dim=1)

        self.tokens = doubled(self.tokens)
        self.timestamps = doubled(self.timestamps)
        self.durations = doubled(self.durations)
        self.token_logprobs = doubled(self.token_logprobs)

    def to_hypotheses(self) -> list[Hypothesis]:
        """One :class:`Hypothesis` per row, as Python lists (one device-to-host copy per field)."""
        lengths = self.lengths.tolist()
        tokens, timestamps = self.tokens.tolist(), self.timestamps.tolist()
        durations, logprobs = self.durations.tolist(), self.token_logprobs.tolist()
        return [
            Hypothesis(tokens[b][:n], timestamps[b][:n], durations[b][:n], logprobs[b][:n], score)
            for b, (n, score) in enumerate(zip(lengths, self.scores.tolist()))
        ]

    @classmethod
    def from_hypotheses(
        cls, hypotheses: list[Hypothesis], device: torch.device, float_dtype: torch.dtype
    ) -> BatchedHyps:
        """The batched form of per-utterance hypotheses."""
        longest = max((len(h.tokens) for h in hypotheses), default=0)
        batch = cls(len(hypotheses), longest, device, float_dtype)
        for b, hyp in enumerate(hypotheses):
            n = len(hyp.tokens)
            batch.tokens[b, :n] = torch.tensor(hyp.tokens, dtype=torch.long)
            batch.timestamps[b, :n] = torch.tensor(hyp.timestamps, dtype=torch.long)
            batch.durations[b, :n] = torch.tensor(hyp.durations, dtype=torch.long)
            batch.token_logprobs[b, :n] = torch.tensor(hyp.token_logprobs, dtype=float_dtype)
            batch.lengths[b] = n
            batch.scores[b] = hyp.score
        batch._length_bound = longest
        return batch
