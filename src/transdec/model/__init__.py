"""transdec's own models: feature extractor, encoders, predictors, joint and tokenizer, behind :mod:`transdec.protocol`."""

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
    "save_model",
]
