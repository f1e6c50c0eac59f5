"""Long recordings through transdec's own models, in overlapping windows of features.

Features are computed window by window on the exact samples each frame needs, then normalised with statistics of
the whole recording, so with a bounded receptive field the joined encoder output equals the unchunked encoding up
to float rounding. Each window is a chunk of feature frames (a whole number of encoder frames) plus context on each
side; only the encoder frames of its chunk are kept.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch
from torch import Tensor

from transdec.model.conformer import ConformerEncoder
from transdec.model.features import FbankConfig, FbankExtractor, normalize_per_feature

#: ``(features [B, T, F], lengths [B]) -> (encoder_out [B, T', D], lengths [B])``: a model's ``encode_features``.
EncodeFeatures = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


def raw_features_in_chunks(config: FbankConfig, waveform: Tensor, frames_per_chunk: int = 6000) -> Tensor:
    """The features ``[T, F]`` of ``config`` (unnormalised) of one waveform ``[N]``, computed ``frames_per_chunk``
    frames at a time."""
    extractor = FbankExtractor(dataclasses.replace(config, normalize="none")).to(waveform.device)
    total = int(extractor.num_frames(waveform.shape[0]))
    shift, window = config.frame_shift, config.window_length
    pieces = []
    for first in range(0, total, frames_per_chunk):
        count = min(frames_per_chunk, total - first)
        samples = waveform[first * shift : (first + count - 1) * shift + window]
        pieces.append(extractor(samples.unsqueeze(0))[0][0])
    return torch.cat(pieces) if pieces else waveform.new_zeros(0, config.num_mel_bins)


def encode_feature_windows(config: FbankConfig, encoder: ConformerEncoder, encode_features: EncodeFeatures,
                           waveform: Tensor, chunk_seconds: float,
                           context_seconds: float | None) -> tuple[Tensor, Tensor]:
    """Encoder output ``[1, T', D]`` and length ``[1]`` of one waveform ``[N]``, for a model with features of
    ``config`` whose ``encoder`` runs in ``encode_features`` (the model's settings applied: dtype, length policy).
    The other arguments are those of :meth:`~transdec.protocol.SpeechModel.encode_in_windows`
    (``context_seconds=None``: the receptive field)."""
    features = raw_features_in_chunks(config, waveform)
    total = features.shape[0]
    if config.normalize == "per_feature":
        counts = torch.tensor([total], device=features.device)
        valid = torch.ones(1, total, 1, dtype=torch.bool, device=features.device)
        features = normalize_per_feature(features.unsqueeze(0), valid, counts)[0]
    factor = encoder.config.subsampling_factor
    frames_per_second = 1000.0 / config.frame_shift_ms
    chunk = max(factor, int(chunk_seconds * frames_per_second) // factor * factor)
    if context_seconds is None:
        field = encoder.receptive_field
        if field is None:
            raise ValueError("context_seconds=None means the receptive field, and this encoder's is unbounded")
        context = field * factor  # whole encoder frames, not a conversion through seconds that could round down
    else:
        context = int(context_seconds * frames_per_second) // factor * factor
    outputs = []
    for start in range(0, total, chunk):
        first, last = max(0, start - context), min(total, start + chunk + context)
        window = features[first:last].unsqueeze(0)
        encoded, _ = encode_features(window, torch.tensor([last - first], device=features.device))
        keep_from = (start - first) // factor
        keep_to = keep_from + -(-(min(start + chunk, total) - start) // factor)
        outputs.append(encoded[:, keep_from:keep_to])
    encoded = torch.cat(outputs, dim=1) if outputs else features.new_zeros(1, 0, encoder.output_dim)
    return encoded, torch.tensor([encoded.shape[1]], device=features.device)
