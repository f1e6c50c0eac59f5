"""The streaming recognizer on a bundled model and real recordings: buffered windows equal the windows of
:mod:`transdec.sample_windows` however the audio is cut, the streamed tokens equal greedy decoding of those frames,
endpoints split segments at silences, and bad input is refused."""

import random

import numpy as np
import pytest
import torch

import transdec
from transdec.audio import load_audio
from transdec.decoding import GreedyOptions, greedy_reference
from transdec.decoding.beam.alsd_pp import AlsdPlusOptions
from transdec.sample_windows import encode_windows, plan_windows
from transdec.streaming import (BufferedEncoder, BufferedOptions, EndpointOptions, EndpointRule, Recognizer,
                                StreamingOptions)

EXAMPLES = ["examples/espeak_logic.flac", "examples/piper_allens_axiom.flac",
            "examples/piper_are_you_making_this_up.flac"]
RATE = 16000


@pytest.fixture(scope="module")
def model():
    return transdec.load_model("tiny-en-rnnt")


@pytest.fixture(scope="module")
def recordings():
    return [load_audio(path, RATE) for path in EXAMPLES]


def feed_in_pieces(streams, recordings, seed, decode):
    """Every recording into its stream in random pieces (0 to 0.4 s), ``decode()`` after each round."""
    rng = random.Random(seed)
    fed = [0] * len(recordings)
    while not all(stream.done for stream in streams):
        for i, (stream, samples) in enumerate(zip(streams, recordings)):
            if fed[i] < len(samples):
                size = rng.choice([0, 1, 37, 800, 1280, 4000, 6400])
                stream.accept_waveform(samples[fed[i] : fed[i] + size], RATE)
                fed[i] += size
                if fed[i] >= len(samples):
                    stream.input_finished()
        while decode():
            pass


@pytest.mark.parametrize("chunk, context", [(0.32, 0.48), (0.96, 0.0), (0.08, 0.16)])
@pytest.mark.parametrize("seed", range(2))
def test_buffered_frames_equal_sample_windows_however_the_audio_is_cut(model, recordings, chunk, context, seed):
    encoder = BufferedEncoder(model, BufferedOptions(chunk, context, context))
    streams = [encoder.open() for _ in recordings]
    frames: list[list[torch.Tensor]] = [[] for _ in recordings]
    rng = random.Random(seed)
    fed = [0] * len(recordings)
    while not all(stream.done for stream in streams):
        for i, (stream, samples) in enumerate(zip(streams, recordings)):
            if fed[i] < len(samples):
                size = rng.choice([1, 800, 1280, 4000, 9000])
                stream.accept(torch.from_numpy(samples[fed[i] : fed[i] + size]))
                fed[i] += size
                if fed[i] >= len(samples):
                    stream.input_finished()
        ready = [i for i, stream in enumerate(streams) if stream.ready]
        for i, output in zip(ready, encoder.encode([streams[i] for i in ready])):
            frames[i].append(output)
    step = round(model.frame_shift_seconds * RATE)
    for samples, pieces in zip(recordings, frames):
        windows = plan_windows(len(samples), step, RATE, chunk, context, None)
        expected, _ = encode_windows(model.encode, torch.from_numpy(samples), windows, step)
        torch.testing.assert_close(torch.cat(pieces), expected[0], rtol=1e-4, atol=1e-4)


def test_streamed_tokens_equal_greedy_decoding_of_the_buffered_frames(model, recordings):
    options = StreamingOptions(max_streams=4, buffered=BufferedOptions(0.48, 0.48, 0.48), endpoint=None)
    recognizer = Recognizer(model, options)
    streams = [recognizer.open() for _ in recordings]
    partials = [set() for _ in recordings]

    def decode():
        stepped = recognizer.decode()
        for i, stream in enumerate(streams):
            partials[i].add(stream.result().text)
        return stepped

    feed_in_pieces(streams, recordings, 0, decode)
    step = round(model.frame_shift_seconds * RATE)
    for samples, stream, seen in zip(recordings, streams, partials):
        windows = plan_windows(len(samples), step, RATE, 0.48, 0.48, None)
        frames, lengths = encode_windows(model.encode, torch.from_numpy(samples), windows, step)
        expected = greedy_reference(model, frames, lengths).hypotheses()[0]
        assert len(stream.segments) == 1 and stream.segments[0].final
        assert stream.segments[0].tokens == expected.tokens
        assert stream.result().text == model.tokenizer.decode(expected.tokens)
        assert len(seen) > 3  # partial results grew as the audio came


def test_left_context_changes_nothing_once_it_covers_the_recording(model, recordings):
    """With contexts longer than the recording every window is the whole recording so far: the final text is
    that of offline transcription."""
    options = StreamingOptions(buffered=BufferedOptions(0.48, 30.0, 30.0), endpoint=None)
    recognizer = Recognizer(model, options)
    streams = [recognizer.open() for _ in recordings]
    feed_in_pieces(streams, recordings, 1, recognizer.decode)
    offline = model.transcribe(recordings)
    assert [stream.result().text for stream in streams] == [result.text for result in offline]


