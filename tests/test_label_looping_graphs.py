"""Label-looping as CUDA graphs run it: in-place steps on the CPU, and every graph mode on a GPU.

The CPU tests run the exact code that the graphs capture (``LabelLoopingSearch(in_place=True)``, in the
order each mode replays it) against the per-utterance reference. The CUDA tests (skipped without a GPU)
check each graph mode against the reference and eager decoding on the device.
"""

import copy
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from helpers import HEADS, MATRIX, assert_same_hypotheses, encoder_batch, model_for

from transdec.decoding import DecodingConfig, decode, greedy_label_looping, greedy_reference
from transdec.decoding.greedy.label_looping import LabelLoopingSearch
from transdec.decoding.cuda.graph_cache import FAILED_MODES, CudaGraphFallbackWarning
from transdec.decoding.greedy.label_looping_graphs import run_step_pieces, step_pieces
from transdec.model.synthetic import random_decoder, random_encoder_output

batches = st.lists(st.integers(min_value=0, max_value=24), min_size=1, max_size=16)


def decode_in_place(model, frames, lengths, max_symbols, window, order):
    search = LabelLoopingSearch(model, frames, lengths, max_symbols, window, in_place=True)
    if order == "loops":
        search.run()
    else:  # the replay order of step_graphs, with its extra steps after the last label
        run_step_pieces(search, *step_pieces(search))
    return search.result()


@pytest.mark.parametrize("kind, predictor, profile, max_symbols", MATRIX)
@settings(max_examples=4)
@given(lengths=batches, seed=st.integers(0, 2**16), window=st.sampled_from([1, 3, 8]),
       order=st.sampled_from(["loops", "step_graphs"]))
@example(lengths=[0, 1, 24, 0, 1, 13, 7, 24], seed=1, window=1, order="step_graphs")
@example(lengths=[0, 0], seed=1, window=1, order="loops")
def test_in_place_steps_equal_reference(kind, predictor, profile, max_symbols, lengths, seed, window, order):
    model = model_for(kind, predictor, profile)
    frames, lengths_tensor = encoder_batch(lengths, seed)
    expected = greedy_reference(model, frames, lengths_tensor, max_symbols_per_frame=max_symbols).hypotheses()
    result = decode_in_place(model, frames, lengths_tensor, max_symbols, window, order)
    assert_same_hypotheses(result.hypotheses(), expected)
    eager = greedy_label_looping(model, frames, lengths_tensor, max_symbols_per_frame=max_symbols, window_size=window)
    assert (result.stats.predictor_calls, result.stats.joint_calls) == (
        eager.stats.predictor_calls, eager.stats.joint_calls
    )


def test_in_place_steps_reuse_their_buffers_for_new_inputs():
    """What graph replay relies on: the same search object, new values in its input tensors."""
    model = model_for("tdt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([24] * 6, seed=0)
    search = LabelLoopingSearch(model, frames.clone(), lengths.clone(), 3, 4, in_place=True)
    for seed in range(3):
        new_frames, new_lengths = encoder_batch([24, 3, 0, 17, 24, 9], seed=seed)
        search.encoder_out.copy_(new_frames)
        search.lengths.copy_(new_lengths)
        search.run()
        expected = greedy_reference(model, new_frames, new_lengths, max_symbols_per_frame=3).hypotheses()
        assert_same_hypotheses(search.result().hypotheses(), expected)


def test_in_place_steps_need_a_symbol_limit():
    model = model_for("rnnt", "lstm", "blank_heavy")
    frames, lengths = encoder_batch([5], seed=0)
    with pytest.raises(ValueError, match="max_symbols_per_frame"):
        LabelLoopingSearch(model, frames, lengths, None, 1, in_place=True)


def test_graph_modes_are_ignored_on_the_cpu():
    model = model_for("rnnt", "lstm", "blank_heavy")
    frames, lengths = encoder_batch([5, 9], seed=0)
    expected = greedy_reference(model, frames, lengths).hypotheses()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for mode in ("auto", "while_loops", "step_graphs", "off"):
            result = decode(model, frames, lengths, DecodingConfig(cuda_graphs=mode))
            assert_same_hypotheses(result.hypotheses(), expected)
    with pytest.raises(ValueError, match="cuda_graphs"):
        DecodingConfig(cuda_graphs="always")


FUSED_CHECK = textwrap.dedent("""
    import itertools
    import os
    from helpers import HEADS, assert_same_hypotheses, encoder_batch, model_for
    from transdec.decoding import greedy_reference
    from transdec.decoding.greedy.label_looping import LabelLoopingSearch
    from transdec.decoding.greedy.label_looping_graphs import run_step_pieces, step_pieces

    cases = 0
    for kind, predictor, window in itertools.product(HEADS, ["lstm", "stateless"], [1, 4]):
        model = model_for(kind, predictor, "label_heavy")
        for seed, lengths in enumerate([[0, 1, 24, 0, 1, 13, 7, 24], [9]]):
            # The first batch with the joint kernel (joint_kernel), the second with PyTorch's joint.
            os.environ["TRANSDEC_JOINT_KERNEL"] = str(1 - seed)
            frames, lengths_tensor = encoder_batch(lengths, seed)
            expected = greedy_reference(model, frames, lengths_tensor, max_symbols_per_frame=3).hypotheses()
            search = LabelLoopingSearch(model, frames, lengths_tensor, 3, window, in_place=True, fused=True)
            run_step_pieces(search, *step_pieces(search)) if seed == 0 else search.run()
            assert_same_hypotheses(search.result().hypotheses(), expected)
            cases += 1
    print("ok", cases)
""")


def test_fused_kernels_equal_reference():
    """The Triton kernels of greedy_kernels and joint_kernel, through Triton's interpreter (set before Triton's
    first import, hence a child process)."""
    pytest.importorskip("triton")
    tests = os.path.dirname(__file__)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", FUSED_CHECK], cwd=tests, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok 24")


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True)
def forget_failed_modes():
    """Each test finds out for itself whether a mode works (decoding remembers failures per process)."""
    FAILED_MODES.clear()
    yield
