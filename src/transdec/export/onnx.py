"""Export a transdec model (own or NeMo-imported) to ONNX: encoder, decoder and joiner as three self-contained
files, ``tokens.txt`` and the metadata sherpa-onnx reads.

``export_onnx(model, "out/")`` (or ``transdec export onnx MODEL out/``) writes::

    out/encoder.onnx  out/decoder.onnx  out/joiner.onnx  out/tokens.txt  [out/tokenizer.model]

and, for a model whose encoder weighs more than protobuf's 2 GiB allow in one file (parakeet-tdt-0.6b: 2.4 GB),
the encoder's weights beside it in ``out/encoder.weights``, as sherpa-onnx's own exports of such models have them.
``quantize="int8"`` (``--quantize int8``) adds ``encoder.int8.onnx``, ``decoder.int8.onnx`` and ``joiner.int8.onnx``
(:mod:`transdec.export.onnx_quantize`).

Layouts (graph inputs and outputs in :mod:`transdec.export.onnx_graphs`):

* LSTM predictors (RNN-T, TDT, multi-blank): NeMo's transducer layout, run by sherpa-onnx with
  ``model_type="nemo_transducer"``. ``tokens.txt`` lists the tokens, then ``<blk>``. The encoder carries sherpa's
  metadata (``vocab_size`` without the blank, ``subsampling_factor``, ``normalize_type``, ``pred_rnn_layers``,
  ``pred_hidden``, ``feat_dim``, ``is_giga_am``, ``url``, which names ``tdt`` for TDT heads: sherpa-onnx then reads
  the duration output's argmax as the duration, so TDT durations must be ``0 .. K-1``).
* Stateless predictors: icefall's layout (sherpa-onnx ``model_type="transducer"``), blank first in ``tokens.txt``
  and in the joiner's output; ``vocab_size`` (with the blank) and ``context_size`` on the decoder.

Multi-blank heads are exported in the same layouts for transdec's own ONNX adapter
(:mod:`transdec.adapters.onnx`); sherpa-onnx has no multi-blank decoder and would read their big blanks as tokens.

Every file also carries ``transdec_*`` metadata (head, layout, front end) from which the adapter rebuilds the
model exactly. Batch and time axes are dynamic; the encoder's rotary position tables cover ``max_frames``
encoder frames. The front end is not part of the graphs: sherpa-onnx computes its own features (see
docs/deploy.md for how they differ from transdec's Kaldi filterbank), and the adapter computes the model's.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from transdec.export.onnx_graphs import (
    IcefallLayoutEncoder,
    IcefallLayoutJoiner,
    IcefallLayoutStatelessDecoder,
    NemoLayoutEncoder,
    NemoLayoutJoiner,
    NemoLayoutLstmDecoder,
    RotaryTable,
)
from transdec.model.predictors import LSTMPredictor
from transdec.protocol import HeadSpec

#: ONNX opset of the exported graphs (ONNX Runtime 1.16 and later run it).
OPSET = 17
#: Encoder frames the rotary position tables of transdec's own encoder cover: 20,000 frames are 26 minutes of
#: audio at 8x subsampling.
DEFAULT_MAX_FRAMES = 20_000
METADATA_VERSION = "1"


@dataclass(frozen=True)
class OnnxExport:
    """Paths of an export and its layout (``"nemo"`` or ``"icefall"``)."""

    directory: Path
    encoder: Path
    decoder: Path
    joiner: Path
    tokens: Path
    layout: str


def export_onnx(model: Any, out_dir: str | os.PathLike[str], *, max_frames: int = DEFAULT_MAX_FRAMES,
                opset: int = OPSET, quantize: str | None = None) -> OnnxExport:
    """Export ``model`` (a :class:`~transdec.model.transducer_model.TransducerModel` or a
    :class:`~transdec.adapters.nemo.NemoTransducer`) to ``out_dir``; see the module docstring for what is written.

    ``quantize="int8"`` also writes ``encoder.int8.onnx``, ``decoder.int8.onnx`` and ``joiner.int8.onnx``
    (:func:`transdec.export.onnx_quantize.quantize_export`), which sherpa-onnx and ``load_model(out_dir,
    onnx_variant="int8")`` load.
    """
    if quantize not in (None, "int8"):
        raise ValueError(f"quantize must be 'int8' or None, got {quantize!r}")
    try:
        import onnx  # the exporter's dependency, imported only when exporting
    except ImportError as error:
        raise ImportError("exporting to ONNX needs the onnx package, which is not installed") from error

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory (the export writes several files into one)")
    out.mkdir(parents=True, exist_ok=True)
    model = _float32_cpu_eval_copy(model)
    head: HeadSpec = model.head
    layout = export_layout(model)
    front_end = front_end_metadata(model)
    feat_dim = int(front_end["config"]["num_mel_bins"])
    encoder_dim, predictor_dim = model.joint.encoder_dim, model.joint.predictor_dim
    if head.kind == "tdt" and list(head.durations) != list(range(len(head.durations))):
        warnings.warn(f"TDT durations {head.durations} are not 0..K-1: sherpa-onnx reads the duration index as the "
                      "duration and will decode this export wrongly (transdec's ONNX adapter reads it correctly)",
                      stacklevel=2)
    common = {
        "transdec_version": METADATA_VERSION,
        "transdec_layout": layout,
        "transdec_head": json.dumps(dataclasses.asdict(head)),
        "transdec_front_end": json.dumps(front_end),
        "transdec_subsampling_factor": str(_subsampling_factor(model)),
    }
    field = getattr(model.encoder, "receptive_field", None)
    if field is not None:  # lets long recordings be encoded in windows with just enough context
        common["transdec_receptive_field"] = str(field)
    paths = {name: out / f"{name}.onnx" for name in ("encoder", "decoder", "joiner")}
    with torch.no_grad(), _rotary_tables(model, max_frames):
        frames = 4 * max(8, _subsampling_factor(model))  # long enough for any subsampling to leave frames
        features = torch.randn(2, frames, feat_dim)
        feature_lengths = torch.tensor([frames, frames - 3], dtype=torch.int64)
        if layout == "nemo":
            p = model.predictor
            h = torch.zeros(p.num_layers, 2, p.hidden_size)
            _export(NemoLayoutEncoder(model.encoder), (features.transpose(1, 2), feature_lengths), paths["encoder"],
                    ["audio_signal", "length"], ["outputs", "encoded_lengths"],
                    {"audio_signal": {0: "N", 2: "T"}, "length": {0: "N"}, "outputs": {0: "N", 2: "T_out"},
                     "encoded_lengths": {0: "N"}}, opset)
            _export(NemoLayoutLstmDecoder(p), (torch.tensor([[3], [head.num_tokens]], dtype=torch.int32),
                                               torch.ones(2, dtype=torch.int32), h, h.clone()), paths["decoder"],
                    ["targets", "target_length", "states.1", "states.2"],
                    ["outputs", "prednet_lengths", "states", "states.3"],
                    {"targets": {0: "N"}, "target_length": {0: "N"}, "states.1": {1: "N"}, "states.2": {1: "N"},
                     "outputs": {0: "N"}, "prednet_lengths": {0: "N"}, "states": {1: "N"}, "states.3": {1: "N"}},
                    opset)
            _export(NemoLayoutJoiner(model.joint), (torch.randn(2, encoder_dim, 3), torch.randn(2, predictor_dim, 2)),
                    paths["joiner"], ["encoder_outputs", "decoder_outputs"], ["outputs"],
                    {"encoder_outputs": {0: "N", 2: "T"}, "decoder_outputs": {0: "N", 2: "U"},
                     "outputs": {0: "N", 1: "T", 2: "U"}}, opset)
            sherpa = {
                "vocab_size": str(head.num_tokens), "subsampling_factor": str(_subsampling_factor(model)),
                "normalize_type": front_end["normalize"], "pred_rnn_layers": str(p.num_layers),
                "pred_hidden": str(p.hidden_size), "feat_dim": str(feat_dim), "is_giga_am": "0",
                "model_type": "EncDecRNNTBPEModel",
                # sherpa-onnx decides TDT by this text containing "tdt".
                "url": f"transdec-{head.kind}", "comment": "exported by transdec",
            }
            metadata = {"encoder": {**sherpa, **common}, "decoder": common, "joiner": common}
            tokens = [_piece(model, i) for i in range(head.num_tokens)] + ["<blk>"]
        else:
            joint_dim = model.joint.output.in_features
            _export(IcefallLayoutEncoder(model.encoder, model.joint), (features, feature_lengths), paths["encoder"],
                    ["x", "x_lens"], ["encoder_out", "encoder_out_lens"],
                    {"x": {0: "N", 1: "T"}, "x_lens": {0: "N"}, "encoder_out": {0: "N", 1: "T_out"},
                     "encoder_out_lens": {0: "N"}}, opset)
            context = model.predictor.context_size
            _export(IcefallLayoutStatelessDecoder(model.predictor, model.joint, head),
                    (torch.tensor([[-1] * (context - 1) + [0], [3] * context], dtype=torch.int64),), paths["decoder"],
                    ["y"], ["decoder_out"], {"y": {0: "N"}, "decoder_out": {0: "N"}}, opset)
            _export(IcefallLayoutJoiner(model.joint, head), (torch.randn(2, joint_dim), torch.randn(2, joint_dim)),
                    paths["joiner"], ["encoder_out", "decoder_out"], ["logit"],
                    {"encoder_out": {0: "N"}, "decoder_out": {0: "N"}, "logit": {0: "N"}}, opset)
            decoder_meta = {"vocab_size": str(head.num_tokens + 1), "context_size": str(context)}
            encoder_meta = {"model_type": "transdec-conformer", "version": "1", "model_author": "transdec",
                            "comment": "exported by transdec"}
            metadata = {"encoder": {**encoder_meta, **common}, "decoder": {**decoder_meta, **common},
                        "joiner": {"joiner_dim": str(joint_dim), **common}}
            tokens = ["<blk>"] + [_piece(model, i) for i in range(head.num_tokens)]
    for name, path in paths.items():
        _add_metadata(onnx, path, metadata[name])
    tokens_path = out / "tokens.txt"
    tokens_path.write_text("".join(f"{piece} {i}\n" for i, piece in enumerate(tokens)), encoding="utf-8")
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None and hasattr(tokenizer, "save"):
        tokenizer.save(out / "tokenizer.model")  # the sentencepiece model: text and word starts for transdec
    export = OnnxExport(out, paths["encoder"], paths["decoder"], paths["joiner"], tokens_path, layout)
    if quantize == "int8":
        from transdec.export.onnx_quantize import quantize_export

        quantize_export(export)
    return export


def _float32_cpu_eval_copy(model: Any) -> Any:
    """``model`` itself when it is a float32 CPU model in eval mode, else a copy made so: the caller's model is never
    moved, cast or switched to eval mode by an export."""
    tensors = list(model.parameters()) + list(model.buffers())
    if not model.training and all(t.device.type == "cpu" and t.dtype in (torch.float32, torch.int64, torch.bool)
                                  for t in tensors):
        return model
    return copy.deepcopy(model).float().cpu().eval()


#: Graphs whose weights pass this many bytes keep them in a side file: protobuf caps a message at 2 GiB.
EXTERNAL_DATA_BYTES = 1_900_000_000


def external_data_name(path: Path) -> str:
    """The side file of a graph too large for one file: ``encoder.weights`` for ``encoder.onnx``, as sherpa-onnx's
    exports of parakeet-sized models name it."""
    return path.name.removesuffix(".onnx") + ".weights"


def _export(module: nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str],
            dynamic_axes: dict[str, dict[int, str]], opset: int) -> None:
    """Trace ``module`` into one ONNX file with its weights inside, or, past :data:`EXTERNAL_DATA_BYTES` of
    weights (a parakeet-sized encoder: 2.4 GB), into ``path`` and one side file (:func:`external_data_name`).

    The exporter writes a large graph's weights as a file per tensor, so it writes into a folder of its own,
    from which :func:`_add_metadata` saves the graph in place."""
    staging = path.parent / f".{path.stem}.export"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    with warnings.catch_warnings():
        # The tracer warns about every Python-level shape read; the dynamic axes are checked by the tests instead.
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, str(staging / path.name), input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic_axes, opset_version=opset, dynamo=False, do_constant_folding=True)


def _add_metadata(onnx: Any, path: Path, metadata: dict[str, str]) -> None:
    """Move the graph :func:`_export` staged to ``path`` with ``metadata``, its weights inside unless too large."""
    staging = path.parent / f".{path.stem}.export"
    proto = onnx.load(str(staging / path.name))  # with its external weights, if the exporter wrote any
    del proto.metadata_props[:]
    for key, value in metadata.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, str(value)
    weights = sum(len(t.raw_data) for t in proto.graph.initializer)
    side = path.parent / external_data_name(path)
    side.unlink(missing_ok=True)  # onnx appends to an existing side file
    if weights > EXTERNAL_DATA_BYTES:
        onnx.save(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=side.name,
                  size_threshold=1024)
        umask = os.umask(0)
        os.umask(umask)
        side.chmod(0o666 & ~umask)  # onnx creates it readable by its owner only; the graph beside it is not
    else:
        onnx.save(proto, str(path))
    del proto
    shutil.rmtree(staging, ignore_errors=True)


def _piece(model: Any, token_id: int) -> str:
    """A token's text for ``tokens.txt``; sherpa-onnx splits lines at whitespace, so pieces must not contain any."""
    piece = model.tokenizer.id_to_piece(token_id)
    return piece.replace(" ", "▁") or f"<tok{token_id}>"


