"""transdec: fast, exact decoding for Transducer speech recognition (RNN-T, TDT, multi-blank)."""

import os

# Measured here: with OpenMP's default busy-waiting, two threads on a loaded 2-core machine made training
# steps ~10x and small-op decoding loops up to ~100x slower. It only takes effect if torch is not yet
# imported; a value the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

__all__ = ["DecodingConfig", "DecodingResult", "HeadSpec", "Hypothesis", "decode", "load_model", "__version__"]

# The public names are imported on first use: `import transdec` stays light (no PyTorch), so that the command line
# can import PyTorch where an interrupt is handled.
_HOMES = {"DecodingConfig": "transdec.decoding", "DecodingResult": "transdec.decoding",
          "Hypothesis": "transdec.decoding", "decode": "transdec.decoding", "load_model": "transdec.loading",
          "HeadSpec": "transdec.protocol"}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'transdec' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
