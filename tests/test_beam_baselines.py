"""Graves' beam search and mAES (per utterance): brute force on tiny problems, batch invariance, n-best lists,
fusion with early and late pruning, prediction-network caching, the symbol limit and option checks."""

import itertools
import math

import pytest
import torch

from brute_force import all_paths, best_path, sequence_scores
from helpers import HEADS, PREDICTORS, BigramScorer, encoder_batch, model_for, tiny_problem
from transdec.decoding import DecodingConfig, Fusion, decode, greedy_reference
from transdec.decoding.beam.graves import GravesOptions, beam_graves
from transdec.decoding.beam.maes import MaesOptions, beam_maes
from transdec.protocol import HeadSpec

# helpers.TINY_HEADS and a TDT head without duration 0.
BASELINE_TINY_HEADS = {
    "rnnt": HeadSpec("rnnt", 2),
    "tdt": HeadSpec("tdt", 2, durations=(0, 1, 2)),
    "tdt_no_zero": HeadSpec("tdt", 2, durations=(1, 2)),
    "multiblank": HeadSpec("multiblank", 2, big_blank_durations=(2,)),
}
SEARCHES = [beam_graves, beam_maes]
MAX_SYMBOLS = 2
# Settings under which each search prunes nothing: every path of a tiny problem is counted.
WIDE = {
    beam_graves: dict(beam_size=100_000, nbest=100_000),
    beam_maes: dict(beam_size=100_000, nbest=100_000, expansion_beta=100, expansion_gamma=math.inf,
                    num_steps=MAX_SYMBOLS),
}
NARROW = {
    beam_graves: [dict(beam_size=1), dict(beam_size=2, nbest=2), dict(beam_size=3, nbest=3)],
    beam_maes: [dict(beam_size=1, expansion_beta=0, num_steps=1), dict(beam_size=2, nbest=2),
                dict(beam_size=3, nbest=3, expansion_beta=1, expansion_gamma=0.5, num_steps=3),
                dict(beam_size=2, nbest=2, expansion_beta=0, expansion_gamma=math.inf, num_steps=1)],
}


def utterances(frames, lengths):
    """Each utterance alone: ``(frames [1, T, D], lengths [1])`` and its frames ``[T, D]``."""
    for b, length in enumerate(lengths.tolist()):
        yield (frames[b : b + 1, :length], lengths[b : b + 1]), frames[b, :length]


def alignment(hyp):
    return tuple(hyp.tokens), tuple(hyp.timestamps), tuple(hyp.durations)


def path_scores(paths):
    """The scores of the paths with each (tokens, timestamps, durations): several where blanks of different
    durations lead through the same token alignment."""
    scores = {}
    for p in paths:
        scores.setdefault((p.tokens, p.timestamps, p.durations), []).append(p.score)
    return scores


def is_path_score(score, candidates) -> bool:
    return any(score == pytest.approx(c, abs=1e-9) for c in candidates)


@torch.inference_mode()
def label_logprobs_along(model, frames, hyp) -> list[float]:
    """The Transducer's log-prob of each token of ``hyp`` at its frame after the tokens before it."""
    head, predictor, joint = model.head, model.predictor, model.joint
    encoder_proj = joint.project_encoder(frames.unsqueeze(0))[0]
    out, state = predictor.step(torch.tensor([head.predictor_blank_id]), predictor.initial_state(1))
    logprobs = []
    for token, frame in zip(hyp.tokens, hyp.timestamps):
        logits = joint.combine(encoder_proj[frame], joint.project_predictor(out)[0])
        logprobs.append(float(logits[: head.num_labels].log_softmax(0)[token]))
        out, state = predictor.step(torch.tensor([token]), state)
    return logprobs


def same_exactly(a, b) -> bool:
    """Stricter than ``helpers.same``: the same alignment, and the same scores, acoustic ones too, to 1e-12."""
    return (alignment(a) == alignment(b) and a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-12)
            and a.score == pytest.approx(b.score, abs=1e-12) and a.am_score == pytest.approx(b.am_score, abs=1e-12))


