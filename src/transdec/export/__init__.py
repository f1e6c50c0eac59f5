"""Exporters of transdec models to other runtimes (ONNX: encoder, predictor step and joint as separate graphs,
loadable back through :mod:`transdec.adapters`). None ships yet."""
