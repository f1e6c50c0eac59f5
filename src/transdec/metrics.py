"""Word error rate, counted by jiwer; key-phrase precision, recall and F-score, and the word errors outside key
phrases (for context biasing)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import jiwer


@dataclass
class WordErrors:
    """Edit counts of hypotheses against references, summed over utterances."""

    substitutions: int
    deletions: int
    insertions: int
    reference_words: int

    @property
    def wer(self) -> float:
        """Errors per reference word (0 for no reference words and no insertions)."""
        errors = self.substitutions + self.deletions + self.insertions
        return errors / self.reference_words if self.reference_words else float(errors > 0)


def word_errors(references: Sequence[str], hypotheses: Sequence[str]) -> WordErrors:
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    if not references:
        return WordErrors(0, 0, 0, 0)
    out = jiwer.process_words(list(references), list(hypotheses))
    return WordErrors(out.substitutions, out.deletions, out.insertions,
                      out.hits + out.substitutions + out.deletions)


def word_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    return word_errors(references, hypotheses).wer


def sequence_edits(reference: Sequence[object], hypothesis: Sequence[object]) -> int:
    """The edit distance between two sequences of any hashable items (tokens, ids, pieces with spaces in them),
    counted by jiwer as word errors of the items numbered."""
    numbers: dict[object, int] = {}
    reference_words, hypothesis_words = (" ".join(str(numbers.setdefault(item, len(numbers))) for item in sequence)
                                         for sequence in (reference, hypothesis))
    errors = word_errors([reference_words], [hypothesis_words])
    return errors.substitutions + errors.deletions + errors.insertions


# ------------------------------------------------------------------------------------------------ key phrases


def align_words(reference: Sequence[str], hypothesis: Sequence[str]) -> list[tuple[str | None, str | None]]:
    """A minimum-edit-distance alignment of two word sequences: pairs ``(reference word, hypothesis word)`` in
    order, ``None`` on the side of a deletion's or an insertion's missing word.

    Among alignments of equal cost it takes the one ``kaldialign.align`` (which NeMo's key-phrase F-score uses)
    takes: traced back from the ends, where steps tie, an insertion rather than a deletion, and either rather than
    a match or substitution.
    """
    rows, cols = len(reference) + 1, len(hypothesis) + 1
    cost = [[0] * cols for _ in range(rows)]
    for j in range(cols):
        cost[0][j] = j
    for i in range(1, rows):
        cost[i][0] = i
        for j in range(1, cols):
            cost[i][j] = min(cost[i - 1][j - 1] + (reference[i - 1] != hypothesis[j - 1]),
                             cost[i - 1][j] + 1, cost[i][j - 1] + 1)
    pairs: list[tuple[str | None, str | None]] = []
    i, j = rows - 1, cols - 1
    while i or j:
        if i and j:
            diagonal = cost[i - 1][j - 1] + (reference[i - 1] != hypothesis[j - 1])
            deletion, insertion = cost[i - 1][j] + 1, cost[i][j - 1] + 1
            step = "diagonal" if diagonal < min(deletion, insertion) else "deletion" if deletion < insertion \
                else "insertion"
        else:
            step = "deletion" if i else "insertion"
        if step == "diagonal":
            i, j = i - 1, j - 1
            pairs.append((reference[i], hypothesis[j]))
        elif step == "deletion":
            i -= 1
            pairs.append((reference[i], None))
        else:
            j -= 1
            pairs.append((None, hypothesis[j]))
    return pairs[::-1]


def normalize_phrase(phrase: str) -> str:
    """A key phrase as the metrics compare it: lower case, words separated by single spaces."""
    return " ".join(phrase.lower().split())


@dataclass
class KeyPhraseCounts:
    """One key phrase's counts (or their sums): its occurrences in the references, how many of them the
    hypotheses got right, and its false occurrences in the hypotheses."""

    true_positives: int = 0
    false_positives: int = 0
    reference_occurrences: int = 0


@dataclass
class KeyPhraseScores:
    """Key-phrase precision, recall and F-score over utterances, as NeMo's ``compute_key_words_fscore``
    (``context_biasing.compute_fscore``) defines them; see :func:`key_phrase_scores`."""

    true_positives: int
    false_positives: int
    reference_occurrences: int
    per_phrase: dict[str, KeyPhraseCounts]  # every key phrase, in the order given

    @property
    def precision(self) -> float:
        """True positives per key-phrase occurrence in the hypotheses (0 if there are none)."""
        found = self.true_positives + self.false_positives
        return self.true_positives / found if found else 0.0

    @property
    def recall(self) -> float:
        """True positives per key-phrase occurrence in the references (0 if there are none)."""
        return self.true_positives / self.reference_occurrences if self.reference_occurrences else 0.0

    @property
    def fscore(self) -> float:
        """The harmonic mean of precision and recall (0 if both are 0)."""
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0


def key_phrase_scores(references: Sequence[str], hypotheses: Sequence[str],
                      key_phrases: Iterable[str]) -> KeyPhraseScores:
    """Key-phrase precision, recall and F-score of hypotheses against references, for one list of key phrases
    (e.g. the boosting list, distractors included), by the definition of NeMo's ``compute_key_words_fscore``.

    The key phrases are lower-cased and deduplicated (the script does so); each has n words. Each reference is
    aligned with its hypothesis word by word (:func:`align_words`). Then, per utterance:

    - one-word key phrases, at every aligned pair (r, h): if r is a key phrase, it is a reference occurrence, and a
      true positive if h is r; otherwise, if h is a key phrase, h is a false positive. (A key phrase in the
      hypothesis aligned with a different key phrase of the reference is no false positive.)
    - key phrases of n >= 2 words: every n consecutive reference words (the alignment's reference words, skipping
      insertions) that spell a key phrase are a reference occurrence of it; a true positive if the hypothesis
      words aligned with those n words spell the same phrase (so a deletion among them makes it a miss, while
      words that the hypothesis inserts between them are ignored). Every n consecutive hypothesis words that
      spell a key phrase are a false positive unless the reference words aligned with them spell the same phrase.

    With TP, FP and R the sums of true positives, false positives and reference occurrences over phrases and
    utterances: precision = TP / (TP + FP), recall = TP / R and F = 2 precision recall / (precision + recall).
    NeMo adds 1e-8 to each denominator; here the ratios are exact, and 0 where a denominator is 0, so the two
    agree to within about 1e-8.
    """
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    per_phrase = {normalize_phrase(phrase): KeyPhraseCounts() for phrase in key_phrases}
    per_phrase.pop("", None)
    lengths = {len(phrase.split()) for phrase in per_phrase}
    for reference, hypothesis in zip(references, hypotheses):
        pairs = align_words(reference.split(), hypothesis.split())
        if 1 in lengths:
            for ref_word, hyp_word in pairs:
                if ref_word in per_phrase:
                    per_phrase[ref_word].reference_occurrences += 1
                    per_phrase[ref_word].true_positives += hyp_word == ref_word
                elif hyp_word in per_phrase:
                    per_phrase[hyp_word].false_positives += 1
        ref_positions = [k for k, (word, _) in enumerate(pairs) if word is not None]
        hyp_positions = [k for k, (_, word) in enumerate(pairs) if word is not None]
        for n in sorted(lengths - {1}):
            for start in range(len(ref_positions) - n + 1):
                window = [pairs[k] for k in ref_positions[start:start + n]]
                phrase = " ".join(ref_word for ref_word, _ in window)
                if phrase in per_phrase:
                    per_phrase[phrase].reference_occurrences += 1
                    per_phrase[phrase].true_positives += all(ref_word == hyp_word for ref_word, hyp_word in window)
            for start in range(len(hyp_positions) - n + 1):
                window = [pairs[k] for k in hyp_positions[start:start + n]]
                phrase = " ".join(hyp_word for _, hyp_word in window)
                if phrase in per_phrase and any(ref_word != hyp_word for ref_word, hyp_word in window):
                    per_phrase[phrase].false_positives += 1
    return KeyPhraseScores(true_positives=sum(c.true_positives for c in per_phrase.values()),
                           false_positives=sum(c.false_positives for c in per_phrase.values()),
                           reference_occurrences=sum(c.reference_occurrences for c in per_phrase.values()),
                           per_phrase=per_phrase)


@dataclass
class SplitWordErrors:
    """Word errors split between the words of key phrases and the other words."""

    key_phrase_words: WordErrors
    other_words: WordErrors


def _phrase_positions(words: Sequence[str], phrases: Collection[tuple[str, ...]]) -> set[int]:
    """The positions of ``words`` inside some occurrence of one of ``phrases``."""
    covered = set()
    for phrase in phrases:
        n = len(phrase)
        for start in range(len(words) - n + 1):
            if tuple(words[start:start + n]) == phrase:
                covered.update(range(start, start + n))
    return covered


def key_phrase_word_errors(references: Sequence[str], hypotheses: Sequence[str],
                           key_phrases: Sequence[Iterable[str]]) -> SplitWordErrors:
    """The word errors of hypotheses against references, split between key-phrase words and the other words:
    ``other_words.wer`` is the WER on the other words (what biasing must not make worse), the "U-WER" of the
    contextual biasing literature, and ``key_phrase_words.wer`` the "B-WER".

    ``key_phrases`` holds each utterance's key phrases (the manifest's ``key_phrases``; pass one list for every
    utterance to use a single list), compared lower-cased. A word of a reference is a key-phrase word if it lies
    in an occurrence of one of its utterance's key phrases (the phrase's words, consecutive, in the reference),
    and likewise a word of a hypothesis. Reference and hypothesis are aligned with the fewest edits
    (:func:`align_words`), and each error is counted on the side of one word: a substitution or a deletion on that
    of its reference word, an insertion on that of its hypothesis word (so a key phrase inserted where there is
    none is a key-phrase error). ``reference_words`` counts each side's reference words. The two sides' errors add
    up to the utterances' word edit distance, as :func:`word_errors` counts it.
    """
    if not len(references) == len(hypotheses) == len(key_phrases):
        raise ValueError(f"{len(references)} references, {len(hypotheses)} hypotheses and key phrases for "
                         f"{len(key_phrases)} utterances")
    counts = {side: {"substitutions": 0, "deletions": 0, "insertions": 0, "reference_words": 0}
              for side in (True, False)}  # keyed by "is a key-phrase word"
    for reference, hypothesis, phrases in zip(references, hypotheses, key_phrases):
        phrase_words = {tuple(normalize_phrase(phrase).split()) for phrase in phrases} - {()}
        ref_words, hyp_words = reference.split(), hypothesis.split()
        in_ref, in_hyp = _phrase_positions(ref_words, phrase_words), _phrase_positions(hyp_words, phrase_words)
        i = j = 0  # positions in the reference and the hypothesis
        for ref_word, hyp_word in align_words(ref_words, hyp_words):
            if ref_word is None:
                counts[j in in_hyp]["insertions"] += 1
            else:
                side = counts[i in in_ref]
                side["reference_words"] += 1
                if hyp_word is None:
                    side["deletions"] += 1
                elif hyp_word != ref_word:
                    side["substitutions"] += 1
            i += ref_word is not None
            j += hyp_word is not None
    return SplitWordErrors(key_phrase_words=WordErrors(**counts[True]), other_words=WordErrors(**counts[False]))
