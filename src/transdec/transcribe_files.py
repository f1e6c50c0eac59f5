"""Batch transcription of files for the command line: bad items are reported and skipped, each result is written
as soon as it and every item before it are done, an output file is replaced only by a complete run, and an
interrupted run keeps every finished result in ``<output>.partial``, from which ``--resume`` carries on."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from transdec.audio import AudioError, load_audio
from transdec.biasing.items import ITEM_PHRASES_FIELD, BoostOptions, item_phrases
from transdec.decoding import DecodingConfig
from transdec.long_audio import ChunkingConfig
from transdec.manifest import InputError
from transdec.protocol import SpeechModel
from transdec.sources import AudioItem, collect_inputs
from transdec.transcribe import Transcript, transcribe

COMMAND = "transdec transcribe"


def format_result(item: AudioItem, transcript: Transcript, output_format: str, prefix_path: bool,
                  source: dict | None = None) -> str:
    """One output line; raises ValueError for a NaN or infinite number, which strict JSON cannot hold.

    ``source``: where the model came from, for a model fetched by Hub name (``HubSource.as_dict()``: repo,
    revision, commit, files, size), added to each JSON-lines record as ``hub``, so that every line says which model
    made it."""
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
    if source is not None:
        row["hub"] = source
    return json.dumps(row, allow_nan=False)


def item_key(item: AudioItem, output_format: str) -> str:
    """What identifies an item's line in an output (see :func:`line_key`)."""
    if output_format == "text":
        return item.name
    if output_format == "manifest" and item.entry:
        # The whole entry: two entries of one recording may differ in their other fields, which the lines carry.
        return json.dumps(item.entry, sort_keys=True)
    return json.dumps([str(item.path), item.offset])


def line_key(line: str, output_format: str) -> str | None:
    """The :func:`item_key` of the item an output line is for (None: a line that names no item)."""
    if output_format == "text":
        return line.split("\t", 1)[0] if "\t" in line else None
    try:
        row = json.loads(line)
        if output_format == "manifest" and isinstance(row, dict) and "audio_filepath" in row:
            row.pop("pred_text", None)
            return json.dumps(row, sort_keys=True)
        return json.dumps([row["audio_filepath"], row.get("offset", 0.0)])
    except (ValueError, KeyError, TypeError):
        return None


class OrderedWriter:
    """Writes results in input order as soon as every earlier item is done; :meth:`drain` writes the finished
    rest in any order (an interrupted run keeps all it finished)."""

    def __init__(self, sink: TextIO, progress: tqdm, flush: bool) -> None:
        self.sink, self.progress, self.flush = sink, progress, flush
        self.waiting: dict[int, str | None] = {}  # position -> line (None: a failed item, nothing to write)
        self.next = 0
        self.written = 0

    def done(self, position: int, line: str | None) -> None:
        self.waiting[position] = line
        while self.next in self.waiting:
            self._write(self.waiting.pop(self.next))
            self.next += 1

    def skip(self, position: int) -> None:
        self.done(position, None)

    def drain(self) -> None:
        for position in sorted(self.waiting):
            self._write(self.waiting.pop(position))

    def _write(self, line: str | None) -> None:
        if line is None:
            return
        self.progress.write(line, file=self.sink)  # on a terminal, above the bar
        if self.flush:
            self.sink.flush()
        self.written += 1


def transcribe_files(model: SpeechModel, paths: list[str], decoding: DecodingConfig, batch_size: int = 16,
                     output_format: str = "text", output: str | None = None, allow_upsampling: bool = False,
                     chunking: ChunkingConfig | None = ChunkingConfig(), resume: bool = False,
                     item_boost: BoostOptions | None = None) -> int:
    """Transcribe every item under ``paths``; returns the exit code: 0, 1 if any item failed or there was
    nothing to transcribe, 2 if the output cannot be written, 130 if interrupted (or terminated).

    ``output`` is written as a temporary file in its folder and renamed when the run is complete, so an
    existing file stays as it was until then. If the run is interrupted, terminated (SIGTERM) or crashes, every
    result finished so far goes to ``<output>.partial`` instead; ``resume=True`` copies the lines of an existing
    ``<output>.partial``, writes them first, and transcribes only the items it does not hold.

    ``item_boost``: boost each manifest item by the phrases of its ``boost_phrases`` field, with these options.
    """
    items, failures = collect_inputs(paths)

    def results(todo: list[AudioItem], progress: tqdm) -> Iterator[tuple[int, AudioItem, Transcript | AudioError]]:
        return transcribed_items(model, todo, decoding, batch_size, allow_upsampling, chunking, progress, item_boost)

    return write_transcripts(items, failures, results, output_format, output, resume, model_source(model))


