"""ONNX export (transdec.export.onnx): the parts match PyTorch, the files are what sherpa-onnx reads, and
sherpa-onnx's greedy transcripts equal transdec's on the same features."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import transdec  # noqa: E402
from float32 import assert_float32_close  # noqa: E402
from onnx_helpers import (  # noqa: E402
    MODELS, example_audio, exported, model, sherpa_icefall_features, sherpa_nemo_features,
)

LSTM_MODELS = ["tiny-en-rnnt", "tiny-en-tdt", "nemo-fc-rnnt"]
ALL_MODELS = LSTM_MODELS + ["tiny-en-multiblank", "nemo-fc-stateless"]


@pytest.fixture(scope="session")
def export_root(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx")


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _features(name: str, batch: int = 3, frames: int = 203) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    m = model(name)
    dim = m.config.features.num_mel_bins if hasattr(m.config, "features") and hasattr(
        m.config.features, "num_mel_bins") else m.preprocessor.config.num_mel_bins
    return torch.randn(batch, frames, dim), torch.tensor([frames, frames - 60, 41])[:batch]


@pytest.mark.parametrize("name", ALL_MODELS)
def test_files_are_self_contained_with_dynamic_axes(name, export_root):
    import onnx

    directory = exported(name, export_root)
    assert sorted(p.name for p in directory.iterdir()) == [
        "decoder.onnx", "encoder.onnx", "joiner.onnx", "tokenizer.model", "tokens.txt"]
    for part in ("encoder", "decoder", "joiner"):
        proto = onnx.load(str(directory / f"{part}.onnx"))
        onnx.checker.check_model(proto)
        assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)
        first = proto.graph.input[0].type.tensor_type.shape.dim
        assert first[0].dim_param, f"{part}: batch axis is not dynamic"
    meta = _session(directory / "encoder.onnx").get_modelmeta().custom_metadata_map
    head = model(name).head
    assert json.loads(meta["transdec_head"])["kind"] == head.kind
    tokens = (directory / "tokens.txt").read_text().splitlines()
    assert len(tokens) == head.num_tokens + 1
    if meta["transdec_layout"] == "nemo":
        assert meta["vocab_size"] == str(head.num_tokens) and tokens[-1] == f"<blk> {head.num_tokens}"
        assert ("tdt" in meta["url"]) == (head.kind == "tdt")
        for key in ("subsampling_factor", "normalize_type", "pred_rnn_layers", "pred_hidden", "feat_dim"):
            assert key in meta
    else:
        decoder_meta = _session(directory / "decoder.onnx").get_modelmeta().custom_metadata_map
        assert decoder_meta["vocab_size"] == str(head.num_tokens + 1) and "context_size" in decoder_meta
        assert tokens[0] == "<blk> 0"


@pytest.mark.parametrize("name", ALL_MODELS)
def test_parts_match_pytorch(name, export_root):
    directory = exported(name, export_root)
    m = model(name)
    layout = _session(directory / "encoder.onnx").get_modelmeta().custom_metadata_map["transdec_layout"]
    features, lengths = _features(name)
    encoder, decoder, joiner = (_session(directory / f"{p}.onnx") for p in ("encoder", "decoder", "joiner"))
    with torch.no_grad():
        ref, ref_lengths = m.encoder(features, lengths)
        if layout == "icefall":
            ref = m.joint.project_encoder(ref)
        if layout == "nemo":
            out, out_lengths = encoder.run(None, {"audio_signal": features.transpose(1, 2).numpy(),
                                                  "length": lengths.numpy()})
            out = torch.from_numpy(out).transpose(1, 2)
        else:
            out, out_lengths = encoder.run(None, {"x": features.numpy(), "x_lens": lengths.numpy()})
            out = torch.from_numpy(out)
        assert out_lengths.tolist() == ref_lengths.tolist()
        valid = (torch.arange(ref.shape[1])[None, :] < ref_lengths[:, None])[..., None]
        assert_float32_close(out.mul(valid), ref.mul(valid))

        labels = torch.tensor([5, m.head.num_tokens, 0, 17])
        state = m.predictor.initial_state(4)
        state = m.predictor.step(torch.tensor([1, 2, 3, 4]), state)[1]
        ref_out, ref_state = m.predictor.step(labels, state)
        if layout == "nemo":
            out, lengths_out, h, c = decoder.run(None, {
                "targets": labels.view(4, 1).int().numpy(), "target_length": np.ones(4, np.int32),
                "states.1": state[0].numpy(), "states.2": state[1].numpy()})
            assert lengths_out.tolist() == [1, 1, 1, 1]
            assert_float32_close(out[:, :, 0], ref_out.numpy())
            assert_float32_close(h, ref_state[0].numpy())
            assert_float32_close(c, ref_state[1].numpy())
            enc, dec = torch.randn(4, m.joint.encoder_dim, 3), ref_out.unsqueeze(-1)
            (logits,) = joiner.run(None, {"encoder_outputs": enc.numpy(), "decoder_outputs": dec.numpy()})
            ref_logits = m.joint(enc.transpose(1, 2), dec.transpose(1, 2))
        else:
            # icefall ids: blank 0, token t -> t + 1
            context = torch.where(ref_state >= m.head.num_tokens, torch.zeros_like(ref_state), ref_state + 1)
            (out,) = decoder.run(None, {"y": context.numpy()})
            assert_float32_close(out, m.joint.project_predictor(ref_out).numpy())
            enc, dec = torch.randn(4, out.shape[1]), torch.from_numpy(out)
            (logits,) = joiner.run(None, {"encoder_out": enc.numpy(), "decoder_out": dec.numpy()})
            blank = m.head.blank_id
            ref_logits = m.joint.combine(enc, dec)
            ref_logits = torch.cat([ref_logits[:, blank:blank + 1], ref_logits[:, :blank], ref_logits[:, blank + 1:]], 1)
        assert_float32_close(logits, ref_logits.numpy())


def _sherpa(directory, model_type: str, method: str = "greedy_search"):
    sherpa_onnx = pytest.importorskip("sherpa_onnx")
    return sherpa_onnx.OfflineRecognizer.from_transducer(
        str(directory / "encoder.onnx"), str(directory / "decoder.onnx"), str(directory / "joiner.onnx"),
        str(directory / "tokens.txt"), num_threads=1, decoding_method=method, model_type=model_type)


@pytest.mark.parametrize("name,max_symbols", [("tiny-en-rnnt", 10), ("tiny-en-tdt", 5), ("nemo-fc-rnnt", 10)])
def test_sherpa_onnx_greedy_equals_transdec_on_the_same_features(name, max_symbols, export_root):
    """sherpa-onnx computes its own features; transdec decodes those same features (recomputed with the same
    library) and must give the same tokens, with sherpa-onnx's symbols-per-frame limit."""
    pytest.importorskip("kaldi_native_fbank")
    recognizer = _sherpa(exported(name, export_root), "nemo_transducer")
    m = model(name)
    for samples in example_audio():
        stream = recognizer.create_stream()
        stream.accept_waveform(16000, samples)
        recognizer.decode_stream(stream)
        features = sherpa_nemo_features(samples).unsqueeze(0)
        with torch.no_grad():
            encoded, lengths = m.encode_features(features, torch.tensor([features.shape[1]]))
        result = transdec.decode(m, encoded, lengths, transdec.DecodingConfig(max_symbols_per_frame=max_symbols))
        tokens = result.hypotheses()[0].tokens
        pieces = [m.tokenizer.id_to_piece(t) for t in tokens]
        assert [p.replace("▁", " ") for p in pieces] == list(stream.result.tokens)


