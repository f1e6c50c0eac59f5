"""Evaluation set for context biasing (phrase boosting): names and terms the bundled models never heard.

Three steps, each resumable, like ``recipes/synthetic_corpus.py`` (whose functions do the synthesis):

    python recipes/biasing_corpus.py text     --out data/biasing  # phrases, phrase lists, dev/test plans
    python recipes/biasing_corpus.py audio    --out data/biasing  # synthesise the missing WAV files
    python recipes/biasing_corpus.py manifest --out data/biasing  # manifests of what exists, and the counts
    python recipes/biasing_corpus.py all      --out data/biasing  # the three in turn (~3 min on 2 cores)

Key phrases are 1-3 word names and terms of three kinds:

- ``person``: made-up given names and surnames ("Sapra Folov", "Pobrov", "Lora Metri Shinjomson"), 1-3 words;
- ``place``: made-up place names ("Stendale", "Eren Trestad"), 1-2 words;
- ``term``: products and technical terms: real rare nouns of WordNet's artifact and substance files with a
  technical ending ("neodymium", "fluxmeter"), made-up product names ("Peekla", "Iperyn Krarix"), or both
  ("Paslo dicumarol"), 1-3 words.

Made-up words are strings of consonant-vowel syllables with a kind's typical ending (a few are real words:
"orca", "talon"). Every word of every phrase is absent from the bundled models' training text and from their
dev and test text: from every normalised sentence of the corpus sources (the King James Bible, the fortunes,
WordNet's usage examples and definitions: every text that ``recipes/train_bundled.sh`` plans, whatever split, is
one of them; GCIDE's quotations are not in the bundled models' data). No word is in two phrases, so the dev
phrases, the test phrases and the distractors share no word.

Utterances are carrier sentences in plain modern English whose every word is in the training text (checked),
with one or two key phrases in their slots; each key phrase is used by about ``--uses-per-phrase`` utterances of
its split. Voices and settings are those of the synthetic test split (``synthetic_corpus.plan_utterance``): half
espeak-ng (random accent, variant, speed, pitch), half Piper, random gain and noise; the corpus has no held-out
voices. The distractors are ``--distractors`` more phrases of the same kinds in the same proportions, in no
utterance.

Outputs under ``--out``: ``audio/{dev,test}/*.wav``; ``dev.jsonl`` and ``test.jsonl`` (NeMo manifests:
``audio_filepath`` relative to ``--out``, ``duration``, ``text``, ``key_phrases``: the utterance's key phrases in
the order spoken, ``boost_phrases``: the same list, ``voice``); ``phrases.txt`` (every key phrase and distractor,
sorted), ``dev_phrases.txt`` and ``test_phrases.txt`` (the split's key phrases and the distractors, sorted),
``phrase_pool.jsonl`` (each phrase's kind and ``dev``/``test``/``distractor``); ``plan_{dev,test}.jsonl`` (the
synthesis plans); ``README.txt`` (the counts). The text step writes the same files for the same ``--seed`` (and
the same Debian text packages), and refuses to overwrite a different plan.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Set
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synthetic_corpus as corpus  # noqa: E402

SPLITS = ("dev", "test")
KINDS = ("person", "place", "term")

# ------------------------------------------------------------------------------------------- made-up words

ONSETS = ["b", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
          "br", "dr", "fr", "gr", "kr", "pr", "tr", "bl", "fl", "gl", "kl", "pl", "sl", "st", "sh", "ch", "th"]
VOWELS = ["a", "a", "a", "a", "e", "e", "e", "i", "i", "o", "o", "o", "u", "ee", "ai"]
CODAS = ["n", "n", "r", "r", "l", "l", "s", "m"]
FINAL_CODAS = CODAS + ["k", "nd", "st", "x"]  # of a word's last syllable before no ending
ENDINGS = {  # per kind of word, "" for none
    "given": ["", "", "a", "a", "o", "en", "an", "el", "is", "ia", "ina"],
    "surname": ["", "", "ov", "ez", "son", "ski", "ard", "ton", "elli", "ani", "ek", "ley"],
    "place": ["", "ia", "ar", "ond", "oria", "ville", "stad", "burg", "holm", "ford", "mere", "ton", "dale"],
    "product": ["", "", "ix", "ex", "on", "or", "ara", "yn", "ium", "o", "ax"],
}
SYLLABLES = {"given": (1, 2), "surname": (1, 2), "place": (1, 2), "product": (1, 2)}
MAX_LETTERS = 10
# Real rare technical words: WordNet nouns of the artifact (06) and substance (27) files with one of these endings.
RARE_LEXICOGRAPHER_FILES = ("06", "27")
TECHNICAL_ENDINGS = ("ine", "ite", "ol", "ium", "ide", "ase", "ene", "ane", "in", "on", "ator", "meter", "scope",
                     "graph", "tron", "ate", "yl", "one", "ex", "ix", "ax", "oid")
# Made-up words containing one of these would read as rude.
AVOIDED = ("sex", "shit", "fuk", "fuc", "cum", "nig", "rape", "porn", "piss", "dick", "cock", "tit", "fag", "anal",
           "anus", "slut", "whor", "bum", "poo", "puk")
CONSONANT_RUN = re.compile(r"[bcdfgjklmnpqrstvwxz]{3}")
VOWEL_RUN = re.compile(r"[aeiou]{3}|aa|ii|uu|ae|ao|au|ei|eo|eu|io|iu|ua|ue|ui|uo|oe|oi|ou|iy|eey")


def made_up_word(rng: random.Random, kind: str) -> str:
    """A made-up word: consonant-vowel syllables (the first sometimes without its consonant, each with a coda
    now and then) and a ``kind``'s ending (see ``ENDINGS``)."""
    low, high = SYLLABLES[kind]
    count = rng.randint(low, high)
    ending = rng.choice(ENDINGS[kind])
    stem, onsets = "", []
    for i in range(count):
        onset = rng.choice(ONSETS)
        if i == 0 and rng.random() < 0.1:
            onset = ""
        elif stem and stem[-1] not in "aeiou":
            onset = onset[0]  # one consonant after a closed syllable
        onsets.append(onset)
        vowel = rng.choice(VOWELS) if onset else rng.choice("aeio")
        last = i == count - 1
        coda = rng.choice(FINAL_CODAS if last and not ending else CODAS) if rng.random() < 0.3 else ""
        stem += onset + vowel + coda
    if ending and stem[-1] in "aeiou" and ending[0] in "aeiou":
        stem = stem.rstrip("aeiou") or stem
    if any(a and a == b for a, b in zip(onsets, onsets[1:])):
        return ""  # "flefla": refused by pronounceable()
    return stem + ending


