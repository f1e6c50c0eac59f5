"""NeMo JSONL manifests, read the same way for transcription, evaluation and training.

Each line is one JSON object: ``{"audio_filepath": ..., "duration": seconds, "text": ..., "offset": seconds}``;
only ``audio_filepath`` is always needed, and other keys are kept as written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The fields a caller may require besides ``audio_filepath``.
REQUIRABLE_FIELDS = ("duration", "text")


@dataclass(frozen=True)
class InputError:
    """An input that could not be used: a bad manifest line (``where`` is ``<manifest>:<line>``), a missing
    path, a folder without audio."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class ManifestEntry:
    """One manifest line.

    Attributes:
        audio_filepath: the recording, resolved against the manifest's folder when written relative.
        origin: where the line is, ``<manifest>:<line>``, for error messages.
        duration: seconds; with an ``offset``, the length of the segment to read, else that of the whole file.
        text: the reference transcript.
        offset: seconds into the recording where the segment starts; None when the line has no offset.
        fields: the JSON object as written (a relative path stays relative, other keys are kept), for
            writing the entry back out with results added.
    """

    audio_filepath: Path
    origin: str
    duration: float | None = None
    text: str | None = None
    offset: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def segment(self) -> tuple[float, float | None]:
        """``(offset, duration)`` in seconds of the audio to read; a duration of None reads to the end.

        A manifest's duration is the length of the segment to read only when an offset is given; otherwise it
        describes the whole file, and the whole file is read.
        """
        if self.offset is None:
            return 0.0, None
        return self.offset, self.duration


def read_manifest(path: str | os.PathLike[str], required: Collection[str] = (),
                  check_files: bool = False) -> tuple[list[ManifestEntry], list[InputError]]:
    """The usable entries of a manifest and an error for each bad line, both in file order.

    A line is bad if it is not a JSON object (NaN and Infinity count as bad: they are not JSON), has no
    ``audio_filepath``, lacks a field named in ``required``, holds a field of the wrong type (a duration or
    offset that is not a non-negative number, a text that is not a string), or, with ``check_files``, names
    a file that does not exist. Blank lines are skipped. Callers decide whether a bad line stops them.

    Raises:
        OSError: the manifest itself cannot be read.
        ValueError: ``required`` names a field this reader does not know.
    """
    unknown = set(required) - set(REQUIRABLE_FIELDS)
    if unknown:
        raise ValueError(f"unknown manifest fields {sorted(unknown)}; choose from {REQUIRABLE_FIELDS}")
    path = Path(path)
    entries: list[ManifestEntry] = []
    errors: list[InputError] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                entry = _entry(json.loads(line, parse_constant=_refuse_constant), path.parent, where, required)
            except ValueError as error:  # json.JSONDecodeError included
                errors.append(InputError(where, f"not a manifest entry ({error})"))
                continue
            if check_files and not entry.audio_filepath.is_file():
                errors.append(InputError(where, f"{entry.audio_filepath}: no such file"))
                continue
            entries.append(entry)
    return entries, errors


def _entry(obj: Any, folder: Path, origin: str, required: Collection[str]) -> ManifestEntry:
    if not isinstance(obj, dict):
        raise ValueError(f"a JSON object is needed, got {type(obj).__name__}")
    audio = obj.get("audio_filepath")
    if not isinstance(audio, str) or not audio:
        raise ValueError("no audio_filepath" if audio is None else f"audio_filepath must be a path, got {audio!r}")
    for name in required:
        if obj.get(name) is None:
            raise ValueError(f"no {name}")
    text = obj.get("text")
    if text is not None and not isinstance(text, str):
        raise ValueError(f"text must be a string, got {text!r}")
    offset = _seconds(obj, "offset")
    return ManifestEntry(folder / audio, origin, _seconds(obj, "duration"), text,
                         (offset or 0.0) if "offset" in obj else None, obj)


def _seconds(obj: dict, name: str) -> float | None:
    value = obj.get(name)
    if value is None:
        return None
    # bool is an int subclass; true as a duration is a mistake, not 1 second
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name} must be a non-negative number of seconds, got {value!r}")
    return float(value)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")
