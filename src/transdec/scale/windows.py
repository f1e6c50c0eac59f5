"""The work of a Ray run, a window of items at a time: what the driver sends (:class:`WindowItem`), the reading
task that turns a window into waveforms (:func:`read_windows`), and what comes back (:class:`ItemResult`).

A window is the unit of everything: one row of the dataset, read by one task and transcribed by one call of a
replica, which sorts its items by length and cuts them into batches, as ``transdec transcribe`` does with the
items it reads at a time. Rows hold their window pickled (waveforms of any length, results as dataclasses), so
Ray Data never has to fit them to columns.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from transdec.audio import AudioError, load_audio
from transdec.biasing.items import ITEM_PHRASES_FIELD, item_phrases
from transdec.biasing.phrases import BoostPhrase
from transdec.sources import AudioItem
from transdec.transcribe import Transcript


@dataclass
class WindowItem:
    """One item as a worker sees it: its ``position`` in the run, the file (an absolute path: workers may run
    elsewhere, where the audio must be at the same path), the part of it, and its own boost phrases. ``error`` is
    set for an item the driver already found bad (its phrases); such an item is passed through, never read."""

    position: int
    path: str
    offset: float = 0.0
    duration: float | None = None
    phrases: list[BoostPhrase] | None = None
    error: str | None = None


@dataclass
class ItemResult:
    """What became of one item: its transcript, or why there is none. ``seconds``: the audio read."""

    position: int
    transcript: Transcript | None = None
    error: str | None = None
    seconds: float = 0.0


@dataclass
class ReadWindow:
    """A window read: the waveforms of the items that could be read, and the results of those that could not."""

    items: list[WindowItem]
    waveforms: dict[int, np.ndarray] = field(default_factory=dict)  # position -> samples at the model's rate
    failed: list[ItemResult] = field(default_factory=list)


def make_windows(items: list[AudioItem], size: int, item_boost: bool) -> list[list[WindowItem]]:
    """``items`` cut into windows of ``size`` in order, each item numbered by its position in ``items``; with
    ``item_boost``, the phrases of an item's ``boost_phrases`` field go with it (a malformed field fails the item,
    as in ``transdec transcribe``)."""
    windows: list[list[WindowItem]] = []
    for start in range(0, len(items), size):
        window = []
        for position in range(start, min(start + size, len(items))):
            item = items[position]
            work = WindowItem(position, os.path.abspath(item.path), item.offset, item.duration)
            if item_boost and ITEM_PHRASES_FIELD in item.entry:
                try:
                    work.phrases = item_phrases(item.entry[ITEM_PHRASES_FIELD], item.name)
                except ValueError as error:
                    work.error = str(error)
            window.append(work)
        windows.append(window)
    return windows


def pack(value: Any) -> bytes:
    """``value`` as a dataset cell."""
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(cell: Any) -> Any:
    """What :func:`pack` packed."""
    return pickle.loads(cell)


def read_window(window: list[WindowItem], sample_rate: int, allow_upsampling: bool) -> ReadWindow:
    """Read every item of ``window`` at ``sample_rate``; an item that cannot be read (any error, not only a bad
    file: the job goes on whatever one item does) becomes a failed result."""
    read = ReadWindow(window)
    for item in window:
        if item.error is not None:
            read.failed.append(ItemResult(item.position, error=item.error))
            continue
        try:
            read.waveforms[item.position] = load_audio(item.path, sample_rate, item.offset, item.duration,
                                                       allow_upsampling)
        except AudioError as error:
            read.failed.append(ItemResult(item.position, error=str(error)))
        except Exception as error:  # noqa: BLE001  (a reader's bug or an odd file must not stop the job)
            read.failed.append(ItemResult(item.position, error=f"{item.path}: not readable ({type(error).__name__}: "
                                                                f"{error})"))
    return read


def read_windows(batch: dict[str, np.ndarray], sample_rate: int, allow_upsampling: bool) -> dict[str, list]:
    """Ray Data's reading step: each row's ``window`` (a packed list of :class:`WindowItem`) becomes a packed
    :class:`ReadWindow`."""
    return {"window": [pack(read_window(unpack(cell), sample_rate, allow_upsampling)) for cell in batch["window"]]}
