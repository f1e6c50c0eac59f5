"""Models by name from the Hugging Face Hub: ``org/name[@revision]`` fetched with ``huggingface_hub``.

:func:`fetch_model` resolves the revision (a branch, tag or commit; the default branch when none is named) to its
commit, lists the repository at that commit, chooses the files transdec loads (:mod:`transdec.adapters.hub_files`:
a ``.nemo`` checkpoint, or one variant of an ONNX Transducer export) and downloads only those, into the Hub's own
cache as a snapshot of the commit, with the library's progress bar. ``load_model`` then loads the local copy with
the loader of its kind and keeps the :class:`HubSource` on the model (``model.hub_source``).

Everything the Hub's clients honour is honoured, because the library does the work: the cache (``HF_HOME``,
``HF_HUB_CACHE``), ``HF_HUB_OFFLINE=1`` (only the cache is read), ``HF_TOKEN`` or the token ``hf auth login``
saved, ``HF_ENDPOINT`` (a mirror), ``HF_HUB_DISABLE_PROGRESS_BARS``. A commit's listing is cached by the library
too, so a model whose files are cached loads without the network except for resolving a branch name (none with
a commit, or offline).

Every failure is one :class:`HubError` (a ``ValueError``) whose message names the model and says what to do. The
library itself is imported only when a Hub name is used, so that ``import transdec`` stays light.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transdec.adapters.hub_files import choose_files, describe_listing
from transdec.adapters.onnx_files import VARIANTS

#: ``org/name`` and an optional ``@revision``; names and paths of model files (``dir/model.nemo``) are not Hub
#: names, so that a missing file is reported as one.
_HUB_NAME = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[^@\s]+))?")
_MODEL_FILE_SUFFIXES = (".nemo", ".pt", ".onnx")
#: What the message of a gated, private or forbidden repository says to do.
_LOG_IN = "set HF_TOKEN or run `hf auth login`"


@dataclass(frozen=True)
class HubName:
    """A model's name on the Hub: the repository and the revision asked for (None: the default branch)."""

    repo_id: str
    revision: str | None = None


def parse_hub_name(name: str) -> HubName | None:
    """``org/name`` or ``org/name@revision`` as a :class:`HubName`; None for anything else (a path, a bundled
    name, a model file's name)."""
    match = _HUB_NAME.fullmatch(name)
    if match is None or match["repo"].endswith(_MODEL_FILE_SUFFIXES) or ".." in match["repo"]:
        return None
    return HubName(match["repo"], match["revision"])


def is_hub_name(name: str | os.PathLike[str]) -> bool:
    """Whether ``load_model`` fetches ``name`` from the Hub: it reads ``org/name[@revision]`` and is no existing
    path (a local folder of that name wins)."""
    return parse_hub_name(str(name)) is not None and not Path(name).exists()


@dataclass(frozen=True)
class HubSource:
    """A model fetched from the Hub: the repository, the revision asked for, the commit it resolved to, the
    files fetched (paths in the repository) and their size in bytes; ``path``, what is loaded (the ``.nemo``
    file, or the folder of the ONNX files) in the Hub's cache."""

    repo_id: str
    revision: str
    commit: str
    files: tuple[str, ...]
    size: int
    path: Path

    def as_dict(self) -> dict[str, Any]:
        """What ``transdec inspect`` and ``transcribe --format jsonl`` report (``path`` is this machine's)."""
        return {"repo": self.repo_id, "revision": self.revision, "commit": self.commit, "files": list(self.files),
                "size": self.size}


class HubError(ValueError):
    """A model by name that cannot be fetched; the message is one line naming the model."""


class HubUnreachable(HubError, ConnectionError):
    """The Hub cannot be reached (no network, ``HF_HUB_OFFLINE=1``) and the model is not in the cache."""


class HubNotFound(HubError):
    """No such repository (404), or none this client may see (401), or no such revision."""


class HubAccessDenied(HubError):
    """A gated or private repository without a token that has access (401, 403)."""


class HubNoModel(HubError):
    """The repository holds no file transdec loads."""


class HubDownloadInterrupted(HubError, ConnectionError):
    """The download stopped part-way; a new try fetches what is missing."""


