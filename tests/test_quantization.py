"""int8 and bfloat16 encoders chosen at load time (transdec.model.quantization), and int8 ONNX exports.

Neither is exact, so these tests check what each does (which layers change, what stays float32, the dtypes handed
on), that its output stays near float32's, and that the bundled models still read the example recordings; the
accuracy itself is measured, not tested (docs/models.md, "int8 and bfloat16")."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import transdec
from helpers import NEMO_FIXTURES
from onnx_helpers import EXAMPLES
from transdec.cli import main
from transdec.model.quantization import (Int8Linear, Int8PointwiseConv1d, apply_precision, cpu_has_bfloat16,
                                         quantize_int8)

LOGIC = str(EXAMPLES[0])  # espeak_logic.flac, which every bundled model reads right
LOGIC_TEXT = "logic is a systematic method of coming to the wrong conclusion with confidence"


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().float() - b.detach().float()).norm() / b.detach().float().norm())


def test_int8_linear_is_close_to_float32_and_gives_back_its_weight():
    torch.manual_seed(0)
    layer = nn.Linear(64, 48)
    quantized = Int8Linear.from_float(layer.weight, layer.bias)
    x = torch.randn(3, 7, 64)
    assert quantized(x).shape == (3, 7, 48)
    assert _relative_error(quantized(x), layer(x)) < 0.02
    assert _relative_error(quantized.weight, layer.weight) < 0.01
    assert torch.equal(quantized.bias, layer.bias)
    without_bias = Int8Linear.from_float(layer.weight, None)
    assert without_bias.bias is None
    assert _relative_error(without_bias(x), x @ layer.weight.T) < 0.02


def test_int8_pointwise_conv_takes_channels_first():
    torch.manual_seed(0)
    conv = nn.Conv1d(32, 64, 1)
    x = torch.randn(2, 32, 50)
    out = Int8PointwiseConv1d.from_float(conv)(x)
    assert out.shape == (2, 64, 50)
    assert _relative_error(out, conv(x)) < 0.02


def test_making_int8_layers_raises_no_warning():
    layer = nn.Linear(16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Int8Linear.from_float(layer.weight, layer.bias)(torch.randn(2, 16))
        _ = Int8Linear.from_float(layer.weight, layer.bias).weight


def test_int8_bundled_model_quantizes_encoder_and_encoder_projection_only():
    model = transdec.load_model("tiny-en-rnnt", quantize="int8")
    assert not any(isinstance(m, nn.Linear) for m in model.encoder.modules())
    assert any(isinstance(m, Int8Linear) for m in model.encoder.modules())
    assert isinstance(model.joint.encoder_projection, Int8Linear)
    # The joint's per-step products stay float32: int8's per-call scale would make a row's scores depend on the
    # other rows of the call, which the batched searches must not see.
    assert isinstance(model.joint.predictor_projection, nn.Linear) and isinstance(model.joint.output, nn.Linear)
    # The predictor, the norms and the convolutions that are not pointwise stay float32.
    assert all(p.dtype == torch.float32 for p in model.predictor.parameters())
    assert any(isinstance(m, nn.Conv1d) for m in model.encoder.modules())
    assert model.transcribe([LOGIC])[0].text == LOGIC_TEXT


def test_int8_output_stays_near_float32():
    float32 = transdec.load_model("tiny-en-rnnt")
    int8 = transdec.load_model("tiny-en-rnnt", quantize="int8")
    import soundfile as sf

    samples = torch.from_numpy(sf.read(LOGIC, dtype="float32")[0])[None]
    lengths = torch.tensor([samples.shape[1]])
    with torch.inference_mode():
        reference, _ = float32.encode(samples, lengths)
        encoded, counts = int8.encode(samples, lengths)
        assert encoded.dtype == torch.float32
        assert _relative_error(encoded, reference) < 0.05
        f = float32.joint.project_encoder(reference[:, :5])
        g = float32.joint.project_predictor(torch.randn(1, 1, 320))
        assert _relative_error(int8.joint.combine(int8.joint.project_encoder(reference[:, :5]), g),
                               float32.joint.combine(f, g)) < 0.05


def test_int8_batched_greedy_emits_only_tokens():
    """Rows of a batch decoded together never read the blank as a label (with the per-step joint in int8 they did,
    on these Piper-voiced rows of the test set, at batch 16)."""
    model = transdec.load_model("tiny-en-rnnt", quantize="int8")
    for seed in range(10):  # with the per-step products in int8, two of these ten batches had a blank label
        torch.manual_seed(seed)
        frames, lengths = torch.randn(16, 60, 144) * 2, torch.randint(20, 61, (16,))
        for hypothesis in transdec.decode(model, frames, lengths).hypotheses():
            assert all(0 <= t < model.head.num_tokens for t in hypothesis.tokens)


@pytest.mark.parametrize("name", ["tiny-en-tdt", "tiny-en-multiblank"])
def test_int8_every_bundled_head_reads_the_example(name):
    assert transdec.load_model(name, quantize="int8").transcribe([LOGIC])[0].text == LOGIC_TEXT


def test_bfloat16_encoder_hands_float32_frames_to_the_decoder():
    model = transdec.load_model("tiny-en-tdt", compute_dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in model.encoder.parameters())
    assert all(p.dtype == torch.float32 for p in model.joint.parameters())
    encoded, _ = model.encode(torch.zeros(1, 16000), torch.tensor([16000]))
    assert encoded.dtype == torch.float32
    empty, _ = model.encode(torch.zeros(1, 100), torch.tensor([100]))  # shorter than a feature window
    assert empty.dtype == torch.float32 and empty.shape[1] == 0
    assert model.transcribe([LOGIC])[0].text == LOGIC_TEXT


@pytest.mark.parametrize("fixture", ["fc_tdt", "fc_hybrid", "conformer4x", "fc_local_attn"])
def test_nemo_checkpoints_in_int8_and_bfloat16(fixture):
    clips = torch.load(NEMO_FIXTURES / "clips.pt", weights_only=True)["samples"]
    audio = clips[0].float()[None] / 32768.0
    lengths = torch.tensor([audio.shape[1]])
    path = str(NEMO_FIXTURES / f"{fixture}.nemo")
    reference, _ = transdec.load_model(path).encode(audio, lengths)
    int8 = transdec.load_model(path, quantize="int8")
    assert any(isinstance(m, Int8PointwiseConv1d) for m in int8.encoder.modules())
    assert not any(isinstance(m, nn.Linear) for m in int8.encoder.modules())
    # Both: the int8 model with its attention core in bfloat16, everything else as int8 alone has it.
    int8_bf16 = transdec.load_model(path, quantize="int8", compute_dtype=torch.bfloat16)
    attention = [m for m in int8_bf16.encoder.modules() if hasattr(m, "attention_dtype")]
    assert attention and all(m.attention_dtype == torch.bfloat16 for m in attention)
    assert all(p.dtype == torch.float32 for p in int8_bf16.encoder.parameters())
    for model in (int8, transdec.load_model(path, compute_dtype=torch.bfloat16), int8_bf16):
        encoded, counts = model.encode(audio, lengths)
        assert encoded.dtype == torch.float32
        assert _relative_error(encoded, reference) < 0.05
        assert len(model.transcribe([audio[0].numpy()])) == 1


def test_bundled_int8_with_bfloat16_attention_reads_the_example(capsys):
    model = transdec.load_model("tiny-en-rnnt", quantize="int8", compute_dtype=torch.bfloat16)
    assert all(m.attention_dtype == torch.bfloat16 for m in model.encoder.modules() if hasattr(m, "attention_dtype"))
    assert model.transcribe([LOGIC])[0].text == LOGIC_TEXT
    # On the command line the flag runs the decoder in bfloat16 too: it reads the int8 projection's frames.
    assert main(["transcribe", LOGIC, "--model", "tiny-en-rnnt", "--quantize", "int8",
                 "--compute-dtype", "bfloat16"]) == 0
    assert LOGIC_TEXT in capsys.readouterr().out


@pytest.mark.parametrize("options", [{"quantize": "int8"}, {"compute_dtype": torch.bfloat16},
                                     {"quantize": "int8", "compute_dtype": torch.bfloat16}])
def test_cache_aware_streaming_in_int8_and_bfloat16(options):
    """The streaming encoder reads the same modules: its chunks stay near the float32 model's."""
    path = str(NEMO_FIXTURES / "fc_streaming_rnnt.nemo")
    clip = torch.load(NEMO_FIXTURES / "clips.pt", weights_only=True)["samples"][0].float() / 32768.0

    def streamed(model) -> torch.Tensor:
        encoder = model.streaming_encoder()
        stream = encoder.open()
        stream.accept(clip)
        stream.input_finished()
        chunks = []
        while stream.ready:
            chunks.append(encoder.encode([stream])[0])
        return torch.cat(chunks)

    reference = streamed(transdec.load_model(path))
    frames = streamed(transdec.load_model(path, **options))
    assert frames.dtype == torch.float32 and frames.shape == reference.shape
    assert _relative_error(frames, reference) < 0.05


def test_refusals():
    with pytest.raises(ValueError, match="int8"):
        transdec.load_model("tiny-en-rnnt", quantize="int4")
    with pytest.raises(ValueError, match="compute_dtype"):
        transdec.load_model("tiny-en-rnnt", compute_dtype=torch.float16)
    with pytest.raises(ValueError, match="PyTorch models"):
        apply_precision(nn.Linear(2, 2), "int8")
    model = transdec.load_model("tiny-en-rnnt", dtype=torch.float64)
    assert quantize_int8(model) > 0  # float64 layers are made from their float32 values


def test_onnx_directory_refuses_load_time_quantization(tmp_path):
    (tmp_path / "encoder.onnx").write_bytes(b"")
    with pytest.raises(ValueError, match="onnx_variant='int8'"):
        transdec.load_model(tmp_path, quantize="int8")


def test_cpu_has_bfloat16_answers():
    assert isinstance(cpu_has_bfloat16(), bool)


def test_float32_models_are_untouched_by_default():
    model = transdec.load_model("tiny-en-rnnt")
    assert model.encoder.output_dtype is None
    assert any(isinstance(m, nn.Linear) for m in model.encoder.modules())
