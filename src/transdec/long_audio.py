"""Long recordings (an hour or more) in bounded memory, through every kind of model.

Self-attention over a whole hour would need memory quadratic in its length, so the encoder runs on
overlapping windows instead, and the decoder runs once over the joined encoder output (its memory is linear
in the length and its predictor state simply carries on across window edges).

Each window is a chunk of encoder frames plus context on each side, and only the frames of its central chunk are
kept: every kept frame has seen at least the context on both sides (less only at the start and end of the
recording, exactly as unchunked). The outputs join into as many frames as the unchunked encoder gives. The context
defaults to the encoder's receptive field where it has one (local or limited-context attention): then every kept
frame saw everything it depends on. With full attention there is no such bound; the context defaults to 5 s,
attention beyond it is what windowing gives up, and :class:`WindowedEncodingWarning` says so once.

The model cuts the windows (:meth:`~transdec.protocol.SpeechModel.encode_in_windows`), as its front end allows:

* transdec's own models (:mod:`transdec.model.windowed_features`): features are computed window by window on the
  exact samples each frame needs, then normalised with statistics of the whole recording, so with a bounded
  receptive field the joined output equals the unchunked encoding up to float rounding.
* NeMo checkpoints and ONNX exports (:mod:`transdec.sample_windows`): windows of samples, each through the model's
  own ``encode``, starting on whole encoder frames, as NeMo's buffered inference cuts them. A NeMo front end that
  normalises per recording is given the whole recording's statistics; an ONNX export's normalises per window,
  which is not exact even where the receptive field is bounded.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from transdec.padding import pad_batch
from transdec.protocol import SpeechModel

__all__ = ["GLOBAL_ATTENTION_CONTEXT_SECONDS", "ChunkingConfig", "WindowedEncodingWarning", "context_seconds",
           "encode_batch", "encode_long", "needs_chunking"]

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


def context_seconds(model: SpeechModel, chunking: ChunkingConfig) -> float:
    """The context each window gets on both sides of its chunk."""
    if chunking.context_seconds is not None:
        return chunking.context_seconds
    field = model.receptive_field
    if field is None:
        return GLOBAL_ATTENTION_CONTEXT_SECONDS
    return field * model.frame_shift_seconds


def needs_chunking(model: SpeechModel, num_samples: int, chunking: ChunkingConfig) -> bool:
    return num_samples > (chunking.chunk_seconds + 2 * context_seconds(model, chunking)) * model.sample_rate


@torch.inference_mode()
def encode_long(model: SpeechModel, waveform: Tensor, chunking: ChunkingConfig) -> tuple[Tensor, Tensor]:
    """Encoder output ``[1, T', D]`` and length ``[1]`` of one long waveform ``[N]``, in bounded memory."""
    context = chunking.context_seconds
    if context is None and model.receptive_field is None:
        warnings.warn(f"recordings over {chunking.chunk_seconds + 2 * GLOBAL_ATTENTION_CONTEXT_SECONDS:g} s are "
                      f"encoded in {chunking.chunk_seconds:g} s windows with {GLOBAL_ATTENTION_CONTEXT_SECONDS:g} s of "
                      "context on each side, since this encoder attends over its whole input (memory would grow "
                      "with the square of the duration); chunk and context seconds are settings (--chunk-seconds, "
                      "--context-seconds; 0 encodes whole)", WindowedEncodingWarning, stacklevel=3)
        context = GLOBAL_ATTENTION_CONTEXT_SECONDS
    # None left here means the receptive field exactly, in whole encoder frames rather than through seconds.
    return model.encode_in_windows(waveform, chunking.chunk_seconds, context)


@torch.inference_mode()
def encode_batch(model: SpeechModel, waveforms: Sequence[np.ndarray | Tensor],
                 chunking: ChunkingConfig | None = ChunkingConfig()) -> tuple[Tensor, Tensor]:
    """Encoder output ``[B, T, D]`` and frame counts ``[B]`` of 1-D float sample arrays of any length.

    The recordings that ``chunking`` leaves whole are encoded together as one padded batch, each longer one
    alone in windows (:func:`encode_long`), so memory stays linear in the audio however long it is. Rows are
    zero past their frame counts; ``chunking=None`` encodes everything whole.
    """
    device = model.device
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
