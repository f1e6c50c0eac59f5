"""The complete speech model: waveform -> features -> Conformer encoder -> predictor + joint + head.

A :class:`TransducerModel` is a :class:`~transdec.protocol.SpeechModel` (so a
:class:`~transdec.protocol.DecodingModel`): every decoder runs on it directly, and transcription takes it. Its
configuration is plain data (:class:`ModelConfig`), which is what makes checkpoints self-describing (see
:mod:`transdec.model.checkpoint`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transdec.audio import check_float_waveforms
from transdec.model.conformer import ConformerConfig, ConformerEncoder
from transdec.model.features import FbankConfig, FbankExtractor
from transdec.model.joint import JointNetwork
from transdec.model.predictors import LSTMPredictor, StatelessPredictor
from transdec.model.tokenizer import Tokenizer
from transdec.model.windowed_features import encode_feature_windows
from transdec.protocol import HeadSpec
from transdec.transcribing import Transcribing


#: How :meth:`TransducerModel.encode` treats input lengths on a GPU. cuDNN builds an execution plan for every
#: convolution input shape it has not seen before: on an H100 the bundled encoder took 344 ms for a batch of
#: 16 x 10 s at a new length and 13 ms at a length it had seen, which made ``transdec evaluate --device cuda``
#: slower than a CPU (``bench/encoder_lengths.py``).
#:
#: - ``"pad"``: pad each batch to a whole number of ``pad_seconds``, so that lengths fall into a few buckets
#:   and cuDNN builds the plans of each bucket once (13.1 ms a batch). The padding is masked, so the encoder
#:   output of the real frames and the output lengths are what they are without it.
#: - ``"no_cudnn"``: run the encoder without cuDNN; PyTorch's own convolution kernels need no plan (13.9 ms a
#:   batch at new lengths).
#: - ``"pad_no_cudnn"``: both. ``"none"``: neither.
LengthPolicy = Literal["pad", "no_cudnn", "pad_no_cudnn", "none"]
LENGTH_POLICIES: tuple[str, ...] = ("pad", "no_cudnn", "pad_no_cudnn", "none")
#: The GPU default, the fastest measured at new lengths (``bench/encoder_lengths.py`` on an H100, B=16 x 10 s:
#: 13.1 ms against 13.6 ms at a repeated length without a policy, 17.1 ms for "no_cudnn" and 18.5 ms for "pad";
#: docs/benchmarks.md). "pad" alone still pays for cuDNN's plans once per bucket, and a test set sorted by length
#: meets a new bucket at almost every batch.
DEFAULT_CUDA_LENGTH_POLICY: LengthPolicy = "pad_no_cudnn"


@dataclass
class PredictorConfig:
    """``kind="lstm"``: ``num_layers`` LSTM layers of ``hidden_size``; ``kind="stateless"``: embeddings of the
    last ``context_size`` labels, concatenated to ``hidden_size``."""

    kind: Literal["lstm", "stateless"] = "lstm"
    hidden_size: int = 256
    num_layers: int = 1
    context_size: int = 2


@dataclass
class ModelConfig:
    """Everything needed to rebuild a :class:`TransducerModel` (weights and tokenizer aside).

    Attributes:
        head: the output head; ``head.num_tokens`` is the tokenizer's vocabulary size.
        features: log-mel front end.
        encoder: Conformer shape.
        predictor: prediction network shape.
        joint_dim: hidden width of the joint network.
        sigma: logit under-normalisation used in training (multi-blank and TDT; 0 for RNN-T).
        ctc_head: whether the model has an auxiliary CTC output on the encoder (used in training only).
    """

    head: HeadSpec
    features: FbankConfig = field(default_factory=lambda: FbankConfig(normalize="per_feature"))
    encoder: ConformerConfig = field(default_factory=ConformerConfig)
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    joint_dim: int = 256
    sigma: float = 0.0
    ctc_head: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (tuples become lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error, so a corrupted config fails loudly."""
        data = dict(data)
        return cls(
            head=HeadSpec(**data.pop("head")),
            features=FbankConfig(**data.pop("features")),
            encoder=ConformerConfig(**data.pop("encoder")),
            predictor=PredictorConfig(**data.pop("predictor")),
            **data,
        )


