"""What several test modules share: import it as ``from helpers import NAME`` (``tests/`` is on ``sys.path``).

Sections:

* random decoding models and batches: the head x predictor x profile matrix of the greedy exactness tests;
* beam-search tiny problems: problems small enough to enumerate every path (see ``brute_force.py``);
* fusion test scorers: a token scorer with a known table;
* training and CLI fixtures: a tiny model configuration, a corpus on disk, ``transdec`` run in-process;
* NeMo fixtures: the archives of ``tests/fixtures/nemo/`` and edited copies of them;
* n-gram LM cases: LMs of every shape the fixed-shape LM scorers must resolve;
* loss references: brute-force transducer losses and random joint problems.

Pytest fixtures stay in ``conftest.py`` or in the modules that use them.
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import math
import random
import tarfile
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import soundfile
import torch
import yaml

from arpa_fixtures import random_arpa, word
from transdec.biasing import Boost, BoostingTree
from transdec.cli import main
from transdec.decoding import greedy_reference
from transdec.lm import NGramLM
from transdec.model.conformer import ConformerConfig
from transdec.model.joint import JointNetwork, SimpleJoint
from transdec.model.synthetic import random_decoder, random_encoder_output
from transdec.model.transducer_model import ModelConfig, PredictorConfig
from transdec.protocol import HeadSpec

FIXTURES = Path(__file__).resolve().parent / "fixtures"


# --- Random decoding models and batches ------------------------------------------------------------------------------

#: Decoding heads of the random models, by kind.
HEADS = {
    "rnnt": HeadSpec("rnnt", num_tokens=9),
    "tdt": HeadSpec("tdt", num_tokens=9, durations=(0, 1, 2, 3, 4)),
    "multiblank": HeadSpec("multiblank", num_tokens=9, big_blank_durations=(2, 4, 8)),
}
# blank_rate of the random model per head and profile; TDT labels also move time, so it needs fewer blanks.
BLANK_RATES = {
    ("rnnt", "blank_heavy"): 0.9,
    ("rnnt", "label_heavy"): 0.5,
    ("tdt", "blank_heavy"): 0.7,
    ("tdt", "label_heavy"): 0.3,
    ("multiblank", "blank_heavy"): 0.9,
    ("multiblank", "label_heavy"): 0.5,
}
ENCODER_DIM = 16
#: (kind, predictor, profile, max_symbols_per_frame) of the greedy exactness tests.
MATRIX = list(itertools.product(HEADS, ["lstm", "stateless"], ["blank_heavy", "label_heavy"], [1, 3, 10]))


@functools.lru_cache(maxsize=None)
def model_for(kind: str, predictor: str, profile: str):
    return random_decoder(
        HEADS[kind],
        predictor,
        encoder_dim=ENCODER_DIM,
        num_layers=2,
        blank_rate=BLANK_RATES[kind, profile],
        seed=7,
        dtype=torch.float64,
    )


def encoder_batch(lengths: list[int], seed: int, extra_padding: int = 3):
    return random_encoder_output(
        lengths,
        ENCODER_DIM,
        max_length=max(lengths) + extra_padding,
        padding_value=float("nan"),
        seed=seed,
        dtype=torch.float64,
    )


def assert_same_hypotheses(actual, expected):
    assert len(actual) == len(expected)
    for b, (got, want) in enumerate(zip(actual, expected)):
        assert got.tokens == want.tokens, f"utterance {b}: tokens"
        assert got.timestamps == want.timestamps, f"utterance {b}: timestamps"
        assert got.durations == want.durations, f"utterance {b}: durations"
        assert got.token_logprobs == pytest.approx(want.token_logprobs, abs=1e-9), f"utterance {b}: log-probs"
        assert got.score == pytest.approx(want.score, abs=1e-9), f"utterance {b}: score"


# --- Beam-search tiny problems ---------------------------------------------------------------------------------------

#: Two-token heads, small enough to enumerate every path.
TINY_HEADS = {
    "rnnt": HeadSpec("rnnt", 2),
    "tdt": HeadSpec("tdt", 2, durations=(0, 1, 2)),
    "multiblank": HeadSpec("multiblank", 2, big_blank_durations=(2,)),
}
PREDICTORS = ["lstm", "stateless"]


def tiny_problem(kind: str, predictor: str, seed: int, heads: dict[str, HeadSpec] = TINY_HEADS):
    """A random model with head ``heads[kind]`` and a batch of two utterances of 4 and 3 frames (float64)."""
    model = random_decoder(heads[kind], predictor, encoder_dim=8, num_layers=1, blank_rate=0.5, seed=seed,
                           dtype=torch.float64)
    frames, lengths = random_encoder_output([4, 3], 8, seed=seed, dtype=torch.float64)
    return model, frames, lengths


def same(a, b) -> bool:
    """The same alignment, and the same scores to 1e-9."""
    return ((a.tokens, a.timestamps, a.durations) == (b.tokens, b.timestamps, b.durations)
            and a.score == pytest.approx(b.score, abs=1e-9) and a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-9))


# --- Fusion test scorers ---------------------------------------------------------------------------------------------

class BigramScorer:
    """A bigram model over ``V`` tokens as a table ``[V + 1, V]`` of log-probs; row ``V`` follows ``<s>``.

    Its state is each hypothesis' last token ``[N]`` (``V`` before any token).
    """

    def __init__(self, num_tokens: int, seed: int, sharpness: float = 3.0) -> None:
        generator = torch.Generator().manual_seed(seed)
        logits = sharpness * torch.randn(num_tokens + 1, num_tokens, generator=generator, dtype=torch.float64)
        self.table = logits.log_softmax(dim=-1)
        self.num_tokens = num_tokens

    def initial_state(self, batch_size, device):
        return torch.full((batch_size,), self.num_tokens, dtype=torch.long, device=device)

    def token_logprobs(self, state):
        return self.table[state]

    def advance(self, state, tokens):
        assert bool((tokens < self.num_tokens).all()), "only tokens reach a token scorer"
        return tokens.clone()

    def select_state(self, mask, if_true, if_false):
        return torch.where(mask, if_true, if_false)

    def gather_state(self, state, indices):
        return state[indices]


# --- Training and CLI fixtures ---------------------------------------------------------------------------------------

TEXTS = ["hello world", "good morning to you", "the cat sat on the mat", "a quick brown fox", "see you soon",
         "world of sound", "morning has broken", "the dog ran home"]
#: Heads of the tiny trainable models (24 tokens, the size of a tokenizer trained on ``TEXTS``).
TRAINING_HEADS = [HeadSpec("rnnt", 24), HeadSpec("tdt", 24, durations=(0, 1, 2)),
                  HeadSpec("multiblank", 24, big_blank_durations=(2, 4))]


def tiny_config(head: HeadSpec, predictor: str = "lstm") -> ModelConfig:
    return ModelConfig(
        head=head,
        encoder=ConformerConfig(model_dim=16, num_layers=1, num_heads=2, conv_kernel=3, subsampling_channels=4,
                                dropout=0.0),
        predictor=PredictorConfig(kind=predictor, hidden_size=16),
        joint_dim=16,
        sigma=0.0 if head.kind == "rnnt" else 0.05,
    )


def write_corpus(folder: Path, count: int) -> Path:
    """A manifest of short noise-and-tone recordings with fixed transcripts."""
    rng = np.random.default_rng(0)
    (folder / "audio").mkdir(parents=True)
    lines = []
    for i in range(count):
        seconds = rng.uniform(0.4, 1.2)
        t = np.arange(int(seconds * 16000)) / 16000
        audio = 0.3 * np.sin(2 * np.pi * (200 + 40 * i) * t) + 0.01 * rng.standard_normal(len(t))
        soundfile.write(folder / "audio" / f"{i}.flac", audio.astype(np.float32), 16000)
        lines.append(json.dumps({"audio_filepath": f"audio/{i}.flac", "duration": seconds,
                                 "text": TEXTS[i % len(TEXTS)]}))
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def cli(capsys, *args: str | Path) -> tuple[int, str, str]:
    """Exit code, standard output and standard error of ``transdec ARGS``, run in-process (``main``)."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit:  # argparse's own errors, --help and --version
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- NeMo fixtures ---------------------------------------------------------------------------------------------------

