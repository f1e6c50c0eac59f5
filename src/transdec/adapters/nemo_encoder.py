"""NeMo's Conformer encoder (``ConformerEncoder``: FastConformer and classic Conformer), reimplemented.

Parameter names follow NeMo's state dict under ``encoder.``, so a checkpoint's weights load without renaming.
What it computes, in NeMo's order:

* subsampling (``pre_encode``): ``dw_striding`` (FastConformer: a 3x3 stride-2 convolution, then depthwise 3x3 +
  pointwise 1x1 stages) or ``striding`` (every stage a full 3x3 stride-2 convolution), ReLU after each stage,
  frames past each length zeroed before every layer, then a linear map of (channels x frequency) to ``d_model``;
  with ``causal_downsampling`` the stride-2 convolutions are NeMo's causal ones (two zeros before and one after,
  in time and in frequency, instead of one each side), so that no frame depends on later features;
* x-scaling by ``sqrt(d_model)`` when configured, and Transformer-XL sinusoidal relative positions;
* per block: half-step feed-forward, relative-position multi-head attention with u/v biases, the convolution
  module (pointwise, GLU, padded frames zeroed, depthwise, batch norm or layer norm, Swish, pointwise),
  half-step feed-forward, layer norm.

Attention is full (``rel_pos``), limited to ``[left, right]`` frames (``att_context_size``, regular style), limited
to chunks of ``right + 1`` frames that see ``left / (right + 1)`` chunks back (``chunked_limited``: NeMo's
cache-aware streaming models, whose frames are then those of their chunk-by-chunk streaming, see
:mod:`.nemo_streaming`), or NeMo's sliding-window local attention (``rel_pos_local_attn``). NeMo computes the latter with overlapping
chunks; here it is attention over each block of queries and the keys their windows reach, with NeMo's positions:
the same numbers up to float rounding, in memory linear in the length. Long inputs are subsampled in chunks for
the same reason (:class:`NemoSubsampling`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transdec.model.conformer import depthwise_conv1d
from transdec.model.row_groups import in_row_groups

#: NeMo's "infinity": masked attention scores are set to minus this, and it is the base of the sinusoid periods.
_INF = 10000.0
#: From this many frames on, full attention runs one recording of a batch at a time (FullAttention.attend).
_PER_RECORDING_FRAMES = 250


@dataclass
class NemoEncoderConfig:
    """The supported subset of NeMo's ``ConformerEncoder`` settings (see :meth:`from_nemo`)."""

    feat_in: int
    n_layers: int
    d_model: int
    n_heads: int = 4
    ff_expansion_factor: int = 4
    subsampling: str = "striding"
    subsampling_factor: int = 4
    subsampling_conv_channels: int = -1
    self_attention_model: str = "rel_pos"
    #: The look-ahead in use, one of :attr:`att_context_sizes`.
    att_context_size: tuple[int, int] = (-1, -1)
    att_context_style: str = "regular"
    #: Every ``[left, right]`` the model was trained with (NeMo's list, the first its default); empty: only
    #: :attr:`att_context_size`.
    att_context_sizes: tuple[tuple[int, int], ...] = ()
    causal_downsampling: bool = False
    xscaling: bool = True
    untie_biases: bool = True
    conv_kernel_size: int = 31
    conv_norm_type: str = "batch_norm"
    conv_context_size: tuple[int, int] | None = None
    use_bias: bool = True
    feat_out: int = -1

    def __post_init__(self) -> None:
        if self.subsampling_conv_channels == -1:
            self.subsampling_conv_channels = self.d_model
        if self.conv_context_size is None:
            half = (self.conv_kernel_size - 1) // 2
            self.conv_context_size = (half, half)
        if not self.att_context_sizes:
            self.att_context_sizes = (tuple(self.att_context_size),)

    def choose_att_context_size(self, context: Sequence[int]) -> None:
        """Use look-ahead ``context`` (``[left, right]``), one of :attr:`att_context_sizes`, as NeMo's
        ``set_default_att_context_size`` does; any other raises ``ValueError`` naming those there are."""
        chosen = tuple(int(c) for c in context)
        if chosen not in self.att_context_sizes:
            known = ", ".join(str(list(c)) for c in self.att_context_sizes)
            raise ValueError(f"att_context_size={list(chosen)} is not one of the model's look-aheads ({known})")
        self.att_context_size = chosen  # type: ignore[assignment]

    @classmethod
    def from_nemo(cls, config: dict[str, Any], att_context_size: Sequence[int] | None = None) -> NemoEncoderConfig:
        """From the ``encoder`` section of a NeMo config; unsupported settings raise :class:`UnsupportedConfig`
        naming every such key. ``att_context_size`` chooses among the config's look-aheads (default: the first,
        as NeMo infers)."""
        problems: list[str] = []

        def unsupported(key: str, allowed: str) -> None:
            problems.append(f"encoder.{key}={config.get(key)!r} is not supported ({allowed})")

        target = str(config.get("_target_", ""))
        if not target.endswith(("ConformerEncoder", "ConformerEncoderAdapter")):
            problems.append(f"encoder._target_={target!r} is not supported (only NeMo's ConformerEncoder)")
        subsampling = config.get("subsampling", "striding")
        if subsampling not in ("dw_striding", "striding"):
            unsupported("subsampling", "dw_striding or striding")
        factor = int(config.get("subsampling_factor", 4))
        if factor < 2 or factor & (factor - 1):
            unsupported("subsampling_factor", "a power of two")
        attention = config.get("self_attention_model", "rel_pos")
        if attention not in ("rel_pos", "rel_pos_local_attn"):
            unsupported("self_attention_model", "rel_pos or rel_pos_local_attn")
        style = config.get("att_context_style", "regular")
        contexts = config.get("att_context_size") or [-1, -1]
        if not isinstance(contexts[0], (list, tuple)):
            contexts = [contexts]  # one look-ahead; a list of them is a multi-look-ahead model
        if any(len(c) != 2 for c in contexts):
            unsupported("att_context_size", "[left, right] or a list of them")
            contexts = [[-1, -1]]
        contexts = [(int(c[0]), int(c[1])) for c in contexts]
        if style not in ("regular", "chunked_limited"):
            unsupported("att_context_style", "regular or chunked_limited")
        elif style == "chunked_limited":
            if attention != "rel_pos":
                unsupported("self_attention_model", "rel_pos with att_context_style chunked_limited")
            if any(left > 0 and right >= 0 and left % (right + 1) for left, right in contexts):
                unsupported("att_context_size", "chunked_limited needs each left context a multiple of right + 1")
        if config.get("att_chunk_context_size"):
            unsupported("att_chunk_context_size", "null")
        if att_context_size is not None:
            chosen = (int(att_context_size[0]), int(att_context_size[1]))
            if len(att_context_size) != 2 or chosen not in contexts:
                known = ", ".join(str(list(c)) for c in contexts)
                raise ValueError(f"att_context_size={list(att_context_size)} is not one of the model's look-aheads "
                                 f"({known})")
        else:
            chosen = contexts[0]  # several look-aheads (multi-look-ahead training): NeMo infers with the first
        if attention == "rel_pos_local_attn" and max(chosen) <= 0:
            unsupported("att_context_size", "local attention needs a positive context")
        if int(config.get("global_tokens", 0) or 0):
            unsupported("global_tokens", "0")
        norm = config.get("conv_norm_type", "batch_norm")
        if norm not in ("batch_norm", "layer_norm"):
            unsupported("conv_norm_type", "batch_norm or layer_norm")
        conv_context = config.get("conv_context_size")
        kernel = int(config.get("conv_kernel_size", 31))
        if conv_context == "causal":
            conv_context = (kernel - 1, 0)
        elif conv_context is not None:
            conv_context = tuple(int(c) for c in conv_context)
        if config.get("reduction") and int(config.get("reduction_factor", 1) or 1) > 1:
            unsupported("reduction", "none")
        if problems:
            raise UnsupportedConfig(problems)
        return cls(feat_in=int(config["feat_in"]), n_layers=int(config["n_layers"]), d_model=int(config["d_model"]),
                   n_heads=int(config.get("n_heads", 4)), ff_expansion_factor=int(config.get("ff_expansion_factor", 4)),
                   subsampling=subsampling, subsampling_factor=factor,
                   subsampling_conv_channels=int(config.get("subsampling_conv_channels", -1)),
                   self_attention_model=attention, att_context_size=chosen, att_context_style=style,
                   att_context_sizes=tuple(contexts), causal_downsampling=bool(config.get("causal_downsampling")),
                   xscaling=bool(config.get("xscaling", True)), untie_biases=bool(config.get("untie_biases", True)),
                   conv_kernel_size=kernel, conv_norm_type=norm, conv_context_size=conv_context,
                   use_bias=bool(config.get("use_bias", True)), feat_out=int(config.get("feat_out", -1)))


