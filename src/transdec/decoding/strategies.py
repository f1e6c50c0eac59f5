"""Every built-in decoding strategy, registered here and nowhere else: name, function, options class, summary, and
where a strategy has them, its stream search and its CUDA-graph driver.

A new strategy is a function in ``greedy/`` or ``beam/`` decorated with
:func:`~transdec.decoding.registry.takes_options`, and one call below (see docs/architecture.md).
"""

from __future__ import annotations

from transdec.decoding.beam import aes_pp_graphs, alsd_pp_graphs, wind_batched_graphs
from transdec.decoding.beam.aes_pp import AesOptions, beam_aes_pp
from transdec.decoding.beam.alsd import AlsdOptions, beam_alsd
from transdec.decoding.beam.alsd_pp import AlsdPlusOptions, beam_alsd_pp
from transdec.decoding.beam.graves import GravesOptions, beam_graves
from transdec.decoding.beam.maes import MaesOptions, beam_maes
from transdec.decoding.beam.streaming import BeamStreams
from transdec.decoding.beam.wind import WindBeamOptions, beam_wind
from transdec.decoding.beam.wind_batched import WindBatchedOptions, beam_wind_batched
from transdec.decoding.greedy import label_looping_graphs
from transdec.decoding.greedy.ctc import ctc_greedy
from transdec.decoding.greedy.frame_looping import greedy_frame_looping
from transdec.decoding.greedy.label_looping import LabelLoopingOptions, greedy_label_looping
from transdec.decoding.greedy.reference import greedy_reference
from transdec.decoding.greedy.streaming import GreedyStreams
from transdec.decoding.greedy.wind import greedy_wind
from transdec.decoding.options import DecodingOptions, GreedyOptions, WindOptions
from transdec.decoding.registry import register_strategy

register_strategy("greedy_label", greedy_label_looping, LabelLoopingOptions,
                  "label-looping batched greedy: exact for every head, the fastest",
                  streams=GreedyStreams, graphs=label_looping_graphs.decode_options_with_graphs)
register_strategy("greedy_frame", greedy_frame_looping, GreedyOptions,
                  "frame-looping batched greedy, the baseline (inexact for TDT and multi-blank)")
# Streamed, every greedy strategy that is exact is label-looping over the streams: the same tokens, timestamps and
# durations (with greedy_wind's window per joint call).
register_strategy("greedy_wind", greedy_wind, WindOptions,
                  "one utterance at a time, a WIND window of frames per joint call: the batch-1 path",
                  streams=GreedyStreams)
register_strategy("greedy_reference", greedy_reference, GreedyOptions,
                  "one utterance at a time, frame by frame: the specification the others are tested against",
                  streams=GreedyStreams)
register_strategy("beam_graves", beam_graves, GravesOptions,
                  "Graves' frame-synchronous beam search with prefix summation (Graves 2012), one utterance at a time")
register_strategy("beam_maes", beam_maes, MaesOptions,
                  "modified adaptive expansion search with prefix search (Kim et al. 2020), one utterance at a time")
register_strategy("beam_alsd", beam_alsd, AlsdOptions,
                  "alignment-length synchronous beam search, one utterance at a time (Saon et al. 2020)")
register_strategy("beam_alsd_pp", beam_alsd_pp, AlsdPlusOptions,
                  "ALSD++: alignment-length synchronous beam search batched over utterances and beams",
                  streams=BeamStreams, graphs=alsd_pp_graphs.decode_with_graphs)
register_strategy("beam_aes_pp", beam_aes_pp, AesOptions,
                  "AES++: adaptive expansion search batched over utterances and beams",
                  graphs=aes_pp_graphs.decode_with_graphs)
register_strategy("beam_wind", beam_wind, WindBeamOptions,
                  "WIND beam search: a window of frames per joint call, one utterance at a time (RNN-T)")
register_strategy("beam_wind_batched", beam_wind_batched, WindBatchedOptions,
                  "WIND beam search batched over utterances: a window of frames per joint call (RNN-T)",
                  graphs=wind_batched_graphs.decode_with_graphs)
register_strategy("ctc_greedy", ctc_greedy, DecodingOptions, "greedy CTC on a hybrid model's CTC head (no Transducer)")
