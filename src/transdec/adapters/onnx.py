"""ONNX Transducers (transdec's own exports, sherpa-onnx's NeMo-transducer and icefall exports) as transdec models.

``load_onnx("dir/")`` (and ``transdec.load_model("dir/")``) returns an :class:`OnnxTransducer`: the encoder,
the predictor step (state as explicit inputs and outputs) and the joiner run in ONNX Runtime sessions behind
transdec's model protocol (:mod:`transdec.protocol`), so every transdec decoder runs on them, batched.

The directory holds ``encoder*.onnx``, ``decoder*.onnx``, ``joiner*.onnx`` (float32 or ``.int8.onnx``, chosen by
``variant``) and ``tokens.txt``. The layout comes from the metadata: ``transdec_*`` keys (transdec's exports,
:mod:`transdec.export.onnx`), else ``pred_rnn_layers`` on the encoder (NeMo layout: LSTM state ``[L, N, H]``, TDT
when the ``url`` names "tdt"), else icefall's format (:mod:`transdec.adapters.onnx_icefall`: ``context_size`` on
the decoder, stateless, blank 0; sherpa-onnx's published Zipformer and Conformer transducers). Streaming exports
(encoders with cached state inputs) are refused. Scores are raw joiner logits in transdec's output layout
(icefall's blank-first order is undone here).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transdec.adapters.onnx_features import sherpa_front_end
from transdec.adapters.onnx_files import TokensTokenizer, find_parts, int_metadata, read_tokens
from transdec.adapters.onnx_icefall import SUBSAMPLING_FACTOR, is_icefall, read_icefall, refuse_streaming
from transdec.adapters.onnx_parts import OnnxJoint, OnnxLstmPredictor, OnnxStatelessPredictor, numpy_of
from transdec.audio import check_float_waveforms
from transdec.protocol import HeadSpec
from transdec.sample_windows import encode_windows, plan_windows
from transdec.transcribing import Transcribing


@dataclass(frozen=True)
class OnnxModelInfo:
    """What was read from an export: its layout, head, subsampling factor and front end description."""

    layout: str
    head: HeadSpec
    subsampling_factor: int
    front_end: dict[str, Any] | None
    files: dict[str, Path]
    receptive_field: int | None = None

    @property
    def sample_rate(self) -> int:
        """The front end's sample rate (16 kHz where the metadata names none)."""
        return int((self.front_end or {}).get("config", {}).get("sample_rate", 16000))

    @property
    def feature_shift_ms(self) -> float:
        """Milliseconds between two feature frames: the front end's hop, or its frame shift (10 ms where the
        metadata names neither)."""
        config = (self.front_end or {}).get("config", {})
        if "hop_length" in config:
            return float(config["hop_length"] * 1000 / self.sample_rate)
        return float(config.get("frame_shift_ms", 10.0))


@dataclass(frozen=True)
class OnnxEncoderInfo:
    """What is known of an exported encoder: its output width (``-1`` where the export leaves it symbolic), its
    subsampling, and its receptive field in encoder frames where the export records it (transdec's exports of
    encoders with limited attention; ``None``: unknown, taken as unbounded)."""

    output_dim: int
    subsampling_factor: int
    receptive_field: int | None = None


