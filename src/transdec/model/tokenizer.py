"""A sentencepiece tokenizer that a Transducer checkpoint can carry inside itself.

:class:`Tokenizer` is a thin wrapper over a sentencepiece model (BPE by default) that

* trains in memory (no files read or written) and deterministically: the same texts in the same
  order give byte-identical models;
* serialises to ``bytes`` (:meth:`Tokenizer.to_bytes`) and loads back from them
  (:meth:`Tokenizer.from_bytes`), so a checkpoint can be one self-describing file, and saves to /
  loads from a plain sentencepiece ``.model`` file that the ``spm_*`` tools can inspect.

Id layout. Every id ``0 .. V-1`` (``V = tokenizer.vocab_size``) is a real token the model may emit;
the Transducer's blank is id ``V``, outside the tokenizer (the layout of
:mod:`transdec.protocol`). Trained tokenizers therefore have no BOS, EOS or PAD pieces. Id 0 is
``<unk>``: sentencepiece requires an unknown piece, and it is harmless as an output token. It stands
for characters not seen in training (none are dropped with the default ``character_coverage=1.0``,
so only text with new characters produces it), and decodes to ``" ⁇ "``.

Text normalisation. Trained tokenizers use sentencepiece's ``"identity"`` rule: text is tokenized as
given, with no Unicode (NFKC) folding, no lower-casing and no punctuation handling, so that
decoding gives back the encoded text (up to whitespace, below) for text over the training alphabet,
and hypotheses compare exactly against references. ASR text normalisation (case, punctuation,
numbers, Unicode form) is the caller's job, and the same normalisation must be applied to training
text and to later transcripts. The one thing sentencepiece always does is whitespace cleanup:
leading and trailing spaces are dropped and runs of spaces collapse to one (only U+0020 counts as a
space; tabs and newlines are ordinary characters), so for text over the training alphabet
``decode(encode(text)) == " ".join(w for w in text.split(" ") if w)``.
"""

from __future__ import annotations

import io
import operator
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import sentencepiece as spm

#: sentencepiece's word-boundary marker (U+2581 LOWER ONE EIGHTH BLOCK), prefixed to word-initial pieces.
WORD_BOUNDARY = "\u2581"

_MODEL_TYPES = ("bpe", "unigram")


