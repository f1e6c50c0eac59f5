"""The scoring hook: fusion rules, and every greedy decoder against the reference with a fused token scorer."""

import itertools

import pytest
import torch

from helpers import HEADS, BigramScorer, assert_same_hypotheses, encoder_batch, model_for
from transdec.decoding import (
    DecodingConfig,
    Fusion,
    Scoring,
    TokenScorer,
    decode,
    greedy_frame_looping,
    greedy_label_looping,
    greedy_reference,
    greedy_wind,
)
from transdec.protocol import HeadSpec


def test_bigram_scorer_is_a_token_scorer():
    assert isinstance(BigramScorer(3, seed=0), TokenScorer)


class FixedScorer(BigramScorer):
    """Gives ``token_logprobs [N, V]`` whatever the state."""

    def __init__(self, token_logprobs: torch.Tensor) -> None:
        super().__init__(token_logprobs.shape[-1], seed=0)
        self.fixed = token_logprobs

    def token_logprobs(self, state: torch.Tensor) -> torch.Tensor:
        return self.fixed


def scored_with(head: HeadSpec, fusion_options: dict, logits: torch.Tensor, lm: torch.Tensor):
    """``logits`` scored with one fusion whose scorer gives ``lm [N, V]``, through the scoring's own context."""
    scoring = Scoring(head, [Fusion(FixedScorer(lm), **fusion_options)])
    return scoring(logits, scoring.context(scoring.initial_state(lm.shape[0], torch.device("cpu"))))


def test_fusion_rules_follow_the_paper():
    """Eq. 2 adds the weighted LM log-prob (and bonus) to tokens only; eq. 3 also takes ln(1 - p_blank) into the
    token scores and scales the blank's log-prob by 1 + weight."""
    head = HeadSpec("rnnt", num_tokens=3)
    logits = torch.tensor([[0.5, -1.0, 2.0, 1.0]], dtype=torch.float64)
    lm = torch.tensor([[-0.1, -2.0, -3.0]], dtype=torch.float64)
    am = logits.log_softmax(dim=-1)
    weight, bonus = 0.5, 0.25
    plain = scored_with(head, {"weight": weight, "token_bonus": bonus}, logits, lm)
    torch.testing.assert_close(plain.scores[0, :3], am[0, :3] + weight * lm[0] + bonus)
    torch.testing.assert_close(plain.scores[0, 3], am[0, 3])
    torch.testing.assert_close(plain.label_logprobs, am)
    blank = scored_with(head, {"weight": weight, "blank_scoring": True}, logits, lm)
    p_blank = am[0, 3].exp()
    torch.testing.assert_close(blank.scores[0, :3], am[0, :3] + weight * ((1 - p_blank).log() + lm[0]))
    torch.testing.assert_close(blank.scores[0, 3], (1 + weight) * am[0, 3])


def test_tdt_fusion_leaves_durations_alone():
    head = HeadSpec("tdt", num_tokens=3, durations=(0, 1, 2))
    logits = torch.randn(2, 5, head.num_outputs, dtype=torch.float64)  # a window axis between rows and outputs
    lm = torch.randn(2, 3, dtype=torch.float64).log_softmax(dim=-1)
    scored = scored_with(head, {"weight": 1.0}, logits, lm)
    assert scored.scores.shape == (2, 5, head.num_labels)
    torch.testing.assert_close(scored.duration_logprobs, logits[..., head.num_labels:].log_softmax(dim=-1))
    torch.testing.assert_close(scored.scores[..., :3], scored.label_logprobs[..., :3] + lm.unsqueeze(1))


FUSED_MATRIX = list(itertools.product(HEADS, ["lstm", "stateless"], [False, True]))


def fusions_for(kind: str, blank_scoring: bool, weight: float = 0.8):
    return [Fusion(BigramScorer(HEADS[kind].num_tokens, seed=3), weight, token_bonus=0.1, blank_scoring=blank_scoring)]


