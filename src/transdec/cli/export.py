"""Write encoder.onnx, decoder.onnx, joiner.onnx (self-contained, dynamic batch and time axes; a parakeet-sized
encoder's weights in encoder.weights), tokens.txt and tokenizer.model to OUT_DIR, with --quantize int8 their int8
variants too (encoder.int8.onnx, ...): NeMo-transducer layout for LSTM predictors (sherpa-onnx model_type nemo_transducer),
icefall layout for stateless ones (model_type transducer). transdec.load_model(OUT_DIR) decodes the export with every
transdec decoder.
"""

from __future__ import annotations

import argparse

from transdec.cli.common import add_group_parser, fail


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    onnx = add_group_parser(
        subparsers, ("export", "export a model to another runtime (ONNX)",
                               "Export a model for deployment (docs/deploy.md)."),
        ("onnx", "encoder, decoder and joiner as ONNX files that sherpa-onnx and transdec load", __doc__))
    onnx.add_argument("model", help="bundled model name, model file, .nemo checkpoint, or a Hugging Face Hub "
                                    "repository as org/name[@revision] holding one")
    onnx.add_argument("out_dir", help="directory to write the files to (created if missing)")
    onnx.add_argument("--max-frames", type=int, default=None,
                      help="encoder frames the rotary position tables cover (default 20000: 26 min at 8x)")
    onnx.add_argument("--quantize", choices=["int8"], default=None,
                      help="also write encoder.int8.onnx, decoder.int8.onnx and joiner.int8.onnx: ONNX Runtime's "
                           "dynamic quantization, as sherpa-onnx makes its int8 models (load them with "
                           "--onnx-variant int8, or pass them to sherpa-onnx)")


def run(args: argparse.Namespace) -> int:
    from transdec.export.onnx import DEFAULT_MAX_FRAMES, export_onnx
    from transdec.loading import load_model

    try:
        result = export_onnx(load_model(args.model), args.out_dir, max_frames=args.max_frames or DEFAULT_MAX_FRAMES,
                             quantize=args.quantize)
    except ImportError as error:
        return fail("transdec export onnx", f"{error} (pip install 'transdec[onnx]')")
    except (OSError, ValueError) as error:
        return fail("transdec export onnx", error)
    written = [p.name for p in (result.encoder, result.decoder, result.joiner, result.tokens)]
    written += [name for name in ("encoder.weights", "tokenizer.model", "encoder.int8.onnx", "decoder.int8.onnx",
                                  "joiner.int8.onnx") if (result.directory / name).is_file()]
    print(f"wrote {result.layout}-layout ONNX model to {result.directory}: {', '.join(written)}")
    return 0
