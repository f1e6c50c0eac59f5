"""Random ARPA files for tests: every n-gram's prefix and suffix present, as lmplz writes them."""

from __future__ import annotations

import random

from transdec.lm.ngram import TOKEN_OFFSET


def word(token: int) -> str:
    return chr(token + TOKEN_OFFSET)


def random_arpa(vocab_size: int, order: int, seed: int, ngrams_per_order: int = 40, missing_tokens: int = 2) -> str:
    """ARPA text over tokens ``0 .. vocab_size - missing_tokens - 1`` (the rest unseen) with random log10 weights."""
    rng = random.Random(seed)
    words = [word(t) for t in range(vocab_size - missing_tokens)]
    sections: list[dict[tuple[str, ...], tuple[float, float | None]]] = [{}]
    for w in ["<s>", "</s>", "<unk>", *words]:
        sections[0][(w,)] = (-99.0 if w == "<s>" else -rng.uniform(0.5, 3.0), None if w == "</s>" else -rng.uniform(0, 1))
    for n in range(2, order + 1):
        section: dict[tuple[str, ...], tuple[float, float | None]] = {}
        for _ in range(ngrams_per_order * 4):
            if len(section) >= ngrams_per_order:
                break
            context = rng.choice(list(sections[n - 2]))
            if context[-1] == "</s>":
                continue
            last = rng.choice(words + ["</s>"])
            candidate = context + (last,)
            if "<s>" in candidate[1:] or candidate[1:] not in sections[n - 2]:
                continue  # the suffix must exist too
            section[candidate] = (-rng.uniform(0.1, 2.0), None if n == order or last == "</s>" else -rng.uniform(0, 1))
        sections.append(section)
    # An n-gram of the highest order has no backoff; lower ones keep theirs only if they are a context.
    lines = ["\\data\\", *(f"ngram {n}={len(s)}" for n, s in enumerate(sections, 1)), ""]
    for n, section in enumerate(sections, 1):
        lines.append(f"\\{n}-grams:")
        for words_, (logprob, backoff) in section.items():
            line = f"{logprob:.6f}\t{' '.join(words_)}"
            if backoff is not None:
                line += f"\t{backoff:.6f}"
            lines.append(line)
        lines.append("")
    lines.append("\\end\\")
    return "\n".join(lines) + "\n"