@pytest.mark.parametrize("kind, predictor", list(itertools.product(BASELINE_TINY_HEADS, PREDICTORS)))
@pytest.mark.parametrize("search", SEARCHES)
def test_a_wide_search_counts_every_path(search, kind, predictor):
    """Pruning nothing, summation gives every sequence its total probability (so the best is the sequence with the
    highest), with the alignment of its best path; max merging finds the best path."""
    model, frames, lengths = tiny_problem(kind, predictor, seed=3, heads=BASELINE_TINY_HEADS)
    for one, utterance_frames in utterances(frames, lengths):
        paths = all_paths(model, utterance_frames, MAX_SYMBOLS)
        by_sequence = sequence_scores(paths)
        best_of_sequence = {}
        for path in paths:
            if path.tokens not in best_of_sequence or path.score > best_of_sequence[path.tokens].score:
                best_of_sequence[path.tokens] = path
        summed = search(model, *one, max_symbols_per_frame=MAX_SYMBOLS, merge="logsumexp", **WIDE[search]).nbest[0]
        assert len(summed) == len(by_sequence)
        assert tuple(summed[0].tokens) == max(by_sequence, key=by_sequence.get)
        for hyp in summed:
            assert hyp.score == pytest.approx(by_sequence[tuple(hyp.tokens)], abs=1e-9)
            assert hyp.am_score == pytest.approx(hyp.score, abs=1e-12)
            viterbi = best_of_sequence[tuple(hyp.tokens)]
            assert alignment(hyp) == (viterbi.tokens, viterbi.timestamps, viterbi.durations)
            assert hyp.token_logprobs == pytest.approx(label_logprobs_along(model, utterance_frames, hyp), abs=1e-12)
        best = search(model, *one, max_symbols_per_frame=MAX_SYMBOLS, merge="max", **WIDE[search]).hypotheses()[0]
        optimum = best_path(paths)
        assert alignment(best) == (optimum.tokens, optimum.timestamps, optimum.durations)
        assert best.score == pytest.approx(optimum.score, abs=1e-9)


@pytest.mark.parametrize("kind, predictor", list(itertools.product(BASELINE_TINY_HEADS, PREDICTORS)))
@pytest.mark.parametrize("search", SEARCHES)
def test_a_narrow_search_counts_real_paths_at_most_once(search, kind, predictor):
    """With pruning, every hypothesis is a real path (max) or at most its sequence's total (sum), so the best never
    beats the optimum."""
    model, frames, lengths = tiny_problem(kind, predictor, seed=5, heads=BASELINE_TINY_HEADS)
    for one, utterance_frames in utterances(frames, lengths):
        paths = all_paths(model, utterance_frames, MAX_SYMBOLS)
        by_sequence, scores = sequence_scores(paths), path_scores(paths)
        for options in NARROW[search]:
            for hyp in search(model, *one, max_symbols_per_frame=MAX_SYMBOLS, merge="logsumexp", **options).nbest[0]:
                assert alignment(hyp) in scores
                assert hyp.score <= by_sequence[tuple(hyp.tokens)] + 1e-9
            for hyp in search(model, *one, max_symbols_per_frame=MAX_SYMBOLS, merge="max", **options).nbest[0]:
                assert is_path_score(hyp.score, scores[alignment(hyp)])
                assert hyp.score <= best_path(paths).score + 1e-12


@pytest.mark.parametrize("kind, predictor", list(itertools.product(HEADS, PREDICTORS)))
def test_maes_of_width_one_with_one_candidate_is_greedy(kind, predictor):
    """One hypothesis expanded by its best emission only, with a step for every token the limit allows: greedy
    decoding. (Graves' search of width 1 is not: its final choice among the sequences that left a frame can prefer
    a prefix of greedy's.)"""
    model = model_for(kind, predictor, "label_heavy")
    frames, lengths = encoder_batch([0, 1, 24, 13, 7], seed=1)
    greedy = greedy_reference(model, frames, lengths, max_symbols_per_frame=3).hypotheses()
    maes = beam_maes(model, frames, lengths, max_symbols_per_frame=3, beam_size=1, expansion_beta=0, num_steps=3).hypotheses()
    for a, b in zip(maes, greedy):
        assert alignment(a) == alignment(b) and a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-12)
        assert a.score == pytest.approx(b.score, abs=1e-9)


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("search", SEARCHES)
def test_an_utterance_decodes_the_same_alone_and_in_a_padded_batch(search, kind):
    model = model_for(kind, "lstm", "label_heavy")
    lengths_list = [0, 1, 13, 7, 19]
    frames, lengths = encoder_batch(lengths_list, seed=2, extra_padding=4)
    batched = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=4).nbest
    for b, length in enumerate(lengths_list):
        alone = search(model, frames[b : b + 1, :length], lengths[b : b + 1], max_symbols_per_frame=3, beam_size=4, nbest=4).nbest[0]
        assert len(alone) == len(batched[b]) and all(same_exactly(x, y) for x, y in zip(alone, batched[b]))


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("search", SEARCHES)
def test_nbest_is_sorted_unique_and_length_norm_reranks(search, kind):
    model = model_for(kind, "stateless", "label_heavy")
    frames, lengths = encoder_batch([20, 11], seed=5)
    result = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=6, nbest=5)
    for hyps in result.nbest:
        assert 1 < len(hyps) <= 5
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps)
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    assert result.hypotheses() == [hyps[0] for hyps in result.nbest]
    assert result.hyps.to_hypotheses()[0].tokens == result.nbest[0][0].tokens
    for hyps in search(model, frames, lengths, max_symbols_per_frame=3, beam_size=6, nbest=5, length_norm=True).nbest:
        per_token = [h.score / max(len(h.tokens), 1) for h in hyps]
        assert per_token == sorted(per_token, reverse=True)


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("search", SEARCHES)
def test_fusion_changes_the_search_and_keeps_acoustic_scores_apart(search, kind):
    model = model_for(kind, "stateless", "label_heavy")
    frames, lengths = encoder_batch([24, 13, 7], seed=6)
    fusions = [Fusion(BigramScorer(HEADS[kind].num_tokens, seed=3), 0.8, token_bonus=0.1, blank_scoring=True)]
    fused = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=2, fusions=fusions).nbest
    plain = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=4, nbest=2).nbest
    assert [[h.tokens for h in n] for n in fused] != [[h.tokens for h in n] for n in plain]
    assert all(h.am_score != pytest.approx(h.score) for n in fused for h in n)
    assert all(h.am_score == h.score for n in plain for h in n)


