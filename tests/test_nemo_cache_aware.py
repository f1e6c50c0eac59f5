"""NeMo cache-aware streaming FastConformer checkpoints: loaded with a chosen look-ahead, encoded whole and chunk by
chunk, equal to NeMo 3.0.0's own outputs stored in the fixtures (no NeMo needed).

``fc_streaming_rnnt`` and ``fc_streaming_hybrid`` (``recipes/nemo_fixtures.py``) are NeMo's cache-aware streaming
Transducer and hybrid RNN-T/CTC configs made small: causal subsampling and convolutions, ``chunked_limited``
attention with look-aheads ``[L, 13], [L, 6], [L, 1], [L, 0]`` (``L`` = 14 and 70), unnormalised features. For each
look-ahead and clip the fixtures hold NeMo's offline encoder output, the output of each ``cache_aware_stream_step``
as NeMo's ``CacheAwareStreamingAudioBuffer`` feeds the clip, and the tokens of NeMo's cache-aware streaming greedy
transcription (``conformer_stream_step``, the hypotheses carried across chunks). Frames are compared at float32
rounding (``tests/float32.py``: 1e-4 absolute plus 3e-5 of the value; they agree to about 1e-6).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest
import torch

import transdec
from float32 import assert_float32_close
from helpers import NEMO_FIXTURES, repack
from transdec.decoding import DecodingConfig
from transdec.decoding.greedy.streaming import GreedyStreams
from transdec.decoding.options import GreedyOptions
from transdec.padding import pad_batch

MODELS = ("fc_streaming_rnnt", "fc_streaming_hybrid")
CASES = [(name, look_ahead) for name in MODELS for look_ahead in range(4)]


@lru_cache(maxsize=None)
def outputs(name: str) -> dict:
    return torch.load(NEMO_FIXTURES / f"{name}.outputs.pt", weights_only=True)


@lru_cache(maxsize=None)
def model(name: str, look_ahead: int):
    """The fixture loaded with its ``look_ahead``-th att_context_size."""
    context = outputs(name)["streaming"][look_ahead]["att_context_size"]
    return transdec.load_model(str(NEMO_FIXTURES / f"{name}.nemo"), att_context_size=context)


@pytest.fixture(scope="module")
def clips() -> list[torch.Tensor]:
    return [s.float() / 32768.0 for s in torch.load(NEMO_FIXTURES / "clips.pt", weights_only=True)["samples"]]


def stream_alone(encoder, audio: torch.Tensor, piece: int | None = None) -> list[torch.Tensor]:
    """One stream's chunks, the audio given whole or ``piece`` samples at a time, each chunk encoded once ready."""
    stream, chunks = encoder.open(), []
    for samples in ([audio] if piece is None else audio.split(piece)):
        stream.accept(samples)
        while stream.ready:
            chunks.append(encoder.encode([stream])[0])
    stream.input_finished()
    while not stream.done:
        assert stream.ready
        chunks.append(encoder.encode([stream])[0])
    assert not stream.ready
    return chunks


def assert_chunks_equal(chunks: list[torch.Tensor], expected: list[torch.Tensor], **tolerance) -> None:
    assert [c.shape[0] for c in chunks] == [e.shape[0] for e in expected]
    for chunk, reference in zip(chunks, expected):
        assert_float32_close(chunk, reference, **tolerance)


@pytest.mark.parametrize("name, look_ahead", CASES)
def test_chunks_equal_nemo_cache_aware_stream_step(name: str, look_ahead: int, clips) -> None:
    """Each clip streamed alone: every chunk's frames are those of NeMo's ``cache_aware_stream_step``, with the audio
    given at once or in pieces of 1,001 samples (features computed as the audio arrives)."""
    expected = outputs(name)["streaming"][look_ahead]
    encoder = model(name, look_ahead).streaming_encoder()
    assert encoder.chunk == expected["att_context_size"][1] + 1
    for i, audio in enumerate(clips):
        assert_chunks_equal(stream_alone(encoder, audio), expected["chunks"][i])
        if look_ahead in (0, 3):
            assert_chunks_equal(stream_alone(encoder, audio, piece=1001), expected["chunks"][i])


