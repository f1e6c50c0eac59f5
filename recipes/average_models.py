"""Averages the weights of model files of one shape (bundled names or paths) into one file, float16.

    .venv/bin/python recipes/average_models.py tiny-en-rnnt exp/fine-tuned/tiny-en-rnnt.pt \
        --output exp/fine-tuned/tiny-en-rnnt-soup.pt

`transdec average` averages a run's checkpoints; this averages finished files, for a soup of a bundled model
and a run that started from it when the bundled file's own checkpoints are no longer there.
"""

from __future__ import annotations

import argparse

import transdec
from transdec.model.checkpoint import save_model
from transdec.training.trainer import average_weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="bundled model names or model files")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    models = [transdec.load_model(name) for name in args.models]
    for name, model in zip(args.models[1:], models[1:]):
        if model.config != models[0].config:
            raise SystemExit(f"{name} is not shaped like {args.models[0]}: their model configs differ")
    models[0].load_state_dict(average_weights([model.state_dict() for model in models]))
    save_model(models[0], args.output, half=True, metadata={"averaged_files": args.models})
    print(f"wrote {args.output}: the average of {len(models)} files")


if __name__ == "__main__":
    main()