GPU_CASES = [(kind, predictor, window) for kind in HEADS for predictor in ("lstm", "stateless") for window in (1, 4)]


@cuda
@pytest.mark.parametrize("kernels", ["fused", "plain"])
@pytest.mark.parametrize("mode", ["while_loops", "step_graphs", "off"])
@pytest.mark.parametrize("kind, predictor, window", GPU_CASES)
def test_graph_modes_equal_reference_on_cuda(mode, kind, predictor, window, kernels, monkeypatch):
    if kernels == "plain":
        monkeypatch.setenv("TRANSDEC_GREEDY_KERNELS", "0")
    elif mode == "off":
        pytest.skip("eager decoding does not use the kernels")
    model = copy.deepcopy(model_for(kind, predictor, "label_heavy")).to("cuda")
    config = DecodingConfig(cuda_graphs=mode, window_size=window, max_symbols_per_frame=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphFallbackWarning)  # the mode asked for is the mode that ran
        for seed, lengths in enumerate([[24] * 8, [0, 1, 24, 0, 1, 13, 7, 24], [1], [70, 3, 64, 65]]):
            frames, lengths_tensor = encoder_batch(lengths, seed)
            expected = greedy_reference(model, frames.cuda(), lengths_tensor.cuda(), 3).hypotheses()
            result = decode(model, frames.cuda(), lengths_tensor.cuda(), config)
            assert_same_hypotheses(result.hypotheses(), expected)


@cuda
def test_graphs_follow_weight_updates():
    model = random_decoder(HEADS["rnnt"], num_layers=2, blank_rate=0.6, seed=3, dtype=torch.float64).cuda()
    frames, lengths = random_encoder_output([20, 12], 16, seed=1, dtype=torch.float64)
    frames, lengths = frames.cuda(), lengths.cuda()
    config = DecodingConfig(cuda_graphs="auto")
    decode(model, frames, lengths, config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(-1.5)
    expected = greedy_reference(model, frames, lengths).hypotheses()
    assert_same_hypotheses(decode(model, frames, lengths, config).hypotheses(), expected)


@cuda
def test_lower_precision_under_graphs_matches_eager():
    """bfloat16 logits tie more often; the fused kernels and PyTorch may break a tie differently."""
    model = random_decoder(HEADS["tdt"], num_layers=2, blank_rate=0.6, seed=3).cuda()
    frames, lengths = random_encoder_output([40] * 16, 16, seed=1)
    frames, lengths = frames.cuda(), lengths.cuda()
    eager = decode(model, frames, lengths, DecodingConfig(cuda_graphs="off", compute_dtype=torch.bfloat16))
    graphed = decode(model, frames, lengths, DecodingConfig(compute_dtype=torch.bfloat16))
    assert graphed.hyps.scores.dtype == torch.float32
    assert sum(a.tokens == b.tokens for a, b in zip(eager.hypotheses(), graphed.hypotheses())) >= 14
