"""The ``transdec`` command line."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import math
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch

from transdec import __version__
from transdec.biasing.boost import DEFAULT_WEIGHT as DEFAULT_BOOST_WEIGHT
from transdec.decoding.flags import add_decoding_arguments, decoding_configs
from transdec.long_audio import GLOBAL_ATTENTION_CONTEXT_SECONDS as GLOBAL_CONTEXT
from transdec.long_audio import ChunkingConfig
from transdec.model.transducer_model import DEFAULT_CUDA_LENGTH_POLICY, LENGTH_POLICIES
from transdec.runtime import configure_malloc
from transdec.scale.flags import absolute_paths, add_ray_arguments, ray_options
from transdec.training.flags import add_config_arguments, config_from_args
from transdec.training.model_options import ModelOptions
from transdec.training.trainer import TrainConfig


MODEL_HELP = "bundled model name, model file, .nemo checkpoint or ONNX export directory"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the command line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _at_least(minimum: int):
    """An argparse type: an integer no smaller than ``minimum``."""
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = "integer"  # for a non-number argparse says "invalid integer value"
    return parse


def _add_train_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train", help="train a Transducer model (rerun the same command to resume)",
        description="Train a Conformer Transducer on JSONL manifests. Running the same command again resumes "
                    "from the newest checkpoint in --exp-dir; the model options are then taken from it.")
    model = p.add_argument_group("model (ignored when resuming)")
    train = p.add_argument_group("training")
    # Added first, so that the usage line starts with the required manifests and run directory.
    add_config_arguments(train, TrainConfig)
    train.add_argument("--no-specaugment", action="store_true", help="no SpecAugment: no frequency or time masks")
    add_config_arguments(model, ModelOptions)


def _add_average_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("average", help="average the last checkpoints of a run into one model file")
    p.add_argument("--exp-dir", required=True, nargs="+",
                   help="run directory; several average the last checkpoints of each (a run and its continuation)")
    p.add_argument("--last", type=int, default=5, help="checkpoints per run")
    p.add_argument("--output", required=True)
    p.add_argument("--half", action="store_true", help="store weights as float16 (half the size)")


def _add_length_policy_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--length-policy", choices=LENGTH_POLICIES, default=None,
                   help="how the encoder treats input lengths it has not seen (cuDNN plans each new shape): pad to "
                        "whole seconds, run without cuDNN, both, or none (default: "
                        f"{DEFAULT_CUDA_LENGTH_POLICY} on a GPU, none on a CPU; see "
                        "transdec.model.transducer_model.LengthPolicy)")
    p.add_argument("--local-attention", type=_attention_window, default=None, metavar="LEFT[,RIGHT]",
                   help="NeMo models: switch the encoder to sliding-window attention over LEFT and RIGHT frames "
                        "(RIGHT defaults to LEFT), as NeMo does for long recordings; memory then grows linearly "
                        "with the length (e.g. 128)")
    p.add_argument("--front-end", choices=["model", "sherpa"], default="model",
                   help="features: the model's own, or those sherpa-onnx computes for its ONNX export (transcripts "
                        "then equal sherpa-onnx's; needs kaldi-native-fbank)")


def _add_long_audio_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("long recordings (encoded in overlapping windows, in bounded memory)")
    group.add_argument("--chunk-seconds", type=_seconds, default=ChunkingConfig.chunk_seconds, metavar="SECONDS",
                       help="the part of each window that is kept (default %(default)g); 0 encodes every recording "
                            "whole, whatever its length")
    group.add_argument("--context-seconds", type=_seconds, default=None, metavar="SECONDS",
                       help="audio on each side of a window's kept part (default: the encoder's receptive field where "
                            f"its attention is limited, which makes windows exact, else {GLOBAL_CONTEXT:g})")


def _chunking(args: argparse.Namespace) -> ChunkingConfig | None:
    return ChunkingConfig(args.chunk_seconds, args.context_seconds) if args.chunk_seconds > 0 else None


def _add_lm_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("language model (shallow fusion into any decoding strategy)")
    group.add_argument("--lm", default=None, metavar="FILE",
                       help="token-level n-gram LM: an ARPA file in NeMo's convention (token i written as "
                            "chr(i + 100)) or its compiled .pt form")
    group.add_argument("--lm-weight", type=_weights, default=None, metavar="WEIGHT[,WEIGHT...]",
                       help="weight of the LM's log-probs (default 0.5); evaluate takes several, comma-separated, and "
                            "reports each strategy with each (a sweep for a dev set)")
    group.add_argument("--lm-token-bonus", type=_finite, default=None,
                       help="added to every token's score, against the deletions LM fusion causes (default 0)")
    group.add_argument("--lm-blank-scoring", action="store_true",
                       help="the beam-search paper's blank scoring: tokens get ln(1 - p_blank) too, blanks (1 + weight)"
                            " times their log-prob")


def _add_boost_arguments(p: argparse.ArgumentParser, items: bool = True) -> None:
    group = p.add_argument_group("context biasing (phrase boosting, fused like the LM; docs/biasing.md)")
    group.add_argument("--boost-phrases", default=None, metavar="FILE",
                       help="phrases to boost: a UTF-8 text file, one phrase per line with an optional TAB and weight "
                            "(a factor on --boost-weight), or the .pt tree `transdec boost build` compiles from one")
    if items:
        group.add_argument("--item-phrases", action="store_true",
                           help="boost each manifest item by the phrases in its own \"boost_phrases\" field (a list "
                                "of texts or [text, weight] pairs) as well")
    group.add_argument("--boost-weight", type=_finite, default=None,
                       help=f"bonus per matched token, in nats, taken back if the phrase is not completed "
                            f"(default {DEFAULT_BOOST_WEIGHT:g})")
    group.add_argument("--boost-depth-scaling", type=_seconds, default=None, metavar="S",
                       help="the bonus of a phrase's n-th token is weight * (1 + S * (n - 1)) (default 0)")
    group.add_argument("--boost-case-variants", action="store_true",
                       help="for cased models: boost each phrase as written, lower case, Capitalised and UPPER case")


def _boost_options(args: argparse.Namespace):
    """The ``--boost-*`` options; a ValueError when they are given with nothing to boost."""
    from transdec.biasing.items import BoostOptions

    boosting = args.boost_phrases or getattr(args, "item_phrases", False)
    given = [flag for flag, value in (("--boost-weight", args.boost_weight),
                                      ("--boost-depth-scaling", args.boost_depth_scaling),
                                      ("--boost-case-variants", args.boost_case_variants or None)) if value is not None]
    if given and not boosting:
        raise ValueError(f"{', '.join(given)} without --boost-phrases: there are no phrases to boost")
    if args.boost_phrases and not Path(args.boost_phrases).is_file():
        raise ValueError(f"--boost-phrases {args.boost_phrases}: no such file")
    if args.boost_phrases and args.boost_phrases.endswith(".pt") and (args.boost_depth_scaling is not None
                                                                         or args.boost_case_variants):
        raise ValueError("--boost-depth-scaling and --boost-case-variants are fixed when the tree is built "
                         "(transdec boost build); give them there")
    return BoostOptions(DEFAULT_BOOST_WEIGHT if args.boost_weight is None else args.boost_weight,
                        args.boost_depth_scaling or 0.0, args.boost_case_variants)


def _boost_fusions(args: argparse.Namespace, model, options) -> list:
    """The ``--boost-phrases`` fusion (its phrases tokenized for the model, or its compiled tree) with ``options``
    (:func:`_boost_options`); none without."""
    if not args.boost_phrases:
        return []
    from transdec.biasing import Boost, BoostingTree, read_phrase_file, tokenize_phrases

    if args.boost_phrases.endswith(".pt"):
        tree = BoostingTree.load(args.boost_phrases)
        if tree.vocab_size != model.head.num_tokens:
            raise ValueError(f"--boost-phrases {args.boost_phrases}: built for {tree.vocab_size} tokens, the model "
                             f"has {model.head.num_tokens}")
    else:
        phrases = tokenize_phrases(read_phrase_file(args.boost_phrases), model.tokenizer, options.case_variants)
        tree = BoostingTree.build([phrases], model.head.num_tokens, options.depth_scaling)
    return [Boost(tree.to(args.device), options.weight)]


def _integers(text: str) -> list[int]:
    """The comma-separated integers of ``text``; empty if any part is not one."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        return []


