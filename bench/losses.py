"""Forward + backward time of the transdec losses at a training-like size (CPU, or ``--device cuda``).

For RNN-T it also times the same lattice recursion fed by plain autograd normalisation
(``log_softmax`` + ``gather``), to show what the fused normalisation of
:mod:`transdec.losses.lattice` buys, and, for RNN-T and TDT, the lattice recursion alone on given
weights, with its own backward (beta) recursion against autograd through the frame loop. On a GPU,
``--lattices loop kernel`` runs every case with the recursions as frame loops and as Triton kernels
(:mod:`transdec.losses.lattice_kernels`) and prints how far their losses and gradients differ. All run in one
process, interleaved; medians are reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from transdec.losses import multiblank_rnnt_loss, rnnt_loss, tdt_loss
from transdec.losses.lattice import _alphas, _ending, lattice_log_likelihood


def rnnt_plain_autograd(logits, targets, logit_lengths, target_lengths):
    log_probs = logits.log_softmax(dim=-1)
    index = targets.view(targets.shape[0], 1, -1, 1).expand(-1, logits.shape[1], -1, 1)
    tokens = log_probs[:, :, :-1].gather(3, index).squeeze(3)
    blank = log_probs[..., -1]
    return -lattice_log_likelihood({0: tokens}, {1: blank}, logit_lengths, target_lengths).mean()


def lattice_autograd_loop(label_weights, blank_weights, logit_lengths, target_lengths):
    """The forward recursion with autograd recording every operation of the frame loop (the baseline)."""
    return _ending(_alphas(label_weights, blank_weights), blank_weights, logit_lengths, target_lengths)


def lattice_cases(B, T, U, device):
    """(name, loss of weights, weights) for the lattice alone: RNN-T and TDT transition sets."""
    def weights(label_durations, blank_durations):
        return ({d: torch.randn(B, T, U, device=device).log_softmax(-1).requires_grad_() for d in label_durations},
                {d: torch.randn(B, T, U + 1, device=device).log_softmax(-1).requires_grad_() for d in blank_durations})
    lengths = (torch.full((B,), T, device=device), torch.full((B,), U, device=device))
    for kind, (labels, blanks) in {"rnnt": ((0,), (1,)), "tdt": ((0, 1, 2, 3, 4), (1, 2, 3, 4))}.items():
        label_w, blank_w = weights(labels, blanks)
        leaves = [*label_w.values(), *blank_w.values()]
        yield (f"lattice only ({kind}), own backward",
               lambda lw=label_w, bw=blank_w: -lattice_log_likelihood(lw, bw, *lengths).mean(), leaves)
        yield (f"lattice only ({kind}), autograd through the loop",
               lambda lw=label_w, bw=blank_w: -lattice_autograd_loop(lw, bw, *lengths).mean(), leaves)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--frames", type=int, default=100, help="encoder frames (8 s at 80 ms)")
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lattices", nargs="+", choices=["loop", "kernel"], default=["loop"],
                        help="lattice recursions to time (kernel: Triton, CUDA only)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, T, U, V = args.batch, args.frames, args.tokens, args.vocab
    device = torch.device(args.device)
    targets = torch.randint(0, V, (B, U), device=device)
    logit_lengths, target_lengths = torch.full((B,), T, device=device), torch.full((B,), U, device=device)
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
    runs = []  # (name, loss function of no arguments, leaves whose gradients are reset)
    for name, (loss_fn, width) in cases.items():
        logits = torch.randn(B, T, U + 1, width, device=device, requires_grad=True)
        runs.append((name, lambda f=loss_fn, x=logits: f(x), [logits]))
    runs.extend(lattice_cases(B, T, U, device))
    # Autograd through the loop calls the frame loop itself, whatever the setting: timed once.
    runs = [(name, lattice, loss_fn, leaves) for name, loss_fn, leaves in runs for lattice in args.lattices
            if lattice == args.lattices[0] or "through the loop" not in name]
    samples = {(name, lattice): ([], []) for name, lattice, _, _ in runs}
    results = {}  # (name, lattice) -> (loss, gradients) of the last round

    def now() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    for _ in range(args.repeats + 1):  # the first round warms up and is discarded
        for name, lattice, loss_fn, leaves in runs:
            os.environ["TRANSDEC_LATTICE"] = lattice
            start = now()
            loss = loss_fn()
            middle = now()
            loss.backward()
            end = now()
            results[name, lattice] = (loss.detach(), [leaf.grad for leaf in leaves])
            for leaf in leaves:
                leaf.grad = None
            samples[name, lattice][0].append(middle - start)
            samples[name, lattice][1].append(end - middle)
    print(f"# torch {torch.__version__}, {args.device}, {args.threads} thread(s), B={B} T={T} U={U} V={V}, float32, "
          f"median of {args.repeats}")
    print("| loss | forward ms | backward ms | total ms |")
    print("|---|---|---|---|")
    for (name, lattice), (forward, backward) in samples.items():
        f, b = statistics.median(forward[1:]) * 1e3, statistics.median(backward[1:]) * 1e3
        label = f"{name} [{lattice}]" if len(args.lattices) > 1 else name
        print(f"| {label} | {f:.0f} | {b:.0f} | {f + b:.0f} |")
    if len(args.lattices) > 1:
        print("\n| case | loss, kernel vs loop | largest gradient difference |\n|---|---|---|")
        for (name, lattice), (loss, grads) in results.items():
            if lattice == "loop" and (name, "kernel") in results:
                kernel_loss, kernel_grads = results[name, "kernel"]
                difference = max((a - b).abs().max().item() for a, b in zip(grads, kernel_grads))
                print(f"| {name} | {(loss - kernel_loss).abs().item():.2e} | {difference:.2e} |")


if __name__ == "__main__":
    main()