def model_source(model: object) -> dict | None:
    """What :func:`format_result` writes of where ``model`` came from: its Hub source, if it was fetched by name."""
    source = getattr(model, "hub_source", None)
    return None if source is None else source.as_dict()


#: What transcribes the items of a run for :func:`write_transcripts`: given the items still to do and the progress
#: bar, ``(position in those items, item, transcript or the error that kept it from being transcribed)`` for each, in
#: any order, updating the bar as it goes.
Results = Callable[[list[AudioItem], tqdm], Iterable[tuple[int, AudioItem, Transcript | AudioError]]]


def write_transcripts(items: list[AudioItem], failures: list[InputError], results: Results,
                      output_format: str = "text", output: str | None = None, resume: bool = False,
                      source: dict | None = None) -> int:
    """Write the transcripts ``results`` makes of ``items`` as :func:`transcribe_files` does (the same lines, in
    input order, with the same reports, resumption and exit codes); ``failures`` are the inputs that gave no item,
    reported first; ``source``, the model's Hub source for each JSON line (:func:`format_result`). This is where
    every way of transcribing a batch of files (one process, a Ray cluster) meets the output."""
    for failure in failures:
        print(f"{COMMAND}: error: {failure.where}: {failure.message}", file=sys.stderr)
    if not items:
        return 1
    prefix = len(items) > 1 and output_format == "text"
    kept = _resumed_lines(output, output_format, resume)
    tmp = None if output is None else Path(output).with_name(f"{Path(output).name}.{os.getpid()}.tmp")
    try:
        sink = sys.stdout if tmp is None else open(tmp, "w", encoding="utf-8")
    except OSError as error:
        print(f"{COMMAND}: error: cannot write {output}: cannot create the temporary file {tmp} beside it "
              f"({error.strerror})", file=sys.stderr)
        return 2
    resumed, strays = _resumed_positions(items, kept, output_format, prefix)
    for line in strays:  # kept lines of items no longer among the inputs: kept too, nothing is lost
        sink.write(line + "\n")
    todo_positions = [position for position in range(len(items)) if position not in resumed]
    todo = [items[position] for position in todo_positions]
    if kept:
        print(f"{COMMAND}: resuming: {len(resumed)} item(s) are in {output}.partial already", file=sys.stderr)
    failed = len(failures)
    writer = None
    try:
        with sigterm_as_interrupt(), tqdm(total=len(todo), desc="transcribe", unit="item", disable=None) as progress:
            writer = OrderedWriter(sink, progress, flush=tmp is None)
            try:
                # The resumed lines take their items' places, so the output is in input order, as an uninterrupted
                # run's, wherever the interruption left gaps.
                for position, line in resumed.items():
                    writer.done(position, line)
                for position, item, result in results(todo, progress):
                    position = todo_positions[position]
                    if not isinstance(result, AudioError):
                        try:
                            writer.done(position, format_result(item, result, output_format, prefix, source))
                            continue
                        except ValueError:  # strict JSON: a NaN is never written
                            result = AudioError(f"{item.name}: the transcript holds NaN or infinity")
                    progress.write(f"{COMMAND}: error: {item.describe(str(result))}", file=sys.stderr)
                    failed += 1
                    writer.skip(position)
            except BaseException:
                writer.drain()
                raise
    except BaseException as error:
        interrupted = isinstance(error, KeyboardInterrupt)
        message = f"{COMMAND}: {'interrupted' if interrupted else 'failed'}"
        so_far = (writer.written if writer else 0) + len(strays)
        if tmp is not None:
            sink.close()
            if so_far:
                os.replace(tmp, f"{output}.partial")
                message += (f"; {so_far} result(s) so far are in {output}.partial, {output} was not written "
                            "(--resume carries on from there)")
            else:
                tmp.unlink()
        print(message, file=sys.stderr)
        if interrupted:
            return 130
        raise
    written = writer.written + len(strays)
    if tmp is not None:
        sink.close()
        if written:
            os.replace(tmp, output)
            Path(f"{output}.partial").unlink(missing_ok=True)
        else:
            tmp.unlink()
            print(f"{COMMAND}: nothing was transcribed, so {output} was not written", file=sys.stderr)
    if failed:
        print(f"{COMMAND}: {failed} item(s) failed, {written} transcribed", file=sys.stderr)
    return 1 if failed or not written else 0


