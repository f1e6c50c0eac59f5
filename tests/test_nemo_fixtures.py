"""NeMo ``.nemo`` checkpoints loaded without NeMo give NeMo's own features, encoder output and greedy tokens.

The fixtures (``tests/fixtures/nemo/``) are small random-weight NeMo 3.0.0 models and NeMo's outputs on four clips,
made by ``recipes/nemo_fixtures.py``: FastConformer RNN-T, TDT (128 mel bins, two LSTM layers), multi-blank
(limited attention context, tanh joint), hybrid RNN-T/CTC, stateless predictor, classic 4x Conformer (no
x-scaling, shared u/v biases, layer-norm convolution module), local attention (symmetric and asymmetric window),
cache-aware streaming Transducer and hybrid (offline here, with their default look-ahead; streaming in
``tests/test_nemo_cache_aware.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import transdec
from float32 import assert_float32_close
from transdec.decoding import DecodingConfig
from transdec.padding import pad_batch

FIXTURES = Path(__file__).parent / "fixtures" / "nemo"
MODELS = ("fc_rnnt", "fc_tdt", "fc_multiblank", "fc_hybrid", "fc_stateless", "conformer4x", "fc_local_attn",
          "fc_local_attn_asym", "fc_streaming_rnnt", "fc_streaming_hybrid")


@pytest.fixture(scope="module")
def clips() -> list[torch.Tensor]:
    """The clips as float audio in [-1, 1] (stored as int16, as the recipe read them)."""
    return [s.float() / 32768.0 for s in torch.load(FIXTURES / "clips.pt", weights_only=True)["samples"]]


def load(name: str):
    model = transdec.load_model(str(FIXTURES / f"{name}.nemo"))
    outputs = torch.load(FIXTURES / f"{name}.outputs.pt", weights_only=True)
    return model, outputs


@pytest.mark.parametrize("name", MODELS)
def test_encoder_output_and_tokens_match_nemo(name: str, clips: list[torch.Tensor]) -> None:
    """Each clip alone: features, encoder frames (float32 rounding, see tests/float32.py) and label-looping tokens and frames equal NeMo's."""
    model, expected = load(name)
    assert model.config.model_class == expected["model_class"]
    assert model.head.kind == expected["head"]
    with torch.inference_mode():
        for i, audio in enumerate(clips):
            features, frames = model.preprocessor(audio[None], torch.tensor([len(audio)]))
            if expected["features"]:
                reference = expected["features"][i]
                assert int(frames) == reference.shape[0]
                assert_float32_close(features[0, : int(frames)], reference)
            encoded, lengths = model.encode(audio[None], torch.tensor([len(audio)]))
            reference = expected["encoder"][i]
            assert int(lengths) == reference.shape[0]
            assert_float32_close(encoded[0, : int(lengths)], reference)
            hyp = transdec.decode(model, encoded, lengths,
                                  DecodingConfig(max_symbols_per_frame=expected["max_symbols"])).hypotheses()[0]
            assert list(hyp.tokens) == expected["tokens"][i]
            assert list(hyp.timestamps) == expected["timestamps"][i]
            if expected["head"] == "tdt":
                assert list(hyp.durations) == expected["durations"][i]
            assert model.tokenizer.decode(list(hyp.tokens)) == expected["text"][i]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("batch_size", [2, 4])
def test_batched_encoding_and_label_looping_match_nemo(name: str, batch_size: int, clips: list[torch.Tensor]) -> None:
    """Padded batches (several orders) through transdec's encoder and label-looping decoder: NeMo's per-utterance
    outputs, whatever else is in the batch."""
    model, expected = load(name)
    order = list(range(len(clips)))[::-1] if batch_size == 2 else [2, 0, 3, 1]
    config = DecodingConfig(max_symbols_per_frame=expected["max_symbols"])
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            picked = order[start : start + batch_size]
            audio, samples = pad_batch([clips[i] for i in picked], dtype=torch.float32)
            encoded, lengths = model.encode(audio, samples)
            result = transdec.decode(model, encoded, lengths, config)
            for row, (i, hyp) in enumerate(zip(picked, result.hypotheses())):
                reference = expected["encoder"][i]
                assert int(lengths[row]) == reference.shape[0]
                assert_float32_close(encoded[row, : reference.shape[0]], reference)
                assert list(hyp.tokens) == expected["tokens"][i], (name, i)
                assert list(hyp.timestamps) == expected["timestamps"][i]


def test_hybrid_ctc_head_matches_nemo(clips: list[torch.Tensor]) -> None:
    model, expected = load("fc_hybrid")
    with torch.inference_mode():
        audio, samples = pad_batch(clips, dtype=torch.float32)
        encoded, lengths = model.encode(audio, samples)
        assert model.ctc_greedy(encoded, lengths) == expected["ctc_tokens"]


def test_other_strategies_agree_on_a_nemo_model(clips: list[torch.Tensor]) -> None:
    """Every exact greedy strategy and beam size 1 give the same tokens on a loaded TDT model."""
    model, expected = load("fc_tdt")
    with torch.inference_mode():
        audio, samples = pad_batch(clips, dtype=torch.float32)
        encoded, lengths = model.encode(audio, samples)
        for strategy in ("greedy_reference", "greedy_wind", "greedy_label"):
            result = transdec.decode(model, encoded, lengths, DecodingConfig(strategy, max_symbols_per_frame=10))
            assert [list(h.tokens) for h in result.hypotheses()] == expected["tokens"], strategy


def test_model_protocol_and_frame_shift() -> None:
    from transdec.protocol import SpeechModel

    model, _ = load("fc_rnnt")
    assert isinstance(model, SpeechModel)
    assert model.sample_rate == 16000
    assert model.frame_shift_seconds == pytest.approx(0.08)
    assert load("conformer4x")[0].frame_shift_seconds == pytest.approx(0.04)


def test_transcribe_api_gives_nemo_text(clips: list[torch.Tensor]) -> None:
    model, expected = load("fc_multiblank")
    transcripts = model.transcribe([c.numpy() for c in clips], DecodingConfig(max_symbols_per_frame=10))
    assert [list(t.tokens) for t in transcripts] == expected["tokens"]
    assert [t.text for t in transcripts] == [model.tokenizer.decode(tokens) for tokens in expected["tokens"]]


@pytest.mark.parametrize("name", ["fc_local_attn", "fc_local_attn_asym"])
def test_local_attention_in_small_blocks_matches_nemo(name: str, clips: list[torch.Tensor]) -> None:
    """Local attention is computed for blocks of queries; blocks smaller than the window give NeMo's frames too."""
    model, expected = load(name)
    model.encoder.local_attention_block = 3
    with torch.inference_mode():
        audio, samples = pad_batch(clips, dtype=torch.float32)
        encoded, lengths = model.encode(audio, samples)
    for row, reference in enumerate(expected["encoder"]):
        assert_float32_close(encoded[row, : reference.shape[0]], reference)


@pytest.mark.parametrize("name", ["fc_rnnt", "conformer4x"])
@pytest.mark.parametrize("row_groups", [False, True])
def test_subsampling_in_chunks_matches_nemo(name: str, row_groups: bool, clips: list[torch.Tensor]) -> None:
    """Long inputs are subsampled a chunk at a time; chunks of a few frames give NeMo's frames too, and so do
    groups of one row."""
    model, expected = load(name)
    model.encoder.pre_encode.chunk_frames = 16
    if row_groups:
        model.encoder.pre_encode.chunk_bytes = 1
    with torch.inference_mode():
        audio, samples = pad_batch(clips, dtype=torch.float32)
        encoded, lengths = model.encode(audio, samples)
    for row, reference in enumerate(expected["encoder"]):
        assert int(lengths[row]) == reference.shape[0]
        assert_float32_close(encoded[row, : reference.shape[0]], reference)
