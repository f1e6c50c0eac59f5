"""Beam search against greedy decoding: the best hypothesis scores at least greedy's (bench/beam_quality.py measures
it on parakeet-sized decoders; these are small ones with the same token loops), and ``keep_greedy`` guarantees it."""

import pytest
import torch

from helpers import same
from transdec.decoding import DecodingConfig, decode
from transdec.decoding.beam.alsd_pp import AlsdPlusOptions
from transdec.decoding.beam.streaming import BeamStreams
from transdec.model.synthetic import random_decoder, random_encoder_output
from transdec.protocol import HeadSpec

HEADS = {
    "rnnt": HeadSpec("rnnt", num_tokens=32),
    "tdt": HeadSpec("tdt", num_tokens=32, durations=(0, 1, 2, 3, 4)),
    "multiblank": HeadSpec("multiblank", num_tokens=32, big_blank_durations=(2, 4, 8)),
}
LENGTHS = [23, 31, 17, 40, 28, 35, 12, 26]
MAX_SYMBOLS = 3
#: Where each search must never end below greedy decoding on these problems: beam sizes, options.
TARGETS = {"beam_wind_batched": ((2, 4, 8), {}), "beam_alsd_pp": ((8,), {"dominance_slots": 2}),
           "beam_aes_pp": ((8,), {})}


def loopy_problem(kind: str, blank_rate: float, seed: int, frames_seed: int):
    """A decoder whose greedy path often emits MAX_SYMBOLS tokens at a frame (1.4-2.2 tokens per frame for RNN-T at
    these blank rates), and 8 utterances."""
    model = random_decoder(HEADS[kind], "lstm", encoder_dim=16, predictor_dim=32, joint_dim=32, num_layers=2,
                           blank_rate=blank_rate, seed=seed, dtype=torch.float64)
    frames, lengths = random_encoder_output(LENGTHS, 16, seed=frames_seed, dtype=torch.float64)
    return model, frames, lengths


def below_greedy(model, frames, lengths, strategy: str, **options) -> list[float]:
    """How far below greedy's score each utterance's best hypothesis ends (the gaps over 1e-6)."""
    greedy = decode(model, frames, lengths, DecodingConfig("greedy_label", max_symbols_per_frame=MAX_SYMBOLS))
    best = decode(model, frames, lengths, DecodingConfig(strategy, max_symbols_per_frame=MAX_SYMBOLS, **options))
    gaps = [b.score - g.score for b, g in zip(best.hypotheses(), greedy.hypotheses(), strict=True)]
    return [gap for gap in gaps if gap < -1e-6]


@pytest.mark.parametrize("blank_rate", [0.5, 0.2])
@pytest.mark.parametrize("kind", list(HEADS))
def test_beam_search_does_not_end_below_greedy(kind, blank_rate):
    """WIND beam search at every beam size (its flood of tokens at the earliest frame ended every utterance here
    below greedy), AES++ at beam 8, and ALSD++ at beam 8 with a quarter of the beam kept by dominance (Saon's
    plain ranking, its default, ended 5 of these 24 below greedy)."""
    model, frames, lengths = loopy_problem(kind, blank_rate, seed=5, frames_seed=3)
    for strategy, (beams, options) in TARGETS.items():
        if strategy == "beam_wind_batched" and kind != "rnnt":
            continue
        for beam in beams:
            assert below_greedy(model, frames, lengths, strategy, beam_size=beam, **options) == [], (strategy, beam)


@pytest.mark.parametrize("strategy", ["beam_alsd_pp", "beam_alsd", "beam_aes_pp", "beam_wind_batched", "beam_wind",
                                      "beam_maes"])
def test_keep_greedy_keeps_greedy_decodings_hypothesis(strategy):
    """On a problem where a narrow ALSD beam ends below greedy: with keep_greedy the n-best is the best of the
    search's own n-best and greedy's hypothesis (one per token sequence), so no best scores below greedy's."""
    model, frames, lengths = loopy_problem("rnnt", 0.5, seed=0, frames_seed=0)
    if strategy == "beam_alsd_pp":
        assert len(below_greedy(model, frames, lengths, strategy, beam_size=2)) >= 2
    options = dict(beam_size=2, nbest=2, max_symbols_per_frame=MAX_SYMBOLS)
    greedy = decode(model, frames, lengths, DecodingConfig("greedy_label", max_symbols_per_frame=MAX_SYMBOLS))
    plain = decode(model, frames, lengths, DecodingConfig(strategy, **options))
    kept = decode(model, frames, lengths, DecodingConfig(strategy, keep_greedy=True, **options))
    inserted = 0
    for own, guarded, want in zip(plain.nbest, kept.nbest, greedy.hypotheses(), strict=True):
        assert guarded[0].score >= want.score - 1e-9
        candidates = {tuple(h.tokens): h for h in own}
        if tuple(want.tokens) not in candidates or candidates[tuple(want.tokens)].score < want.score - 1e-9:
            candidates[tuple(want.tokens)] = want
        expected = sorted(candidates.values(), key=lambda h: -h.score)[:2]
        assert [(h.tokens, h.timestamps, h.durations) for h in guarded] == [
            (h.tokens, h.timestamps, h.durations) for h in expected]
        assert [h.score for h in guarded] == pytest.approx([h.score for h in expected], abs=1e-9)
        assert all(h.am_score is not None for h in guarded)
        inserted += any(h.tokens == want.tokens and not any(same(h, o) for o in own) for h in guarded)
    assert inserted >= (2 if strategy in ("beam_alsd_pp", "beam_alsd") else 0)
    assert kept.stats.joint_calls > plain.stats.joint_calls  # the greedy search's


def test_keep_greedy_is_off_by_default_and_not_streamed():
    assert DecodingConfig("beam_alsd_pp").options.keep_greedy is False
    model, _, _ = loopy_problem("rnnt", 0.5, seed=0, frames_seed=0)
    with pytest.raises(ValueError, match="keep_greedy is not offered when streaming"):
        BeamStreams(model, 2, AlsdPlusOptions(keep_greedy=True))
