"""The transcription API: inputs of every kind, batching invariance, word timings and confidences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from transdec.decoding import DecodingConfig, Hypothesis
from transdec.protocol import HeadSpec
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import TransducerModel
from transdec.transcribe import transcribe, words_of

from helpers import TEXTS, tiny_config


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
    from transdec.model.windowed_features import raw_features_in_chunks

    waveform = torch.randn(16000 * 3) * 0.1
    chunked = raw_features_in_chunks(model.config.features, waveform, frames_per_chunk=37)
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


# Issue 41: in-memory audio of every kind a user may hold, and long items inside a batch.

def test_integer_pcm_is_scaled_as_soundfile_reads_it(tmp_path: Path, model) -> None:
    from transdec.audio import as_waveform

    audio = (0.3 * np.random.default_rng(2).standard_normal(8000)).clip(-1, 0.99).astype(np.float32)
    for subtype, dtype in (("PCM_16", "int16"), ("PCM_32", "int32")):
        soundfile.write(tmp_path / "pcm.wav", audio, 16000, subtype=subtype)
        pcm, _ = soundfile.read(tmp_path / "pcm.wav", dtype=dtype)
        floats, _ = soundfile.read(tmp_path / "pcm.wav", dtype="float32")
        np.testing.assert_array_equal(as_waveform(pcm, 16000), floats)
        np.testing.assert_array_equal(as_waveform(torch.from_numpy(pcm), 16000), floats)
        assert transcribe(model, pcm)[0].tokens == transcribe(model, floats)[0].tokens
    np.testing.assert_array_equal(as_waveform(np.array([0, 128, 255], np.uint8), 16000), [-1, 0, 127 / 128])
    np.testing.assert_array_equal(as_waveform(torch.tensor([0.5, -0.25], dtype=torch.bfloat16), 16000),
                                  [0.5, -0.25])


def test_empty_and_sub_frame_audio_give_empty_transcripts(model) -> None:
    clip = (0.3 * np.random.default_rng(3).standard_normal(12000)).astype(np.float32)
    alone = transcribe(model, clip)[0]
    results = transcribe(model, [np.zeros(0), clip, np.zeros(100, np.float32)], batch_size=2)
    assert [(r.text, r.tokens, r.words) for r in (results[0], results[2])] == [("", [], [])] * 2
    assert [r.duration for r in results] == pytest.approx([0.0, 0.75, 100 / 16000])
    assert results[1].tokens == alone.tokens
    assert transcribe(model, np.zeros(0, np.float32))[0].text == ""  # a batch of nothing but empty audio


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_infinite_samples_in_an_array_are_refused(model, bad: float) -> None:
    clip = np.zeros(16000, np.float32)
    clip[4000:4010] = bad
    with pytest.raises(ValueError, match=r"inputs\[1\]: 10 sample\(s\) are NaN or infinite, the first at 0.250 s"):
        transcribe(model, [np.zeros(800, np.float32), torch.from_numpy(clip)])


def test_one_channel_arrays_are_mono_and_several_channels_are_refused(model) -> None:
    clip = (0.3 * np.random.default_rng(4).standard_normal(9000)).astype(np.float32)
    tokens = transcribe(model, clip)[0].tokens
    assert [t.tokens for t in transcribe(model, [clip[None, :], clip[:, None]])] == [tokens, tokens]
    with pytest.raises(ValueError, match=r"inputs\[0\]: .*got shape \(9000, 2\).*mix the channels to mono first"):
        transcribe(model, [np.stack([clip, clip], axis=1)])
    with pytest.raises(ValueError, match=r"inputs\[0\]: audio samples must be floating point or integer PCM"):
        transcribe(model, [np.ones(800, dtype=bool)])


def test_a_batch_encodes_short_items_together_and_long_items_in_windows(model) -> None:
    from transdec.long_audio import ChunkingConfig, encode_batch, encode_long

    chunking = ChunkingConfig(chunk_seconds=2.0, context_seconds=0.5)  # windows above 3 s
    rng = np.random.default_rng(5)
    waveforms = [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in (16000, 16000 * 7, 0, 40000, 16000 * 4)]
    encoded, lengths = encode_batch(model, waveforms, chunking)
    short = [0, 2, 3]
    batch = torch.zeros(len(short), 40000)
    for row, i in enumerate(short):
        batch[row, : len(waveforms[i])] = torch.from_numpy(waveforms[i])
    together, together_lengths = model.encode(batch, torch.tensor([len(waveforms[i]) for i in short]))
    expected = {i: together[row, : together_lengths[row]] for row, i in enumerate(short)}
    expected.update({i: encode_long(model, torch.from_numpy(waveforms[i]), chunking)[0][0] for i in (1, 4)})
    assert lengths.tolist() == [len(expected[i]) for i in range(5)]
    assert encoded.shape == (5, max(lengths), model.encoder.output_dim)
    for i in range(5):
        torch.testing.assert_close(encoded[i, : lengths[i]], expected[i], rtol=0, atol=0)
        assert not encoded[i, lengths[i] :].any()
    # Without long items (or without chunking) it is one plain padded batch.
    whole, whole_lengths = encode_batch(model, [waveforms[i] for i in short], chunking)
    assert torch.equal(whole, together) and torch.equal(whole_lengths, together_lengths)
    unchunked, _ = encode_batch(model, waveforms[:2], None)
    torch.testing.assert_close(unchunked[1:], model.encode(torch.from_numpy(waveforms[1])[None])[0])