class Tokenizer:
    """A sentencepiece model whose ids ``0 .. vocab_size - 1`` are all Transducer output tokens.

    Build one with :meth:`train`, :meth:`from_bytes` or :meth:`load`. Any valid sentencepiece model
    loads; models trained elsewhere may contain control pieces (``<s>``, ``</s>``), which then count
    towards :attr:`vocab_size` and decode to nothing.
    """

    def __init__(self, processor: spm.SentencePieceProcessor) -> None:
        """Wrap a loaded processor. Prefer the :meth:`train`, :meth:`from_bytes` and :meth:`load` constructors."""
        self._sp = processor
        self._word_starts = tuple(
            processor.id_to_piece(i).startswith(WORD_BOUNDARY) for i in range(processor.get_piece_size())
        )

    # ------------------------------------------------------------------ construction and serialisation

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        *,
        model_type: str = "bpe",
        character_coverage: float = 1.0,
        user_defined_symbols: Sequence[str] = (),
        split_digits: bool = False,
        max_sentence_length: int = 4192,
        seed_sentencepiece_size: int = 1_000_000,
        verbose: bool = False,
    ) -> Tokenizer:
        """Train a tokenizer in memory on ``texts`` (one transcript per item).

        Training is deterministic: one thread, every text used (no sampling), so the same texts in the
        same order give byte-identical :meth:`to_bytes`.

        Args:
            texts: training transcripts, already normalised the way model targets will be (see the
                module docstring); read once, lazily.
            vocab_size: ``V``, the exact number of tokens, ``<unk>`` and ``user_defined_symbols``
                included. The Transducer's blank is ``V``.
            model_type: ``"bpe"`` or ``"unigram"``. (For a character vocabulary, use BPE with
                ``vocab_size`` = number of distinct characters + 1.)
            character_coverage: fraction of characters the vocabulary must cover; the rarest of the
                rest become ``<unk>``. sentencepiece accepts 0.98 to 1.0.
            user_defined_symbols: pieces always kept whole (e.g. ``"<noise>"``), ids ``1, 2, ...``.
            split_digits: split numbers into single digits.
            max_sentence_length: texts longer than this many bytes are skipped (sentencepiece's limit).
            seed_sentencepiece_size: initial piece count of unigram training (unused by BPE).
            verbose: let sentencepiece log training progress to stderr. When quiet, sentencepiece's
                process-wide log level is raised for the call and put back to its default afterwards.

        Raises:
            ValueError: ``texts`` holds no non-blank text; ``vocab_size`` is larger than the text
                supports (too few distinct characters or words) or smaller than its character set;
                or another option is invalid.
            TypeError: an item of ``texts`` is not a ``str``.
        """
        if isinstance(texts, str):
            raise TypeError("texts must be an iterable of transcripts, not a single str")
        if operator.index(vocab_size) < 1:
            raise ValueError(f"vocab_size must be positive, got {vocab_size}")
        if model_type not in _MODEL_TYPES:
            raise ValueError(f"unknown model_type {model_type!r}; choose from {list(_MODEL_TYPES)}")
        if not 0.0 < character_coverage <= 1.0:
            raise ValueError(f"character_coverage must be in (0, 1], got {character_coverage}")
        symbols = list(user_defined_symbols)
        if any(not isinstance(s, str) or not s for s in symbols):
            raise ValueError(f"user_defined_symbols must be non-empty strings, got {symbols!r}")

        source = _CheckedTexts(texts)
        writer = io.BytesIO()
        options = dict(
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            user_defined_symbols=symbols,
            split_digits=split_digits,
            max_sentence_length=max_sentence_length,
            seed_sentencepiece_size=seed_sentencepiece_size,
            normalization_rule_name="identity",
            # Every id < V is a real token: keep the required <unk> at 0, no BOS/EOS/PAD.
            unk_id=0,
            bos_id=-1,
            eos_id=-1,
            pad_id=-1,
            # Determinism: one thread, all sentences, no shuffling.
            num_threads=1,
            input_sentence_size=0,
            shuffle_input_sentence=False,
            hard_vocab_limit=True,
        )
        if not verbose:
            options["minloglevel"] = 2
        try:
            spm.SentencePieceTrainer.train(sentence_iterator=source, model_writer=writer, **options)
        except RuntimeError as error:
            if source.error is not None:
                raise source.error from None
            if source.count == 0:
                raise ValueError("cannot train a tokenizer: the training texts contain no non-blank text") from None
            raise _training_error(str(error), vocab_size, model_type, character_coverage) from error
        finally:
            if not verbose:
                spm.set_min_log_level(0)
        if source.error is not None:
            raise source.error
        return cls.from_bytes(writer.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes) -> Tokenizer:
        """Load a serialised sentencepiece model (the ``bytes`` of :meth:`to_bytes` or a ``.model`` file).

        Raises:
            ValueError: ``data`` is not a sentencepiece model.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"from_bytes expects bytes, got {type(data).__name__}")
        processor = spm.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(bytes(data))
        except RuntimeError as error:
            raise ValueError(f"not a sentencepiece model ({len(data)} bytes): {error}") from None
        if processor.get_piece_size() == 0:
            raise ValueError(f"not a sentencepiece model ({len(data)} bytes): it has no pieces")
        return cls(processor)

    def to_bytes(self) -> bytes:
        """The serialised sentencepiece model proto; :meth:`from_bytes` restores an identical tokenizer."""
        return self._sp.serialized_model_proto()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """Load a sentencepiece ``.model`` file.

        Raises:
            ValueError: the file is not a sentencepiece model.
        """
        try:
            return cls.from_bytes(Path(path).read_bytes())
        except ValueError as error:
            raise ValueError(f"{os.fspath(path)}: {error}") from None

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model as a plain sentencepiece ``.model`` file (readable by the ``spm_*`` tools)."""
        Path(path).write_bytes(self.to_bytes())

    def __reduce__(self) -> tuple[object, tuple[bytes]]:
        # Pickle (and copy) as the serialised model.
        return (type(self).from_bytes, (self.to_bytes(),))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"

    # ------------------------------------------------------------------ tokens

    @property
    def vocab_size(self) -> int:
        """``V``, the number of tokens (all ids ``0 .. V-1``); the Transducer's blank is ``V``."""
        return len(self._word_starts)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``. Characters unseen in training map to ``<unk>`` (id 0)."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}; use encode_batch for several texts")
        return self._sp.encode(text, out_type=int)

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        """Token ids of each text."""
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"encode_batch expects str items, got {type(text).__name__}")
        return self._sp.encode(texts, out_type=int) if texts else []

    def decode(self, ids: Iterable[int]) -> str:
        """The text of token ids (every id ``< vocab_size`` is valid, ``<unk>`` decodes to ``" ⁇ "``).

        Raises:
            ValueError: an id is outside ``0 .. vocab_size - 1`` (e.g. the blank id ``vocab_size``).
        """
        return self._sp.decode(self._checked(ids))

    def id_to_piece(self, token_id: int) -> str:
        """The piece of one id; word-initial pieces start with ``"▁"`` (U+2581)."""
        return self._sp.id_to_piece(self._checked([token_id])[0])

    def pieces(self, text: str) -> list[str]:
        """The pieces ``text`` encodes to, e.g. ``["▁the", "▁c", "at"]``."""
        if not isinstance(text, str):
            raise TypeError(f"pieces expects a str, got {type(text).__name__}")
        return self._sp.encode(text, out_type=str)

    def word_starts(self, ids: Iterable[int]) -> list[bool]:
        """For each id, whether its token begins a new word (its piece starts with ``"▁"``).

        Every word's first token is marked, so a word spans from one ``True`` to the next (the first
        token of an encoded text is always marked). Pieces that are never word-initial (``<unk>``,
        user-defined symbols) are not marked.
        """
        return [self._word_starts[i] for i in self._checked(ids)]

    def _checked(self, ids: Iterable[int]) -> list[int]:
        """``ids`` as a list of Python ints, each in ``0 .. vocab_size - 1``."""
        checked = [operator.index(i) for i in ids]
        for position, token_id in enumerate(checked):
            if not 0 <= token_id < self.vocab_size:
                hint = " (the Transducer blank, which is not a token)" if token_id == self.vocab_size else ""
                raise ValueError(
                    f"token id {token_id}{hint} at position {position} is out of range: "
                    f"valid ids are 0 .. {self.vocab_size - 1}"
                )
        return checked


