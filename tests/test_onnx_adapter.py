"""ONNX Transducers decoded by transdec (transdec.adapters.onnx): every strategy gives PyTorch's tokens on
transdec's own exports, batched decoding equals the per-utterance reference on an icefall-layout export, and
bad directories give clear errors."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import transdec  # noqa: E402
from onnx_helpers import example_audio, exported, model  # noqa: E402
from transdec.adapters.onnx import OnnxTransducer  # noqa: E402

STRATEGIES = [
    transdec.DecodingConfig("greedy_label"),
    transdec.DecodingConfig("greedy_label", window_size=4),
    transdec.DecodingConfig("greedy_wind", window_size=3),
    transdec.DecodingConfig("greedy_reference"),
    transdec.DecodingConfig("beam_alsd_pp", beam_size=3),
    transdec.DecodingConfig("beam_aes_pp", beam_size=3),
]


@pytest.fixture(scope="session")
def export_root(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx")


def _tokens(result):
    return [h.tokens for h in result.hypotheses()]


@pytest.mark.parametrize("name", ["tiny-en-rnnt", "tiny-en-tdt", "tiny-en-multiblank", "nemo-fc-rnnt",
                                  "nemo-fc-stateless"])
def test_onnx_decoding_equals_pytorch(name, export_root):
    """Audio -> features -> ONNX encoder -> every strategy over ONNX sessions: the same tokens as PyTorch."""
    onnx_model = transdec.load_model(exported(name, export_root))
    assert isinstance(onnx_model, OnnxTransducer)
    torch_model = model(name)
    assert onnx_model.head == torch_model.head
    audio = example_audio()
    texts_torch = [t.tokens for t in torch_model.transcribe(audio, batch_size=3)]
    texts_onnx = [t.tokens for t in onnx_model.transcribe(audio, batch_size=3)]
    assert texts_onnx == texts_torch
    waves = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(a) for a in audio], batch_first=True)
    lengths = torch.tensor([len(a) for a in audio])
    with torch.no_grad():
        encoded, frames = torch_model.encode(waves, lengths)
    onnx_encoded, onnx_frames = onnx_model.encode(waves, lengths)
    assert onnx_frames.tolist() == frames.tolist()
    for config in STRATEGIES:
        expected = _tokens(transdec.decode(torch_model, encoded, frames, config))
        assert _tokens(transdec.decode(onnx_model, onnx_encoded, onnx_frames, config)) == expected, config.strategy


def test_icefall_layout_batched_equals_reference(export_root):
    onnx_model = transdec.load_model(exported("nemo-fc-stateless", export_root))
    assert onnx_model.config.layout == "icefall"
    torch.manual_seed(1)
    features = torch.randn(5, 160, 80)
    lengths = torch.tensor([160, 100, 7, 64, 131])
    encoded, frames = onnx_model.encode_features(features, lengths)
    reference = _tokens(transdec.decode(onnx_model, encoded, frames, transdec.DecodingConfig("greedy_reference")))
    assert any(reference)
    for config in (transdec.DecodingConfig("greedy_label"), transdec.DecodingConfig("greedy_frame"),
                   transdec.DecodingConfig("greedy_label", window_size=5)):
        assert _tokens(transdec.decode(onnx_model, encoded, frames, config)) == reference
    single = [_tokens(transdec.decode(onnx_model, encoded[i:i + 1, :n], frames[i:i + 1]))[0]
              for i, n in enumerate(frames.tolist())]
    assert single == reference


def _copy(name, export_root, tmp_path):
    target = tmp_path / name
    shutil.copytree(exported(name, export_root), target)
    return target


def test_missing_part_is_named(export_root, tmp_path):
    directory = _copy("tiny-en-rnnt", export_root, tmp_path)
    (directory / "joiner.onnx").unlink()
    with pytest.raises(FileNotFoundError, match=r"missing joiner\*\.onnx"):
        transdec.load_model(directory)


def test_tokens_that_do_not_fit_the_model(export_root, tmp_path):
    directory = _copy("tiny-en-rnnt", export_root, tmp_path)
    lines = (directory / "tokens.txt").read_text().splitlines()
    (directory / "tokens.txt").write_text("\n".join(lines[:-2] + [lines[-1].replace(str(len(lines) - 1),
                                                                                    str(len(lines) - 2))]) + "\n")
    with pytest.raises(ValueError, match="tokens.txt has 256 entries but the model has 256 tokens"):
        transdec.load_model(directory)


def test_parts_from_different_exports(export_root, tmp_path):
    directory = _copy("tiny-en-rnnt", export_root, tmp_path)
    shutil.copy(exported("tiny-en-tdt", export_root) / "joiner.onnx", directory / "joiner.onnx")
    with pytest.raises(ValueError, match="different exports"):
        transdec.load_model(directory)


@pytest.mark.parametrize("name", ["tiny-en-tdt", "nemo-fc-stateless"])
def test_foreign_layouts_without_transdec_metadata(name, export_root, tmp_path):
    """An export that carries only sherpa-onnx's metadata (as NeMo's and icefall's own exports do) loads by that
    metadata: NeMo layout (TDT from the url) and icefall layout."""
    import onnx

    directory = _copy(name, export_root, tmp_path)
    for part in ("encoder", "decoder", "joiner"):
        proto = onnx.load(str(directory / f"{part}.onnx"))
        keep = [(p.key, p.value) for p in proto.metadata_props if not p.key.startswith("transdec_")]
        del proto.metadata_props[:]
        for key, value in keep:
            entry = proto.metadata_props.add()
            entry.key, entry.value = key, value
        onnx.save(proto, str(directory / f"{part}.onnx"))
    (directory / "tokenizer.model").unlink()
    loaded = transdec.load_model(directory)
    assert loaded.head == model(name).head
    encoded, frames = loaded.encode_features(torch.randn(1, 120, 80), torch.tensor([120]))
    result = transdec.decode(loaded, encoded, frames)
    assert isinstance(loaded.tokenizer.decode(result.hypotheses()[0].tokens), str)


def test_tokenizer_with_another_vocabulary(export_root, tmp_path):
    directory = _copy("tiny-en-rnnt", export_root, tmp_path)
    shutil.copy(exported("nemo-fc-rnnt", export_root) / "tokenizer.model", directory / "tokenizer.model")
    with pytest.raises(ValueError, match="tokenizer.model has 64 tokens but the model has 256"):
        transdec.load_model(directory)


def test_a_directory_without_onnx_files(tmp_path):
    with pytest.raises(ValueError, match="a directory without .onnx files"):
        transdec.load_model(tmp_path)


def test_import_transdec_stays_light():
    code = "import sys, transdec; print('onnxruntime' in sys.modules or 'onnx' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_two_layer_lstm_predictor(tmp_path):
    """A model with a 2-layer LSTM, a 4x Conformer and TDT durations (0, 2, 4): state [2, N, H] through the decoder
    graph, durations from the transdec metadata."""
    from transdec.export.onnx import export_onnx
    from transdec.model.conformer import ConformerConfig
    from transdec.model.transducer_model import ModelConfig, PredictorConfig, TransducerModel
    from transdec.protocol import HeadSpec

    torch.manual_seed(3)
    tokenizer = model("tiny-en-rnnt").tokenizer
    config = ModelConfig(HeadSpec("tdt", tokenizer.vocab_size, durations=(0, 2, 4)),
                         encoder=ConformerConfig(model_dim=32, num_layers=2, subsampling_factor=4),
                         predictor=PredictorConfig("lstm", hidden_size=24, num_layers=2), joint_dim=40)
    torch_model = TransducerModel(config, tokenizer).eval()
    with pytest.warns(UserWarning, match="sherpa-onnx reads the duration index"):
        export_onnx(torch_model, tmp_path)  # durations other than 0..K-1: transdec reads them, sherpa-onnx cannot
    onnx_model = transdec.load_model(tmp_path)
    features, lengths = torch.randn(3, 90, 80), torch.tensor([90, 33, 61])
    with torch.no_grad():
        encoded, frames = torch_model.encode_features(features, lengths)
    onnx_encoded, onnx_frames = onnx_model.encode_features(features, lengths)
    for config in STRATEGIES[:4]:
        expected = _tokens(transdec.decode(torch_model, encoded, frames, config))
        assert _tokens(transdec.decode(onnx_model, onnx_encoded, onnx_frames, config)) == expected


def test_ngram_fusion_over_onnx(export_root, tmp_path):
    """Shallow fusion of an n-gram LM runs on the ONNX model and gives PyTorch's tokens."""
    from arpa_fixtures import random_arpa
    from transdec.decoding.scoring import Fusion
    from transdec.lm import NGramLM

    torch_model = model("tiny-en-rnnt")
    onnx_model = transdec.load_model(exported("tiny-en-rnnt", export_root))
    (tmp_path / "lm.arpa").write_text(random_arpa(torch_model.head.num_tokens, order=3, seed=5))
    lm = NGramLM.load(tmp_path / "lm.arpa", torch_model.head.num_tokens)
    audio = example_audio()[:2]
    for strategy, options in (("greedy_label", {}), ("beam_alsd_pp", {"beam_size": 3})):
        config = transdec.DecodingConfig(strategy, fusions=[Fusion(lm, 0.3)], **options)
        expected = [t.tokens for t in torch_model.transcribe(audio, config, batch_size=2)]
        assert [t.tokens for t in onnx_model.transcribe(audio, config, batch_size=2)] == expected


def test_long_recordings_through_an_export_are_windowed_as_pytorch_encodes_them(export_root):
    # transdec's exports record the encoder's receptive field, so the ONNX model's windows get exactly the
    # context the PyTorch model's get, and the transcripts agree.
    import numpy as np

    onnx_model = transdec.load_model(exported("tiny-en-rnnt", export_root))
    torch_model = model("tiny-en-rnnt")
    assert onnx_model.encoder.receptive_field == torch_model.encoder.receptive_field is not None
    recording = np.concatenate(example_audio() * 6)  # about 63 s: windows of 30 s
    assert onnx_model.transcribe([recording])[0].text == torch_model.transcribe([recording])[0].text
