"""ALSD++ beam search of streams chunk by chunk equals beam_alsd_pp on each stream's whole frames (float64, CPU):
the same n-best in the same order, tokens, timestamps and durations exactly, scores and log-probs to 1e-9 (each chunk's
frames are projected for the joint on their own, which rounds differently from the whole utterance's, by about
1e-16). For random chunkings (chunks of any size, 0 included, different per stream), streams joining late, slots
reused, beams of 1 to 4, every merge rule and with a fused bigram LM."""

import copy
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arpa_fixtures import random_arpa
from helpers import HEADS, PREDICTORS, BigramScorer, encoder_batch, model_for, same
from transdec.decoding import Fusion, GreedyOptions, greedy_label_looping
from transdec.decoding.beam.alsd_pp import AlsdPlusOptions, beam_alsd_pp
from transdec.decoding.beam.streaming import BeamStreams
from transdec.decoding.greedy.streaming import GreedyStreams
from transdec.lm import NGramLM


def offline(model, frames, lengths, options, fusions=()):
    """beam_alsd_pp's n-best of each utterance decoded alone, on its frames only."""
    return [beam_alsd_pp(model, frames[b : b + 1, :length], torch.tensor([length]), options, fusions=fusions).nbest[0]
            for b, length in enumerate(lengths)]


def assert_same_nbest(got, expected):
    assert len(got) == len(expected)
    for b, (got_list, expected_list) in enumerate(zip(got, expected)):
        assert len(got_list) == len(expected_list), f"stream {b}: n-best length"
        for rank, (a, e) in enumerate(zip(got_list, expected_list)):
            assert same(a, e), f"stream {b}, rank {rank}: {a} != {e}"
            assert a.am_score == pytest.approx(e.am_score, abs=1e-9), f"stream {b}, rank {rank}: am_score"


def streamed(model, frames, lengths, options, chunk_seed, max_streams, fusions=(), device="cpu"):
    """Each utterance of the batch as a stream fed in random chunks, finished at a random round once its frames are
    in, streams opened in turn as slots free up; partial n-best lists read now and then. The final n-best lists."""
    rng = random.Random(chunk_seed)
    streams = BeamStreams(model, max_streams, options, fusions, device=device, dtype=torch.float64)
    waiting = list(range(len(lengths)))
    running: dict[int, list] = {}  # slot -> [utterance, frames fed, finished]
    results = {}
    while waiting or running:
        while waiting and len(running) < max_streams and rng.random() < 0.7:
            running[streams.open()] = [waiting.pop(0), 0, False]
        for slot, entry in running.items():
            utterance, fed, _ = entry
            end = min(fed + rng.choice([0, 0, 1, 1, 2, 3, 7]), lengths[utterance])
            streams.accept(slot, frames[utterance, fed:end])
            entry[1] = end
            if end == lengths[utterance] and rng.random() < 0.6:
                streams.finish(slot)
                entry[2] = True
        streams.decode()
        for slot, (utterance, fed, finished) in list(running.items()):
            assert streams.done(slot) == finished  # a finished stream is decoded to its end by one decode()
            if finished:
                results[utterance] = streams.close(slot)
                del running[slot]
            elif rng.random() < 0.3:
                partial = streams.nbest(slot)
                assert 1 <= len(partial) <= options.nbest
                assert all(t < fed for h in partial for t in h.timestamps)  # no token on a frame not received
                if not options.length_norm:
                    assert [h.score for h in partial] == sorted((h.score for h in partial), reverse=True)
        if not running and waiting and rng.random() < 0.5:  # nobody joined: make progress
            running[streams.open()] = [waiting.pop(0), 0, False]
    return [results[b] for b in range(len(lengths))]


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("predictor", PREDICTORS)
@settings(max_examples=20, deadline=None)
@given(lengths=st.lists(st.integers(0, 18), min_size=1, max_size=5), seed=st.integers(0, 2**16),
       max_streams=st.integers(1, 3), beam_size=st.integers(1, 4), merge=st.sampled_from(["max", "logsumexp", "none"]),
       max_symbols=st.sampled_from([1, 3]), fused=st.booleans(), pruning=st.sampled_from(["late", "early"]),
       length_norm=st.booleans())
