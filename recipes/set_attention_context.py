"""Copies a model file with its encoder's self-attention limited to ``--frames`` encoder frames each side.

    .venv/bin/python recipes/set_attention_context.py IN.pt OUT.pt --frames 32

No weights change: rotary positions are relative, so a model trained with global attention runs with local
attention as it is, and for utterances shorter than the window nothing changes at all. What it buys is a
bounded receptive field (exact chunked decoding of long recordings, `src/transdec/long_audio.py`) and
attention that never spans more than the training utterances did (docs/models.md, "Long recordings").
``--frames 0`` restores global attention.
"""

from __future__ import annotations

import argparse
import os

import torch

from transdec.loading import load_model
from transdec.model.checkpoint import read_checkpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("output")
    parser.add_argument("--frames", type=int, required=True)
    args = parser.parse_args()
    payload = read_checkpoint(args.model)
    payload["config"]["encoder"]["attention_context"] = args.frames or None
    torch.save(payload, args.output + ".tmp")
    os.replace(args.output + ".tmp", args.output)
    model = load_model(args.output)  # fails here, not later, if the file cannot be built
    print(f"wrote {args.output}: attention context {args.frames or 'global'}, receptive field "
          f"{model.encoder.receptive_field} frames each side")


if __name__ == "__main__":
    main()
