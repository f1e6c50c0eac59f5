"""Batch transcription of files for the command line: bad items are reported and skipped, finished results
are written, and an output file is replaced only by a complete run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tqdm import tqdm

from transdec.audio import AudioError, load_audio
from transdec.decoding import DecodingConfig
from transdec.model.transducer_model import TransducerModel
from transdec.sources import AudioItem, collect_inputs
from transdec.transcribe import Transcript, transcribe

#: Items read into memory at a time; bounds memory on long input lists. Results are written a chunk at a time.
READ_AHEAD = 256


def format_result(item: AudioItem, transcript: Transcript, output_format: str, prefix_path: bool) -> str:
    """One output line; raises ValueError for a NaN or infinite number, which strict JSON cannot hold."""
    if output_format == "text":
        return f"{item.name}\t{transcript.text}" if prefix_path else transcript.text
    if output_format == "manifest":
        return json.dumps({**(item.entry or {"audio_filepath": str(item.path)}), "pred_text": transcript.text},
                          allow_nan=False)
    words = [{"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3),
              "confidence": round(w.confidence, 4)} for w in transcript.words]
    row = {"audio_filepath": str(item.path), "offset": item.offset, "duration": round(transcript.duration, 3),
           "text": transcript.text, "tokens": transcript.tokens, "words": words}
    if transcript.nbest:
        row["nbest"] = [{"text": a.text, "tokens": a.tokens, "score": round(a.score, 4)} for a in transcript.nbest]
    return json.dumps(row, allow_nan=False)


def transcribe_files(model: TransducerModel, paths: list[str], decoding: DecodingConfig, batch_size: int = 16,
                     output_format: str = "text", output: str | None = None, allow_upsampling: bool = False) -> int:
    """Transcribe every item under ``paths``; returns the exit code: 0, 1 if any item failed or there was
    nothing to transcribe, 130 if interrupted.

    ``output`` is written as a temporary file in its folder and renamed when the run is complete, so an
    existing file stays as it was until then. If the run is interrupted or crashes, the results so far go
    to ``<output>.partial`` instead.
    """
    items, failures = collect_inputs(paths)
    for failure in failures:
        print(f"error: {failure.where}: {failure.message}", file=sys.stderr)
    if not items:
        return 1
    prefix = len(items) > 1 and output_format == "text"
    tmp = None if output is None else Path(output).with_name(f"{Path(output).name}.{os.getpid()}.tmp")
    try:
        sink = sys.stdout if tmp is None else open(tmp, "w", encoding="utf-8")
    except OSError as error:
        print(f"error: cannot write {output}: {error.strerror}", file=sys.stderr)
        return 2
    failed, written = len(failures), 0
    try:
        with tqdm(total=len(items), desc="transcribe", unit="item", disable=None) as progress:
            for start in range(0, len(items), READ_AHEAD):
                chunk = items[start : start + READ_AHEAD]
                results = _transcribe_chunk(model, chunk, decoding, batch_size, allow_upsampling, progress)
                for item, result in zip(chunk, results):
                    if not isinstance(result, AudioError):
                        try:
                            line = format_result(item, result, output_format, prefix)
                        except ValueError:  # strict JSON: a NaN is never written
                            result = AudioError(f"{item.name}: the transcript holds NaN or infinity")
                    if isinstance(result, AudioError):
                        progress.write(item.error(str(result)), file=sys.stderr)
                        failed += 1
                        continue
                    progress.write(line, file=sink)  # on a terminal, above the bar
                    if tmp is None:
                        sink.flush()
                    written += 1
    except BaseException as error:
        message = f"transdec transcribe: {'interrupted' if isinstance(error, KeyboardInterrupt) else 'failed'}"
        if tmp is not None:
            sink.close()
            if written:
                os.replace(tmp, f"{output}.partial")
                message += f"; {written} result(s) so far are in {output}.partial, {output} was not written"
            else:
                tmp.unlink()
        print(message, file=sys.stderr)
        if isinstance(error, KeyboardInterrupt):
            return 130
        raise
    if tmp is not None:
        sink.close()
        if written:
            os.replace(tmp, output)
        else:
            tmp.unlink()
            print(f"nothing was transcribed, so {output} was not written", file=sys.stderr)
    if failed:
        print(f"{failed} item(s) failed, {written} transcribed", file=sys.stderr)
    return 1 if failed else 0


def _transcribe_chunk(model: TransducerModel, chunk: list[AudioItem], decoding: DecodingConfig, batch_size: int,
                      allow_upsampling: bool, progress: tqdm) -> list[Transcript | AudioError]:
    """Each item's transcript, or the error that kept it from being read, in order; batches of similar length
    are transcribed one at a time so that ``progress`` moves with them."""
    results: list[Transcript | AudioError | None] = [None] * len(chunk)
    waveforms = {}
    for i, item in enumerate(chunk):
        try:
            waveforms[i] = load_audio(item.path, model.sample_rate, item.offset, item.duration, allow_upsampling)
        except AudioError as error:
            results[i] = error
            progress.update(1)
    order = sorted(waveforms, key=lambda i: len(waveforms[i]))
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        for i, transcript in zip(batch, transcribe(model, [waveforms[i] for i in batch], decoding, batch_size)):
            results[i] = transcript
        progress.update(len(batch))
    return results  # type: ignore[return-value]
