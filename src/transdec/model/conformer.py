"""Conformer encoder: convolutional subsampling, then blocks of feed-forward, self-attention and convolution.

Positions enter through rotary embeddings inside attention (relative by construction, no length limit), and
the convolution module uses layer norm rather than batch norm: together with the masking of padded frames,
an utterance's encoding does not depend on what else is in the batch.

With ``attention_context`` set, each frame attends only to frames at most that far away. Every layer then
widens what an output frame depends on by a fixed amount, so the encoder has a finite receptive field
(:attr:`ConformerEncoder.receptive_field`): a recording encoded in windows that overlap by at least that much
gives the same frames as encoded whole (:mod:`transdec.long_audio`), and no recording is ever longer, as far
as attention can tell, than the utterances the model was trained on.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transdec.model.precision import float32_under_cpu_autocast
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
        attention_context: encoder frames each side that a frame may attend to; ``None``: all of them.
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
    attention_context: int | None = None

    def __post_init__(self) -> None:
        if self.model_dim % self.num_heads or (self.model_dim // self.num_heads) % 2:
            raise ValueError(f"model_dim {self.model_dim} must split into {self.num_heads} heads of even width")
        if self.conv_kernel % 2 == 0:
            raise ValueError(f"conv_kernel must be odd, got {self.conv_kernel}")
        if self.attention_context is not None and self.attention_context < 1:
            raise ValueError(f"attention_context must be at least 1 frame, got {self.attention_context}")


class ConformerEncoder(nn.Module):
    """``features [B, T, F]`` -> ``encoder_out [B, T', D]`` with ``T' = ceil(T / factor)`` valid frames."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        self.config = config
        self.subsampling = ConvSubsampling(config.feature_dim, config.model_dim, config.subsampling_factor,
                                           config.subsampling, config.subsampling_channels)
        self.blocks = nn.ModuleList(ConformerBlock(config) for _ in range(config.num_layers))
        self.rotary = RotaryEmbedding(config.model_dim // config.num_heads)
        #: The dtype the output is handed on in, where it differs from the weights' (None: theirs): a bfloat16
        #: encoder feeding a float32 decoder (:mod:`transdec.model.quantization`).
        self.output_dtype: torch.dtype | None = None

    @property
    def output_dim(self) -> int:
        return self.config.model_dim

    def output_frames(self, frames: int) -> int:
        """Encoder frames of ``frames`` feature frames: ``ceil(frames / subsampling_factor)``."""
        return -(-frames // self.config.subsampling_factor)

    @property
    def receptive_field(self) -> int | None:
        """Encoder frames on each side that an output frame depends on, or ``None`` (unbounded).

        Per block, attention reaches ``attention_context`` frames and then the depthwise convolution half
        its kernel; the subsampling front end (kernel 3, stride 2 per stage) reaches less than one encoder
        frame on each side, counted as one.
        """
        if self.config.attention_context is None:
            return None
        return self.config.num_layers * (self.config.attention_context + self.config.conv_kernel // 2) + 1

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Returns ``(encoder_out [B, T', D], lengths [B])``; frames past a length are zero."""
        x, lengths = self.subsampling(features, lengths)
        frames = x.shape[1]
        valid = torch.arange(frames, device=x.device) < lengths.unsqueeze(1)  # [B, T']
        # Padded keys are never attended to; a padded query row still sees the valid keys, so that no row is
        # empty (an empty row would be NaN, and NaN survives the zeroing of padded frames).
        attend = valid.view(-1, 1, 1, frames)  # [B, 1, 1 or T', T']
        if self.config.attention_context is not None:
            positions = torch.arange(frames, device=x.device)
            near = (positions.view(-1, 1) - positions.view(1, -1)).abs() <= self.config.attention_context
            attend = attend & (near | ~valid.view(-1, 1, frames, 1))
        cos, sin = self.rotary(frames, x.device, x.dtype)
        for block in self.blocks:
            x = block(x, valid, attend, cos, sin)
        x = x * valid.unsqueeze(-1).to(x.dtype)
        return (x if self.output_dtype is None else x.to(self.output_dtype)), lengths


class ConformerBlock(nn.Module):
    """Half feed-forward, self-attention, convolution, half feed-forward, final layer norm (Macaron style)."""

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        self.ff1 = FeedForward(config.model_dim, config.ff_multiplier, config.dropout)
        self.attention = SelfAttention(config.model_dim, config.num_heads, config.dropout)
        self.conv = ConvolutionModule(config.model_dim, config.conv_kernel, config.dropout)
        self.ff2 = FeedForward(config.model_dim, config.ff_multiplier, config.dropout)
        self.norm = nn.LayerNorm(config.model_dim)

    def forward(self, x: Tensor, valid: Tensor, attend: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + 0.5 * self.ff1(x)
        x = x + self.attention(x, attend, cos, sin)
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
        #: The dtype of the attention core (None: the input's); bfloat16 beside int8 linear layers
        #: (transdec.model.quantization.attention_in).
        self.attention_dtype: torch.dtype | None = None

    def forward(self, x: Tensor, attend: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """``x [B, T, D]``; ``attend [B, 1, 1 or T, T]`` is true where a query (row) may see a key."""
        batch, frames, dim = x.shape
        q, k, v = self.qkv(self.norm(x)).view(batch, frames, 3, self.num_heads, dim // self.num_heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, heads, T, head_dim]
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if self.attention_dtype is not None:
            q, k, v = (t.to(self.attention_dtype) for t in (q, k, v))
        attended = float32_under_cpu_autocast(
            partial(F.scaled_dot_product_attention, dropout_p=self.dropout if self.training else 0.0), q, k, v, attend)
        if self.attention_dtype is not None:
            attended = attended.to(x.dtype)
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
        depthwise = partial(depthwise_conv1d, conv=self.depthwise)
        x = float32_under_cpu_autocast(depthwise, x.transpose(1, 2)).transpose(1, 2)
        x = self.pointwise_out(F.silu(self.depthwise_norm(x)))
        return self.dropout(x)


def depthwise_conv1d(x: Tensor, conv: nn.Conv1d) -> Tensor:
    """``conv(x)`` for a depthwise ``conv`` on ``x [B, C, T]``, computed as a 2-D convolution of height 1: the same
    numbers, but oneDNN runs it 4-24x faster on a CPU than its 1-D depthwise path (B=1-16, 50-1000 frames)."""
    return F.conv2d(x.unsqueeze(2), conv.weight.unsqueeze(2), conv.bias, (1, conv.stride[0]), (0, conv.padding[0]),
                    (1, conv.dilation[0]), conv.groups).squeeze(2)