def _attention_window(text: str) -> tuple[int, int]:
    """An argparse type: ``LEFT`` or ``LEFT,RIGHT`` positive frame counts."""
    parts = _integers(text)
    if len(parts) not in (1, 2) or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"expected LEFT or LEFT,RIGHT positive frame counts, got {text!r}")
    return parts[0], parts[-1]


def _look_ahead(text: str) -> tuple[int, int]:
    """An argparse type: ``LEFT,RIGHT`` non-negative frame counts."""
    parts = _integers(text)
    if len(parts) != 2 or min(parts) < 0:
        raise argparse.ArgumentTypeError(f"expected LEFT,RIGHT frame counts, e.g. 70,6, got {text!r}")
    return parts[0], parts[1]


def _weights(text: str) -> list[float]:
    """An argparse type: comma-separated finite LM weights."""
    try:
        weights = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(w) for w in weights):
        raise argparse.ArgumentTypeError(f"weights must be finite numbers, got {text!r}")
    return weights


def _finite(text: str) -> float:
    """An argparse type: a finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def _lm_problem(args: argparse.Namespace) -> str | None:
    """Why the LM options do not fit together (their settings without ``--lm``), or None; fills in defaults."""
    if not args.lm:
        given = [flag for flag, value in (("--lm-weight", args.lm_weight), ("--lm-token-bonus", args.lm_token_bonus),
                                          ("--lm-blank-scoring", args.lm_blank_scoring or None)) if value is not None]
        if given:
            return f"{', '.join(given)} without --lm: there is no LM to weight"
    args.lm_weight = args.lm_weight or [0.5]
    args.lm_token_bonus = args.lm_token_bonus or 0.0
    return None


def _lm_fusions(args: argparse.Namespace, model) -> list:
    """The ``--lm`` fusion at each ``--lm-weight`` (the LM read once, for the model's vocabulary); none without."""
    if not args.lm:
        return []
    from transdec.decoding import Fusion
    from transdec.lm import NGramLM

    lm = NGramLM.load(args.lm, model.head.num_tokens, device=args.device)
    return [Fusion(lm, weight, args.lm_token_bonus, args.lm_blank_scoring) for weight in args.lm_weight]


def _with_fusions(args: argparse.Namespace, model, configs: list, boost) -> list:
    """``configs`` with the ``--lm`` fusion added, one config per ``--lm-weight``, and the ``--boost-phrases``
    one with ``boost`` (:func:`_boost_options`)."""
    lms = _lm_fusions(args, model)
    boosts = _boost_fusions(args, model, boost)
    configs = [dataclasses.replace(config, fusions=(*config.fusions, lm)) for config in configs for lm in lms] or configs
    return [dataclasses.replace(config, fusions=(*config.fusions, *boosts)) for config in configs]


def _add_transcribe_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "transcribe", help="transcribe audio files, folders and NeMo manifests",
        description="Transcribe audio files (any format libsndfile reads, resampled as needed), folders of them "
                    "(recursively) and NeMo JSONL manifests. Bad items are reported and skipped, and each result is "
                    "written as soon as it and the items before it are done.",
        epilog="exit codes: 0 all transcribed; 1 some items failed (each is reported) or there was nothing to "
               "transcribe; 2 a usage error (a bad option, a missing model, an output that cannot be written); 130 "
               "interrupted (Ctrl-C or SIGTERM), with the results so far in OUTPUT.partial when --output is given")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--model", default="tiny-en-rnnt", help=MODEL_HELP + " (default: %(default)s)")
    p.add_argument("--batch-size", type=_at_least(1), default=16)
    p.add_argument("--device", default="cpu")
    _add_length_policy_argument(p)
    _add_long_audio_arguments(p)
    _add_lm_arguments(p)
    _add_boost_arguments(p)
    p.add_argument("--format", choices=["text", "jsonl", "manifest"], default="text",
                   help="text: one transcript per line; jsonl: text, words with times and confidences; "
                        "manifest: the input entries with pred_text added")
    p.add_argument("--output", default=None,
                   help="write here instead of standard output; an existing file is replaced only when the run "
                        "is complete (if interrupted, every result finished so far goes to OUTPUT.partial)")
    p.add_argument("--resume", action="store_true",
                   help="with --output: keep the results in OUTPUT.partial and transcribe only the items it lacks")
    p.add_argument("--allow-upsampling", action="store_true", help="accept audio below the model's sample rate")
    add_ray_arguments(p)
    add_decoding_arguments(p, default="greedy_label")


