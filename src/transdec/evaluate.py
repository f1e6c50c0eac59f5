"""Accuracy and speed on a manifest: WER and CER after text normalisation, and RTFx of the whole pipeline and
of the decoder alone, for several decoding strategies side by side in one run."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import jiwer
import numpy as np
import torch
from tqdm import tqdm

from transdec.audio import AudioError, load_audio
from transdec.biasing.boost import Boost
from transdec.biasing.items import ITEM_PHRASES_FIELD, BoostOptions, bind_boosts, item_boost, item_phrases, with_boost
from transdec.biasing.phrases import BoostPhrase
from transdec.decoding import DecodingConfig, decode
from transdec.long_audio import ChunkingConfig, encode_batch
from transdec.metrics import word_errors
from transdec.protocol import SpeechModel
from transdec.sources import AudioItem, read_manifest_items

NORMALIZERS = ("whisper", "none")


class EvaluationError(ValueError):
    """Nothing could be evaluated: the manifest has no entries, or none of them could be used."""


def normalizer(name: str):
    """Text normaliser applied to references and hypotheses before scoring."""
    if name == "whisper":
        from whisper_normalizer.english import EnglishTextNormalizer

        return EnglishTextNormalizer()
    if name == "none":
        return lambda text: " ".join(text.split())
    raise ValueError(f"unknown normaliser {name!r}; choose from {NORMALIZERS}")


@dataclass
class StrategyReport:
    """One strategy's results over the manifest (times in seconds, pooled over all utterances)."""

    strategy: str
    utterances: int
    audio_seconds: float
    wer: float
    cer: float
    encoder_seconds: float
    decoder_seconds: float

    @property
    def rtfx(self) -> float:
        return self.audio_seconds / max(self.encoder_seconds + self.decoder_seconds, 1e-9)

    @property
    def decoder_rtfx(self) -> float:
        return self.audio_seconds / max(self.decoder_seconds, 1e-9)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


#: Seconds of each item that the untimed warm-up batches encode.
WARMUP_SECONDS = 30


@torch.inference_mode()
def run_strategies(model: SpeechModel, waveforms: list[np.ndarray], order: list[int],
                   strategies: list[DecodingConfig], batch_size: int, warmup_batches: int, progress=None,
                   chunking: ChunkingConfig | None = ChunkingConfig(), phrases: list[list[BoostPhrase]] | None = None,
                   boost_options: BoostOptions = BoostOptions()) -> tuple[list[list[str]], float, list[float]]:
    """Transcripts (input order) per strategy, the pooled encoder seconds, and each strategy's decoder seconds.

    Each batch is encoded once and every strategy decodes that same encoder output in turn: the encoder's
    work does not depend on the strategy, and interleaving the decoders exposes them to the same machine
    load, so their ratio is measured under equal conditions. The first ``warmup_batches`` batches are run
    untimed first. `progress`, if given, is a tqdm-like bar advanced by utterances per batch and strategy.
    ``phrases``: each item's own phrases to boost (timed with the decoder: building their tree is part of it).
    """
    device = model.device
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    texts = [[""] * len(waveforms) for _ in strategies]
    encoder_seconds, decoder_seconds = 0.0, [0.0] * len(strategies)
    for number, indices in enumerate(batches[:warmup_batches] + batches):
        timed = number >= min(warmup_batches, len(batches))
        # Warm-up needs the shapes, not hours of audio: a long recording is cut to its first seconds there.
        cut = None if timed else WARMUP_SECONDS * model.sample_rate
        rows = [torch.from_numpy(waveforms[i][:cut]).to(device) for i in indices]
        _synchronize(device)
        start = time.perf_counter()
        encoded, frame_counts = encode_batch(model, rows, chunking)  # long recordings in windows, as transcribe does
        _synchronize(device)
        if timed:
            encoder_seconds += time.perf_counter() - start
        # The batch's own phrase lists are one tree, built once for all strategies (its time counts to each).
        start = time.perf_counter()
        batch_boost = None if phrases is None else item_boost([phrases[i] for i in indices], model.tokenizer,
                                                              model.head.num_tokens, boost_options, encoded.device)
        boost_seconds = time.perf_counter() - start
        for which, decoding in enumerate(strategies):
            start = time.perf_counter()
            hyps = decode(model, encoded, frame_counts, with_boost(decoding, batch_boost)).hypotheses()
            _synchronize(device)
            if timed:
                decoder_seconds[which] += time.perf_counter() - start + boost_seconds
                for i, hyp in zip(indices, hyps):
                    texts[which][i] = model.tokenizer.decode(hyp.tokens)
                if progress is not None:
                    progress.update(len(indices))
    return texts, encoder_seconds, decoder_seconds


def config_label(config: DecodingConfig) -> str:
    """The name a strategy's results go by: the strategy, and each fusion's weight (``beam_alsd_pp+lm0.5``,
    ``greedy_label+boost2``)."""
    return config.strategy + "".join(f"+{'boost' if isinstance(fusion, Boost) else 'lm'}{fusion.weight:g}"
                                     for fusion in config.fusions)


