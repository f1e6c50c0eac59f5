"""The lattice's forward (alpha) and backward (beta) recursions as Triton kernels, for CUDA tensors.

:mod:`transdec.losses.lattice` runs each recursion as a Python loop over frames of a dozen small tensor
operations. On a GPU every one of them is a kernel launch, and a training step with the pruned loss runs six
such loops: for a batch of 40 s rows, tens of thousands of launches, which kept the GPU 4-35% busy
(``docs/benchmarks.md``). Here each recursion is one launch: one program per utterance walks the frames
in order, holding a frame's lattice rows ``u`` in one vector, and writes each frame before the next one
reads it. The arithmetic is the same as the loops' (same transitions, same cumulative log-sum-exp for the
chain of duration-0 labels within a frame), so results agree to rounding.

Used when Triton is importable and the weights are on a CUDA device, unless ``TRANSDEC_LATTICE=loop`` is set
(the reference loops, for comparisons). ``TRITON_INTERPRET=1`` runs the kernels on CPU tensors, slowly,
which is how the tests check them on a machine without a GPU.
"""

from __future__ import annotations

import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU wheels of torch come without Triton
    triton = None

IMPOSSIBLE = -1.0e30  # as in transdec.losses.lattice (not imported from there: that module imports this one)


def kernels_apply(reference: torch.Tensor) -> bool:
    """Whether the recursions over weights like ``reference`` run as kernels here."""
    if triton is None or os.environ.get("TRANSDEC_LATTICE") == "loop":
        return False
    return reference.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _kernel_arguments(label_weights: dict[int, torch.Tensor], blank_weights: dict[int, torch.Tensor]
                      ) -> tuple[list[torch.Tensor], dict[str, int]]:
    """The weights stacked per kind (``[N, B, T, U]`` labels, ``[N, B, T, U + 1]`` blanks) with their
    durations, and the launch options that both kernels share."""
    reference = next(iter(blank_weights.values()))
    batch_size, max_time, positions = reference.shape
    labels = (torch.stack([w.contiguous() for w in label_weights.values()]) if label_weights
              else reference.new_zeros(1, batch_size, max_time, positions - 1))  # never read
    blanks = torch.stack([w.contiguous() for w in blank_weights.values()])
    durations = [torch.tensor(list(weights) or [0], dtype=torch.int32, device=reference.device)
                 for weights in (label_weights, blank_weights)]
    block = triton.next_power_of_2(max(positions, 2))
    options = dict(NUM_LABELS=len(label_weights), NUM_BLANKS=len(blank_weights),
                   SAME_FRAME=list(label_weights).index(0) if 0 in label_weights else -1, BLOCK=block,
                   num_warps=max(1, min(8, block // 64)))
    return [labels, blanks, *durations], options


def alphas(label_weights: dict[int, torch.Tensor], blank_weights: dict[int, torch.Tensor]) -> torch.Tensor:
    """``[B, T, U + 1]`` forward variables; the same contract as ``lattice._alphas``."""
    reference = next(iter(blank_weights.values()))
    weights, options = _kernel_arguments(label_weights, blank_weights)
    alpha = torch.empty_like(reference)
    _alpha_kernel[(reference.shape[0],)](*weights, alpha, *reference.shape, **options)
    return alpha


def betas(label_weights: dict[int, torch.Tensor], blank_weights: dict[int, torch.Tensor], to_label: torch.Tensor,
          to_blank: torch.Tensor, logit_lengths: torch.Tensor) -> None:
    """Fill frames ``t < T_b`` of ``to_label`` and ``to_blank`` (``[B, T + longest + 1, U + 1]``, set up by
    ``lattice._betas`` past each utterance's end) in place; the same recursion as ``lattice._betas``."""
    reference = next(iter(blank_weights.values()))
    weights, options = _kernel_arguments(label_weights, blank_weights)
    _beta_kernel[(reference.shape[0],)](*weights, to_label, to_blank, logit_lengths.to(torch.int32).contiguous(),
                                        *reference.shape, to_label.shape[1], **options)


if triton is not None:

    _IMPOSSIBLE: tl.constexpr = tl.constexpr(IMPOSSIBLE)

    @triton.jit
    def _log_add_exp(a, b):
        top = tl.maximum(a, b)
        return top + tl.log(1.0 + tl.exp(tl.minimum(a, b) - top))

    # Sizes are plain arguments, not specialisations: Triton would otherwise compile a variant for each pattern
    # of sizes divisible by 16 (or equal to 1), and training batches come in all sizes.
    @triton.jit(do_not_specialize=["batch_size", "max_time", "positions"])
    def _alpha_kernel(labels, blanks, label_durations, blank_durations, alpha, batch_size, max_time, positions,
                      NUM_LABELS: tl.constexpr, NUM_BLANKS: tl.constexpr, SAME_FRAME: tl.constexpr,
                      BLOCK: tl.constexpr):
        b = tl.program_id(0)
        u = tl.arange(0, BLOCK)
        in_row = u < positions
        has_label = in_row & (u >= 1)  # rows reached by a label (from row u - 1)
        label_row = tl.maximum(u - 1, 0)
        no_offset = u * 0  # masks built from vectors only (Triton's interpreter rejects a scalar broadcast in one)
        label_stride = batch_size * max_time * (positions - 1)
        blank_stride = batch_size * max_time * positions
        row_base = b * max_time * positions
        for t in range(0, max_time):
            total = tl.where((u == 0) & (t == 0), 0.0, _IMPOSSIBLE).to(alpha.dtype.element_ty)
            for i in tl.static_range(NUM_BLANKS):
                source = t - tl.load(blank_durations + i)
                ok = in_row & (no_offset + source >= 0)
                offset = row_base + source * positions + u
                term = (tl.load(alpha + offset, mask=ok, other=_IMPOSSIBLE)
                        + tl.load(blanks + i * blank_stride + offset, mask=ok, other=_IMPOSSIBLE))
                total = _log_add_exp(total, term)
            for i in tl.static_range(NUM_LABELS):
                duration = tl.load(label_durations + i)
                if duration > 0:
                    source = t - duration
                    ok = has_label & (no_offset + source >= 0)
                    term = (tl.load(alpha + row_base + source * positions + label_row, mask=ok, other=_IMPOSSIBLE)
                            + tl.load(labels + i * label_stride + (b * max_time + source) * (positions - 1)
                                      + label_row, mask=ok, other=_IMPOSSIBLE))
                    total = _log_add_exp(total, term)
            if SAME_FRAME >= 0:
                # alpha(t, u) = c(u) + logcumsumexp_{u' <= u}(total(u') - c(u')), c(u) the chained label weights
                steps = tl.load(labels + SAME_FRAME * label_stride + (b * max_time + t) * (positions - 1)
                                + label_row, mask=has_label, other=0.0)
                chain = tl.cumsum(steps, 0)
                shifted = tl.where(in_row, total - chain, _IMPOSSIBLE)
                total = chain + tl.associative_scan(shifted, 0, _log_add_exp)
            tl.store(alpha + row_base + t * positions + u, total, mask=in_row)
            tl.debug_barrier()  # the next frame reads what every thread of this one wrote

    @triton.jit(do_not_specialize=["batch_size", "max_time", "positions", "beta_frames"])
    def _beta_kernel(labels, blanks, label_durations, blank_durations, to_label, to_blank, logit_lengths,
                     batch_size, max_time, positions, beta_frames, NUM_LABELS: tl.constexpr,
                     NUM_BLANKS: tl.constexpr, SAME_FRAME: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0)
        u = tl.arange(0, BLOCK)
        in_row = u < positions
        emits = u < positions - 1  # rows that can emit a label (to row u + 1)
        label_stride = batch_size * max_time * (positions - 1)
        blank_stride = batch_size * max_time * positions
        beta_base = b * beta_frames * positions
        frames = tl.load(logit_lengths + b)
        for step in range(0, frames):
            t = frames - 1 - step
            total = tl.full((BLOCK,), _IMPOSSIBLE, dtype=to_label.dtype.element_ty)
            for i in tl.static_range(NUM_BLANKS):
                duration = tl.load(blank_durations + i)
                term = (tl.load(blanks + i * blank_stride + (b * max_time + t) * positions + u, mask=in_row,
                                other=_IMPOSSIBLE)
                        + tl.load(to_blank + beta_base + (t + duration) * positions + u, mask=in_row,
                                  other=_IMPOSSIBLE))
                total = _log_add_exp(total, term)
            for i in tl.static_range(NUM_LABELS):
                duration = tl.load(label_durations + i)
                if duration > 0:
                    term = (tl.load(labels + i * label_stride + (b * max_time + t) * (positions - 1) + u,
                                    mask=emits, other=_IMPOSSIBLE)
                            + tl.load(to_label + beta_base + (t + duration) * positions + u + 1, mask=emits,
                                      other=_IMPOSSIBLE))
                    total = _log_add_exp(total, term)
            if SAME_FRAME >= 0:
                # beta(t, u) = -c(u) + log sum_{u' >= u} exp(c(u') + total(u'))
                steps = tl.load(labels + SAME_FRAME * label_stride + (b * max_time + t) * (positions - 1) + u - 1,
                                mask=in_row & (u >= 1), other=0.0)
                chain = tl.cumsum(steps, 0)
                shifted = tl.where(in_row, chain + total, _IMPOSSIBLE)
                total = tl.associative_scan(shifted, 0, _log_add_exp, reverse=True) - chain
            offset = beta_base + t * positions + u
            tl.store(to_label + offset, total, mask=in_row)
            tl.store(to_blank + offset, total, mask=in_row)
            tl.debug_barrier()  # the next (earlier) frame reads what every thread of this one wrote
