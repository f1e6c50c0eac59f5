"""transdec's own models: feature extractor, encoders, predictors, joint and tokenizer, behind :mod:`transdec.protocol`."""

from typing import Any

from transdec.model.checkpoint import save_model
from transdec.model.conformer import ConformerConfig, ConformerEncoder
from transdec.model.features import FbankConfig, FbankExtractor
from transdec.model.joint import JointNetwork
from transdec.model.predictors import LSTMPredictor, StatelessPredictor
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_decoder import TransducerDecoder
from transdec.model.transducer_model import ModelConfig, PredictorConfig, TransducerModel

__all__ = [
    "ConformerConfig",
    "ConformerEncoder",
    "FbankConfig",
    "FbankExtractor",
    "JointNetwork",
    "LSTMPredictor",
    "ModelConfig",
    "PredictorConfig",
    "StatelessPredictor",
    "Tokenizer",
    "TransducerDecoder",
    "TransducerModel",
    "load_model",
    "save_model",
]


def __getattr__(name: str) -> Any:
    # `load_model` loads every kind of model, so it lives above the adapters (transdec.loading); it is found here
    # as well without this package importing the layers above it.
    if name == "load_model":
        from transdec.loading import load_model

        return load_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
