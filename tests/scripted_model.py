"""A protocol-only model whose joint output is a hand-written table, for exact edge-case tests.

Encoder frames carry their own frame index (``encoder_out[b, t, 0] == t``); the predictor state is the
number of tokens consumed so far; the joint looks up ``logits[t, u]`` in a table. So a test can script
which label (and duration) the model picks at every (frame, tokens-so-far) point.
"""

from __future__ import annotations

import torch

from transdec.protocol import HeadSpec


class CountingPredictor:
    """State and output: the number of tokens consumed so far (the start-of-sequence blank counts none)."""

    def __init__(self, blank_id: int) -> None:
        self.blank_id = blank_id

    def initial_state(self, batch_size: int) -> torch.Tensor:
        return torch.zeros(batch_size, dtype=torch.long)

    def step(self, labels, state):
        count = state + (labels != self.blank_id).long()
        return count.unsqueeze(-1).double(), count

    def select_state(self, mask, if_true, if_false):
        return torch.where(mask, if_true, if_false)

    def gather_state(self, state, indices):
        return state[indices]


class TableJoint:
    """``combine(t, u) = table[t, min(u, U - 1)]``."""

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table  # [T, U, C]

    def project_encoder(self, encoder_out):
        return encoder_out

    def project_predictor(self, predictor_out):
        return predictor_out

    def combine(self, encoder_proj, predictor_proj):
        t = encoder_proj[..., 0].long()
        u = predictor_proj[..., 0].long().clamp(max=self.table.shape[1] - 1)
        return self.table[t, u]


class ScriptedModel:
    """Any object with ``head``, ``predictor`` and ``joint`` is a DecodingModel; this one is scripted."""

    def __init__(self, head: HeadSpec, num_frames: int, max_tokens: int = 16) -> None:
        self.head = head
        self.predictor = CountingPredictor(head.predictor_blank_id)
        # By default every point prefers the blank; for TDT with duration 1.
        self.table = torch.zeros(num_frames, max_tokens, head.num_outputs, dtype=torch.float64)
        self.table[:, :, head.blank_id] = 5.0
        if head.kind == "tdt":
            self.table[:, :, head.num_labels + head.durations.index(1)] = 5.0
        self.joint = TableJoint(self.table)

    def script(self, t: int, u: int, label: int, duration: int | None = None) -> None:
        """At frame ``t`` after ``u`` tokens, make ``label`` (and TDT ``duration``) the argmax."""
        head = self.head
        self.table[t, u, : head.num_labels] = 0.0
        self.table[t, u, label] = 5.0
        if duration is not None:
            self.table[t, u, head.num_labels :] = 0.0
            self.table[t, u, head.num_labels + head.durations.index(duration)] = 5.0

    def encoder_out(self, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Frames ``[B, T, 1]`` holding their own index, and the lengths."""
        num_frames = self.table.shape[0]
        frames = torch.arange(num_frames, dtype=torch.float64).view(1, -1, 1).repeat(len(lengths), 1, 1)
        return frames, torch.tensor(lengths)