def fetch_model(name: str, onnx_variant: str = "fp32") -> HubSource:
    """Download the model ``name`` (``org/name[@revision]``) into the Hub's cache, or find it there; see the
    module docstring. ``onnx_variant`` (``"fp32"`` or ``"int8"``) picks the graphs of an ONNX export that has
    both. Raises a :class:`HubError` for every failure, and ``ImportError`` without ``huggingface_hub``."""
    hub_name = parse_hub_name(name)
    if hub_name is None:
        raise ValueError(f"{name}: not a Hugging Face Hub name (org/name or org/name@revision)")
    if onnx_variant not in VARIANTS:
        raise ValueError(f"onnx_variant must be one of {', '.join(VARIANTS)}, got {onnx_variant!r}")
    try:
        from huggingface_hub import HfApi, constants
    except ImportError as error:
        raise ImportError("models by name from the Hugging Face Hub need huggingface_hub, which is not installed "
                          "(pip install huggingface_hub)") from error
    from transdec import __version__

    api = HfApi(library_name="transdec", library_version=__version__)
    repo_id, downloading = hub_name.repo_id, False
    try:
        # Offline, the revision is read from the cache's refs without trying the network (and warning about it).
        revision = api.resolve_revision(repo_id, revision=hub_name.revision,
                                        local_files_only=constants.is_offline_mode())
        listing, listed = _listing(api, repo_id, revision)
        try:
            chosen = choose_files(listing, repo_id.split("/")[1], onnx_variant)
        except ValueError as error:
            raise HubNoModel(f"{name}: {error}") from None
        if chosen is None:
            raise HubNoModel(f"{name}: {repo_id} at {revision.resolved[:12]} holds no model transdec loads (a .nemo "
                             "checkpoint, or encoder*.onnx, decoder*.onnx, joiner*.onnx and tokens.txt in one folder); "
                             f"it holds {describe_listing(listing)}")
        downloading = True
        paths = _download(repo_id, revision, chosen.files, listed)
    except HubError:
        raise
    except Exception as error:
        problem = _explain(error, name, hub_name, downloading)
        if problem is None:
            raise
        raise problem from error
    load = paths[chosen.load] if chosen.kind == "nemo" else paths[chosen.files[0]].parent
    return HubSource(repo_id, str(revision), revision.resolved, chosen.files,
                     sum(listing[file] or 0 for file in chosen.files), load)


def _listing(api: Any, repo_id: str, revision: Any) -> tuple[dict[str, int], bool]:
    """The repository's files at the resolved ``revision``, path -> bytes, and whether they came from the cache: a
    download leaves the commit's listing there (it never changes), else the Hub is asked."""
    from huggingface_hub import RepoFile, get_cached_repo_tree
    from huggingface_hub.errors import CachedRepoTreeNotFoundError

    try:
        entries, cached = get_cached_repo_tree(repo_id, revision=revision), True
    except CachedRepoTreeNotFoundError:
        entries, cached = api.list_repo_tree(repo_id, revision=revision.resolved, recursive=True), False
    return {entry.path: entry.size for entry in entries if isinstance(entry, RepoFile)}, cached


def _download(repo_id: str, revision: Any, files: tuple[str, ...], listed: bool) -> dict[str, Path]:
    """Each of ``files`` (paths in the repository) as a path in the cache's snapshot of the commit, downloaded
    where missing. ``listed``: the commit's listing is in the cache already."""
    from huggingface_hub import snapshot_download, try_to_load_from_cache

    from transdec import __version__

    cached = {file: try_to_load_from_cache(repo_id, file, revision=revision.resolved) for file in files}
    if listed and all(isinstance(path, str) for path in cached.values()):  # no request, no progress bars
        return {file: Path(path) for file, path in cached.items()}
    # Also when every file is cached (fetched by another client): the download keeps the commit's listing, which
    # loading the model offline needs. Patterns match names as fnmatch does: escaped, each matches its own file.
    folder = snapshot_download(repo_id, revision=revision, allow_patterns=[glob.escape(file) for file in files],
                               library_name="transdec", library_version=__version__)
    return {file: Path(folder, *file.split("/")) for file in files}


