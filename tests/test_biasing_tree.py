"""Phrase boosting's tensors against the plain Python rule, their storage, files, phrases and the Boost fusion."""

import math
import random
import time
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transdec.adapters.onnx_files import TokensTokenizer
from transdec.biasing import (DEFAULT_WEIGHT, Boost, BoostingTree, BoostPhrase, case_variants_of, read_phrase_file,
                              tokenize_phrases)
from transdec.biasing.reference import ReferenceBoosting
from transdec.decoding import Fusion, Scoring, TokenScorer
from transdec.model.tokenizer import Tokenizer
from transdec.protocol import HeadSpec

CPU = torch.device("cpu")


# --- The tensors against the reference ------------------------------------------------------------------------------

@st.composite
def phrase_sets(draw):
    """``(vocab_size, phrase lists, depth_scaling)``: few tokens, so that phrases overlap, repeat tokens, are prefixes
    of each other and make long failure chains."""
    vocab = draw(st.integers(1, 5))
    phrase = st.tuples(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=6),
                       st.sampled_from([1.0, 0.5, 2.0, 0.25, 3.0]))
    lists = draw(st.lists(st.lists(phrase, max_size=7), min_size=1, max_size=3))
    return vocab, lists, draw(st.sampled_from([0.0, 0.5, 2.0]))


