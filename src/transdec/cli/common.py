"""What the commands share beyond the fusions: the flags naming the model and how it runs (device, length policy,
long recordings, streaming windows), the checks made before any work (device, output paths, strategies), loading
the model with its run-time options, and the one-line error every command ends with."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

import torch

from transdec.adapters.onnx_files import VARIANTS
from transdec.cli.argtypes import attention_window, milliseconds, seconds
from transdec.cli.fusions import boost_options, with_fusions
from transdec.long_audio import GLOBAL_ATTENTION_CONTEXT_SECONDS as GLOBAL_CONTEXT
from transdec.long_audio import ChunkingConfig
from transdec.model.quantization import QUANTIZATIONS
from transdec.model.transducer_model import DEFAULT_CUDA_LENGTH_POLICY, LENGTH_POLICIES

MODEL_HELP = ("bundled model name, model file, .nemo checkpoint, ONNX export directory, or a Hugging Face Hub "
              "repository as org/name[@revision] (its .nemo or ONNX files, fetched into the Hub's cache)")


def fail(command: str, message: object, code: int = 2) -> int:
    """Print ``message`` as ``command``'s one-line error; ``code``, the exit code (2: a usage error)."""
    print(f"{command}: error: {message}", file=sys.stderr)
    return code


def add_group_parser(subparsers: argparse._SubParsersAction, group: tuple[str, str, str],
                     command: tuple[str, str, str | None]) -> argparse.ArgumentParser:
    """A command group with one command so far (``transdec lm build``): the group's and the command's ``(name,
    help, description)``; returns the command's parser."""
    name, help, description = group
    parser = subparsers.add_parser(name, help=help, description=description)
    commands = parser.add_subparsers(dest=f"{name}_command", required=True, metavar="{" + command[0] + "}")
    return commands.add_parser(command[0], help=command[1], description=command[2])


def add_model_argument(p: argparse.ArgumentParser) -> None:
    """``--model``, for the commands that run a model (the bundled tiny one unless told), ``--onnx-variant`` and
    ``--quantize``."""
    p.add_argument("--model", default="tiny-en-rnnt", help=MODEL_HELP + " (default: %(default)s)")
    add_onnx_variant_argument(p)
    p.add_argument("--quantize", choices=QUANTIZATIONS, default=None,
                   help="int8: the encoder's and joint's matrix products in int8 (PyTorch models on a CPU: int8 "
                        "weights, each input quantized as it comes; not exact, see docs/cpu.md). ONNX exports: "
                        "--onnx-variant int8 loads their int8 graphs. --compute-dtype bfloat16 runs a PyTorch "
                        "model's encoder in bfloat16 instead; with both, the attention in bfloat16 beside the int8 "
                        "products (long recordings, CPUs with bfloat16 instructions)")


def add_onnx_variant_argument(p: argparse.ArgumentParser) -> None:
    """``--onnx-variant``: which graphs of an ONNX export holding both (a directory or a Hub repository)."""
    p.add_argument("--onnx-variant", choices=VARIANTS, default="fp32",
                   help="ONNX exports holding float and int8 graphs (encoder.onnx and encoder.int8.onnx): which to "
                        "load, and from the Hub, which to download (default: %(default)s; a part with only one "
                        "variant loads that one)")


def add_device_argument(p: argparse.ArgumentParser) -> None:
    """``--device``, a torch device name (checked by :func:`device_problem` before any work)."""
    p.add_argument("--device", default="cpu")


def add_length_policy_arguments(p: argparse.ArgumentParser) -> None:
    """How the encoder runs: ``--length-policy``, ``--local-attention`` and ``--front-end``."""
    p.add_argument("--length-policy", choices=LENGTH_POLICIES, default=None,
                   help="how the encoder treats input lengths it has not seen (cuDNN plans each new shape): pad to "
                        "whole seconds, run without cuDNN, both, or none (default: "
                        f"{DEFAULT_CUDA_LENGTH_POLICY} on a GPU, none on a CPU; see "
                        "transdec.model.transducer_model.LengthPolicy)")
    p.add_argument("--local-attention", type=attention_window, default=None, metavar="LEFT[,RIGHT]",
                   help="NeMo models: switch the encoder to sliding-window attention over LEFT and RIGHT frames "
                        "(RIGHT defaults to LEFT), as NeMo does for long recordings; memory then grows linearly "
                        "with the length (e.g. 128)")
    p.add_argument("--front-end", choices=["model", "sherpa"], default="model",
                   help="features: the model's own, or those sherpa-onnx computes for its ONNX export (transcripts "
                        "then equal sherpa-onnx's; needs kaldi-native-fbank)")


def add_long_audio_arguments(p: argparse.ArgumentParser) -> None:
    """The group of ``--chunk-seconds`` and ``--context-seconds``: long recordings encoded in windows."""
    group = p.add_argument_group("long recordings (encoded in overlapping windows, in bounded memory)")
    group.add_argument("--chunk-seconds", type=seconds, default=ChunkingConfig.chunk_seconds, metavar="SECONDS",
                       help="the part of each window that is kept (default %(default)g); 0 encodes every recording "
                            "whole, whatever its length")
    group.add_argument("--context-seconds", type=seconds, default=None, metavar="SECONDS",
                       help="audio on each side of a window's kept part (default: the encoder's receptive field where "
                            f"its attention is limited, which makes windows exact, else {GLOBAL_CONTEXT:g})")


def chunking(args: argparse.Namespace) -> ChunkingConfig | None:
    """The windows of :func:`add_long_audio_arguments`' flags; None: every recording encoded whole."""
    return ChunkingConfig(args.chunk_seconds, args.context_seconds) if args.chunk_seconds > 0 else None