@pytest.mark.parametrize("kind", list(BASELINE_TINY_HEADS))
@pytest.mark.parametrize("pruning", ["late", "early"])
def test_fused_wide_searches_sum_every_path_alike(kind, pruning):
    """With fusion and no pruning both searches sum every path; a best path's acoustic score is the brute force
    score of that path, and a sequence's summed acoustic score is its brute-force total."""
    model, frames, lengths = tiny_problem(kind, "lstm", seed=4, heads=BASELINE_TINY_HEADS)
    fusions = [Fusion(BigramScorer(BASELINE_TINY_HEADS[kind].num_tokens, seed=1), 1.5, token_bonus=0.2)]
    for one, utterance_frames in utterances(frames, lengths):
        paths = all_paths(model, utterance_frames, MAX_SYMBOLS)
        by_sequence, scores = sequence_scores(paths), path_scores(paths)
        graves, maes = (search(model, *one, max_symbols_per_frame=MAX_SYMBOLS, merge="logsumexp", pruning=pruning, fusions=fusions,
                               **WIDE[search]).nbest[0]
                        for search in SEARCHES)
        assert len(graves) == len(maes) == len(by_sequence)
        for a, b in zip(graves, maes):
            assert alignment(a) == alignment(b) and a.score == pytest.approx(b.score, abs=1e-9)
            assert a.am_score == pytest.approx(by_sequence[tuple(a.tokens)], abs=1e-9)
        for search in SEARCHES:
            best = search(model, *one, max_symbols_per_frame=MAX_SYMBOLS, merge="max", pruning=pruning, fusions=fusions,
                          **WIDE[search]).hypotheses()[0]
            assert is_path_score(best.am_score, scores[alignment(best)])


@pytest.mark.parametrize("kind, predictor", list(itertools.product(BASELINE_TINY_HEADS, PREDICTORS)))
@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("merge", ["logsumexp", "max"])
def test_early_pruning_with_a_wide_beam_is_late_pruning(search, kind, predictor, merge):
    """Pruning nothing, it does not matter when the fusion scores count: the same n-best, scores and alignments."""
    model, frames, lengths = tiny_problem(kind, predictor, seed=6, heads=BASELINE_TINY_HEADS)
    fusions = [Fusion(BigramScorer(BASELINE_TINY_HEADS[kind].num_tokens, seed=2), 2.0, token_bonus=0.3,
                      blank_scoring=True)]
    for one, _ in utterances(frames, lengths):
        late = search(model, *one, max_symbols_per_frame=MAX_SYMBOLS, merge=merge, fusions=fusions, **WIDE[search]).nbest[0]
        early = search(model, *one, max_symbols_per_frame=MAX_SYMBOLS, merge=merge, pruning="early", fusions=fusions,
                       **WIDE[search]).nbest[0]
        assert len(early) == len(late) > 1
        for a, b in zip(early, late):
            assert alignment(a) == alignment(b) and a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-12)
            assert a.score == pytest.approx(b.score, abs=1e-9) and a.am_score == pytest.approx(b.am_score, abs=1e-9)


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("search", SEARCHES)
def test_early_pruning_ranks_by_the_transducer_alone(search, kind):
    """With a narrow beam and a strong LM, early pruning keeps other hypotheses than late pruning; without fusion the
    two are one search."""
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch([24, 13, 7, 19], seed=9)
    fusions = [Fusion(BigramScorer(HEADS[kind].num_tokens, seed=5), 2.0)]
    late = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=2, nbest=2, fusions=fusions).nbest
    early = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=2, nbest=2, pruning="early", fusions=fusions).nbest
    assert [[h.tokens for h in n] for n in late] != [[h.tokens for h in n] for n in early]
    assert all(h.am_score != pytest.approx(h.score) for n in early for h in n if h.tokens)
    plain = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=2, nbest=2, pruning="early").nbest
    late_plain = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=2, nbest=2).nbest
    assert all(same_exactly(a, b) for x, y in zip(plain, late_plain) for a, b in zip(x, y))