def test_endpoints_split_speech_at_silences(model, recordings):
    silence = np.zeros(int(2.0 * RATE), np.float32)
    audio = np.concatenate([recordings[0], silence, recordings[0], silence[: RATE // 2]])
    recognizer = Recognizer(model, StreamingOptions(buffered=BufferedOptions(0.48, 2.0, 0.48)))
    stream = recognizer.open()
    feed_in_pieces([stream], [audio], 2, recognizer.decode)
    expected = model.transcribe([recordings[0]])[0].text.split()
    assert len(stream.segments) == 2
    for segment in stream.segments:  # the window's context differs from the whole recording's: a word may change
        assert len(set(segment.text.split()) & set(expected)) >= len(expected) - 2
    first, second = stream.segments
    duration = len(recordings[0]) / RATE
    assert first.start == 0 and first.words[-1].end <= duration + 0.2
    assert second.words[0].start >= duration + 2.0 - 0.3
    assert first.end <= second.start


def test_new_segments_come_once_and_in_order(model, recordings):
    silence = np.zeros(int(1.6 * RATE), np.float32)
    audio = np.concatenate([recordings[0], silence, recordings[0]])
    rule = EndpointRule(needs_speech=True, trailing_silence_seconds=1.0)
    recognizer = Recognizer(model, StreamingOptions(endpoint=EndpointOptions((rule,))))
    stream = recognizer.open()
    collected = []

    def decode():
        stepped = recognizer.decode()
        collected.extend(stream.new_segments())
        return stepped

    feed_in_pieces([stream], [audio], 3, decode)
    assert collected == stream.segments and len(collected) == 2


def test_other_sample_rates_are_resampled_as_they_come(model, recordings):
    import soxr

    high = soxr.resample(recordings[0], RATE, 48000).astype(np.float32)
    recognizer = Recognizer(model, StreamingOptions(endpoint=None))
    stream = recognizer.open()
    for start in range(0, len(high), 4801):
        stream.accept_waveform(high[start : start + 4801], 48000)
        recognizer.decode()
    stream.input_finished()
    while recognizer.decode():
        pass
    assert stream.done and stream.result().text == model.transcribe([recordings[0]])[0].text


def test_endpoint_rules():
    rules = EndpointOptions()
    assert not rules.detected(has_speech=True, trailing_silence=1.0, length=5.0)
    assert rules.detected(has_speech=True, trailing_silence=1.2, length=5.0)
    assert not rules.detected(has_speech=False, trailing_silence=2.0, length=5.0)
    assert rules.detected(has_speech=False, trailing_silence=2.4, length=2.4)
    assert rules.detected(has_speech=True, trailing_silence=0.0, length=20.0)


def test_bad_input_and_full_recognizers_are_refused(model):
    recognizer = Recognizer(model, StreamingOptions(max_streams=1))
    stream = recognizer.open()
    with pytest.raises(ValueError, match="all 1 streams are open"):
        recognizer.open()
    stream.accept_waveform(np.zeros(100, np.float32), RATE)
    with pytest.raises(ValueError, match="at 16000 Hz, got a piece at 8000 Hz"):
        stream.accept_waveform(np.zeros(100, np.float32), 8000)
    with pytest.raises(ValueError, match="mono"):
        stream.accept_waveform(np.zeros((2, 100), np.float32), RATE)
    stream.input_finished()
    with pytest.raises(ValueError, match="after input_finished"):
        stream.accept_waveform(np.zeros(100, np.float32), RATE)
    while recognizer.decode():
        pass
    assert stream.done and stream.segments == []
    stream.close()
    recognizer.open()  # the slot is free again


@pytest.mark.parametrize("kind", ["nemo", "onnx"])
def test_any_offline_model_streams_in_buffered_windows(kind, recordings, tmp_path_factory):
    """A ``.nemo`` checkpoint and an ONNX export stream like transdec's own models: the tokens of greedy decoding
    of their windows' frames."""
    from onnx_helpers import NEMO_FIXTURES, exported

    if kind == "onnx":
        pytest.importorskip("onnxruntime")
        model = transdec.load_model(exported("nemo-fc-rnnt", tmp_path_factory.mktemp("onnx")))
    else:
        model = transdec.load_model(NEMO_FIXTURES / "fc_rnnt.nemo")
    options = StreamingOptions(buffered=BufferedOptions(0.32, 0.64, 0.64), endpoint=None)
    recognizer = Recognizer(model, options)
    streams = [recognizer.open() for _ in recordings]
    feed_in_pieces(streams, recordings, 4, recognizer.decode)
    step = round(model.frame_shift_seconds * RATE)
    for samples, stream in zip(recordings, streams):
        windows = plan_windows(len(samples), step, RATE, 0.32, 0.64, None)
        frames, lengths = encode_windows(model.encode, torch.from_numpy(samples), windows, step)
        expected = greedy_reference(model, frames, lengths).hypotheses()[0]
        assert stream.result().tokens == expected.tokens


@pytest.mark.parametrize("look_ahead", [0, 2])
def test_a_cache_aware_nemo_model_streams_with_its_caches(look_ahead, tmp_path, capsys):
    """The recognizer takes a cache-aware checkpoint's own streaming encoder: fed in random pieces, every clip comes
    out with the tokens of NeMo's cache-aware streaming transcription (the fixture's), and so does
    ``transdec stream``."""
    import soundfile

    from helpers import NEMO_FIXTURES, cli
    from transdec.decoding import GreedyOptions

    fixture = NEMO_FIXTURES / "fc_streaming_rnnt.nemo"
    expected = torch.load(NEMO_FIXTURES / "fc_streaming_rnnt.outputs.pt", weights_only=True)["streaming"][look_ahead]
    clips = [s.numpy() for s in torch.load(NEMO_FIXTURES / "clips.pt", weights_only=True)["samples"]]
    model = transdec.load_model(fixture, att_context_size=expected["att_context_size"])
    options = StreamingOptions(decoding=GreedyOptions(max_symbols_per_frame=10), endpoint=None)
    recognizer = Recognizer(model, options)
    assert model.cache_aware and not isinstance(recognizer.encoder, BufferedEncoder)
    streams = [recognizer.open() for _ in clips]
    feed_in_pieces(streams, [clip.astype(np.float32) / 32768 for clip in clips], 5, recognizer.decode)
    assert [stream.result().tokens for stream in streams] == expected["tokens"]

    soundfile.write(tmp_path / "clip.wav", clips[0], RATE, subtype="PCM_16")
    left, right = expected["att_context_size"]
    code, out, err = cli(capsys, "stream", tmp_path / "clip.wav", "--model", fixture, "--no-endpoint",
                         "--att-context-size", f"{left},{right}")
    assert code == 0, err
    assert (out.split("] ", 1)[1].strip() if out else "") == model.tokenizer.decode(expected["tokens"][0])


def test_beam_search_streams_with_a_fused_lm(model, recordings, tmp_path):
    """ALSD++ in the recognizer: each stream's result is the best hypothesis of beam_alsd_pp on its windows' frames
    (with a fused n-gram LM), and endpoints split a stream into segments as with greedy decoding."""
    from arpa_fixtures import random_arpa
    from transdec.decoding import DecodingConfig, Fusion, decode
    from transdec.decoding.beam.alsd_pp import AlsdPlusOptions
    from transdec.lm import NGramLM

    (tmp_path / "lm.arpa").write_text(random_arpa(model.head.num_tokens, order=3, seed=0))
    lm = NGramLM.load(tmp_path / "lm.arpa", model.head.num_tokens)
    fusions = (Fusion(lm, 0.3),)
    beam = AlsdPlusOptions(beam_size=4, nbest=1)
    options = StreamingOptions(buffered=BufferedOptions(0.48, 0.48, 0.48), decoding=beam, endpoint=None)
    recognizer = Recognizer(model, options, fusions)
    streams = [recognizer.open() for _ in recordings]
    feed_in_pieces(streams, recordings, 6, recognizer.decode)
    step = round(model.frame_shift_seconds * RATE)
    config = DecodingConfig("beam_alsd_pp", beam_size=4, fusions=fusions)
    for samples, stream in zip(recordings, streams):
        windows = plan_windows(len(samples), step, RATE, 0.48, 0.48, None)
        frames, lengths = encode_windows(model.encode, torch.from_numpy(samples), windows, step)
        assert stream.result().tokens == decode(model, frames, lengths, config).hypotheses()[0].tokens

    silence = np.zeros(int(2.0 * RATE), np.float32)
    recognizer = Recognizer(model, StreamingOptions(decoding=beam), fusions)
    stream = recognizer.open()
    feed_in_pieces([stream], [np.concatenate([recordings[0], silence, recordings[0]])], 7, recognizer.decode)
    assert len(stream.segments) == 2 and stream.segments[0].end <= stream.segments[1].start


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("decoding", ["greedy", "beam"])
def test_a_recognizer_on_cuda_gives_the_cpus_results(model, recordings, decoding):
    """The bundled model on the GPU, streams cut alike: the same final tokens, word for word, as on the CPU (a
    trained model's decisions are far from ties, so float32 rounding on either device changes none)."""
    gpu_model = transdec.load_model("tiny-en-rnnt", device="cuda")
    finals = []
    for each in (model, gpu_model):
        options = StreamingOptions(max_streams=4, buffered=BufferedOptions(0.48, 0.48, 0.48), endpoint=None,
                                   decoding=AlsdPlusOptions(beam_size=4) if decoding == "beam" else GreedyOptions())
        recognizer = Recognizer(each, options)
        streams = [recognizer.open() for _ in recordings]
        feed_in_pieces(streams, recordings, 3, recognizer.decode)
        finals.append([[segment.tokens for segment in stream.segments] for stream in streams])
    assert finals[0] == finals[1]
