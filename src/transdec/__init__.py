"""transdec: fast, exact decoding for Transducer speech recognition (RNN-T, TDT, multi-blank)."""

import os

# Measured here: with OpenMP's default busy-waiting, two threads on a loaded 2-core machine made training
# steps ~10x and small-op decoding loops up to ~100x slower. It only takes effect if torch is not yet
# imported; a value the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from transdec.decoding import DecodingConfig, DecodingResult, Hypothesis, decode
from transdec.model import load_model
from transdec.protocol import HeadSpec

__version__ = "0.1.0"

__all__ = ["DecodingConfig", "DecodingResult", "HeadSpec", "Hypothesis", "decode", "load_model", "__version__"]
