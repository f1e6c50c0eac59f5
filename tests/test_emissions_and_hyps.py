"""The batched greedy head reading and the BatchedHyps container."""

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.emissions import GreedyHead
from transdec.decoding.scoring import Scoring
from transdec.decoding.results import Hypothesis
from transdec.protocol import HeadSpec


def test_tdt_reading():
    head = HeadSpec("tdt", 3, durations=(0, 1, 2, 4))
    read = GreedyHead(Scoring(head), torch.device("cpu"))
    logits = torch.tensor(
        [
            [0.0, 3.0, 0.0, 1.0, 0.0, 0.0, 0.0, 5.0],  # token 1, duration 4
            [0.0, 0.0, 0.0, 2.0, 5.0, 0.0, 0.0, 0.0],  # blank, duration 0 -> moves 1
            [0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 5.0, 0.0],  # blank, duration 2
            [0.0, 0.0, 4.0, 0.0, 5.0, 0.0, 0.0, 0.0],  # token 2, duration 0 -> stays
        ],
        dtype=torch.float64,
    )
    out = read(logits)
    assert out.labels.tolist() == [1, 3, 3, 2]
    assert out.is_blank.tolist() == [False, True, True, False]
    assert out.durations.tolist() == [4, 0, 2, 0]
    assert out.advance.tolist() == [4, 1, 2, 0]
    expected = logits[:, :4].log_softmax(-1).max(-1).values + logits[:, 4:].log_softmax(-1).max(-1).values
    torch.testing.assert_close(out.scores, expected)


def test_multiblank_reading():
    head = HeadSpec("multiblank", 2, big_blank_durations=(2, 4))  # outputs: t0 t1 bb(4) bb(2) blank
    read = GreedyHead(Scoring(head), torch.device("cpu"))
    logits = torch.eye(5, dtype=torch.float64) * 5
    out = read(logits)
    assert out.labels.tolist() == [0, 1, 2, 3, 4]
    assert out.is_blank.tolist() == [False, False, True, True, True]
    assert out.advance.tolist() == [0, 0, 4, 2, 1]
    assert out.durations is None


def test_batched_hyps_grows_and_converts():
    hyps = BatchedHyps(batch_size=2, capacity=2, device=torch.device("cpu"), float_dtype=torch.float64)
    for step in range(5):
        mask = torch.tensor([True, step % 2 == 0])
        hyps.add_labels(mask, torch.tensor([step, 10 + step]), step, None, torch.tensor([-0.5, -1.0]).double())
        hyps.add_scores(mask, torch.tensor([-0.5, -1.0]).double())
    assert hyps.capacity == 8
    first, second = hyps.to_hypotheses()
    assert first == Hypothesis([0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0] * 5, [-0.5] * 5, -2.5)
    assert second == Hypothesis([10, 12, 14], [0, 2, 4], [0] * 3, [-1.0] * 3, -3.0)
    round_trip = BatchedHyps.from_hypotheses([first, second], torch.device("cpu"), torch.float64)
    assert round_trip.to_hypotheses() == [first, second]


def test_scores_ignore_masked_minus_infinity():
    hyps = BatchedHyps(batch_size=2, capacity=1, device=torch.device("cpu"), float_dtype=torch.float64)
    hyps.add_scores(torch.tensor([True, False]), torch.tensor([-1.0, -float("inf")]).double())
    assert hyps.scores.tolist() == [-1.0, 0.0]
