"""``transdec transcribe --format srt|vtt|tsv``: a subtitle document per recording, each in a file of its own.

A subtitle document holds one recording, so, as Whisper's command does, one recording goes to standard output or
to ``--output FILE``, and any number to ``--output-dir DIR``, a file per recording named by
:func:`document_names`. Each file is written under a temporary name beside it and renamed once whole, so a file
under a document's name is always a complete document: an interrupted run leaves the files it finished and no
partial one, and ``--resume`` skips every recording whose file is there. Bad items are reported and skipped and the
exit codes are those of the other formats (:mod:`transdec.transcribe_files`).
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath

from tqdm import tqdm

from transdec.audio import AudioError
from transdec.biasing.items import BoostOptions
from transdec.decoding import DecodingConfig
from transdec.long_audio import ChunkingConfig
from transdec.manifest import InputError
from transdec.protocol import SpeechModel
from transdec.sources import AudioItem, collect_inputs
from transdec.subtitles import SUBTITLE_FORMATS, CueRule, document
from transdec.transcribe import Transcript
from transdec.transcribe_files import COMMAND, Results, sigterm_as_interrupt, transcribed_items


@dataclass(frozen=True)
class SubtitleOptions:
    """What each document is: ``output_format`` (one of :data:`~transdec.subtitles.SUBTITLE_FORMATS`, also the
    files' extension), cues cut by ``rule``, and for ``vtt`` the start of each word inside its cue
    (``word_timestamps``, see :func:`transdec.subtitles.vtt`)."""

    output_format: str = "srt"
    rule: CueRule = CueRule()
    word_timestamps: bool = False

    def __post_init__(self) -> None:
        if self.output_format not in SUBTITLE_FORMATS:
            raise ValueError(f"output_format must be one of {', '.join(SUBTITLE_FORMATS)}, got {self.output_format!r}")
        if self.word_timestamps and self.output_format != "vtt":
            raise ValueError("word_timestamps are WebVTT's: they need output_format 'vtt'")


def target_problem(recordings: int, output_format: str, output_dir: str | None) -> str | None:
    """Why the documents of ``recordings`` items cannot go where they are sent (None: they can): without an output
    folder there is room for one."""
    if output_dir is None and recordings > 1:
        return (f"--format {output_format} writes a document per recording and the inputs hold {recordings}: give "
                "--output-dir DIR for a file each")
    return None


def document_names(items: list[AudioItem], extension: str) -> list[PurePath]:
    """Each item's file name inside the output folder, in item order, all different (ignoring case, for the file
    systems that do):

    - the recording's name without its extension, ``talk.srt``; a part of a recording that a manifest entry names by
      ``offset`` and ``duration`` adds them, ``talk_12.5s+30s.srt``;
    - items that would share a name keep their folders instead, from the deepest folder they share:
      ``a/talk.srt`` and ``b/talk.srt`` for ``rec/a/talk.flac`` and ``rec/b/talk.wav``;
    - those still alike (one folder, two extensions) keep the recording's extension, ``talk.wav.srt``;
    - and the same recording listed twice is numbered in input order, ``talk.srt`` and ``talk-2.srt``.

    The names depend on the whole list of items, so a resumed run finds its files when given the same inputs.
    """
    names = [PurePath(_stem(item)) for item in items]
    _separate(names, lambda group: _from_shared_folder([items[i] for i in group]))
    _separate(names, lambda group: _keeping_extensions([items[i] for i in group], [names[i] for i in group]))
    _number(names)
    return [name.with_name(f"{name.name}.{extension}") for name in names]


def transcribe_subtitles(model: SpeechModel, paths: list[str], decoding: DecodingConfig,
                         options: SubtitleOptions = SubtitleOptions(), output: str | None = None,
                         output_dir: str | None = None, batch_size: int = 16, allow_upsampling: bool = False,
                         chunking: ChunkingConfig | None = ChunkingConfig(), resume: bool = False,
                         item_boost: BoostOptions | None = None) -> int:
    """Transcribe every item under ``paths`` (files, folders, manifests) as
    :func:`~transdec.transcribe_files.transcribe_files` does, each into a subtitle document written by
    :func:`write_subtitles`; returns the exit code."""
    items, failures = collect_inputs(paths)

    def results(todo: list[AudioItem], progress: tqdm) -> Iterator[tuple[int, AudioItem, Transcript | AudioError]]:
        return transcribed_items(model, todo, decoding, batch_size, allow_upsampling, chunking, progress, item_boost)

    return write_subtitles(items, failures, results, options, output, output_dir, resume)


def write_subtitles(items: list[AudioItem], failures: list[InputError], results: Results,
                    options: SubtitleOptions = SubtitleOptions(), output: str | None = None,
                    output_dir: str | None = None, resume: bool = False) -> int:
    """Write the document of every item ``results`` transcribes: into ``output_dir`` (a file per item, named by
    :func:`document_names`), else to ``output`` or standard output (one item only: more is a usage error, 2).
    ``failures`` (inputs that gave no item) are reported first. ``resume``: items whose file exists are skipped.

    Returns the exit code of ``transdec transcribe``: 0, 1 if any item failed or there was nothing to transcribe, 2
    if a document cannot be written, 130 if interrupted (or terminated): the files finished so far stay.
    """
    for failure in failures:
        print(f"{COMMAND}: error: {failure.where}: {failure.message}", file=sys.stderr)
    if not items:
        return 1
    problem = target_problem(len(items), options.output_format, output_dir)
    if problem:
        print(f"{COMMAND}: error: {problem}", file=sys.stderr)
        return 2
    if output_dir is not None:
        targets: list[Path | None] = [Path(output_dir) / name for name in document_names(items, options.output_format)]
    else:
        targets = [None if output is None else Path(output)]
    # The files of an earlier run are whole documents, since each was renamed into place once written.
    todo = [position for position, target in enumerate(targets)
            if not (resume and target is not None and target.is_file())]
    resumed = len(items) - len(todo)
    if resumed:
        print(f"{COMMAND}: resuming: {resumed} recording(s) have their file already", file=sys.stderr)
    failed, written = len(failures), 0
    try:
        with sigterm_as_interrupt(), tqdm(total=len(todo), desc="transcribe", unit="item", disable=None) as progress:
            for position, item, result in results([items[p] for p in todo], progress):
                if isinstance(result, AudioError):
                    progress.write(f"{COMMAND}: error: {item.describe(str(result))}", file=sys.stderr)
                    failed += 1
                    continue
                text = document(result.words, options.output_format, options.rule, options.word_timestamps)
                target = targets[todo[position]]
                if target is None:
                    progress.write(text, file=sys.stdout, end="")
                else:
                    try:
                        _write_whole(target, text)
                    except OSError as error:  # the next documents could not be written either: stop
                        progress.write(f"{COMMAND}: error: cannot write {target} ({error.strerror or error}); "
                                       f"{written} other file(s) were written", file=sys.stderr)
                        return 2
                written += 1
    except BaseException as error:
        interrupted = isinstance(error, KeyboardInterrupt)
        message = f"{COMMAND}: {'interrupted' if interrupted else 'failed'}"
        if output_dir is not None:
            message += (f"; {written + resumed} of {len(items)} file(s) are in {output_dir} "
                        "(--resume carries on from there)")
        elif output is not None:
            message += f"; {output} was not written"
        print(message, file=sys.stderr)
        if interrupted:
            return 130
        raise
    if output_dir is None and output is not None and not written and not resumed:
        print(f"{COMMAND}: nothing was transcribed, so {output} was not written", file=sys.stderr)
    if failed:
        print(f"{COMMAND}: {failed} item(s) failed, {written + resumed} transcribed", file=sys.stderr)
    return 1 if failed or not (written + resumed) else 0


def _write_whole(target: Path, text: str) -> None:
    """``text`` into ``target``, through a temporary file beside it renamed when complete: ``target`` is never
    a part of a document, whenever the run stops."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as sink:  # "\n" line ends on every system
            sink.write(text)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _stem(item: AudioItem, keep_extension: bool = False) -> str:
    name = item.path.name if keep_extension else item.path.stem
    if item.duration is not None:
        return f"{name}_{item.offset:g}s+{item.duration:g}s"
    return f"{name}_{item.offset:g}s" if item.offset else name


