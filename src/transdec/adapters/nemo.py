"""NeMo ``.nemo`` Transducer checkpoints as transdec models, without NeMo.

``load_nemo("model.nemo")`` (and ``transdec.load_model("model.nemo")``, ``transdec transcribe --model model.nemo``)
returns a :class:`NemoTransducer`: NeMo's mel front end (:mod:`.nemo_features`), its Conformer encoder
(:mod:`.nemo_encoder`), and the predictor and joint in transdec's own classes with NeMo's weights renamed onto
them, so every transdec decoder runs on it.

Supported: ``EncDecRNNTBPEModel`` (RNN-T; TDT with ``loss.loss_name: tdt``; multi-blank with
``multiblank_rnnt``) and ``EncDecHybridRNNTCTCBPEModel`` (the Transducer head is decoded; the ``ctc_greedy``
strategy decodes the CTC head), with an LSTM ``RNNTDecoder`` or a ``StatelessTransducerDecoder``, an
``RNNTJoint``, a SentencePiece (``bpe``) tokenizer. Anything else is refused with the class or config key named.

Cache-aware streaming checkpoints (causal subsampling and convolutions, ``chunked_limited`` attention, one or
several look-aheads) load too: ``load_nemo(path, att_context_size=[70, 1])`` picks the look-ahead (default the
first, NeMo's), ``encode`` gives NeMo's offline frames with it, and :meth:`NemoTransducer.streaming_encoder`
encodes streams chunk by chunk with caches as NeMo's ``cache_aware_stream_step`` does (:mod:`.nemo_streaming`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor, nn

from transdec.adapters.nemo_archive import NemoArchive, read_nemo_archive
from transdec.adapters.nemo_encoder import NemoConformerEncoder, NemoEncoderConfig, UnsupportedConfig
from transdec.adapters.nemo_features import NemoMelConfig, NemoMelFrontEnd, recording_statistics
from transdec.adapters.nemo_predictor import NemoStatelessPredictor
from transdec.adapters.nemo_streaming import CacheAwareStreamingEncoder, streaming_problems
from transdec.audio import check_float_waveforms
from transdec.model.joint import JointNetwork
from transdec.model.predictors import LSTMPredictor
from transdec.model.tokenizer import Tokenizer
from transdec.protocol import HeadSpec
from transdec.sample_windows import encode_windows, plan_windows
from transdec.transcribing import Transcribing

SUPPORTED_CLASSES = ("EncDecRNNTBPEModel", "EncDecHybridRNNTCTCBPEModel")
#: Model classes that are known and not Transducers with a BPE tokenizer, with what they are.
_UNSUPPORTED_CLASSES = {
    "EncDecCTCModel": "a CTC-only model", "EncDecCTCModelBPE": "a CTC-only model",
    "EncDecMultiTaskModel": "an attention encoder-decoder (AED) model",
    "EncDecRNNTModel": "a Transducer with a character vocabulary (only BPE tokenizers are supported)",
    "EncDecHybridRNNTCTCModel": "a hybrid model with a character vocabulary (only BPE tokenizers are supported)",
}


@dataclass(frozen=True)
class NemoModelInfo:
    """A summary of the loaded model: its NeMo class and head."""

    model_class: str
    head: HeadSpec


class NemoTransducer(Transcribing, nn.Module):
    """A NeMo Transducer as a :class:`~transdec.protocol.SpeechModel`: ``encode`` audio, decode with any decoder.

    Modules: ``preprocessor`` (:class:`NemoMelFrontEnd`), ``encoder`` (:class:`NemoConformerEncoder`),
    ``predictor``, ``joint`` (:class:`~transdec.model.joint.JointNetwork`), ``ctc`` (hybrid models, else ``None``).
    """

    def __init__(self, info: NemoModelInfo, preprocessor: NemoMelFrontEnd, encoder: NemoConformerEncoder,
                 predictor: nn.Module, joint: JointNetwork, tokenizer: Tokenizer, ctc: nn.Linear | None) -> None:
        super().__init__()
        self.config = info
        self.head = info.head
        self.tokenizer = tokenizer
        self.preprocessor = preprocessor
        self.encoder = encoder
        self.predictor = predictor
        self.joint = joint
        self.ctc = ctc
        self.metadata: dict[str, Any] = {}
        # Features encode() computes instead of NeMo's, e.g. sherpa-onnx's (load_model's front_end).
        self.external_front_end: Callable[[Tensor, Tensor | None], tuple[Tensor, Tensor]] | None = None

    @property
    def device(self) -> torch.device:
        """The device of the encoder's weights, where :meth:`encode` runs."""
        return next(self.encoder.parameters()).device

    @property
    def sample_rate(self) -> int:
        return self.preprocessor.config.sample_rate

    @property
    def frame_shift_seconds(self) -> float:
        """Seconds per encoder frame (the unit of timestamps), e.g. 0.08 s for FastConformer."""
        return self.preprocessor.config.hop_length / self.sample_rate * self.encoder.subsampling_factor

    @property
    def frame_shift_samples(self) -> int:
        """Samples per encoder frame: the front end's hop times the encoder's subsampling."""
        return self.preprocessor.config.hop_length * self.encoder.subsampling_factor

    @property
    def receptive_field(self) -> int | None:
        """The encoder's (:attr:`NemoConformerEncoder.receptive_field`): ``None`` under full attention, bounded
        under limited-context or local attention (:meth:`use_local_attention`)."""
        return self.encoder.receptive_field

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def default_length_policy(self, device: torch.device | str) -> str:
        """``"none"``: each batch goes through the encoder as it is; there is no length policy to choose."""
        return "none"

    def encode(self, waveforms: Tensor, lengths: Tensor | None = None,
               length_policy: str | None = None) -> tuple[Tensor, Tensor]:
        """``waveforms [B, N]`` (float, in [-1, 1]) with ``lengths [B]`` samples -> ``(encoder_out [B, T, D], [B])``.

        ``length_policy`` is accepted, as :meth:`TransducerModel.encode` takes it, and has no effect.
        """
        check_float_waveforms(waveforms)
        front_end = self.preprocessor if self.external_front_end is None else self.external_front_end
        features, frame_counts = front_end(waveforms, lengths)
        return self.encode_features(features.to(waveforms.device), frame_counts.to(waveforms.device))

    def encode_features(self, features: Tensor, lengths: Tensor,
                        length_policy: str | None = None) -> tuple[Tensor, Tensor]:
        """``features [B, T, F]``, ``lengths [B]`` -> ``(encoder_out [B, T', D], lengths [B])``."""
        if features.shape[1] == 0:  # no frame at all: the convolutions cannot run on nothing
            dtype = self.encoder.output_dtype or self._dtype
            empty = features.new_zeros(features.shape[0], 0, self.encoder.output_dim, dtype=dtype)
            return empty, torch.zeros_like(lengths)
        return self.encoder(features.to(self._dtype), lengths)

    def encode_in_windows(self, waveform: Tensor, chunk_seconds: float,
                          context_seconds: float | None) -> tuple[Tensor, Tensor]:
        """``waveform [N]`` -> ``(encoder_out [1, T, D], [1])`` in windows of samples (:mod:`transdec.sample_windows`);
        see :meth:`~transdec.protocol.SpeechModel.encode_in_windows`.

        A front end that normalises each recording (``per_feature``, ``all_features``) is given the statistics of
        the whole recording instead of each window's (:func:`~transdec.adapters.nemo_features.recording_statistics`).
        """
        step = self.frame_shift_samples
        chunk_seconds, context_seconds = self._whole_attention_chunks(chunk_seconds, context_seconds)
        windows = plan_windows(waveform.shape[0], step, self.sample_rate, chunk_seconds, context_seconds,
                               self.receptive_field)
        statistics = recording_statistics(self.preprocessor, waveform, windows, step)
        if statistics is None:
            return encode_windows(self.encode, waveform, windows, step)

        def encode(samples: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
            return self.encode_features(*self.preprocessor(samples, lengths, statistics=statistics))

        return encode_windows(encode, waveform, windows, step)

    def _whole_attention_chunks(self, chunk_seconds: float,
                                context_seconds: float | None) -> tuple[float, float | None]:
        """Under ``chunked_limited`` attention a window must start on a whole attention chunk (chunks count from
        the first frame): the kept frames per window are rounded down, and the context up, to whole chunks."""
        size = self.encoder.attention_chunk
        if size == 1:
            return chunk_seconds, context_seconds
        shift = self.frame_shift_seconds
        chunk = max(size, int(chunk_seconds / shift) // size * size)
        context = self.receptive_field if context_seconds is None else int(round(context_seconds / shift))
        if context is None:
            return (chunk + 0.5) * shift, context_seconds
        return (chunk + 0.5) * shift, -(-context // size) * size * shift

    @property
    def att_context_sizes(self) -> list[list[int]]:
        """The look-aheads (``[left, right]`` attention contexts) the model was trained with; the first is NeMo's
        default."""
        return [list(c) for c in self.encoder.config.att_context_sizes]

    @property
    def att_context_size(self) -> list[int]:
        """The look-ahead :meth:`encode` uses (:meth:`set_att_context_size` changes it)."""
        return list(self.encoder.config.att_context_size)

    def set_att_context_size(self, att_context_size: Sequence[int]) -> None:
        """Encode with another of :attr:`att_context_sizes`, as NeMo's ``encoder.set_default_att_context_size``
        does; a look-ahead the model was not trained with raises ``ValueError``."""
        self.encoder.config.choose_att_context_size(att_context_size)

    @property
    def cache_aware(self) -> bool:
        """Whether this is a cache-aware streaming model that :meth:`streaming_encoder` streams."""
        return not streaming_problems(self, tuple(self.att_context_size))

    def streaming_encoder(self, att_context_size: Sequence[int] | None = None) -> CacheAwareStreamingEncoder:
        """A :class:`~transdec.adapters.nemo_streaming.CacheAwareStreamingEncoder` of this model (a
        ``StreamingEncoder``: many streams, chunk by chunk, with NeMo's caches) with look-ahead ``att_context_size``
        (default :attr:`att_context_size`).

        Raises ``ValueError`` saying why for a model that is not a cache-aware streaming one (no causal
        subsampling or convolutions, attention not ``chunked_limited``, normalised features, ...): those stream
        through ``transdec.streaming.BufferedEncoder`` instead."""
        return CacheAwareStreamingEncoder(self, att_context_size)

    @property
    def _dtype(self) -> torch.dtype:
        return next(self.encoder.parameters()).dtype

    def use_local_attention(self, left: int = 128, right: int = 128) -> None:
        """Switch the encoder to NeMo's sliding-window attention, ``left`` and ``right`` frames each side, as NeMo's
        ``change_attention_model("rel_pos_local_attn", [left, right])`` does for long recordings: memory then grows
        linearly with the length instead of quadratically. A model trained with full attention gives frames close
        to, not equal to, its full-attention ones (equal when the window covers the whole recording)."""
        if left < 1 or right < 1:
            raise ValueError(f"local attention needs a positive window, got [{left}, {right}]")
        self.encoder.config.self_attention_model = "rel_pos_local_attn"
        self.encoder.config.att_context_size = (int(left), int(right))
        self.encoder.config.att_context_style = "regular"

    def ctc_greedy(self, encoder_out: Tensor, lengths: Tensor) -> list[list[int]]:
        """Hybrid models: greedy CTC tokens per utterance (the ``ctc_greedy`` strategy's)."""
        from transdec.decoding import DecodingConfig, decode

        return [h.tokens for h in decode(self, encoder_out, lengths, DecodingConfig("ctc_greedy")).hypotheses()]



def load_nemo(path: str | os.PathLike[str], device: str | torch.device = "cpu",
              dtype: torch.dtype = torch.float32, att_context_size: Sequence[int] | None = None) -> NemoTransducer:
    """Load a ``.nemo`` Transducer in eval mode. Unsupported or damaged files raise ``ValueError`` saying why.

    ``att_context_size`` (``[left, right]``) picks one of the look-aheads of a multi-look-ahead model (NeMo's
    ``encoder.att_context_size`` list, e.g. ``[[70, 13], [70, 6], [70, 1], [70, 0]]``); default the first, as NeMo
    infers. One the model was not trained with raises ``ValueError``."""
    archive = read_nemo_archive(path)
    try:
        model = build_model(archive, att_context_size)
    except (KeyError, TypeError) as error:
        raise ValueError(f"{archive.path}: the model config lacks or mistypes a key it needs: {error!r}") from error
    except ValueError as error:
        raise ValueError(f"{archive.path}: {error}") from error
    model.metadata = {"nemo_version": archive.config.get("nemo_version"), "source": str(archive.path)}
    return model.to(device=device, dtype=dtype).eval()


def model_class(config: dict[str, Any]) -> str:
    """The NeMo model class a config names (``target``), refusing the unsupported ones by name."""
    target = str(config.get("target") or "")
    name = target.rsplit(".", 1)[-1]
    if not name:  # an old config without the class: judge by its sections
        if "decoder" in config and "joint" in config and "tokenizer" in config:
            return "EncDecHybridRNNTCTCBPEModel" if "aux_ctc" in config else "EncDecRNNTBPEModel"
        raise ValueError("the config names no model class (target) and has no Transducer decoder and joint")
    if name in _UNSUPPORTED_CLASSES:
        raise ValueError(f"model class {name} is {_UNSUPPORTED_CLASSES[name]}; transdec loads "
                         f"{' and '.join(SUPPORTED_CLASSES)} checkpoints")
    if name not in SUPPORTED_CLASSES:
        raise ValueError(f"model class {name} ({target}) is not supported; transdec loads "
                         f"{' and '.join(SUPPORTED_CLASSES)} checkpoints")
    return name


def head_spec(config: dict[str, Any], num_tokens: int) -> HeadSpec:
    """RNN-T, TDT or multi-blank, from the loss the model was trained with (as NeMo decides it), or, for a config
    without a loss section, from its decoding section."""
    loss = config.get("loss") or {}
    decoding = config.get("decoding") or {}
    name = loss.get("loss_name", "default")
    kwargs = loss.get(f"{name}_kwargs") or {}
    if name == "tdt" or (name == "default" and decoding.get("model_type") == "tdt"):
        durations = kwargs.get("durations") or decoding.get("durations")
        if not durations:
            raise ValueError("loss.tdt_kwargs.durations is missing from a TDT model's config")
        head = HeadSpec("tdt", num_tokens, durations=tuple(durations))
    elif name == "multiblank_rnnt" or (name == "default" and decoding.get("big_blank_durations")):
        durations = kwargs.get("big_blank_durations") or decoding.get("big_blank_durations")
        if not durations:
            raise ValueError("loss.multiblank_rnnt_kwargs.big_blank_durations is missing from a multi-blank config")
        head = HeadSpec("multiblank", num_tokens, big_blank_durations=tuple(durations))
    else:
        head = HeadSpec("rnnt", num_tokens)
    extra = (config.get("joint") or {}).get("num_extra_outputs")
    expected = len(head.durations) + len(head.big_blank_durations)
    if extra is not None and int(extra) != expected:
        raise ValueError(f"joint.num_extra_outputs={extra} does not fit a {head.kind} head with "
                         f"{expected} extra outputs (loss.loss_name={name!r})")
    return head


def load_tokenizer(archive: NemoArchive) -> Tokenizer:
    section = archive.config.get("tokenizer")
    if not section:
        raise ValueError("the config has no tokenizer section (character vocabularies are not supported)")
    kind = section.get("type")
    if kind != "bpe":
        raise ValueError(f"tokenizer.type={kind!r} is not supported (only SentencePiece, type 'bpe')")
    if not section.get("model_path"):
        raise ValueError("tokenizer.model_path is missing")
    try:
        return Tokenizer.from_bytes(archive.artifact(section["model_path"], "tokenizer.model_path"))
    except ValueError:
        raise
    except Exception as error:  # sentencepiece's own parse errors
        raise ValueError(f"tokenizer.model_path is not a SentencePiece model: {error}") from error


def build_predictor(config: dict[str, Any], head: HeadSpec) -> nn.Module:
    """The prediction network a ``decoder`` section describes, as a transdec predictor."""
    target = str(config.get("_target_", ""))
    prednet = config.get("prednet") or {}
    hidden = int(prednet["pred_hidden"])
    vocab = head.num_tokens + 1
    if target.endswith("StatelessTransducerDecoder"):
        norm = config.get("normalization_mode")
        if norm not in (None, "layer"):
            raise ValueError(f"decoder.normalization_mode={norm!r} is not supported (null or layer)")
        return NemoStatelessPredictor(vocab, hidden, int(config.get("context_size", 2)), head.predictor_blank_id,
                                      layer_norm=norm == "layer")
    if not target.endswith(("RNNTDecoder", "RNNTDecoderAdapter")):
        raise ValueError(f"decoder._target_={target!r} is not supported (RNNTDecoder or StatelessTransducerDecoder)")
    if config.get("normalization_mode"):
        raise ValueError(f"decoder.normalization_mode={config['normalization_mode']!r} is not supported (null)")
    if not config.get("blank_as_pad", True):
        raise ValueError("decoder.blank_as_pad=false is not supported")
    rnn_hidden = int(prednet.get("rnn_hidden_size", -1) or -1)
    if rnn_hidden > 0 and rnn_hidden != hidden:
        raise ValueError(f"decoder.prednet.rnn_hidden_size={rnn_hidden} (an LSTM with a projection) is not supported")
    return LSTMPredictor(vocab, hidden, int(prednet.get("pred_rnn_layers", 1)), blank_id=head.predictor_blank_id)


def build_joint(config: dict[str, Any], encoder_dim: int, predictor_dim: int, head: HeadSpec) -> JointNetwork:
    jointnet = config.get("jointnet") or {}
    activation = str(jointnet.get("activation", "relu")).lower()
    if activation not in ("relu", "tanh", "sigmoid"):
        raise ValueError(f"joint.jointnet.activation={activation!r} is not supported (relu, tanh or sigmoid)")
    target = str(config.get("_target_", ""))
    if not target.endswith(("RNNTJoint", "RNNTJointAdapter")):
        raise ValueError(f"joint._target_={target!r} is not supported (RNNTJoint)")
    return JointNetwork(encoder_dim, predictor_dim, int(jointnet["joint_hidden"]), head, activation=activation)


def config_problems(archive: NemoArchive) -> list[str]:
    """Every reason the archive's model cannot be loaded, from its config and tokenizer (empty: it can), all of
    them rather than the first: ``transdec inspect`` lists them."""
    config = archive.config
    problems: list[str] = []

    def check(step: Callable[[], Any]) -> Any:
        try:
            return step()
        except UnsupportedConfig as error:
            problems.extend(error.problems)
        except ValueError as error:
            problems.append(str(error))
        except (KeyError, TypeError) as error:
            problems.append(f"the config lacks or mistypes a key it needs: {error!r}")
        return None

    check(lambda: model_class(config))
    sections = [s for s in ("preprocessor", "encoder", "decoder", "joint") if isinstance(config.get(s), dict)]
    problems += [f"the config has no {s} section" for s in ("preprocessor", "encoder", "decoder", "joint")
                 if s not in sections]
    tokenizer = check(lambda: load_tokenizer(archive))
    head = check(lambda: head_spec(config, tokenizer.vocab_size)) if tokenizer is not None else None
    if "preprocessor" in sections:
        check(lambda: NemoMelConfig.from_nemo(config["preprocessor"]))
    encoder = check(lambda: NemoEncoderConfig.from_nemo(config["encoder"])) if "encoder" in sections else None
    if head is not None and "decoder" in sections:
        with torch.device("meta"):
            predictor = check(lambda: build_predictor(config["decoder"], head))
            if "joint" in sections:
                encoder_dim = 1 if encoder is None else encoder.feat_out if encoder.feat_out > 0 else encoder.d_model
                predictor_dim = predictor.output_size if predictor is not None else 1
                check(lambda: build_joint(config["joint"], encoder_dim, predictor_dim, head))
    return problems


def build_model(archive: NemoArchive, att_context_size: Sequence[int] | None = None) -> NemoTransducer:
    problems = config_problems(archive)
    if problems:
        raise UnsupportedConfig(problems)
    config = archive.config
    name = model_class(config)
    tokenizer = load_tokenizer(archive)
    head = head_spec(config, tokenizer.vocab_size)
    preprocessor = NemoMelFrontEnd(NemoMelConfig.from_nemo(config["preprocessor"]))
    # The networks are made without memory ("meta" tensors), and the checkpoint's tensors become their weights:
    # no random initialisation to compute and no second copy of a model of billions of parameters.
    with torch.device("meta"):
        encoder = NemoConformerEncoder(NemoEncoderConfig.from_nemo(config["encoder"], att_context_size))
        predictor = build_predictor(config["decoder"], head)
        joint = build_joint(config["joint"], encoder.output_dim, predictor.output_size, head)
        ctc = nn.Linear(encoder.output_dim, head.num_tokens + 1) if name == "EncDecHybridRNNTCTCBPEModel" else None
    model = NemoTransducer(NemoModelInfo(name, head), preprocessor, encoder, predictor, joint, tokenizer, ctc)
    load_weights(model, archive.state_dict)
    return model


def transdec_state_dict(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """NeMo's parameter names -> :class:`NemoTransducer`'s (unknown names are kept, for the caller to report)."""
    joint_layers = sorted(int(m.group(1)) for k in state if (m := re.fullmatch(r"joint\.joint_net\.(\d+)\.weight", k)))
    renames = [
        (r"preprocessor\.featurizer\.", "preprocessor."),
        (r"decoder\.prediction\.embed\.", "predictor.embedding."),
        (r"decoder\.prediction\.embeds\.", "predictor.embeds."),
        (r"decoder\.prediction\.dec_rnn\.lstm\.", "predictor.lstm."),
        (r"joint\.enc\.", "joint.encoder_projection."),
        (r"joint\.pred\.", "joint.predictor_projection."),
        (r"ctc_decoder\.decoder_layers\.0\.", "ctc."),
    ]
    if joint_layers:
        renames.append((rf"joint\.joint_net\.{joint_layers[-1]}\.", "joint.output."))
    out = {}
    for key, tensor in state.items():
        for pattern, replacement in renames:
            if re.match(pattern, key):
                key = re.sub(pattern, replacement, key, count=1)
                break
        if key.startswith("ctc.") and tensor.dim() == 3:
            tensor = tensor.squeeze(-1)  # NeMo's CTC head is a kernel-1 Conv1d: [V + 1, D, 1]
        out[key] = tensor
    return out


def load_weights(model: NemoTransducer, state: dict[str, Tensor]) -> None:
    """Load NeMo's weights; a missing or unexpected parameter, or a shape mismatch, is a ``ValueError``."""
    renamed = transdec_state_dict(state)
    expected = model.state_dict()
    missing = [k for k in expected if k not in renamed and not k.startswith("preprocessor.")]
    unexpected = [k for k in renamed if k not in expected]
    if missing or unexpected:
        raise ValueError(f"the weights do not fit the model the config describes: missing {missing[:8]}"
                         f"{' ...' if len(missing) > 8 else ''}, unexpected {unexpected[:8]}"
                         f"{' ...' if len(unexpected) > 8 else ''}")
    for key, tensor in renamed.items():
        if tensor.shape != expected[key].shape:
            raise ValueError(f"weight {key} has shape {tuple(tensor.shape)}, the config implies "
                             f"{tuple(expected[key].shape)}")
    # The filterbank and window are computed from the config when a checkpoint lacks them.
    model.load_state_dict(renamed, strict=False, assign=True)