def _milliseconds(minimum: float):
    """An argparse type: milliseconds no fewer than ``minimum``, as seconds."""
    def parse(text: str) -> float:
        value = float(text)
        if not value >= minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g} ms, got {text}")
        return value / 1000.0

    parse.__name__ = "milliseconds"
    return parse


def _add_stream_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "stream", help="streaming recognition of audio files or a microphone, partial and final results as they come",
        description="Stream audio files, each as one stream decoded together with the others as its audio arrives "
                    "(at real-time speed with --realtime), or a microphone (--mic). Final segments (ended by "
                    "silence, see docs/streaming.md) are written as they end; --partials shows the growing "
                    "result on standard error. Cache-aware NeMo checkpoints stream with their caches "
                    "(--att-context-size); other models in buffered windows, whose latency is --chunk-ms plus "
                    "--right-context-ms.")
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.add_argument("--model", default="tiny-en-rnnt", help=MODEL_HELP + " (default: %(default)s)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--chunk-ms", type=_milliseconds(1), default=0.48, dest="chunk",
                   help="audio encoded at a time, rounded to encoder frames (default: 480)")
    p.add_argument("--left-context-ms", type=_milliseconds(0), default=2.0, dest="left_context",
                   help="audio before each chunk the encoder sees again (default: 2000)")
    p.add_argument("--right-context-ms", type=_milliseconds(0), default=0.48, dest="right_context",
                   help="audio after each chunk the encoder waits for (default: 480)")
    p.add_argument("--att-context-size", type=_look_ahead, default=None, metavar="LEFT,RIGHT",
                   help="cache-aware NeMo models: the look-ahead, one the model was trained with, e.g. 70,6 (chunks "
                        "of RIGHT + 1 frames; default the model's first); they ignore the three options above")
    p.add_argument("--max-streams", type=_at_least(1), default=None,
                   help="streams at once; more files wait for a free one (default: the files, at most 32)")
    p.add_argument("--beam-size", type=_at_least(1), default=None,
                   help="ALSD++ beam search with this beam, each segment its best hypothesis (default: greedy)")
    p.add_argument("--window-size", type=_at_least(1), default=1,
                   help="greedy: the WIND window, frames scored per joint call while looking for the next label "
                        "(1 = frame by frame; never changes the output; default: 1)")
    _add_lm_arguments(p)
    _add_boost_arguments(p, items=False)
    p.add_argument("--realtime", action="store_true", help="feed the files at real-time speed")
    p.add_argument("--piece-ms", type=_milliseconds(1), default=0.1, dest="piece",
                   help="audio fed (or read from the microphone) at a time (default: 100)")
    p.add_argument("--no-endpoint", action="store_true", help="one segment per stream, final at its end")
    p.add_argument("--format", choices=["text", "jsonl"], default="text",
                   help="text: a line per segment with its times; jsonl: with word times and confidences")
    p.add_argument("--partials", action="store_true", help="print partial results to standard error")
    p.add_argument("--mic", action="store_true", help="stream the microphone instead of files (transdec[mic])")
    p.add_argument("--mic-device", default=None, help="sounddevice input name or index (default: the default)")
    p.add_argument("--seconds", type=float, default=None, help="with --mic: stop after this long (default: Ctrl-C)")


