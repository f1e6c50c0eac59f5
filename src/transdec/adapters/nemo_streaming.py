"""NeMo's cache-aware streaming FastConformer, chunk by chunk: many streams, one batch, NeMo's caches.

A cache-aware streaming checkpoint (causal subsampling, causal convolutions, ``chunked_limited`` attention) is
encoded a chunk of ``right + 1`` encoder frames at a time (``att_context_size = [left, right]``, the look-ahead
chosen at load): what NeMo's ``ConformerEncoder.cache_aware_stream_step`` computes when its
``CacheAwareStreamingAudioBuffer`` feeds it a recording (NeMo's cache-aware streaming example, without
``pad_and_drop_preencoded``). Each stream carries, from one chunk to the next:

* the pre-encode cache: the ``factor + 1`` feature frames before its chunk, which the subsampling reads again
  (its first two output frames are dropped, so that a chunk's frames are those the whole recording gives);
* per layer the attention cache: the keys and values of the last ``left`` frames (NeMo caches the layer's
  normalised attention input and projects it again at every chunk; transdec keeps the projections, which are the
  same rows, once), with how many of them are real (fewer at the start);
* per layer the convolution cache: the last ``kernel - 1`` frames of the depthwise convolution's input.

Frames come out as NeMo's streaming gives them: the same as the whole recording's (``NemoTransducer.encode``) up to
float rounding, with two exceptions that are NeMo's own. (1) At the end, NeMo's buffer holds every STFT frame of
the recording, one more than its valid feature frames, the last of them padding (zeros); so does this stream,
which can change the recording's last encoder frame (and, through attention, its chunk) against the offline
encoding; and a last piece of fewer than ``subsampling_factor`` new feature frames is not encoded at all (NeMo's
buffer stops there), which drops the last encoder frame in that case. (2) With a chunk of one frame
(``right = 0``) the second chunk's pre-encode cache reaches before the recording, and NeMo fills it with zero
features that its subsampling reads as real: its second frame differs from the offline one. Look-aheads and
chunks: ``[70, 13]`` encodes 14 frames (1.12 s) per chunk, ``[70, 0]`` one (80 ms).

Features are computed as audio arrives, from NeMo's front end (:meth:`NemoMelFrontEnd.log_mel_frames`): a
feature frame as soon as the samples its STFT window covers are in (``n_fft / 2`` past its centre), so they equal
the whole recording's; the frames whose window runs past the end wait for :meth:`CacheAwareStream.input_finished`
and read zeros there, as NeMo's centred STFT pads. There is no normalisation: NeMo's streaming configs set
``preprocessor.normalize: NA``, and a model that normalises each recording (``per_feature``, ``all_features``)
needs statistics of audio that has not arrived, so it is refused (NeMo's buffer would normalise with the whole
recording's statistics, or per chunk with ``online_normalization``, neither of which a stream can reproduce).

Streams in one :meth:`CacheAwareStreamingEncoder.encode` call may be at any chunk: the first chunk of a stream
(``factor x (right + 1) - factor + 1`` feature frames, nothing to drop) is laid out as a later one whose
pre-encode cache lies before the recording, masked out at every subsampling stage exactly as a causal
convolution's padding, so that every stream goes through the subsampling and the layers in one batch; a stream's
last (shorter) chunk is padded and masked. Each stream gets what it gets alone, up to float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transdec.adapters.nemo_encoder import (ConformerLayer, ConvolutionModule, NemoConformerEncoder,
                                            RelPositionAttention, _masked_softmax_average, _rel_shift, context_mask,
                                            relative_positions)
from transdec.adapters.nemo_features import NemoMelFrontEnd
from transdec.model.conformer import depthwise_conv1d


class NemoStreamingModel(Protocol):
    """What streaming reads of a NeMo model: :class:`~transdec.adapters.nemo.NemoTransducer` has it. Typed by its
    parts rather than by that class, since :mod:`transdec.adapters.nemo` builds streaming encoders from this
    module."""

    preprocessor: NemoMelFrontEnd
    encoder: NemoConformerEncoder
    metadata: dict[str, Any]
    external_front_end: Callable[[Tensor, Tensor | None], tuple[Tensor, Tensor]] | None

    @property
    def device(self) -> torch.device: ...

    @property
    def sample_rate(self) -> int: ...

    @property
    def frame_shift_seconds(self) -> float: ...


def streaming_problems(model: NemoStreamingModel, context: tuple[int, int]) -> list[str]:
    """Why ``model`` cannot stream cache-aware with look-ahead ``context`` (empty: it can)."""
    config, features = model.encoder.config, model.preprocessor.config
    problems = []
    if config.att_context_style != "chunked_limited" or config.self_attention_model != "rel_pos":
        problems.append(f"encoder.att_context_style={config.att_context_style!r} with self_attention_model="
                        f"{config.self_attention_model!r} (cache-aware streaming needs chunked_limited rel_pos)")
    left, right = context
    if right < 0 or left < 0:
        problems.append(f"att_context_size={list(context)} (a bounded left and right context is needed)")
    if not config.causal_downsampling:
        problems.append("encoder.causal_downsampling=false")
    if config.conv_context_size[1] != 0:
        problems.append(f"encoder.conv_context_size={list(config.conv_context_size)} (causal needed)")
    if features.normalize != "none":
        problems.append(f"preprocessor.normalize={features.normalize!r} (per-recording statistics; streaming "
                        "models use NA)")
    if features.exact_pad:
        problems.append("preprocessor.exact_pad=true")
    if model.external_front_end is not None:
        problems.append("an external front end (front_end='sherpa')")
    return problems


class CacheAwareStreamingEncoder:
    """Encodes streams of a NeMo cache-aware streaming model chunk by chunk (a ``StreamingEncoder``; see the
    module docstring). Made by :meth:`NemoTransducer.streaming_encoder`; ``att_context_size`` is the look-ahead
    (default the model's current one), which must be one the model was trained with."""

    def __init__(self, model: NemoStreamingModel, att_context_size: Sequence[int] | None = None) -> None:
        config = model.encoder.config
        context = tuple(int(c) for c in (att_context_size or config.att_context_size))
        if context not in config.att_context_sizes:
            known = ", ".join(str(list(c)) for c in config.att_context_sizes)
            raise ValueError(f"att_context_size={list(context)} is not one of the model's look-aheads ({known})")
        problems = streaming_problems(model, context)  # type: ignore[arg-type]
        if problems:
            source = model.metadata.get("source", "this model")
            raise ValueError(f"{source} is not a cache-aware streaming model transdec can stream: "
                             + "; ".join(problems))
        self.model = model
        self.context: tuple[int, int] = context  # type: ignore[assignment]
        self.chunk = context[1] + 1  # encoder frames per chunk
        self.factor = config.subsampling_factor
        self.cache_frames = context[0]  # attention cache per layer
        self.pre_cache = self.factor + 1  # feature frames the subsampling reads again (NeMo's pre_encode_cache_size)
        self.drop = 1 + (self.pre_cache - 1) // self.factor  # NeMo's drop_extra_pre_encoded
        self.window = self.pre_cache + self.factor * self.chunk  # feature frames into the subsampling per chunk
        self._positions: dict[tuple, tuple[tuple[int, ...], list[Tensor]]] = {}

    @property
    def sample_rate(self) -> int:
        return self.model.sample_rate

    @property
    def frame_shift_seconds(self) -> float:
        return self.model.frame_shift_seconds

    @property
    def latency_seconds(self) -> float:
        """From the centre of a chunk's first feature frame to the last sample its chunk needs: the chunk's other
        ``right`` frames, and half an STFT window past the last one's centre (1.056 s for ``[70, 13]``, 0.016 s
        for ``[70, 0]``)."""
        c = self.model.preprocessor.config
        return ((self.chunk - 1) * self.factor * c.hop_length + c.n_fft // 2) / c.sample_rate

    def open(self) -> CacheAwareStream:
        return CacheAwareStream(self)

    def chunk_features(self, index: int) -> tuple[int, int, int]:
        """Chunk ``index``'s feature frames ``[start, end)`` and the fewest new ones NeMo's buffer encodes (a
        first chunk of at least one frame, later ones of at least ``factor``)."""
        span = self.factor * self.chunk
        if index == 0:
            return 0, span - self.factor + 1, 1
        return span * index - self.factor + 1, span * (index + 1) - self.factor + 1, self.factor

    def window_start(self, index: int) -> int:
        """The feature frame at the start of chunk ``index``'s subsampling window (negative near the start)."""
        return self.factor * self.chunk * index - 2 * self.factor

    @torch.inference_mode()
    def encode(self, streams: Sequence[CacheAwareStream]) -> list[Tensor]:
        """The next chunk's encoder frames ``[T_i, D]`` of each (ready) stream, all in one batch."""
        if not streams:
            return []
        if any(not s.ready for s in streams):
            raise ValueError("encode() takes ready streams only")
        encoder = self.model.encoder
        device, dtype = self.model.device, next(encoder.parameters()).dtype
        inputs = [s.next_window() for s in streams]
        features = torch.stack([f for f, _, _ in inputs]).to(device=device, dtype=dtype)
        first = torch.tensor([f for _, f, _ in inputs], device=device)
        lengths = torch.tensor([n for _, _, n in inputs], device=device)
        x, counts = self.subsample(features, first, lengths)
        caches = [s.caches(device, dtype) for s in streams]
        attention_len = torch.tensor([c[1] for c in caches], device=device)
        batch = streams[0]._batch
        if batch is not None and batch[0].shape[1] == len(streams) and all(
                s._batch is not None and s._batch[0] is batch[0] and s._batch[2] == row
                for row, s in enumerate(streams)):
            attention, convolution = batch[0], batch[1]  # the same streams as the last call, in order: no copy
        else:
            attention = torch.stack([c[0] for c in caches], dim=1)  # [L, B, C, 2D]: keys, values
            convolution = torch.stack([c[2] for c in caches], dim=1)  # [L, B, D, K - 1]
        x, attention, attention_len, convolution = self.layers(x, counts, attention, attention_len, convolution)
        if encoder.out_proj is not None:
            x = encoder.out_proj(x)
        if encoder.output_dtype is not None:
            x = x.to(encoder.output_dtype)
        frames = []
        for row, (stream, count) in enumerate(zip(streams, counts.tolist())):
            frames.append(x[row, :count])
            stream.advance(attention[:, row], int(attention_len[row]), convolution[:, row])
            stream._batch = (attention, convolution, row)
        return frames

    def subsample(self, features: Tensor, first: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``features [B, W, F]`` (each row a chunk's window, valid from frame ``first`` to ``lengths``) ->
        the chunk's frames ``[B, chunk, D]`` (x-scaled) and how many of each row's are real ``[B]``.

        NeMo's masked subsampling on each window, with the frames before ``first`` also zeroed before every layer:
        a first chunk's window starts ``2 x factor`` frames before the recording, and zeros there at each stage are
        the zeros a causal convolution pads with, so it gets the frames NeMo's first step gets without a cache."""
        pre = self.model.encoder.pre_encode
        x = features.unsqueeze(1)  # [B, 1, W, F]
        for layer in pre.conv:
            x = x * _window_mask(first, lengths, x.shape[2]).to(x.dtype)[:, None, :, None]
            strided = isinstance(layer, nn.Conv2d) and layer.stride[0] != 1
            if strided:
                x = pre.causal_pad(x)
            x = layer(x)
            if strided:
                lengths, first = pre.stage_length(lengths), torch.div(first, 2, rounding_mode="floor")
        x = x * _window_mask(first, lengths, x.shape[2]).to(x.dtype)[:, None, :, None]
        batch, channels, frames, freqs = x.shape
        x = pre.out(x.transpose(1, 2).reshape(batch, frames, channels * freqs))[:, self.drop :]
        if self.model.encoder.config.xscaling:
            x = x * math.sqrt(self.model.encoder.config.d_model)
        return x, (lengths - self.drop).clamp(min=0, max=self.chunk)

    def layers(self, x: Tensor, counts: Tensor, attention: Tensor, attention_len: Tensor,
               convolution: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The Conformer layers on a chunk ``x [B, T, D]`` (``counts [B]`` real frames) with each layer's caches;
        returns the output and the caches after the chunk."""
        frames = x.shape[1]
        valid = torch.arange(frames, device=x.device)[None, :] < counts[:, None]  # [B, T]
        cache = self.cache_frames
        positions = torch.arange(cache + frames, device=x.device)
        cached = positions[None, :cache] >= cache - attention_len[:, None]  # [B, C]: the real cache frames
        keys_valid = torch.cat([cached, valid], dim=1)  # [B, C + T]
        # NeMo's mask over cache + chunk: chunks counted from the cache's first frame, which starts one.
        chunks = context_mask(positions[cache:], positions, self.context, "chunked_limited")  # [T, C + T]
        allowed = (keys_valid[:, None, :] & valid[:, :, None] & chunks[None]).unsqueeze(1)  # [B, 1, T, C + T]
        positions_per_layer = self.position_projections(cache + frames, x.dtype, x.device)
        keep = counts[:, None] + torch.arange(cache, device=x.device)[None, :]  # rows of the next attention cache
        kernel_cache = convolution.shape[-1]
        keep_conv = counts[:, None] + torch.arange(kernel_cache, device=x.device)[None, :]
        full = bool((counts == frames).all())  # every row a whole chunk: the caches' rows are the last ones
        next_attention, next_convolution = torch.empty_like(attention), torch.empty_like(convolution)
        layer: ConformerLayer
        for number, layer in enumerate(self.model.encoder.layers):  # type: ignore[assignment]
            x = x + 0.5 * layer.feed_forward1(layer.norm_feed_forward1(x))
            queries = layer.norm_self_att(x)
            attn = layer.self_attn
            projected = torch.cat([attn.linear_k(queries), attn.linear_v(queries)], dim=2)  # [B, T, 2D]
            keys_values = torch.cat([attention[number], projected], dim=1)  # [B, C + T, 2D]
            x = x + _cached_attention(attn, queries, keys_values, allowed, positions_per_layer[number])
            if full:
                next_attention[number].copy_(keys_values[:, frames:])
            else:
                torch.gather(keys_values, 1, keep[:, :, None].expand(-1, -1, keys_values.shape[2]),
                             out=next_attention[number])
            out, inputs = _cached_convolution(layer.conv, layer.norm_conv(x), convolution[number], valid)
            if full:
                next_convolution[number].copy_(inputs[:, :, frames:])
            else:
                torch.gather(inputs, 2, keep_conv[:, None, :].expand(-1, inputs.shape[1], -1),
                             out=next_convolution[number])
            x = x + out
            x = x + 0.5 * layer.feed_forward2(layer.norm_feed_forward2(x))
            x = layer.norm_out(x)
        attention_len = (attention_len + counts).clamp(max=cache)
        return x, next_attention, attention_len, next_convolution

    def position_projections(self, total: int, dtype: torch.dtype, device: torch.device) -> list[Tensor]:
        """Per layer, ``linear_pos`` of the embeddings of relative positions ``total - 1 .. -(total - 1)``
        ``[1, H, 2 total - 1, d_k]``: the same at every chunk (they depend on the weights only), so computed once
        (again if a ``linear_pos`` weight changes in place)."""
        layers = self.model.encoder.layers
        versions = tuple(_weights_version(layer.self_attn.linear_pos) for layer in layers)
        key = (total, dtype, device)
        held = self._positions.get(key)
        if held is None or held[0] != versions:
            embeddings = relative_positions(total, self.model.encoder.config.d_model, dtype, device)
            projections = []
            for layer in layers:
                attn = layer.self_attn
                projections.append(attn.linear_pos(embeddings).view(1, -1, attn.h, attn.d_k).transpose(1, 2))
            held = self._positions[key] = (versions, projections)
        return held[1]


def _weights_version(layer: nn.Module) -> tuple[int, int]:
    """What changes when ``layer``'s weights do: a float layer's weight tensor and its in-place version; an int8
    layer (:mod:`transdec.model.quantization`), whose weights are fixed, the layer itself."""
    weight = layer._parameters.get("weight") if isinstance(layer, nn.Linear) else None
    return (id(layer), -1) if weight is None else (id(weight), weight._version)


def _window_mask(first: Tensor, lengths: Tensor, frames: int) -> Tensor:
    """``[B, frames]``: True from ``first`` up to ``lengths``."""
    index = torch.arange(frames, device=lengths.device)[None, :]
    return (index >= first[:, None]) & (index < lengths[:, None])


def _cached_attention(attn: RelPositionAttention, queries: Tensor, keys_values: Tensor, allowed: Tensor,
                      p: Tensor) -> Tensor:
    """Relative-position attention of the chunk's ``queries [B, T, D]`` over the projected keys and values
    ``[B, C + T, 2D]`` (the cache's, then the chunk's): the query at chunk frame ``i`` and the key at ``j`` are
    ``C + i - j`` apart, which NeMo's relative shift of positions ``C + T - 1 .. -(C + T - 1)`` gives (``p``: their
    embeddings through ``linear_pos``, ``[1, H, 2(C + T) - 1, d_k]``)."""
    batch, frames, _ = queries.shape
    total, d = keys_values.shape[1], attn.h * attn.d_k
    q = attn.linear_q(queries).view(batch, frames, attn.h, attn.d_k)
    k = keys_values[..., :d].reshape(batch, total, attn.h, attn.d_k).transpose(1, 2)
    v = keys_values[..., d:].reshape(batch, total, attn.h, attn.d_k).transpose(1, 2)
    q_u = (q + attn.pos_bias_u).transpose(1, 2)
    q_v = (q + attn.pos_bias_v).transpose(1, 2)
    q_u, q_v, k, v, p = attn.attention_inputs(q_u, q_v, k, v, p)
    content = torch.matmul(q_u, k.transpose(-2, -1))  # [B, H, T, C + T]
    position = _rel_shift(torch.matmul(q_v, p.transpose(-2, -1)), total)
    out = _masked_softmax_average(content.add_(position), allowed, v, math.sqrt(attn.d_k)).to(queries.dtype)
    return attn.linear_out(out.transpose(1, 2).reshape(batch, frames, attn.h * attn.d_k))


def _cached_convolution(conv: ConvolutionModule, x: Tensor, cache: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """The convolution module on the chunk ``x [B, T, D]`` with the causal depthwise convolution reading
    ``cache [B, D, K - 1]`` before it; returns the output and the depthwise input ``[B, D, K - 1 + T]``."""
    y = F.glu(conv.pointwise_conv1(x.transpose(1, 2)), dim=1)
    y = y.masked_fill(~valid[:, None, :], 0.0)
    inputs = torch.cat([cache, y], dim=2)
    y = depthwise_conv1d(inputs, conv.depthwise_conv)  # no padding: the cache is the left context
    if conv.norm_type == "layer_norm":
        y = conv.batch_norm(y.transpose(1, 2)).transpose(1, 2)
    else:
        y = conv.batch_norm(y)
    return conv.pointwise_conv2(F.silu(y)).transpose(1, 2), inputs


class CacheAwareStream:
    """One stream of a :class:`CacheAwareStreamingEncoder`: its audio on the way to features, the features its
    next chunk needs, and its caches."""

    def __init__(self, encoder: CacheAwareStreamingEncoder) -> None:
        self.encoder = encoder
        self.front_end = encoder.model.preprocessor
        config = self.front_end.config
        self.hop, self.half, self.preemph = config.hop_length, config.n_fft // 2, config.preemph
        self.pieces: list[Tensor] = []  # pre-emphasised samples from `signal_base` on
        self.signal_base = 0
        self.received = 0
        self.last_sample: Tensor | None = None  # the last raw sample, for the next one's pre-emphasis
        self.finished = False
        self.features = torch.zeros(0, config.num_mel_bins)  # feature frames from `feature_base` on
        self.feature_base = 0
        self.chunk_index = 0
        self._caches: tuple[Tensor, int, Tensor] | None = None
        #: the batch caches of the encode() call that last stepped this stream, and its row in them
        self._batch: tuple[Tensor, Tensor, int] | None = None

    def accept(self, samples: Tensor) -> None:
        if self.finished:
            raise ValueError("samples after input_finished()")
        if samples.dim() != 1:
            raise ValueError(f"samples must be one channel [N], got shape {tuple(samples.shape)}")
        if samples.shape[0] == 0:
            return
        x = samples.detach().to("cpu", torch.float32)
        if self.preemph is not None:
            before = x[:1] if self.last_sample is None else self.last_sample  # NeMo keeps the first sample
            shifted = torch.cat([before, x[:-1]])
            y = x - self.preemph * shifted
            if self.last_sample is None:
                y[0] = x[0]
            x, self.last_sample = y, x[-1:].clone()
        self.pieces.append(x)
        self.received += samples.shape[0]

    def input_finished(self) -> None:
        self.finished = True

    @property
    def available_features(self) -> int:
        """Feature frames that can be computed now: those whose STFT window has arrived, or once the input has
        finished all of NeMo's STFT frames (the valid ones and one of padding)."""
        if self.finished:
            return self.received // self.hop + 1 if self.received else 0
        return max(0, (self.received - self.half) // self.hop + 1)

    @property
    def ready(self) -> bool:
        start, end, least = self.encoder.chunk_features(self.chunk_index)
        available = self.available_features
        return available >= end or (self.finished and available - start >= least)

    @property
    def done(self) -> bool:
        start, _, least = self.encoder.chunk_features(self.chunk_index)
        return self.finished and self.available_features - start < least

    def caches(self, device: torch.device, dtype: torch.dtype) -> tuple[Tensor, int, Tensor]:
        """Attention cache (keys, then values) ``[L, C, 2D]``, its real frames, and convolution cache
        ``[L, D, K - 1]``."""
        if self._caches is None:
            config = self.encoder.model.encoder.config
            layers, d = config.n_layers, config.d_model
            self._caches = (torch.zeros(layers, self.encoder.cache_frames, 2 * d, device=device, dtype=dtype), 0,
                            torch.zeros(layers, d, config.conv_context_size[0], device=device, dtype=dtype))
        return self._caches

    def next_window(self) -> tuple[Tensor, int, int]:
        """The next chunk's subsampling window ``[W, F]`` (zeros where there is nothing), the frame of it where the
        recording starts (the first chunk) or 0, and its valid frames."""
        encoder = self.encoder
        _, end, _ = encoder.chunk_features(self.chunk_index)
        end = min(end, self.available_features)
        self._compute_features(end)
        start = encoder.window_start(self.chunk_index)
        window = torch.zeros(encoder.window, self.features.shape[1])
        first = max(start, 0)
        window[first - start : end - start] = self.features[first - self.feature_base : end - self.feature_base]
        return window, (-start if self.chunk_index == 0 else 0), end - start

    def advance(self, attention: Tensor, attention_len: int, convolution: Tensor) -> None:
        """The chunk is encoded: keep its caches, drop the features the next window no longer reads."""
        self._caches = (attention, attention_len, convolution)
        self.chunk_index += 1
        keep_from = max(0, self.encoder.window_start(self.chunk_index))
        if keep_from > self.feature_base:
            self.features = self.features[keep_from - self.feature_base :]
            self.feature_base = keep_from

    def _compute_features(self, end: int) -> None:
        """Compute the feature frames up to ``end`` (not past :attr:`available_features`)."""
        done = self.feature_base + self.features.shape[0]
        if end <= done:
            return
        valid = self.front_end.num_frames(torch.tensor([self.received]))[0].item() if self.finished else end
        real_end = min(end, valid)
        new = []
        if real_end > done:
            first_sample, last_sample = done * self.hop - self.half, (real_end - 1) * self.hop + self.half
            new.append(self.front_end.log_mel_frames(self._signal(first_sample, last_sample)[None])[0])
            self._drop_samples(real_end * self.hop - self.half)
        if end > max(real_end, done):  # NeMo's padding frame(s) past the valid ones
            padding = self.front_end.config.pad_value
            new.append(torch.full((end - max(real_end, done), self.features.shape[1]), padding))
        self.features = torch.cat([self.features, *new])

    def _signal(self, first: int, last: int) -> Tensor:
        """Pre-emphasised samples ``[first, last)``: zeros before the start and past the received ones."""
        if len(self.pieces) > 1:
            self.pieces = [torch.cat(self.pieces)]
        held = self.pieces[0] if self.pieces else torch.zeros(0)
        begin, stop = max(first, self.signal_base), min(last, self.received)
        inside = held[begin - self.signal_base : stop - self.signal_base] if stop > begin else held[:0]
        return F.pad(inside, (begin - first, last - first - (begin - first) - inside.shape[0]))

    def _drop_samples(self, keep_from: int) -> None:
        if keep_from > self.signal_base and self.pieces:
            held = torch.cat(self.pieces) if len(self.pieces) > 1 else self.pieces[0]
            self.pieces = [held[keep_from - self.signal_base :]]
            self.signal_base = min(keep_from, self.received)
