"""The model protocol and the predictor, joint and head modules that implement it."""

from transdec.model.features import FbankConfig, FbankExtractor
from transdec.model.joint import JointNetwork
from transdec.model.predictors import LSTMPredictor, StatelessPredictor
from transdec.model.protocol import DecodingModel, HeadSpec, Joint, Predictor
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_decoder import TransducerDecoder

__all__ = [
    "DecodingModel",
    "FbankConfig",
    "FbankExtractor",
    "HeadSpec",
    "Joint",
    "JointNetwork",
    "LSTMPredictor",
    "Predictor",
    "StatelessPredictor",
    "Tokenizer",
    "TransducerDecoder",
]
