"""The ctc_greedy strategy: a hybrid model's CTC head decoded greedily (runs merged, blanks dropped)."""

import math

import pytest
import torch

from transdec.decoding import DecodingConfig, decode
from transdec.decoding.scoring import Fusion
from transdec.protocol import HeadSpec


class LogitsModel:
    """A model whose CTC head passes the encoder output through: the test writes the logits directly."""

    def __init__(self, num_tokens: int) -> None:
        self.head = HeadSpec("rnnt", num_tokens)
        self.predictor = self.joint = None
        self.ctc = torch.nn.Identity()


def logits_of(frame_labels: list[int], num_outputs: int, frames: int) -> torch.Tensor:
    """``[frames, num_outputs]`` with each listed frame's label far ahead; later frames are NaN (padding)."""
    logits = torch.full((frames, num_outputs), float("nan"), dtype=torch.float64)
    logits[: len(frame_labels)] = 0.0
    for t, label in enumerate(frame_labels):
        logits[t, label] = 5.0
    return logits


def test_runs_merge_blanks_split_and_padding_is_never_read() -> None:
    blank = 3
    rows = [[1, 1, blank, 1, 2, 2, blank, 0], [blank, 2, blank]]
    encoder_out = torch.stack([logits_of(row, 4, 8) for row in rows])
    result = decode(LogitsModel(3), encoder_out, torch.tensor([8, 3]), DecodingConfig("ctc_greedy"))
    first, second = result.hypotheses()
    assert (first.tokens, first.timestamps) == ([1, 1, 2, 0], [0, 3, 4, 7])
    assert (second.tokens, second.timestamps) == ([2], [1])
    best = 5.0 - math.log(math.exp(5.0) + 3)  # each valid frame's best log-prob
    assert first.score == pytest.approx(8 * best) and second.score == pytest.approx(3 * best)
    assert first.token_logprobs == pytest.approx([best] * 4)


def test_models_without_a_ctc_head_fusions_and_wrong_widths_are_refused() -> None:
    encoder_out, lengths = torch.zeros(1, 2, 4), torch.tensor([2])
    with pytest.raises(ValueError, match="does not take language-model fusion"):
        decode(LogitsModel(3), encoder_out, lengths, DecodingConfig("ctc_greedy", fusions=[Fusion(None, 0.5)]))
    without_head = LogitsModel(3)
    without_head.ctc = None
    with pytest.raises(ValueError, match="needs a model with a CTC head"):
        decode(without_head, encoder_out, lengths, DecodingConfig("ctc_greedy"))
    with pytest.raises(ValueError, match="the CTC head has 4 outputs; the model has 2 tokens"):
        decode(LogitsModel(2), encoder_out, lengths, DecodingConfig("ctc_greedy"))
