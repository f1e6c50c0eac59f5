"""The sentencepiece Tokenizer: training, serialisation, encode/decode, word starts, errors."""

import pickle
import random

import pytest
import sentencepiece as spm
from hypothesis import given
from hypothesis import strategies as st

from transdec.model.tokenizer import Tokenizer

VOCAB_SIZE = 64

# Lower-case letters, apostrophe and space only, as an ASR text normaliser would leave them.
# Every letter a-z occurs (the pangrams make sure).
SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "pack my box with five dozen liquor jugs",
    "how vexingly quick daft zebras jump",
    "sphinx of black quartz judge my vow",
    "the weather today is cold and windy",
    "she sells sea shells by the sea shore",
    "we walked along the river in the morning",
    "please turn off the lights when you leave",
    "my brother plays the guitar every evening",
    "the train to the city leaves at seven",
    "can you tell me where the station is",
    "i would like a cup of tea with milk",
    "the children were playing in the garden",
    "it's going to rain later this afternoon",
    "they bought a new house near the park",
    "our teacher told us a story about a king",
    "the cat sat quietly on the warm window sill",
    "he forgot his keys at the office again",
    "there are seven days in a week",
    "the museum opens at nine in the morning",
    "she reads a book before going to sleep",
    "the doctor said i should rest for a while",
    "we need to buy bread eggs and cheese",
    "the music was too loud for the small room",
    "don't forget to call your mother tonight",
    "the old bridge was built a hundred years ago",
    "he runs five miles every saturday morning",
    "the birds were singing in the tall trees",
    "they visited their grandparents last summer",
    "the meeting has been moved to thursday",
    "a strong wind blew the leaves across the yard",
    "the recipe needs two spoons of sugar",
    "my phone battery is almost empty",
    "the film starts in twenty minutes",
    "we could hear the waves from our hotel",
    "the library is quiet in the evening",
    "her garden is full of red and yellow flowers",
    "the pilot announced that we would land soon",
    "he fixed the broken chair with glue",
    "the snow covered the mountains all winter",
    "they're waiting for the bus at the corner",
    "the jury took three hours to reach a verdict",
]
ALPHABET = sorted(set("".join(SENTENCES)) - {" "})

