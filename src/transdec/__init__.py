"""transdec: fast, exact decoding for Transducer speech recognition (RNN-T, TDT, multi-blank)."""

from transdec.decoding import DecodingConfig, DecodingResult, Hypothesis, decode
from transdec.model import HeadSpec

__version__ = "0.1.0"

__all__ = ["DecodingConfig", "DecodingResult", "HeadSpec", "Hypothesis", "decode", "__version__"]
