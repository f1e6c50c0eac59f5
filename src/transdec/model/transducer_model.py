"""The complete speech model: waveform -> features -> Conformer encoder -> predictor + joint + head.

A :class:`TransducerModel` is a :class:`~transdec.model.protocol.DecodingModel`, so every decoder runs on it
directly. Its configuration is plain data (:class:`ModelConfig`), which is what makes checkpoints
self-describing (see :mod:`transdec.model.checkpoint`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from torch import Tensor, nn

from transdec.model.conformer import ConformerConfig, ConformerEncoder
from transdec.model.features import FbankConfig, FbankExtractor
from transdec.model.joint import JointNetwork
from transdec.model.predictors import LSTMPredictor, StatelessPredictor
from transdec.model.protocol import HeadSpec
from transdec.model.tokenizer import Tokenizer


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


class TransducerModel(nn.Module):
    """A trained Transducer: :meth:`encode` audio, then decode with any transdec decoder.

    Attributes used by decoders (the :class:`~transdec.model.protocol.DecodingModel` protocol): ``head``,
    ``predictor``, ``joint``. ``tokenizer`` maps token ids to text.
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

    @property
    def sample_rate(self) -> int:
        return self.config.features.sample_rate

    @property
    def frame_shift_seconds(self) -> float:
        """Duration of one encoder frame (the unit of timestamps), e.g. 0.08 s at 8x subsampling."""
        return self.config.features.frame_shift_ms / 1000 * self.config.encoder.subsampling_factor

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def encode(self, waveforms: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``waveforms [B, N]`` at :attr:`sample_rate`, ``lengths [B]`` samples -> ``(encoder_out [B, T, D], [B])``."""
        features, frame_counts = self.features(waveforms, lengths)
        return self.encode_features(features, frame_counts)

    def encode_features(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``features [B, T, F]``, ``lengths [B]`` -> ``(encoder_out [B, T', D], lengths [B])``."""
        return self.encoder(features, lengths)

    def transcribe(self, inputs, decoding=None, batch_size: int = 16, **options):
        """Audio files or 1-D sample arrays -> one :class:`~transdec.transcribe.Transcript` each (see there)."""
        from transdec.transcribe import transcribe  # transcribe needs this module; import it late

        return transcribe(self, inputs, decoding, batch_size, **options)