UNSEEN = [
    "zebras and jaguars juxtapose quixotic waxwings",
    "xylophone",
    "a",
    "jj qq zz xx",
    "kayak",
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(SENTENCES, VOCAB_SIZE)


def test_alphabet_is_complete():
    assert set("abcdefghijklmnopqrstuvwxyz") <= set(ALPHABET)


# ---------------------------------------------------------------------------------- vocabulary


def test_vocab_size_is_exact_and_all_ids_are_real_tokens(tok):
    assert tok.vocab_size == VOCAB_SIZE
    pieces = [tok.id_to_piece(i) for i in range(tok.vocab_size)]
    assert pieces[0] == "<unk>"
    assert len(set(pieces)) == VOCAB_SIZE
    assert not {"<s>", "</s>", "<pad>"} & set(pieces)  # no BOS/EOS/PAD: the blank lives outside, at V


def test_ids_are_in_range(tok):
    for text in SENTENCES + UNSEEN:
        ids = tok.encode(text)
        assert ids and all(0 <= i < tok.vocab_size for i in ids)


def test_training_accepts_a_lazy_iterable():
    lazy = Tokenizer.train((s for s in SENTENCES), VOCAB_SIZE)
    assert lazy.to_bytes() == Tokenizer.train(SENTENCES, VOCAB_SIZE).to_bytes()


def test_user_defined_symbols_stay_whole():
    tok = Tokenizer.train(SENTENCES + ["the <noise> came back"], VOCAB_SIZE, user_defined_symbols=["<noise>"])
    assert tok.id_to_piece(1) == "<noise>"
    assert 1 in tok.encode("we heard <noise> outside")
    assert tok.decode(tok.encode("we heard <noise> outside")) == "we heard <noise> outside"


def test_unigram_model_trains_and_round_trips():
    a = Tokenizer.train(SENTENCES, 48, model_type="unigram")
    b = Tokenizer.train(SENTENCES, 48, model_type="unigram")
    assert a.vocab_size == 48 and a.to_bytes() == b.to_bytes()
    for text in SENTENCES[:5] + UNSEEN:
        assert a.decode(a.encode(text)) == text


# ---------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("text", SENTENCES + UNSEEN)
def test_encode_decode_round_trip(tok, text):
    assert tok.decode(tok.encode(text)) == text


def test_whitespace_is_normalised(tok):
    assert tok.decode(tok.encode("  the   quick fox ")) == "the quick fox"
    assert tok.encode("  the   quick fox ") == tok.encode("the quick fox")
    assert tok.encode("") == [] and tok.decode([]) == ""


def test_no_lower_casing_or_unicode_folding(tok):
    # Normalisation is the caller's job: unseen characters (upper case, full-width) become <unk> (id 0).
    assert 0 in tok.encode("The")
    assert 0 in tok.encode("\uff54he")  # full-width t, which NFKC would fold to "t"
    assert 0 not in tok.encode("the")
    assert tok.decode([0]).strip() == "\u2047"


def test_encode_batch_matches_encode(tok):
    texts = SENTENCES[:7] + UNSEEN
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
    assert tok.encode_batch(iter(texts)) == [tok.encode(t) for t in texts]
    assert tok.encode_batch([]) == []


def test_pieces_match_ids(tok):
    text = SENTENCES[3]
    assert tok.pieces(text) == [tok.id_to_piece(i) for i in tok.encode(text)]
    assert "".join(tok.pieces(text)).replace("\u2581", " ").strip() == text


def test_decode_accepts_tensors(tok):
    torch = pytest.importorskip("torch")
    ids = tok.encode(SENTENCES[0])
    assert tok.decode(torch.tensor(ids)) == SENTENCES[0]


def test_bytes_round_trip(tok):
    data = tok.to_bytes()
    assert isinstance(data, bytes)
    again = Tokenizer.from_bytes(data)
    assert again.to_bytes() == data
    assert again.vocab_size == tok.vocab_size
    for text in SENTENCES + UNSEEN:
        assert again.encode(text) == tok.encode(text)


def test_pickle_round_trip(tok):
    again = pickle.loads(pickle.dumps(tok))
    assert again.to_bytes() == tok.to_bytes()
    assert again.encode(UNSEEN[0]) == tok.encode(UNSEEN[0])


def test_save_load_round_trip(tok, tmp_path):
    path = tmp_path / "tokenizer.model"
    tok.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer.model"]
    loaded = Tokenizer.load(str(path))
    assert loaded.to_bytes() == tok.to_bytes()
    for text in SENTENCES + UNSEEN:
        assert loaded.encode(text) == tok.encode(text)
    # A plain sentencepiece model file, usable without transdec.
    plain = spm.SentencePieceProcessor(model_file=str(path))
    assert plain.encode(UNSEEN[0]) == tok.encode(UNSEEN[0])


def test_training_writes_no_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Tokenizer.train(SENTENCES, VOCAB_SIZE)
    assert list(tmp_path.iterdir()) == []


def test_training_is_deterministic(tok):
    assert Tokenizer.train(SENTENCES, VOCAB_SIZE).to_bytes() == tok.to_bytes()
    assert Tokenizer.train(list(SENTENCES), VOCAB_SIZE).to_bytes() == tok.to_bytes()


# ---------------------------------------------------------------------------------- word starts


def test_word_starts(tok):
    text = "the cat sat on the windy bridge"
    ids = tok.encode(text)
    starts = tok.word_starts(ids)
    assert len(starts) == len(ids)
    assert starts == [tok.id_to_piece(i).startswith("\u2581") for i in ids]
    assert starts[0] and sum(starts) == len(text.split())
    assert _words(tok, ids, starts) == text.split()


def test_word_starts_of_frequent_words(tok):
    # "the" is frequent enough to be a single word-initial piece.
    ids = tok.encode("the")
    assert ids == [tok.encode("the the")[1]]
    assert tok.word_starts(ids) == [True]
    assert tok.word_starts([0]) == [False]  # <unk> never starts a word


def _words(tok, ids, starts):
    words: list[list[int]] = []
    for token_id, start in zip(ids, starts):
        if start:
            words.append([])
        words[-1].append(token_id)
    return [tok.decode(w) for w in words]


# ---------------------------------------------------------------------------------- property test


@given(st.lists(st.text(alphabet=ALPHABET + [" "], min_size=0, max_size=12), max_size=8))
def test_round_trip_property(tok, chunks):
    raw = " ".join(chunks)  # may have leading, trailing and repeated spaces
    text = " ".join(w for w in raw.split(" ") if w)  # sentencepiece's whitespace normalisation
    ids = tok.encode(raw)
    assert all(0 < i < tok.vocab_size for i in ids)  # no <unk>: every character was seen in training
    assert tok.decode(ids) == text
    starts = tok.word_starts(ids)
    assert sum(starts) == len(text.split())
    if text:
        assert _words(tok, ids, starts) == text.split()


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("bad", [VOCAB_SIZE, VOCAB_SIZE + 5, -1, -VOCAB_SIZE])
def test_decode_out_of_range_id_names_it(tok, bad):
    with pytest.raises(ValueError, match=rf"token id {bad}\b"):
        tok.decode([1, 2, bad, 3])
    with pytest.raises(ValueError, match=rf"token id {bad}\b"):
        tok.word_starts([bad])
    with pytest.raises(ValueError, match=rf"token id {bad}\b"):
        tok.id_to_piece(bad)


def test_decode_blank_id_is_called_out(tok):
    with pytest.raises(ValueError, match="blank"):
        tok.decode([tok.vocab_size])


def test_vocab_size_too_large_for_the_text():
    with pytest.raises(ValueError, match=r"vocab_size=5000 is too large"):
        Tokenizer.train(["abc abd", "cab bad"], 5000)


def test_vocab_size_smaller_than_the_alphabet():
    with pytest.raises(ValueError, match=r"vocab_size=10 is too small"):
        Tokenizer.train(SENTENCES, 10)


@pytest.mark.parametrize("texts", [[], [""], ["   ", ""]])
def test_empty_training_text(texts):
    with pytest.raises(ValueError, match="no non-blank text"):
        Tokenizer.train(texts, VOCAB_SIZE)


def test_bad_training_arguments():
    with pytest.raises(TypeError, match="not a single str"):
        Tokenizer.train("the quick brown fox", VOCAB_SIZE)
    with pytest.raises(TypeError, match="must be str"):
        Tokenizer.train(SENTENCES + [3], VOCAB_SIZE)
    with pytest.raises(ValueError, match="vocab_size"):
        Tokenizer.train(SENTENCES, 0)
    with pytest.raises(ValueError, match="model_type"):
        Tokenizer.train(SENTENCES, VOCAB_SIZE, model_type="char")
    with pytest.raises(ValueError, match="character_coverage"):
        Tokenizer.train(SENTENCES, VOCAB_SIZE, character_coverage=1.5)


def test_iterator_errors_propagate_unchanged():
    def texts():
        yield from SENTENCES
        raise KeyError("corpus broke")

    with pytest.raises(KeyError, match="corpus broke"):
        Tokenizer.train(texts(), VOCAB_SIZE)


@pytest.mark.parametrize("data", [b"", b"hello world", b"\n\x00", random.Random(0).randbytes(300)])
def test_from_bytes_rejects_garbage(data):
    with pytest.raises(ValueError, match="not a sentencepiece model"):
        Tokenizer.from_bytes(data)


def test_load_rejects_garbage_and_names_the_file(tmp_path):
    path = tmp_path / "bad.model"
    path.write_bytes(b"this is not a model")
    with pytest.raises(ValueError, match=r"bad\.model.*not a sentencepiece model"):
        Tokenizer.load(path)