def check_against_reference(vocab, lists, depth_scaling, streams, utterance_lists, beam):
    """Every row of a batch laid out utterance-major (``beam`` rows per utterance, utterance ``b`` on list
    ``utterance_lists[b]``) reads its stream: bonuses of every token, end bonuses and states equal the reference."""
    tree = BoostingTree.build(lists, vocab, depth_scaling, dtype=torch.float64)
    reference = ReferenceBoosting(lists, depth_scaling)
    view = tree.for_utterances(utterance_lists)
    rows = len(utterance_lists) * beam
    state = view.initial_state(rows, CPU)
    expected = [reference.initial_state(utterance_lists[r // beam]) for r in range(rows)]
    totals = [0.0] * rows
    for step in range(max(map(len, streams))):
        bonuses = view.token_logprobs(state)
        assert bonuses.shape == (rows, vocab)
        want = torch.tensor([[reference.bonus(s, t) for t in range(vocab)] for s in expected], dtype=torch.float64)
        torch.testing.assert_close(bonuses, want, rtol=0, atol=1e-12)
        torch.testing.assert_close(view.end_bonus(state), torch.tensor([reference.end_bonus(s) for s in expected],
                                                                      dtype=torch.float64), rtol=0, atol=1e-12)
        tokens = torch.tensor([stream[step] if step < len(stream) else 0 for stream in streams])
        reading = torch.tensor([step < len(stream) for stream in streams])
        for r in range(rows):
            if reading[r]:
                totals[r] += float(bonuses[r, tokens[r]])
        state = view.select_state(reading, view.advance(state, tokens), state)
        expected = [reference.goto(s, int(t)) if go else s for s, t, go in zip(expected, tokens, reading)]
        assert [tree.prefix(int(n)) for n in state] == expected
    return totals, [float(b) for b in view.end_bonus(state)], expected, reference


@settings(max_examples=60, deadline=None)
@given(data=phrase_sets(), seed=st.integers(0, 10**6), beam=st.integers(1, 3))
def test_the_tensors_score_as_the_reference(data, seed, beam):
    vocab, lists, depth_scaling = data
    rng = random.Random(seed)
    utterance_lists = [rng.randrange(len(lists)) for _ in range(rng.randint(1, 4))]
    # Streams made of phrase pieces as well as random tokens, so that matches start, complete and fail.
    pieces = [tokens for phrases in lists for tokens, _ in phrases] or [[0]]
    streams = []
    for _ in range(len(utterance_lists) * beam):
        stream = []
        while len(stream) < rng.randint(0, 24):
            stream += rng.choice(pieces)[: rng.randint(1, 6)] if rng.random() < 0.7 else [rng.randrange(vocab)]
        streams.append(stream)
    streams[0] = streams[0] or [0]
    totals, ends, states, reference = check_against_reference(vocab, lists, depth_scaling, streams, utterance_lists,
                                                              beam)
    # Over a whole stream the bonuses and the end bonus add up to the parts the completed phrases earned.
    for stream, total, end, row in zip(streams, totals, ends, range(len(streams))):
        index = utterance_lists[row // beam]
        _, visited, reference_end = reference.score(stream, index)
        assert end == pytest.approx(reference_end, abs=1e-12)
        assert total + end == pytest.approx(sum(reference.earned(s) for s in visited), abs=1e-9)


def totals(phrases, stream, vocab=5, depth_scaling=0.0):
    """(the bonus of each token, the end bonus) of ``stream`` in one list of ``phrases``."""
    tree = BoostingTree.build([phrases], vocab, depth_scaling, dtype=torch.float64)
    state, bonuses = tree.initial_state(1, CPU), []
    for token in stream:
        bonuses.append(float(tree.token_logprobs(state)[0, token]))
        state = tree.advance(state, torch.tensor([token]))
    return bonuses, float(tree.end_bonus(state)[0])


def test_the_rule_on_examples():
    a, b, c, d, e = range(5)
    # A partial match that fails is taken back; the completed prefix phrase is kept.
    assert totals([([a, b], 1.0), ([a, b, c, d], 1.0)], [a, b, c, e]) == ([1.0, 1.0, 1.0, -1.0], 0.0)
    assert totals([([a, b, c, d], 1.0)], [a, b, c, e]) == ([1.0, 1.0, 1.0, -3.0], 0.0)
    # A completed phrase is kept; one ending mid-match gives its open part back at the end.
    assert totals([([a, b], 2.0)], [c, a, b, e]) == ([0.0, 2.0, 2.0, 0.0], 0.0)
    assert totals([([a, b, c], 1.0)], [a, b]) == ([1.0, 1.0], -2.0)
    # A failure falls back to the longest suffix that is a phrase prefix, which is credited again.
    assert totals([([a, a, b], 1.0)], [a, a, a, b]) == ([1.0, 1.0, 0.0, 1.0], 0.0)
    # Depth scaling: the d-th token of a match earns w * (1 + s * (d - 1)).
    assert totals([([a, b, c], 1.0)], [a, b, c], depth_scaling=0.5) == ([1.0, 1.5, 2.0], 0.0)
    # The shared prefix of two phrases gets the larger weight, kept by either phrase completed, given back on failure.
    assert totals([([a, b], 1.0), ([a, c], 3.0)], [a, b]) == ([3.0, 1.0], 0.0)
    assert totals([([a, b], 1.0), ([a, c], 3.0)], [a, d]) == ([3.0, -3.0], 0.0)
    # The documented limitation: a phrase only inside a longer open match (an output link) earns nothing.
    assert sum(totals([([a, b, c, d], 1.0), ([b, c], 1.0)], [a, b, c, e])[0]) == 0.0
    assert sum(totals([([a, b, c, d], 1.0), ([b, c], 1.0)], [b, c, e])[0]) == 2.0


def test_long_failure_chains_and_repeated_tokens():
    a, b = 0, 1
    phrases = [([a] * 6 + [b], 1.0), ([a] * 3, 0.5), ([a, b, a, b, a, a], 2.0)]
    stream = [a] * 9 + [b] + [a, b, a, b, a, b, a, a, a, a, b]
    check_against_reference(2, [phrases], 0.5, [stream], [0], 1)


def test_roots_are_independent_and_views_lay_out_utterance_major():
    tree = BoostingTree.build([[([0, 1], 1.0)], [], [([1], 2.0)]], 3)
    assert isinstance(tree, TokenScorer) and tree.graph_safe and tree.num_roots == 3
    assert tree.initial_state(4, CPU).tolist() == [0] * 4
    view = tree.for_utterances(torch.tensor([2, 0, 1]))
    assert view.num_utterances == 3 and tree.num_utterances is None
    roots = tree.root_node.tolist()
    assert view.initial_state(6, CPU).tolist() == [roots[2]] * 2 + [roots[0]] * 2 + [roots[1]] * 2
    assert view.token_logprobs(view.initial_state(3, CPU)).tolist() == [[0, 2, 0], [1, 0, 0], [0, 0, 0]]
    assert view.for_utterance(1).initial_state(2, CPU).tolist() == [roots[0]] * 2
    assert tree.for_utterance(5) is tree
    # Views of the same tables and lists are equal (CUDA graph caches key on them), others are not.
    assert view == tree.for_utterances([2, 0, 1]) and hash(view) == hash(tree.for_utterances([2, 0, 1]))
    assert view != tree.for_utterances([2, 0, 0]) and view != tree and tree.to("cpu") is tree
    with pytest.raises(ValueError, match="cannot start 4 hypotheses"):
        view.initial_state(4, CPU)
    with pytest.raises(ValueError, match="utterance 3 of a boosting view made for 3"):
        view.for_utterance(3)
    with pytest.raises(ValueError, match="must lie in 0 .. 2"):
        tree.for_utterances([0, 3])
    state = torch.tensor([roots[0], roots[1], roots[2]])
    moved = tree.advance(state, torch.tensor([0, 0, 1]))
    assert tree.gather_state(moved, torch.tensor([2, 0])).tolist() == [moved[2], moved[0]]
    assert tree.select_state(torch.tensor([True, False, True]), moved, state).tolist() == [moved[0], roots[1], moved[2]]


def test_build_refuses_bad_phrases():
    for lists, message in [([[([], 1.0)]], "phrase 0: no tokens"), ([[([0, 7], 1.0)]], r"must lie in 0 \.\. 4"),
                           ([[([0], math.inf)]], "finite"), ([[([0], "x")]], "finite"), ([[[0, 1]]], "expected"),
                           ([], "at least one")]:
        with pytest.raises(ValueError, match=message):
            BoostingTree.build(lists, 5)
    with pytest.raises(ValueError, match="depth_scaling"):
        BoostingTree.build([[([0], 1.0)]], 5, depth_scaling=-1.0)
    with pytest.raises(ValueError, match="vocab_size"):
        BoostingTree.build([[([0], 1.0)]], 0)


def test_ten_thousand_phrases_stay_sparse():
    rng = random.Random(0)
    vocab = 1024
    phrases = [([rng.randrange(vocab) for _ in range(rng.randint(1, 6))], 1.0) for _ in range(10_000)]
    start = time.perf_counter()
    tree = BoostingTree.build([phrases], vocab)
    assert time.perf_counter() - start < 10
    stored = sum(getattr(tree, name).numel() for name in vars(tree) if isinstance(getattr(tree, name), torch.Tensor))
    # Every node inherits the arcs of the one-token node its failure link ends in (about 8 here): some 30 numbers a
    # node in all, where a [nodes, V] table would take 1024.
    assert tree.num_nodes > 20_000 and stored < 40 * tree.num_nodes
    states = torch.randint(0, tree.num_nodes, (64,))
    tokens = torch.randint(0, vocab, (64,))
    reference = ReferenceBoosting([phrases])
    nodes = [reference.goto(tree.prefix(int(s)), int(t)) for s, t in zip(states, tokens)]
    assert [tree.prefix(int(n)) for n in tree.advance(states, tokens)] == nodes


def test_save_and_load(tmp_path):
    tree = BoostingTree.build([[([0, 1, 2], 1.5), ([1, 2], 1.0)], [([3], 0.5)]], 5, depth_scaling=0.5)
    path = tmp_path / "tree.pt"
    tree.save(path)
    loaded = BoostingTree.load(path, dtype=torch.float64)
    assert (loaded.vocab_size, loaded.width, loaded.depth_scaling) == (5, tree.width, 0.5)
    assert loaded.root_gain.dtype == torch.float64
    states = torch.arange(tree.num_nodes)
    torch.testing.assert_close(loaded.token_logprobs(states).float(), tree.token_logprobs(states))
    for token in range(5):
        assert torch.equal(loaded.advance(states, torch.full_like(states, token)),
                           tree.advance(states, torch.full_like(states, token)))
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        BoostingTree.load(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_text("not a tree")
    with pytest.raises(ValueError, match="junk.pt: not a saved transdec boosting tree"):
        BoostingTree.load(tmp_path / "junk.pt")
    torch.save({"format": "something else"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="other.pt: not a saved transdec boosting tree"):
        BoostingTree.load(tmp_path / "other.pt")
    saved = torch.load(path, weights_only=True)
    del saved["tensors"]["arc_next"]
    torch.save(saved, tmp_path / "damaged.pt")
    with pytest.raises(ValueError, match=r"damaged.pt: a damaged saved transdec boosting tree file \(missing tensors \['arc_next'\]"):
        BoostingTree.load(tmp_path / "damaged.pt")


@pytest.mark.parametrize("dense", [True, False])
def test_a_graph_buffer_scores_as_each_tree_copied_into_it(dense, monkeypatch):
    """What CUDA graphs rely on to reuse one capture for trees made per batch: a buffer of the key's (padded)
    shapes, loaded with any tree of that key, scores, advances and ends as that tree, views' roots included."""
    from transdec.biasing import tree as tree_module

    if not dense:
        monkeypatch.setattr(tree_module, "DENSE_ENTRIES", 0)
    rng = random.Random(1)
    vocab = 12

    def random_tree(lists):
        phrase_lists = [[([rng.randrange(vocab) for _ in range(rng.randint(1, 4))], rng.choice([0.5, 1.0]))
                         for _ in range(rng.randint(3, 6))] for _ in range(lists)]
        return BoostingTree.build(phrase_lists, vocab, 0.5, dtype=torch.float64).for_utterances([1, 0, 2, 1])

    trees = [random_tree(3) for _ in range(6)]
    key = trees[0].graph_key()
    same_key = [tree for tree in trees if tree.graph_key() == key]
    assert len(same_key) >= 2 and (trees[0].dense_bonus is not None) == dense
    buffer = trees[0].graph_buffer()
    assert buffer.graph_key() == key and buffer.num_nodes >= trees[0].num_nodes
    for tree in same_key:
        tree.copy_to(buffer)
        states = torch.randint(0, tree.num_nodes, (40,))
        tokens = torch.randint(0, vocab, (40,))
        assert torch.equal(buffer.token_logprobs(states), tree.token_logprobs(states))
        assert torch.equal(buffer.advance(states, tokens), tree.advance(states, tokens))
        assert torch.equal(buffer.end_bonus(states), tree.end_bonus(states))
        assert torch.equal(buffer.initial_state(8, states.device), tree.initial_state(8, states.device))
    other = BoostingTree.build([[([1, 2], 1.0)]], vocab)
    with pytest.raises(ValueError, match="other shapes"):
        other.copy_to(buffer)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_tree_on_cuda_equals_cpu():
    rng = random.Random(1)
    lists = [[([rng.randrange(6) for _ in range(rng.randint(1, 4))], rng.choice([0.5, 1.0, 2.0])) for _ in range(9)]
             for _ in range(3)]
    tree = BoostingTree.build(lists, 6, 0.5)
    gpu = tree.to("cuda")
    states = torch.arange(tree.num_nodes)
    tokens = torch.randint(0, 6, states.shape)
    torch.testing.assert_close(gpu.token_logprobs(states.cuda()).cpu(), tree.token_logprobs(states), rtol=0, atol=0)
    assert torch.equal(gpu.advance(states.cuda(), tokens.cuda()).cpu(), tree.advance(states, tokens))
    assert torch.equal(gpu.end_bonus(states.cuda()).cpu(), tree.end_bonus(states))
    view = gpu.for_utterances(torch.tensor([2, 0], device="cuda"))
    roots = tree.root_node.tolist()
    assert view.initial_state(4, torch.device("cuda")).cpu().tolist() == [roots[i] for i in (2, 2, 0, 0)]


# --- Phrases --------------------------------------------------------------------------------------------------------

def test_phrase_files(tmp_path):
    path = tmp_path / "phrases.txt"
    path.write_bytes("\ufeff# names\nAnna Karenina\n\n  \nVronsky\t2.5\r\n  # indented comment\nLevin \t 0.5 \n"
                     .encode("utf-8"))
    assert read_phrase_file(path) == [BoostPhrase("Anna Karenina"), BoostPhrase("Vronsky", 2.5),
                                      BoostPhrase("Levin", 0.5)]
    for content, message in [("ok\nbad\tx\n", ":2: the weight 'x' is not a number"),
                             ("ok\nbad\tinf\n", ":2: the weight must be finite"),
                             ("\t2.0\n", ":1: a weight without a phrase"),
                             ("a\tb\t1\n", ":1: expected 'phrase' or 'phrase<TAB>weight'"),
                             ("", ": no phrases"), ("# only\n\n", ": no phrases")]:
        path.write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match=f"phrases.txt{message}"):
            read_phrase_file(path)
    path.write_bytes(b"fine\n\xff\xfe\n")
    with pytest.raises(ValueError, match="phrases.txt:2: not UTF-8"):
        read_phrase_file(path)
    with pytest.raises(ValueError, match="non-empty text"):
        BoostPhrase("  ")
    with pytest.raises(ValueError, match="finite"):
        BoostPhrase("x", math.nan)


def test_tokenizing_with_case_variants():
    assert case_variants_of("anna KARENINA") == ["anna KARENINA", "anna karenina", "Anna Karenina", "ANNA KARENINA"]
    assert case_variants_of("ANNA") == ["ANNA", "anna", "Anna"]
    tokenizer = Tokenizer.train(["Anna Karenina met Vronsky", "anna karenina", "ANNA KARENINA", "the train left"] * 3,
                                40)
    plain = tokenize_phrases(["Anna Karenina", BoostPhrase("Vronsky", 2.0)], tokenizer)
    assert plain == [(tokenizer.encode("Anna Karenina"), 1.0), (tokenizer.encode("Vronsky"), 2.0)]
    cased = tokenize_phrases([BoostPhrase("anna karenina", 1.5)], tokenizer, case_variants=True)
    assert cased == [(tokenizer.encode(text), 1.5) for text in ["anna karenina", "Anna Karenina", "ANNA KARENINA"]]
    assert len({tuple(tokens) for tokens, _ in cased}) == 3


def test_tokens_txt_tokenizer_encodes_and_unencodable_phrases_are_skipped():
    pieces = ["<unk>", "▁", "▁he", "llo", "l", "o", "▁w", "or", "ld", "h", "e"]
    tokenizer = TokensTokenizer(pieces)
    assert tokenizer.encode("hello  world") == [2, 3, 6, 7, 8]
    assert tokenizer.decode(tokenizer.encode("hello world")) == "hello world"
    assert tokenizer.encode("hex") == [2, 0]  # no piece for x: <unk>
    without_unk = TokensTokenizer(pieces[1:])
    with pytest.raises(ValueError, match="no token starts with 'x'"):
        without_unk.encode("hex")

    class Empty:
        vocab_size = 3

        def encode(self, text):
            return [] if text == "silence" else [1, 2]

    with pytest.warns(UserWarning) as caught:
        result = tokenize_phrases(["silence", "word"], Empty())
        result += tokenize_phrases(["hex", "hello"], without_unk)
    assert result == [([1, 2], 1.0), ([1, 2], 1.0)]
    assert "'silence' skipped: it tokenizes to nothing" in str(caught[0].message)
    assert "'hex' skipped: the tokenizer cannot encode it" in str(caught[1].message)
    with pytest.raises(TypeError, match="encode"):
        tokenize_phrases(["x"], object())


# --- The Boost fusion -----------------------------------------------------------------------------------------------

def test_boost_builds_its_tree_when_it_can():
    head = HeadSpec("rnnt", num_tokens=11)
    tokenizer = TokensTokenizer(["<unk>", "▁", "▁he", "llo", "l", "o", "▁w", "or", "ld", "h", "e"])
    by_ids = Boost([[2, 3], ([6, 7, 8], 2.0)], 1.5, vocab_size=11)
    assert isinstance(by_ids, Fusion) and by_ids.scorer.vocab_size == 11 and by_ids.weight == 1.5
    by_text = Boost(["hello", BoostPhrase("world", 2.0)], 1.5, tokenizer)
    scoring = Scoring(head, [by_ids, by_text])
    state = scoring.initial_state(1, CPU)
    context = scoring.context(state)
    torch.testing.assert_close(context[0], context[1])  # the same phrases, tokens and weight
    assert float(context[0][0, 6]) == 1.5 * 2.0 and Boost(["hello"]).weight == DEFAULT_WEIGHT
    # Unbound: text without a tokenizer, ids without a vocabulary size; bind() builds them.
    unbound = Boost(["hello", "world"], 1.5)
    assert unbound.scorer is None and unbound != Boost(["hello"], 1.5) and unbound == Boost(["hello", "world"], 1.5)
    with pytest.raises(ValueError, match="tokenizer=model.tokenizer"):
        Scoring(head, [unbound])
    with pytest.raises(ValueError, match="vocab_size=model.head.num_tokens"):
        Scoring(head, [Boost([[1, 2]])])
    bound = unbound.bind(tokenizer)
    assert bound.scorer is not None and bound.bind(None) is bound
    assert Scoring(head, [bound]).context(state[:1])[0][0, [2, 6]].tolist() == [1.5, 1.5]  # phrase weights 1
    # A tree built beforehand, as it is; its settings are its own.
    tree = BoostingTree.build([[([2, 3], 1.0)]], 11, depth_scaling=0.5)
    boost = Boost(tree, 2.0)
    assert boost.scorer is tree and boost.depth_scaling == 0.5 and boost == Boost(tree, 2.0) != Boost(tree, 1.0)
    assert hash(boost) == hash(Boost(tree, 2.0)) and boost.to("cpu").scorer is tree
    with pytest.raises(ValueError, match="fixed when a BoostingTree is built"):
        Boost(tree, 2.0, depth_scaling=1.0)
    with pytest.raises(ValueError, match="the model has 12"):
        Scoring(HeadSpec("rnnt", num_tokens=12), [boost])
    with pytest.raises(ValueError, match="at least one phrase"):
        Boost([])
    with pytest.raises(ValueError, match="Boost phrase 1"):
        Boost([[1], [1.5]], vocab_size=11)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Boost(["hello"], tokenizer=tokenizer, case_variants=True)  # no variant tokenizes to nothing