def evaluate_manifest(model: SpeechModel, manifest: str | Path, strategies: list[DecodingConfig],
                      batch_size: int = 16, warmup_batches: int = 1, normalizer_name: str = "whisper",
                      output_dir: str | Path | None = None, allow_upsampling: bool = False,
                      chunking: ChunkingConfig | None = ChunkingConfig(),
                      item_boost: BoostOptions | None = None) -> tuple[list[StrategyReport], int]:
    """Evaluate every strategy on the same audio; returns the reports and the number of unusable items.
    ``item_boost``: boost each item by the phrases of its ``boost_phrases`` field, with these options.

    Raises:
        EvaluationError: the manifest has no entries, or no item could be evaluated (nothing is written).
    """
    strategies = [bind_boosts(strategy, model.tokenizer) for strategy in strategies]
    items, errors = read_manifest_items(Path(manifest))
    for error in errors:
        print(f"transdec evaluate: error: {error.where}: {error.message}", file=sys.stderr)
    if not items and not errors:
        raise EvaluationError(f"{manifest}: the manifest has no entries")
    failed = len(errors)
    usable: list[AudioItem] = []
    waveforms: list[np.ndarray] = []
    phrases: list[list[BoostPhrase]] = []
    for item in items:
        if item.entry.get("text") is None:
            print(f"transdec evaluate: error: {item.describe(f'{item.name}: the manifest entry has no reference text')}",
                  file=sys.stderr)
            failed += 1
            continue
        try:
            own = item_phrases(item.entry.get(ITEM_PHRASES_FIELD, []), item.name) if item_boost is not None else []
        except ValueError as error:
            print(f"transdec evaluate: error: {item.describe(str(error))}", file=sys.stderr)
            failed += 1
            continue
        try:
            waveforms.append(load_audio(item.path, model.sample_rate, item.offset, item.duration, allow_upsampling))
        except AudioError as error:
            print(f"transdec evaluate: error: {item.describe(str(error))}", file=sys.stderr)
            failed += 1
            continue
        usable.append(item)
        phrases.append(own)
    if not usable:
        raise EvaluationError(f"{manifest}: none of its {failed} item(s) could be evaluated")
    normalize = normalizer(normalizer_name)
    references = [normalize(item.entry["text"]) for item in usable]
    audio_seconds = sum(len(w) for w in waveforms) / model.sample_rate
    # Sorting by duration keeps padding small, as every serious evaluation does.
    order = sorted(range(len(waveforms)), key=lambda i: len(waveforms[i]))
    reports = []
    progress = tqdm(total=len(waveforms) * len(strategies), unit="utt", disable=None,
                    desc="evaluate " + ",".join(config_label(d) for d in strategies))  # a bar on terminals only
    all_texts, encoder_s, decoder_s = run_strategies(model, waveforms, order, strategies, batch_size, warmup_batches,
                                                     progress, chunking, phrases if item_boost else None,
                                                     item_boost or BoostOptions())
    for decoding, texts, strategy_decoder_s in zip(strategies, all_texts, decoder_s):
        hypotheses = [normalize(t) for t in texts]
        cer = jiwer.cer(references, hypotheses) if references and any(references) else 0.0
        reports.append(StrategyReport(config_label(decoding), len(usable), round(audio_seconds, 3),
                                      word_errors(references, hypotheses).wer, float(cer), encoder_s,
                                      strategy_decoder_s))
        if output_dir is not None:
            _write_atomically(Path(output_dir) / f"predictions_{config_label(decoding)}.jsonl", "".join(
                json.dumps({**item.entry, "pred_text": text}, allow_nan=False) + "\n"
                for item, text in zip(usable, texts)))
    progress.close()
    if output_dir is not None:
        summary = [{**asdict(r), "rtfx": r.rtfx, "decoder_rtfx": r.decoder_rtfx} for r in reports]
        _write_atomically(Path(output_dir) / "summary.json", json.dumps(
            {"manifest": str(manifest), "normalizer": normalizer_name, "batch_size": batch_size,
             "warmup_batches": warmup_batches, "failed_items": failed,
             "length_policy": model.default_length_policy(model.device),
             "strategies": summary}, indent=2, allow_nan=False))
    return reports, failed


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def format_table(reports: list[StrategyReport]) -> str:
    header = "| strategy | utterances | WER | CER | RTFx (encoder + decoder) | decoder RTFx | encoder s | decoder s |"
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    for r in reports:
        lines.append(f"| {r.strategy} | {r.utterances} | {100 * r.wer:.2f}% | {100 * r.cer:.2f}% | {r.rtfx:.0f} | "
                     f"{r.decoder_rtfx:.0f} | {r.encoder_seconds:.2f} | {r.decoder_seconds:.2f} |")
    return "\n".join(lines)
