"""Word error rate, counted by jiwer."""

from __future__ import annotations

from collections.abc import Sequence
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
