"""Exporters of transdec models to other runtimes: :mod:`transdec.export.onnx` writes encoder, predictor step and
joiner as separate ONNX graphs that sherpa-onnx runs and :mod:`transdec.adapters.onnx` loads back (docs/deploy.md).
Imported on demand, so ``import transdec`` does not import ``onnx``."""