@pytest.mark.parametrize("name, look_ahead", CASES)
def test_offline_encode_equals_nemo_with_that_look_ahead(name: str, look_ahead: int, clips) -> None:
    """``encode`` of a padded batch: NeMo's offline forward with the chosen att_context_size (chunked_limited mask,
    causal convolutions and subsampling)."""
    expected = outputs(name)["streaming"][look_ahead]
    loaded = model(name, look_ahead)
    assert loaded.att_context_size == expected["att_context_size"]
    with torch.inference_mode():
        audio, samples = pad_batch(clips, dtype=torch.float32)
        encoded, lengths = loaded.encode(audio, samples)
    for row, reference in enumerate(expected["offline_encoder"]):
        assert int(lengths[row]) == reference.shape[0]
        assert_float32_close(encoded[row, : reference.shape[0]], reference)


def test_default_look_ahead_is_the_first_and_can_be_changed(clips) -> None:
    name = "fc_streaming_hybrid"
    loaded = transdec.load_model(str(NEMO_FIXTURES / f"{name}.nemo"))
    assert loaded.att_context_sizes == [[70, 13], [70, 6], [70, 1], [70, 0]]
    assert loaded.att_context_size == [70, 13]
    expected = outputs(name)
    with torch.inference_mode():
        assert_float32_close(loaded.encode(clips[0][None])[0][0], expected["encoder"][0])
        loaded.set_att_context_size([70, 1])
        assert_float32_close(loaded.encode(clips[0][None])[0][0], expected["streaming"][2]["offline_encoder"][0])
    assert loaded.streaming_encoder().chunk == 2 and loaded.streaming_encoder([70, 6]).chunk == 7


@pytest.mark.parametrize("name, look_ahead", CASES)
def test_greedy_tokens_of_streamed_frames_equal_nemo_streaming(name: str, look_ahead: int, clips) -> None:
    """Greedy decoding of the streamed frames, whole (label looping) or chunk by chunk as they come (GreedyStreams,
    every clip a stream): the tokens of NeMo's cache-aware streaming transcription."""
    expected = outputs(name)["streaming"][look_ahead]
    loaded = model(name, look_ahead)
    encoder = loaded.streaming_encoder()
    chunks = [stream_alone(encoder, audio) for audio in clips]
    config = DecodingConfig("greedy_label", max_symbols_per_frame=10)
    for i, clip_chunks in enumerate(chunks):
        frames = torch.cat(clip_chunks)[None]
        hyp = transdec.decode(loaded, frames, torch.tensor([frames.shape[1]]), config).hypotheses()[0]
        assert list(hyp.tokens) == expected["tokens"][i], i
    greedy = GreedyStreams(loaded, len(clips), GreedyOptions(max_symbols_per_frame=10))
    slots = [greedy.open() for _ in clips]
    for step in range(max(map(len, chunks))):
        for slot, clip_chunks in zip(slots, chunks):
            if step < len(clip_chunks):
                greedy.accept(slot, clip_chunks[step])
        greedy.decode()
    assert [list(greedy.hypothesis(slot).tokens) for slot in slots] == expected["tokens"]


@pytest.mark.parametrize("name, look_ahead", [("fc_streaming_rnnt", 1), ("fc_streaming_hybrid", 0),
                                              ("fc_streaming_rnnt", 3)])
def test_streams_at_different_positions_in_one_batch(name: str, look_ahead: int, clips) -> None:
    """Streams that start at different times and receive audio at different rates are encoded together, first
    chunks beside later and last ones: each gets the chunks it gets alone (and NeMo's)."""
    expected = outputs(name)["streaming"][look_ahead]["chunks"]
    encoder = model(name, look_ahead).streaming_encoder()
    alone = [stream_alone(encoder, audio) for audio in clips]
    streams = [encoder.open() for _ in clips]
    given = [0] * len(clips)
    rates = [None, None, 2600, 900]  # samples per round (None: all at once)
    got: list[list[torch.Tensor]] = [[] for _ in clips]
    mixed = set()
    for round_number in range(200):
        for i, (stream, audio) in enumerate(zip(streams, clips)):
            if round_number < 2 * i or stream.finished:  # stream i joins at round 2i
                continue
            piece = audio[given[i] : given[i] + (rates[i] or audio.shape[0])]
            given[i] += piece.shape[0]
            stream.accept(piece)
            if given[i] >= audio.shape[0]:
                stream.input_finished()
        ready = [i for i, s in enumerate(streams) if s.ready]
        if ready:
            mixed.add(tuple(sorted({min(streams[i].chunk_index, 1) for i in ready})))
            for i, frames in zip(ready, encoder.encode([streams[i] for i in ready])):
                got[i].append(frames)
        if all(s.done for s in streams):
            break
    assert all(s.done for s in streams)
    assert (0, 1) in mixed  # a first chunk was batched with later ones
    for i in range(len(clips)):
        assert_chunks_equal(got[i], alone[i], atol=1e-5, rtol=1e-5)
        assert_chunks_equal(got[i], expected[i])