class TransducerModel(Transcribing, nn.Module):
    """A trained Transducer: :meth:`encode` audio, then decode with any transdec decoder.

    Attributes used by decoders (the :class:`~transdec.protocol.DecodingModel` protocol): ``head``,
    ``predictor``, ``joint``. ``tokenizer`` maps token ids to text. The rest of
    :class:`~transdec.protocol.SpeechModel` is what transcription reads.
    """

    def __init__(self, config: ModelConfig, tokenizer: Tokenizer) -> None:
        super().__init__()
        if tokenizer.vocab_size != config.head.num_tokens:
            raise ValueError(
                f"the tokenizer has {tokenizer.vocab_size} tokens but the head expects {config.head.num_tokens}"
            )
        if config.head.kind == "rnnt" and config.sigma:
            raise ValueError("sigma (logit under-normalisation) is for multi-blank and TDT heads only")
        self.config = config
        self.tokenizer = tokenizer
        self.head = config.head
        self.features = FbankExtractor(config.features)
        self.encoder = ConformerEncoder(config.encoder)
        vocab = config.head.num_tokens + 1  # tokens and the blank / start-of-sequence
        p = config.predictor
        if p.kind == "lstm":
            self.predictor: LSTMPredictor | StatelessPredictor = LSTMPredictor(
                vocab, p.hidden_size, p.num_layers, blank_id=config.head.predictor_blank_id
            )
        elif p.kind == "stateless":
            self.predictor = StatelessPredictor(vocab, p.hidden_size, p.context_size,
                                                blank_id=config.head.predictor_blank_id)
        else:
            raise ValueError(f"unknown predictor kind {p.kind!r}; choose 'lstm' or 'stateless'")
        self.joint = JointNetwork(config.encoder.model_dim, p.hidden_size, config.joint_dim, config.head)
        self.ctc = nn.Linear(config.encoder.model_dim, vocab) if config.ctc_head else None
        # Run-time settings, not part of the model (checkpoints do not carry them): how encode() treats input
        # lengths (see LengthPolicy; None: the device's default, see default_length_policy), and the length
        # buckets of the "pad" policies, in seconds.
        self.length_policy: LengthPolicy | None = None
        self.pad_seconds: float = 1.0
        # Features encode() computes instead of the model's own, e.g. sherpa-onnx's (load_model's front_end).
        self.external_front_end: Callable[[Tensor, Tensor | None], tuple[Tensor, Tensor]] | None = None

    @property
    def device(self) -> torch.device:
        """The device of the weights, where :meth:`encode` runs."""
        return next(self.parameters()).device

    @property
    def sample_rate(self) -> int:
        return self.config.features.sample_rate

    @property
    def frame_shift_seconds(self) -> float:
        """Duration of one encoder frame (the unit of timestamps), e.g. 0.08 s at 8x subsampling."""
        return self.config.features.frame_shift_ms / 1000 * self.config.encoder.subsampling_factor

    @property
    def receptive_field(self) -> int | None:
        """The encoder's (:attr:`ConformerEncoder.receptive_field`): ``None`` under full attention."""
        return self.encoder.receptive_field

    @property
    def _dtype(self) -> torch.dtype:
        """The encoder's dtype, which its inputs are cast to."""
        return next(self.encoder.parameters()).dtype

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def encode(self, waveforms: Tensor, lengths: Tensor | None = None,
               length_policy: LengthPolicy | None = None) -> tuple[Tensor, Tensor]:
        """``waveforms [B, N]`` at :attr:`sample_rate`, ``lengths [B]`` samples -> ``(encoder_out [B, T, D], [B])``.

        ``length_policy`` (see :data:`LengthPolicy`) defaults to the model's :attr:`length_policy`, and where
        that is ``None`` to :meth:`default_length_policy` of the input's device. In training mode it defaults
        to ``"none"``: training pads its batches itself (``TrainConfig.pad_to_seconds``) and keeps cuDNN's
        fast backward kernels. The output is the same under every policy, up to float rounding.

        Waveforms of any floating dtype are taken (the encoder runs in the model's dtype); integer PCM is
        refused, as its scale is not that of audio in [-1, 1]. Audio shorter than one feature window (25 ms)
        gives no encoder frame.
        """
        check_float_waveforms(waveforms)
        policy = self._length_policy(waveforms, length_policy)
        if self.external_front_end is not None:
            features, frame_counts = self.external_front_end(waveforms, lengths)
            return self.encode_features(features.to(waveforms.device), frame_counts.to(waveforms.device), policy)
        frames = self.features.num_frames(waveforms.shape[1])
        if frames == 0:  # the encoder cannot run on no frames
            features, frame_counts = self.features(waveforms, lengths)  # checks the inputs, counts 0 frames
            dtype = self.encoder.output_dtype or self._dtype
            return features.new_zeros(features.shape[0], 0, self.encoder.output_dim, dtype=dtype), frame_counts
        if policy in ("pad", "pad_no_cudnn") and frames > 0:
            # Pad the samples to exactly the bucket's frames, so that the features' FFTs see repeated shapes
            # too. The features of the real frames do not read past their samples.
            if lengths is None:
                lengths = torch.full((waveforms.shape[0],), waveforms.shape[1], device=waveforms.device)
            shift, window = self.config.features.frame_shift, self.config.features.window_length
            samples = (self._padded_frames(frames) - 1) * shift + window
            waveforms = F.pad(waveforms, (0, max(0, samples - waveforms.shape[1])))
        features, frame_counts = self.features(waveforms, lengths)
        # A view of the real frames: encode_features pads them to the same bucket again.
        return self.encode_features(features[:, :frames], frame_counts, policy)

    def encode_features(self, features: Tensor, lengths: Tensor,
                        length_policy: LengthPolicy | None = None) -> tuple[Tensor, Tensor]:
        """``features [B, T, F]``, ``lengths [B]`` -> ``(encoder_out [B, T', D], lengths [B])``; ``length_policy``
        as in :meth:`encode`."""
        policy = self._length_policy(features, length_policy)
        features = features.to(self._dtype)
        frames = features.shape[1]
        if policy in ("pad", "pad_no_cudnn"):
            # Zero frames past every length: the encoder masks them (convolutions, attention keys), so the real
            # frames' outputs do not change; the padded frames' outputs are cut off below.
            features = F.pad(features, (0, 0, 0, self._padded_frames(frames) - frames))
        with _cudnn_disabled() if policy in ("no_cudnn", "pad_no_cudnn") else contextlib.nullcontext():
            encoded, lengths = self.encoder(features, lengths)
        return encoded[:, : self.encoder.output_frames(frames)], lengths

    def encode_in_windows(self, waveform: Tensor, chunk_seconds: float,
                          context_seconds: float | None) -> tuple[Tensor, Tensor]:
        """``waveform [N]`` -> ``(encoder_out [1, T, D], [1])`` in windows of features normalised over the whole
        recording (:mod:`transdec.model.windowed_features`); see
        :meth:`~transdec.protocol.SpeechModel.encode_in_windows`."""
        return encode_feature_windows(self.config.features, self.encoder, self.encode_features, waveform,
                                      chunk_seconds, context_seconds)

    def default_length_policy(self, device: torch.device | str) -> LengthPolicy:
        """The policy :meth:`encode` follows on ``device`` in eval mode when none is passed: :attr:`length_policy`
        if set, else :data:`DEFAULT_CUDA_LENGTH_POLICY` on a GPU and ``"none"`` on a CPU, where a new shape
        costs nothing and padding would only add work."""
        if self.length_policy is not None:
            return self.length_policy
        return DEFAULT_CUDA_LENGTH_POLICY if torch.device(device).type == "cuda" else "none"

    def _length_policy(self, inputs: Tensor, policy: LengthPolicy | None) -> LengthPolicy:
        if policy is None:
            policy = "none" if self.training else self.default_length_policy(inputs.device)
        if policy not in LENGTH_POLICIES:
            raise ValueError(f"unknown length policy {policy!r}; choose from {list(LENGTH_POLICIES)}")
        return policy

    def _padded_frames(self, frames: int) -> int:
        """``frames`` rounded up to a whole number of ``pad_seconds`` of feature frames."""
        bucket = max(1, round(self.pad_seconds * 1000.0 / self.config.features.frame_shift_ms))
        return math.ceil(frames / bucket) * bucket



@contextlib.contextmanager
def _cudnn_disabled() -> Iterator[None]:
    """cuDNN off inside (PyTorch's own kernels run instead), as it was afterwards. The switch is process-wide."""
    enabled = torch.backends.cudnn.enabled
    torch.backends.cudnn.enabled = False
    try:
        yield
    finally:
        torch.backends.cudnn.enabled = enabled
