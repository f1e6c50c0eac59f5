"""Training data: manifest entries, padded batches, long-form rows and duration-bucketed batches."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from transdec.audio import load_audio
from transdec.manifest import ManifestEntry, read_manifest
from transdec.padding import pad_batch


#: What training needs of every manifest entry besides its audio.
TRAINING_FIELDS = ("duration", "text")


def read_training_manifest(path: str | Path) -> list[ManifestEntry]:
    """Entries of a manifest (:func:`~transdec.manifest.read_manifest`) that all have a ``duration`` and a
    ``text`` and an audio file that exists.

    Raises:
        ValueError: naming every bad line (the first ten of them): a training run must not find one hours in.
    """
    entries, errors = read_manifest(path, required=TRAINING_FIELDS, check_files=True)
    if errors:
        shown = [str(error) for error in errors[:10]]
        more = f"\n... and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise ValueError(f"{path}: {len(errors)} bad line(s):\n" + "\n".join(shown) + more)
    return entries


def load_entry(entry: ManifestEntry, sample_rate: int) -> np.ndarray:
    """Samples ``[N]`` of an entry's audio (its segment, when it has an offset) at ``sample_rate``."""
    offset, duration = entry.segment
    return load_audio(entry.audio_filepath, sample_rate, offset, duration)


@dataclass
class Batch:
    """A padded training batch.

    Attributes:
        waveforms: ``[B, N]`` float32 audio.
        waveform_lengths: ``[B]`` valid samples.
        targets: ``[B, U]`` token ids, padded with 0.
        target_lengths: ``[B]`` valid tokens.
        indices: manifest positions of each row's utterances (more than one in a long-form row).
    """

    waveforms: Tensor
    waveform_lengths: Tensor
    targets: Tensor
    target_lengths: Tensor
    indices: list[list[int]]

    def to(self, device: torch.device) -> Batch:
        return Batch(self.waveforms.to(device), self.waveform_lengths.to(device), self.targets.to(device),
                     self.target_lengths.to(device), self.indices)


def collate(entries: list[ManifestEntry], rows: list[list[int]], token_ids: list[list[int]], sample_rate: int,
            pause_seconds: float = 0.0, pad_samples: int = 1, pad_tokens: int = 1) -> Batch:
    """One batch; each row is the manifest positions of the utterances it joins, with ``pause_seconds`` of
    silence between them (a single utterance is a row of one). The padded audio length is rounded up to a
    multiple of ``pad_samples`` and the padded token length to one of ``pad_tokens``, so that batch shapes
    repeat (see :attr:`~transdec.training.trainer.TrainConfig.pad_to_seconds`)."""
    pause = torch.zeros(round(pause_seconds * sample_rate))
    audios = []
    for row in rows:
        pieces = [torch.from_numpy(load_entry(entries[i], sample_rate)) for i in row]
        audios.append(torch.cat([x for piece in pieces for x in (pause, piece)][1:]))
    waveforms, waveform_lengths = pad_batch(audios, multiple=pad_samples, dtype=torch.float32)
    # BPE pieces never cross a word boundary, so a row's tokens are its utterances' tokens one after another.
    row_tokens = [[token for i in row for token in token_ids[i]] for row in rows]
    # min_length 1: a batch whose rows have no tokens still gets a target tensor with a column.
    targets, target_lengths = pad_batch(row_tokens, multiple=pad_tokens, dtype=torch.int64, min_length=1)
    return Batch(waveforms, waveform_lengths, targets, target_lengths, [list(row) for row in rows])


def padding_multiples(pad_to_seconds: float, sample_rate: int) -> tuple[int, int]:
    """``(pad_samples, pad_tokens)`` for :func:`collate` from a padding in seconds (0: none)."""
    if pad_to_seconds <= 0:
        return 1, 1
    return max(1, round(pad_to_seconds * sample_rate)), 16