class CountingPredictor:
    """An LSTM predictor that records, row by row, the state and label it was run on."""

    def __init__(self, predictor):
        self.predictor, self.calls, self.runs = predictor, 0, []

    def initial_state(self, batch_size):
        return self.predictor.initial_state(batch_size)

    def step(self, labels, state):
        self.calls += 1
        h, c = state  # [layers, B, H] each
        for i, label in enumerate(labels.tolist()):
            self.runs.append((tuple(h[:, i].flatten().tolist()), tuple(c[:, i].flatten().tolist()), label))
        return self.predictor.step(labels, state)

    def select_state(self, mask, if_true, if_false):
        return self.predictor.select_state(mask, if_true, if_false)

    def gather_state(self, state, indices):
        return self.predictor.gather_state(state, indices)


class Wrapped:
    def __init__(self, model):
        self.head, self.joint, self.predictor = model.head, model.joint, CountingPredictor(model.predictor)


@pytest.mark.parametrize("search", SEARCHES)
def test_the_predictor_runs_once_per_sequence(search):
    """Prediction-network caching: no sequence is fed to the predictor twice (a state and label pair fed twice would be
    a sequence fed twice: a sequence's state is computed once and copied exactly into later batches)."""
    model = Wrapped(model_for("rnnt", "lstm", "label_heavy"))
    frames, lengths = encoder_batch([13], seed=3)
    result = search(model, frames, lengths, max_symbols_per_frame=3, beam_size=4)
    runs = model.predictor.runs
    assert len(set(runs)) == len(runs) > 0
    assert model.predictor.calls == result.stats.predictor_calls
    assert result.stats.joint_calls > 0


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("search, options", [(beam_graves, {}), (beam_maes, dict(num_steps=3))])
@pytest.mark.parametrize("max_symbols", [1, 2])
def test_no_hypothesis_exceeds_the_symbol_limit(search, options, kind, max_symbols):
    model = model_for(kind, "lstm", "label_heavy")
    frames, lengths = encoder_batch([16, 9], seed=4)
    for hyps in search(model, frames, lengths, max_symbols_per_frame=max_symbols, beam_size=4, nbest=4, **options).nbest:
        for hyp in hyps:
            at_frame = [sum(1 for t, d in zip(hyp.timestamps, hyp.durations) if t == frame and d == 0)
                        for frame in set(hyp.timestamps)]
            assert max(at_frame, default=0) <= max_symbols


def test_the_strategies_are_registered_with_their_options():
    model = model_for("tdt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([12, 5], seed=7)
    for name in ("beam_graves", "beam_maes"):
        config = DecodingConfig(name, beam_size=3, nbest=2)
        assert config.options.merge == "logsumexp"
        assert [len(n) for n in decode(model, frames, lengths, config).nbest_hypotheses()] == [2, 2]
    assert DecodingConfig("beam_maes").options == MaesOptions(expansion_beta=2, expansion_gamma=2.3, num_steps=2)


@pytest.mark.parametrize("options_class, values, message", [
    (GravesOptions, dict(merge="none"), "merges the paths to a token sequence by construction"),
    (MaesOptions, dict(merge="none"), "merges the paths to a token sequence by construction"),
    (GravesOptions, dict(merge="sum"), "merge must be one of"),
    (GravesOptions, dict(beam_size=2, nbest=3), "nbest must lie"),
    (GravesOptions, dict(beam_size=0), "beam_size must be a positive integer"),
    (GravesOptions, dict(max_symbols_per_frame=0), "max_symbols_per_frame must be at least 1"),
    (MaesOptions, dict(expansion_beta=-1), "expansion_beta must be a non-negative integer"),
    (MaesOptions, dict(expansion_beta=1.5), "expansion_beta must be a non-negative integer"),
    (MaesOptions, dict(expansion_gamma=-0.5), "expansion_gamma must be a non-negative number"),
    (MaesOptions, dict(expansion_gamma=float("nan")), "expansion_gamma must be a non-negative number"),
    (MaesOptions, dict(num_steps=0), "num_steps must be a positive integer"),
    (MaesOptions, dict(num_steps=True), "num_steps must be a positive integer"),
    (GravesOptions, dict(pruning="never"), "pruning must be one of"),
    (MaesOptions, dict(pruning="sometimes"), "pruning must be one of"),
])
def test_bad_options_are_rejected(options_class, values, message):
    with pytest.raises(ValueError, match=message):
        options_class(**values)
    search = beam_graves if options_class is GravesOptions else beam_maes
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([3], seed=0)
    with pytest.raises(ValueError, match=message):
        search(model, frames, lengths, **values)
