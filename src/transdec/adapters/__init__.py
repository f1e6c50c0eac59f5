"""Models from other toolkits behind transdec's protocol (:mod:`transdec.protocol`).

An adapter wraps a model made elsewhere (a NeMo ``.nemo`` checkpoint, an icefall / sherpa-onnx ONNX
Transducer) so that it is a :class:`~transdec.protocol.DecodingModel` (``head``, ``predictor``, ``joint``: every
decoder runs on it) and a :class:`~transdec.protocol.SpeechModel` (``device``, ``sample_rate``,
``frame_shift_seconds``, ``receptive_field``, ``encode``, ``encode_in_windows``, ``tokenizer``: ``transcribe`` and
``evaluate`` run on it). Adapters import their toolkit-specific dependencies lazily, so that ``import transdec``
stays light. :mod:`transdec.adapters.nemo` reads ``.nemo``
checkpoints; :mod:`transdec.adapters.onnx` runs ONNX Transducer exports (transdec's, sherpa-onnx's, icefall's) on
ONNX Runtime; :mod:`transdec.adapters.hub` fetches either kind by Hugging Face Hub name.
"""