def _subsampling_factor(model: Any) -> int:
    encoder = model.encoder
    if hasattr(encoder, "subsampling_factor"):
        return int(encoder.subsampling_factor)
    return int(encoder.config.subsampling_factor)


def export_layout(model: Any) -> str:
    """``"nemo"`` (NeMo-transducer layout) for LSTM predictors, ``"icefall"`` for stateless ones."""
    return "nemo" if isinstance(model.predictor, LSTMPredictor) else "icefall"


def front_end_metadata(model: Any) -> dict[str, Any]:
    """The model's front end as data: ``kind`` ("fbank": transdec's Kaldi filterbank; "nemo_mel": NeMo's mel
    front end), its ``config``, and sherpa-onnx's name for the normalisation (``normalize``)."""
    if hasattr(model, "features"):  # transdec's own model
        config = dataclasses.asdict(model.features.config)
        return {"kind": "fbank", "config": config,
                "normalize": "per_feature" if config["normalize"] == "per_feature" else ""}
    config = dataclasses.asdict(model.preprocessor.config)
    normalize = config["normalize"] if config["normalize"] in ("per_feature", "all_features") else ""
    return {"kind": "nemo_mel", "config": config, "normalize": normalize}


@contextlib.contextmanager
def _rotary_tables(model: Any, max_frames: int) -> Iterator[None]:
    """Swap transdec's rotary embedding (float64 angles) for float32 tables while exporting."""
    encoder = model.encoder
    rotary = getattr(encoder, "rotary", None)
    if rotary is None:
        yield
        return
    encoder.rotary = RotaryTable(rotary, max_frames)
    try:
        yield
    finally:
        encoder.rotary = rotary