def _stream(args: argparse.Namespace) -> int:
    from transdec.decoding import WindOptions
    from transdec.decoding.beam.alsd_pp import AlsdPlusOptions
    from transdec.loading import load_model
    from transdec.streaming import BufferedOptions, EndpointOptions, Recognizer, StreamingOptions
    from transdec.streaming.files import FeedOptions, stream_files, stream_microphone

    try:
        if bool(args.paths) == args.mic:
            raise ValueError("give audio files or --mic, not both" if args.mic else "no audio files given (or --mic)")
        problem = _lm_problem(args) or _device_problem(args.device)
        if problem:
            raise ValueError(problem)
        if len(args.lm_weight) != 1:
            raise ValueError("--lm-weight: stream takes one weight")
        if args.beam_size and args.window_size > 1:
            raise ValueError("--window-size: greedy search only, not with --beam-size")
        boost = _boost_options(args)
        options = StreamingOptions(
            max_streams=args.max_streams or min(max(1, len(args.paths)), 32),
            buffered=BufferedOptions(args.chunk, args.left_context, args.right_context),
            decoding=(AlsdPlusOptions(beam_size=args.beam_size) if args.beam_size
                      else WindOptions(window_size=args.window_size)),
            endpoint=None if args.no_endpoint else EndpointOptions())
        model = load_model(args.model, device=args.device, att_context_size=args.att_context_size)
        recognizer = Recognizer(model, options, _lm_fusions(args, model) + _boost_fusions(args, model, boost))
        feed = FeedOptions(args.piece, args.realtime)
        if args.mic:
            device = int(args.mic_device) if args.mic_device and args.mic_device.isdigit() else args.mic_device
            return stream_microphone(recognizer, device, args.seconds, feed, args.format == "jsonl", True)
        return stream_files(recognizer, args.paths, feed, args.format == "jsonl", args.partials)
    except (FileNotFoundError, ValueError) as error:
        print(f"transdec stream: error: {error}", file=sys.stderr)
        return 2


def _add_serve_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve", help="an HTTP server: OpenAI's transcription API, streaming over a WebSocket, metrics",
        description="Serve a model over HTTP (pip install 'transdec[serve]'; docs/serve.md): POST "
                    "/v1/audio/transcriptions as OpenAI's API has it, requests arriving together decoded in one "
                    "batch; streaming recognition over the WebSocket /v1/audio/stream; GET /health and GET /metrics "
                    "(Prometheus). SIGTERM or Ctrl-C stops taking requests, finishes those in flight and exits 0.")
    p.add_argument("--model", default="tiny-en-rnnt", help=MODEL_HELP + " (default: %(default)s)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s; 0.0.0.0: all)")
    p.add_argument("--port", type=_at_least(0), default=8000, help="(default: %(default)s)")
    p.add_argument("--language", default="en",
                   help="the language the model transcribes (ISO-639-1; requests naming another are refused; "
                        "'any' accepts all; default: %(default)s)")
    limits = p.add_argument_group("batching and limits")
    limits.add_argument("--max-batch", type=_at_least(1), default=16, help="requests decoded together (default: 16)")
    limits.add_argument("--max-wait-ms", type=_seconds, default=10.0,
                        help="how long a request waits for others to batch with (default: 10)")
    limits.add_argument("--max-queue", type=_at_least(1), default=64,
                        help="requests admitted and not yet decoding; more get 503 with Retry-After (default: 64)")
    limits.add_argument("--max-audio-seconds", type=_finite, default=300.0,
                        help="the longest recording a request may send (default: 300)")
    limits.add_argument("--max-request-mb", type=_finite, default=25.0, help="the largest request (default: 25)")
    limits.add_argument("--max-streams", type=_at_least(1), default=16,
                        help="WebSocket streams at once, decoded in one batch; more are closed with 1013 "
                             "(default: 16)")
    streaming = p.add_argument_group("streaming (buffered windows, as transdec stream)")
    streaming.add_argument("--chunk-ms", type=_milliseconds(1), default=0.48, dest="chunk",
                           help="audio encoded at a time (default: 480)")
    streaming.add_argument("--left-context-ms", type=_milliseconds(0), default=2.0, dest="left_context",
                           help="audio before each chunk the encoder sees again (default: 2000)")
    streaming.add_argument("--right-context-ms", type=_milliseconds(0), default=0.48, dest="right_context",
                           help="audio after each chunk the encoder waits for (default: 480)")
    _add_length_policy_argument(p)
    _add_long_audio_arguments(p)
    _add_lm_arguments(p)
    _add_boost_arguments(p, items=False)
    p.add_argument("--allow-upsampling", action="store_true", help="accept audio below the model's sample rate")
    add_decoding_arguments(p, default="greedy_label")