def test_sherpa_onnx_icefall_layout_greedy_equals_transdec(export_root):
    """A stateless export runs in sherpa-onnx as an icefall transducer; its greedy search emits at most one
    symbol per frame, so transdec decodes with max_symbols_per_frame=1."""
    pytest.importorskip("kaldi_native_fbank")
    name = "nemo-fc-stateless"
    recognizer = _sherpa(exported(name, export_root), "transducer")
    m = model(name)
    for samples in example_audio():
        stream = recognizer.create_stream()
        stream.accept_waveform(16000, samples)
        recognizer.decode_stream(stream)
        features = sherpa_icefall_features(samples).unsqueeze(0)
        with torch.no_grad():
            encoded, lengths = m.encode_features(features, torch.tensor([features.shape[1]]))
        result = transdec.decode(m, encoded, lengths, transdec.DecodingConfig(max_symbols_per_frame=1))
        pieces = [m.tokenizer.id_to_piece(t).replace("▁", " ") for t in result.hypotheses()[0].tokens]
        assert pieces == list(stream.result.tokens)
        assert len(pieces) > 0


def test_cli_export(tmp_path):
    from transdec.cli import main

    assert main(["export", "onnx", "tiny-en-rnnt", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "encoder.onnx").is_file()
    assert main(["export", "onnx", str(tmp_path / "missing.pt"), str(tmp_path / "x")]) == 2


@pytest.mark.parametrize("name,model_type", [("tiny-en-rnnt", "nemo_transducer"), ("nemo-fc-rnnt", "nemo_transducer"),
                                             ("nemo-fc-stateless", "transducer")])
@pytest.mark.parametrize("runtime", ["onnx", "pytorch"])
def test_transdec_with_sherpa_front_end_equals_sherpa_onnx(name, model_type, runtime, export_root):
    """load_model(..., front_end="sherpa"): transdec over ONNX Runtime or PyTorch (the model that was exported),
    whole pipeline from audio, batched, gives sherpa-onnx's greedy transcripts."""
    pytest.importorskip("kaldi_native_fbank")
    directory = exported(name, export_root)
    recognizer = _sherpa(directory, model_type)
    loaded = transdec.load_model(directory if runtime == "onnx" else MODELS[name], front_end="sherpa")
    audio = example_audio()
    expected = []
    for samples in audio:
        stream = recognizer.create_stream()
        stream.accept_waveform(16000, samples)
        recognizer.decode_stream(stream)
        expected.append(list(stream.result.tokens))
    max_symbols = 10 if model_type == "nemo_transducer" else 1
    config = transdec.DecodingConfig("greedy_label", max_symbols_per_frame=max_symbols)
    got = [[loaded.tokenizer.id_to_piece(t).replace("▁", " ") for t in result.tokens]
           for result in loaded.transcribe(audio, config, batch_size=3)]
    assert got == expected


@pytest.mark.slow
def test_side_by_side_bench_runs():
    """bench/onnx.py end to end on the bundled examples (no manifest), reporting identical transcripts."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("sherpa_onnx")
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run([sys.executable, str(root / "bench/onnx.py"), "--manifest", "/nonexistent",
                             "--repeats", "1", "--batch-size", "2"], capture_output=True, text=True, check=True)
    assert "3/3 transcripts identical between sherpa-onnx and transdec" in result.stdout
    assert "front_end='sherpa' vs sherpa-onnx greedy: 3/3 identical" in result.stdout