def _resumed_positions(items: list[AudioItem], kept: list[str], output_format: str,
                       prefix: bool) -> tuple[dict[int, str], list[str]]:
    """Which item each kept line stands for (by its key; the same recording listed twice is transcribed alike, so
    it does not matter which of its items a line takes), as ``{position: line}``, and the kept lines no item
    claims."""
    def key_of(line: str | None = None, item: AudioItem | None = None) -> str | None:
        if not (prefix or output_format != "text"):  # one item, written without its name
            return ""
        return line_key(line, output_format) if item is None else item_key(item, output_format)

    by_key: dict[str | None, list[int]] = {}  # key -> indices of the kept lines with it, in order
    for index, line in enumerate(kept):
        by_key.setdefault(key_of(line), []).append(index)
    resumed, claimed = {}, set()
    for position, item in enumerate(items):
        indices = by_key.get(key_of(item=item))
        if indices:
            claimed.add(indices[0])
            resumed[position] = kept[indices.pop(0)]
    return resumed, [line for index, line in enumerate(kept) if index not in claimed]


def _resumed_lines(output: str | None, output_format: str, resume: bool) -> list[str]:
    """The lines of ``<output>.partial`` to keep (``resume`` only; a last line cut short is dropped)."""
    if not resume or output is None:
        return []
    partial = Path(f"{output}.partial")
    if not partial.is_file():
        return []
    text = partial.read_text(encoding="utf-8")
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]  # written when the run was killed mid-line
    lines = [line for line in lines if line]
    return [line for line in lines if output_format == "text" or line_key(line, output_format) is not None]


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler's stop, ``kill``) ends the run as Ctrl-C does: finished results are kept."""
    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def transcribed_items(model: SpeechModel, items: list[AudioItem], decoding: DecodingConfig, batch_size: int,
                      allow_upsampling: bool, chunking: ChunkingConfig | None, progress: tqdm,
                      item_boost: BoostOptions | None) -> Iterator[tuple[int, AudioItem, Transcript | AudioError]]:
    """``(position, item, transcript or the error that kept it from being read)`` for every item, each batch's as
    soon as it is done: items are read ``8 * batch_size`` at a time, sorted by length there and transcribed batch
    by batch, so results come out of order within such a window (:class:`OrderedWriter` restores it). The
    :data:`Results` of a run in this process, for every writer of results."""
    window = max(8 * batch_size, 1)
    for start in range(0, len(items), window):
        waveforms, phrases = {}, {}
        for position in range(start, min(start + window, len(items))):
            item = items[position]
            try:
                if item_boost is not None and ITEM_PHRASES_FIELD in item.entry:
                    try:
                        phrases[position] = item_phrases(item.entry[ITEM_PHRASES_FIELD], item.name)
                    except ValueError as error:
                        raise AudioError(str(error)) from None
                waveforms[position] = load_audio(item.path, model.sample_rate, item.offset, item.duration,
                                                 allow_upsampling)
            except AudioError as error:
                progress.update(1)
                yield position, item, error
        order = sorted(waveforms, key=lambda position: len(waveforms[position]))
        for batch_start in range(0, len(order), batch_size):
            batch = order[batch_start : batch_start + batch_size]
            transcripts = transcribe(model, [waveforms.pop(p) for p in batch], decoding, batch_size, chunking,
                                     [phrases.get(p) for p in batch], item_boost or BoostOptions())
            progress.update(len(batch))
            for position, transcript in zip(batch, transcripts):
                yield position, items[position], transcript
