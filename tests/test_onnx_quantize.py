"""``transdec export onnx --quantize int8``: int8 graphs beside the float32 ones, made as sherpa-onnx makes its
int8 models, which sherpa-onnx and transdec's loader pick up; and exports whose encoder is too large for one file."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import transdec  # noqa: E402
from onnx_helpers import MODELS, example_audio, model  # noqa: E402
from transdec.export import onnx as onnx_export  # noqa: E402
from transdec.export.onnx import export_onnx  # noqa: E402
from transdec.metrics import sequence_edits  # noqa: E402

LOGIC_TEXT = "logic is a systematic method of coming to the wrong conclusion with confidence"
INT8_FILES = ["decoder.int8.onnx", "encoder.int8.onnx", "joiner.int8.onnx"]


@pytest.fixture(scope="module")
def int8_exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("onnx-int8")
    return {name: export_onnx(model(name), root / name, quantize="int8").directory
            for name in ("tiny-en-rnnt", "nemo-fc-stateless")}


@pytest.mark.parametrize("name", ["tiny-en-rnnt", "nemo-fc-stateless"])
def test_int8_graphs_carry_the_metadata_and_integer_weights(name, int8_exports):
    import onnx

    directory = int8_exports[name]
    names = sorted(p.name for p in directory.iterdir())
    assert [n for n in names if n.endswith(".int8.onnx")] == INT8_FILES
    assert not [n for n in names if n.startswith(".")]  # no staging folders left behind
    for part, weight_type in (("encoder", onnx.TensorProto.UINT8), ("decoder", onnx.TensorProto.INT8),
                              ("joiner", onnx.TensorProto.INT8)):
        float32 = ort.InferenceSession(str(directory / f"{part}.onnx"), providers=["CPUExecutionProvider"])
        int8 = ort.InferenceSession(str(directory / f"{part}.int8.onnx"), providers=["CPUExecutionProvider"])
        metadata = int8.get_modelmeta().custom_metadata_map  # the quantizer adds a key of its own
        assert float32.get_modelmeta().custom_metadata_map.items() <= metadata.items()
        proto = onnx.load(str(directory / f"{part}.int8.onnx"))
        assert any(t.data_type == weight_type for t in proto.graph.initializer), part
        assert {n.op_type for n in proto.graph.node} & {"MatMulInteger", "DynamicQuantizeLinear"}


def test_int8_variant_loads_and_reads_the_example(int8_exports):
    directory = int8_exports["tiny-en-rnnt"]
    int8 = transdec.load_model(directory, onnx_variant="int8")
    assert int8.transcribe([example_audio()[0]])[0].text == LOGIC_TEXT
    float32 = transdec.load_model(directory)
    audio = torch.from_numpy(example_audio()[0])[None]
    a, _ = int8.encode(audio, torch.tensor([audio.shape[1]]))
    b, _ = float32.encode(audio, torch.tensor([audio.shape[1]]))
    assert float((a - b).norm() / b.norm()) < 0.1  # one scale per weight tensor: coarser than PyTorch's int8


def test_an_int8_joiner_scores_each_row_as_alone_and_batches_decode(int8_exports):
    """An int8 joiner quantizes a call's input with one scale, so it is run a row at a time: a row's scores are
    those it gets alone, which batched label-looping needs (it scores the rows that found a token again, and read
    the blank as their label when the other rows changed the scale)."""
    directory = int8_exports["tiny-en-rnnt"]
    int8 = transdec.load_model(directory, onnx_variant="int8")
    assert int8.joint.one_row_per_call and not transdec.load_model(directory).joint.one_row_per_call
    generator = torch.Generator().manual_seed(0)
    # One row far larger than the others: with one scale for the call it would coarsen theirs.
    enc = torch.randn(5, _input_width(int8.joint, 0), generator=generator) * torch.tensor([1, 1, 50, 1, 1.0])[:, None]
    pred = torch.randn(5, _input_width(int8.joint, 1), generator=generator)
    together = int8.joint.combine(enc, pred)
    alone = torch.cat([int8.joint.combine(enc[i: i + 1], pred[i: i + 1]) for i in range(5)])
    assert torch.equal(together, alone)
    audio = example_audio()
    texts = [t.text for t in int8.transcribe(audio * 4, batch_size=len(audio) * 4)]
    assert texts[0] == LOGIC_TEXT and len(texts) == len(audio) * 4


def _input_width(joint, index: int) -> int:
    shape = joint.session.get_inputs()[index].shape
    return next(d for d in shape[1:] if isinstance(d, int))


def test_sherpa_onnx_runs_the_int8_files_as_transdec_does(int8_exports):
    """One recording at a time (int8 activations are quantized per call, so a batch changes them), sherpa-onnx's
    greedy tokens from the int8 files are transdec's over ONNX Runtime with sherpa-onnx's features, but for the
    rounding of ONNX Runtime's int8 kernels, which differs between the version inside sherpa-onnx's wheel and the
    one transdec runs on: all but a few tokens agree."""
    sherpa_onnx = pytest.importorskip("sherpa_onnx")
    pytest.importorskip("kaldi_native_fbank")
    directory = int8_exports["tiny-en-rnnt"]
    recognizer = sherpa_onnx.OfflineRecognizer.from_transducer(
        *(str(directory / name) for name in ("encoder.int8.onnx", "decoder.int8.onnx", "joiner.int8.onnx",
                                            "tokens.txt")), num_threads=1, decoding_method="greedy_search",
        model_type="nemo_transducer")
    loaded = transdec.load_model(directory, onnx_variant="int8", front_end="sherpa")
    config = transdec.DecodingConfig("greedy_label", max_symbols_per_frame=10)
    edits = total = same = 0
    for samples in example_audio():
        stream = recognizer.create_stream()
        stream.accept_waveform(16000, samples)
        recognizer.decode_stream(stream)
        got = loaded.transcribe([samples], config, batch_size=1)[0]
        pieces = [loaded.tokenizer.id_to_piece(t).replace("▁", " ") for t in got.tokens]
        edits += sequence_edits(pieces, list(stream.result.tokens))
        total += len(stream.result.tokens)
        same += pieces == list(stream.result.tokens)
    assert same >= 2 and edits <= 0.1 * total, (same, edits, total)


def test_a_large_encoder_keeps_its_weights_beside_it(tmp_path, monkeypatch):
    """Past protobuf's 2 GiB the encoder's weights go to encoder.weights (as sherpa-onnx's parakeet exports have
    them): shown here with the threshold lowered, on the bundled model."""
    import onnx

    monkeypatch.setattr(onnx_export, "EXTERNAL_DATA_BYTES", 1_000_000)
    directory = export_onnx(model("tiny-en-rnnt"), tmp_path / "big", quantize="int8").directory
    names = sorted(p.name for p in directory.iterdir())
    assert "encoder.weights" in names and "joiner.weights" not in names
    assert not [n for n in names if n.startswith(".")]
    proto = onnx.load(str(directory / "encoder.onnx"), load_external_data=False)
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)
    assert (directory / "encoder.onnx").stat().st_size < (directory / "encoder.weights").stat().st_size / 4
    # ONNX Runtime and transdec's loader find the side file; the int8 encoder fits in one file again.
    assert transdec.load_model(directory).transcribe([example_audio()[0]])[0].text == LOGIC_TEXT
    assert transdec.load_model(directory, onnx_variant="int8").transcribe([example_audio()[0]])[0].text == LOGIC_TEXT
    # A second export into the same folder replaces the side file rather than appending to it.
    size = (directory / "encoder.weights").stat().st_size
    export_onnx(model("tiny-en-rnnt"), directory)
    assert (directory / "encoder.weights").stat().st_size == size


def test_cli_export_quantize(tmp_path):
    from transdec.cli import main

    assert main(["export", "onnx", MODELS["tiny-en-rnnt"], str(tmp_path / "out"), "--quantize", "int8"]) == 0
    assert all((tmp_path / "out" / name).is_file() for name in INT8_FILES)
    assert main(["transcribe", "--model", str(tmp_path / "out"), "--onnx-variant", "int8",
                 str(__import__("onnx_helpers").EXAMPLES[0])]) == 0


def test_a_model_that_has_decoded_exports_its_weights(tmp_path):
    """Decoding caches copies of the predictor's and joint's weights (transposed, and the LSTM's input gates per
    token); an export's trace reads the parameters instead, so the graphs hold them as weights the quantizer finds."""
    import onnx

    fresh = transdec.load_model("tiny-en-rnnt")
    fresh.transcribe([example_audio()[0]])
    directory = export_onnx(fresh, tmp_path / "used", quantize="int8").directory
    for part in ("decoder", "joiner"):
        proto = onnx.load(str(directory / f"{part}.int8.onnx"))
        assert any(t.data_type == onnx.TensorProto.INT8 for t in proto.graph.initializer), part
    decoder = onnx.load(str(directory / "decoder.onnx"))
    gate_table = (fresh.head.num_tokens + 1, 4 * fresh.predictor.hidden_size)
    assert not any(tuple(t.dims) == gate_table for t in decoder.graph.initializer)
