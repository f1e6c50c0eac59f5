"""Float16 storage of an ONNX voice, so that the Piper voice fits in the kit (.kit/) at half its size.

    python3 recipes/gpu/restore_voice.py --pack voice.onnx voice.fp16.onnx.xz   # here: float32 weights -> float16
    python3 recipes/gpu/restore_voice.py voice.fp16.onnx.xz voice.onnx          # on the box: back to float32

Only the initializers (the weights, all but the smallest) change type; the graph is untouched. The packed file is storage, not a
model to run: its float16 weights still feed float32 operators. It lists the initializers it converted in a
metadata entry, and restoring converts exactly those back and drops the entry. A name ending in .xz is
read or written through lzma (11% smaller). Needs only onnx and numpy.
"""

import argparse
import json
import lzma
import os

import numpy as np
import onnx
from onnx import numpy_helper

KEY = "transdec.fp16_initializers"
# Tensors of fewer values (biases, norm scales) stay float32: +0.1 MB for output ~8 dB closer to the original.
SMALL = 1024


def pack(model: onnx.ModelProto) -> None:
    names = []
    for tensor in model.graph.initializer:
        array = numpy_helper.to_array(tensor)
        if tensor.data_type == onnx.TensorProto.FLOAT and array.size >= SMALL:
            if not np.all(np.abs(array) <= np.finfo(np.float16).max):
                raise SystemExit(f"{tensor.name}: values out of float16 range")
            tensor.CopyFrom(numpy_helper.from_array(array.astype(np.float16), tensor.name))
            names.append(tensor.name)
    model.metadata_props.add(key=KEY, value=json.dumps(names))


def restore(model: onnx.ModelProto) -> None:
    entries = [p for p in model.metadata_props if p.key == KEY]
    if not entries:
        raise SystemExit(f"not a packed voice: no metadata entry {KEY}")
    names = set(json.loads(entries[0].value))
    for tensor in model.graph.initializer:
        if tensor.name in names:
            array = numpy_helper.to_array(tensor).astype(np.float32)
            tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    model.metadata_props.remove(entries[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pack", action="store_true", help="float32 -> float16 (default: restore float32)")
    parser.add_argument("src")
    parser.add_argument("dst")
    args = parser.parse_args()
    with (lzma.open if args.src.endswith(".xz") else open)(args.src, "rb") as f:
        model = onnx.load(f)
    (pack if args.pack else restore)(model)
    tmp = args.dst + ".tmp"
    if args.dst.endswith(".xz"):
        with lzma.open(tmp, "wb", preset=9 | lzma.PRESET_EXTREME) as f:
            f.write(model.SerializeToString())
    else:
        onnx.save(model, tmp)
    os.replace(tmp, args.dst)  # a stopped restore never leaves a half-written voice under the final name


if __name__ == "__main__":
    main()
