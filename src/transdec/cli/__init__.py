"""The ``transdec`` command line, one module per command.

Each command module (``train``, ``average``, ``transcribe``, ``evaluate``, ``stream``, ``serve``, ``lm``,
``boost``, ``export``, ``inspect``) has the command's flags, ``add_parser(subparsers)``, and what it does,
``run(args)``, which returns the exit code. They share :mod:`~transdec.cli.argtypes` (the flags' value types),
:mod:`~transdec.cli.fusions` (the LM and phrase-boosting flags and the fusions they make) and
:mod:`~transdec.cli.common` (the model, device, length-policy, long-recording and streaming-window flags, the checks
made before any work, model loading, one-line errors), and never import each other.
:mod:`~transdec.cli.dispatch` builds the parser from them and runs the command given: :func:`main`.

What a command runs (model loading, transcription, training, the server, Ray) is imported inside its ``run``, on
first use, so that ``transdec --help`` and a mistyped flag do not wait for it.
"""

from __future__ import annotations

from transdec.cli.dispatch import main

# `transdec train`'s parser alone: tests read its flags without the rest of the command line.
from transdec.cli.train import add_parser as _add_train_parser  # noqa: F401

__all__ = ["main"]
