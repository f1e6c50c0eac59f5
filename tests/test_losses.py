"""Transducer losses against brute-force enumeration of every alignment path (float64, to 1e-9)."""

import itertools
import math

import pytest
import torch

from helpers import LOSS_HEADS, LOSS_NUM_TOKENS, brute_force_loss
from transdec.losses import multiblank_rnnt_loss, rnnt_loss, tdt_loss, transducer_loss
from transdec.protocol import HeadSpec

SIZES = [(t, u) for t, u in itertools.product(range(1, 6), range(0, 4))]


@pytest.mark.parametrize("head", LOSS_HEADS, ids=lambda h: f"{h.kind}{h.durations or h.big_blank_durations or ''}")
@pytest.mark.parametrize("sigma", [0.0, 0.05])
def test_loss_equals_brute_force(head, sigma):
    if head.kind == "rnnt" and sigma:
        pytest.skip("sigma does not apply to RNN-T")
    generator = torch.Generator().manual_seed(0)
    for num_frames, num_targets in SIZES:
        logits = torch.randn(1, num_frames, num_targets + 1, head.num_outputs, generator=generator, dtype=torch.float64)
        targets = torch.randint(0, LOSS_NUM_TOKENS, (1, num_targets), generator=generator)
        loss = transducer_loss(
            head, logits, targets, torch.tensor([num_frames]), torch.tensor([num_targets]), sigma=sigma
        )
        expected = brute_force_loss(head, logits[0], targets[0].tolist(), sigma)
        if math.isinf(expected):  # TDT without duration 0: more tokens than frames can hold
            assert loss.item() > 1e29, f"T={num_frames} U={num_targets}"
            continue
        assert loss.item() == pytest.approx(expected, abs=1e-9), f"T={num_frames} U={num_targets}"


def test_published_tdt_value():
    """TDT, B=1, T=3, target [0], 3 tokens + blank, durations [0, 1, 2], sigma 0.05, zero activations."""
    logits = torch.zeros(1, 3, 2, 4 + 3, dtype=torch.float64)
    loss = tdt_loss(logits, torch.tensor([[0]]), torch.tensor([3]), torch.tensor([1]), durations=[0, 1, 2], sigma=0.05)
    assert loss.item() == pytest.approx(4.155739, abs=1e-6)


def test_rnnt_without_targets_is_all_blanks():
    logits = torch.randn(1, 4, 1, 5, dtype=torch.float64)
    expected = -logits[0, :, 0].log_softmax(-1)[:, -1].sum()
    loss = rnnt_loss(logits, torch.zeros(1, 0, dtype=torch.long), torch.tensor([4]), torch.tensor([0]))
    assert loss.item() == pytest.approx(expected.item(), abs=1e-12)


LOSSES = {
    "rnnt": (lambda lg, y, lt, ly, **kw: rnnt_loss(lg, y, lt, ly, **kw), LOSS_NUM_TOKENS + 1),
    "multiblank": (
        lambda lg, y, lt, ly, **kw: multiblank_rnnt_loss(lg, y, lt, ly, (2, 4), sigma=0.05, **kw),
        LOSS_NUM_TOKENS + 3,
    ),
    "tdt": (lambda lg, y, lt, ly, **kw: tdt_loss(lg, y, lt, ly, (0, 1, 2, 3), sigma=0.05, **kw), LOSS_NUM_TOKENS + 5),
}


def padded_batch(width, frames=(5, 2, 7, 1), targets=(3, 0, 2, 1), seed=0, dtype=torch.float64):
    """A batch whose padding logits are large finite garbage, as from a joint over padded frames."""
    generator = torch.Generator().manual_seed(seed)
    logits = 30 * torch.randn(len(frames), max(frames), max(targets) + 1, width, generator=generator, dtype=dtype)
    logits = logits.clamp(-60, 60)
    for b, (t, u) in enumerate(zip(frames, targets)):
        logits[b, :t, : u + 1] = torch.randn(t, u + 1, width, generator=generator, dtype=dtype)
    labels = torch.randint(0, LOSS_NUM_TOKENS, (len(frames), max(targets)), generator=generator)
    return logits, labels, torch.tensor(frames), torch.tensor(targets)


