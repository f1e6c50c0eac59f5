"""Pruned Transducer loss: the joint network evaluated only on a narrow band of the lattice.

In a training step the joint over the whole lattice, ``[B, T, U + 1, C]``, and the loss on it cost about as
much as the encoder (``docs/benchmarks.md``). The pruned loss (the idea of k2's pruned RNN-T, Kuang et al.
2022) computes instead:

1. a **simple loss**: the RNN-T loss of a trivial joint whose logits are the sum of a linear map of the
   encoder frame and one of the predictor output, ``[B, T, V + 1] + [B, U + 1, V + 1]``. Its normaliser over
   the vocabulary is one batched matrix product, so the whole loss costs about as much as a ``[B, T, U + 1]``
   tensor;
2. from the simple lattice's occupation probabilities, for every frame ``t`` the first row ``s_t`` of a band
   of ``prune_range`` rows ``[s_t, s_t + S)`` that holds most of the alignment mass (:func:`prune_ranges`);
3. the real joint only at those points, ``[B, T, S, C]``, and the head's own loss (RNN-T, multi-blank or
   TDT, with its under-normalisation) on the lattice with every point outside the band impossible.

The pruned loss sums over a subset of the paths, so it is never below the full loss, and equals it when the
band covers every row. The simple loss is an RNN-T loss whatever the head: it only places the bands (and
trains its two projections, :class:`~transdec.model.joint.SimpleJoint`); a band that lets an RNN-T path
through also lets one through for multi-blank, and for TDT with durations 0 and 1, whose transitions include
RNN-T's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from transdec.losses.lattice import (IMPOSSIBLE, LatticeWeights, full_lattice_log_likelihood, reduce_losses,
                                     target_columns)
from transdec.losses.multiblank import multiblank_weights
from transdec.losses.rnnt import rnnt_weights
from transdec.losses.tdt import tdt_weights
from transdec.protocol import HeadSpec, Joint


def head_weights(head: HeadSpec, logits: torch.Tensor, point_targets: torch.Tensor, sigma: float) -> LatticeWeights:
    """The transition log-weights of ``head`` at lattice points (``logits [B, T, P, C]``)."""
    if head.kind == "rnnt":
        return rnnt_weights(logits, point_targets)
    if head.kind == "multiblank":
        return multiblank_weights(logits, point_targets, head.big_blank_durations, sigma)
    return tdt_weights(logits, point_targets, head.durations, sigma)


def simple_log_probs(
    encoder_logits: torch.Tensor, predictor_logits: torch.Tensor, targets: torch.Tensor, target_lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities of the trivial joint ``log_softmax(encoder_logits[t] + predictor_logits[u])``.

    Args:
        encoder_logits: ``[B, T, V + 1]``, blank last.
        predictor_logits: ``[B, U + 1, V + 1]``.
        targets, target_lengths: ``[B, U]``, ``[B]``.

    Returns:
        ``(tokens, blank)``, each ``[B, T, U + 1]``: the target of row ``u`` and the blank at ``(t, u)``.
    """
    encoder_max = encoder_logits.detach().amax(dim=-1, keepdim=True)  # [B, T, 1]
    predictor_max = predictor_logits.detach().amax(dim=-1, keepdim=True)  # [B, U + 1, 1]
    # sum_v exp(a_v) exp(b_v) as a matrix product, in float64: in float32 the product of two exponentials
    # underflows where the two distributions peak at different tokens.
    products = torch.matmul((encoder_logits - encoder_max).double().exp(),
                            (predictor_logits - predictor_max).double().exp().transpose(1, 2))
    normaliser = products.clamp_min(1e-300).log().to(encoder_logits.dtype) + encoder_max + predictor_max.transpose(1, 2)
    columns = target_columns(targets, target_lengths)  # [B, U + 1]
    batch_size, max_time, _ = encoder_logits.shape
    tokens = (encoder_logits.gather(2, columns.unsqueeze(1).expand(batch_size, max_time, -1))
              + predictor_logits.gather(2, columns.unsqueeze(2)).transpose(1, 2))
    blank = encoder_logits[..., -1:] + predictor_logits[..., -1].unsqueeze(1)
    return tokens - normaliser, blank - normaliser


