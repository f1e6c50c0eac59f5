"""Texts of a domain the bundled models never read: the Linux man-pages (system calls, C library, conventions).

    python recipes/lm_domain_text.py --out data/domain

Reads every page of Debian's `manpages` and `manpages-dev` (sections 2, 3, 4, 5, 7: what programmers read; the
bundled models trained on the Bible, fortune cookies, WordNet and GCIDE, see docs/models.md) rendered by `man`,
and writes:

- ``lm_text.txt``: one normalised sentence a line, from the LM pages, for ``transdec lm build``;
- ``plan_dev.jsonl``, ``plan_test.jsonl``: planned utterances in ``recipes/synthetic_corpus.py``'s format (half
  espeak-ng, half Piper, the same random settings), which its ``audio`` and ``manifest`` steps synthesise.

Whole pages go to one split (chosen by a hash of the page's name), so the LM never reads a test page; a dev or test
sentence that also occurs in an LM page (boilerplate such as "for an explanation of the terms used in this section
see attributes") is left out, so no dev or test sentence is in the LM text. Dev and test sentences pass
``synthetic_corpus.normalize`` (3-24 words, no digits, symbols, acronyms or abbreviations: what the voices read as
written); the LM text is normalised more leniently (words with symbols or digits dropped, any length), for more text.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic_corpus import normalize, plan_utterance, split_of, split_sentences  # noqa: E402

PACKAGES = ("manpages", "manpages-dev")
# Words with these characters are code, paths or numbers: the LM text drops the word, a test sentence is refused.
CODE = re.compile(r"[0-9@#$%&*+=/\\<>_|~^\[\]{}()]")


def man_pages(packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    """The packages' page files, sorted, without symbolic links and ``.so`` stubs (aliases of another page)."""
    try:
        listing = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True, check=True).stdout
    except (FileNotFoundError, subprocess.CalledProcessError):
        raise SystemExit(f"install Debian's {' '.join(packages)} (apt-get install {' '.join(packages)})") from None
    pages = []
    for name in sorted(listing.split()):
        path = Path(name)
        if re.fullmatch(r"/usr/share/man/man\d/[^/]+\.gz", name) and not path.is_symlink():
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
                if not f.read(4).startswith(".so"):
                    pages.append(path)
    return pages


def page_sentences(path: Path) -> list[str]:
    """The sentences of a page's indented paragraphs, as ``man`` renders them (one line a paragraph)."""
    rendered = subprocess.run(["man", "-l", "-E", "ascii", str(path)], capture_output=True, text=True, check=True,
                              env={**os.environ, "MANWIDTH": "4000"}).stdout
    rendered = re.sub(r".\x08", "", rendered)  # overstrike bold and underline
    # Section headings start in column 0; prose paragraphs are indented.
    return [s for line in rendered.splitlines() if line.startswith(" ") for s in split_sentences(line.strip())]


def lm_normalize(sentence: str) -> str | None:
    """A sentence for the LM text: ``normalize``'s result, or else its words without code, if 3 or more are left."""
    strict = normalize(sentence)
    if strict:
        return strict
    words = [w for w in sentence.split() if not CODE.search(w)]
    words = re.sub(r"[^a-z' ]", " ", " ".join(words).lower().replace("-", " ")).split()
    words = [w.strip("'") for w in words if w.strip("'")]
    return " ".join(words) if len(words) >= 3 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/domain"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dev-size", type=int, default=200)
    parser.add_argument("--test-size", type=int, default=400)
    parser.add_argument("--dev-per-mille", type=int, default=80, help="share of pages in the dev pool")
    parser.add_argument("--test-per-mille", type=int, default=150, help="share of pages in the test pool")
    args = parser.parse_args()

    lm_lines: list[str] = []
    pools: dict[str, dict[str, str]] = {"dev": {}, "test": {}}  # normalised -> original sentence
    pages = man_pages()
    for path in pages:
        split = split_of(path.name, args.dev_per_mille, args.test_per_mille)
        for sentence in page_sentences(path):
            if split == "train":
                line = lm_normalize(sentence)
                if line:
                    lm_lines.append(line)
            elif (norm := normalize(sentence)) and norm not in pools[split]:
                pools[split][norm] = sentence
    in_lm = set(lm_lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lm_text.txt").write_text("".join(line + "\n" for line in lm_lines), encoding="utf-8")
    print(f"{len(pages)} pages; lm_text.txt: {len(lm_lines)} sentences, {sum(len(x.split()) for x in lm_lines)} words")
    for split, size in (("dev", args.dev_size), ("test", args.test_size)):
        pool = sorted((norm, original) for norm, original in pools[split].items() if norm not in in_lm)
        if len(pool) < size:
            raise SystemExit(f"{split}: {size} sentences asked for, {len(pool)} available")
        rng = random.Random(f"{args.seed}-domain-{split}")
        rng.shuffle(pool)
        utts = [plan_utterance(rng, split, i, "espeak" if i < size // 2 else "piper", norm, original)
                for i, (norm, original) in enumerate(pool[:size])]
        with open(args.out / f"plan_{split}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(asdict(u)) + "\n" for u in utts)
        print(f"plan_{split}.jsonl: {size} utterances of {len(pool)} sentences")


if __name__ == "__main__":
    main()