@pytest.mark.parametrize("kind", list(LOSSES))
def test_batch_equals_one_by_one_and_padding_gets_no_gradient(kind):
    loss_fn, width = LOSSES[kind]
    logits, labels, frames, targets = padded_batch(width)
    logits.requires_grad_(True)
    batched = loss_fn(logits, labels, frames, targets, reduction="none")
    for b, (t, u) in enumerate(zip(frames.tolist(), targets.tolist())):
        alone = loss_fn(logits[b : b + 1, :t, : u + 1], labels[b : b + 1, :u], frames[b : b + 1], targets[b : b + 1])
        assert batched[b].item() == pytest.approx(alone.item(), abs=1e-10)
    batched.sum().backward()
    assert torch.isfinite(logits.grad).all()
    for b, (t, u) in enumerate(zip(frames.tolist(), targets.tolist())):
        valid = torch.zeros_like(logits.grad[b], dtype=torch.bool)
        valid[:t, : u + 1] = True
        assert torch.count_nonzero(logits.grad[b][~valid]) == 0


@pytest.mark.parametrize("kind", list(LOSSES))
def test_gradcheck(kind):
    loss_fn, width = LOSSES[kind]
    logits, labels, frames, targets = padded_batch(width, frames=(4, 2), targets=(2, 1))
    logits = logits.clamp(-3, 3).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: loss_fn(x, labels, frames, targets, reduction="sum"), (logits,))


@pytest.mark.parametrize("kind", list(LOSSES))
def test_float32_and_bfloat16_follow_float64(kind):
    loss_fn, width = LOSSES[kind]
    logits, labels, frames, targets = padded_batch(width, frames=(40, 25), targets=(12, 7))
    exact = loss_fn(logits, labels, frames, targets, reduction="none")
    single = loss_fn(logits.float(), labels, frames, targets, reduction="none")
    torch.testing.assert_close(single.double(), exact, rtol=1e-5, atol=1e-4)
    half = loss_fn(logits.bfloat16(), labels, frames, targets, reduction="none")
    assert half.dtype == torch.float32  # computed in float32 from the rounded logits


def test_reductions():
    logits, labels, frames, targets = padded_batch(LOSS_NUM_TOKENS + 1)
    per_utterance = rnnt_loss(logits, labels, frames, targets, reduction="none")
    assert rnnt_loss(logits, labels, frames, targets, reduction="sum").item() == pytest.approx(per_utterance.sum().item())
    assert rnnt_loss(logits, labels, frames, targets).item() == pytest.approx(per_utterance.mean().item())
    with pytest.raises(ValueError, match="reduction"):
        rnnt_loss(logits, labels, frames, targets, reduction="batch")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda lg, y, lt, ly: (lg[0], y, lt, ly), r"\[B, T, U \+ 1, C\]"),
        (lambda lg, y, lt, ly: (lg, y[:, :1], lt, ly), r"targets must be \[B, U\]"),
        (lambda lg, y, lt, ly: (lg, y, lt + 10, ly), "logit_lengths must lie in"),
        (lambda lg, y, lt, ly: (lg, y, lt, ly[:2]), r"target_lengths must be \[B\]"),
        (lambda lg, y, lt, ly: (lg, y, lt * 0, ly * 0), "at least one frame"),
    ],
)
def test_bad_inputs_are_named(change, message):
    batch = padded_batch(LOSS_NUM_TOKENS + 1)
    with pytest.raises(ValueError, match=message):
        rnnt_loss(*change(*batch))


def test_head_width_mismatch_is_named():
    logits, labels, frames, targets = padded_batch(LOSS_NUM_TOKENS + 1)
    with pytest.raises(ValueError, match="logits have 4 outputs, the head needs 7"):
        transducer_loss(HeadSpec("tdt", LOSS_NUM_TOKENS, durations=(0, 1, 2)), logits, labels, frames, targets)
    with pytest.raises(ValueError, match="sigma"):
        transducer_loss(HeadSpec("rnnt", LOSS_NUM_TOKENS), logits, labels, frames, targets, sigma=0.05)
