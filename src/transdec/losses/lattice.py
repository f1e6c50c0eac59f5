"""The forward algorithm shared by the RNN-T, multi-blank and TDT losses.

All three are sums over alignment paths through the lattice of points ``(t, u)``: frame ``t`` reached
after ``u`` target tokens. They differ only in the transitions a point has:

* a label transition of duration ``d``: emit target ``u`` and move to ``(t + d, u + 1)``;
* a blank transition of duration ``d >= 1``: move to ``(t + d, u)``.

RNN-T has labels of duration 0 and a blank of duration 1; multi-blank adds big blanks with longer
durations; TDT has labels and blanks of every duration in its list (blanks skip duration 0). A path
starts at ``(0, 0)`` and ends with a blank that lands exactly on ``(T, U)``; points with ``t >= T`` are
never entered otherwise, so a label's jump must stay inside the utterance.

The log-likelihood is the forward (alpha) recursion; its gradient comes from the backward (beta)
recursion (:class:`_Lattice`).

Impossible values are a large finite negative number rather than ``-inf``: padding points of a batch
are computed like any other, and ``-inf - -inf`` in the backward pass would turn their zero gradients
into NaN.
"""

from __future__ import annotations

import torch

from transdec.losses import lattice_kernels

#: Label weights (duration -> ``[B, T, P]``) and blank weights (duration -> ``[B, T, P]``) of lattice points.
LatticeWeights = tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]

#: Log-weight of an impossible event. Finite so that unused lattice points never produce NaN gradients.
IMPOSSIBLE = -1.0e30

#: Terms more than this far (in log space) below the largest are dropped from sums (they contribute
#: < 2e-35): exp() of anything lower yields float32 subnormals, which are slow on x86 CPUs. A guard for
#: peaked, trained distributions; on random logits it made no measurable difference.
_NEGLIGIBLE = -80.0


def log_sum_exp(terms: list[torch.Tensor]) -> torch.Tensor:
    """Element-wise log of the summed exponentials of equally shaped tensors, without subnormals."""
    if len(terms) == 1:
        return terms[0]
    stacked = torch.stack(terms)
    top = stacked.amax(dim=0)
    return top + (stacked - top).clamp_(min=_NEGLIGIBLE).exp_().sum(dim=0).log_()