def prune_ranges(occupancy: torch.Tensor, logit_lengths: torch.Tensor, target_lengths: torch.Tensor,
                 prune_range: int) -> torch.Tensor:
    """First row ``s_t`` of each frame's band of ``S = min(prune_range, U + 1)`` rows, ``[B, T]``.

    ``occupancy [B, T, U + 1]`` is the probability that an alignment passes through each point. Each frame
    takes the window of ``S`` rows with the most occupancy, then the bands are adjusted so that at least one
    complete path stays inside them: ``s_t`` never decreases; it rises by at most ``S - 1`` rows a frame (a
    blank leaves frame ``t`` from a row ``<= s_t + S - 1``); ``s_0 = 0``, where every path starts; and the
    band of the last frame ``T_b - 1`` holds row ``U_b``, where every path ends. The last two are only both
    possible when ``U_b <= (S - 1) T_b``; otherwise no band can hold a path.
    """
    if prune_range < 2:
        raise ValueError(f"prune_range must be at least 2 rows, got {prune_range}")
    batch_size, max_time, rows = occupancy.shape
    width = min(prune_range, rows)
    cumulative = F.pad(occupancy.cumsum(dim=2), (1, 0))
    window_mass = cumulative[..., width:] - cumulative[..., : rows - width + 1]  # [B, T, rows - width + 1]
    starts = window_mass.argmax(dim=2)
    last_start = (target_lengths + 1 - width).clamp(min=0).unsqueeze(1)  # [B, 1]
    starts = torch.minimum(starts, last_start).cummax(dim=1).values
    frames = torch.arange(max_time, device=occupancy.device)
    starts = torch.where(frames >= (logit_lengths - 1).unsqueeze(1), last_start, starts)
    step = width - 1
    # s_t >= s_t' - step (t' - t) for every later t': a running maximum from the end.
    starts = (starts - step * frames).flip(1).cummax(dim=1).values.flip(1) + step * frames
    return torch.minimum(starts, step * frames)