@pytest.mark.parametrize("kind, predictor, blank_scoring", FUSED_MATRIX)
def test_every_greedy_decoder_equals_the_reference_with_fusion(kind, predictor, blank_scoring):
    model = model_for(kind, predictor, "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7, 24, 5, 19], seed=4)
    fusions = fusions_for(kind, blank_scoring)
    expected = greedy_reference(model, frames, lengths, max_symbols_per_frame=3, fusions=fusions).hypotheses()
    plain = greedy_reference(model, frames, lengths, max_symbols_per_frame=3).hypotheses()
    assert [h.tokens for h in expected] != [h.tokens for h in plain], "the fusion must change some decision"
    for window in (1, 4):
        got = greedy_label_looping(model, frames, lengths, max_symbols_per_frame=3, window_size=window, fusions=fusions)
        assert_same_hypotheses(got.hypotheses(), expected)
        got = greedy_wind(model, frames, lengths, max_symbols_per_frame=3, window_size=window, fusions=fusions)
        assert_same_hypotheses(got.hypotheses(), expected)
    if kind == "rnnt":
        assert_same_hypotheses(greedy_frame_looping(model, frames, lengths, max_symbols_per_frame=3, fusions=fusions).hypotheses(), expected)


def test_fusion_with_zero_weight_changes_nothing():
    model = model_for("tdt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([24, 9, 16], seed=5)
    fused = decode(model, frames, lengths, DecodingConfig(fusions=fusions_for("tdt", False, weight=0.0)))
    plain = decode(model, frames, lengths, DecodingConfig())
    for got, want in zip(fused.hypotheses(), plain.hypotheses()):
        bonus = 0.1 * len(want.tokens)  # the token bonus still counts in the score
        assert (got.tokens, got.timestamps, got.durations) == (want.tokens, want.timestamps, want.durations)
        assert got.score == pytest.approx(want.score + bonus, abs=1e-9)


def test_hypothesis_score_is_the_fused_path_score():
    """The score of a fused decode is the AM log-prob of the path plus the weighted LM log-prob of its tokens."""
    kind, weight = "rnnt", 0.8
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch([20], seed=6)
    fusions = fusions_for(kind, blank_scoring=False, weight=weight)
    fused = greedy_reference(model, frames, lengths, max_symbols_per_frame=3, fusions=fusions).hypotheses()[0]
    scorer = fusions[0].scorer
    lm_logprob, previous = 0.0, scorer.num_tokens
    for token in fused.tokens:
        lm_logprob += float(scorer.table[previous, token])
        previous = token
    assert fused.score - weight * lm_logprob - 0.1 * len(fused.tokens) == pytest.approx(
        _path_logprob(model, frames[0, :20], fused, max_symbols_per_frame=3), abs=1e-9)


@torch.inference_mode()
def _path_logprob(model, frames, hyp, max_symbols_per_frame):
    """The Transducer log-prob of the RNN-T path a greedy decode took: its tokens, and a blank at every frame (the
    forced blank after ``max_symbols_per_frame`` tokens included)."""
    head, predictor, joint = model.head, model.predictor, model.joint
    encoder_proj = joint.project_encoder(frames.unsqueeze(0))[0]
    out, state = predictor.step(torch.tensor([head.predictor_blank_id]), predictor.initial_state(1))
    total, t, position, tokens_here = 0.0, 0, 0, 0
    while t < frames.shape[0]:
        logprobs = joint.combine(encoder_proj[t], joint.project_predictor(out)[0]).log_softmax(dim=0)
        if position < len(hyp.tokens) and hyp.timestamps[position] == t:
            total += float(logprobs[hyp.tokens[position]])
            out, state = predictor.step(torch.tensor([hyp.tokens[position]]), state)
            position, tokens_here = position + 1, tokens_here + 1
            assert tokens_here <= max_symbols_per_frame
            continue
        total += float(logprobs[head.blank_id])
        t, tokens_here = t + 1, 0
    assert position == len(hyp.tokens)
    return total


def test_cuda_graph_modes_refuse_fusions_that_are_not_graph_safe():
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([5], seed=0)
    with pytest.raises(ValueError, match="takes only graph-safe fusions"):
        greedy_label_looping(model, frames, lengths, cuda_graphs="while_loops", fusions=fusions_for("rnnt", False))


@pytest.mark.parametrize("kind", list(HEADS))
def test_in_place_label_looping_with_an_ngram_lm_equals_the_reference(kind, tmp_path):
    """The steps CUDA graphs capture carry the LM's state (the n-gram LM is graph-safe), in both replay orders."""
    from arpa_fixtures import random_arpa
    from transdec.decoding.greedy.label_looping import LabelLoopingSearch
    from transdec.decoding.greedy.label_looping_graphs import run_step_pieces, step_pieces
    from transdec.decoding.scoring import Scoring
    from transdec.lm import NGramLM

    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(HEADS[kind].num_tokens, 3, seed=5, missing_tokens=1))
    lm = NGramLM.load(path, HEADS[kind].num_tokens, dtype=torch.float64)
    fusions = [Fusion(lm, 0.7, token_bonus=0.2, blank_scoring=kind == "tdt")]
    assert Scoring(HEADS[kind], fusions).graph_safe
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7, 24], seed=2)
    expected = greedy_reference(model, frames, lengths, max_symbols_per_frame=3, fusions=fusions).hypotheses()
    for window, replay in ((1, "loops"), (4, "step_graphs")):
        search = LabelLoopingSearch(model, frames, lengths, 3, window, in_place=True, scoring=Scoring(model.head, fusions))
        search.run() if replay == "loops" else run_step_pieces(search, *step_pieces(search))
        assert_same_hypotheses(search.result().hypotheses(), expected)
