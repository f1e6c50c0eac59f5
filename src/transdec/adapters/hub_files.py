"""Which files of a Hugging Face Hub repository make a model transdec loads, chosen from the repository's listing
before anything is downloaded: its ``.nemo`` checkpoint (NVIDIA's repositories), or the three graphs of an ONNX
Transducer export of one variant with ``tokens.txt`` and the small files beside them (sherpa-onnx's)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from transdec.adapters.onnx_files import choose_parts

#: Small files an ONNX export's folder may hold beside the graphs that the loaders read (the sentencepiece model of
#: transdec's exports, sherpa-onnx's ``bpe.model`` for hotwords and its vocabulary).
ONNX_COMPANIONS = ("tokenizer.model", "bpe.model", "bpe.vocab")
#: Suffixes of the external data of a graph ``NAME.onnx`` (weights over 2 GB live beside it), after ``NAME``.
EXTERNAL_DATA = (".weights", ".data", ".onnx.data", ".onnx_data")
#: At most this many of a repository's files are named in a message.
LISTED = 12


@dataclass(frozen=True)
class ModelFiles:
    """What to fetch: ``files`` (paths in the repository), and ``load``, the one of them or the folder (``""``:
    the top) that the loader is given."""

    kind: str  # "nemo" or "onnx"
    load: str
    files: tuple[str, ...]


def choose_files(listing: Mapping[str, int], repo_name: str, variant: str = "fp32") -> ModelFiles | None:
    """The model among ``listing`` (path in the repository -> bytes); None when it holds none.

    A ``.nemo`` checkpoint wins (a repository holding several must have one named after it, ``repo_name``); else
    the shallowest folder with ``encoder*.onnx``, ``decoder*.onnx``, ``joiner*.onnx`` and ``tokens.txt``, each
    part of ``variant`` where it has both (the choice of :func:`~transdec.adapters.onnx_files.find_parts`), with
    the external data of the chosen graphs and the companions (:data:`ONNX_COMPANIONS`) found there. Several
    checkpoints none of which is named after the repository raise ``ValueError``, as do ONNX files no folder of
    which loads for a reason worth telling (streaming exports, two encoders of one variant)."""
    checkpoints = sorted(path for path in listing if path.endswith(".nemo"))
    if checkpoints:
        named = [path for path in checkpoints if posixpath.basename(path) == f"{repo_name}.nemo"]
        if len(checkpoints) > 1 and len(named) != 1:
            raise ValueError(f"it holds several .nemo checkpoints ({', '.join(checkpoints[:LISTED])}); download the "
                             "one you want (hf download REPO FILE) and pass its path")
        chosen = (named or checkpoints)[0]
        return ModelFiles("nemo", chosen, (chosen,))
    folders: dict[str, list[str]] = {}
    for path in listing:
        folder, name = posixpath.split(path)
        folders.setdefault(folder, []).append(name)
    problems = []
    for folder in sorted(folders, key=lambda f: (f.count("/") + bool(f), f)):
        names = folders[folder]
        try:
            parts, missing = choose_parts(names, variant)
        except ValueError as error:
            problems.append(f"{folder}/: {error}" if folder else str(error))
            continue
        if missing or "tokens.txt" not in names:
            continue
        stems = [name.removesuffix(".onnx") for name in parts.values()]
        extra = [name for name in names if name in ONNX_COMPANIONS
                 or any(name == stem + suffix for stem in stems for suffix in EXTERNAL_DATA)]
        files = sorted({*parts.values(), "tokens.txt", *extra})
        return ModelFiles("onnx", folder, tuple(posixpath.join(folder, name) for name in files))
    if problems:
        raise ValueError(problems[0])
    return None


def describe_listing(listing: Mapping[str, int]) -> str:
    """The repository's files for a message: the first :data:`LISTED` by name, and how many more."""
    paths = sorted(listing)
    if not paths:
        return "no files"
    more = f" and {len(paths) - LISTED} more" if len(paths) > LISTED else ""
    return ", ".join(paths[:LISTED]) + more
