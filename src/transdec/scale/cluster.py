"""Joining a Ray cluster (or starting one on this machine) for one run, and leaving it as it was."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

from transdec.scale.options import LOCAL

#: What to install for ``--ray``; the optional extra in pyproject.toml.
INSTALL = "pip install 'transdec[ray]'"


class RayNotInstalled(ImportError):
    """Ray (with Ray Data) is not installed; the message says how to install it."""


def import_ray() -> ModuleType:
    """The ``ray`` module with ``ray.data`` loaded.

    Raises:
        RayNotInstalled: Ray or Ray Data is missing.
    """
    try:
        import ray
        import ray.data  # noqa: F401  (ray[data]: pandas, pyarrow)
    except ImportError as error:
        raise RayNotInstalled(f"Ray is not installed ({error}): {INSTALL}") from None
    return ray


@dataclass(frozen=True)
class Cluster:
    """The cluster a run works on: its CPUs and GPUs, and whether this run joined it (and leaves it at the end)."""

    cpus: float
    gpus: float
    joined_here: bool


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse a ``HOST:PORT`` or ``ray://HOST:PORT`` address where nothing listens, at once: Ray itself keeps
    trying for minutes.

    Raises:
        ConnectionError: nothing accepts a connection there within ``timeout`` seconds.
    """
    if address in (LOCAL, "auto"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as error:
        raise ConnectionError(f"no Ray cluster answers at {address} ({error})") from None


@contextlib.contextmanager
def join(address: str = LOCAL) -> Iterator[Cluster]:
    """Join the Ray cluster at ``address`` (see :class:`~transdec.scale.options.RayOptions`) for the block, with Ray's
    own INFO lines off: ``"local"`` starts one on this machine, stopped at the end; an address joins that cluster and
    leaves it running. Where this process is on a cluster already (``ray.init`` was called), that one is used and
    kept. Needs Ray only (``transdec serve --ray`` runs on this; :func:`connect` adds what Ray Data needs).

    Raises:
        RayNotInstalled: Ray is missing.
        ConnectionError: no cluster answers at ``address`` (see :func:`check_reachable`).
    """
    try:
        import ray
    except ImportError as error:
        raise RayNotInstalled(f"Ray is not installed ({error}): {INSTALL}") from None
    joined = not ray.is_initialized()
    if joined:
        check_reachable(address)
        # Ray's own INFO lines (its start, each dataset's plan and progress) would bury the run's own report; so
        # would its notice that a new local cluster uses token authentication, its default (a choice the user
        # made, RAY_AUTH_MODE, or an address's cluster keeps its say).
        auth_notice = logging.getLogger("ray._private.authentication.authentication_token_setup")
        auth_level = auth_notice.level
        if address == LOCAL:
            auth_notice.setLevel(logging.ERROR)
        try:
            ray.init(address=address, include_dashboard=False if address == LOCAL else None,
                     logging_level=logging.WARNING, log_to_driver=True)
        finally:
            auth_notice.setLevel(auth_level)
    try:
        resources = ray.cluster_resources()
        yield Cluster(resources.get("CPU", 0.0), resources.get("GPU", 0.0), joined)
    finally:
        if joined:
            ray.shutdown()


@contextlib.contextmanager
def connect(address: str = LOCAL) -> Iterator[Cluster]:
    """:func:`join` the cluster at ``address`` for a Ray Data run: Ray Data's progress bars, plans and INFO lines off
    for the block (the run reports its own progress).

    Raises:
        RayNotInstalled: Ray or Ray Data is missing.
        ConnectionError: no cluster answers at ``address`` (see :func:`check_reachable`).
    """
    ray = import_ray()
    with join(address) as cluster:
        data_context = ray.data.DataContext.get_current()
        quiet = {name: False for name in ("enable_progress_bars", "print_on_execution_start")
                 if hasattr(data_context, name)}  # the second is newer than some Ray versions this runs on
        before = {name: getattr(data_context, name) for name in quiet}
        # Ray Data's INFO lines, and its warning that its progress bars are off (the run shows its own progress).
        loggers = {logging.getLogger("ray.data"): logging.WARNING,
                   logging.getLogger("ray.data._internal.progress"): logging.ERROR}
        levels = {logger: logger.level for logger in loggers}
        try:
            for name, value in quiet.items():
                setattr(data_context, name, value)
            for logger, level in loggers.items():
                logger.setLevel(level)
            yield cluster
        finally:
            for name, value in before.items():
                setattr(data_context, name, value)
            for logger, level in levels.items():
                logger.setLevel(level)
