"""Training data: NeMo-style JSONL manifests, audio loading and duration-bucketed batches."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from transdec.audio import load_audio
from transdec.sources import read_manifest_items


@dataclass
class ManifestEntry:
    """One line of a manifest: ``{"audio_filepath": ..., "duration": seconds, "text": ...}`` (extra keys kept)."""

    audio_filepath: Path
    duration: float
    text: str
    extra: dict


def read_manifest(path: str | Path) -> list[ManifestEntry]:
    """Entries of a JSONL manifest (relative audio paths resolved against its folder); training needs every
    line to be valid and to carry ``duration`` and ``text``, so the first bad one raises."""
    items, errors = read_manifest_items(Path(path))
    if errors:
        raise ValueError(f"{errors[0].where}: {errors[0].message}")
    entries = []
    for item in items:
        extra = {k: v for k, v in item.entry.items() if k not in ("audio_filepath", "duration", "text")}
        try:
            entries.append(ManifestEntry(item.path, float(item.entry["duration"]), str(item.entry["text"]), extra))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: the entry for {item.entry['audio_filepath']} needs a duration and a text "
                             f"({error!r})") from error
    return entries


@dataclass
class Batch:
    """A padded training batch.

    Attributes:
        waveforms: ``[B, N]`` float32 audio.
        waveform_lengths: ``[B]`` valid samples.
        targets: ``[B, U]`` token ids, padded with 0.
        target_lengths: ``[B]`` valid tokens.
        indices: manifest positions of the utterances.
    """

    waveforms: Tensor
    waveform_lengths: Tensor
    targets: Tensor
    target_lengths: Tensor
    indices: list[int]

    def to(self, device: torch.device) -> Batch:
        return Batch(self.waveforms.to(device), self.waveform_lengths.to(device), self.targets.to(device),
                     self.target_lengths.to(device), self.indices)


def collate(entries: list[ManifestEntry], indices: list[int], token_ids: list[list[int]], sample_rate: int) -> Batch:
    audios = [load_audio(entries[i].audio_filepath, sample_rate) for i in indices]
    waveforms = torch.zeros(len(audios), max(len(a) for a in audios))
    for row, audio in enumerate(audios):
        waveforms[row, : len(audio)] = torch.from_numpy(audio)
    targets = torch.zeros(len(indices), max(1, max(len(token_ids[i]) for i in indices)), dtype=torch.int64)
    for row, i in enumerate(indices):
        targets[row, : len(token_ids[i])] = torch.tensor(token_ids[i], dtype=torch.int64)
    return Batch(waveforms, torch.tensor([len(a) for a in audios]), targets,
                 torch.tensor([len(token_ids[i]) for i in indices]), list(indices))


def bucketed_batches(durations: list[float], batch_seconds: float, seed: int, epoch: int,
                     max_batch_size: int = 256) -> list[list[int]]:
    """One epoch of batches of similar-length utterances, each at most ``batch_seconds`` of padded audio.

    Utterances are sorted by duration jittered by +-10% (so batches differ between epochs), cut into batches,
    and the batch order is shuffled; both depend only on ``seed`` and ``epoch``, so a resumed run replays the
    same epoch exactly.
    """
    rng = random.Random(seed * 100003 + epoch)
    order = sorted(range(len(durations)), key=lambda i: durations[i] * rng.uniform(0.9, 1.1))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0.0
    for i in order:
        longest_if_added = max(longest, durations[i])
        if current and (longest_if_added * (len(current) + 1) > batch_seconds or len(current) >= max_batch_size):
            batches.append(current)
            current, longest_if_added = [], durations[i]
        current.append(i)
        longest = longest_if_added
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches
