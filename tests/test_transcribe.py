"""The transcription API: inputs of every kind, batching invariance, word timings and confidences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from transdec.decoding import DecodingConfig, Hypothesis
from transdec.model.protocol import HeadSpec
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import TransducerModel
from transdec.transcribe import transcribe, words_of

from test_model_and_training import TEXTS, tiny_config


@pytest.fixture(scope="module")
def model() -> TransducerModel:
    torch.manual_seed(0)
    tokenizer = Tokenizer.train(TEXTS * 3, 24)
    return TransducerModel(tiny_config(HeadSpec("tdt", 24, durations=(0, 1, 2))), tokenizer).eval()


def test_files_arrays_and_tensors_give_the_same_result_in_any_batch(tmp_path: Path, model) -> None:
    rng = np.random.default_rng(0)
    clips = [(0.3 * rng.standard_normal(n)).astype(np.float32) for n in (16000, 7000, 12000)]
    soundfile.write(tmp_path / "a.wav", clips[0], 16000, subtype="FLOAT")
    together = transcribe(model, [tmp_path / "a.wav", clips[1], torch.from_numpy(clips[2])], batch_size=3)
    alone = [transcribe(model, clip)[0] for clip in clips]
    assert [t.tokens for t in together] == [t.tokens for t in alone]
    assert [t.duration for t in together] == pytest.approx([1.0, 7000 / 16000, 0.75])
    assert model.transcribe(clips[1], DecodingConfig(strategy="greedy_reference"))[0].tokens == alone[1].tokens


def test_two_dimensional_array_is_rejected(model) -> None:
    with pytest.raises(ValueError, match="1-D mono"):
        transcribe(model, [np.zeros((2, 100), dtype=np.float32)])


def test_words_group_tokens_with_times_and_confidences(model) -> None:
    tokenizer = model.tokenizer
    ids = tokenizer.encode("the cat sat")
    starts = tokenizer.word_starts(ids)
    hyp = Hypothesis(tokens=ids, timestamps=list(range(0, 2 * len(ids), 2)), durations=[1] * len(ids),
                     token_logprobs=[-0.1] * len(ids))
    words = words_of(model, hyp)
    assert [w.word for w in words] == ["the", "cat", "sat"]
    first_tokens = [i for i, s in enumerate(starts) if s]
    assert words[1].start == pytest.approx(hyp.timestamps[first_tokens[1]] * 0.08)
    assert words[-1].end == pytest.approx((hyp.timestamps[-1] + 1) * 0.08)
    assert all(w.confidence == pytest.approx(np.exp(-0.1)) for w in words)


def test_long_recording_features_in_chunks_equal_whole(model) -> None:
    from transdec.long_audio import raw_features_in_chunks

    waveform = torch.randn(16000 * 3) * 0.1
    chunked = raw_features_in_chunks(model, waveform, frames_per_chunk=37)
    import dataclasses

    from transdec.model.features import FbankExtractor

    whole = FbankExtractor(dataclasses.replace(model.config.features, normalize="none"))(waveform.unsqueeze(0))[0][0]
    torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-5)


@pytest.mark.parametrize("seconds", [9.0, 12.37])
def test_chunked_encoding_joins_to_the_unchunked_frame_count(model, seconds) -> None:
    from transdec.long_audio import ChunkingConfig, encode_long

    waveform = torch.randn(int(16000 * seconds)) * 0.1
    whole, whole_length = model.encode(waveform.unsqueeze(0))
    chunked, chunked_length = encode_long(model, waveform, ChunkingConfig(chunk_seconds=2.0, context_seconds=0.5))
    assert chunked.shape == whole.shape and chunked_length.tolist() == whole_length.tolist()
    # Without attention beyond the context the frames differ, but chunking with the whole recording as
    # context is exact.
    exact, _ = encode_long(model, waveform, ChunkingConfig(chunk_seconds=2.0, context_seconds=seconds))
    torch.testing.assert_close(exact, whole, rtol=1e-4, atol=1e-4)
    texts = transcribe(model, [waveform.numpy()], chunking=ChunkingConfig(chunk_seconds=2.0, context_seconds=0.5))
    assert texts[0].duration == pytest.approx(seconds, abs=1e-4)


def test_chunked_encoding_of_a_local_attention_model_is_exact() -> None:
    """With a bounded receptive field the default context covers it: chunked frames equal the whole encoding."""
    import dataclasses

    from transdec.long_audio import ChunkingConfig, context_seconds, encode_long, needs_chunking

    torch.manual_seed(4)
    config = tiny_config(HeadSpec("rnnt", 24))
    config = dataclasses.replace(config, encoder=dataclasses.replace(config.encoder, attention_context=4))
    local = TransducerModel(config, Tokenizer.train(TEXTS * 3, 24)).eval()
    chunking = ChunkingConfig(chunk_seconds=1.0)
    assert context_seconds(local, chunking) == pytest.approx(local.encoder.receptive_field * 0.08)
    waveform = torch.randn(16000 * 7) * 0.1
    assert needs_chunking(local, len(waveform), chunking)
    whole, _ = local.encode(waveform.unsqueeze(0))
    chunked, _ = encode_long(local, waveform, chunking)
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-5)
    # One frame less context than the field and the frames near chunk edges differ.
    short = ChunkingConfig(chunk_seconds=1.0, context_seconds=(local.encoder.receptive_field - 1) * 0.08)
    assert not torch.allclose(encode_long(local, waveform, short)[0], whole, rtol=1e-5, atol=1e-5)
    texts = [transcribe(local, [waveform.numpy()], chunking=c)[0].text for c in (None, chunking)]
    assert texts[0] == texts[1]