def long_form_rows(durations: list[float], share: float, max_seconds: float, pause_seconds: float, seed: int,
                   epoch: int) -> list[list[int]]:
    """One epoch's rows: ``share`` of the utterances joined, in random order, into long-form rows of at most
    ``max_seconds`` (pauses included); the rest one per row.

    A model trained on short utterances alone fails on long recordings, where attention spans far more than
    it ever did in training (chunked encoding, :mod:`transdec.long_audio`, still gives it 40 s windows); a
    share of long rows teaches it that span (docs/models.md, "Long recordings"). With ``share`` 0 the rows
    are ``[[0], [1], ...]``. Depends only on ``seed`` and ``epoch``, like the batches.
    """
    if not 0 <= share <= 1:
        raise ValueError(f"the long-form share must be between 0 and 1, got {share}")
    if share == 0:
        return [[i] for i in range(len(durations))]
    rng = random.Random(seed * 100019 + epoch)
    joined = set(rng.sample(range(len(durations)), round(share * len(durations))))
    rows = [[i] for i in range(len(durations)) if i not in joined]
    order = sorted(joined)
    rng.shuffle(order)
    current: list[int] = []
    seconds = 0.0
    for i in order:
        if current and seconds + pause_seconds + durations[i] > max_seconds:
            rows.append(current)
            current, seconds = [], 0.0
        seconds += (pause_seconds if current else 0.0) + durations[i]
        current.append(i)
    if current:
        rows.append(current)
    return rows


def row_seconds(rows: list[list[int]], durations: list[float], pause_seconds: float) -> list[float]:
    return [sum(durations[i] for i in row) + pause_seconds * (len(row) - 1) for row in rows]


def bucketed_batches(durations: list[float], batch_seconds: float, seed: int, epoch: int,
                     max_batch_size: int = 256, pad_seconds: float = 0.0) -> list[list[int]]:
    """One epoch of batches of similar-length utterances, each at most ``batch_seconds`` of padded audio.

    Utterances are sorted by duration jittered by +-10% (so batches differ between epochs), cut into batches,
    and the batch order is shuffled; both depend only on ``seed`` and ``epoch``, so a resumed run replays the
    same epoch exactly. With ``pad_seconds`` (lengths padded to its multiples, as :func:`collate` pads them),
    batch shapes repeat instead: see :func:`_batches_of_padded_lengths`.
    """
    rng = random.Random(seed * 100003 + epoch)
    if pad_seconds > 0:
        batches = _batches_of_padded_lengths(durations, batch_seconds, max_batch_size, pad_seconds, rng)
    else:
        batches = _batches_of_sorted_lengths(durations, batch_seconds, max_batch_size, rng)
    rng.shuffle(batches)
    return batches


def _batches_of_sorted_lengths(durations: list[float], batch_seconds: float, max_batch_size: int,
                               rng: random.Random) -> list[list[int]]:
    """Utterances in order of jittered duration, cut where the next would take a batch past its budget."""
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
    return batches


def _batches_of_padded_lengths(durations: list[float], batch_seconds: float, max_batch_size: int,
                               pad_seconds: float, rng: random.Random) -> list[list[int]]:
    """Batches whose size is set by their padded length, so that an epoch has about one shape per length.

    Utterances are grouped by padded length and shuffled within each group (their padded cost is the same),
    and each group is cut into batches of ``batch_seconds // length`` rows. What is left of a group goes
    first into the next longer group, padded to that length, so that only the epoch's last batch (and, rarely,
    one made only of such leftovers) has a size of its own.
    """
    groups: dict[int, list[int]] = {}
    for i, seconds in enumerate(durations):
        groups.setdefault(max(1, math.ceil(seconds / pad_seconds)), []).append(i)
    batches: list[list[int]] = []
    left: list[int] = []
    for units in sorted(groups):
        rng.shuffle(groups[units])
        rows = left + groups[units]
        size = max(1, min(max_batch_size, int(batch_seconds // (units * pad_seconds))))
        whole = len(rows) - len(rows) % size
        batches += [rows[k: k + size] for k in range(0, whole, size)]
        left = rows[whole:]
    if left:
        batches.append(left)
    return batches