def test_streams_equal_whole_decoding(kind, predictor, lengths, seed, max_streams, beam_size, merge, max_symbols,
                                      fused, pruning, length_norm):
    model = model_for(kind, predictor, "label_heavy")
    frames, _ = encoder_batch(lengths, seed=seed)
    options = AlsdPlusOptions(beam_size=beam_size, nbest=min(beam_size, 3), merge=merge, pruning=pruning,
                              max_symbols_per_frame=max_symbols, length_norm=length_norm)
    fusions = [Fusion(BigramScorer(model.head.num_tokens, seed), 0.6, token_bonus=0.2)] if fused else []
    expected = offline(model, frames, lengths, options, fusions)
    assert_same_nbest(streamed(model, frames, lengths, options, seed, max_streams, fusions), expected)


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("merge", ["max", "logsumexp"])
def test_frame_by_frame_with_a_fused_lm(kind, merge):
    """Chunks of one frame: hypotheses jump past the frames received all the time (big blanks, TDT durations), so
    streams wait, and merges wait for the stream's length; the fused LM's states travel with the hypotheses."""
    model = model_for(kind, "lstm", "label_heavy")
    lengths = [17, 5, 12, 0]
    frames, _ = encoder_batch(lengths, seed=11)
    options = AlsdPlusOptions(beam_size=4, nbest=4, merge=merge, max_symbols_per_frame=2)
    fusions = [Fusion(BigramScorer(model.head.num_tokens, seed=4), 0.8, token_bonus=0.1, blank_scoring=True)]
    streams = BeamStreams(model, len(lengths), options, fusions, dtype=torch.float64)
    slots = [streams.open() for _ in lengths]
    waited = jumped = deferred = False
    for t in range(max(lengths)):
        for slot, length in zip(slots, lengths):
            if t < length:
                streams.accept(slot, frames[slot, t : t + 1])
        streams.decode()
        hyps, received = streams.state.search.hyps, streams.state.received.unsqueeze(1)
        alive = hyps.scores > -torch.inf
        waited |= bool(((hyps.time >= received) & alive).any())
        jumped |= bool(((hyps.time > received) & alive).any())
        deferred |= bool(streams.state.merge_pending.any())
    assert waited and deferred and (jumped or kind == "rnnt")  # RNN-T moves one frame at a time: never past
    for slot in slots:
        streams.finish(slot)
    streams.decode()
    assert all(streams.done(slot) for slot in slots)
    assert_same_nbest([streams.nbest(slot) for slot in slots], offline(model, frames, lengths, options, fusions))


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("predictor", PREDICTORS)
def test_beam_one_is_greedy(kind, predictor):
    """One hypothesis per stream: the greedy streams' result, and greedy decoding's, for the same chunks."""
    model = model_for(kind, predictor, "label_heavy")
    lengths = [14, 0, 9, 20]
    frames, lengths_tensor = encoder_batch(lengths, seed=3)
    beam = BeamStreams(model, len(lengths), AlsdPlusOptions(beam_size=1, max_symbols_per_frame=3),
                       dtype=torch.float64)
    greedy = GreedyStreams(model, len(lengths), GreedyOptions(max_symbols_per_frame=3), dtype=torch.float64)
    slots = [(beam.open(), greedy.open()) for _ in lengths]
    rng = random.Random(0)
    fed = [0] * len(lengths)
    while fed != lengths:
        for b, (beam_slot, greedy_slot) in enumerate(slots):
            end = min(fed[b] + rng.choice([0, 1, 2, 5]), lengths[b])
            beam.accept(beam_slot, frames[b, fed[b] : end])
            greedy.accept(greedy_slot, frames[b, fed[b] : end])
            fed[b] = end
        beam.decode()
        greedy.decode()
    for beam_slot, _ in slots:
        beam.finish(beam_slot)
    beam.decode()
    expected = greedy_label_looping(model, frames, lengths_tensor, max_symbols_per_frame=3).hypotheses()
    for (beam_slot, greedy_slot), want in zip(slots, expected):
        (got,) = beam.close(beam_slot)
        assert same(got, want) and same(got, greedy.close(greedy_slot))