#: The ``.nemo`` archives and their recorded outputs (see ``tests/test_nemo_fixtures.py``).
NEMO_FIXTURES = FIXTURES / "nemo"


def repack(source: str, target: Path, edit_config: Callable[[dict], None] | None = None,
           edit_weights: Callable[[dict], None] | None = None, config_text: str | None = None) -> Path:
    """A copy of fixture ``source`` with its config and/or weights changed."""
    with tarfile.open(NEMO_FIXTURES / f"{source}.nemo") as archive:
        files = {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}
    config_name = next(n for n in files if n.endswith("model_config.yaml"))
    weights_name = next(n for n in files if n.endswith("model_weights.ckpt"))
    if edit_config or config_text:
        config = yaml.safe_load(files[config_name])
        if edit_config:
            edit_config(config)
        files[config_name] = (config_text or yaml.safe_dump(config)).encode()
    if edit_weights:
        state = torch.load(io.BytesIO(files[weights_name]), weights_only=True)
        edit_weights(state)
        buffer = io.BytesIO()
        torch.save(state, buffer)
        files[weights_name] = buffer.getvalue()
    with tarfile.open(target, "w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return target


# --- N-gram LM cases -------------------------------------------------------------------------------------------------

#: Vocabulary of the random ARPA LMs.
LM_VOCAB = 12
#: ARPA files written by lmplz.
LM_FIXTURES = FIXTURES / "lm"


def with_backoffs(text: str, value: str, every: int = 3) -> str:
    """``text`` with every ``every``-th backoff of the orders below the highest replaced by ``value``."""
    lines, seen = [], 0
    for line in text.split("\n"):
        fields = line.split("\t")
        if len(fields) == 3:
            seen += 1
            if seen % every == 0:
                line = "\t".join([fields[0], fields[1], value])
        lines.append(line)
    return "\n".join(lines)


def fixed_shape_cases(tmp_path) -> list[tuple[str, NGramLM]]:
    """LMs of every shape the fixed-shape scorers must resolve: orders 1 to 5, unseen tokens, -inf backoffs,
    states with no arcs, and a state with arcs for every word (the longest binary search)."""
    cases = []
    for order in (2, 3, 4, 5):
        text = random_arpa(LM_VOCAB, order, seed=20 + order, ngrams_per_order=60)
        for name, body in (("plain", text), ("-inf", with_backoffs(text, "-inf"))):
            path = tmp_path / f"{name}{order}.arpa"
            path.write_text(body)
            cases.append((path.name, NGramLM.load(path, LM_VOCAB, dtype=torch.float64)))
    cases.append(("order 1", NGramLM.load(LM_FIXTURES / "lmplz_order1.arpa", 256, dtype=torch.float64)))
    dense = ["\\data\\", f"ngram 1={LM_VOCAB + 3}", f"ngram 2={LM_VOCAB + 1}", "", "\\1-grams:", "-99\t<s>\t-0.5",
             "-1.0\t</s>", "-2.0\t<unk>\t0"]
    dense += [f"-{1 + t / 10}\t{word(t)}\t-0.{t + 1}" for t in range(LM_VOCAB)]
    dense += ["", "\\2-grams:", "-0.7\t<s> </s>", *(f"-0.{t + 2}\t<s> {word(t)}" for t in range(LM_VOCAB)), "",
              "\\end\\"]
    path = tmp_path / "dense.arpa"
    path.write_text("\n".join(dense) + "\n")
    cases.append(("every word after <s>", NGramLM.load(path, LM_VOCAB, dtype=torch.float64)))
    return cases


# --- Loss references -------------------------------------------------------------------------------------------------

LOSS_NUM_TOKENS = 3
#: Heads of the loss tests: every kind, with and without TDT duration 0.
LOSS_HEADS = [
    HeadSpec("rnnt", LOSS_NUM_TOKENS),
    HeadSpec("multiblank", LOSS_NUM_TOKENS, big_blank_durations=(2, 3)),
    HeadSpec("multiblank", LOSS_NUM_TOKENS, big_blank_durations=(2, 4, 8)),
    HeadSpec("tdt", LOSS_NUM_TOKENS, durations=(0, 1, 2)),
    HeadSpec("tdt", LOSS_NUM_TOKENS, durations=(0, 1, 2, 3, 4)),
    HeadSpec("tdt", LOSS_NUM_TOKENS, durations=(1, 2)),
]


def enumerate_paths(num_frames, num_targets, moves, allowed=lambda t, u: True):
    """Every path from (0, 0) ending exactly at (T, U) with a blank; yields lists of (t, u, move).

    ``moves(t, u)`` lists ``(kind, duration, key)`` with kind "label" or "blank". A label needs
    ``u < U`` and must land inside the utterance; a blank may land inside or exactly on T, and lands on T
    only once every target is emitted. Paths through a point (t < T) that ``allowed`` rejects are left out.
    """

    def walk(t, u, path):
        if t == num_frames and u == num_targets:
            yield path
            return
        if t < num_frames and not allowed(t, u):
            return
        for kind, duration, key in moves(t, u):
            if kind == "label" and u < num_targets and t + duration < num_frames:
                yield from walk(t + duration, u + 1, path + [(t, u, key)])
            elif kind == "blank" and (t + duration < num_frames or (t + duration == num_frames and u == num_targets)):
                yield from walk(t + duration, u, path + [(t, u, key)])

    yield from walk(0, 0, [])


def log_sum_exp(values):
    values = list(values)
    top = max(values)
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


def brute_force_loss(head: HeadSpec, logits, targets, sigma=0.0, allowed=lambda t, u: True):
    """Negative log of the summed probability of all paths (through points ``allowed`` accepts), for one
    utterance ``logits [T, U + 1, C]``."""
    num_frames, positions, _ = logits.shape
    if head.kind == "tdt":
        labels = logits[..., : head.num_labels].log_softmax(-1) - sigma
        durations = logits[..., head.num_labels :].log_softmax(-1)

        def moves(t, u):
            for i, d in enumerate(head.durations):
                yield "label", d, ("label", i)
                if d > 0:
                    yield "blank", d, ("blank", i)

        def weight(t, u, key):
            kind, i = key
            label = targets[u] if kind == "label" else head.blank_id
            return float(labels[t, u, label] + durations[t, u, i])

    else:
        log_probs = logits.log_softmax(-1) - sigma
        blank_outputs = [(1, head.blank_id)] + [
            (d, head.big_blank_id(i)) for i, d in enumerate(head.big_blank_durations)
        ]

        def moves(t, u):
            yield "label", 0, None
            for duration, output in blank_outputs:
                yield "blank", duration, output

        def weight(t, u, key):
            return float(log_probs[t, u, targets[u] if key is None else key])

    paths = list(enumerate_paths(num_frames, positions - 1, moves, allowed))
    if not paths:
        return math.inf
    return -log_sum_exp(math.fsum(weight(t, u, key) for t, u, key in path) for path in paths)


def random_loss_problem(head, frames, targets, seed=0):
    """A joint and a simple joint on random float64 encoder and predictor outputs, for a padded batch."""
    torch.manual_seed(seed)
    joint = JointNetwork(6, 5, 7, head).double()
    simple = SimpleJoint(6, 5, LOSS_NUM_TOKENS).double()
    encoder_out = torch.randn(len(frames), max(frames), 6, dtype=torch.float64)
    predictor_out = torch.randn(len(frames), max(targets) + 1, 5, dtype=torch.float64)
    labels = torch.randint(0, LOSS_NUM_TOKENS, (len(frames), max(targets)))
    return joint, simple, encoder_out, predictor_out, labels, torch.tensor(frames), torch.tensor(targets)


def sigma_of(head):
    """The sigma the loss tests train a head with: none for RNN-T."""
    return 0.0 if head.kind == "rnnt" else 0.05


# --- Phrase boosting -------------------------------------------------------------------------------------------------

def phrase_lists(tokens_per_utterance, num_tokens, seed, count=3):
    """``count`` phrase lists made of pieces of the given token sequences (some with a token changed, so that
    matches also fail) and random phrases, with per-phrase weights."""
    rng = random.Random(seed)
    pieces = [tokens for tokens in tokens_per_utterance if len(tokens) >= 2]
    lists = []
    for _ in range(count):
        phrases = []
        for _ in range(6):
            if pieces and rng.random() < 0.7:
                tokens = rng.choice(pieces)
                start = rng.randrange(len(tokens) - 1)
                phrase = list(tokens[start : start + rng.randint(2, 4)])
                if rng.random() < 0.3:
                    phrase[-1] = rng.randrange(num_tokens)
            else:
                phrase = [rng.randrange(num_tokens) for _ in range(rng.randint(1, 3))]
            phrases.append((phrase, rng.choice([0.5, 1.0, 1.5])))
        lists.append(phrases)
    return lists


def boosted(model, frames, lengths, weight=1.2, depth_scaling=0.5, seed=0):
    """A Boost with a phrase list per utterance (three lists, shared round-robin), its tree, and the list indices."""
    plain = greedy_reference(model, frames, lengths, max_symbols_per_frame=3).hypotheses()
    lists = phrase_lists([h.tokens for h in plain], model.head.num_tokens, seed)
    tree = BoostingTree.build(lists, model.head.num_tokens, depth_scaling, dtype=torch.float64)
    index = [b % len(lists) for b in range(frames.shape[0])]
    return Boost(tree.for_utterances(index), weight), tree, index, lists


def rerun_in_place(search, frames: torch.Tensor, lengths: torch.Tensor) -> None:
    """Run an in-place beam search again on new inputs written into its buffers, as a graph replay does; the frames
    past the new batch's are set to NaN (an older batch's, never to be read)."""
    search.encoder_out[:, : frames.shape[1]].copy_(frames)
    search.encoder_out[:, frames.shape[1]:] = float("nan")
    search.lengths.copy_(lengths.unsqueeze(1))
    search.start()
    search.run()


def flac_without_length(source: str | Path, target: Path) -> Path:
    """A copy of the FLAC file ``source`` whose STREAMINFO gives 0 total samples ("unknown", as encoders writing to a
    pipe leave it): ``target``."""
    data = bytearray(Path(source).read_bytes())
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0, "STREAMINFO must be the first metadata block"
    # STREAMINFO from byte 8: block sizes (4 bytes), frame sizes (6), then 20 bits of rate, 3 of channels, 5 of
    # bits per sample and the 36 bits of the total sample count.
    field = int.from_bytes(data[18:26], "big") & ~((1 << 36) - 1)
    data[18:26] = field.to_bytes(8, "big")
    target.write_bytes(bytes(data))
    return target
