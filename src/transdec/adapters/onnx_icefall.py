"""sherpa-onnx's offline transducers in the icefall/k2 format (Zipformer, Conformer, ... exported by icefall's
``export-onnx.py``): what their files are, and which exports do not load (the streaming ones).

The format, as icefall writes it (``egs/librispeech/ASR/zipformer/export-onnx.py``) and sherpa-onnx reads it
(``sherpa-onnx/csrc/offline-transducer-model.cc``, ``offline-recognizer-transducer-impl.h``):

* encoder ``x [N, T, F]`` float fbank, ``x_lens [N]`` int64 (int32 with ``--use-int32-inputs``) ->
  ``encoder_out [N, T', J]`` (the joiner's encoder projection already applied), ``encoder_out_lens [N]``; metadata
  ``model_type`` (``zipformer2``, ``zipformer``, ``conformer``, ...: sherpa-onnx's offline recognizer picks its
  transducer implementation by it), ``version``, ``model_author``, ``comment``. sherpa-onnx feeds the two inputs by
  position, so only their order matters.
* decoder ``y [N, context_size]`` int64 (or int32): the last ``context_size`` tokens, blank 0, ``-1`` before the
  start (the first input is ``[-1, ..., -1, 0]``) -> ``decoder_out [N, J]`` (projected); metadata ``context_size``
  and ``vocab_size`` (the blank included), the only metadata sherpa-onnx reads.
* joiner ``encoder_out [N, J]``, ``decoder_out [N, J]`` -> ``logit [N, vocab_size]``, blank first.
* ``tokens.txt``: ``<blk> 0``, then the tokens (icefall's BPE sets start ``<sos/eos> 1``, ``<unk> 2``).
* file names ``{encoder,decoder,joiner}-epoch-99-avg-1.onnx``, with ``.int8.onnx`` (``quantize_dynamic`` of the
  MatMuls) and ``.fp16.onnx`` variants beside them (:func:`transdec.adapters.onnx_files.find_parts` chooses).
* features: sherpa-onnx's default fbank (:class:`~transdec.adapters.onnx_features.SherpaFrontEnd`, layout
  ``"icefall"``), padded with ``log(1e-10)`` in a batch; a subsampling factor of 4 for timestamps (sherpa-onnx
  takes 4 for every such model).

Streaming exports (icefall's ``export-onnx-streaming.py``: the encoder takes cached states besides ``x`` and its
metadata has ``decode_chunk_len`` and ``T``) are refused by :func:`refuse_streaming`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transdec.adapters.onnx_files import int_metadata

#: Encoder metadata that only icefall's streaming exports carry (Zipformer, LSTM, Emformer: chunk sizes, context).
STREAMING_KEYS = ("decode_chunk_len", "T", "left_context_len")
#: Encoder ``model_type`` values of icefall's offline transducer exports that sherpa-onnx recognises.
ICEFALL_MODEL_TYPES = ("zipformer2", "zipformer", "conformer")
#: sherpa-onnx's subsampling factor for every icefall transducer (``OfflineTransducerModel::SubsamplingFactor``).
SUBSAMPLING_FACTOR = 4


@dataclass(frozen=True)
class IcefallTransducer:
    """What an icefall-format export's files say: its vocabulary (``vocab_size`` with the blank), decoder context and
    feature width."""

    vocab_size: int
    context_size: int
    feature_dim: int

    @property
    def num_tokens(self) -> int:
        """Tokens without the blank (transdec's ``HeadSpec.num_tokens``)."""
        return self.vocab_size - 1

    def front_end(self) -> dict[str, Any]:
        """The front end description (as in the ``transdec_front_end`` metadata): sherpa-onnx's fbank, which is also
        what icefall trains on (lhotse's fbank: 20 Hz to Nyquist - 400 Hz, frames not snipped)."""
        return {"kind": "sherpa", "layout": "icefall", "normalize": "",
                "config": {"num_mel_bins": self.feature_dim, "sample_rate": 16000, "frame_shift_ms": 10.0}}


def refuse_streaming(directory: Path, files: dict[str, Path], sessions: dict[str, Any],
                     meta: dict[str, dict[str, str]]) -> None:
    """Raise a ValueError naming ``directory`` if the encoder is a streaming one: cached state inputs beyond the
    features and their lengths, or streaming metadata (``decode_chunk_len``, ``T``, ...)."""
    inputs = [i.name for i in sessions["encoder"].get_inputs()]
    keys = [f"{key}={meta['encoder'][key]}" for key in STREAMING_KEYS if key in meta["encoder"]]
    # An offline encoder takes the features and their lengths (icefall: x_lens; NeMo: length); more inputs are
    # caches carried from chunk to chunk (a streaming encoder may take no lengths at all).
    states = [name for name in inputs[1:] if name not in ("x_lens", "length")] if len(inputs) > 2 else []
    if not keys and not states:
        return
    found = []
    if keys:
        found.append(f"metadata {', '.join(keys)}")
    if states:
        shown = ", ".join(states[:3]) + (f" and {len(states) - 3} more" if len(states) > 3 else "")
        found.append(f"state inputs {shown}")
    raise ValueError(f"{directory}: {files['encoder'].name} is a streaming encoder ({'; '.join(found)}); only "
                     "offline (non-streaming) transducers load")


def is_icefall(sessions: dict[str, Any], meta: dict[str, dict[str, str]]) -> bool:
    """Whether the files look like icefall's format: ``context_size`` on the decoder, an icefall ``model_type`` on
    the encoder, or icefall's input names (``x``, ``x_lens``; ``y``)."""
    encoder_inputs = [i.name for i in sessions["encoder"].get_inputs()]
    decoder_inputs = [i.name for i in sessions["decoder"].get_inputs()]
    return ("context_size" in meta["decoder"] or meta["encoder"].get("model_type") in ICEFALL_MODEL_TYPES
            or encoder_inputs[:1] == ["x"] or decoder_inputs == ["y"])


def read_icefall(files: dict[str, Path], sessions: dict[str, Any],
                 meta: dict[str, dict[str, str]]) -> IcefallTransducer:
    """Check the three graphs' signatures and read the metadata; each error names the file at fault."""
    encoder, decoder, joiner = sessions["encoder"], sessions["decoder"], sessions["joiner"]
    encoder_inputs = encoder.get_inputs()
    if len(encoder_inputs) != 2 or len(encoder.get_outputs()) != 2:
        raise ValueError(f"{files['encoder']}: an offline transducer encoder takes features and their lengths "
                         f"(x, x_lens) and returns frames and their lengths; this one takes "
                         f"{[i.name for i in encoder_inputs]} and returns {[o.name for o in encoder.get_outputs()]}")
    features = encoder_inputs[0].shape
    if len(features) != 3:
        raise ValueError(f"{files['encoder']}: input {encoder_inputs[0].name} should be features [N, T, F], "
                         f"its shape is {features}")
    if encoder_inputs[1].type not in ("tensor(int64)", "tensor(int32)"):
        raise ValueError(f"{files['encoder']}: input {encoder_inputs[1].name} (the lengths) should be int64 or int32, "
                         f"it is {encoder_inputs[1].type}")
    decoder_inputs = decoder.get_inputs()
    if len(decoder_inputs) != 1 or decoder_inputs[0].type not in ("tensor(int64)", "tensor(int32)"):
        raise ValueError(f"{files['decoder']}: an icefall stateless decoder takes one int64 input y "
                         f"[N, context_size]; this one takes {[(i.name, i.type) for i in decoder_inputs]}")
    if isinstance(decoder_inputs[0].shape[0], int):
        raise ValueError(f"{files['decoder']}: the batch axis of y is fixed at {decoder_inputs[0].shape[0]} "
                         "(exported without dynamic axes); transdec decodes batches")
    vocab_size = int_metadata(meta["decoder"], "vocab_size", files["decoder"])
    context_size = int_metadata(meta["decoder"], "context_size", files["decoder"])
    if vocab_size < 2 or context_size < 1:
        raise ValueError(f"{files['decoder']}: metadata vocab_size={vocab_size}, context_size={context_size}: need a "
                         "blank and a token, and a context of at least one")
    declared = decoder_inputs[0].shape[1]
    if isinstance(declared, int) and declared != context_size:
        raise ValueError(f"{files['decoder']}: input y has {declared} columns but metadata context_size is "
                         f"{context_size}")
    if len(joiner.get_inputs()) != 2:
        raise ValueError(f"{files['joiner']}: an icefall joiner takes encoder_out [N, J] and decoder_out [N, J]; "
                         f"this one takes {[i.name for i in joiner.get_inputs()]}")
    _check_widths(files, encoder, decoder, joiner)
    width = features[2] if isinstance(features[2], int) else 80
    return IcefallTransducer(vocab_size, context_size, width)


def _check_widths(files: dict[str, Path], encoder: Any, decoder: Any, joiner: Any) -> None:
    """The encoder's and decoder's output widths are the joiner's input widths, where the graphs declare them (parts
    of two different models fail here rather than inside ONNX Runtime)."""
    joiner_inputs = joiner.get_inputs()
    for part, session, position in (("encoder", encoder, 0), ("decoder", decoder, 1)):
        produced = session.get_outputs()[0].shape[-1]
        taken = joiner_inputs[position].shape[-1]
        if isinstance(produced, int) and isinstance(taken, int) and produced != taken:
            raise ValueError(f"{files['joiner']}: takes {part} outputs of width {taken}, but {files[part].name} "
                             f"gives {produced}: the files come from different models")