class OnnxTransducer(Transcribing):
    """An ONNX Transducer as a :class:`~transdec.protocol.SpeechModel`: ``encode`` audio (or
    ``encode_features``), then decode with any transdec decoder."""

    def __init__(self, info: OnnxModelInfo, encoder: Any, predictor: Any, joint: OnnxJoint, tokenizer: Any,
                 front_end: Any | None) -> None:
        self.config = info
        self.head = info.head
        self.encoder_session = encoder
        self.predictor = predictor
        self.joint = joint
        self.tokenizer = tokenizer
        self.front_end = front_end
        self.metadata: dict[str, Any] = {"source": str(info.files["encoder"].parent), "layout": info.layout}
        self._encoder_inputs = [i.name for i in encoder.get_inputs()]
        # icefall exports made with --use-int32-inputs take int32 lengths; everything else int64.
        self._length_dtype = np.int32 if encoder.get_inputs()[1].type == "tensor(int32)" else np.int64
        dims = encoder.get_outputs()[0].shape
        width = dims[1] if info.layout == "nemo" else dims[2]
        self.encoder = OnnxEncoderInfo(width if isinstance(width, int) else -1, info.subsampling_factor,
                                       info.receptive_field)

    @property
    def device(self) -> torch.device:
        """The CPU: the sessions run on ONNX Runtime's CPU provider."""
        return torch.device("cpu")

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    @property
    def frame_shift_seconds(self) -> float:
        """Seconds per encoder frame (the unit of timestamps)."""
        return self.config.feature_shift_ms / 1000 * self.config.subsampling_factor

    @property
    def frame_shift_samples(self) -> int:
        """Samples per encoder frame: the feature hop in whole samples times the encoder's subsampling."""
        return round(self.config.feature_shift_ms * self.sample_rate / 1000) * self.config.subsampling_factor

    @property
    def receptive_field(self) -> int | None:
        """Encoder frames on each side that an output frame depends on, where the export records it (transdec's
        exports of encoders with limited attention); else ``None``, as nothing bounds it."""
        return self.config.receptive_field

    def default_length_policy(self, device: Any) -> str:
        """``"none"``: ONNX Runtime has no per-shape plans to cache, so there is no length policy to choose."""
        return "none"

    def eval(self) -> OnnxTransducer:
        return self

    def to(self, *args: Any, **kwargs: Any) -> OnnxTransducer:
        """ONNX Runtime sessions run where they were created (the CPU); other devices are refused."""
        device = kwargs.get("device", args[0] if args and not isinstance(args[0], torch.dtype) else "cpu")
        if torch.device(device).type != "cpu":
            raise ValueError("ONNX models run on the CPU through ONNX Runtime; use device='cpu'")
        return self

    def encode(self, waveforms: Tensor, lengths: Tensor | None = None,
               length_policy: str | None = None) -> tuple[Tensor, Tensor]:
        """``waveforms [B, N]`` in [-1, 1], ``lengths [B]`` -> ``(encoder_out [B, T, D], lengths [B])``."""
        if self.front_end is None:
            raise ValueError("this export does not say which features its encoder takes; use encode_features")
        check_float_waveforms(waveforms)
        features, counts = self.front_end(waveforms.float(), lengths)
        return self.encode_features(features, counts)

    def encode_features(self, features: Tensor, lengths: Tensor,
                        length_policy: str | None = None) -> tuple[Tensor, Tensor]:
        """``features [B, T, F]``, ``lengths [B]`` -> ``(encoder_out [B, T', D], lengths [B])``."""
        features = features.float()
        if self.config.layout == "nemo":
            features = features.transpose(1, 2)
        out, out_lengths = self.encoder_session.run(None, {
            self._encoder_inputs[0]: numpy_of(features),
            self._encoder_inputs[1]: numpy_of(lengths).astype(self._length_dtype, copy=False)})
        encoded = torch.from_numpy(out)
        if self.config.layout == "nemo":
            encoded = encoded.transpose(1, 2)
        return encoded, torch.from_numpy(out_lengths).long()

    def encode_in_windows(self, waveform: Tensor, chunk_seconds: float,
                          context_seconds: float | None) -> tuple[Tensor, Tensor]:
        """``waveform [N]`` -> ``(encoder_out [1, T, D], [1])`` in windows of samples, each through :meth:`encode`
        (:mod:`transdec.sample_windows`); see :meth:`~transdec.protocol.SpeechModel.encode_in_windows`. A front end
        that normalises per recording normalises each window by itself here."""
        step = self.frame_shift_samples
        windows = plan_windows(waveform.shape[0], step, self.sample_rate, chunk_seconds, context_seconds,
                               self.receptive_field)
        return encode_windows(self.encode, waveform, windows, step)



