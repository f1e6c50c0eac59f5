"""Long recordings through an encoder that takes audio, in overlapping windows of samples.

Each window starts on a whole encoder frame (``step`` samples each), so its frames line up with those of the
unchunked encoding; it keeps ``chunk`` frames after ``context`` frames of left context, and reads ``context``
frames of right context past them. The last window's frames run to the end of the recording, so the windows
together give as many frames as encoding the whole recording at once. This is how NeMo's buffered inference cuts
recordings; models that take features cut windows of features instead (:mod:`transdec.model.windowed_features`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

#: ``(waveforms [1, N], lengths [1]) -> (encoder_out [1, T, D], lengths [1])``
Encode = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class SampleWindow:
    """One window: samples ``first_frame * step`` to ``end``; of its output frames, the first ``skip`` are left
    context and the ``keep`` after them are kept (``None``: all the rest, in the last window)."""

    first_frame: int
    end: int
    skip: int
    keep: int | None


def plan_windows(num_samples: int, step: int, sample_rate: int, chunk_seconds: float,
                 context_seconds: float | None, receptive_field: int | None) -> list[SampleWindow]:
    """The windows of a recording of ``num_samples``, encoder frames being ``step`` samples apart.

    ``chunk_seconds`` are rounded down to whole frames (at least one), ``context_seconds`` to the nearest frame;
    ``context_seconds=None`` is ``receptive_field`` frames exactly.
    """
    frames_per_second = sample_rate / step
    chunk = max(1, int(chunk_seconds * frames_per_second))
    if context_seconds is None:
        if receptive_field is None:
            raise ValueError("context_seconds=None means the receptive field, and this encoder's is unbounded")
        context = receptive_field
    else:
        context = int(round(context_seconds * frames_per_second))
    windows = []
    for start in range(0, -(-num_samples // step), chunk):
        first = max(0, start - context)
        end = min(num_samples, (start + chunk + context) * step)
        windows.append(SampleWindow(first, end, start - first, None if end == num_samples else chunk))
        if end == num_samples:
            break
    return windows


def window_samples(waveform: Tensor, window: SampleWindow, step: int) -> Tensor:
    """The samples ``[1, n]`` of ``window`` in ``waveform [N]``."""
    return waveform[window.first_frame * step : window.end].unsqueeze(0)


def encode_windows(encode: Encode, waveform: Tensor, windows: Sequence[SampleWindow],
                   step: int) -> tuple[Tensor, Tensor]:
    """Encoder frames ``[1, T, D]`` and ``[1]`` (``T``) of ``waveform [N]``: each window through ``encode``, the
    kept frames joined."""
    outputs = []
    for window in windows:
        samples = window_samples(waveform, window, step)
        encoded, frames = encode(samples, torch.tensor([samples.shape[1]], device=samples.device))
        stop = int(frames[0]) if window.keep is None else window.skip + window.keep
        outputs.append(encoded[:, window.skip : stop])
    encoded = torch.cat(outputs, dim=1)
    return encoded, torch.tensor([encoded.shape[1]], device=encoded.device)
