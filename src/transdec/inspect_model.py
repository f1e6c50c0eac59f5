"""``transdec inspect MODEL``: what a model file is and whether transdec loads it, without decoding anything.

For every kind transdec reads (its own model files and bundled names, NeMo ``.nemo`` checkpoints, ONNX export
directories, and any of them by Hugging Face Hub name, with what was fetched: repository, revision, commit, files,
size): the model class, head (TDT durations, multi-blank big blanks), tokenizer and vocabulary, parameter
count, front end, encoder (layers, width, attention and its context, subsampling, receptive field) and whether
transdec can stream it. A NeMo checkpoint transdec cannot load is still described from its config, with every
setting that stops it (:func:`transdec.adapters.nemo.config_problems`), not only the first.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

STREAMING = "no: transdec decodes whole recordings (long ones in windows); streaming is not built yet"


def inspect_model(name_or_path: str, onnx_variant: str = "fp32") -> dict[str, Any]:
    """A plain-data description of the model (see the module docstring); ``supported`` says whether it loads and
    ``problems`` lists why not. Missing files raise ``FileNotFoundError``; a Hub name that cannot be fetched, a
    :class:`~transdec.adapters.hub.HubError`. ``onnx_variant`` picks the graphs of an ONNX export that has both."""
    from transdec.adapters.hub import fetch_model, is_hub_name
    from transdec.model.checkpoint import BUNDLED_MODELS

    source = fetch_model(name_or_path, onnx_variant) if is_hub_name(name_or_path) else None
    path = source.path if source else Path(name_or_path)
    if name_or_path not in BUNDLED_MODELS and not path.exists():
        raise FileNotFoundError(f"{name_or_path}: no such file or directory, and not a bundled model name "
                                f"({', '.join(BUNDLED_MODELS)}) or a Hugging Face Hub name (org/name[@revision])")
    if path.name.endswith(".nemo"):
        report = _inspect_nemo(path)
    else:
        from transdec.loading import load_model

        model = load_model(path if source else name_or_path, onnx_variant=onnx_variant)
        report = _inspect_onnx(model, path) if path.is_dir() else _inspect_transdec(model, name_or_path)
    if source is None:
        return report
    return {"source": report.pop("source"), "hub": source.as_dict(), **report}


def _head(head) -> dict[str, Any]:
    return {"kind": head.kind, "tokens": head.num_tokens, "durations": list(head.durations),
            "big_blank_durations": list(head.big_blank_durations)}


def _inspect_transdec(model, source: str) -> dict[str, Any]:
    config = model.config
    encoder = config.encoder
    return {
        "source": source, "format": "transdec model file", "model_class": "TransducerModel", "supported": True,
        "problems": [], "head": _head(model.head),
        "tokenizer": {"kind": "sentencepiece", "vocab_size": model.tokenizer.vocab_size},
        "parameters": model.num_parameters(),
        "front_end": {"kind": "fbank (Kaldi)", **dataclasses.asdict(config.features)},
        "encoder": {"kind": "Conformer", "layers": encoder.num_layers, "d_model": encoder.model_dim,
                    "heads": encoder.num_heads, "subsampling": encoder.subsampling,
                    "subsampling_factor": encoder.subsampling_factor,
                    "attention": "full" if encoder.attention_context is None else "local",
                    "attention_context": encoder.attention_context,
                    "receptive_field_frames": model.receptive_field,
                    "frame_seconds": model.frame_shift_seconds},
        "predictor": {"kind": config.predictor.kind, "hidden": config.predictor.hidden_size,
                      "layers": config.predictor.num_layers},
        "ctc_head": config.ctc_head, "streaming": STREAMING,
    }


def _inspect_onnx(model, path: Path) -> dict[str, Any]:
    info = model.config
    return {
        "source": str(path), "format": f"ONNX export ({info.layout} layout)", "model_class": "OnnxTransducer",
        "supported": True, "problems": [], "head": _head(model.head),
        "tokenizer": {"kind": type(model.tokenizer).__name__, "vocab_size": model.head.num_tokens},
        "parameters": None, "front_end": info.front_end,
        "encoder": {"kind": "ONNX", "subsampling_factor": info.subsampling_factor,
                    "receptive_field_frames": model.receptive_field, "frame_seconds": model.frame_shift_seconds,
                    "files": {k: str(v) for k, v in info.files.items()}},
        "streaming": STREAMING,
    }


def _inspect_nemo(path: Path) -> dict[str, Any]:
    from transdec.adapters.nemo import config_problems, load_tokenizer
    from transdec.adapters.nemo_archive import read_nemo_archive

    archive = read_nemo_archive(path)
    config = archive.config
    problems = config_problems(archive)
    encoder = config.get("encoder") or {}
    decoder = config.get("decoder") or {}
    loss = config.get("loss") or {}
    try:
        tokenizer = load_tokenizer(archive)
        vocab = {"kind": "sentencepiece", "vocab_size": tokenizer.vocab_size}
    except ValueError:
        vocab = {"kind": (config.get("tokenizer") or {}).get("type"), "vocab_size": None}
    head = None
    if vocab["vocab_size"]:
        from transdec.adapters.nemo import head_spec

        try:
            head = _head(head_spec(config, vocab["vocab_size"]))
        except ValueError:
            head = None
    context = encoder.get("att_context_size")
    cache_aware = bool(encoder.get("causal_downsampling")) or encoder.get("att_context_style") == "chunked_limited"
    preprocessor = config.get("preprocessor") or {}
    return {
        "source": str(path), "format": "NeMo checkpoint (.nemo)",
        "model_class": str(config.get("target") or "").rsplit(".", 1)[-1] or None,
        "nemo_version": config.get("nemo_version"), "supported": not problems, "problems": problems,
        "head": head or {"kind": None, "loss": loss.get("loss_name")}, "tokenizer": vocab,
        "parameters": sum(t.numel() for t in archive.state_dict.values()),
        "front_end": {"kind": str(preprocessor.get("_target_", "")).rsplit(".", 1)[-1],
                      **{k: preprocessor.get(k) for k in ("sample_rate", "features", "window_size", "window_stride",
                                                          "n_fft", "normalize", "window")}},
        "encoder": {"kind": str(encoder.get("_target_", "")).rsplit(".", 1)[-1],
                    **{k: encoder.get(k) for k in ("n_layers", "d_model", "n_heads", "subsampling",
                                                   "subsampling_factor", "self_attention_model",
                                                   "att_context_style", "conv_kernel_size")},
                    "att_context_size": context},
        "predictor": {"kind": str(decoder.get("_target_", "")).rsplit(".", 1)[-1],
                      **{k: (decoder.get("prednet") or {}).get(k) for k in ("pred_hidden", "pred_rnn_layers")}},
        "ctc_head": "aux_ctc" in config,
        "streaming": (f"the config is cache-aware streaming ({'causal downsampling, ' if encoder.get('causal_downsampling') else ''}"
                      f"attention {encoder.get('att_context_style')}, context {context}); the loaded model's "
                      "streaming_encoder() encodes it chunk by chunk with NeMo's caches" if cache_aware else STREAMING),
    }


def format_report(report: dict[str, Any], output_format: str = "text") -> str:
    """The report as JSON, or as aligned ``key: value`` lines, nested sections indented."""
    if output_format == "json":
        return json.dumps(report, indent=2, default=str)
    lines = []

    def add(key: str, value: Any, indent: int) -> None:
        if isinstance(value, dict):
            lines.append(f"{' ' * indent}{key}:")
            for inner, inner_value in value.items():
                if inner_value not in (None, [], {}):
                    add(inner, inner_value, indent + 2)
        elif isinstance(value, list) and value and key in ("problems", "files"):
            lines.append(f"{' ' * indent}{key}:")
            lines.extend(f"{' ' * (indent + 2)}- {item}" for item in value)
        else:
            shown = f"{value:,}" if key in ("parameters", "size") and isinstance(value, int) else value
            lines.append(f"{' ' * indent}{key}: {shown}")

    for key, value in report.items():
        if value not in (None, [], {}):
            add(key, value, 0)
    return "\n".join(lines)
