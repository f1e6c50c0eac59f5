"""Exports in the icefall/k2 format of sherpa-onnx's published offline transducers (Zipformer, Conformer, ...), built
from small random PyTorch modules with icefall's signatures, for the tests of transdec.adapters.onnx_icefall.

What icefall's ``export-onnx.py`` writes (egs/librispeech/ASR/zipformer/export-onnx.py) and sherpa-onnx reads
(sherpa-onnx/csrc/offline-transducer-model.cc):

* ``encoder-epoch-99-avg-1.onnx``: ``x [N, T, 80]`` fbank, ``x_lens [N]`` int64 -> ``encoder_out [N, T', J]`` (the
  joiner's encoder projection applied), ``encoder_out_lens [N]``; metadata ``model_type`` (``zipformer2``,
  ``conformer``, ...), ``version``, ``model_author``, ``comment``.
* ``decoder-epoch-99-avg-1.onnx``: ``y [N, context_size]`` int64 (the last tokens; -1 before the start, blank 0)
  -> ``decoder_out [N, J]`` (projected); metadata ``context_size``, ``vocab_size`` (with the blank).
* ``joiner-epoch-99-avg-1.onnx``: ``encoder_out [N, J]``, ``decoder_out [N, J]`` -> ``logit [N, vocab_size]``,
  ``output_linear(tanh(encoder_out + decoder_out))``; metadata ``joiner_dim``.
* the same three as ``*.int8.onnx``: ``quantize_dynamic`` of the MatMuls to int8, as icefall does.
* ``tokens.txt``: ``<blk> 0``, ``<sos/eos> 1``, ``<unk> 2``, then the BPE pieces.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

STEM = "epoch-99-avg-1"
FEATURE_DIM = 80


@dataclass(frozen=True)
class IcefallShape:
    """Sizes of a random icefall-style model: a conformer-style encoder, a stateless decoder, a joiner."""

    vocab_size: int
    model_dim: int = 32
    channels: int = 8
    num_layers: int = 2
    num_heads: int = 2
    decoder_dim: int = 32
    joiner_dim: int = 24
    context_size: int = 2
    #: Added to the blank's logit so that a third of the frames or more are blank, as in a trained model.
    blank_bias: float = 5.0
    #: The projections' and the joiner's weights are PyTorch's default initialisation times this, so that the random
    #: model's choice varies from frame to frame (at 1 one token wins nearly every frame).
    weight_scale: float = 4.0


class Conv2dSubsampling(nn.Module):
    """icefall's convolutional front: two 3x3 convolutions of stride 2 over (time, frequency), a linear layer, then
    (as Zipformer's ConvNeXt) a depthwise convolution over 7 frames. ``x [N, T, F]`` -> ``[N, T', D]`` with
    ``T' = ((T - 1) // 2 - 1) // 2``. The last convolution reads 3 frames past an utterance's end, which in a batch
    are made from the padding, so, as in a Zipformer, what a batch is padded with changes its last frames."""

    def __init__(self, feature_dim: int, channels: int, model_dim: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, channels, 3, stride=2), nn.ReLU(),
                                  nn.Conv2d(channels, channels, 3, stride=2), nn.ReLU())
        self.out = nn.Linear(channels * (((feature_dim - 1) // 2 - 1) // 2), model_dim)
        self.convnext = nn.Conv1d(model_dim, model_dim, 7, padding=3, groups=model_dim)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv(x.unsqueeze(1))
        n, c, t, f = x.shape
        x = self.out(x.transpose(1, 2).reshape(n, t, c * f))
        return x + self.convnext(x.transpose(1, 2)).transpose(1, 2)


class MaskedSelfAttentionLayer(nn.Module):
    """Pre-norm self-attention (padded keys masked out) and a feed-forward block, ``[N, T, D]`` -> ``[N, T, D]``."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm_attention, self.norm_ff = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))

    def forward(self, x: Tensor, padding: Tensor) -> Tensor:
        n, t, d = x.shape
        q, k, v = self.qkv(self.norm_attention(x)).reshape(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
        scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
        attended = (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, t, d)
        x = x + self.out(attended)
        return x + self.ff(self.norm_ff(x))


class IcefallEncoder(nn.Module):
    """``x [N, T, 80]``, ``x_lens [N]`` -> ``encoder_out [N, T', J]`` (projected for the joiner),
    ``encoder_out_lens [N]``: icefall's OnnxEncoder around a small conformer-style encoder."""

    def __init__(self, shape: IcefallShape) -> None:
        super().__init__()
        self.embed = Conv2dSubsampling(FEATURE_DIM, shape.channels, shape.model_dim)
        self.layers = nn.ModuleList(MaskedSelfAttentionLayer(shape.model_dim, shape.num_heads)
                                    for _ in range(shape.num_layers))
        self.encoder_proj = nn.Linear(shape.model_dim, shape.joiner_dim)
        with torch.no_grad():
            self.encoder_proj.weight.mul_(shape.weight_scale)

    def forward(self, x: Tensor, x_lens: Tensor) -> tuple[Tensor, Tensor]:
        encoded = self.embed(x)
        lengths = ((x_lens - 1) // 2 - 1) // 2
        padding = torch.arange(encoded.shape[1]).unsqueeze(0) >= lengths.unsqueeze(1)
        for layer in self.layers:
            encoded = layer(encoded, padding)
        return self.encoder_proj(encoded), lengths


class IcefallDecoder(nn.Module):
    """icefall's stateless decoder and its projection: ``y [N, context_size]`` -> ``decoder_out [N, J]``: the
    embeddings of the last ``context_size`` tokens (-1 embeds as zeros), a grouped convolution over them, ReLU.

    icefall's embedding has ``padding_idx=blank`` (a zero blank row); this one's blank row is random, so that a
    context that starts with blanks instead of icefall's ``[-1, ..., -1, 0]`` would change the output and the tests
    would see it."""

    def __init__(self, shape: IcefallShape) -> None:
        super().__init__()
        self.embedding = nn.Embedding(shape.vocab_size, shape.decoder_dim)
        self.conv = nn.Conv1d(shape.decoder_dim, shape.decoder_dim, shape.context_size,
                              groups=shape.decoder_dim // 4, bias=False)
        self.decoder_proj = nn.Linear(shape.decoder_dim, shape.joiner_dim)
        with torch.no_grad():
            self.decoder_proj.weight.mul_(shape.weight_scale)

    def forward(self, y: Tensor) -> Tensor:
        embedded = self.embedding(y.clamp(min=0)) * (y >= 0).unsqueeze(-1)
        out = torch.relu(self.conv(embedded.permute(0, 2, 1))).squeeze(-1)
        return self.decoder_proj(out)


class IcefallJoiner(nn.Module):
    """``encoder_out [N, J]``, ``decoder_out [N, J]`` -> ``logit [N, vocab]`` = ``output_linear(tanh(e + d))``."""

    def __init__(self, shape: IcefallShape, unk_id: int) -> None:
        super().__init__()
        self.output_linear = nn.Linear(shape.joiner_dim, shape.vocab_size)
        with torch.no_grad():
            self.output_linear.weight.mul_(shape.weight_scale)
            self.output_linear.bias.zero_()
            self.output_linear.bias[0] = shape.blank_bias
            # sherpa-onnx's greedy search drops an <unk> it picks (offline-transducer-greedy-search-decoder.cc);
            # transdec keeps it. A trained model all but never picks it; neither does this one.
            self.output_linear.bias[unk_id] = -30.0

    def forward(self, encoder_out: Tensor, decoder_out: Tensor) -> Tensor:
        return self.output_linear(torch.tanh(encoder_out + decoder_out))


def icefall_tokens(pieces: list[str]) -> list[str]:
    """An icefall BPE ``tokens.txt`` vocabulary: ``<blk>``, ``<sos/eos>``, ``<unk>``, then ``pieces``."""
    return ["<blk>", "<sos/eos>", "<unk>", *[p for p in pieces if p not in ("<unk>", "<blk>", "<sos/eos>")]]


def export_icefall(directory: Path, pieces: list[str], seed: int, int8: bool = True, fp32: bool = True,
                   shape: IcefallShape | None = None, model_type: str = "zipformer2",
                   int32_inputs: bool = False) -> Path:
    """Write a random icefall-format offline transducer to ``directory`` (see the module docstring): the float32
    files (unless ``fp32`` is False), their int8 versions (if ``int8``); int32 lengths and decoder ids with
    ``int32_inputs`` (icefall's ``--use-int32-inputs``)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tokens = icefall_tokens(pieces)
    shape = shape or IcefallShape(vocab_size=len(tokens))
    torch.manual_seed(seed)
    encoder, decoder = IcefallEncoder(shape).eval(), IcefallDecoder(shape).eval()
    joiner = IcefallJoiner(shape, tokens.index("<unk>")).eval()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokens.txt").write_text("".join(f"{t} {i}\n" for i, t in enumerate(tokens)), encoding="utf-8")
    files = {part: directory / f"{part}-{STEM}.onnx" for part in ("encoder", "decoder", "joiner")}
    context = shape.context_size
    integers = torch.int32 if int32_inputs else torch.int64
    _export(encoder, (torch.randn(1, 100, FEATURE_DIM), torch.tensor([100], dtype=integers)), files["encoder"],
            ["x", "x_lens"],
            ["encoder_out", "encoder_out_lens"],
            {"x": {0: "N", 1: "T"}, "x_lens": {0: "N"}, "encoder_out": {0: "N", 1: "T"}, "encoder_out_lens": {0: "N"}})
    _export(decoder, (torch.zeros(1, context, dtype=integers),), files["decoder"], ["y"], ["decoder_out"],
            {"y": {0: "N"}, "decoder_out": {0: "N"}})
    _export(joiner, (torch.rand(1, shape.joiner_dim), torch.rand(1, shape.joiner_dim)), files["joiner"],
            ["encoder_out", "decoder_out"], ["logit"],
            {"encoder_out": {0: "N"}, "decoder_out": {0: "N"}, "logit": {0: "N"}})
    metadata = {
        "encoder": {"model_type": model_type, "version": "1", "model_author": "k2-fsa",
                    "comment": f"non-streaming {model_type}"},
        "decoder": {"context_size": str(context), "vocab_size": str(shape.vocab_size)},
        "joiner": {"joiner_dim": str(shape.joiner_dim)},
    }
    for part, path in files.items():
        set_metadata(path, metadata[part])
    if int8:
        for part, path in files.items():
            quantize_dynamic(model_input=path, model_output=path.with_suffix(".int8.onnx"),
                             op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8)
    if not fp32:
        for path in files.values():
            path.unlink()
    return directory


def export_streaming_encoder(path: Path) -> None:
    """An encoder with the inputs and metadata of icefall's streaming Zipformer export
    (``export-onnx-streaming.py``): ``x [N, T, 80]`` and cached states, ``decode_chunk_len`` and ``T``."""

    class Streaming(nn.Module):
        def forward(self, x: Tensor, cached_len_0: Tensor, processed_lens: Tensor) -> tuple[Tensor, ...]:
            return x[:, ::4], cached_len_0 + 1, processed_lens + x.shape[1]

    _export(Streaming(), (torch.randn(1, 45, FEATURE_DIM), torch.zeros(2, 1, dtype=torch.int64),
                          torch.zeros(1, dtype=torch.int64)),
            path, ["x", "cached_len_0", "processed_lens"], ["encoder_out", "new_cached_len_0", "new_processed_lens"],
            {"x": {0: "N"}, "cached_len_0": {1: "N"}, "processed_lens": {0: "N"}})
    set_metadata(path, {"model_type": "zipformer2", "version": "1", "model_author": "k2-fsa",
                        "comment": "streaming zipformer2", "decode_chunk_len": "32", "T": "45"})


def set_metadata(path: Path, metadata: dict[str, str]) -> None:
    """Replace the custom metadata of the ONNX file ``path`` (icefall's ``add_meta_data``)."""
    import onnx

    proto = onnx.load(str(path))
    del proto.metadata_props[:]
    for key, value in metadata.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(proto, str(path))


def _export(module: nn.Module, args: tuple[Tensor, ...], path: Path, inputs: list[str], outputs: list[str],
            dynamic_axes: dict[str, dict[int, str]]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings about Python-level shape reads
        torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic_axes, opset_version=13, dynamo=False)