def _keeping_extensions(items: list[AudioItem], names: list[PurePath]) -> list[PurePath]:
    """The items' names with the recordings' extensions kept, where those tell them apart."""
    if len({item.path.suffix.casefold() for item in items}) == 1:
        return names
    return [name.parent / _stem(item, keep_extension=True) for item, name in zip(items, names)]


def _from_shared_folder(items: list[AudioItem]) -> list[PurePath]:
    """Each item's name with its folders from the deepest folder they all share."""
    folders = [os.path.dirname(os.path.abspath(item.path)) for item in items]
    shared = os.path.commonpath(folders)
    return [PurePath(os.path.normpath(os.path.join(os.path.relpath(folder, shared), _stem(item))))
            for folder, item in zip(folders, items)]


def _separate(names: list[PurePath], rename: Callable[[list[int]], list[PurePath]]) -> None:
    """Rename, in place, each group of items whose names are equal (ignoring case): ``rename(positions)`` gives
    the group's new names."""
    groups: dict[str, list[int]] = defaultdict(list)
    for position, name in enumerate(names):
        groups[_key(name)].append(position)
    renamed = [(group, rename(group)) for group in groups.values() if len(group) > 1]
    for group, new in renamed:  # after every group's new names are made: they read the names as they were
        for position, name in zip(group, new):
            names[position] = name


def _number(names: list[PurePath]) -> None:
    """Number every name equal to an earlier one (ignoring case), with the first number not taken: ``talk-2``."""
    taken = {_key(name) for name in names}
    seen: set[str] = set()
    for position, name in enumerate(names):
        if _key(name) in seen:
            count = 2
            while _key(name.with_name(f"{name.name}-{count}")) in taken:
                count += 1
            names[position] = name.with_name(f"{name.name}-{count}")
            taken.add(_key(names[position]))
        seen.add(_key(names[position]))


def _key(name: PurePath) -> str:
    return name.as_posix().casefold()
