"""Decoders for Transducer models, all written against :mod:`transdec.model.protocol`."""

from transdec.decoding.api import STRATEGIES, DecodingConfig, decode
from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.greedy_frame_looping import InexactDecodingWarning, greedy_frame_looping
from transdec.decoding.greedy_label_looping import greedy_label_looping
from transdec.decoding.greedy_reference import greedy_reference
from transdec.decoding.greedy_wind import greedy_wind
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis

__all__ = [
    "STRATEGIES",
    "BatchedHyps",
    "DecodingConfig",
    "DecodingResult",
    "DecodingStats",
    "Hypothesis",
    "InexactDecodingWarning",
    "decode",
    "greedy_frame_looping",
    "greedy_label_looping",
    "greedy_reference",
    "greedy_wind",
]