def pronounceable(word: str) -> bool:
    """No run of three consonant letters (``sh``, ``ch``, ``th`` count as one), no awkward vowel sequence, nothing
    rude (``AVOIDED``), and 4 to ``MAX_LETTERS`` letters."""
    if not 4 <= len(word) <= MAX_LETTERS or any(part in word for part in AVOIDED):
        return False
    simplified = re.sub(r"sh|ch|th", "S", word)
    return not CONSONANT_RUN.search(simplified) and not VOWEL_RUN.search(word)


def rare_words(vocabulary: Set[str], wordnet_dir: Path = Path("/usr/share/wordnet")) -> list[str]:
    """Real rare technical words, sorted: WordNet nouns of the artifact and substance files, 6-12 letters,
    with a technical ending (``TECHNICAL_ENDINGS``), that are not in ``vocabulary``."""
    path = corpus.require_text_source(wordnet_dir / "data.noun", "wordnet-base")
    words = set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(" "):  # the licence
            continue
        fields = line.split()
        if fields[1] not in RARE_LEXICOGRAPHER_FILES:
            continue
        for k in range(int(fields[3], 16)):
            word = fields[4 + 2 * k]
            if re.fullmatch(r"[a-z]{6,12}", word) and word.endswith(TECHNICAL_ENDINGS) and word not in vocabulary:
                words.add(word)
    return sorted(words)


# ---------------------------------------------------------------------------------------------- phrases


@dataclass
class Phrase:
    """One key phrase or distractor: its transcript (lower case), how the voice reads it, its kind."""

    text: str
    tts_text: str
    kind: str
    split: str = ""  # "dev", "test" or "distractor"


