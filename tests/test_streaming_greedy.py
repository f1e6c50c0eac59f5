"""Greedy decoding of streams chunk by chunk equals decoding each stream's frames whole (float64, CPU): for random
chunkings (chunks of any size, 0 included, different per stream), streams joining late and slots reused, frame by
frame and with WIND windows of 2, 3 and 8 frames."""

import copy
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arpa_fixtures import random_arpa
from helpers import HEADS, MATRIX, BigramScorer, assert_same_hypotheses, encoder_batch, model_for
from transdec.decoding import Fusion, GreedyOptions, LabelLoopingOptions, WindOptions, greedy_reference
from transdec.decoding.greedy.streaming import GreedyStreams
from transdec.lm import NGramLM

WINDOWS = [1, 2, 3, 8]


def options_for(max_symbols, window):
    """Plain greedy options for a window of 1 (the frame-by-frame search), WIND options for the others."""
    if window == 1:
        return GreedyOptions(max_symbols_per_frame=max_symbols)
    return WindOptions(max_symbols_per_frame=max_symbols, window_size=window)


def streamed(model, frames, lengths, options, chunk_seed, max_streams, fusions=(), device="cpu"):
    """Each utterance of the batch as a stream fed in random chunks, streams opened in turn as slots free up."""
    rng = random.Random(chunk_seed)
    streams = GreedyStreams(model, max_streams, options, fusions, device=device, dtype=torch.float64)
    waiting = list(range(len(lengths)))
    running: dict[int, tuple[int, int]] = {}  # slot -> (utterance, frames fed)
    results = {}
    while waiting or running:
        while waiting and len(running) < max_streams and rng.random() < 0.7:
            utterance = waiting.pop(0)
            running[streams.open()] = (utterance, 0)
        for slot, (utterance, fed) in list(running.items()):
            size = rng.choice([0, 1, 1, 2, 3, 7, 16])
            end = min(fed + size, lengths[utterance])
            streams.accept(slot, frames[utterance, fed:end])
            running[slot] = (utterance, end)
        streams.decode()
        for slot, (utterance, fed) in list(running.items()):
            if fed == lengths[utterance]:
                results[utterance] = streams.close(slot)
                del running[slot]
        if not running and waiting and rng.random() >= 0.7:  # nobody joined: make progress
            running[streams.open()] = (waiting.pop(0), 0)
    return [results[b] for b in range(len(lengths))]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("kind, predictor, profile, max_symbols", MATRIX)
@settings(max_examples=4, deadline=None)
@given(lengths=st.lists(st.integers(0, 20), min_size=1, max_size=6), seed=st.integers(0, 2**16),
       max_streams=st.integers(1, 4))
def test_streams_equal_whole_decoding(window, kind, predictor, profile, max_symbols, lengths, seed, max_streams):
    model = model_for(kind, predictor, profile)
    frames, lengths_tensor = encoder_batch(lengths, seed=seed)
    expected = greedy_reference(model, frames, lengths_tensor, max_symbols_per_frame=max_symbols).hypotheses()
    options = options_for(max_symbols, window)
    assert_same_hypotheses(streamed(model, frames, lengths, options, seed, max_streams), expected)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("seed", range(3))
def test_streams_with_a_fused_lm_equal_whole_decoding(window, kind, seed):
    model = model_for(kind, "lstm", "label_heavy")
    fusions = [Fusion(BigramScorer(model.head.num_tokens, seed), 0.5, token_bonus=0.3)]
    lengths = [9, 0, 17, 4, 12]
    frames, lengths_tensor = encoder_batch(lengths, seed=seed)
    expected = greedy_reference(model, frames, lengths_tensor, max_symbols_per_frame=3, fusions=fusions).hypotheses()
    options = LabelLoopingOptions(max_symbols_per_frame=3, window_size=window)
    assert_same_hypotheses(streamed(model, frames, lengths, options, seed, 3, fusions), expected)


