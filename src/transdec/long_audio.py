"""Long recordings (an hour or more) in bounded memory, through every kind of model.

Self-attention over a whole hour would need memory quadratic in its length, so the encoder runs on
overlapping windows instead, and the decoder runs once over the joined encoder output (its memory is linear
in the length and its predictor state simply carries on across window edges).

Each window is ``chunk`` encoder frames plus ``context`` frames on each side, and only the frames of its
central chunk are kept: every kept frame has seen at least ``context`` of audio on both sides (less only at
the start and end of the recording, exactly as unchunked). The outputs join into as many frames as the
unchunked encoder gives. The context defaults to the encoder's receptive field where it has one (local or
limited-context attention): then every kept frame saw everything it depends on. With full attention there is
no such bound; the context defaults to 5 s, attention beyond it is what windowing gives up, and
:class:`WindowedEncodingWarning` says so once.

Two ways to cut the windows:

* transdec's own models (:func:`encode_long_features`): features are computed window by window on the exact
  samples each frame needs, then normalised with statistics of the whole recording, so with a bounded receptive
  field the joined output equals the unchunked encoding up to float rounding.
* any other :class:`~transdec.protocol.SpeechModel` (NeMo checkpoints, ONNX exports;
  :func:`encode_long_samples`): windows of samples, each through the model's own ``encode``, starting on
  whole encoder frames, as NeMo's buffered inference cuts them. A front end that normalises per recording then
  normalises per window, which is not exact even where the receptive field is bounded.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from transdec.model.features import FbankExtractor, normalize_per_feature
from transdec.model.transducer_model import TransducerModel
from transdec.padding import pad_batch


GLOBAL_ATTENTION_CONTEXT_SECONDS = 5.0


class WindowedEncodingWarning(UserWarning):
    """A recording was encoded in windows by an encoder whose attention spans its whole input."""


@dataclass(frozen=True)
class ChunkingConfig:
    """Recordings longer than ``chunk_seconds + 2 * context`` are encoded in windows.

    ``context_seconds=None``: the encoder's receptive field (exact chunking) where it is bounded, else 5 s.
    """

    chunk_seconds: float = 30.0
    context_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.chunk_seconds <= 0 or (self.context_seconds is not None and self.context_seconds < 0):
            raise ValueError(f"chunk_seconds must be positive and context_seconds non-negative, got {self}")


def context_seconds(model: TransducerModel, chunking: ChunkingConfig) -> float:
    """The context each window gets on both sides of its chunk."""
    if chunking.context_seconds is not None:
        return chunking.context_seconds
    field = model.encoder.receptive_field
    if field is None:
        return GLOBAL_ATTENTION_CONTEXT_SECONDS
    return field * model.frame_shift_seconds


def needs_chunking(model: TransducerModel, num_samples: int, chunking: ChunkingConfig) -> bool:
    return num_samples > (chunking.chunk_seconds + 2 * context_seconds(model, chunking)) * model.sample_rate


def raw_features_in_chunks(model: TransducerModel, waveform: Tensor, frames_per_chunk: int = 6000) -> Tensor:
    """Unnormalised features ``[T, F]`` of one waveform ``[N]``, computed ``frames_per_chunk`` frames at a time."""
    config = model.config.features
    extractor = FbankExtractor(dataclasses.replace(config, normalize="none")).to(waveform.device)
    total = int(extractor.num_frames(waveform.shape[0]))
    shift, window = config.frame_shift, config.window_length
    pieces = []
    for first in range(0, total, frames_per_chunk):
        count = min(frames_per_chunk, total - first)
        samples = waveform[first * shift : (first + count - 1) * shift + window]
        pieces.append(extractor(samples.unsqueeze(0))[0][0])
    return torch.cat(pieces) if pieces else waveform.new_zeros(0, config.num_mel_bins)


@torch.inference_mode()
def encode_long(model: TransducerModel, waveform: Tensor, chunking: ChunkingConfig) -> tuple[Tensor, Tensor]:
    """Encoder output ``[1, T', D]`` and length ``[1]`` of one long waveform ``[N]``, in bounded memory."""
    if model.encoder.receptive_field is None and chunking.context_seconds is None:
        warnings.warn(f"recordings over {chunking.chunk_seconds + 2 * GLOBAL_ATTENTION_CONTEXT_SECONDS:g} s are "
                      f"encoded in {chunking.chunk_seconds:g} s windows with {GLOBAL_ATTENTION_CONTEXT_SECONDS:g} s of "
                      "context on each side, since this encoder attends over its whole input (memory would grow "
                      "with the square of the duration); chunk and context seconds are settings (--chunk-seconds, "
                      "--context-seconds; 0 encodes whole)", WindowedEncodingWarning, stacklevel=3)
    if isinstance(model, TransducerModel):
        return encode_long_features(model, waveform, chunking)
    return encode_long_samples(model, waveform, chunking)


def encode_long_features(model: TransducerModel, waveform: Tensor, chunking: ChunkingConfig) -> tuple[Tensor, Tensor]:
    """:func:`encode_long` for transdec's own models: windows of features normalised over the whole recording."""
    features = raw_features_in_chunks(model, waveform)
    total = features.shape[0]
    if model.config.features.normalize == "per_feature":
        counts = torch.tensor([total], device=features.device)
        valid = torch.ones(1, total, 1, dtype=torch.bool, device=features.device)
        features = normalize_per_feature(features.unsqueeze(0), valid, counts)[0]
    factor = model.config.encoder.subsampling_factor
    frames_per_second = 1000.0 / model.config.features.frame_shift_ms
    chunk = max(factor, int(chunking.chunk_seconds * frames_per_second) // factor * factor)
    field = model.encoder.receptive_field
    if chunking.context_seconds is None and field is not None:
        context = field * factor  # whole encoder frames, not a conversion through seconds that could round down
    else:
        context = int(context_seconds(model, chunking) * frames_per_second) // factor * factor
    outputs = []
    for start in range(0, total, chunk):
        first, last = max(0, start - context), min(total, start + chunk + context)
        window = features[first:last].unsqueeze(0)
        encoded, _ = model.encode_features(window, torch.tensor([last - first], device=features.device))
        keep_from = (start - first) // factor
        keep_to = keep_from + -(-(min(start + chunk, total) - start) // factor)
        outputs.append(encoded[:, keep_from:keep_to])
    encoded = torch.cat(outputs, dim=1) if outputs else features.new_zeros(1, 0, model.encoder.output_dim)
    return encoded, torch.tensor([encoded.shape[1]], device=features.device)


def encode_long_samples(model, waveform: Tensor, chunking: ChunkingConfig) -> tuple[Tensor, Tensor]:
    """:func:`encode_long` for any speech model: windows of samples through ``model.encode``, each starting on a
    whole encoder frame (``frame_shift_ms`` x ``subsampling_factor``), so that their frames line up with the
    unchunked encoder's; the last window's frames run to the end, making as many frames as the unchunked encoding.

    A NeMo front end that normalises each recording (``per_feature``, ``all_features``) is given the statistics of
    the whole recording instead of each window's: a first pass over the windows sums the features of the frames
    each one keeps, which are the whole recording's features (their FFT windows lie inside the window).
    """
    step = round(model.config.features.frame_shift_ms * model.sample_rate / 1000) * model.config.encoder.subsampling_factor
    frames_per_second = model.sample_rate / step
    chunk = max(1, int(chunking.chunk_seconds * frames_per_second))
    field = model.encoder.receptive_field
    if chunking.context_seconds is None and field is not None:
        context = field
    else:
        context = int(round(context_seconds(model, chunking) * frames_per_second))
    total = waveform.shape[0]
    windows = []  # (first frame, last sample, frames to skip, frames to keep or None for all the rest)
    for start in range(0, -(-total // step), chunk):
        first = max(0, start - context)
        end = min(total, (start + chunk + context) * step)
        windows.append((first, end, start - first, None if end == total else chunk))
        if end == total:
            break
    statistics = _recording_statistics(model, waveform, windows, step)
    outputs = []
    for first, end, skip, keep in windows:
        window = waveform[first * step : end].unsqueeze(0)
        length = torch.tensor([window.shape[1]], device=window.device)
        if statistics is None:
            encoded, frames = model.encode(window, length)
        else:
            features, counts = model.preprocessor(window, length, statistics=statistics)
            encoded, frames = model.encode_features(features, counts)
        outputs.append(encoded[:, skip : int(frames[0]) if keep is None else skip + keep])
    encoded = torch.cat(outputs, dim=1)
    return encoded, torch.tensor([encoded.shape[1]], device=encoded.device)


def _recording_statistics(model, waveform: Tensor, windows: list, step: int) -> tuple[Tensor, Tensor] | None:
    """The whole recording's normalisation statistics for a NeMo front end that normalises per recording, else
    None."""
    front_end = getattr(model, "preprocessor", None)
    normalize = getattr(getattr(front_end, "config", None), "normalize", "none")
    if normalize not in ("per_feature", "all_features") or not hasattr(model, "encode_features"):
        return None
    from transdec.adapters.nemo_features import feature_statistics

    features_per_frame = step // front_end.config.hop_length
    sums = squares = None
    count = 0
    for first, end, skip, keep in windows:
        window = waveform[first * step : end].unsqueeze(0)
        features, counts = front_end(window, torch.tensor([window.shape[1]], device=window.device), statistics=())
        stop = int(counts[0]) if keep is None else (skip + keep) * features_per_frame
        kept = features[0, skip * features_per_frame : stop].double()  # [frames, F]
        sums = kept.sum(0) if sums is None else sums + kept.sum(0)
        squares = kept.square().sum(0) if squares is None else squares + kept.square().sum(0)
        count += kept.shape[0]
    return feature_statistics(sums, squares, count, normalize == "per_feature")


@torch.inference_mode()
def encode_batch(model: TransducerModel, waveforms: Sequence[np.ndarray | Tensor],
                 chunking: ChunkingConfig | None = ChunkingConfig()) -> tuple[Tensor, Tensor]:
    """Encoder output ``[B, T, D]`` and frame counts ``[B]`` of 1-D float sample arrays of any length.

    The recordings that ``chunking`` leaves whole are encoded together as one padded batch, each longer one
    alone in windows (:func:`encode_long`), so memory stays linear in the audio however long it is. Rows are
    zero past their frame counts; ``chunking=None`` encodes everything whole.
    """
    device = next(model.parameters()).device
    samples = [torch.as_tensor(w) for w in waveforms]
    long = [i for i, w in enumerate(samples) if chunking is not None and needs_chunking(model, len(w), chunking)]
    short = [i for i in range(len(samples)) if i not in long]
    rows = {}
    if short:
        batch, lengths = pad_batch([samples[i] for i in short], dtype=torch.float32)
        encoded, frame_counts = model.encode(batch.to(device), lengths.to(device))
        if not long:
            return encoded, frame_counts
        rows = dict(zip(short, (encoded[row, :count] for row, count in enumerate(frame_counts.tolist()))))
    for i in long:
        rows[i] = encode_long(model, samples[i].to(device), chunking)[0][0]
    return pad_batch([rows[i] for i in range(len(samples))])