class PhraseMaker:
    """Makes phrases of every kind, each word new: not in ``vocabulary`` nor in an earlier phrase."""

    def __init__(self, rng: random.Random, vocabulary: Set[str], rare: Iterable[str]):
        self.rng, self.vocabulary, self.used = rng, vocabulary, set()
        self.rare = list(rare)
        rng.shuffle(self.rare)

    def word(self, kind: str) -> str:
        for _ in range(10000):
            word = made_up_word(self.rng, kind)
            if (pronounceable(word) and word not in self.vocabulary and word not in self.used
                    and corpus.normalize(f"the {word} here") == f"the {word} here"):
                self.used.add(word)
                return word
        raise SystemExit(f"no new {kind} word found in 10000 tries")

    def rare_word(self) -> str:
        while self.rare:
            word = self.rare.pop()
            if word not in self.used and word not in self.vocabulary:
                self.used.add(word)
                return word
        raise SystemExit("out of rare WordNet words: ask for fewer phrases")

    def phrase(self, kind: str) -> Phrase:
        """A new phrase of ``kind`` (``KINDS``), of 1-3 words."""
        r = self.rng.random()
        if kind == "person":
            # given name and surname mostly; sometimes a surname alone or two given names
            parts = (["surname"] if r < 0.15 else ["given", "surname"] if r < 0.9 else ["given", "given", "surname"])
            words = [(self.word(part), True) for part in parts]
        elif kind == "place":
            words = [(self.word("place"), True)] if r < 0.7 else [(self.word("given"), True),
                                                                  (self.word("place"), True)]
        elif kind == "term":
            if r < 0.4:
                words = [(self.rare_word(), False)]
            elif r < 0.6:
                words = [(self.word("product"), True)]
            elif r < 0.8:
                words = [(self.word("product"), True), (self.rare_word(), False)]
            elif r < 0.9:
                words = [(self.word("product"), True), (self.word("product"), True)]
            else:
                words = [(self.word("product"), True), (self.word("given"), True), (self.word("product"), True)]
        else:
            raise ValueError(f"unknown kind {kind}")
        return Phrase(text=" ".join(w for w, _ in words),
                      tts_text=" ".join(w.capitalize() if title else w for w, title in words), kind=kind)


# -------------------------------------------------------------------------------------------- carriers

# Carrier sentences: plain modern English, every word in the training text; {person}, {place}, {term} are slots.
ONE_SLOT = [
    "I met {person} at the station this morning.",
    "{person} wrote a long letter to the council.",
    "Have you seen {person} since the wedding?",
    "My brother works with {person} in the city.",
    "We asked {person} to bring the books back.",
    "The prize was given to {person} last year.",
    "{person} said that the plan would never work.",
    "Please tell {person} that dinner is ready.",
    "Everyone agreed that {person} was the best teacher in the school.",
    "The letter from {person} arrived on Monday.",
    "I will call {person} after the meeting.",
    "Nobody knew where {person} had gone.",
    "The children ran to meet {person} at the door.",
    "She has been a friend of {person} for many years.",
    "Is {person} coming to the party tonight?",
    "The new manager is {person}, who used to work in the office downstairs.",
    "We spent the summer in {place} with our friends.",
    "The train to {place} leaves at noon.",
    "She was born in a small village near {place}.",
    "The road to {place} was closed after the storm.",
    "They moved to {place} when the war was over.",
    "The people of {place} are famous for their wine and cheese.",
    "It rained every day we were in {place}.",
    "My grandfather still lives in {place}.",
    "How far is it from here to {place}?",
    "The ship sailed from {place} at first light.",
    "We bought a house on the hill above {place}.",
    "The old bridge at {place} fell into the river.",
    "There is a good market in {place} on Saturday.",
    "The doctor told him to take {term} twice a day.",
    "The {term} was much cheaper than we expected.",
    "Have you tried the new {term}?",
    "I read an article about {term} last night.",
    "The report said that {term} is not safe for children.",
    "We need more {term} before the end of the week.",
    "My father knows how the {term} works.",
    "The {term} stopped working after an hour.",
    "They found traces of {term} in the water.",
    "The company will sell the {term} in the spring.",
    "Keep the {term} in a cool dry place.",
    "He spent the whole morning repairing the {term}.",
    "The price of {term} went up again this year.",
    "Nobody in the shop could tell me what {term} was.",
    "She ordered a box of {term} for the laboratory.",
]
TWO_SLOTS = [
    "{person} flew to {place} to see her mother.",
    "{person} and {person} will meet us at the gate.",
    "The {term} was made in a factory near {place}.",
    "{person} says that {term} is the answer to everything.",
    "The road from {place} to {place} is very long.",
    "{person} gave me a bottle of {term} for my birthday.",
    "{person} works for a small company in {place}.",
    "The best {term} in the country comes from {place}.",
    "I heard that {person} has moved to {place}.",
    "{person} asked {person} to dance with him.",
    "We drove from {place} to {place} in one day.",
    "{person} showed us how to use the {term}.",
    "The letter from {place} was signed by {person}.",
    "{person} bought the last {term} in the shop.",
    "They sent the {term} to a hospital in {place}.",
    "After the war {person} opened a school in {place}.",
    "{person} never told {person} the truth about the money.",
    "The {term} and the {term} were stolen from the car.",
    "My sister met {person} on the train to {place}.",
    "{person} tested the {term} in the garden.",
    "The mayor of {place} thanked {person} for her help.",
    "Do you think {person} will bring the {term}?",
]