@pytest.mark.parametrize("kind", list(HEADS))
def test_windows_cut_joint_calls(kind):
    """The window is searched, not only accepted: mostly-blank streams take fewer joint calls with 8 frames a call,
    for the same hypotheses."""
    model = model_for(kind, "lstm", "blank_heavy")
    frames, lengths = encoder_batch([40, 33, 40], seed=3)
    calls, results = [], []
    for window in (1, 8):
        streams = GreedyStreams(model, 3, options_for(3, window), dtype=torch.float64)
        slots = [streams.open() for _ in range(3)]
        for start in range(0, 40, 10):
            for slot, length in zip(slots, lengths.tolist()):
                streams.accept(slot, frames[slot, start : min(start + 10, length)])
            streams.decode()
        calls.append(streams.stats.joint_calls)
        results.append([streams.hypothesis(slot) for slot in slots])
    assert_same_hypotheses(results[1], results[0])
    assert calls[1] < calls[0]


def test_slots_and_inputs_are_checked():
    model = model_for("rnnt", "lstm", "label_heavy")
    streams = GreedyStreams(model, 1, dtype=torch.float64)
    slot = streams.open()
    with pytest.raises(ValueError, match="all 1 streams are open"):
        streams.open()
    with pytest.raises(ValueError, match=r"frames must be \[T, D\]"):
        streams.accept(slot, torch.zeros(3))
    streams.close(slot)
    with pytest.raises(ValueError, match="not open"):
        streams.accept(slot, torch.zeros(1, 16, dtype=torch.float64))


@pytest.mark.parametrize("window", [1, 8])
@pytest.mark.parametrize("kind", list(HEADS))
def test_a_long_stream_keeps_a_bounded_buffer(kind, window):
    """Frames behind every search are dropped: 400 frames in chunks of 3 through a buffer that stays small (a window
    longer than the chunks reads no dropped frame)."""
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch([400, 250], seed=5)
    expected = greedy_reference(model, frames, lengths, max_symbols_per_frame=3).hypotheses()
    streams = GreedyStreams(model, 2, options_for(3, window), dtype=torch.float64)
    slots = [streams.open(), streams.open()]
    for start in range(0, 400, 3):
        for slot, length in zip(slots, (400, 250)):
            streams.accept(slot, frames[slot, start : min(start + 3, length)])
        streams.decode()
        assert streams.state.encoder_proj.shape[1] <= 16
    assert_same_hypotheses([streams.hypothesis(slot) for slot in slots], expected)


@pytest.mark.parametrize("window", [1, 3])
@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("seed", range(3))
def test_a_restarted_segment_decodes_like_a_new_utterance(kind, seed, window):
    """After restart(slot), the segment is greedy decoding of the frames from where the search stood, its
    timestamps counted from the stream's start."""
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch([30], seed=seed)
    streams = GreedyStreams(model, 1, options_for(3, window), dtype=torch.float64)
    slot = streams.open()
    streams.accept(slot, frames[0, :11])
    streams.decode()
    start = int(streams.state.time[slot])
    streams.restart(slot)
    streams.accept(slot, frames[0, 11:30])
    streams.decode()
    rest = frames[:, start:30]
    expected = greedy_reference(model, rest, torch.tensor([rest.shape[1]]), max_symbols_per_frame=3).hypotheses()[0]
    expected.timestamps = [t + start for t in expected.timestamps]
    assert_same_hypotheses([streams.hypothesis(slot)], [expected])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("window", [1, 3])
@pytest.mark.parametrize("kind", list(HEADS))
def test_streams_on_cuda_equal_the_cpu_reference(window, kind, tmp_path):
    """float64 on the GPU, alone and with a fused n-gram LM on the GPU: the CPU reference's hypotheses."""
    model = model_for(kind, "lstm", "label_heavy")
    lengths = [0, 19, 7, 24, 1, 13]
    frames, lengths_tensor = encoder_batch(lengths, seed=5)
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(random_arpa(model.head.num_tokens, 3, seed=7, missing_tokens=1))
    lm = NGramLM.load(arpa, model.head.num_tokens, dtype=torch.float64)
    gpu_model = copy.deepcopy(model).to("cuda")
    for fusions, gpu_fusions in [([], []), ([Fusion(lm, 0.4, token_bonus=0.2)], [Fusion(lm.to("cuda"), 0.4, token_bonus=0.2)])]:
        expected = greedy_reference(model, frames, lengths_tensor, max_symbols_per_frame=3, fusions=fusions).hypotheses()
        got = streamed(gpu_model, frames, lengths, options_for(3, window), 5, 3, gpu_fusions, device="cuda")
        assert_same_hypotheses(got, expected)
