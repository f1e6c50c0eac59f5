"""Running an app with uvicorn, with a graceful shutdown: on SIGTERM or Ctrl-C the server stops taking
connections, finishes the requests in flight (up to ``shutdown_timeout``), closes the WebSocket streams (code
1012, service restart) and returns."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
from collections.abc import Iterator

from transdec.protocol import SpeechModel
from transdec.serve.access import log_to_stderr
from transdec.serve.access import logger as access_log
from transdec.serve.app import create_app
from transdec.serve.options import ServeOptions

logger = logging.getLogger("transdec.serve")


def run(model: SpeechModel, options: ServeOptions = ServeOptions(), host: str = "127.0.0.1", port: int = 8000,
        log_level: str = "info") -> None:
    """Serve ``model`` on ``host:port`` until SIGTERM or Ctrl-C, then shut down gracefully and return. One access log
    line per request goes to standard error (``options.log_format``), in place of uvicorn's."""
    import uvicorn

    warn_if_open(options, host)
    handler = log_to_stderr(options.log_format)

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn raises the signal again once it has shut down, so that the process dies of it; the shutdown
            # was graceful, so `transdec serve` returns (exit code 0) instead.
            with super().capture_signals():
                try:
                    yield
                finally:
                    getattr(self, "_captured_signals", []).clear()

    config = uvicorn.Config(create_app(model, options), host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=options.shutdown_timeout, access_log=False)
    try:
        Server(config).run()
    finally:
        access_log.removeHandler(handler)


def warn_if_open(options: ServeOptions, host: str) -> None:
    """Say, once at start-up, that a server listening beyond loopback without API keys serves anyone."""
    if not options.api_keys and not is_loopback(host):
        logger.warning("transdec serve: listening on %s without API keys: anyone who reaches the port can use it "
                       "(--api-key, --api-keys-file or TRANSDEC_API_KEYS; docs/serve.md)", host)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback, reachable from nowhere else."""
    try:
        return all(ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None))
    except (OSError, ValueError):
        return False
