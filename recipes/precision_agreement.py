"""How far int8 and bfloat16 encoders move a model's output: the NeMo fixtures (and full-size models), per clip.

For every ``NAME.nemo`` with its ``NAME.outputs.pt`` (NeMo 3.0.0's own outputs, ``recipes/nemo_fixtures.py``) in
the folders given: the model loaded in float32, with ``quantize="int8"`` and with ``compute_dtype=torch.bfloat16``
(where the CPU has bfloat16 instructions, unless ``--bf16-anyway``), each clip encoded alone and decoded with greedy
label-looping; printed per model and precision: the encoder output's relative error against float32 (``|x - x32| /
|x32|`` over the clips' frames), the clips whose tokens equal float32's, and the token edit distance to float32's
tokens over float32's token count. float32 itself is checked against NeMo's tokens.

The fixtures have random weights: most of their decisions are near-ties, which any rounding can flip, so these
figures overstate what a trained model loses (docs/cpu.md has the bundled models' WER in each precision).

    python recipes/precision_agreement.py tests/fixtures/nemo [/work/data/full ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import transdec  # noqa: E402
from transdec.metrics import sequence_edits  # noqa: E402
from transdec.model.quantization import cpu_has_bfloat16  # noqa: E402


def decode_clips(model, clips: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[list[int]]]:
    frames, tokens = [], []
    config = transdec.DecodingConfig("greedy_label", max_symbols_per_frame=10)
    with torch.inference_mode():
        for clip in clips:
            encoded, lengths = model.encode(clip[None], torch.tensor([len(clip)]))
            frames.append(encoded[0, : int(lengths[0])].float())
            tokens.append(transdec.decode(model, encoded, lengths, config).hypotheses()[0].tokens)
    return frames, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bf16-anyway", action="store_true", help="measure bfloat16 on a CPU without its instructions")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    precisions = {"int8": {"quantize": "int8"}}
    if cpu_has_bfloat16() or args.bf16_anyway:
        precisions["bfloat16"] = {"compute_dtype": torch.bfloat16}
    print("| model | precision | encoder relative error | clips with float32's tokens | token edits / float32 tokens |")
    print("|---|---|---:|---:|---:|")
    for folder in args.folders:
        for path in sorted(Path(folder).glob("*.nemo")):
            stored = path.with_suffix(".outputs.pt")
            if not stored.is_file():
                continue
            outputs = torch.load(stored, weights_only=True)
            fixtures = torch.load(path.parent / "clips.pt", weights_only=True) if "samples" not in outputs else outputs
            clips = [s.float() / 32768.0 for s in fixtures["samples"]]
            reference_frames, reference = decode_clips(transdec.load_model(str(path)), clips)
            nemo_equal = sum(a == b for a, b in zip(reference, outputs["tokens"]))
            count = sum(len(t) for t in reference)
            print(f"| {path.stem} | float32 | 0 | NeMo's tokens: {nemo_equal}/{len(clips)} | {count} tokens |",
                  flush=True)
            for name, options in precisions.items():
                frames, tokens = decode_clips(transdec.load_model(str(path), **options), clips)
                error = (torch.cat(frames) - torch.cat(reference_frames)).norm() / torch.cat(reference_frames).norm()
                same = sum(a == b for a, b in zip(tokens, reference))
                edits = sum(sequence_edits(a, b) for a, b in zip(tokens, reference))
                print(f"| {path.stem} | {name} | {error:.4f} | {same}/{len(clips)} | {edits}/{count} "
                      f"({100 * edits / max(1, count):.1f}%) |", flush=True)


if __name__ == "__main__":
    main()
