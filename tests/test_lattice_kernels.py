"""The Triton lattice kernels (CUDA training) against the reference frame loops, on CPU through Triton's
interpreter: losses and gradients of every head, full and pruned, in float64 and float32.

``TRITON_INTERPRET`` must be set before Triton is first imported, so the comparison runs in a child process.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

CHECK = textwrap.dedent("""
    import os
    import torch
    from helpers import LOSS_HEADS, random_loss_problem, sigma_of
    from transdec.losses import lattice_kernels, transducer_loss
    from transdec.losses.pruned import pruned_transducer_loss

    calls = []
    original = lattice_kernels.alphas
    lattice_kernels.alphas = lambda *a: calls.append(1) or original(*a)

    def losses_and_grads(head, dtype, pruned, seed):
        # Padding of every kind: the longest utterance, shorter ones, one frame, no tokens.
        frames, targets = (9, 7, 1, 4, 2), (5, 4, 0, 0, 2)
        joint, simple, encoder_out, predictor_out, labels, frame_counts, target_counts = random_loss_problem(
            head, frames, targets, seed)
        joint, simple = joint.to(dtype), simple.to(dtype)
        encoder_out = encoder_out.to(dtype).requires_grad_()
        predictor_out = predictor_out.to(dtype).requires_grad_()
        if pruned:
            loss, simple_loss = pruned_transducer_loss(
                head, joint, encoder_out, predictor_out, *simple(encoder_out, predictor_out), labels,
                frame_counts, target_counts, 3, sigma=sigma_of(head), reduction="none")
            loss = loss + simple_loss
        else:
            loss = transducer_loss(head, joint(encoder_out, predictor_out), labels, frame_counts, target_counts,
                                   sigma=sigma_of(head), reduction="none")
        grads = torch.autograd.grad(loss.sum(), (encoder_out, predictor_out))
        return [loss.detach(), *grads]

    for head in LOSS_HEADS:
        for dtype, tolerance in ((torch.float64, 1e-11), (torch.float32, 2e-4)):
            for pruned in (False, True):
                for seed in range(2):
                    results = {}
                    for mode in ("loop", "kernel"):
                        os.environ["TRANSDEC_LATTICE"] = mode
                        results[mode] = losses_and_grads(head, dtype, pruned, seed)
                    (loop_loss, *loop_grads), (kernel_loss, *kernel_grads) = results.values()
                    # An impossible utterance (TDT without duration 0, too many tokens) costs ~1e30 either way.
                    impossible = loop_loss > 1e29
                    assert torch.equal(impossible, kernel_loss > 1e29), (head, dtype, pruned, seed)
                    loop_loss, kernel_loss = loop_loss[~impossible], kernel_loss[~impossible]
                    for name, a, b in zip(("loss", "encoder grad", "predictor grad"), (loop_loss, *loop_grads),
                                          (kernel_loss, *kernel_grads)):
                        scale = max(1.0, a.abs().max().item())
                        error = (a - b).abs().max().item() / scale
                        assert error < tolerance, (head, dtype, pruned, seed, name, error)
    assert calls, "the kernels were never used"
    print("ok", len(calls))
""")


def test_kernels_match_the_frame_loops():
    tests = os.path.dirname(__file__)
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=tests, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok")
