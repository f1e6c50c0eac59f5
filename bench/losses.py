"""Forward + backward time of the transdec losses at a training-like size, on CPU.

For RNN-T it also times the same lattice recursion fed by plain autograd normalisation
(``log_softmax`` + ``gather``), to show what the fused normalisation of
:mod:`transdec.losses.lattice` buys. Both run in one process, interleaved; medians are reported.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from transdec.losses import multiblank_rnnt_loss, rnnt_loss, tdt_loss
from transdec.losses.lattice import lattice_log_likelihood


def rnnt_plain_autograd(logits, targets, logit_lengths, target_lengths):
    log_probs = logits.log_softmax(dim=-1)
    index = targets.view(targets.shape[0], 1, -1, 1).expand(-1, logits.shape[1], -1, 1)
    tokens = log_probs[:, :, :-1].gather(3, index).squeeze(3)
    blank = log_probs[..., -1]
    return -lattice_log_likelihood({0: tokens}, {1: blank}, logit_lengths, target_lengths).mean()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--frames", type=int, default=100, help="encoder frames (8 s at 80 ms)")
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, T, U, V = args.batch, args.frames, args.tokens, args.vocab
    targets = torch.randint(0, V, (B, U))
    logit_lengths, target_lengths = torch.full((B,), T), torch.full((B,), U)
    cases = {
        "rnnt": (lambda x: rnnt_loss(x, targets, logit_lengths, target_lengths), V + 1),
        "rnnt, plain autograd normalisation": (
            lambda x: rnnt_plain_autograd(x, targets, logit_lengths, target_lengths),
            V + 1,
        ),
        "multiblank (2,4,8), sigma 0.05": (
            lambda x: multiblank_rnnt_loss(x, targets, logit_lengths, target_lengths, (2, 4, 8), 0.05),
            V + 4,
        ),
        "tdt (0..4), sigma 0.05": (
            lambda x: tdt_loss(x, targets, logit_lengths, target_lengths, (0, 1, 2, 3, 4), 0.05),
            V + 6,
        ),
    }
    logits = {name: torch.randn(B, T, U + 1, width, requires_grad=True) for name, (_, width) in cases.items()}
    samples = {name: ([], []) for name in cases}
    for _ in range(args.repeats + 1):  # the first round warms up and is discarded
        for name, (loss_fn, _) in cases.items():
            start = time.perf_counter()
            loss = loss_fn(logits[name])
            middle = time.perf_counter()
            loss.backward()
            end = time.perf_counter()
            logits[name].grad = None
            samples[name][0].append(middle - start)
            samples[name][1].append(end - middle)
    print(f"# torch {torch.__version__}, {args.threads} thread(s), B={B} T={T} U={U} V={V}, float32, median of {args.repeats}")
    print("| loss | forward ms | backward ms | total ms |")
    print("|---|---|---|---|")
    for name, (forward, backward) in samples.items():
        f, b = statistics.median(forward[1:]) * 1e3, statistics.median(backward[1:]) * 1e3
        print(f"| {name} | {f:.0f} | {b:.0f} | {f + b:.0f} |")


if __name__ == "__main__":
    main()
