"""``transdec serve --ray``: the server's app deployed as Ray Serve replicas behind Ray Serve's HTTP proxy, until
SIGTERM or Ctrl-C, then drained: the replicas finish the requests in flight, the application is removed, and Ray
Serve and the cluster are stopped where this process started them (docs/scale.md)."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType, ModuleType
from typing import TypeVar

from transdec.decoding import DecodingConfig
from transdec.scale.cluster import RayNotInstalled, join
from transdec.scale.options import LOCAL
from transdec.scale.replica import NamedModel, ReplicaLoader
from transdec.serve.options import ServeOptions
from transdec.serve.ray_options import RayServeOptions, plan_serving
from transdec.serve.ray_replica import replica_deployment
from transdec.serve.server import warn_if_open

COMMAND = "transdec serve"
#: What to install for ``--ray``; the optional extra in pyproject.toml.
INSTALL = "pip install 'transdec[ray-serve]'"
#: Seconds between the checks that a deleted application is gone.
POLL_SECONDS = 0.2
#: Seconds a call to the cluster may take while the server stops before the cluster counts as gone.
CALL_SECONDS = 30.0

T = TypeVar("T")


class RayServeNotInstalled(ImportError):
    """Ray Serve (``ray[serve]``) is not installed; the message says how to install it."""


class ServeRefused(RuntimeError):
    """Ray Serve could not deploy the application; the message says why, in one line."""


def import_serve() -> ModuleType:
    """The ``ray.serve`` module. Where Ray is not imported yet, its log deduplication is turned off (unless
    ``RAY_DEDUP_LOGS`` says otherwise): it folds lines that look alike from different processes into one
    "[repeated Nx across cluster]", and the replicas' access log lines all look alike.

    Raises:
        RayServeNotInstalled: Ray, or a dependency of Ray Serve, is missing.
    """
    if "ray" not in sys.modules:
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # read once, when Ray is imported
    try:
        serve = importlib.import_module("ray.serve")
    except ImportError as error:
        raise RayServeNotInstalled(f"Ray Serve is not installed (no module {error.name or error}): {INSTALL}"
                                   ) from None
    return serve


def serve_on_ray(model: str | os.PathLike[str] | ReplicaLoader, options: ServeOptions = ServeOptions(),
                 ray: RayServeOptions = RayServeOptions(), host: str = "127.0.0.1", port: int = 8000,
                 device: str = "cpu", decoding: DecodingConfig | None = None) -> int:
    """Serve ``model`` as :func:`transdec.serve.run` does, from Ray Serve replicas on the cluster of ``ray``, each
    with its own model and dynamic batching, behind Ray Serve's HTTP proxy on ``host:port``, until SIGTERM or
    Ctrl-C. Returns the exit code of ``transdec serve``: 0 after a graceful stop, 2 if the model, the cluster or
    Ray Serve refuses (one line on standard error says why), 130 if a second signal cut the stop short.

    ``model``: a model name or path, decoded by ``decoding`` (``options.decoding`` if None); or a
    :data:`~transdec.scale.replica.ReplicaLoader`, called with the device on every replica, that returns the model
    and its decoding. The model is loaded once on this machine's CPU first, to check it. ``device``: ``cpu`` or
    ``cuda`` (each replica on a GPU of its own).
    """
    if callable(model) and not isinstance(model, (str, os.PathLike)):
        loader: ReplicaLoader = model
    else:
        name = os.fspath(model)
        loader = NamedModel(os.path.abspath(name) if os.path.exists(name) else name, decoding or options.decoding)
    try:
        serve = import_serve()
        loader("cpu")  # as a replica will load it: a missing model, a bad LM or strategy is one line here
    except (RayServeNotInstalled, RayNotInstalled, FileNotFoundError, ValueError) as error:
        return _fail(error)
    warn_if_open(options, host)
    try:
        with contextlib.ExitStack() as stack:
            try:
                cluster = stack.enter_context(join(ray.address))
                plan = plan_serving(ray, cluster.cpus, cluster.gpus, device)
                stop = stack.enter_context(stop_signals())  # after ray.init, which sets a SIGTERM handler of its own
                stack.enter_context(_quiet(logging.getLogger("ray.serve")))  # its INFO lines in this process
                application = replica_deployment(loader, options, plan, device).bind()
                # Serve goes with a cluster this process started; on another, it is stopped if this started it.
                stop_serve = not (cluster.joined_here and ray.address == LOCAL)
                stack.enter_context(deployed(serve, application, ray.name, host, port, options.shutdown_timeout,
                                             stop_serve))
            except (ConnectionError, ValueError, ServeRefused) as error:
                return _fail(f"Ray: {str(error).splitlines()[0]}")
            _say(f"serving {options.model_name} on http://{host}:{port}: {plan.describe()}, on a cluster of "
                 f"{cluster.cpus:g} CPU(s), {cluster.gpus:g} GPU(s)")
            while not stop.wait(0.5):
                pass
            _say(f"stopping: the replicas finish the requests in flight (up to {options.shutdown_timeout:g} s)")
    except KeyboardInterrupt:  # a second signal: the stop cut short
        return 130
    _say("stopped")
    return 0


@contextlib.contextmanager
def deployed(serve: ModuleType, application, name: str, host: str, port: int, drain_seconds: float,
             stop_serve: bool = True) -> Iterator[None]:
    """``application`` deployed as ``name`` at ``/`` for the block, once its replicas are up; Ray Serve started on
    the cluster with its HTTP proxy on ``host:port`` where it is not running yet. At the end the application is
    deleted, which drains its replicas (up to ``drain_seconds``), and Ray Serve shut down if the block started it
    and ``stop_serve``.

    Raises:
        ServeRefused: the cluster's Ray Serve runs an application of this name, listens elsewhere, or could not
            start the replicas.
    """
    started = start_serve(serve, name, host, port)
    try:
        try:
            serve.run(application, name=name, route_prefix="/")  # returns once the replicas are up
        except RuntimeError as error:  # a replica failed to start (Ray Serve tries each three times)
            raise ServeRefused(f"the replicas did not start: {_replica_error(serve, name) or error}") from None
        yield
    finally:
        try:
            delete(serve, name, drain_seconds + CALL_SECONDS)
            if started and stop_serve:
                within(CALL_SECONDS + 30.0, serve.shutdown)  # it waits up to 30 s for Serve's controller
        except TimeoutError as error:  # the cluster went away (its processes killed with this one, say)
            _say(f"{error}; leaving the cluster as it is")


def start_serve(serve: ModuleType, name: str, host: str, port: int) -> bool:
    """Start Ray Serve on the cluster, its HTTP proxy on the head node at ``host:port``; False where it runs already
    (its proxies then serve the application, and it stays up after).

    Raises:
        ServeRefused: an application named ``name`` runs already, the running Serve listens elsewhere, or its proxy
            could not start.
    """
    status = _status(serve)
    if name in status.applications:
        raise ServeRefused(f"Ray Serve on the cluster runs an application named {name!r} already (another "
                           "transdec serve?)")
    if status.proxies or status.applications:
        listening = _listening()
        if listening is not None and listening != (host, port):
            raise ServeRefused(f"Ray Serve runs on the cluster already, listening on {listening[0]}:{listening[1]}: "
                               f"give --host {listening[0]} --port {listening[1]} (or stop it: serve shutdown)")
        return False
    # One proxy, on the head node: where `transdec serve --ray` runs, it listens on --host/--port as without Ray.
    try:
        serve.start(http_options={"host": host, "port": port}, proxy_location="HeadOnly",
                    logging_config={"log_level": "WARNING", "enable_access_log": False})
    except Exception as error:  # noqa: BLE001  (Ray's error from the proxy's node: the port taken there, say)
        within(CALL_SECONDS + 30.0, serve.shutdown)  # the controller it started
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        raise ServeRefused(f"Ray Serve's HTTP proxy did not start on {host}:{port}: {lines[-1] if lines else error}"
                           ) from None
    return True


def _status(serve: ModuleType):
    """``serve.status()``, also where this process asked a Serve controller before that has gone since."""
    from ray.exceptions import RayActorError

    try:
        return serve.status()
    except RayActorError:  # serve.status() trusts the controller it found before; forget it and look again
        from ray.serve.context import _disconnect

        _disconnect()
        return serve.status()


def _replica_error(serve: ModuleType, name: str) -> str:
    """The error that kept the replicas of ``name`` from starting (the last line of the traceback Ray Serve keeps
    in the deployment's status); empty if there is none."""
    application = serve.status().applications.get(name)
    messages = [deployment.message for deployment in application.deployments.values()] if application else []
    lines = [line.strip() for message in messages for line in message.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _listening() -> tuple[str, int] | None:
    """Where a running Ray Serve's proxies listen; None if this Ray version does not say."""
    try:  # no public API reads the running instance's HTTP options
        from ray.serve.context import _get_global_client

        config = _get_global_client().http_config
        return config.host, config.port
    except Exception:  # noqa: BLE001
        return None


def delete(serve: ModuleType, name: str, timeout: float) -> None:
    """Delete the application ``name`` and wait until it is gone: its replicas stop taking requests, finish those in
    flight (Ray Serve's graceful shutdown), then stop their apps.

    Raises:
        TimeoutError: it was not gone after ``timeout`` seconds, or the cluster stopped answering.
    """
    serve.delete(name, _blocking=False)  # serve.delete's own wait gives up after 60 s, a drain may take longer
    deadline = time.monotonic() + timeout
    while name in within(CALL_SECONDS, serve.status).applications:
        if time.monotonic() > deadline:
            raise TimeoutError(f"Ray Serve had not removed {name!r} after {timeout:g} s")
        time.sleep(POLL_SECONDS)


def within(seconds: float, function: Callable[[], T]) -> T:
    """``function()``, given up after ``seconds``: a Ray call waits without end for a cluster that has gone.

    Raises:
        TimeoutError: no answer within ``seconds`` (the call goes on in a daemon thread).
    """
    outcome: list = []

    def call() -> None:
        try:
            outcome.append((True, function()))
        except BaseException as error:  # noqa: BLE001  (raised again in the caller's thread)
            outcome.append((False, error))

    thread = threading.Thread(target=call, name="transdec-ray-call", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise TimeoutError(f"the Ray cluster did not answer within {seconds:g} s")
    done, value = outcome[0]
    if not done:
        raise value
    return value


@contextlib.contextmanager
def stop_signals() -> Iterator[threading.Event]:
    """An event that the first SIGTERM or SIGINT (Ctrl-C) sets, for the block; a second raises
    ``KeyboardInterrupt``. The handlers before are restored at the end."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {number: signal.signal(number, handler) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for number, before in previous.items():
            signal.signal(number, before)


@contextlib.contextmanager
def _quiet(logger: logging.Logger, level: int = logging.WARNING) -> Iterator[None]:
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def _say(message: str) -> None:
    print(f"{COMMAND}: ray: {message}", file=sys.stderr, flush=True)


def _fail(message: object) -> int:
    print(f"{COMMAND}: error: {message}", file=sys.stderr, flush=True)
    return 2
