"""Which CPU kernels run an encoder's matrix products fastest: float32, bfloat16 and int8 candidates side by side.

The linear layers of a parakeet-tdt-0.6b-shaped FastConformer (d_model 1024, feed-forward 4096) and of a
110m-shaped one (512, 2048), at the row counts an encoder sees (batch x frames: one 5 s recording is 63 encoder
frames, eight 60 s recordings 6,000), each candidate in turn in every round, median of the rounds:

* ``float32``: ``F.linear`` (PyTorch's CPU float32 products: MKL's SGEMM in the official wheels);
* ``float32, oneDNN``: the same product through oneDNN with the weight reordered once
  (``torch.ops.mkldnn._linear_pointwise``), when PyTorch has it; MKL keeps to its generic code path on AMD CPUs,
  oneDNN does not;
* ``float32, ONNX Runtime``: the layer exported to ONNX, run in float32 (MLAS), when onnxruntime is installed;
* ``bfloat16``: weights and input in bfloat16 (oneDNN; AVX-512 BF16 or AMX where the CPU has them);
* ``int8 dynamic (torch.ao)``: ``torch.ao.nn.quantized.dynamic.Linear`` (FBGEMM, per-channel int8 weights, the
  input quantized per call with one scale per tensor), on the ``fbgemm`` and the ``onednn`` engine;
* ``int8 dynamic (torchao)``: torchao's ``Int8DynamicActivationInt8WeightConfig`` (per-row input scales), when
  torchao is installed;
* ``int8 weight-only``: ``torch._weight_int8pack_mm`` (int8 weights, float32 and bfloat16 arithmetic);
* ``int8 (ONNX Runtime)``: one ``MatMulInteger``-based graph made by ONNX Runtime's ``quantize_dynamic`` (what
  sherpa-onnx's int8 models run), when onnxruntime is installed.

Prints a table of microseconds per call and the speed-up over float32, and each candidate's largest relative
error against float32.

    python bench/linear_kernels.py --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

# This folder holds bench/onnx.py, which would shadow the onnx package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

SHAPES = {"0.6b": ((1024, 1024), (1024, 4096), (4096, 1024)), "110m": ((512, 512), (512, 2048), (2048, 512))}


def timed(fn: Callable[[], torch.Tensor], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def candidates(layer: torch.nn.Linear, x: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    """The candidate kernels for ``layer`` applied to ``x`` (each returns float32)."""
    out: dict[str, Callable[[], torch.Tensor]] = {"float32": lambda: F.linear(x, layer.weight, layer.bias)}
    onednn = _onednn_float32(layer, x)
    if onednn is not None:
        out["float32, oneDNN"] = onednn
    ort32 = _onnxruntime(layer, x, quantized=False)
    if ort32 is not None:
        out["float32, ONNX Runtime"] = ort32
    w16, b16, x16 = layer.weight.bfloat16(), layer.bias.bfloat16(), x.bfloat16()
    out["bfloat16"] = lambda: F.linear(x16, w16, b16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated in favour of torchao
        from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear
        from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig

        for engine in ("fbgemm", "onednn"):
            if engine not in torch.backends.quantized.supported_engines:
                continue
            torch.backends.quantized.engine = engine
            holder = torch.nn.Sequential(torch.nn.Linear(layer.in_features, layer.out_features))
            holder[0].load_state_dict(layer.state_dict())
            qconfig = per_channel_dynamic_qconfig if engine == "fbgemm" else default_dynamic_qconfig
            holder[0].qconfig = qconfig
            q = DynamicLinear.from_float(holder[0])

            def run(q=q, engine=engine):
                torch.backends.quantized.engine = engine
                return q(x)

            out[f"int8 dynamic, torch.ao {engine}"] = run
        torch.backends.quantized.engine = "fbgemm" if "fbgemm" in torch.backends.quantized.supported_engines else "x86"
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

        ao = torch.nn.Sequential(torch.nn.Linear(layer.in_features, layer.out_features))
        ao[0].load_state_dict(layer.state_dict())
        quantize_(ao, Int8DynamicActivationInt8WeightConfig())
        out["int8 dynamic, torchao"] = lambda: ao(x)
    except ImportError:
        pass
    scales = layer.weight.abs().amax(dim=1) / 127
    w8 = torch.round(layer.weight / scales[:, None]).to(torch.int8)
    out["int8 weight-only, float32"] = lambda: torch._weight_int8pack_mm(x, w8, scales) + layer.bias
    s16 = scales.bfloat16()
    out["int8 weight-only, bfloat16"] = lambda: torch._weight_int8pack_mm(x16, w8, s16) + b16
    ort = _onnxruntime(layer, x, quantized=True)
    if ort is not None:
        out["int8 dynamic, ONNX Runtime"] = ort
    return out


def _onednn_float32(layer: torch.nn.Linear, x: torch.Tensor) -> Callable[[], torch.Tensor] | None:
    mkldnn = torch.ops.mkldnn
    if not (torch.backends.mkldnn.is_available() and hasattr(mkldnn, "_linear_pointwise")
            and hasattr(mkldnn, "_reorder_linear_weight")):
        return None
    weight = mkldnn._reorder_linear_weight(layer.weight, x.shape[0])
    return lambda: mkldnn._linear_pointwise(x, weight, layer.bias, "none", [], "")


def _onnxruntime(layer: torch.nn.Linear, x: torch.Tensor, quantized: bool) -> Callable[[], torch.Tensor] | None:
    """The layer as an ONNX Runtime graph: float32, or int8 by ``quantize_dynamic``."""
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        return None
    folder = Path(tempfile.mkdtemp())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(layer, (x[:2],), str(folder / "f.onnx"), input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "n"}, "y": {0: "n"}}, dynamo=False, opset_version=17)
    if quantized:
        quantize_dynamic(str(folder / "f.onnx"), str(folder / "q.onnx"), op_types_to_quantize=["MatMul"],
                         weight_type=QuantType.QInt8)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = torch.get_num_threads(), 1
    graph = folder / ("q.onnx" if quantized else "f.onnx")
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    xn = x.numpy()
    return lambda: torch.from_numpy(session.run(None, {"x": xn})[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--rows", type=int, nargs="+", default=[63, 750, 6000])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s), median of {args.rounds} rounds; microseconds per "
          "call (speed-up over float32; largest error / largest float32 output)\n")
    rows_out: list[tuple[str, dict[str, float], dict[str, float]]] = []
    names: list[str] = []
    with torch.inference_mode():
        for model in args.models:
            for in_features, out_features in SHAPES[model]:
                with torch.inference_mode(False):
                    layer = torch.nn.Linear(in_features, out_features)
                for rows in args.rows:
                    x = torch.randn(rows, in_features)
                    fns = candidates(layer, x)
                    names = names or list(fns)
                    reference = fns["float32"]()
                    errors = {k: ((fn().float() - reference).abs().max() / reference.abs().max()).item()
                              for k, fn in fns.items()}
                    calls = max(1, int(2e8 / (rows * in_features * out_features) * 4))
                    for fn in fns.values():
                        timed(fn, 1)
                    times: dict[str, list[float]] = {k: [] for k in fns}
                    for _ in range(args.rounds):
                        for k, fn in fns.items():
                            times[k].append(timed(fn, calls))
                    medians = {k: statistics.median(v) for k, v in times.items()}
                    rows_out.append((f"{model} {in_features}->{out_features}, {rows} rows", medians, errors))
    print("| layer | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, medians, errors in rows_out:
        base = medians["float32"]
        cells = [f"{1e6 * medians[k]:,.0f} ({base / medians[k]:.2f}x, {errors[k]:.0e})" if k in medians else "-"
                 for k in names]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