def _explain(error: Exception, name: str, hub_name: HubName, downloading: bool) -> HubError | None:
    """The :class:`HubError` that says what ``error`` (raised by ``huggingface_hub`` or its HTTP client) means
    for the model ``name``; None for an error that is not the Hub's or the network's."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, HFValidationError, LocalEntryNotFoundError,
                                        OfflineModeIsEnabled, RepositoryNotFoundError, RevisionNotFoundError,
                                        RevisionResolutionError)

    endpoint, cache, repo_id = constants.ENDPOINT, constants.HF_HUB_CACHE, hub_name.repo_id
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(error, GatedRepoError):  # a RepositoryNotFoundError too: first
        if status == 403:
            return HubAccessDenied(f"{name}: {repo_id} is gated and the token sent has no access to it (403); ask "
                                   f"for access at {endpoint}/{repo_id}, or set HF_TOKEN to a token that has it")
        return HubAccessDenied(f"{name}: {repo_id} is gated ({status}): accept its conditions at "
                               f"{endpoint}/{repo_id}, then {_LOG_IN}")
    if isinstance(error, RepositoryNotFoundError):
        if status == 401:  # what the Hub answers a client without a token for a private repository, and a missing one
            return HubNotFound(f"{name}: not a local path, and the Hugging Face Hub ({endpoint}) shows no model "
                               f"repository {repo_id} without a token (401); if it is private or gated, {_LOG_IN}")
        return HubNotFound(f"{name}: not a local path, and the Hugging Face Hub ({endpoint}) has no model "
                           f"repository {repo_id} ({status})")
    if isinstance(error, RevisionNotFoundError):
        return HubNotFound(f"{name}: {repo_id} has no revision {hub_name.revision!r} (a branch, tag or commit)")
    if isinstance(error, HFValidationError):
        return HubError(f"{name}: not a valid Hugging Face Hub name ({_first_line(error)})")
    offline = constants.is_offline_mode()
    if offline and isinstance(error, (OfflineModeIsEnabled, LocalEntryNotFoundError, RevisionResolutionError)):
        return HubUnreachable(f"{name}: not in the Hugging Face Hub cache ({cache}) and HF_HUB_OFFLINE=1 forbids "
                              "downloading it; download it once without HF_HUB_OFFLINE, or pass a local path")
    if isinstance(error, HfHubHTTPError):
        if status == 401:
            said = getattr(error, "server_message", None) or _first_line(error)
            return HubAccessDenied(f"{name}: the Hugging Face Hub refused the token (401: {_first_line(said)}); "
                                   f"{_LOG_IN} with a valid token")
        if status == 403:
            return HubAccessDenied(f"{name}: the Hugging Face Hub refused access to {repo_id} (403); {_LOG_IN} "
                                   "with a token that has access")
        return HubError(f"{name}: the Hugging Face Hub ({endpoint}) answered {status} and the model is not in the "
                        "cache; try again later")
    network = isinstance(error, (OfflineModeIsEnabled, LocalEntryNotFoundError, RevisionResolutionError, OSError,
                                 *_transport_errors()))
    if network and downloading:
        return HubDownloadInterrupted(f"{name}: the download from {endpoint} was interrupted ({_cause(error)}); try "
                                      f"again: it fetches what is missing, finished files stay in the cache ({cache})")
    if network:
        return HubUnreachable(f"{name}: cannot reach the Hugging Face Hub at {endpoint} ({_cause(error)}) and the "
                              f"model is not in its cache ({cache}); connect, or pass a local path (once it is "
                              "downloaded, HF_HUB_OFFLINE=1 loads it from the cache without the network)")
    return None


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The connection errors of the HTTP client huggingface_hub uses (httpx2 from version 2.0, httpx before),
    which are not OSErrors; only a client already imported is looked at."""
    return tuple(sys.modules[name].TransportError for name in ("httpx2", "httpx")
                 if name in sys.modules and hasattr(sys.modules[name], "TransportError"))


def _cause(error: BaseException) -> str:
    """The network error under ``error`` (the library wraps some), as ``Type: first line``."""
    while error.__cause__ is not None and not isinstance(error, _transport_errors()):
        error = error.__cause__
    return f"{type(error).__name__}: {_first_line(error)}"


def _first_line(error: BaseException | str) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
