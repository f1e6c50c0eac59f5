"""The shape of a new model as ``transdec train`` takes it: one flat set of options, one per flag.

:class:`ModelOptions` names what :class:`~transdec.model.transducer_model.ModelConfig` nests (the head, the
Conformer, the predictor) by the flags' names, and takes the model classes' own defaults where they have them.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass

from transdec.decoding.options import option
from transdec.model.conformer import ConformerConfig
from transdec.model.subsampling import SubsamplingKind
from transdec.model.transducer_model import ModelConfig, PredictorConfig
from transdec.protocol import HeadKind, HeadSpec

PredictorKind = typing.get_type_hints(PredictorConfig)["kind"]

#: Logit under-normalisation of TDT and multi-blank heads unless ``--sigma`` says otherwise (RNN-T: none).
DURATION_HEAD_SIGMA = 0.05


@dataclass
class ModelOptions:
    """A new model's shape; :meth:`model_config` builds it. ``sigma`` None: :data:`DURATION_HEAD_SIGMA` for
    TDT and multi-blank heads, 0 for RNN-T."""

    head: HeadKind = option("rnnt", "output head: RNN-T, TDT or multi-blank RNN-T")
    durations: tuple[int, ...] = option((0, 1, 2, 3, 4), "TDT durations: frames each duration output advances")
    big_blank_durations: tuple[int, ...] = option((2, 4, 8), "multi-blank: frames each big blank consumes")
    sigma: float | None = option(
        None, f"logit under-normalisation for TDT / multi-blank (default {DURATION_HEAD_SIGMA}; RNN-T: 0)")
    vocab_size: int = option(128, "tokens of the BPE tokenizer trained on the training transcripts")
    d_model: int = option(ConformerConfig.model_dim, "width of the Conformer blocks")
    layers: int = option(ConformerConfig.num_layers, "Conformer blocks")
    heads: int = option(ConformerConfig.num_heads, "attention heads per block")
    conv_kernel: int = option(ConformerConfig.conv_kernel, "depthwise convolution kernel, odd")
    attention_context: int | None = option(
        ConformerConfig.attention_context,
        "local attention: encoder frames each side a frame may attend to (default: all); makes long recordings "
        "in chunks exact (docs/models.md, 'Long recordings')", metavar="FRAMES")
    subsampling: SubsamplingKind = option(ConformerConfig.subsampling, "subsampling convolutions")
    subsampling_factor: int = option(ConformerConfig.subsampling_factor, "encoder frames per output frame",
                                     choices=(4, 8))
    predictor: PredictorKind = option(PredictorConfig.kind, "prediction network: an LSTM, or embeddings of the "
                                                            "last labels")
    predictor_hidden: int = option(PredictorConfig.hidden_size, "width of the prediction network")
    predictor_layers: int = option(PredictorConfig.num_layers, "LSTM predictor layers")
    context_size: int = option(PredictorConfig.context_size, "stateless predictor context: labels it sees")
    joint_dim: int = option(ModelConfig.joint_dim, "hidden width of the joint network")
    dropout: float = option(ConformerConfig.dropout, "dropout inside the Conformer blocks")

    def model_config(self, ctc_head: bool) -> ModelConfig:
        """The model these options describe; durations apply only to the head kind that has them."""
        head = HeadSpec(self.head, self.vocab_size,
                        durations=self.durations if self.head == "tdt" else (),
                        big_blank_durations=self.big_blank_durations if self.head == "multiblank" else ())
        sigma = self.sigma if self.sigma is not None else (0.0 if self.head == "rnnt" else DURATION_HEAD_SIGMA)
        return ModelConfig(
            head=head,
            encoder=ConformerConfig(model_dim=self.d_model, num_layers=self.layers, num_heads=self.heads,
                                    conv_kernel=self.conv_kernel, subsampling=self.subsampling,
                                    subsampling_factor=self.subsampling_factor, dropout=self.dropout,
                                    attention_context=self.attention_context),
            predictor=PredictorConfig(kind=self.predictor, hidden_size=self.predictor_hidden,
                                      num_layers=self.predictor_layers, context_size=self.context_size),
            joint_dim=self.joint_dim,
            sigma=sigma,
            ctc_head=ctc_head,
        )