def _serve(args: argparse.Namespace) -> int:
    import importlib.util

    try:  # the serve extra
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401

        if not (importlib.util.find_spec("python_multipart") or importlib.util.find_spec("multipart")):
            raise ImportError("python-multipart, which reads uploaded forms, is not installed")
        from transdec.serve import ServeOptions, run
    except ImportError as error:
        print(f"transdec serve: error: {error}; pip install 'transdec[serve]'", file=sys.stderr)
        return 2
    from transdec.streaming import BufferedOptions, StreamingOptions

    try:  # every option is checked before the model is loaded
        decodings = decoding_configs(args)
        if len(decodings) != 1:
            raise ValueError(f"--decoding {args.decoding}: serve takes one strategy")
        problem = _lm_problem(args) or _device_problem(args.device)
        if problem:
            raise ValueError(problem)
        if len(args.lm_weight) != 1:
            raise ValueError("--lm-weight: serve takes one weight")
        args.item_phrases = True  # each request may bring its own phrases, boosted with --boost-weight
        boost = _boost_options(args)
        streaming = StreamingOptions(args.max_streams, BufferedOptions(args.chunk, args.left_context,
                                                                       args.right_context))
        try:
            options = ServeOptions(model_name=args.model, language=None if args.language == "any" else args.language,
                                   decoding=decodings[0], chunking=_chunking(args), boost=boost, streaming=streaming,
                                   max_batch=args.max_batch, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                                   max_audio_seconds=args.max_audio_seconds, max_request_mb=args.max_request_mb,
                                   allow_upsampling=args.allow_upsampling)
        except ValueError as error:  # ServeOptions names its field first: name the flag instead
            field, _, rest = str(error).partition(" ")
            raise ValueError(f"--{field.replace('_', '-')} {rest}") from None
        model = _load_model(args)
        options = dataclasses.replace(options, decoding=_with_fusions(args, model, decodings, boost)[0])
        _check_strategies_fit(model, [options.decoding])
    except (FileNotFoundError, ValueError) as error:
        print(f"transdec serve: error: {error}", file=sys.stderr)
        return 2
    run(model, options, args.host, args.port)
    return 0


def _add_evaluate_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "evaluate", help="WER, CER and RTFx on a manifest, several strategies side by side",
        description="Evaluate on a NeMo manifest with reference texts: WER and CER after normalisation, RTFx of "
                    "encoder + decoder and of the decoder alone (encoder timed separately), pooled over all "
                    "utterances, which are sorted by duration and batched.",
        epilog="exit codes: 0 every item evaluated; 1 some items could not be (each is reported) or none could; 2 a "
               "usage error (a bad option, a missing manifest or model); 130 interrupted")
    p.add_argument("manifest")
    p.add_argument("--model", default="tiny-en-rnnt", help=MODEL_HELP + " (default: %(default)s)")
    p.add_argument("--batch-size", type=_at_least(1), default=16)
    p.add_argument("--warmup", type=_at_least(0), default=1, metavar="BATCHES", help="untimed batches before timing")
    p.add_argument("--normalizer", choices=["whisper", "none"], default="whisper",
                   help="whisper: Whisper's English normaliser (whisper-normalizer); none: whitespace only")
    p.add_argument("--device", default="cpu")
    _add_length_policy_argument(p)
    _add_long_audio_arguments(p)
    _add_lm_arguments(p)
    _add_boost_arguments(p)
    p.add_argument("--output-dir", default=None, help="write predictions_<strategy>.jsonl and summary.json here")
    p.add_argument("--allow-upsampling", action="store_true", help="accept audio below the model's sample rate")
    add_decoding_arguments(p, default="greedy_label,greedy_frame", several=True)


def _add_lm_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("lm", help="build token-level n-gram LMs for a model",
                              description="N-gram language models over a model's tokens (docs/lm.md).")
    commands = p.add_subparsers(dest="lm_command", required=True, metavar="{build}")
    build = commands.add_parser(
        "build", help="estimate an ARPA LM from text, tokenized with the model's tokenizer",
        description="Tokenize each non-blank line of a UTF-8 text with the model's tokenizer (normalise the text "
                    "as the model's transcripts are first) and estimate an interpolated modified Kneser-Ney LM "
                    "over the tokens (NeMo's convention: token i written as chr(i + 100)), with KenLM's lmplz "
                    "when it is found (recipes/build_lmplz.sh builds it), else with the built-in estimator, which "
                    "gives the same probabilities.")
    build.add_argument("--text", required=True, help="the corpus: one sentence per line")
    build.add_argument("--model", required=True, help="bundled model name or model file whose tokens the LM predicts")
    build.add_argument("--order", type=int, default=4, help="n-gram order, 1-6 (default %(default)s)")
    build.add_argument("-o", "--output", required=True, metavar="ARPA", help="the ARPA file to write")
    build.add_argument("--estimator", choices=["auto", "lmplz", "builtin"], default="auto",
                       help="auto (default): lmplz when found, else the built-in estimator")
    build.add_argument("--lmplz", default=None, metavar="PATH", help="the lmplz executable (default: lmplz on PATH)")
    build.add_argument("--lmplz-memory", default="1G", metavar="SIZE",
                       help="lmplz's sorting memory (its -S: e.g. 1G or 20%%; default %(default)s)")
    build.add_argument("--no-discount-fallback", action="store_true",
                       help="fail where a tiny or repetitive text gives no usable Kneser-Ney discounts for an order "
                            "(default: use 0.5, 1, 1.5 there, as lmplz --discount_fallback)")
    build.add_argument("--compile", default=None, metavar="PT",
                       help="also write the compiled form (.pt) that --lm loads faster")


