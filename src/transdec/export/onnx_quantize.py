"""int8 graphs beside an export's float32 ones, made as sherpa-onnx makes its published int8 models.

``quantize_export(export)`` (``transdec export onnx MODEL OUT --quantize int8``) writes ``encoder.int8.onnx``,
``decoder.int8.onnx`` and ``joiner.int8.onnx`` next to the float32 graphs with ONNX Runtime's dynamic quantization
(``onnxruntime.quantization.quantize_dynamic``) and the settings of sherpa-onnx's export scripts for NeMo's
Transducers (``scripts/nemo/parakeet-tdt-0.6b-v3/export_onnx.py``): every operator type ONNX Runtime quantizes
dynamically (the matrix products, the convolutions, the embedding lookup), weights as unsigned 8-bit integers in
the encoder and signed ones in the decoder and joiner, one scale per tensor; activations quantized per call. The
metadata carries over, so sherpa-onnx and ``transdec.load_model(OUT, onnx_variant="int8")`` load the files as they
load sherpa-onnx's own int8 models.

The int8 graphs are not exact: what they cost in accuracy is measured in docs/cpu.md ("Accuracy"), and
their speed beside the float32 graphs and transdec's PyTorch int8 in docs/benchmarks.md.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The quantized parts and the weights' integer type in each, as sherpa-onnx's parakeet exports have them.
PART_WEIGHT_TYPES = {"encoder": "QUInt8", "decoder": "QInt8", "joiner": "QInt8"}


def int8_path(path: Path) -> Path:
    """``encoder.onnx`` -> ``encoder.int8.onnx``: the name sherpa-onnx and transdec's loader give int8 graphs."""
    return path.with_name(path.name.removesuffix(".onnx") + ".int8.onnx")


def quantize_export(export: Any) -> dict[str, Path]:
    """Write the int8 graph of each part of ``export`` (an :class:`~transdec.export.onnx.OnnxExport`); returns the
    paths by part."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as error:
        raise ImportError("quantizing an ONNX export needs onnxruntime, which is not installed") from error
    written = {}
    for part, weight_type in PART_WEIGHT_TYPES.items():
        source: Path = getattr(export, part)
        target = int8_path(source)
        with tempfile.TemporaryDirectory(dir=source.parent, prefix=f".{part}.int8.") as scratch, \
                warnings.catch_warnings(), _without_preprocessing_advice():
            warnings.simplefilter("ignore")
            staged = Path(scratch) / target.name
            quantize_dynamic(str(source), str(staged), weight_type=getattr(QuantType, weight_type),
                             use_external_data_format=False)
            staged.replace(target)
        written[part] = target
    return written


class _PreprocessingAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextlib.contextmanager
def _without_preprocessing_advice() -> Iterator[None]:
    """Drop the quantizer's log line suggesting pre-processing (shape inference) first: sherpa-onnx's models are
    quantized without it, and so are these."""
    advice = _PreprocessingAdvice()
    root = logging.getLogger()
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)