@pytest.mark.parametrize("kind", list(HEADS))
def test_a_long_stream_keeps_bounded_buffers(kind):
    """Frames behind every live hypothesis are dropped and the tree of tokens is compacted: 150 frames in chunks of
    3 through an encoder buffer that stays small, and a tree that holds about the hypotheses' tokens, not every
    step taken."""
    model = model_for(kind, "lstm", "label_heavy")
    lengths = [150, 100]
    frames, _ = encoder_batch(lengths, seed=5)
    options = AlsdPlusOptions(beam_size=3, nbest=3, max_symbols_per_frame=3, merge="logsumexp")
    streams = BeamStreams(model, 2, options, dtype=torch.float64)
    slots = [streams.open(), streams.open()]
    for start in range(0, 150, 3):
        for slot, length in zip(slots, lengths):
            if start < length:
                streams.accept(slot, frames[slot, start : min(start + 3, length)])
                if start + 3 >= length:
                    streams.finish(slot)
        streams.decode()
        hyps = streams.state.search.hyps
        assert streams.state.search.encoder_proj.shape[1] <= 32
        assert hyps.capacity <= max(64, 2 * int(hyps.lengths.max()) + 2 * 8 * 4)
    nbest = [streams.nbest(slot) for slot in slots]
    assert streams.stats.joint_calls > streams.state.search.hyps.capacity  # the tree was compacted
    assert_same_nbest(nbest, offline(model, frames, lengths, options))


def test_a_reused_slot_starts_afresh():
    """A slot closed in the middle of a stream and opened again holds nothing of the old stream: not its tokens, its
    frames, its predictor or LM state, nor a merge it was waiting for."""
    model = model_for("tdt", "stateless", "label_heavy")
    frames, _ = encoder_batch([20, 11], seed=9)
    options = AlsdPlusOptions(beam_size=4, nbest=4, max_symbols_per_frame=3, merge="logsumexp")
    fusions = [Fusion(BigramScorer(model.head.num_tokens, seed=2), 0.5)]
    streams = BeamStreams(model, 1, options, fusions, dtype=torch.float64)
    slot = streams.open()
    for t in range(13):
        streams.accept(slot, frames[0, t : t + 1])
        streams.decode()
    assert any(h.tokens for h in streams.nbest(slot)) and bool(streams.state.merge_pending[slot])
    streams.close(slot)
    assert streams.open() == slot
    streams.accept(slot, frames[1, :11])
    streams.finish(slot)
    streams.decode()
    assert_same_nbest([streams.close(slot)], offline(model, frames[1:], [11], options, fusions))


def test_a_stream_without_frames_is_the_empty_hypothesis():
    model = model_for("tdt", "lstm", "label_heavy")
    options = AlsdPlusOptions(beam_size=3, nbest=3)
    streams = BeamStreams(model, 2, options, dtype=torch.float64)
    slot = streams.open()
    streams.decode()
    assert not streams.done(slot)  # not finished: more frames may come
    streams.finish(slot)
    streams.decode()
    assert streams.done(slot)
    (empty,) = streams.nbest(slot)
    assert (empty.tokens, empty.score) == ([], 0.0)
    frames, _ = encoder_batch([1], seed=0)
    assert_same_nbest([[empty]], offline(model, frames, [0], options))


def test_slots_and_inputs_are_checked():
    model = model_for("rnnt", "lstm", "label_heavy")
    with pytest.raises(ValueError, match="max_streams"):
        BeamStreams(model, 0)
    streams = BeamStreams(model, 1, dtype=torch.float64)
    slot = streams.open()
    with pytest.raises(ValueError, match="all 1 streams are open"):
        streams.open()
    with pytest.raises(ValueError, match=r"frames must be \[T, D\]"):
        streams.accept(slot, torch.zeros(3))
    streams.finish(slot)
    with pytest.raises(ValueError, match="finished"):
        streams.accept(slot, torch.zeros(1, 16, dtype=torch.float64))
    streams.close(slot)
    for call in (streams.finish, streams.nbest, streams.done, streams.close):
        with pytest.raises(ValueError, match="not open"):
            call(slot)
    with pytest.raises(ValueError, match="not open"):
        streams.accept(slot, torch.zeros(1, 16, dtype=torch.float64))


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("seed", range(2))
def test_a_restarted_segment_is_searched_like_a_new_utterance(kind, seed):
    """After restart(slot), the segment is ALSD++ on the frames from where the best hypothesis stood, timestamps
    counted from the stream's start; position() is where every live hypothesis has got to."""
    model = model_for(kind, "lstm", "label_heavy")
    frames, _ = encoder_batch([30], seed=seed)
    options = AlsdPlusOptions(beam_size=3, nbest=3, max_symbols_per_frame=3)
    fusions = [Fusion(BigramScorer(model.head.num_tokens, seed=seed), 0.5)]
    streams = BeamStreams(model, 2, options, fusions, dtype=torch.float64)
    streams.open()
    slot = streams.open()
    streams.accept(slot, frames[0, :12])
    streams.decode()
    assert streams.position(slot) <= 12
    hyps = streams.state.search.hyps
    start = int(hyps.time[slot, int(hyps.scores[slot].argmax())])
    streams.restart(slot)
    assert streams.best(slot).tokens == [] and streams.position(slot) == min(start, 12)
    streams.accept(slot, frames[0, 12:30])
    streams.finish(slot)
    streams.decode()
    expected = offline(model, frames[:, start:30], [30 - start], options, fusions)[0]
    for hypothesis in expected:
        hypothesis.timestamps = [t + start for t in hypothesis.timestamps]
    assert_same_nbest([streams.nbest(slot)], [expected])