def load_onnx(path: str | os.PathLike[str], num_threads: int | None = None, front_end: str = "model",
              variant: str = "fp32") -> OnnxTransducer:
    """Load an ONNX Transducer directory (see the module docstring).

    Args:
        num_threads: ONNX Runtime intra-op threads of the encoder's session (default: PyTorch's thread count,
            which a PyTorch encoder would use). The decoder's and joiner's sessions take one: decoding calls them
            with a few rows at a time, where more threads only wait for each other (docs/gpu.md, "CPU
            settings").
        front_end: what :meth:`OnnxTransducer.encode` computes: ``"model"``, the features the export's metadata
            names (exactly PyTorch's for transdec's exports; sherpa-onnx's for icefall-format exports, which is
            what icefall trains on); ``"sherpa"``, the features sherpa-onnx computes for this layout
            (:class:`~transdec.adapters.onnx_features.SherpaFrontEnd`; needs kaldi-native-fbank), so that
            transcripts equal sherpa-onnx's.
        variant: which files to load where a directory has float32 and int8 ones side by side
            (``encoder-epoch-99-avg-1.onnx`` and ``encoder-epoch-99-avg-1.int8.onnx``): ``"fp32"`` (the default) or
            ``"int8"``; a part with only one of the two loads that one
            (:func:`~transdec.adapters.onnx_files.find_parts`).
    """
    if front_end not in ("model", "sherpa"):
        raise ValueError(f"front_end must be 'model' or 'sherpa', got {front_end!r}")
    try:
        import onnxruntime as ort  # optional dependency, imported only here
    except ImportError as error:
        raise ImportError("ONNX models run on ONNX Runtime (onnxruntime), which is not installed") from error

    directory = Path(path)
    files = find_parts(directory, variant)
    if num_threads is None:
        num_threads = torch.get_num_threads()
    sessions = {}
    for part, file in files.items():
        options = ort.SessionOptions()
        options.intra_op_num_threads = num_threads if part == "encoder" else 1
        options.inter_op_num_threads = 1
        try:
            sessions[part] = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
        except Exception as error:  # ONNX Runtime's own load errors
            raise ValueError(f"{file}: ONNX Runtime cannot load it: {error}") from error
    meta = {part: dict(s.get_modelmeta().custom_metadata_map) for part, s in sessions.items()}
    refuse_streaming(directory, files, sessions, meta)
    pieces = read_tokens(directory / "tokens.txt")
    info, predictor = _describe(directory, files, sessions, meta, pieces)
    tokenizer: Any = TokensTokenizer(_token_pieces(info, pieces))
    if (directory / "tokenizer.model").is_file():
        from transdec.model.tokenizer import Tokenizer

        tokenizer = Tokenizer.load(directory / "tokenizer.model")
        if tokenizer.vocab_size != info.head.num_tokens:
            raise ValueError(f"{directory}/tokenizer.model has {tokenizer.vocab_size} tokens but the model has "
                             f"{info.head.num_tokens}")
    # An int8 joiner (sherpa-onnx's name for one) is run a pair at a time: see OnnxJoint.
    joint = OnnxJoint(sessions["joiner"], info.layout, info.head,
                      one_row_per_call=files["joiner"].name.endswith(".int8.onnx"))
    features = _front_end(info.front_end) if front_end == "model" else sherpa_front_end(info.layout, info.front_end)
    return OnnxTransducer(info, sessions["encoder"], predictor, joint, tokenizer, features)


