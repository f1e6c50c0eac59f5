"""Stream audio files, each as one stream decoded together with the others as its audio arrives (at real-time speed with
--realtime), or a microphone (--mic). Final segments (ended by silence, see docs/streaming.md) are written as they
end; --partials shows the growing result on standard error. Cache-aware NeMo checkpoints stream with their caches
(--att-context-size); other models in buffered windows, whose latency is --chunk-ms plus --right-context-ms.
"""

from __future__ import annotations

import argparse

import torch

from transdec.cli.argtypes import at_least, look_ahead, milliseconds
from transdec.cli.common import (add_buffered_arguments, add_device_argument, add_model_argument, buffered_options,
                                 device_problem, encoder_compute_dtype, fail, require_one_strategy)
from transdec.cli.fusions import (add_boost_arguments, add_lm_arguments, boost_options, lm_problem,
                                  require_one_lm_weight, with_fusions)
from transdec.decoding.flags import add_decoding_arguments, decoding_configs
from transdec.decoding.registry import streaming_strategies
from transdec.decoding.stream_search import IGNORED_OPTIONS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "stream", help="streaming recognition of audio files or a microphone, partial and final results as they come",
        description=__doc__)
    p.add_argument("paths", nargs="*", metavar="PATH")
    add_model_argument(p)
    add_device_argument(p)
    add_buffered_arguments(p, chunk_help="audio encoded at a time, rounded to encoder frames (default: 480)")
    p.add_argument("--att-context-size", type=look_ahead, default=None, metavar="LEFT,RIGHT",
                   help="cache-aware NeMo models: the look-ahead, one the model was trained with, e.g. 70,6 (chunks "
                        "of RIGHT + 1 frames; default the model's first); they ignore the three options above")
    p.add_argument("--compute-dtype", type=_encoder_dtype, default=None, metavar="{float32,bfloat16}",
                   help="the encoder's dtype: bfloat16 (PyTorch models; fast on CPUs with AVX-512 BF16 or AMX, not "
                        "exact, see docs/cpu.md) or float32 (default: the model's)")
    p.add_argument("--max-streams", type=at_least(1), default=None,
                   help="streams at once; more files wait for a free one (default: the files, at most 32)")
    add_lm_arguments(p)
    add_boost_arguments(p, items=False)
    p.add_argument("--realtime", action="store_true", help="feed the files at real-time speed")
    p.add_argument("--piece-ms", type=milliseconds(1), default=0.1, dest="piece",
                   help="audio fed (or read from the microphone) at a time (default: 100)")
    p.add_argument("--no-endpoint", action="store_true", help="one segment per stream, final at its end")
    p.add_argument("--format", choices=["text", "jsonl"], default="text",
                   help="text: a line per segment with its times; jsonl: with word times and confidences")
    p.add_argument("--partials", action="store_true", help="print partial results to standard error")
    p.add_argument("--mic", action="store_true", help="stream the microphone instead of files (transdec[mic])")
    p.add_argument("--mic-device", default=None, help="sounddevice input name or index (default: the default)")
    p.add_argument("--seconds", type=float, default=None, help="with --mic: stop after this long (default: Ctrl-C)")
    add_decoding_arguments(p, default=None, strategies=streaming_strategies(), leave_out=IGNORED_OPTIONS)


def _encoder_dtype(text: str) -> torch.dtype:
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    if text not in dtypes:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(dtypes)}")
    return dtypes[text]


def run(args: argparse.Namespace) -> int:
    from transdec.decoding.api import streaming_config
    from transdec.loading import load_model
    from transdec.streaming import EndpointOptions, Recognizer, StreamingOptions
    from transdec.streaming.files import FeedOptions, stream_files, stream_microphone

    try:  # every option is checked before the model is loaded
        if bool(args.paths) == args.mic:
            raise ValueError("give audio files or --mic, not both" if args.mic else "no audio files given (or --mic)")
        problem = lm_problem(args) or device_problem(args.device)
        if problem:
            raise ValueError(problem)
        require_one_lm_weight(args, "stream")
        decodings = decoding_configs(args)
        require_one_strategy(args, decodings, "stream")
        streaming_config(decodings[0])  # a strategy that does not stream is refused here, naming those that do
        boost = boost_options(args)
        model = load_model(args.model, device=args.device, att_context_size=args.att_context_size,
                           onnx_variant=args.onnx_variant, quantize=args.quantize,
                           compute_dtype=encoder_compute_dtype(args))
        decodings = with_fusions(args, model, decodings, boost)
        options = StreamingOptions(
            max_streams=args.max_streams or min(max(1, len(args.paths)), 32),
            buffered=buffered_options(args), decoding=decodings[0],
            endpoint=None if args.no_endpoint else EndpointOptions())
        recognizer = Recognizer(model, options)
        feed = FeedOptions(args.piece, args.realtime)
        if args.mic:
            device = int(args.mic_device) if args.mic_device and args.mic_device.isdigit() else args.mic_device
            return stream_microphone(recognizer, device, args.seconds, feed, args.format == "jsonl", True)
        return stream_files(recognizer, args.paths, feed, args.format == "jsonl", args.partials)
    except (FileNotFoundError, ValueError) as error:
        return fail("transdec stream", error)
