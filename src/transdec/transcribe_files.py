"""Batch transcription of files for the command line: bad items are reported and skipped, finished results
are always written, output files appear atomically."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TextIO

from transdec.audio import AudioError, load_audio
from transdec.decoding import DecodingConfig
from transdec.model.transducer_model import TransducerModel
from transdec.sources import AudioItem, collect_inputs
from transdec.transcribe import Transcript, transcribe

#: Items read into memory at a time; bounds memory on long input lists.
READ_AHEAD = 256


def format_result(item: AudioItem, transcript: Transcript, output_format: str, prefix_path: bool) -> str:
    if output_format == "text":
        return f"{item.name}\t{transcript.text}" if prefix_path else transcript.text
    if output_format == "manifest":
        return json.dumps({**(item.entry or {"audio_filepath": str(item.path)}), "pred_text": transcript.text})
    words = [{"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3),
              "confidence": round(w.confidence, 4)} for w in transcript.words]
    return json.dumps({"audio_filepath": str(item.path), "offset": item.offset, "duration": round(transcript.duration, 3),
                       "text": transcript.text, "tokens": transcript.tokens, "words": words})


def transcribe_files(model: TransducerModel, paths: list[str], decoding: DecodingConfig, batch_size: int = 16,
                     output_format: str = "text", output: str | None = None, allow_upsampling: bool = False) -> int:
    """Transcribe every item under ``paths``; returns the exit code (0, or 1 if any item failed)."""
    items, failures = collect_inputs(paths)
    for failure in failures:
        print(f"error: {failure.where}: {failure.message}", file=sys.stderr)
    prefix = len(items) > 1 and output_format == "text"
    sink, tmp_path = _open_output(output)
    progress = _progress(len(items))
    unreadable = 0
    try:
        for start in range(0, len(items), READ_AHEAD):
            chunk, waveforms = [], []
            for item in items[start : start + READ_AHEAD]:
                try:
                    audio = load_audio(item.path, model.sample_rate, item.offset, item.duration, allow_upsampling)
                except AudioError as error:
                    print(f"error: {error}", file=sys.stderr)
                    unreadable += 1
                    continue
                chunk.append(item)
                waveforms.append(audio)
            for item, transcript in zip(chunk, transcribe(model, waveforms, decoding, batch_size)):
                print(format_result(item, transcript, output_format, prefix), file=sink, flush=output is None)
            if progress is not None:
                progress.update(len(items[start : start + READ_AHEAD]))
    finally:
        # Whatever was finished is kept, even when a later item raised something unexpected.
        if progress is not None:
            progress.close()
        if tmp_path is not None:
            sink.close()
            os.replace(tmp_path, output)
    failed = len(failures) + unreadable
    if failed:
        print(f"{failed} item(s) failed, {len(items) - unreadable} transcribed", file=sys.stderr)
    return 1 if failed else 0


def _open_output(output: str | None) -> tuple[TextIO, Path | None]:
    if output is None:
        return sys.stdout, None
    tmp = Path(output).with_name(Path(output).name + ".partial")
    return open(tmp, "w", encoding="utf-8"), tmp


def _progress(total: int):
    if total < 50 or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="transcribe", unit="file")