def add_buffered_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup, chunk_help: str) -> None:
    """The buffered windows a streaming encoder without caches runs in: ``--chunk-ms`` (its help ``chunk_help``),
    ``--left-context-ms`` and ``--right-context-ms``, parsed as seconds."""
    p.add_argument("--chunk-ms", type=milliseconds(1), default=0.48, dest="chunk", help=chunk_help)
    p.add_argument("--left-context-ms", type=milliseconds(0), default=2.0, dest="left_context",
                   help="audio before each chunk the encoder sees again (default: 2000)")
    p.add_argument("--right-context-ms", type=milliseconds(0), default=0.48, dest="right_context",
                   help="audio after each chunk the encoder waits for (default: 480)")


def buffered_options(args: argparse.Namespace):
    """The :class:`~transdec.streaming.BufferedOptions` of :func:`add_buffered_arguments`' flags."""
    from transdec.streaming import BufferedOptions

    return BufferedOptions(args.chunk, args.left_context, args.right_context)


def device_problem(name: str) -> str | None:
    """Why ``--device NAME`` cannot be used on this machine, checked before any work; None if it can."""
    try:
        torch.zeros(1, device=torch.device(name))
    except (RuntimeError, AssertionError) as error:  # torch without CUDA raises AssertionError
        return f"--device {name}: not usable here ({str(error).splitlines()[0]})"
    return None


def output_problem(path: str) -> str | None:
    """Why ``--output PATH`` cannot be written, checked before any work; None if it can."""
    folder = Path(path).parent
    if Path(path).is_dir():
        return f"--output {path}: is a directory"
    if not folder.is_dir():
        return f"--output {path}: no such directory {folder}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--output {path}: cannot write in {folder}"
    return None


def output_dir_problem(path: str) -> str | None:
    """Why ``--output-dir PATH`` cannot be created or written, checked before any work; None if it can."""
    existing = next((p for p in [Path(path), *Path(path).parents] if p.exists()), Path("."))  # the rest is created
    if not existing.is_dir():
        return f"--output-dir {path}: {existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--output-dir {path}: cannot write in {existing}"
    return None


def require_one_strategy(args: argparse.Namespace, decodings: list, command: str) -> None:
    """Refuse several ``--decoding`` strategies where ``command`` decodes with one (only evaluate compares)."""
    if len(decodings) != 1:
        raise ValueError(f"--decoding {args.decoding}: {command} takes one strategy")


def load_model_of(args: argparse.Namespace):
    """The model of ``--model``, a :class:`~transdec.protocol.SpeechModel`, with the run-time options applied."""
    from transdec.loading import load_model
    from transdec.model.transducer_model import TransducerModel

    try:
        model = load_model(args.model, device=args.device, front_end=args.front_end, onnx_variant=args.onnx_variant,
                           quantize=args.quantize, compute_dtype=encoder_compute_dtype(args))
    except ImportError as error:  # an optional part: the ONNX runtime, kaldi-native-fbank
        extra = "sherpa" if args.front_end == "sherpa" or error.name == "kaldi_native_fbank" else "onnx"
        hint = "" if "pip install" in str(error) else f" (pip install 'transdec[{extra}]')"
        raise ValueError(f"{args.model}: {error}{hint}") from error
    if isinstance(model, TransducerModel):  # the only kind whose encoder has a length policy to choose
        model.length_policy = args.length_policy
    if args.local_attention is not None:
        if not hasattr(model, "use_local_attention"):
            raise ValueError(f"--local-attention is for NeMo models; {args.model} is not one")
        model.use_local_attention(*args.local_attention)
    return model


def encoder_compute_dtype(args: argparse.Namespace) -> torch.dtype | None:
    """The encoder's dtype the flags ask for: ``--compute-dtype bfloat16`` (a decoding option: the predictor and
    joint's dtype) runs a PyTorch model's encoder in bfloat16 too (with ``--quantize int8``: its attention, beside
    the int8 products); any other value leaves the encoder as loaded."""
    dtype = vars(args).get("decoding_option.compute_dtype", vars(args).get("compute_dtype"))
    return dtype if dtype == torch.bfloat16 else None


def check_strategies_fit(model, decodings: list) -> None:
    """Refuse a strategy the model cannot run, before any audio is read."""
    if any(d.strategy == "ctc_greedy" for d in decodings) and getattr(model, "ctc", None) is None:
        raise ValueError("--decoding ctc_greedy needs a model with a CTC head (a hybrid RNN-T/CTC model); "
                         "this one has none")


def replica_loader(args: argparse.Namespace, decodings: list):
    """A :data:`~transdec.scale.replica.ReplicaLoader` of the flags: on each Ray replica, the model and the first of
    ``decodings`` with the fusions of the flags (``--lm``, ``--boost-phrases``) on the replica's device. Make the
    paths among the flags absolute first (:func:`transdec.scale.flags.absolute_paths`)."""
    return functools.partial(_load_on_replica, args, decodings)


def _load_on_replica(args: argparse.Namespace, decodings: list, device: str):
    args = argparse.Namespace(**{**vars(args), "device": device})
    model, decodings = load_for_decoding(args, decodings, boost_options(args))
    return model, decodings[0]


def load_for_decoding(args: argparse.Namespace, decodings: list, boost) -> tuple:
    """The model of :func:`load_model_of` and ``decodings`` with the fusions of the flags, boosting with ``boost``
    (:func:`~transdec.cli.fusions.boost_options`), each checked to fit the model."""
    model = load_model_of(args)
    decodings = with_fusions(args, model, decodings, boost)
    check_strategies_fit(model, decodings)
    return model, decodings
