"""SpecAugment: random frequency and time masks on log-mel features, within each utterance's valid frames."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from transdec.decoding.options import option


@dataclass
class SpecAugmentConfig:
    """``freq_masks`` bands of up to ``freq_width`` bins; ``time_masks`` spans of up to ``time_width`` of the
    utterance's length each. Masked values become 0 (the mean, for per-feature normalised features)."""

    freq_masks: int = option(2, "SpecAugment frequency bands per utterance, each up to --freq-width bins")
    freq_width: int = option(27, "SpecAugment: the widest frequency band, in bins")
    time_masks: int = option(10, "SpecAugment time spans per utterance, each up to --time-width of its length")
    time_width: float = option(0.05, "SpecAugment: the longest time span, as a share of the utterance's length")


def spec_augment(features: Tensor, lengths: Tensor, config: SpecAugmentConfig, generator: torch.Generator) -> Tensor:
    """Masked copy of ``features [B, T, F]``; ``lengths [B]`` valid frames."""
    batch, frames, bins = features.shape
    if batch == 0 or frames == 0:
        return features
    device = features.device

    def spans(count: int, max_width: Tensor, extent: Tensor, size: int) -> Tensor:
        """``[B, size]`` True inside any of ``count`` random spans of width < max_width within ``extent``."""
        width = (torch.rand(batch, count, generator=generator) * max_width.unsqueeze(1)).long()
        start = (torch.rand(batch, count, generator=generator) * (extent.unsqueeze(1) - width).clamp_min(0)).long()
        position = torch.arange(size).view(1, 1, size)
        inside = (position >= start.unsqueeze(2)) & (position < (start + width).unsqueeze(2))
        return inside.any(dim=1).to(device)

    cpu_lengths = lengths.cpu().float()
    masked = torch.zeros(batch, frames, bins, dtype=torch.bool, device=device)
    if config.freq_masks:
        freq = spans(config.freq_masks, torch.full((batch,), float(config.freq_width + 1)),
                     torch.full((batch,), float(bins)), bins)
        masked |= freq.unsqueeze(1)
    if config.time_masks:
        time = spans(config.time_masks, (cpu_lengths * config.time_width).clamp_min(1.0) + 1, cpu_lengths, frames)
        masked |= time.unsqueeze(2)
    return features.masked_fill(masked, 0.0)