class _CheckedTexts(Iterator[str]):
    """Passes training texts through to sentencepiece, counting non-blank ones.

    An exception raised while iterating (including a non-``str`` item) ends the iteration and is
    kept in :attr:`error`, so :meth:`Tokenizer.train` can re-raise it as itself rather than as the
    ``RuntimeError`` sentencepiece would turn it into.
    """

    def __init__(self, texts: Iterable[str]) -> None:
        self._texts = iter(texts)
        self.count = 0
        self.error: BaseException | None = None

    def __next__(self) -> str:
        if self.error is not None:
            raise StopIteration
        try:
            text = next(self._texts)
        except StopIteration:
            raise
        except Exception as error:  # re-raised by Tokenizer.train after sentencepiece returns
            self.error = error
            raise StopIteration from None
        if not isinstance(text, str):
            self.error = TypeError(f"training texts must be str, got {type(text).__name__}: {text!r}")
            raise StopIteration
        if text.strip():
            self.count += 1
        return text


def _training_error(message: str, vocab_size: int, model_type: str, character_coverage: float) -> Exception:
    """A clear error for a sentencepiece training failure, from its ``RuntimeError`` message."""
    too_high = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", message)
    if too_high:
        return ValueError(
            f"vocab_size={vocab_size} is too large for this training text: a {model_type} model can "
            f"learn at most {too_high.group(2)} tokens from it (too few distinct characters and "
            f"words). Lower vocab_size or train on more varied text."
        )
    too_small = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", message)
    if too_small:
        return ValueError(
            f"vocab_size={vocab_size} is too small: the training text needs {too_small.group(2)} tokens "
            f"just for its distinct characters, <unk> and user-defined symbols (character_coverage="
            f"{character_coverage}). Raise vocab_size, or lower character_coverage to map rare "
            f"characters to <unk>."
        )
    if "Vocabulary size" in message:
        return ValueError(f"sentencepiece rejected vocab_size={vocab_size}: {message}")
    if "character_coverage" in message:
        return ValueError(f"sentencepiece rejected character_coverage={character_coverage}: {message}")
    return RuntimeError(f"sentencepiece training failed: {message}")
