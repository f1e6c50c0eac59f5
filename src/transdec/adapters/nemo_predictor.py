"""NeMo's stateless prediction network (``StatelessTransducerDecoder``) as a transdec predictor.

It differs from :class:`transdec.model.predictors.StatelessPredictor` in two ways that change the numbers: the
most recent label comes first in the output, and the widths are uneven (the most recent label gets
``H - (H // 2 // C) * (C - 1)`` of ``H``, every older one ``H // 2 // C``); NeMo can also layer-normalise the
output (no affine parameters).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class NemoStatelessPredictor(nn.Module):
    """Concatenated embeddings of the last ``context_size`` labels, most recent first.

    State: the last ``context_size`` labels ``[B, context_size]`` int64, most recent last, blank before the start.
    Parameter names follow NeMo's (``embeds.{i}.weight``, ``i = 0`` the most recent label).
    """

    def __init__(self, vocab_size: int, hidden_size: int, context_size: int, blank_id: int,
                 layer_norm: bool = False) -> None:
        """
        Args:
            vocab_size: tokens plus the blank (``V + 1``).
            hidden_size: output width ``H``.
            context_size: labels the output depends on.
            blank_id: the start-of-sequence / blank input, embedded as zeros.
            layer_norm: normalise the output (NeMo's ``normalization_mode: layer``).
        """
        super().__init__()
        if context_size < 1:
            raise ValueError(f"context_size must be at least 1, got {context_size}")
        older = hidden_size // 2 // context_size
        sizes = [hidden_size - older * (context_size - 1)] + [older] * (context_size - 1)
        self.embeds = nn.ModuleList(nn.Embedding(vocab_size, size, padding_idx=blank_id) for size in sizes)
        self.blank_id, self.context_size, self.hidden_size = blank_id, context_size, hidden_size
        self.layer_norm = layer_norm

    @property
    def output_size(self) -> int:
        return self.hidden_size

    def initial_state(self, batch_size: int) -> torch.Tensor:
        device = self.embeds[0].weight.device
        return torch.full((batch_size, self.context_size), self.blank_id, dtype=torch.long, device=device)

    def step(self, labels: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``labels [B]`` -> ``(output [B, H], context [B, context_size])``."""
        context = torch.cat([state[:, 1:], labels.unsqueeze(1)], dim=1)
        last = self.context_size - 1
        output = torch.cat([embed(context[:, last - i]) for i, embed in enumerate(self.embeds)], dim=-1)
        if self.layer_norm:
            output = F.layer_norm(output, (self.hidden_size,))
        return output, context

    def select_state(self, mask: torch.Tensor, if_true: torch.Tensor, if_false: torch.Tensor) -> torch.Tensor:
        return torch.where(mask.unsqueeze(1), if_true, if_false)

    def gather_state(self, state: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return state.index_select(0, indices)
