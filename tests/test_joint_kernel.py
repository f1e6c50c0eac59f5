"""The joint kernel (:mod:`transdec.decoding.cuda.joint_kernel`) against ``Joint.combine``, on the CPU through
Triton's interpreter: every activation, float64 / float32 / float16, greedy rows and beam groups, windows that run
past the last frame, sizes that fill no block; in-place greedy label-looping with a fusion and the in-place beam
searches with it against eager decoding (the fused greedy path with it: tests/test_label_looping_graphs.py); its
fallback when it fails; and a CUDA test.

``TRITON_INTERPRET`` must be set before Triton is first imported, so the comparison runs in a child process.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from transdec.decoding.cuda import joint_kernel
from transdec.decoding.cuda.joint_kernel import fused_layer
from transdec.model.joint import JointNetwork
from transdec.protocol import DenseJoint, HeadSpec

CHECK = textwrap.dedent("""
    import itertools
    import torch
    from transdec.decoding.cuda.joint_kernel import fused_layer, joint_logits
    from transdec.model.joint import JointNetwork
    from transdec.protocol import HeadSpec

    # Relative error allowed per dtype (the logits are O(1)): a few roundings of a sum over J products.
    TOLERANCE = {torch.float64: 1e-14, torch.float32: 1e-6, torch.float16: 5e-3}
    # batch B, hypotheses per utterance G, window W, frames T, joint width J
    SHAPES = [(1, 1, 1, 5, 16), (5, 1, 4, 9, 40), (3, 4, 1, 7, 70), (17, 1, 1, 3, 33), (2, 4, 3, 1, 8),
              (20, 1, 4, 6, 24), (40, 4, 1, 6, 20)]  # the last two: 80 and 160 rows, the wider blocks
    heads = [HeadSpec("rnnt", 40), HeadSpec("tdt", 9, durations=(0, 1, 2)),
             HeadSpec("multiblank", 70, big_blank_durations=(2, 4))]
    cases = 0
    for activation, dtype, bias, (batch, group, window, frames, width) in itertools.product(
            ["relu", "tanh", "sigmoid"], TOLERANCE, [True, False], SHAPES):
        head = heads[cases % len(heads)]  # output widths 41, 13, 73
        torch.manual_seed(cases)
        joint = JointNetwork(12, 10, width, head, activation=activation).eval()
        if not bias:
            joint.output.bias = None
        joint = joint.to(dtype)
        encoder_proj = torch.randn(batch, frames, width, dtype=dtype)
        predictor_proj = torch.randn(batch * group, width, dtype=dtype)
        time = torch.randint(0, frames + 2, (batch * group,))  # some past the end: they read the last frame
        got = joint_logits(fused_layer(joint, encoder_proj.device), encoder_proj, predictor_proj, time, window)
        frame_index = (time[:, None] + torch.arange(window)).clamp(max=frames - 1)
        rows = (torch.arange(batch * group) // group)[:, None]
        if dtype == torch.float16:  # PyTorch's CPU half products: compare with float32 on the half inputs
            want = joint.float().combine(encoder_proj.float()[rows, frame_index], predictor_proj.float()[:, None])
        else:
            want = joint.combine(encoder_proj[rows, frame_index], predictor_proj[:, None])
        assert got.shape == want.shape and got.dtype == dtype, (got.shape, want.shape, got.dtype)
        error = ((got.to(want.dtype) - want).abs() / (1 + want.abs())).max().item()
        assert error < TOLERANCE[dtype], (activation, dtype, bias, batch, group, window, frames, width, error)
        cases += 1
    empty = joint_logits(fused_layer(joint, torch.device("cpu")), encoder_proj[:0], predictor_proj[:0], time[:0], 2)
    assert empty.shape == (0, 2, head.num_outputs)
    print("ok", cases)
""")


BEAM_CHECK = textwrap.dedent("""
    import itertools
    import torch
    from helpers import HEADS, encoder_batch, model_for, same
    from transdec.decoding.beam.aes_pp import AesOptions, AesSearch, beam_aes_pp
    from transdec.decoding.beam.alsd_pp import AlsdPlusOptions, AlsdSearch, beam_alsd_pp
    from transdec.decoding.beam.wind_batched import WindBatchedOptions, WindSearch, beam_wind_batched
    from transdec.decoding.scoring import Scoring

    SEARCHES = {"alsd": (AlsdSearch, AlsdPlusOptions, beam_alsd_pp, {}),
                "aes": (AesSearch, AesOptions, beam_aes_pp, {}),
                "wind": (WindSearch, WindBatchedOptions, beam_wind_batched, {"window_size": 3})}
    cases = 0
    with torch.inference_mode():
        for name, kind, predictor, beam_size in itertools.product(SEARCHES, HEADS, ["lstm", "stateless"], [1, 3]):
            if name == "wind" and kind != "rnnt":  # WIND beam search is for RNN-T heads
                continue
            search_class, options_class, default_search, extra = SEARCHES[name]
            model = model_for(kind, predictor, "label_heavy")
            frames, lengths = encoder_batch([0, 1, 14, 9], seed=cases)  # NaN padding: a read of it would show
            options = options_class(beam_size=beam_size, nbest=beam_size, max_symbols_per_frame=3, **extra)
            search = search_class(model, frames, lengths, options, Scoring(model.head), in_place=True)
            assert search.joint_layer is not None
            search.run()
            got = search.result().nbest
            expected = default_search(model, frames, lengths, options).nbest
            assert [len(n) for n in got] == [len(n) for n in expected]
            for a, b in zip(sum(got, []), sum(expected, [])):
                assert same(a, b) and abs(a.am_score - b.am_score) < 1e-9, (name, kind, predictor, beam_size)
            cases += 1
    print("ok", cases)
""")


GREEDY_CHECK = textwrap.dedent("""
    import itertools
    import torch
    from helpers import HEADS, BigramScorer, assert_same_hypotheses, encoder_batch, model_for
    from transdec.decoding import Fusion, greedy_label_looping
    from transdec.decoding.greedy.label_looping import LabelLoopingSearch
    from transdec.decoding.scoring import Scoring

    cases = 0
    for kind, predictor, window in itertools.product(HEADS, ["lstm", "stateless"], [1, 4]):
        model = model_for(kind, predictor, "label_heavy")
        frames, lengths = encoder_batch([0, 1, 14, 9, 3], seed=cases)
        fusions = [Fusion(BigramScorer(HEADS[kind].num_tokens, seed=cases), 0.8, token_bonus=0.1,
                          blank_scoring=kind != "multiblank")]
        search = LabelLoopingSearch(model, frames, lengths, 3, window, in_place=True,
                                    scoring=Scoring(model.head, fusions))
        assert search.skipper.joint_layer is not None
        search.run()
        expected = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3, fusions=fusions)
        assert_same_hypotheses(search.result().hypotheses(), expected.hypotheses())
        cases += 1
    print("ok", cases)
