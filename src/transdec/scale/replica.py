"""A model replica: the callable class Ray Data runs as an actor pool, each actor holding one loaded model and
transcribing a window of items per call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch

from transdec.biasing.boost import Boost
from transdec.biasing.items import BoostOptions
from transdec.decoding import DecodingConfig
from transdec.loading import load_model
from transdec.long_audio import ChunkingConfig
from transdec.protocol import SpeechModel
from transdec.scale.windows import ItemResult, ReadWindow, pack, unpack
from transdec.transcribe import transcribe

#: How a replica gets its model: called with the device (``"cpu"`` or ``"cuda"``), it returns the loaded model and
#: the decoding to run, its fusions on that device. It is pickled and called on every replica (and once on the
#: driver's CPU, to check it), so it must load from what every node sees: a bundled name, a file on shared storage.
ReplicaLoader = Callable[[str], tuple[SpeechModel, DecodingConfig]]


@dataclasses.dataclass(frozen=True)
class NamedModel:
    """A :data:`ReplicaLoader` for a bundled model name, a model file, a ``.nemo`` checkpoint or an ONNX export
    directory (see :func:`transdec.load_model`), decoded by ``decoding`` (its LMs and boosts moved to the
    replica's device)."""

    name: str
    decoding: DecodingConfig = dataclasses.field(default_factory=DecodingConfig)

    def __call__(self, device: str) -> tuple[SpeechModel, DecodingConfig]:
        return load_model(self.name, device=device), fusions_on(self.decoding, device)


def fusions_on(decoding: DecodingConfig, device: str) -> DecodingConfig:
    """``decoding`` with the scorer of each fusion (an n-gram LM, a boosting tree) on ``device``."""
    fusions = tuple(fusion.to(device) if isinstance(fusion, Boost)
                    else dataclasses.replace(fusion, scorer=fusion.scorer.to(device)) if hasattr(fusion.scorer, "to")
                    else fusion for fusion in decoding.fusions)
    return dataclasses.replace(decoding, fusions=fusions) if fusions else decoding


def replica_device(device: str) -> str:
    """The device name inside a replica: Ray shows a GPU replica only its own GPU, as ``cuda:0``."""
    return "cuda" if device.startswith("cuda") else device


class WindowTranscriber:
    """Ray Data's transcribing step, one actor per replica: each row's packed :class:`ReadWindow` becomes a packed
    list of :class:`ItemResult`. The window's waveforms are transcribed together (sorted by length and batched by
    :func:`~transdec.transcribe.transcribe`); if that fails, each item is tried alone, so that only the items that
    fail alone are lost, each with its reason."""

    def __init__(self, loader: ReplicaLoader, device: str, threads: int, batch_size: int,
                 chunking: ChunkingConfig | None, boost: BoostOptions | None) -> None:
        torch.set_num_threads(threads)
        self.model, self.decoding = loader(replica_device(device))
        self.batch_size, self.chunking, self.boost = batch_size, chunking, boost or BoostOptions()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        return {"results": [pack(self.transcribe_window(unpack(cell))) for cell in batch["window"]]}

    def transcribe_window(self, window: ReadWindow) -> list[ItemResult]:
        positions = list(window.waveforms)
        phrases = {item.position: item.phrases for item in window.items}
        results = list(window.failed)
        try:
            transcripts = self._transcribe(window, positions, phrases)
        except Exception:  # noqa: BLE001  (one bad item, or a batch too large for the device: try each alone)
            for position in positions:
                try:
                    transcripts = self._transcribe(window, [position], phrases)
                except Exception as error:  # noqa: BLE001
                    results.append(ItemResult(position, error=f"transcription failed ({type(error).__name__}: "
                                                              f"{str(error).splitlines()[0] if str(error) else ''})"))
                else:
                    results.append(ItemResult(position, transcripts[0], seconds=transcripts[0].duration))
            return results
        results.extend(ItemResult(position, transcript, seconds=transcript.duration)
                       for position, transcript in zip(positions, transcripts))
        return results

    def _transcribe(self, window: ReadWindow, positions: list[int], phrases: dict) -> list:
        return transcribe(self.model, [window.waveforms[p] for p in positions], self.decoding, self.batch_size,
                          self.chunking, [phrases[p] for p in positions], self.boost)
