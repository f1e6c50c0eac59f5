"""Decoders for Transducer models, all written against :mod:`transdec.protocol`."""

from transdec.decoding.api import DecodingConfig, decode, strategy_named
from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.greedy.frame_looping import InexactDecodingWarning, greedy_frame_looping
from transdec.decoding.greedy.label_looping import LabelLoopingOptions, greedy_label_looping
from transdec.decoding.greedy.reference import greedy_reference
from transdec.decoding.greedy.wind import greedy_wind
from transdec.decoding.options import BeamOptions, DecodingOptions, GreedyOptions, WindOptions
from transdec.decoding.registry import STRATEGIES, Strategy, register_strategy
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, LabelScores, Scoring, TokenScorer

__all__ = [
    "STRATEGIES",
    "BatchedHyps",
    "BeamOptions",
    "DecodingConfig",
    "DecodingOptions",
    "DecodingResult",
    "DecodingStats",
    "Fusion",
    "GreedyOptions",
    "Hypothesis",
    "InexactDecodingWarning",
    "LabelLoopingOptions",
    "LabelScores",
    "Scoring",
    "Strategy",
    "TokenScorer",
    "WindOptions",
    "decode",
    "greedy_frame_looping",
    "greedy_label_looping",
    "greedy_reference",
    "greedy_wind",
    "register_strategy",
    "strategy_named",
]
