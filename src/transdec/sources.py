"""What the command line transcribes: audio files, folders of audio files and NeMo JSONL manifests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from transdec.manifest import InputError, read_manifest

#: Extensions collected from folders (libsndfile reads these; any file can still be named directly).
AUDIO_EXTENSIONS = {".wav", ".flac", ".ogg", ".opus", ".mp3", ".aiff", ".aif", ".au", ".w64", ".caf"}
MANIFEST_EXTENSIONS = {".json", ".jsonl"}


@dataclass
class AudioItem:
    """One recording (or a part of one: ``offset``/``duration`` seconds) and, for manifests, its entry and
    ``origin``, the manifest and line it came from (``m.jsonl:7``)."""

    path: Path
    offset: float = 0.0
    duration: float | None = None
    entry: dict = field(default_factory=dict)
    origin: str | None = None

    @property
    def name(self) -> str:
        part = f" [{self.offset:g}s+{self.duration:g}s]" if self.offset or self.duration is not None else ""
        return f"{self.path}{part}"

    def describe(self, message: str) -> str:
        """``message`` about this item, with the manifest line it came from."""
        return f"{self.origin}: {message}" if self.origin else message


def collect_inputs(paths: list[str]) -> tuple[list[AudioItem], list[InputError]]:
    """Expand paths into audio items, in the order given (folders sorted, recursively). A folder without audio
    files and a manifest without entries are errors."""
    items: list[AudioItem] = []
    errors: list[InputError] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = [AudioItem(p) for p in sorted(path.rglob("*")) if p.suffix.lower() in AUDIO_EXTENSIONS]
            if not found:
                errors.append(InputError(str(path), "no audio files in this directory"))
            items.extend(found)
        elif path.suffix.lower() in MANIFEST_EXTENSIONS and path.is_file():
            manifest_items, manifest_errors = read_manifest_items(path)
            if not manifest_items and not manifest_errors:
                manifest_errors = [InputError(str(path), "the manifest has no entries")]
            items.extend(manifest_items)
            errors.extend(manifest_errors)
        else:
            items.append(AudioItem(path))  # a missing file is reported when it is read, in order
    return items, errors


def read_manifest_items(path: Path) -> tuple[list[AudioItem], list[InputError]]:
    """Items of a NeMo manifest (see :func:`~transdec.manifest.read_manifest`); bad lines become errors and
    the rest is kept. A missing audio file is not checked here: it is reported, with its line, when read."""
    entries, errors = read_manifest(path)
    return [AudioItem(e.audio_filepath, *e.segment, e.fields, e.origin) for e in entries], errors