def slots(template: str) -> list[str]:
    return re.findall(r"\{(\w+)\}", template)


def template_words(template: str) -> list[str]:
    """The words of a template's transcript, its slots left out."""
    return (corpus.normalize(re.sub(r"\{\w+\}", "", template)) or "").split()


def check_templates(vocabulary: Set[str]) -> None:
    for template in ONE_SLOT + TWO_SLOTS:
        unknown = [word for word in template_words(template) if word not in vocabulary]
        if unknown or not 1 <= len(slots(template)) <= 2 or set(slots(template)) - set(KINDS):
            raise SystemExit(f"carrier {template!r}: words not in the training text {unknown} or bad slots")


# ------------------------------------------------------------------------------------------------- plan


def training_vocabulary() -> set[str]:
    """Every word of every normalised sentence of the corpus sources: a superset of the text of every split that
    ``recipes/train_bundled.sh`` plans (training, dev, test and test_fresh)."""
    sentences = (corpus.kjv_sentences() + corpus.fortune_sentences() + corpus.wordnet_sentences()
                 + corpus.wordnet_glosses())
    return {word for sentence in sentences if (norm := corpus.normalize(sentence)) for word in norm.split()}


@dataclass
class Plan:
    """The text step's result: every phrase (in the order made), and each split's utterances with their key
    phrases (``synthetic_corpus.Utterance`` fields and ``key_phrases``)."""

    phrases: list[Phrase]
    utterances: dict[str, list[dict]]


def fill(rng: random.Random, carriers: list[str], uses: dict[str, list[Phrase]]) -> list[list[Phrase]]:
    """The phrases of each carrier's slots: ``uses[kind]`` (each phrase as often as it is to be used), shuffled,
    then swapped until no carrier has the same phrase twice."""
    queues = {kind: list(use) for kind, use in uses.items()}
    for queue in queues.values():
        rng.shuffle(queue)
    chosen = [[queues[kind].pop() for kind in slots(carrier)] for carrier in carriers]
    for k, phrases in enumerate(chosen):
        while len(phrases) == 2 and phrases[0] is phrases[1]:
            twice = phrases[1]
            # a slot of the same kind in another utterance that does not hold this phrase
            others = [(m, j) for m, other in enumerate(chosen) if m != k and all(p is not twice for p in other)
                      for j, p in enumerate(other) if p.kind == twice.kind]
            if not others:
                raise SystemExit(f"cannot place {twice.text!r} once per utterance: ask for more utterances")
            m, j = rng.choice(others)
            phrases[1], chosen[m][j] = chosen[m][j], twice
    return chosen


