"""What the command line transcribes: audio files, folders of audio files and NeMo JSONL manifests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

#: Extensions collected from folders (libsndfile reads these; any file can still be named directly).
AUDIO_EXTENSIONS = {".wav", ".flac", ".ogg", ".opus", ".mp3", ".aiff", ".aif", ".au", ".w64", ".caf"}
MANIFEST_EXTENSIONS = {".json", ".jsonl"}


@dataclass
class AudioItem:
    """One recording (or a part of one: ``offset``/``duration`` seconds) and, for manifests, its entry."""

    path: Path
    offset: float = 0.0
    duration: float | None = None
    entry: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        part = f" [{self.offset:g}s+{self.duration:g}s]" if self.offset or self.duration is not None else ""
        return f"{self.path}{part}"


@dataclass
class InputError:
    """An input that could not be used at all (a bad manifest line, a missing path)."""

    where: str
    message: str


def collect_inputs(paths: list[str]) -> tuple[list[AudioItem], list[InputError]]:
    """Expand paths into audio items, in the order given (folders sorted, recursively)."""
    items: list[AudioItem] = []
    errors: list[InputError] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            items.extend(AudioItem(p) for p in sorted(path.rglob("*")) if p.suffix.lower() in AUDIO_EXTENSIONS)
        elif path.suffix.lower() in MANIFEST_EXTENSIONS and path.is_file():
            manifest_items, manifest_errors = read_manifest_items(path)
            items.extend(manifest_items)
            errors.extend(manifest_errors)
        else:
            items.append(AudioItem(path))  # a missing file is reported when it is read, in order
    return items, errors


def read_manifest_items(path: Path) -> tuple[list[AudioItem], list[InputError]]:
    """Items of a NeMo manifest; relative audio paths are resolved against the manifest's folder. Bad lines
    become errors and the rest is kept."""
    items, errors = [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                audio = Path(entry["audio_filepath"])
                offset = float(entry.get("offset", 0.0) or 0.0)
                duration = entry.get("duration")
                # A manifest's duration is the length of the segment to read only when an offset is given;
                # otherwise it describes the whole file.
                items.append(AudioItem(audio if audio.is_absolute() else path.parent / audio, offset,
                                       float(duration) if duration is not None and "offset" in entry else None,
                                       entry))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as error:
                errors.append(InputError(f"{path}:{number}", f"not a manifest entry with audio_filepath ({error})"))
    return items, errors