def _add_boost_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("boost", help="compile phrase lists for context biasing",
                              description="Phrase boosting trees for a model (docs/biasing.md).")
    commands = p.add_subparsers(dest="boost_command", required=True, metavar="{build}")
    build = commands.add_parser(
        "build", help="tokenize a phrase list with the model's tokenizer and compile its boosting tree",
        description="Read a phrase list (one phrase per line, an optional TAB and weight), tokenize it with the "
                    "model's tokenizer and write the boosting tree that --boost-phrases loads without tokenizing "
                    "again (worth it for long lists).")
    build.add_argument("phrases", help="the phrase list, UTF-8 text")
    build.add_argument("--model", required=True, help=MODEL_HELP)
    build.add_argument("-o", "--output", required=True, metavar="PT", help="the tree file to write (.pt)")
    build.add_argument("--depth-scaling", type=_seconds, default=0.0, metavar="S",
                       help="the bonus of a phrase's n-th token is weight * (1 + S * (n - 1)) (default 0)")
    build.add_argument("--case-variants", action="store_true",
                       help="for cased models: each phrase as written, lower case, Capitalised and UPPER case")


def _boost(args: argparse.Namespace) -> int:
    from transdec.biasing import BoostingTree, read_phrase_file, tokenize_phrases
    from transdec.loading import load_model

    try:
        if not args.output.endswith(".pt"):
            raise ValueError(f"-o {args.output}: the tree file must end in .pt (that is how --boost-phrases tells "
                             "it from a phrase list)")
        problem = _output_problem(args.output)
        if problem:
            raise ValueError(problem.replace("--output", "-o"))
        phrases = read_phrase_file(args.phrases)
        model = load_model(args.model)
        tokenized = tokenize_phrases(phrases, model.tokenizer, args.case_variants)
        tree = BoostingTree.build([tokenized], model.head.num_tokens, args.depth_scaling)
        tree.save(args.output)
    except (FileNotFoundError, ValueError) as error:
        print(f"transdec boost build: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}: {len(phrases)} phrases, {len(tokenized)} token sequences, {tree.num_nodes} nodes")
    return 0


def _add_export_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="export a model to another runtime (ONNX)",
                              description="Export a model for deployment (docs/deploy.md).")
    commands = p.add_subparsers(dest="export_command", required=True, metavar="{onnx}")
    onnx = commands.add_parser(
        "onnx", help="encoder, decoder and joiner as ONNX files that sherpa-onnx and transdec load",
        description="Write encoder.onnx, decoder.onnx, joiner.onnx (self-contained, dynamic batch and time axes), "
                    "tokens.txt and tokenizer.model to OUT_DIR: NeMo-transducer layout for LSTM predictors "
                    "(sherpa-onnx model_type nemo_transducer), icefall layout for stateless ones (model_type "
                    "transducer). transdec.load_model(OUT_DIR) decodes the export with every transdec decoder.")
    onnx.add_argument("model", help="bundled model name, model file or .nemo checkpoint")
    onnx.add_argument("out_dir", help="directory to write the files to (created if missing)")
    onnx.add_argument("--max-frames", type=int, default=None,
                      help="encoder frames the rotary position tables cover (default 20000: 26 min at 8x)")


def _add_inspect_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "inspect", help="what a model is and whether transdec loads it, without decoding",
        description="Describe a model without decoding anything: class, head, tokenizer, parameters, front end, "
                    "encoder (layers, attention and its context, subsampling), streaming; for a NeMo checkpoint "
                    "transdec cannot load, every setting that stops it.",
        epilog="exit codes: 0 transdec loads the model; 1 it does not (the reasons are listed); 2 a usage error or a "
               "file that is no model")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--format", choices=["text", "json"], default="text")