def plan_biasing(vocabulary: Set[str], rare: Iterable[str], seed: int = 1,
                 sizes: dict[str, int] | None = None, distractors: int = 600, uses_per_phrase: float = 1.5,
                 two_phrase_share: float = 0.4) -> Plan:
    """Phrases and utterances, fixed by ``seed`` (and the two word lists)."""
    sizes = sizes or {"dev": 100, "test": 300}
    if uses_per_phrase < 1:
        raise SystemExit("every key phrase is used at least once: --uses-per-phrase must be at least 1")
    check_templates(vocabulary)
    maker = PhraseMaker(random.Random(f"{seed}-phrases"), vocabulary, rare)
    carriers, uses, needed = {}, {}, Counter()
    for split in SPLITS:
        rng = random.Random(f"{seed}-biasing-{split}-carriers")
        carriers[split] = [rng.choice(TWO_SLOTS if rng.random() < two_phrase_share else ONE_SLOT)
                           for _ in range(sizes[split])]
        for kind, count in Counter(kind for carrier in carriers[split] for kind in slots(carrier)).items():
            needed[split, kind] = count
    phrases: list[Phrase] = []
    by_split_kind: dict[tuple[str, str], list[Phrase]] = {}
    for split in SPLITS:
        for kind in KINDS:
            count = needed[split, kind]
            made = [maker.phrase(kind) for _ in range(math.ceil(count / uses_per_phrase))]
            for phrase in made:
                phrase.split = split
            by_split_kind[split, kind] = made
            phrases.extend(made)
    # Distractors: the key phrases' kinds in the same proportions (the last kind takes the rounding).
    total_slots = sum(needed.values())
    shares = {kind: round(distractors * sum(needed[s, kind] for s in SPLITS) / total_slots) for kind in KINDS}
    shares[KINDS[-1]] = distractors - sum(shares[kind] for kind in KINDS[:-1])
    for kind in KINDS:
        for _ in range(shares[kind]):
            phrase = maker.phrase(kind)
            phrase.split = "distractor"
            phrases.append(phrase)

    utterances: dict[str, list[dict]] = {}
    for split in SPLITS:
        rng = random.Random(f"{seed}-biasing-{split}-phrases")
        uses = {}
        for kind in KINDS:
            own = by_split_kind[split, kind]
            count = needed[split, kind]
            # each phrase once, then a random choice of them again, to fill every slot of this kind
            uses[kind] = (own * (count // len(own)) + rng.sample(own, count % len(own))) if own else []
        chosen = fill(rng, carriers[split], uses)
        rng = random.Random(f"{seed}-biasing-{split}")  # the synthesis settings, as synthetic_corpus draws them
        split_utts = []
        for i, (carrier, used) in enumerate(zip(carriers[split], chosen)):
            values = iter(used)
            tts_text = re.sub(r"\{\w+\}", lambda _: next(values).tts_text, carrier)
            text = corpus.normalize(tts_text)
            if text is None or not all(f" {p.text} " in f" {text} " for p in used):
                raise SystemExit(f"{tts_text!r} does not normalise to a transcript with its key phrases")
            voice = "espeak" if i < sizes[split] // 2 else "piper"
            utt = corpus.plan_utterance(rng, split, i, voice, text, tts_text)
            split_utts.append(asdict(utt) | {"key_phrases": [p.text for p in used]})
        utterances[split] = split_utts
    return Plan(phrases=phrases, utterances=utterances)


def phrase_lists(plan: Plan) -> dict[str, list[str]]:
    """The phrase files' lines: ``phrases.txt`` (all), ``<split>_phrases.txt`` (the split's and the distractors)."""
    distractors = [p.text for p in plan.phrases if p.split == "distractor"]
    lists = {"phrases.txt": sorted(p.text for p in plan.phrases)}
    for split in SPLITS:
        lists[f"{split}_phrases.txt"] = sorted([p.text for p in plan.phrases if p.split == split] + distractors)
    return lists


def write_if_same(path: Path, content: str) -> None:
    """Write ``content`` to ``path``, unless ``path`` holds something else (the audio was made from it)."""
    if path.exists() and path.read_text(encoding="utf-8") != content:
        raise SystemExit(f"{path} exists with other contents (another seed or settings?): delete {path.parent} "
                         "or choose another --out")
    path.write_text(content, encoding="utf-8")


def cmd_text(args: argparse.Namespace) -> None:
    vocabulary = training_vocabulary()
    plan = plan_biasing(vocabulary, rare_words(vocabulary), seed=args.seed,
                        sizes={"dev": args.dev_utterances, "test": args.test_utterances},
                        distractors=args.distractors, uses_per_phrase=args.uses_per_phrase,
                        two_phrase_share=args.two_phrase_share)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, utts in plan.utterances.items():
        write_if_same(args.out / f"plan_{split}.jsonl", "".join(json.dumps(u) + "\n" for u in utts))
    for name, lines in phrase_lists(plan).items():
        write_if_same(args.out / name, "".join(line + "\n" for line in lines))
    write_if_same(args.out / "phrase_pool.jsonl", "".join(json.dumps(asdict(p)) + "\n" for p in plan.phrases))
    print(f"{len(vocabulary)} words in the training text; "
          + ", ".join(f"{split}: {len(utts)} utterances" for split, utts in plan.utterances.items())
          + f"; {len(plan.phrases)} phrases")


# ------------------------------------------------------------------------------------------ audio, manifest


def cmd_audio(args: argparse.Namespace) -> None:
    corpus.cmd_audio(argparse.Namespace(out=args.out, splits=list(SPLITS), voices=["espeak", "piper"],
                                        index_range=(0, 2**31), jobs=args.jobs, audio_format="wav"))


def summary(out: Path) -> str:
    """The README-style counts of what the manifests and phrase files hold."""
    pool = [json.loads(line) for line in (out / "phrase_pool.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = ["Context biasing evaluation set (recipes/biasing_corpus.py)", ""]
    total_seconds = 0.0
    for split in SPLITS:
        entries = [json.loads(line) for line in (out / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]
        planned = len(corpus.read_plan(out, split))
        seconds = sum(e["duration"] for e in entries)
        total_seconds += seconds
        occurrences = [p for e in entries for p in e["key_phrases"]]
        voices = Counter(e["voice"] for e in entries)
        kinds = Counter(p["kind"] for p in pool if p["split"] == split)
        words = Counter(len(p["text"].split()) for p in pool if p["split"] == split)
        lines += [f"{split}.jsonl: {len(entries)} utterances ({planned} planned; "
                  + ", ".join(f"{n} {voice}" for voice, n in sorted(voices.items()))
                  + f"), {seconds / 3600:.3f} h, {sum(len(e['text'].split()) for e in entries)} words",
                  f"  {len(occurrences)} key-phrase occurrences of {len(set(occurrences))} key phrases ("
                  + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) + "; "
                  + ", ".join(f"{n} of {k} word{'s' * (k > 1)}" for k, n in sorted(words.items())) + ")"]
    distractors = [p for p in pool if p["split"] == "distractor"]
    kinds = Counter(p["kind"] for p in distractors)
    lines += [f"distractors: {len(distractors)} phrases in no utterance ("
              + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) + ")"]
    for name in ["phrases.txt"] + [f"{split}_phrases.txt" for split in SPLITS]:
        lines.append(f"{name}: {len((out / name).read_text(encoding='utf-8').splitlines())} phrases")
    lines.append(f"audio: {total_seconds / 3600:.3f} h in all, 16 kHz WAV")
    return "\n".join(lines) + "\n"


def cmd_manifest(args: argparse.Namespace) -> None:
    import soundfile

    for split in SPLITS:
        missing = 0
        manifest = args.out / f"{split}.jsonl"
        with open(manifest.with_suffix(".tmp"), "w", encoding="utf-8") as f:
            for utt in corpus.read_plan(args.out, split):
                path = corpus.audio_path(args.out, utt, "wav")
                if not path.exists():
                    missing += 1
                    continue
                entry = {"audio_filepath": str(path.relative_to(args.out)),
                         "duration": round(soundfile.info(str(path)).duration, 3), "text": utt["text"],
                         "key_phrases": utt["key_phrases"], "boost_phrases": utt["key_phrases"],
                         "voice": utt["voice"]}
                f.write(json.dumps(entry) + "\n")
        manifest.with_suffix(".tmp").replace(manifest)
        print(f"{split}.jsonl written ({missing} planned utterances not synthesised yet)")
    text = summary(args.out)
    (args.out / "README.txt").write_text(text, encoding="utf-8")
    print(text, end="")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["text", "audio", "manifest", "all"])
    parser.add_argument("--out", type=Path, default=Path("data/biasing"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dev-utterances", type=int, default=100)
    parser.add_argument("--test-utterances", type=int, default=300)
    parser.add_argument("--distractors", type=int, default=600, help="phrases of the lists in no utterance")
    parser.add_argument("--uses-per-phrase", type=float, default=1.5,
                        help="utterances per key phrase, on average (each is used at least once)")
    parser.add_argument("--two-phrase-share", type=float, default=0.4,
                        help="share of the utterances with two key phrases (the others have one)")
    parser.add_argument("--jobs", type=int, default=1, help="audio: synthesis processes")
    args = parser.parse_args()
    steps = ["text", "audio", "manifest"] if args.step == "all" else [args.step]
    for step in steps:
        start = time.time()
        {"text": cmd_text, "audio": cmd_audio, "manifest": cmd_manifest}[step](args)
        print(f"{step}: {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
