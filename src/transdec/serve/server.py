"""Running an app with uvicorn, with a graceful shutdown: on SIGTERM or Ctrl-C the server stops taking
connections, finishes the requests in flight (up to ``shutdown_timeout``), closes the WebSocket streams (code
1012, service restart) and returns."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from transdec.protocol import SpeechModel
from transdec.serve.app import create_app
from transdec.serve.options import ServeOptions


def run(model: SpeechModel, options: ServeOptions = ServeOptions(), host: str = "127.0.0.1", port: int = 8000,
        log_level: str = "info") -> None:
    """Serve ``model`` on ``host:port`` until SIGTERM or Ctrl-C, then shut down gracefully and return."""
    import uvicorn

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
                            timeout_graceful_shutdown=options.shutdown_timeout)
    Server(config).run()