def _inspect(args: argparse.Namespace) -> int:
    from transdec.inspect_model import format_report, inspect_model

    try:
        report = inspect_model(args.model)
    except ImportError as error:
        print(f"transdec inspect: error: {args.model}: {error} (pip install 'transdec[onnx]')", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        print(f"transdec inspect: error: {error}", file=sys.stderr)
        return 2
    print(format_report(report, args.format))
    return 0 if report["supported"] else 1


def _export(args: argparse.Namespace) -> int:
    from transdec.export.onnx import DEFAULT_MAX_FRAMES, export_onnx
    from transdec.loading import load_model

    try:
        result = export_onnx(load_model(args.model), args.out_dir, max_frames=args.max_frames or DEFAULT_MAX_FRAMES)
    except ImportError as error:
        print(f"transdec export onnx: error: {error} (pip install 'transdec[onnx]')", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        print(f"transdec export onnx: error: {error}", file=sys.stderr)
        return 2
    written = [p.name for p in (result.encoder, result.decoder, result.joiner, result.tokens)]
    written += ["tokenizer.model"] if (result.directory / "tokenizer.model").is_file() else []
    print(f"wrote {result.layout}-layout ONNX model to {result.directory}: {', '.join(written)}")
    return 0


def _train_config(args: argparse.Namespace) -> TrainConfig:
    """The parsed ``transdec train`` flags' TrainConfig; ``--no-specaugment`` overrides the mask counts."""
    config = config_from_args(args, TrainConfig)
    if args.no_specaugment:
        config.specaugment = dataclasses.replace(config.specaugment, freq_masks=0, time_masks=0)
    return config


def _train(args: argparse.Namespace) -> int | None:
    from transdec.training.trainer import Trainer

    config = _train_config(args)
    try:  # a bad device or model shape is one line, not a traceback
        problem = _device_problem(config.device)
        if problem:
            raise ValueError(problem)
        model_config = config_from_args(args, ModelOptions).model_config(ctc_head=config.ctc_weight > 0)
    except ValueError as error:
        print(f"transdec train: error: {error}", file=sys.stderr)
        return 2
    Trainer(config, model_config).train()


def _average(args: argparse.Namespace) -> None:
    from transdec.training.trainer import average_checkpoints

    model = average_checkpoints(args.exp_dir, args.last, args.output, half=args.half)
    print(f"wrote {args.output}: {model.num_parameters()} parameters")


def _device_problem(name: str) -> str | None:
    try:
        torch.zeros(1, device=torch.device(name))
    except (RuntimeError, AssertionError) as error:  # torch without CUDA raises AssertionError
        return f"--device {name}: not usable here ({str(error).splitlines()[0]})"
    return None


def _output_problem(path: str) -> str | None:
    """Why ``--output PATH`` cannot be written, checked before any work; None if it can."""
    folder = Path(path).parent
    if Path(path).is_dir():
        return f"--output {path}: is a directory"
    if not folder.is_dir():
        return f"--output {path}: no such directory {folder}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--output {path}: cannot write in {folder}"
    return None


def _output_dir_problem(path: str) -> str | None:
    """Why ``--output-dir PATH`` cannot be created or written, checked before any work; None if it can."""
    existing = next((p for p in [Path(path), *Path(path).parents] if p.exists()), Path("."))  # the rest is created
    if not existing.is_dir():
        return f"--output-dir {path}: {existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--output-dir {path}: cannot write in {existing}"
    return None


def _load_model(args: argparse.Namespace):
    """The model of ``--model``, a :class:`~transdec.protocol.SpeechModel`, with the run-time options applied."""
    from transdec.loading import load_model
    from transdec.model.transducer_model import TransducerModel

    try:
        model = load_model(args.model, device=args.device, front_end=args.front_end)
    except ImportError as error:  # an optional part: the ONNX runtime, kaldi-native-fbank
        extra = "sherpa" if args.front_end == "sherpa" else "onnx"
        raise ValueError(f"{args.model}: {error} (pip install 'transdec[{extra}]')") from error
    if isinstance(model, TransducerModel):  # the only kind whose encoder has a length policy to choose
        model.length_policy = args.length_policy
    if args.local_attention is not None:
        if not hasattr(model, "use_local_attention"):
            raise ValueError(f"--local-attention is for NeMo models; {args.model} is not one")
        model.use_local_attention(*args.local_attention)
    return model


def _transcribe(args: argparse.Namespace) -> int:
    from transdec.transcribe_files import transcribe_files

    try:  # every option is checked before the model is loaded; a bad one is one line, not a traceback
        decodings = decoding_configs(args)
        if len(decodings) != 1:
            raise ValueError(f"--decoding {args.decoding}: transcribe takes one strategy")
        ray = ray_options(args)
        problem = (_lm_problem(args) or (args.ray is None and _device_problem(args.device))
                   or (args.output and _output_problem(args.output))
                   or (args.resume and not args.output and "--resume needs --output (it resumes OUTPUT.partial)"))
        if problem:
            raise ValueError(problem)
        if len(args.lm_weight) != 1:
            raise ValueError("--lm-weight: transcribe takes one weight")
        boost = _boost_options(args)
        if args.ray is None:  # on a cluster, each replica loads the model (ray_transcribe checks it first)
            model = _load_model(args)
            decodings = _with_fusions(args, model, decodings, boost)
            _check_strategies_fit(model, decodings)
    except (FileNotFoundError, ValueError) as error:
        print(f"transdec transcribe: error: {error}", file=sys.stderr)
        return 2
    if args.ray is not None:
        from transdec.scale import ray_transcribe

        absolute_paths(args)  # the replicas load the model, LM and phrases from other directories
        return ray_transcribe(functools.partial(_ray_replica, args, decodings), args.paths,
                              batch_size=args.batch_size, output_format=args.format, output=args.output,
                              resume=args.resume, allow_upsampling=args.allow_upsampling, chunking=_chunking(args),
                              item_boost=boost if args.item_phrases else None, device=args.device, options=ray)
    return transcribe_files(model, args.paths, decodings[0], args.batch_size, args.format, args.output,
                            args.allow_upsampling, _chunking(args), args.resume, boost if args.item_phrases else None)


def _ray_replica(args: argparse.Namespace, decodings: list, device: str):
    """A Ray replica's model on ``device`` and its decoding, with the fusions of the flags (a ReplicaLoader)."""
    args = argparse.Namespace(**{**vars(args), "device": device})
    model = _load_model(args)
    decodings = _with_fusions(args, model, decodings, _boost_options(args))
    _check_strategies_fit(model, decodings)
    return model, decodings[0]


def _check_strategies_fit(model, decodings: list) -> None:
    """Refuse a strategy the model cannot run, before any audio is read."""
    if any(d.strategy == "ctc_greedy" for d in decodings) and getattr(model, "ctc", None) is None:
        raise ValueError("--decoding ctc_greedy needs a model with a CTC head (a hybrid RNN-T/CTC model); "
                         "this one has none")


def _evaluate(args: argparse.Namespace) -> int:
    from transdec.evaluate import EvaluationError, evaluate_manifest, format_table

    try:
        strategies = decoding_configs(args)
        problem = (_lm_problem(args) or _device_problem(args.device)
                   or (args.output_dir and _output_dir_problem(args.output_dir)))
        if not Path(args.manifest).is_file():
            problem = f"{args.manifest}: no such file"
        if problem:
            raise ValueError(problem)
        boost = _boost_options(args)
        model = _load_model(args)
        strategies = _with_fusions(args, model, strategies, boost)
        _check_strategies_fit(model, strategies)
    except (FileNotFoundError, ValueError) as error:
        print(f"transdec evaluate: error: {error}", file=sys.stderr)
        return 2
    try:
        reports, failed = evaluate_manifest(model, args.manifest, strategies, args.batch_size, args.warmup,
                                            args.normalizer, args.output_dir, args.allow_upsampling, _chunking(args),
                                            boost if args.item_phrases else None)
    except EvaluationError as error:
        print(f"transdec evaluate: error: {error}", file=sys.stderr)
        return 1
    print(f"model {args.model}, normaliser {args.normalizer}, batch size {args.batch_size}, device {args.device}, "
          f"length policy {model.default_length_policy(args.device)}")
    print(format_table(reports))
    if failed:
        print(f"{failed} item(s) could not be evaluated", file=sys.stderr)
    return 1 if failed else 0


def _lm(args: argparse.Namespace) -> int:
    from transdec.lm.build import LMBuildError, build_lm
    from transdec.lm.kneser_ney import MAX_ORDER
    from transdec.loading import load_model

    try:
        if not 1 <= args.order <= MAX_ORDER:  # checked before the model loads
            raise LMBuildError(f"--order {args.order}: the order must be 1 .. {MAX_ORDER}")
        tokenizer = load_model(args.model).tokenizer
        report = build_lm(args.text, tokenizer, args.order, args.output, estimator=args.estimator, lmplz=args.lmplz,
                          discount_fallback=not args.no_discount_fallback, lmplz_memory=args.lmplz_memory,
                          compile_to=args.compile)
    except (FileNotFoundError, ValueError) as error:  # LMBuildError is a ValueError
        print(f"transdec lm build: error: {error}", file=sys.stderr)
        return 2
    print(report.summary())
    return 0


def main(argv: list[str] | None = None) -> int:
    command = "transdec"
    try:
        parser = _Parser(prog="transdec", description="Fast, exact Transducer speech recognition.")
        parser.add_argument("--version", action="version", version=f"transdec {__version__}")
        subparsers = parser.add_subparsers(dest="command")
        _add_train_parser(subparsers)
        _add_average_parser(subparsers)
        _add_transcribe_parser(subparsers)
        _add_evaluate_parser(subparsers)
        _add_stream_parser(subparsers)
        _add_serve_parser(subparsers)
        _add_lm_parser(subparsers)
        _add_boost_parser(subparsers)
        _add_export_parser(subparsers)
        _add_inspect_parser(subparsers)
        args = parser.parse_args(argv)
        if args.command is None:  # bare `transdec`: what it can do, as argparse answers a missing argument (exit 2)
            parser.print_help(sys.stderr)
            return 2
        command = f"transdec {args.command}"
        # Training trades some memory for 1.3x faster steps; batch transcription keeps glibc's defaults.
        configure_malloc("keep" if args.command == "train" else "default")
        commands = {"train": _train, "average": _average, "transcribe": _transcribe, "evaluate": _evaluate,
                    "stream": _stream, "serve": _serve, "lm": _lm, "boost": _boost, "export": _export,
                    "inspect": _inspect}
        with _one_line_warnings(command):
            return commands[args.command](args) or 0
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130


@contextlib.contextmanager
def _one_line_warnings(command: str) -> Iterator[None]:
    """Warnings as the command's other messages are: one line, starting with its name."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"{command}: warning: {message}", file=file or sys.stderr)

    previous = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


if __name__ == "__main__":
    sys.exit(main())