@pytest.mark.parametrize("kind", list(HEADS))
def test_boosted_streams_equal_whole_decoding_with_the_final_bonus(kind):
    """With phrase boosting, a finished stream's n-best is ranked and scored with the bonus of unfinished phrases
    given back, as beam_alsd_pp's; greedy streams equal greedy decoding with the same Boost."""
    from transdec.biasing import Boost, BoostingTree

    model = model_for(kind, "lstm", "label_heavy")
    lengths = [9, 17, 4, 12]
    frames, _ = encoder_batch(lengths, seed=5)
    plain = greedy_label_looping(model, frames, torch.tensor(lengths), max_symbols_per_frame=3)
    # Phrases of the decoded tokens, and each with its last token changed (a match that fails at its end).
    phrases = [(h.tokens[i : i + 3], 1.0) for h in plain.hypotheses() for i in range(0, len(h.tokens) - 2, 2)]
    phrases += [(tokens[:-1] + [(tokens[-1] + 1) % model.head.num_tokens], 1.0) for tokens, _ in phrases]
    boost = Boost(BoostingTree.build([phrases], model.head.num_tokens, dtype=torch.float64), 1.5)
    options = AlsdPlusOptions(beam_size=3, max_symbols_per_frame=3, nbest=3)
    assert_same_nbest(streamed(model, frames, lengths, options, 3, 2, [boost]),
                      offline(model, frames, lengths, options, [boost]))
    expected = greedy_label_looping(model, frames, torch.tensor(lengths), max_symbols_per_frame=3,
                                    fusions=[boost]).hypotheses()
    streams = GreedyStreams(model, 4, GreedyOptions(max_symbols_per_frame=3), [boost], dtype=torch.float64)
    slots = [streams.open() for _ in lengths]
    for slot, length in zip(slots, lengths):
        streams.accept(slot, frames[slot, :length])
        streams.finish(slot)
    streams.decode()
    for slot in slots:
        assert same(streams.close(slot), expected[slot])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", list(HEADS))
def test_streams_on_cuda_equal_whole_decoding_on_the_cpu(kind, tmp_path):
    """float64 on the GPU, alone and with a fused n-gram LM on the GPU: the CPU's n-best lists."""
    model = model_for(kind, "lstm", "label_heavy")
    lengths = [0, 15, 7, 18, 1]
    frames, _ = encoder_batch(lengths, seed=6)
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(random_arpa(model.head.num_tokens, 3, seed=7, missing_tokens=1))
    lm = NGramLM.load(arpa, model.head.num_tokens, dtype=torch.float64)
    gpu_model = copy.deepcopy(model).to("cuda")
    options = AlsdPlusOptions(beam_size=4, nbest=3, max_symbols_per_frame=3)
    for fusions, gpu_fusions in [([], []), ([Fusion(lm, 0.5, token_bonus=0.1)], [Fusion(lm.to("cuda"), 0.5, token_bonus=0.1)])]:
        expected = offline(model, frames, lengths, options, fusions)
        assert_same_nbest(streamed(gpu_model, frames, lengths, options, 6, 3, gpu_fusions, device="cuda"), expected)
