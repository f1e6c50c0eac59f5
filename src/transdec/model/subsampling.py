"""Convolutional subsampling front ends that turn 10 ms feature frames into 40 ms or 80 ms encoder frames."""

from __future__ import annotations

import math
from functools import partial
from typing import Literal

import torch
from torch import Tensor, nn

from transdec.model.precision import float32_under_cpu_autocast
from transdec.model.row_groups import in_row_groups

SubsamplingKind = Literal["dw_striding", "striding"]


def strided_length(lengths: Tensor, num_stages: int) -> Tensor:
    """Valid frames after ``num_stages`` convolutions with kernel 3, stride 2 and padding 1."""
    for _ in range(num_stages):
        lengths = torch.div(lengths - 1, 2, rounding_mode="floor") + 1
    return lengths


class ConvSubsampling(nn.Module):
    """Stacked stride-2 convolutions over (time, frequency), then a linear map to the model width.

    ``dw_striding`` (FastConformer): a full 3x3 convolution, then depthwise-separable stages (depthwise 3x3 plus
    pointwise 1x1), which keeps the 8x front end cheap. ``striding``: every stage a full 3x3 convolution (the
    classic Conformer front end). Padded frames are zeroed before every stage, so each utterance's output is
    what it would be alone: batching never changes a transcript.
    """

    def __init__(self, feature_dim: int, model_dim: int, factor: int = 8, kind: SubsamplingKind = "dw_striding",
                 channels: int = 64) -> None:
        super().__init__()
        if factor not in (4, 8):
            raise ValueError(f"subsampling factor must be 4 or 8, got {factor}")
        if kind not in ("dw_striding", "striding"):
            raise ValueError(f"subsampling kind must be 'dw_striding' or 'striding', got {kind!r}")
        self.factor = factor
        self.num_stages = int(math.log2(factor))
        stages: list[nn.Module] = [nn.Sequential(nn.Conv2d(1, channels, 3, stride=2, padding=1), nn.ReLU())]
        for _ in range(self.num_stages - 1):
            if kind == "dw_striding":
                stages.append(nn.Sequential(
                    nn.Conv2d(channels, channels, 3, stride=2, padding=1, groups=channels),
                    nn.Conv2d(channels, channels, 1),
                    nn.ReLU(),
                ))
            else:
                stages.append(nn.Sequential(nn.Conv2d(channels, channels, 3, stride=2, padding=1), nn.ReLU()))
        self.stages = nn.ModuleList(stages)
        # Channels-last convolutions measured 2-3x faster on CPU here (depthwise ones most of all).
        self.set_memory_format(torch.channels_last)
        reduced_features = feature_dim
        for _ in range(self.num_stages):
            reduced_features = (reduced_features - 1) // 2 + 1
        self.output = nn.Linear(channels * reduced_features, model_dim)

    def set_memory_format(self, memory_format: torch.memory_format) -> None:
        """Lay the convolutions' weights and inputs out as ``memory_format`` (channels-last or contiguous); the
        results are the same either way, the speed is not (``bench/train_step.py --layouts``)."""
        self.memory_format = memory_format
        self.stages.to(memory_format=memory_format)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``features [B, T, F]``, ``lengths [B]`` -> ``([B, T', model_dim], lengths' [B])``, ``T' ~ T / factor``.

        Without autograd on a CPU, rows go through in groups whose first-stage output stays under
        :attr:`chunk_bytes`, with the masks and ReLUs applied in place: fresh tensors of tens of megabytes cost
        page faults on every call (:mod:`transdec.model.row_groups`). The output is the same either way.
        """
        if torch.is_grad_enabled():
            return self._subsample(features, lengths, in_place=False)
        if features.device.type != "cpu":
            return self._subsample(features, lengths, in_place=True)
        first_stage_bytes = self.stages[0][0].out_channels * math.ceil(features.shape[1] / 2) * math.ceil(
            features.shape[2] / 2) * features.element_size()
        return in_row_groups(partial(self._subsample, in_place=True), features, lengths, first_stage_bytes,
                             self.chunk_bytes)

    #: See :meth:`forward`.
    chunk_bytes = 16 * 2**20

    def _subsample(self, features: Tensor, lengths: Tensor, in_place: bool) -> tuple[Tensor, Tensor]:
        x = features.unsqueeze(1).contiguous(memory_format=self.memory_format)  # [B, 1, T, F]
        for number, stage in enumerate(self.stages):
            mask = _time_mask(lengths, x.shape[2]).view(-1, 1, x.shape[2], 1).to(x.dtype)
            # The first stage's input may share the caller's memory; later ones are this call's own.
            x = x.mul_(mask) if in_place and number > 0 else x * mask
            if in_place and not torch.is_autocast_enabled(x.device.type):
                *linear, _ = stage  # the ReLU, applied in place
                for layer in linear:
                    x = layer(x)
                x = torch.relu_(x)
            else:
                x = float32_under_cpu_autocast(stage, x)
            lengths = strided_length(lengths, 1)
        batch, channels, frames, freq = x.shape
        x = self.output(x.transpose(1, 2).reshape(batch, frames, channels * freq))
        return x, lengths


def _time_mask(lengths: Tensor, frames: int) -> Tensor:
    """``[B, frames]`` True on valid frames."""
    return torch.arange(frames, device=lengths.device) < lengths.unsqueeze(1)
