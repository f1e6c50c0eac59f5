"""Conformer encoder: convolutional subsampling, then blocks of feed-forward, self-attention and convolution.

Positions enter through rotary embeddings inside attention (relative by construction, no length limit), and
the convolution module uses layer norm rather than batch norm: together with the masking of padded frames,
an utterance's encoding does not depend on what else is in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transdec.model.subsampling import ConvSubsampling, SubsamplingKind


@dataclass
class ConformerConfig:
    """Shape of a :class:`ConformerEncoder`.

    Attributes:
        feature_dim: input features per frame (80 log-mel bins).
        model_dim: width ``D`` of every block and of the output.
        num_layers: number of Conformer blocks.
        num_heads: attention heads; ``model_dim`` must divide by it.
        ff_multiplier: feed-forward hidden width is ``ff_multiplier * model_dim``.
        conv_kernel: depthwise convolution kernel (odd).
        subsampling: ``"dw_striding"`` (FastConformer, the default) or ``"striding"``.
        subsampling_factor: 4 or 8.
        subsampling_channels: channels of the subsampling convolutions.
        dropout: dropout inside the blocks during training.
    """

    feature_dim: int = 80
    model_dim: int = 144
    num_layers: int = 6
    num_heads: int = 4
    ff_multiplier: int = 4
    conv_kernel: int = 15
    subsampling: SubsamplingKind = "dw_striding"
    subsampling_factor: int = 8
    subsampling_channels: int = 64
    dropout: float = 0.1

    def __post_init__(self) -> None:
        if self.model_dim % self.num_heads or (self.model_dim // self.num_heads) % 2:
            raise ValueError(f"model_dim {self.model_dim} must split into {self.num_heads} heads of even width")
        if self.conv_kernel % 2 == 0:
            raise ValueError(f"conv_kernel must be odd, got {self.conv_kernel}")


class ConformerEncoder(nn.Module):
    """``features [B, T, F]`` -> ``encoder_out [B, T', D]`` with ``T' = ceil(T / factor)`` valid frames."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        self.config = config
        self.subsampling = ConvSubsampling(config.feature_dim, config.model_dim, config.subsampling_factor,
                                           config.subsampling, config.subsampling_channels)
        self.blocks = nn.ModuleList(ConformerBlock(config) for _ in range(config.num_layers))
        self.rotary = RotaryEmbedding(config.model_dim // config.num_heads)

    @property
    def output_dim(self) -> int:
        return self.config.model_dim

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Returns ``(encoder_out [B, T', D], lengths [B])``; frames past a length are zero."""
        x, lengths = self.subsampling(features, lengths)
        valid = torch.arange(x.shape[1], device=x.device) < lengths.unsqueeze(1)  # [B, T']
        cos, sin = self.rotary(x.shape[1], x.device, x.dtype)
        for block in self.blocks:
            x = block(x, valid, cos, sin)
        return x * valid.unsqueeze(-1).to(x.dtype), lengths


class ConformerBlock(nn.Module):
    """Half feed-forward, self-attention, convolution, half feed-forward, final layer norm (Macaron style)."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        self.ff1 = FeedForward(config.model_dim, config.ff_multiplier, config.dropout)
        self.attention = SelfAttention(config.model_dim, config.num_heads, config.dropout)
        self.conv = ConvolutionModule(config.model_dim, config.conv_kernel, config.dropout)
        self.ff2 = FeedForward(config.model_dim, config.ff_multiplier, config.dropout)
        self.norm = nn.LayerNorm(config.model_dim)

    def forward(self, x: Tensor, valid: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + 0.5 * self.ff1(x)
        x = x + self.attention(x, valid, cos, sin)
        x = x + self.conv(x, valid)
        x = x + 0.5 * self.ff2(x)
        return self.norm(x)


class FeedForward(nn.Module):
    def __init__(self, dim: int, multiplier: int, dropout: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, multiplier * dim), nn.SiLU(), nn.Dropout(dropout),
                                 nn.Linear(multiplier * dim, dim), nn.Dropout(dropout))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class RotaryEmbedding(nn.Module):
    """Cosine and sine tables for rotary position embeddings of width ``head_dim``."""

    inverse_frequencies: Tensor

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        inverse = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self.register_buffer("inverse_frequencies", inverse, persistent=False)

    def forward(self, frames: int, device: torch.device, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """``cos, sin``, each ``[frames, head_dim / 2]``."""
        positions = torch.arange(frames, device=device, dtype=torch.float64)
        angles = positions.unsqueeze(1) * self.inverse_frequencies.to(device).unsqueeze(0)
        return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate feature pairs of ``x [B, heads, T, head_dim]`` by position-dependent angles."""
    first, second = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((first * cos - second * sin, first * sin + second * cos), dim=-1)
    return rotated.flatten(-2)


class SelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = dropout

    def forward(self, x: Tensor, valid: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        batch, frames, dim = x.shape
        q, k, v = self.qkv(self.norm(x)).view(batch, frames, 3, self.num_heads, dim // self.num_heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, heads, T, head_dim]
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        # Padded keys are never attended to; a padded query row still sees the valid keys (never an empty row).
        mask = valid.view(batch, 1, 1, frames)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                  dropout_p=self.dropout if self.training else 0.0)
        return F.dropout(self.out(attended.transpose(1, 2).reshape(batch, frames, dim)), self.dropout, self.training)


class ConvolutionModule(nn.Module):
    """Pointwise conv with GLU, depthwise conv, layer norm, SiLU, pointwise conv."""

    def __init__(self, dim: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.pointwise_in = nn.Linear(dim, 2 * dim)
        self.depthwise = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.depthwise_norm = nn.LayerNorm(dim)
        self.pointwise_out = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, valid: Tensor) -> Tensor:
        x = F.glu(self.pointwise_in(self.norm(x)), dim=-1)
        # Zero padded frames so the depthwise convolution sees exactly what an unpadded utterance would.
        x = x * valid.unsqueeze(-1).to(x.dtype)
        x = self.depthwise(x.transpose(1, 2)).transpose(1, 2)
        x = self.pointwise_out(F.silu(self.depthwise_norm(x)))
        return self.dropout(x)