""")


def run_interpreted(check: str) -> str:
    """Run ``check`` in a child process with Triton's interpreter on; returns its output."""
    pytest.importorskip("triton")
    tests = os.path.dirname(__file__)
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRANSDEC_JOINT_KERNEL": "1",
           "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", check], cwd=tests, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_joint_kernel_equals_combine():
    assert run_interpreted(CHECK).startswith("ok 126")


def test_in_place_greedy_with_a_fusion_and_the_joint_kernel_equals_eager_decoding():
    """Label-looping in place with a fusion (graphs without the fused search-pass kernels) still takes the joint
    from the kernel, at every window."""
    assert run_interpreted(GREEDY_CHECK).startswith("ok 12")


def test_in_place_beam_searches_with_the_joint_kernel_equal_the_default_search():
    """ALSD++, AES++ and WIND beam in place (as their CUDA graphs run them) take the joint from the kernel: beams
    grouped per utterance, at their own frames (ALSD++), at the utterance's frame (AES++), over a window (WIND)."""
    assert run_interpreted(BEAM_CHECK).startswith("ok 28")


def test_only_described_joints_on_a_device_with_triton(monkeypatch):
    joint = JointNetwork(4, 4, 8, HeadSpec("rnnt", 5), activation="tanh")
    assert isinstance(joint, DenseJoint)
    layer = joint.output_layer()
    assert (layer.activation, layer.weight, layer.bias) == ("tanh", joint.output.weight, joint.output.bias)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert fused_layer(joint, torch.device("cpu")) is None  # a CPU runs it only through the interpreter
    monkeypatch.setenv("TRITON_INTERPRET", "1")

    class Opaque:  # a joint that does not say what its combine computes (an ONNX export, say)
        pass

    assert fused_layer(Opaque(), torch.device("cpu")) is None
    joint.activation = "gelu"  # no such activation in the kernel
    assert fused_layer(joint, torch.device("cpu")) is None
    monkeypatch.setenv("TRANSDEC_JOINT_KERNEL", "0")
    joint.activation = "relu"
    assert fused_layer(joint, torch.device("cpu")) is None


@pytest.mark.parametrize("failure", ["raises", "wrong"])
def test_a_kernel_that_fails_its_check_is_not_used(failure, monkeypatch):
    """A Triton that cannot compile the kernel for a dtype, or computes it wrongly, costs a warning, not a decode."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv("TRANSDEC_JOINT_KERNEL", raising=False)
    monkeypatch.setattr(joint_kernel, "_CHECKED", {})

    def broken(layer, encoder_proj, predictor_proj, time, window=1):
        if failure == "raises":
            raise RuntimeError("PassManager::run failed")
        return torch.zeros(time.numel(), window, layer.weight.shape[0])

    monkeypatch.setattr(joint_kernel, "joint_logits", broken)
    joint = JointNetwork(4, 4, 8, HeadSpec("rnnt", 5))
    with pytest.warns(RuntimeWarning, match="joint kernel does not work for torch.float32"):
        assert fused_layer(joint, torch.device("cpu")) is None
    assert fused_layer(joint, torch.device("cpu")) is None  # checked once


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch, group, window", [(1, 1, 1), (32, 1, 1), (128, 1, 8), (32, 4, 1)])
def test_joint_kernel_on_cuda_equals_combine(dtype, batch, group, window):
    """A parakeet-sized joint (640 wide, 1,025 outputs) in every dtype a search runs it in."""
    device = torch.device("cuda")
    joint = JointNetwork(1024, 640, 640, HeadSpec("rnnt", 1024)).to(device, dtype).eval()
    layer = fused_layer(joint, device)
    assert layer is not None
    generator = torch.Generator().manual_seed(batch + window)
    encoder_proj = torch.randn(batch, 50, 640, generator=generator).to(device, dtype)
    predictor_proj = torch.randn(batch * group, 640, generator=generator).to(device, dtype)
    time = torch.randint(0, 52, (batch * group,), generator=generator).to(device)
    got = joint_kernel.joint_logits(layer, encoder_proj, predictor_proj, time, window)
    frames = encoder_proj[(torch.arange(batch * group, device=device) // group)[:, None],
                          (time[:, None] + torch.arange(window, device=device)).clamp(max=49)]
    with torch.inference_mode():
        want = joint.double().combine(frames.double(), predictor_proj.double()[:, None])
    tolerance = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 5e-2}[dtype]
    assert ((got.double() - want).abs() / (1 + want.abs())).max().item() < tolerance
