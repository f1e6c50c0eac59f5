"""Audio in, text out: batched transcription with word timings and confidences."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from transdec.audio import AudioInput, as_waveform
from transdec.biasing.items import BoostOptions, bind_boosts, item_boost, with_boost
from transdec.biasing.phrases import BoostPhrase
from transdec.decoding import DecodingConfig, Hypothesis, decode
from transdec.long_audio import ChunkingConfig, encode_batch
from transdec.protocol import SpeechModel


@dataclass
class WordTiming:
    """A word with its time span in seconds and its confidence.

    ``start`` is the frame of the word's first token; ``end`` the frame after its last token (for TDT, the
    frame its predicted duration reaches), both times the encoder frame shift. ``confidence`` is the geometric
    mean of the word's token probabilities, ``exp(mean token log-prob)``, in (0, 1].
    """

    word: str
    start: float
    end: float
    confidence: float


@dataclass
class Transcript:
    """One input's result: ``text``, ``tokens`` (ids), ``words`` with timings, the audio ``duration``, and for a
    beam search asked for several hypotheses, the ``nbest`` (best first, the first being this one)."""

    text: str
    tokens: list[int] = field(default_factory=list)
    words: list[WordTiming] = field(default_factory=list)
    duration: float = 0.0
    nbest: list[Alternative] = field(default_factory=list)


@dataclass
class Alternative:
    """One of the n-best hypotheses: its text, token ids and score (the search's log-probability)."""

    text: str
    tokens: list[int]
    score: float


def words_of(model: SpeechModel, hyp: Hypothesis) -> list[WordTiming]:
    """Group a hypothesis's tokens into words (sentencepiece word-start marks) with times and confidences."""
    shift = model.frame_shift_seconds
    groups: list[list[int]] = []
    for position, starts_word in enumerate(model.tokenizer.word_starts(hyp.tokens)):
        if starts_word or not groups:
            groups.append([])
        groups[-1].append(position)
    words = []
    for group in groups:
        text = model.tokenizer.decode([hyp.tokens[i] for i in group]).strip()
        if not text:
            continue
        last = group[-1]
        end_frame = hyp.timestamps[last] + max(hyp.durations[last], 1)
        mean_logprob = sum(hyp.token_logprobs[i] for i in group) / len(group)
        words.append(WordTiming(text, hyp.timestamps[group[0]] * shift, end_frame * shift, math.exp(mean_logprob)))
    return words


def _transcript(model: SpeechModel, nbest: list[Hypothesis], num_samples: int) -> Transcript:
    hyp = nbest[0] if nbest else Hypothesis()
    alternatives = [Alternative(model.tokenizer.decode(h.tokens), h.tokens, h.score) for h in nbest] if len(nbest) > 1 else []
    return Transcript(model.tokenizer.decode(hyp.tokens), hyp.tokens, words_of(model, hyp),
                      num_samples / model.sample_rate, alternatives)


@torch.inference_mode()
def transcribe(model: SpeechModel, inputs: Sequence[AudioInput], decoding: DecodingConfig | None = None,
               batch_size: int = 16, chunking: ChunkingConfig | None = ChunkingConfig(),
               phrases: Sequence[Sequence[str | BoostPhrase] | None] | None = None,
               boost: BoostOptions = BoostOptions()) -> list[Transcript]:
    """Transcribe audio files (any format libsndfile reads, resampled as needed) or 1-D sample arrays at the
    model's rate. Inputs are batched by similar length; results come back in input order. Recordings longer
    than ``chunking`` allows are encoded in overlapping windows (see :mod:`transdec.long_audio`); ``None``
    encodes everything whole.

    ``phrases``, one list (or None) per input, boosts each input by its own phrases (with ``boost``'s weight), in
    the same batch as the others; a :class:`~transdec.biasing.Boost` among ``decoding``'s fusions boosts every
    input, its text phrases tokenized with the model's tokenizer.

    Arrays may be float (audio in [-1, 1]) or integer PCM (scaled as soundfile reads it: int16 / 32768,
    int32 / 2**31, uint8 centred on 128); a 2-D array must hold one channel. Audio shorter than one feature
    window, empty audio included, gives an empty transcript; NaN or infinite samples are a ValueError.
    """
    if isinstance(inputs, (str, os.PathLike, np.ndarray, torch.Tensor)):
        inputs = [inputs]
    waveforms = [as_waveform(item, model.sample_rate, f"inputs[{number}]") for number, item in enumerate(inputs)]
    if phrases is not None and len(phrases) != len(waveforms):
        raise ValueError(f"phrases: one list per input, got {len(phrases)} for {len(waveforms)} inputs")
    phrase_lists = [[p if isinstance(p, BoostPhrase) else BoostPhrase(p) for p in item or ()]
                    for item in phrases or [None] * len(waveforms)]
    decoding = bind_boosts(decoding or DecodingConfig(), model.tokenizer)
    results: list[Transcript | None] = [None] * len(waveforms)
    order = sorted(range(len(waveforms)), key=lambda i: len(waveforms[i]))
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        encoded, frame_counts = encode_batch(model, [waveforms[i] for i in indices], chunking)
        batch_decoding = with_boost(decoding, item_boost([phrase_lists[i] for i in indices], model.tokenizer,
                                                         model.head.num_tokens, boost, encoded.device))
        for i, nbest in zip(indices, decode(model, encoded, frame_counts, batch_decoding).nbest_hypotheses()):
            results[i] = _transcript(model, nbest, len(waveforms[i]))
    return results  # type: ignore[return-value]
