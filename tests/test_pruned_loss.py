"""The pruned Transducer loss: brute force over the paths inside the bands, band rules, and the simple loss."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import LOSS_HEADS, brute_force_loss, random_loss_problem, sigma_of
from transdec.losses import rnnt_loss, transducer_loss
from transdec.losses.pruned import (banded_transducer_loss, prune_ranges, pruned_transducer_loss,
                                    simple_transducer_loss)

HEAD_IDS = [f"{h.kind}{h.durations or h.big_blank_durations or ''}" for h in LOSS_HEADS]


@pytest.mark.parametrize("head", LOSS_HEADS, ids=HEAD_IDS)
@pytest.mark.parametrize("prune_range", [2, 3])
def test_banded_loss_equals_brute_force_inside_the_bands(head, prune_range):
    frames, targets = (5, 4, 3, 2), (3, 2, 3, 1)
    joint, simple, encoder_out, predictor_out, labels, frame_counts, target_counts = random_loss_problem(
        head, frames, targets)
    _, occupancy = simple_transducer_loss(*simple(encoder_out, predictor_out), labels, frame_counts, target_counts)
    starts = prune_ranges(occupancy, frame_counts, target_counts, prune_range)
    banded = banded_transducer_loss(head, joint, encoder_out, predictor_out, labels, frame_counts, target_counts,
                                    starts, prune_range, sigma_of(head))
    full_logits = joint(encoder_out, predictor_out).detach()
    for b, (t, u) in enumerate(zip(frames, targets)):
        band = starts[b].tolist()
        expected = brute_force_loss(head, full_logits[b, :t, : u + 1], labels[b, :u].tolist(), sigma_of(head),
                               allowed=lambda t_, u_: band[t_] <= u_ < band[t_] + prune_range)
        if expected == float("inf"):  # TDT without duration 0: too many tokens for the frames
            assert banded[b].item() > 1e29
            continue
        assert banded[b].item() == pytest.approx(expected, abs=1e-9), f"utterance {b}, bands {band}"


@pytest.mark.parametrize("head", LOSS_HEADS, ids=HEAD_IDS)
def test_pruned_loss_bounds_the_full_loss_and_equals_it_with_wide_bands(head):
    joint, simple, encoder_out, predictor_out, labels, frames, targets = random_loss_problem(head, (9, 6, 4), (4, 2, 3))
    am, lm = simple(encoder_out, predictor_out)
    full = transducer_loss(head, joint(encoder_out, predictor_out), labels, frames, targets, sigma=sigma_of(head),
                           reduction="none")
    for prune_range in (2, 3, 4):
        pruned, _ = pruned_transducer_loss(head, joint, encoder_out, predictor_out, am, lm, labels, frames, targets,
                                           prune_range, sigma_of(head), reduction="none")
        assert (pruned >= full - 1e-9).all()
    wide, _ = pruned_transducer_loss(head, joint, encoder_out, predictor_out, am, lm, labels, frames, targets, 5,
                                     sigma_of(head), reduction="none")
    torch.testing.assert_close(wide, full, rtol=0, atol=1e-10)


def test_simple_loss_is_the_rnnt_loss_of_summed_logits():
    joint, simple, encoder_out, predictor_out, labels, frames, targets = random_loss_problem(
        LOSS_HEADS[0], (7, 3), (3, 1))
    am, lm = simple(encoder_out, predictor_out)
    loss, occupancy = simple_transducer_loss(100 * am, 100 * lm, labels, frames, targets)  # peaked: no underflow
    expected = rnnt_loss(100 * (am.unsqueeze(2) + lm.unsqueeze(1)), labels, frames, targets, reduction="none")
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-9)
    # Every alignment leaves exactly one point per frame... plus one per label: the occupancy of frame t sums
    # to 1 + (labels emitted at t); over the utterance, to T + U.
    assert occupancy[0].sum().item() == pytest.approx(7 + 3)
    assert occupancy[1].sum().item() == pytest.approx(3 + 1)


def test_batch_equals_one_by_one():
    head = LOSS_HEADS[1]
    frames, targets = (8, 3, 6), (5, 1, 0)
    joint, simple, encoder_out, predictor_out, labels, frame_counts, target_counts = random_loss_problem(
        head, frames, targets)
    am, lm = simple(encoder_out, predictor_out)
    batched = pruned_transducer_loss(head, joint, encoder_out, predictor_out, am, lm, labels, frame_counts,
                                     target_counts, 3, 0.05, reduction="none")
    for b, (t, u) in enumerate(zip(frames, targets)):
        alone = pruned_transducer_loss(head, joint, encoder_out[b : b + 1, :t], predictor_out[b : b + 1, : u + 1],
                                       am[b : b + 1, :t], lm[b : b + 1, : u + 1], labels[b : b + 1, :u],
                                       frame_counts[b : b + 1], target_counts[b : b + 1], 3, 0.05, reduction="none")
        for got, expected in zip(batched, alone):
            assert got[b].item() == pytest.approx(expected.item(), abs=1e-10)


@pytest.mark.parametrize("head", [LOSS_HEADS[0], LOSS_HEADS[2], LOSS_HEADS[4]],
                         ids=[HEAD_IDS[0], HEAD_IDS[2], HEAD_IDS[4]])
def test_gradcheck(head):
    joint, simple, encoder_out, predictor_out, labels, frames, targets = random_loss_problem(head, (5, 3), (3, 2))
    am, lm = (x.detach() for x in simple(encoder_out, predictor_out))

    def loss(encoder_out, predictor_out, am, lm):
        pruned, simple_loss = pruned_transducer_loss(head, joint, encoder_out, predictor_out, am, lm, labels, frames,
                                                     targets, 2, sigma_of(head), reduction="sum")
        return pruned + 0.5 * simple_loss

    inputs = tuple(x.clone().requires_grad_(True) for x in (encoder_out, predictor_out, am, lm))
    assert torch.autograd.gradcheck(loss, inputs)


def test_too_many_tokens_for_the_bands_gives_zero():
    head = LOSS_HEADS[0]
    joint, simple, encoder_out, predictor_out, labels, frames, targets = random_loss_problem(head, (2, 6), (3, 3))
    pruned, simple_loss = pruned_transducer_loss(head, joint, encoder_out, predictor_out,
                                                 *simple(encoder_out, predictor_out), labels, frames, targets, 2,
                                                 reduction="none")
    assert pruned[0].item() == 0.0 and pruned[1].item() > 0  # 3 tokens cannot climb 1 row a frame in 2 frames
    assert torch.isfinite(simple_loss).all()


@settings(max_examples=60)
@given(data=st.data(), batch=st.integers(1, 4), max_frames=st.integers(1, 12), max_targets=st.integers(0, 8),
       prune_range=st.integers(2, 6))
def test_bands_always_hold_a_path(data, batch, max_frames, max_targets, prune_range):
    frames = data.draw(st.lists(st.integers(1, max_frames), min_size=batch, max_size=batch))
    targets = data.draw(st.lists(st.integers(0, max_targets), min_size=batch, max_size=batch))
    seed = data.draw(st.integers(0, 1000))
    rows = max(targets) + 1
    occupancy = torch.rand(batch, max(frames), rows, generator=torch.Generator().manual_seed(seed))
    starts = prune_ranges(occupancy, torch.tensor(frames), torch.tensor(targets), prune_range)
    width = min(prune_range, rows)
    assert starts.shape == (batch, max(frames))
    for b, (t, u) in enumerate(zip(frames, targets)):
        s = starts[b, :t].tolist()
        assert s[0] == 0 and all(0 <= x and x + width <= rows for x in s)
        assert all(0 <= later - earlier <= width - 1 for earlier, later in zip(s, s[1:]))
        if u <= (width - 1) * t:
            assert s[-1] <= u < s[-1] + width


def test_prune_range_below_two_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        prune_ranges(torch.zeros(1, 3, 4), torch.tensor([3]), torch.tensor([3]), 1)