def test_a_streaming_encoder_is_a_streaming_encoder() -> None:
    from transdec.streaming.encoders import EncoderStream, StreamingEncoder

    encoder = model("fc_streaming_hybrid", 0).streaming_encoder()
    assert isinstance(encoder, StreamingEncoder) and isinstance(encoder.open(), EncoderStream)
    assert encoder.sample_rate == 16000 and encoder.frame_shift_seconds == pytest.approx(0.08)
    assert encoder.latency_seconds == pytest.approx(1.056)  # 13 frames and half an STFT window
    assert model("fc_streaming_hybrid", 3).streaming_encoder().latency_seconds == pytest.approx(0.016)
    stream = encoder.open()
    stream.input_finished()
    assert stream.done and not stream.ready and encoder.encode([]) == []
    with pytest.raises(ValueError, match="after input_finished"):
        stream.accept(torch.zeros(10))


@pytest.mark.parametrize("look_ahead", [0, 1])
def test_windows_of_a_long_recording_cut_on_whole_attention_chunks(look_ahead: int, clips) -> None:
    """A long recording encoded in windows (long_audio) gives the frames of one pass: windows start on whole
    chunks of the chunked_limited attention."""
    loaded = model("fc_streaming_rnnt", look_ahead)
    recording = torch.cat(clips * 3)  # 25 s, 312 frames; receptive field 72 (or 58) frames
    with torch.inference_mode():
        whole, _ = loaded.encode(recording[None])
        windowed, frames = loaded.encode_in_windows(recording, 2.0, None)
    assert int(frames) == whole.shape[1]
    assert_float32_close(windowed, whole, atol=1e-5, rtol=1e-5)


def test_models_that_cannot_stream_are_refused_in_one_line(tmp_path: Path) -> None:
    offline = transdec.load_model(str(NEMO_FIXTURES / "fc_rnnt.nemo"))
    with pytest.raises(ValueError) as error:
        offline.streaming_encoder()
    message = str(error.value)
    assert "\n" not in message and "att_context_style='regular'" in message
    assert "causal_downsampling=false" in message and "conv_context_size=[4, 4]" in message

    def normalised(config: dict) -> None:
        config["preprocessor"]["normalize"] = "per_feature"

    loaded = transdec.load_model(str(repack("fc_streaming_rnnt", tmp_path / "norm.nemo", normalised)))
    with pytest.raises(ValueError, match="preprocessor.normalize='per_feature'"):
        loaded.streaming_encoder()
    with pytest.raises(ValueError, match=r"att_context_size=\[70, 2\] is not one of the model's look-aheads"):
        transdec.load_model(str(NEMO_FIXTURES / "fc_streaming_hybrid.nemo"), att_context_size=[70, 2])
    with pytest.raises(ValueError, match="not one of the model's look-aheads"):
        loaded.streaming_encoder([14, 2])
    with pytest.raises(ValueError, match="att_context_size chooses the look-ahead of a NeMo"):
        transdec.load_model(str(tmp_path / "model.pt"), att_context_size=[70, 1])

    def chunked_with_right_context(config: dict) -> None:
        config["encoder"]["att_context_style"] = "chunked_limited_with_rc"

    with pytest.raises(ValueError, match="encoder.att_context_style='chunked_limited_with_rc'"):
        transdec.load_model(str(repack("fc_streaming_rnnt", tmp_path / "rc.nemo", chunked_with_right_context)))