def simple_transducer_loss(
    encoder_logits: torch.Tensor,
    predictor_logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RNN-T loss of the trivial joint (:func:`simple_log_probs`) and where its alignments go.

    Returns ``(loss [B], occupancy [B, T, U + 1])``: the occupancy (no gradient) is the probability that an
    alignment leaves point ``(t, u)``, the input of :func:`prune_ranges`.
    """
    tokens, blank = simple_log_probs(encoder_logits, predictor_logits, targets, target_lengths)
    loss = -full_lattice_log_likelihood(({0: tokens}, {1: blank}), logit_lengths, target_lengths)
    with torch.enable_grad():  # the occupancy is the gradient of the log-likelihood (posteriors of transitions)
        leaf_tokens, leaf_blank = tokens.detach().requires_grad_(), blank.detach().requires_grad_()
        log_likelihood = full_lattice_log_likelihood(({0: leaf_tokens}, {1: leaf_blank}), logit_lengths,
                                                     target_lengths)
        label_posteriors, blank_posteriors = torch.autograd.grad(log_likelihood.sum(), (leaf_tokens, leaf_blank))
    return loss, label_posteriors + blank_posteriors


def banded_transducer_loss(
    head: HeadSpec,
    joint: Joint,
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    starts: torch.Tensor,
    width: int,
    sigma: float = 0.0,
) -> torch.Tensor:
    """``[B]`` negative log-likelihood of the paths that stay inside the bands: at frame ``t``, rows
    ``[starts[t], starts[t] + width)``, with ``width <= U + 1``; the joint is evaluated only there."""
    batch_size, max_time, _ = encoder_out.shape
    rows = targets.shape[1] + 1
    band = starts.unsqueeze(2) + torch.arange(width, device=starts.device)  # [B, T, S] lattice rows
    predictor_proj = joint.project_predictor(predictor_out)  # [B, U + 1, J]
    band_proj = predictor_proj.gather(1, band.view(batch_size, -1, 1).expand(-1, -1, predictor_proj.shape[-1]))
    logits = joint.combine(joint.project_encoder(encoder_out).unsqueeze(2),
                           band_proj.view(batch_size, max_time, width, -1))  # [B, T, S, C]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    band_targets = target_columns(targets, target_lengths).gather(1, band.view(batch_size, -1)).view(band.shape)
    label_weights, blank_weights = head_weights(head, logits, band_targets, sigma)
    frames = torch.arange(max_time, device=starts.device)
    lattice_rows = torch.arange(rows, device=starts.device)

    def on_lattice(weights: torch.Tensor, duration: int, rows_up: int) -> torch.Tensor:
        """Band weights ``[B, T, S]`` of transitions that move ``duration`` frames and ``rows_up`` rows, placed
        on the full lattice ``[B, T, U + 1]``."""
        if duration == 0:
            # A label within the frame: outside the band it gets weight 0, not IMPOSSIBLE. Such a label only
            # links points that no path can leave (their other transitions are impossible), and the lattice
            # sums same-frame labels with a cumulative sum, which IMPOSSIBLE values would swamp.
            return weights.new_zeros(batch_size, max_time, rows).scatter(2, band, weights)
        placed = weights.new_full((batch_size, max_time, rows), IMPOSSIBLE).scatter(2, band, weights)
        landing = frames + duration  # a transition must land inside the band of its frame, or past the end
        landing_start = starts.gather(1, landing.clamp(max=max_time - 1).expand(batch_size, -1)).unsqueeze(2)
        landing_row = lattice_rows + rows_up
        inside = ((landing_row >= landing_start) & (landing_row < landing_start + width)
                  | (landing >= max_time).view(1, -1, 1))
        return torch.where(inside, placed, IMPOSSIBLE)

    return -full_lattice_log_likelihood(
        ({d: on_lattice(w, d, 1) for d, w in label_weights.items()},
         {d: on_lattice(w, d, 0) for d, w in blank_weights.items()}),
        logit_lengths, target_lengths)


def pruned_transducer_loss(
    head: HeadSpec,
    joint: Joint,
    encoder_out: torch.Tensor,
    predictor_out: torch.Tensor,
    simple_encoder_logits: torch.Tensor,
    simple_predictor_logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    prune_range: int,
    sigma: float = 0.0,
    reduction: str = "mean",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pruned loss, simple loss)`` of a batch (see the module docstring).

    Args:
        head: the output head of ``joint``.
        joint: the model's joint network.
        encoder_out: ``[B, T, D]`` encoder frames.
        predictor_out: ``[B, U + 1, H]`` teacher-forced predictor outputs.
        simple_encoder_logits, simple_predictor_logits: ``[B, T, V + 1]`` and ``[B, U + 1, V + 1]``, the two
            halves of the trivial joint (blank last).
        targets, logit_lengths, target_lengths, reduction: as for :func:`~transdec.losses.rnnt.rnnt_loss`.
        prune_range: rows ``S`` per frame at which the joint is evaluated.
        sigma: the head's under-normalisation (pruned loss only).

    An utterance with more tokens than the bands can reach (``U_b > (S - 1) T_b``) gets a pruned loss of 0.
    """
    batch_size, max_time, _ = encoder_out.shape
    rows = targets.shape[1] + 1
    if predictor_out.shape[:2] != (batch_size, rows) or simple_predictor_logits.shape[:2] != (batch_size, rows):
        raise ValueError(f"predictor outputs must be [B, U + 1, ...] = [{batch_size}, {rows}, ...], got "
                         f"{tuple(predictor_out.shape)} and {tuple(simple_predictor_logits.shape)}")
    if simple_encoder_logits.shape[:2] != (batch_size, max_time):
        raise ValueError(f"simple encoder logits must be [B, T, V + 1] with [B, T] = [{batch_size}, {max_time}], "
                         f"got {tuple(simple_encoder_logits.shape)}")
    if batch_size and int(logit_lengths.min()) < 1:
        raise ValueError("every utterance needs at least one frame: a path must end with a blank")
    simple, occupancy = simple_transducer_loss(simple_encoder_logits, simple_predictor_logits, targets,
                                               logit_lengths, target_lengths)
    starts = prune_ranges(occupancy, logit_lengths, target_lengths, prune_range)
    width = min(prune_range, rows)
    pruned = banded_transducer_loss(head, joint, encoder_out, predictor_out, targets, logit_lengths, target_lengths,
                                    starts, width, sigma)
    reachable = target_lengths <= (width - 1) * logit_lengths
    pruned = torch.where(reachable, pruned, torch.zeros_like(pruned))
    return reduce_losses(pruned, reduction), reduce_losses(simple, reduction)