def _describe(directory: Path, files: dict[str, Path], sessions: dict[str, Any], meta: dict[str, dict[str, str]],
              pieces: list[str]) -> tuple[OnnxModelInfo, Any]:
    """Layout, head and predictor from the metadata; checks ``tokens.txt`` against them."""
    enc, dec = meta["encoder"], meta["decoder"]
    front_end = json.loads(enc["transdec_front_end"]) if "transdec_front_end" in enc else None
    if "transdec_layout" in enc:
        for part in ("decoder", "joiner"):
            if meta[part].get("transdec_head") != enc.get("transdec_head"):
                raise ValueError(f"{files[part]}: its transdec_head metadata differs from the encoder's: the files "
                                 "come from different exports")
        layout = enc["transdec_layout"]
        head = HeadSpec(**json.loads(enc["transdec_head"]))
        subsampling = int(enc["transdec_subsampling_factor"])
    elif "pred_rnn_layers" in enc:
        layout = "nemo"
        num_tokens = int_metadata(enc, "vocab_size", files["encoder"])
        subsampling = int_metadata(enc, "subsampling_factor", files["encoder"])
        if "tdt" in enc.get("url", "").lower():
            extra = _joiner_width(sessions["joiner"], layout, enc, dec) - num_tokens - 1
            head = HeadSpec("tdt", num_tokens, durations=tuple(range(extra)))
        else:
            head = HeadSpec("rnnt", num_tokens)
        front_end = {"kind": "nemo_mel", "normalize": enc.get("normalize_type", ""),
                     "config": {"num_mel_bins": int(enc.get("feat_dim", 80)), "sample_rate": 16000,
                                "hop_length": 160, "win_length": 400, "n_fft": 512}}
    elif is_icefall(sessions, meta):
        layout = "icefall"
        icefall = read_icefall(files, sessions, meta)
        head = HeadSpec("rnnt", icefall.num_tokens)
        subsampling = int(enc.get("subsampling_factor", SUBSAMPLING_FACTOR))
        front_end = icefall.front_end()
    else:
        raise ValueError(f"{directory}: cannot tell the layout: no transdec metadata, no pred_rnn_layers on the "
                         "encoder (NeMo layout) and no context_size on the decoder (icefall layout)")
    expected = head.num_tokens + 1
    if layout == "icefall" and len(pieces) > expected and all(p.startswith("#") for p in pieces[expected:]):
        del pieces[expected:]  # disambiguation symbols (#0, ...) that some icefall tokens.txt files end with
    if len(pieces) != expected:
        raise ValueError(f"{directory}/tokens.txt has {len(pieces)} entries but the model has {head.num_tokens} "
                         f"tokens and a blank ({expected})")
    blank_line = head.num_tokens if layout == "nemo" else 0
    if pieces[blank_line] not in ("<blk>", "<blank>", "<eps>"):
        raise ValueError(f"{directory}/tokens.txt: entry {blank_line} should be the blank (<blk>), got "
                         f"{pieces[blank_line]!r}")
    width = _joiner_width(sessions["joiner"], layout, enc, dec)
    if width != head.num_outputs:
        raise ValueError(f"{files['joiner']}: the joiner has {width} outputs but the metadata describes a "
                         f"{head.kind} head with {head.num_outputs}")
    if layout == "nemo":
        layers = int_metadata(enc, "pred_rnn_layers", files["encoder"]) if "pred_rnn_layers" in enc else None
        shape = sessions["decoder"].get_inputs()[2].shape
        num_layers = layers or int(shape[0])
        hidden = int_metadata(enc, "pred_hidden", files["encoder"]) if "pred_hidden" in enc else int(shape[2])
        predictor: Any = OnnxLstmPredictor(sessions["decoder"], num_layers, hidden)
    else:
        predictor = OnnxStatelessPredictor(sessions["decoder"], int_metadata(dec, "context_size", files["decoder"]),
                                           head.num_tokens)
    field = int(enc["transdec_receptive_field"]) if "transdec_receptive_field" in enc else None
    return OnnxModelInfo(layout, head, subsampling, front_end, files, field), predictor


def _joiner_width(session: Any, layout: str, enc: dict[str, str], dec: dict[str, str]) -> int:
    """Number of joiner outputs, from its declared shape or, where that is symbolic, from one run on zeros."""
    shape = session.get_outputs()[0].shape
    if isinstance(shape[-1], int):
        return shape[-1]
    inputs = session.get_inputs()
    feeds = {}
    for spec in inputs:
        dims = [1 if not isinstance(d, int) else d for d in spec.shape]
        feeds[spec.name] = np.zeros(dims, dtype=np.float32)
    return int(session.run(None, feeds)[0].shape[-1])


def _token_pieces(info: OnnxModelInfo, pieces: list[str]) -> list[str]:
    """The ``V`` token pieces in transdec's id order (without the blank)."""
    return pieces[: info.head.num_tokens] if info.layout == "nemo" else pieces[1:]


def _front_end(description: dict[str, Any] | None) -> Any:
    """The feature extractor an export's metadata describes, or ``None``."""
    if not description or "kind" not in description:
        return None
    config = dict(description.get("config", {}))
    if description["kind"] == "fbank":
        from transdec.model.features import FbankConfig, FbankExtractor

        fields = set(FbankConfig.__dataclass_fields__)
        return FbankExtractor(FbankConfig(**{k: v for k, v in config.items() if k in fields}))
    if description["kind"] == "nemo_mel":
        from transdec.adapters.nemo_features import NemoMelConfig, NemoMelFrontEnd

        fields = set(NemoMelConfig.__dataclass_fields__)
        config = {k: v for k, v in config.items() if k in fields}
        if description.get("normalize") is not None and "normalize" not in config:
            config["normalize"] = description["normalize"] or "none"
        return NemoMelFrontEnd(NemoMelConfig(**config))
    if description["kind"] == "sherpa":
        return sherpa_front_end(description["layout"], description)
    return None