def lattice_log_likelihood(
    label_weights: dict[int, torch.Tensor],
    blank_weights: dict[int, torch.Tensor],
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    """Log of the summed weight of all paths from ``(0, 0)`` to ``(T_b, U_b)`` of each utterance.

    Args:
        label_weights: duration ``d >= 0`` -> ``[B, T, U]`` log-weight of emitting target ``u`` at
            ``(t, u)`` with that duration.
        blank_weights: duration ``d >= 1`` -> ``[B, T, U + 1]`` log-weight of a blank of that duration.
        logit_lengths: ``[B]`` frames ``T_b`` of each utterance (at least 1).
        target_lengths: ``[B]`` tokens ``U_b`` of each utterance.

    Returns:
        ``[B]`` log-likelihoods, differentiable with respect to the weights.
    """
    if not blank_weights or min(blank_weights) < 1:
        raise ValueError("blank transitions need durations of at least 1")
    label_durations, blank_durations = tuple(label_weights), tuple(blank_weights)
    return _Lattice.apply(logit_lengths, target_lengths, label_durations, blank_durations,
                          *label_weights.values(), *blank_weights.values())


class _Lattice(torch.autograd.Function):
    """The forward algorithm, with the gradient from the backward (beta) algorithm.

    Autograd through the frame loop records a dozen small operations per frame and replays them backwards;
    on a GPU each is a kernel launch plus autograd bookkeeping on the CPU, and a training step waits on that.
    Here each direction is one loop of plain tensor operations, and the gradient of every transition is its
    posterior, ``exp(alpha(from) + weight + beta(to) - log_likelihood)``, in a few full-size operations.
    """

    @staticmethod
    def forward(ctx, logit_lengths, target_lengths, label_durations, blank_durations, *weights):
        label_weights = dict(zip(label_durations, weights[: len(label_durations)]))
        blank_weights = dict(zip(blank_durations, weights[len(label_durations):]))
        if lattice_kernels.kernels_apply(weights[0]):
            alpha = lattice_kernels.alphas(label_weights, blank_weights)
        else:
            alpha = _alphas(label_weights, blank_weights)
        log_likelihood = _ending(alpha, blank_weights, logit_lengths, target_lengths)
        ctx.durations = (label_durations, blank_durations)
        ctx.save_for_backward(logit_lengths, target_lengths, alpha, log_likelihood, *weights)
        return log_likelihood

    @staticmethod
    def backward(ctx, grad_output):
        logit_lengths, target_lengths, alpha, log_likelihood, *weights = ctx.saved_tensors
        label_durations, blank_durations = ctx.durations
        label_weights = dict(zip(label_durations, weights[: len(label_durations)]))
        blank_weights = dict(zip(blank_durations, weights[len(label_durations):]))
        to_label, to_blank = _betas(label_weights, blank_weights, logit_lengths, target_lengths)
        # Points of a transition's posterior: exp(alpha + weight + beta(destination) - log-likelihood).
        shift = (log_likelihood.view(-1, 1, 1), grad_output.view(-1, 1, 1))
        max_time = alpha.shape[1]
        grads = []
        for duration, weight in label_weights.items():
            beta = to_label[:, duration : duration + max_time, 1:]
            grads.append(_posterior(alpha[:, :, :-1] + weight + beta, *shift))
        for duration, weight in blank_weights.items():
            grads.append(_posterior(alpha + weight + to_blank[:, duration : duration + max_time], *shift))
        return (None, None, None, None, *grads)


def _posterior(log_weight: torch.Tensor, log_likelihood: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """``grad * exp(log_weight - log_likelihood)``; negligible posteriors are exactly 0 (no subnormals)."""
    log_posterior = (log_weight - log_likelihood).clamp_(max=0.0)
    return log_posterior.masked_fill_(log_posterior < _NEGLIGIBLE, -float("inf")).exp_().mul_(grad)


def _alphas(label_weights: dict[int, torch.Tensor], blank_weights: dict[int, torch.Tensor]) -> torch.Tensor:
    """``[B, T, U + 1]`` log-weight of all paths from ``(0, 0)`` to each point.

    Frames go in a Python loop, tokens in tensors. Within one frame, labels of duration 0 chain points
    ``(t, 0) -> (t, 1) -> ...``, which a cumulative log-sum-exp solves in one operation:
    ``alpha(t, u) = c(u) + logcumsumexp_{u' <= u}(p(t, u') - c(u'))`` where ``p`` collects the transitions
    arriving from earlier frames and ``c(u)`` sums the duration-0 label weights of frame ``t`` up to ``u``.
    """
    reference = next(iter(blank_weights.values()))
    batch_size, max_time, positions = reference.shape
    impossible = reference.new_full((batch_size, positions), IMPOSSIBLE)
    start = torch.cat([reference.new_zeros(batch_size, 1), impossible[:, 1:]], dim=1)
    label_frames = {d: w.unbind(1) for d, w in label_weights.items()}
    blank_frames = {d: w.unbind(1) for d, w in blank_weights.items()}
    same_frame_labels = label_frames.get(0)
    zero_column = reference.new_zeros(batch_size, 1)

    alphas: list[torch.Tensor] = []  # alphas[t]: [B, U + 1]
    for t in range(max_time):
        arriving = [start] if t == 0 else []
        for duration, weight in blank_frames.items():
            if t >= duration:
                arriving.append(alphas[t - duration] + weight[t - duration])
        for duration, weight in label_frames.items():
            if duration > 0 and t >= duration:
                moved = alphas[t - duration][:, :-1] + weight[t - duration]  # to u + 1
                arriving.append(torch.cat([impossible[:, :1], moved], dim=1))
        from_earlier = log_sum_exp(arriving)
        if same_frame_labels is None:
            alphas.append(from_earlier)
        else:
            chain = torch.cat([zero_column, same_frame_labels[t].cumsum(dim=1)], dim=1)  # c(u)
            alphas.append(chain + torch.logcumsumexp(from_earlier - chain, dim=1))
    return torch.stack(alphas, dim=1)


def _ending(alpha: torch.Tensor, blank_weights: dict[int, torch.Tensor], logit_lengths: torch.Tensor,
            target_lengths: torch.Tensor) -> torch.Tensor:
    """``[B]`` log-weight of all paths: the blanks that land exactly on ``(T_b, U_b)``."""
    rows = torch.arange(alpha.shape[0], device=alpha.device)
    endings = []
    for duration, weight in blank_weights.items():
        last_frame = logit_lengths - duration
        frame = last_frame.clamp(min=0)
        ending = alpha[rows, frame, target_lengths] + weight[rows, frame, target_lengths]
        endings.append(torch.where(last_frame >= 0, ending, IMPOSSIBLE))
    return log_sum_exp(endings)


def _betas(
    label_weights: dict[int, torch.Tensor],
    blank_weights: dict[int, torch.Tensor],
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-weight of all paths from each point to the end, as seen by the transitions arriving there.

    Returns ``(to_label, to_blank)``, each ``[B, T + max duration + 1, U + 1]``: ``beta(t, u)`` for
    ``t < T_b``; past the utterance a label can land nowhere (``IMPOSSIBLE``), a blank only on the end
    point ``(T_b, U_b)`` (log-weight 0). Mirror of :func:`_alphas`: frames backwards, and the chain of
    duration-0 labels within a frame is a reversed cumulative log-sum-exp,
    ``beta(t, u) = -c(u) + log sum_{u' >= u} exp(c(u') + q(t, u'))`` with ``q`` the transitions that
    leave the frame.
    """
    reference = next(iter(blank_weights.values()))
    batch_size, max_time, positions = reference.shape
    longest = max((*label_weights, *blank_weights))
    frames = torch.arange(max_time + longest + 1, device=reference.device)
    past_end = frames.view(1, -1) >= logit_lengths.view(-1, 1)  # [B, T + longest + 1]
    end_point = (frames.view(1, -1) == logit_lengths.view(-1, 1)).unsqueeze(2) & (
        torch.arange(positions, device=reference.device).view(1, 1, -1) == target_lengths.view(-1, 1, 1))
    to_label = reference.new_full((batch_size, max_time + longest + 1, positions), IMPOSSIBLE)
    to_blank = torch.where(end_point, 0.0, to_label)
    if lattice_kernels.kernels_apply(reference):
        lattice_kernels.betas(label_weights, blank_weights, to_label, to_blank, logit_lengths)
        return to_label, to_blank
    impossible_column = reference.new_full((batch_size, 1), IMPOSSIBLE)
    same_frame_labels = label_weights.get(0)

    for t in range(max_time - 1, -1, -1):
        leaving = [weight[:, t] + to_blank[:, t + duration] for duration, weight in blank_weights.items()]
        for duration, weight in label_weights.items():
            if duration > 0:
                moved = weight[:, t] + to_label[:, t + duration, 1:]  # from u, to u + 1
                leaving.append(torch.cat([moved, impossible_column], dim=1))
        beta = log_sum_exp(leaving)
        if same_frame_labels is not None:
            chain = torch.cat([impossible_column.new_zeros(batch_size, 1), same_frame_labels[:, t].cumsum(dim=1)],
                              dim=1)  # c(u)
            beta = (chain + beta).flip(1).logcumsumexp(dim=1).flip(1) - chain
        valid = ~past_end[:, t : t + 1]
        to_label[:, t] = torch.where(valid, beta, to_label[:, t])
        to_blank[:, t] = torch.where(valid, beta, to_blank[:, t])
    return to_label, to_blank


def checked_logits(
    logits: torch.Tensor, targets: torch.Tensor, logit_lengths: torch.Tensor, target_lengths: torch.Tensor
) -> torch.Tensor:
    """Check shapes and ranges with messages that say what is wrong; return the logits in loss precision.

    Half-precision logits (e.g. from bf16 autocast) are upcast to float32: the recursion sums many
    log-probabilities.
    """
    if logits.dim() != 4:
        raise ValueError(f"logits must be [B, T, U + 1, C], got shape {tuple(logits.shape)}")
    batch_size, max_time, positions, _ = logits.shape
    if targets.dim() != 2 or targets.shape[0] != batch_size or targets.shape[1] != positions - 1:
        raise ValueError(
            f"targets must be [B, U] = [{batch_size}, {positions - 1}] to match logits, got {tuple(targets.shape)}"
        )
    for name, lengths, limit in (("logit_lengths", logit_lengths, max_time), ("target_lengths", target_lengths, positions - 1)):
        if lengths.shape != (batch_size,):
            raise ValueError(f"{name} must be [B] = [{batch_size}], got {tuple(lengths.shape)}")
        if batch_size and (int(lengths.min()) < 0 or int(lengths.max()) > limit):
            raise ValueError(f"{name} must lie in [0, {limit}], got {lengths.tolist()}")
    if batch_size and int(logit_lengths.min()) < 1:
        raise ValueError("every utterance needs at least one frame: a path must end with a blank")
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


class _NormalizedColumns(torch.autograd.Function):
    """``log_softmax(logits)`` at a few columns per lattice point, without a full log-softmax tensor.

    Forward: ``logits.gather(-1, columns) - logsumexp(logits)``. Backward, for upstream gradient ``g``:
    ``scatter_add(g) - softmax(logits) * sum(g)``, built in place in one full-size tensor. Autograd through
    ``logsumexp`` and ``gather`` would allocate and traverse several full-size tensors instead, and the
    lattice is by far the largest tensor of a training step.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        normaliser = logits.logsumexp(dim=-1, keepdim=True)
        ctx.save_for_backward(logits, normaliser, columns)
        return logits.gather(-1, columns) - normaliser

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        logits, normaliser, columns = ctx.saved_tensors
        probs = (logits - normaliser).clamp_(min=_NEGLIGIBLE).exp_()  # softmax, without subnormals
        grad_logits = probs.mul_(-grad.sum(dim=-1, keepdim=True))
        return grad_logits.scatter_add_(-1, columns, grad), None


def target_columns(targets: torch.Tensor, target_lengths: torch.Tensor) -> torch.Tensor:
    """``[B, U + 1]``: the target each lattice row ``u`` would emit; padding and the last row read column 0,
    whose weight no complete path uses."""
    valid = torch.arange(targets.shape[1], device=targets.device) < target_lengths.unsqueeze(1)
    return torch.cat([torch.where(valid, targets, 0), targets.new_zeros(targets.shape[0], 1)], dim=1).long()


def normalized_columns(
    logits: torch.Tensor, point_targets: torch.Tensor, extra_columns: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-softmax of ``logits [B, T, P, C]`` at each point's target and at fixed columns.

    ``point_targets [B, T or 1, P]`` is the target column of each point (``P = U + 1`` lattice rows for the
    full lattice, or a band of rows per frame for the pruned loss). Returns ``(tokens [B, T, P], extras [B, T,
    P, len(extra_columns)])``.
    """
    columns = torch.cat(
        [
            point_targets.unsqueeze(-1).expand(*logits.shape[:-1], 1),
            torch.tensor(extra_columns, device=logits.device).expand(*logits.shape[:-1], -1),
        ],
        dim=-1,
    )
    log_probs = _NormalizedColumns.apply(logits, columns)
    return log_probs[..., 0], log_probs[..., 1:]


def full_lattice_log_likelihood(
    weights: LatticeWeights,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    """:func:`lattice_log_likelihood` of weights computed at every lattice point ``[B, T, U + 1]`` (the label
    weights of the last row, which no path uses, are dropped)."""
    label_weights, blank_weights = weights
    return lattice_log_likelihood({d: w[:, :, :-1] for d, w in label_weights.items()}, blank_weights,
                                  logit_lengths, target_lengths)


def reduce_losses(losses: torch.Tensor, reduction: str) -> torch.Tensor:
    """``"none"``: ``[B]``; ``"sum"``; ``"mean"``: the mean over utterances."""
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.mean()
    raise ValueError(f"reduction must be 'none', 'sum' or 'mean', got {reduction!r}")