class UnsupportedConfig(ValueError):
    """Settings of a config that transdec does not support: ``problems`` names each, the message all of them."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


class NemoSubsampling(nn.Module):
    """``pre_encode``: ``[B, T, F]`` features -> ``[B, T', d_model]``, with ``T'`` by NeMo's length formula.

    ``conv`` holds NeMo's layer sequence (indices as in its state dict: ReLUs have no weights but count). Each
    stride-2 convolution pads :attr:`padding` zeros (``(before, after)``, the same in time and frequency): one
    each side, or under causal subsampling NeMo's two before and one after, added by :meth:`causal_pad`.
    """

    def __init__(self, config: NemoEncoderConfig) -> None:
        super().__init__()
        channels, stages = config.subsampling_conv_channels, int(math.log2(config.subsampling_factor))
        self.causal = config.causal_downsampling
        self.padding = (2, 1) if self.causal else (1, 1)
        own = 0 if self.causal else 1  # the convolution's own padding: symmetric only
        layers: list[nn.Module] = [nn.Conv2d(1, channels, 3, stride=2, padding=own), nn.ReLU()]
        for _ in range(stages - 1):
            if config.subsampling == "dw_striding":
                layers += [nn.Conv2d(channels, channels, 3, stride=2, padding=own, groups=channels),
                           nn.Conv2d(channels, channels, 1), nn.ReLU()]
            else:
                layers += [nn.Conv2d(channels, channels, 3, stride=2, padding=own), nn.ReLU()]
        self.conv = nn.Sequential(*layers)
        frequencies = config.feat_in
        for _ in range(stages):
            frequencies = self.stage_length(frequencies)
        self.out = nn.Linear(channels * frequencies, config.d_model)
        self.factor = config.subsampling_factor
        #: Feature frames subsampled at once (None: all); see :meth:`forward`.
        self.chunk_frames: int | None = 4096
        #: See :meth:`forward`.
        self.chunk_bytes = 16 * 2**20
        #: See :meth:`forward`: values of the first stage's output per group of rows on a GPU.
        self.gpu_chunk_values = 2**30

    def causal_pad(self, x: Tensor) -> Tensor:
        """``x [B, C, T, F]`` padded for a causal stride-2 convolution (as is otherwise)."""
        return F.pad(x, (*self.padding, *self.padding)) if self.causal else x

    def stage_length(self, length: Any) -> Any:
        """Frames (or frequencies) out of one stride-2 stage of ``length`` in: an int, or a long tensor."""
        return (length + sum(self.padding) - 3) // 2 + 1

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Longer inputs than :attr:`chunk_frames` are subsampled a chunk at a time (with ``factor`` frames of
        context each side, ``2 x factor`` before under causal subsampling, which covers the receptive field of the
        stride-2 stages, and chunks starting at
        multiples of ``factor`` so that their strided grids are the global one): the same frames, with the
        first convolution's output (``channels x T/2 x F/2`` values) bounded by the chunk size.

        Without autograd on a CPU, rows also go through in groups whose first-stage output stays under
        :attr:`chunk_bytes`, with masks and ReLUs applied in place, as :class:`~transdec.model.subsampling.
        ConvSubsampling` does (fresh tensors of tens of megabytes cost page faults on every call). On a GPU, groups
        keep it under :attr:`gpu_chunk_values` values: convolution kernels index with 32 bits, and 128 rows of 20 s
        (256 channels x 1000 x 64) come within 3% of 2**31."""
        lengths = lengths.long()
        frames = features.shape[1]
        first_stage_values = self.conv[0].out_channels * math.ceil(min(frames, self.chunk_frames or frames) / 2) * (
            math.ceil(features.shape[2] / 2))
        if features.device.type == "cpu" and not torch.is_grad_enabled():
            return in_row_groups(self._subsample, features, lengths, first_stage_values * features.element_size(),
                                 self.chunk_bytes)
        if features.device.type == "cuda":
            return in_row_groups(self._subsample, features, lengths, first_stage_values, self.gpu_chunk_values)
        return self._subsample(features, lengths)

    def _subsample(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        frames = features.shape[1]
        if self.chunk_frames is None or frames <= self.chunk_frames:
            return self._convolve(features, lengths)
        factor = self.factor
        before = 2 * factor if self.causal else factor  # causal: a frame reaches 2 x (factor - 1) features back
        chunk = max(factor, self.chunk_frames // factor * factor)
        pieces = []
        for start in range(0, frames, chunk):
            first, last = max(0, start - before), min(frames, start + chunk + factor)
            # Lengths relative to the chunk's first frame: the masks are the global ones, cut to the chunk.
            encoded, _ = self._convolve(features[:, first:last], lengths - first)
            skip = (start - first) // factor
            pieces.append(encoded[:, skip : skip + -(-(min(start + chunk, frames) - start) // factor)])
        return torch.cat(pieces, dim=1), self._output_lengths(lengths)

    def _convolve(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        x = features.unsqueeze(1)  # [B, 1, T, F]
        in_place = not torch.is_grad_enabled()
        for number, layer in enumerate(self.conv):
            # NeMo zeroes the frames past each length before every layer, so padding never leaks into the valid
            # frames through the 3x3 kernels: an utterance's output does not depend on its batch.
            mask = _frame_mask(lengths, x.shape[2]).to(x.dtype)[:, None, :, None]
            # The first layer's input is the caller's; later ones are this call's own.
            x = x.mul_(mask) if in_place and number > 0 else x * mask
            strided = isinstance(layer, nn.Conv2d) and layer.stride[0] != 1
            if strided:
                x = self.causal_pad(x)
            x = torch.relu_(x) if in_place and isinstance(layer, nn.ReLU) else layer(x)
            if strided:
                lengths = self.stage_length(lengths)
        x = x * _frame_mask(lengths, x.shape[2]).to(x.dtype)[:, None, :, None]
        batch, channels, frames, freqs = x.shape
        return self.out(x.transpose(1, 2).reshape(batch, frames, channels * freqs)), lengths

    def _output_lengths(self, lengths: Tensor) -> Tensor:
        for _ in range(int(math.log2(self.factor))):
            lengths = self.stage_length(lengths)
        return lengths


def _frame_mask(lengths: Tensor, frames: int) -> Tensor:
    """``[B, frames]``: True at valid frames."""
    return torch.arange(frames, device=lengths.device)[None, :] < lengths[:, None]


def relative_positions(length: int, d_model: int, dtype: torch.dtype, device: torch.device,
                       first: int | None = None, last: int | None = None) -> Tensor:
    """Sinusoidal embeddings ``[1, P, d_model]`` of relative positions ``first, first - 1, ..., last`` (default
    ``length - 1`` down to ``-(length - 1)``), computed as NeMo computes them (float32, then cast)."""
    first = length - 1 if first is None else first
    last = -(length - 1) if last is None else last
    positions = torch.arange(first, last - 1, -1, dtype=torch.float32, device=device).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32, device=device) * -(math.log(_INF) / d_model))
    table = torch.zeros(positions.shape[0], d_model, device=device)
    table[:, 0::2] = torch.sin(positions * div)
    table[:, 1::2] = torch.cos(positions * div)
    return table.unsqueeze(0).to(dtype)


class RelPositionAttention(nn.Module):
    """Multi-head self-attention with Transformer-XL relative positions and the u/v biases (``self_attn``).

    Scores ``(q + u)·k + (q + v)·P(i - j)``, divided by ``sqrt(d_k)``; masked scores are set to ``-10000`` and
    their probabilities to zero afterwards, as in NeMo. Which keys a query sees, and the positional term, come
    from ``pattern`` (:class:`FullAttention` or :class:`LocalAttention`), shared by the layers.
    """

    def __init__(self, d_model: int, n_heads: int, use_bias: bool = True) -> None:
        super().__init__()
        self.h, self.d_k = n_heads, d_model // n_heads
        self.linear_q = nn.Linear(d_model, d_model, bias=use_bias)
        self.linear_k = nn.Linear(d_model, d_model, bias=use_bias)
        self.linear_v = nn.Linear(d_model, d_model, bias=use_bias)
        self.linear_out = nn.Linear(d_model, d_model, bias=use_bias)
        self.linear_pos = nn.Linear(d_model, d_model, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(n_heads, self.d_k))
        self.pos_bias_v = nn.Parameter(torch.zeros(n_heads, self.d_k))
        #: The dtype of the scores, softmax and weighted values (None: the input's); bfloat16 beside int8 linear
        #: layers (transdec.model.quantization.attention_in).
        self.attention_dtype: torch.dtype | None = None

    def forward(self, x: Tensor, pattern: FullAttention | LocalAttention) -> Tensor:
        """``x [B, T, D]`` -> ``[B, T, D]``."""
        batch, frames, _ = x.shape
        q = self.linear_q(x).view(batch, frames, self.h, self.d_k)
        k = self.linear_k(x).view(batch, frames, self.h, self.d_k).transpose(1, 2)
        v = self.linear_v(x).view(batch, frames, self.h, self.d_k).transpose(1, 2)
        q_u = (q + self.pos_bias_u).transpose(1, 2)  # [B, H, T, d_k]
        q_v = (q + self.pos_bias_v).transpose(1, 2)
        p = self.linear_pos(pattern.embeddings).view(1, -1, self.h, self.d_k).transpose(1, 2)  # [1, H, P, d_k]
        out = pattern.attend(*self.attention_inputs(q_u, q_v, k, v, p)).to(x.dtype)  # [B, H, T, d_k]
        return self.linear_out(out.transpose(1, 2).reshape(batch, frames, self.h * self.d_k))

    def attention_inputs(self, *tensors: Tensor) -> tuple[Tensor, ...]:
        """The attention core's inputs in :attr:`attention_dtype` (as they are where it is None)."""
        if self.attention_dtype is None:
            return tensors
        return tuple(t.to(self.attention_dtype) for t in tensors)


def _masked_softmax_average(scores: Tensor, allowed: Tensor | None, values: Tensor, scale: float) -> Tensor:
    """NeMo's masked attention: ``softmax(scores / scale)`` with disallowed scores at ``-10000`` and their
    probabilities zeroed afterwards, applied to ``values``. ``allowed`` broadcasts to ``scores``; None: all allowed.
    ``scores`` is overwritten (a long recording's ``[B, H, T, T]`` is not copied; the values are NeMo's)."""
    scores = scores.div_(scale)
    if allowed is None:
        return torch.matmul(torch.softmax(scores, dim=-1), values)
    masked = ~allowed
    # Out of place after the softmax, whose output its gradient needs.
    attn = torch.softmax(scores.masked_fill_(masked, -_INF), dim=-1).masked_fill(masked, 0.0)
    return torch.matmul(attn, values)


class FullAttention:
    """Every valid frame sees every valid frame, optionally within ``[left, right]`` frames (regular style) or
    NeMo's ``chunked_limited`` chunks (:func:`context_mask`).

    Positional term: NeMo's embeddings of positions ``T - 1 .. -(T - 1)`` and its "relative shift".
    """

    def __init__(self, valid: Tensor, d_model: int, dtype: torch.dtype, context: tuple[int, int] = (-1, -1),
                 style: str = "regular") -> None:
        frames = valid.shape[1]
        self.embeddings = relative_positions(frames, d_model, dtype, valid.device)
        allowed = valid[:, None, :] & valid[:, :, None]  # [B, T, T]
        positions = torch.arange(frames, device=valid.device)
        allowed = (allowed & context_mask(positions, positions, context, style)).unsqueeze(1)  # [B, 1, T, T]
        # Nothing masked (no padding, no context limit): the masking passes over [B, H, T, T] are skipped; an
        # export's trace keeps them, since the traced graph serves every batch.
        self.allowed = allowed if torch.jit.is_tracing() or not bool(allowed.all()) else None

    def attend(self, q_u: Tensor, q_v: Tensor, k: Tensor, v: Tensor, p: Tensor) -> Tensor:
        batch, _, frames, _ = q_u.shape
        if batch == 1 or frames < _PER_RECORDING_FRAMES or torch.jit.is_tracing():
            return self._attend(q_u, q_v, k, v, p, self.allowed)
        # A long recording's [H, T, T] scores outgrow the CPU's caches; one recording at a time keeps the working
        # set a batch's share. The same operations per recording: the values differ from the batch's by rounding.
        return torch.cat([self._attend(q_u[b:b + 1], q_v[b:b + 1], k[b:b + 1], v[b:b + 1], p,
                                       None if self.allowed is None else self.allowed[b:b + 1])
                          for b in range(batch)])

    @staticmethod
    def _attend(q_u: Tensor, q_v: Tensor, k: Tensor, v: Tensor, p: Tensor, allowed: Tensor | None) -> Tensor:
        frames = q_u.shape[2]
        content = torch.matmul(q_u, k.transpose(-2, -1))
        position = _rel_shift(torch.matmul(q_v, p.transpose(-2, -1)), frames)
        return _masked_softmax_average(content.add_(position), allowed, v, math.sqrt(q_u.shape[-1]))


def context_mask(queries: Tensor, keys: Tensor, context: tuple[int, int], style: str) -> Tensor:
    """``[Q, K]``: whether the query at each position of ``queries`` may see the key at each of ``keys``.

    Regular style: keys at most ``left`` frames before and ``right`` after (``-1``: unlimited). ``chunked_limited``
    (with ``right >= 0``): positions fall in chunks of ``right + 1`` counted from position 0, and a query sees the
    keys of its own chunk and of the ``left // (right + 1)`` chunks before it (all before when ``left < 0``), as
    NeMo masks it; with ``right < 0`` as the regular style."""
    left, right = context
    if style == "chunked_limited" and right >= 0:
        size = right + 1
        behind = torch.div(queries, size, rounding_mode="floor")[:, None] - torch.div(keys, size,
                                                                                      rounding_mode="floor")[None, :]
        allowed = behind >= 0
        return allowed & (behind <= left // size) if left >= 0 else allowed
    offsets = keys[None, :] - queries[:, None]
    allowed = torch.ones_like(offsets, dtype=torch.bool)
    if left >= 0:
        allowed = allowed & (offsets >= -left)
    if right >= 0:
        allowed = allowed & (offsets <= right)
    return allowed


class LocalAttention:
    """NeMo's sliding-window attention (``rel_pos_local_attn``): a frame sees the valid frames at most ``left``
    before and ``right`` after it.

    Computed for blocks of ``block`` queries against the keys their windows reach, so memory grows linearly with
    the length. Positional term: NeMo's embeddings of ``left .. -right``, placed on the window's diagonals as NeMo
    places them (:func:`local_position_columns`; for an asymmetric window that is not the matching relative
    position, and it is reproduced as is).
    """

    def __init__(self, valid: Tensor, d_model: int, dtype: torch.dtype, window: tuple[int, int],
                 block: int = 256) -> None:
        self.valid, self.window, self.block = valid, window, block
        left, right = window
        self.embeddings = relative_positions(0, d_model, dtype, valid.device, first=left, last=-right)
        # Embedding index per key offset -w .. w (w = max(left, right)); left + right + 1 selects a zero column.
        w = max(left, right)
        index = torch.full((2 * w + 1,), left + right + 1, dtype=torch.long)
        for column, position in local_position_columns(left, right).items():
            index[column] = position
        self.position_index = index.to(valid.device)

    def attend(self, q_u: Tensor, q_v: Tensor, k: Tensor, v: Tensor, p: Tensor) -> Tensor:
        left, right = self.window
        w = max(left, right)
        frames = q_u.shape[2]
        scale = math.sqrt(q_u.shape[-1])
        pieces = []
        for start in range(0, frames, self.block):
            end = min(frames, start + self.block)
            first, last = max(0, start - w), min(frames, end + w)
            content = torch.matmul(q_u[:, :, start:end], k[:, :, first:last].transpose(-2, -1))  # [B, H, Q, K]
            by_position = torch.matmul(q_v[:, :, start:end], p.transpose(-2, -1))  # [B, H, Q, P]
            by_position = F.pad(by_position, (0, 1))  # the zero column of offsets without an embedding
            queries = torch.arange(start, end, device=q_u.device)
            keys = torch.arange(first, last, device=q_u.device)
            offsets = keys[None, :] - queries[:, None]  # [Q, K]
            inside = (offsets >= -left) & (offsets <= right)
            index = self.position_index[(offsets + w).clamp(0, 2 * w)]  # [Q, K]
            position = torch.gather(by_position, 3, index.expand(*by_position.shape[:2], -1, -1))
            allowed = (inside[None] & self.valid[:, start:end, None] & self.valid[:, None, first:last]).unsqueeze(1)
            pieces.append(_masked_softmax_average(content.add_(position), allowed, v[:, :, first:last], scale))
        return torch.cat(pieces, dim=2)


def local_position_columns(left: int, right: int) -> dict[int, int]:
    """For NeMo's local attention: window column ``c`` (of ``2w + 1``, key offset ``c - w``) -> index of the
    positional embedding NeMo adds there. Columns ``c < left`` get embedding ``c``; the last ``right + 1`` columns
    get embeddings ``left .. left + right``; others none (they are masked unless the window is asymmetric)."""
    w = max(left, right)
    columns = {c: c for c in range(left)}
    for i, c in enumerate(range(2 * w - right, 2 * w + 1)):
        columns[c] = left + i
    return columns


def _rel_shift(x: Tensor, keys: int) -> Tensor:
    """Transformer-XL's shift as NeMo computes it, of ``x [B, H, Q, P]`` (query ``i``'s scores for positions
    ``P - Q .. -(Q - 1)`` relative to the last key, highest first) to ``[B, H, Q, keys]``: ``[..., i, j] = x[..., i,
    Q - 1 - i + j]``, the position of key ``j`` from query ``i``. NeMo pads, reshapes and slices; the entries it
    keeps are these, read here as a strided view of ``x``, so nothing is copied."""
    batch, heads, queries, positions = x.shape
    if torch.jit.is_tracing():  # an ONNX export: as_strided does not export, NeMo's padding and reshapes do
        x = F.pad(x, (1, 0)).view(batch, heads, -1, queries)
        return x[:, :, 1:].view(batch, heads, queries, positions)[..., :keys]
    if keys > positions - queries + 1:
        raise ValueError(f"relative shift of {positions} positions for {queries} queries gives at most "
                         f"{positions - queries + 1} keys, not {keys}")
    x = x.contiguous()
    stride_b, stride_h, _, _ = x.stride()
    return x.as_strided((batch, heads, queries, keys), (stride_b, stride_h, positions - 1, 1),
                        x.storage_offset() + queries - 1)


class FeedForward(nn.Module):
    """``linear2(swish(linear1(x)))``."""

    def __init__(self, d_model: int, d_ff: int, use_bias: bool = True) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=use_bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=use_bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(F.silu(self.linear1(x)))


class ConvolutionModule(nn.Module):
    """Pointwise conv to ``2D``, GLU, padded frames zeroed, depthwise conv, batch or layer norm, Swish, pointwise."""

    def __init__(self, config: NemoEncoderConfig) -> None:
        super().__init__()
        d, bias = config.d_model, config.use_bias
        self.padding = config.conv_context_size
        self.norm_type = config.conv_norm_type
        self.pointwise_conv1 = nn.Conv1d(d, 2 * d, 1, bias=bias)
        self.depthwise_conv = nn.Conv1d(d, d, config.conv_kernel_size, groups=d, bias=bias)
        self.batch_norm = nn.BatchNorm1d(d) if self.norm_type == "batch_norm" else nn.LayerNorm(d)
        self.pointwise_conv2 = nn.Conv1d(d, d, 1, bias=bias)

    def forward(self, x: Tensor, pad_mask: Tensor) -> Tensor:
        """``x [B, T, D]``, ``pad_mask [B, T]`` (True: padding)."""
        x = F.glu(self.pointwise_conv1(x.transpose(1, 2)), dim=1)
        x = x.masked_fill(pad_mask.unsqueeze(1), 0.0)
        x = depthwise_conv1d(F.pad(x, self.padding), self.depthwise_conv)
        if self.norm_type == "layer_norm":
            x = self.batch_norm(x.transpose(1, 2)).transpose(1, 2)
        else:
            x = self.batch_norm(x)
        return self.pointwise_conv2(F.silu(x)).transpose(1, 2)


class ConformerLayer(nn.Module):
    """One block, macaron style: ``x + FF/2``, ``+ attention``, ``+ conv``, ``+ FF/2``, layer norm."""

    def __init__(self, config: NemoEncoderConfig) -> None:
        super().__init__()
        d, d_ff = config.d_model, config.d_model * config.ff_expansion_factor
        self.norm_feed_forward1 = nn.LayerNorm(d)
        self.feed_forward1 = FeedForward(d, d_ff, config.use_bias)
        self.norm_self_att = nn.LayerNorm(d)
        self.self_attn = RelPositionAttention(d, config.n_heads, config.use_bias)
        self.norm_conv = nn.LayerNorm(d)
        self.conv = ConvolutionModule(config)
        self.norm_feed_forward2 = nn.LayerNorm(d)
        self.feed_forward2 = FeedForward(d, d_ff, config.use_bias)
        self.norm_out = nn.LayerNorm(d)

    def forward(self, x: Tensor, pattern: FullAttention | LocalAttention, pad_mask: Tensor) -> Tensor:
        x = x + 0.5 * self.feed_forward1(self.norm_feed_forward1(x))
        x = x + self.self_attn(self.norm_self_att(x), pattern)
        x = x + self.conv(self.norm_conv(x), pad_mask)
        x = x + 0.5 * self.feed_forward2(self.norm_feed_forward2(x))
        return self.norm_out(x)


class NemoConformerEncoder(nn.Module):
    """``features [B, T, F]``, ``lengths [B]`` -> ``encoder_out [B, T', D]``, ``lengths [B]``.

    Frames past a length are not zeroed (decoders never read them), as in NeMo.
    """

    def __init__(self, config: NemoEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.pre_encode = NemoSubsampling(config)
        self.layers = nn.ModuleList(ConformerLayer(config) for _ in range(config.n_layers))
        self.out_proj = (nn.Linear(config.d_model, config.feat_out)
                         if config.feat_out > 0 and config.feat_out != config.d_model else None)
        #: Local attention: queries per block (memory per layer ~ B x H x block x (block + 2 x window)).
        self.local_attention_block = 256
        #: The dtype the output is handed on in, where it differs from the weights' (None: theirs): a bfloat16
        #: encoder feeding a float32 decoder (:mod:`transdec.model.quantization`).
        self.output_dtype: torch.dtype | None = None

    @property
    def output_dim(self) -> int:
        return self.out_proj.out_features if self.out_proj is not None else self.config.d_model

    @property
    def subsampling_factor(self) -> int:
        return self.config.subsampling_factor

    @property
    def receptive_field(self) -> int | None:
        """Encoder frames on each side that an output frame depends on, or ``None`` (full attention: unbounded).

        Per layer, attention reaches ``max(att_context_size)`` frames and the depthwise convolution its wider
        side; the front end and subsampling (a 512-sample FFT window, three stride-2 stages of kernel 3) reach
        under two encoder frames on each side, counted as two. :mod:`transdec.long_audio` encodes long
        recordings in windows with this much context."""
        left, right = self.config.att_context_size
        if left < 0 or right < 0:
            return None
        if self.config.att_context_style == "chunked_limited" and self.config.self_attention_model == "rel_pos":
            left += right  # the last frame of a chunk sees left + right frames back, the first right ahead
        return self.config.n_layers * (max(left, right) + max(self.config.conv_context_size)) + 2

    @property
    def attention_chunk(self) -> int:
        """Frames per attention chunk under ``chunked_limited`` attention (``right + 1``; a recording encoded in
        windows must cut them on whole chunks to give the same frames), else 1."""
        left, right = self.config.att_context_size
        chunked = self.config.att_context_style == "chunked_limited" and self.config.self_attention_model == "rel_pos"
        return right + 1 if chunked and right >= 0 else 1

    def output_lengths(self, lengths: Tensor) -> Tensor:
        """Encoder frames of ``lengths`` feature frames."""
        return self.pre_encode._output_lengths(lengths)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        x, lengths = self.pre_encode(features, lengths)
        if self.config.xscaling:
            x = x * math.sqrt(self.config.d_model)
        valid = _frame_mask(lengths, x.shape[1])  # [B, T']
        if self.config.self_attention_model == "rel_pos_local_attn":
            pattern: FullAttention | LocalAttention = LocalAttention(
                valid, self.config.d_model, x.dtype, self.config.att_context_size, self.local_attention_block)
        else:
            pattern = FullAttention(valid, self.config.d_model, x.dtype, self.config.att_context_size,
                                    self.config.att_context_style)
        for layer in self.layers:
            x = layer(x, pattern, ~valid)
        if self.out_proj is not None:
            x = self.out_proj(x)
        return (x if self.output_dtype is None else x.to(self.output_dtype)), lengths
