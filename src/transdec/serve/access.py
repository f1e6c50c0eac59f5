"""Every request's id and log line, and its count in the metrics.

:class:`RequestLog` is the outermost ASGI middleware: it gives each HTTP request and WebSocket an id (the client's
``X-Request-ID`` where it sends a sensible one, else a new one), returns it in the ``x-request-id`` response header
(on a WebSocket, in the handshake's), and when the request is over writes one log line to the
``transdec.serve.access`` logger: id, method and path, status (a WebSocket: its close code), the name of its API key
(never the key), and the fields the endpoint put in the scope's state: seconds of audio, milliseconds waiting in
the queue and decoding. ``log_format="json"`` writes the line as one JSON object. Transcription requests are also
counted in the metrics, by status and key.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from typing import Any, Awaitable, Callable

from transdec.serve.metrics import Metrics

logger = logging.getLogger("transdec.serve.access")

#: The paths counted in the metrics, by what the metrics call them.
ENDPOINTS = {"/v1/audio/transcriptions": "transcriptions"}
#: The fields an endpoint may put in the scope's state for the log line.
LOGGED_STATE = ("audio_seconds", "queue_ms", "decode_ms")
#: A request id taken from a client: short, and nothing a log line would have to escape.
CLIENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class RequestLog:
    """The ASGI middleware of the module docstring."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], metrics: Metrics,
                 log_format: str = "text") -> None:
        if log_format not in ("text", "json"):
            raise ValueError(f"log_format must be 'text' or 'json', got {log_format!r}")
        self.app, self.metrics, self.log_format = app, metrics, log_format

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        request_id = _client_id(scope) or uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        header = (b"x-request-id", request_id.encode())
        status: list[int] = []
        began = time.perf_counter()

        async def send_with_id(message: dict) -> None:
            kind = message["type"]
            if kind in ("http.response.start", "websocket.accept"):
                message = {**message, "headers": [*message.get("headers", []), header]}
            if kind == "http.response.start":
                status.append(message["status"])
            elif kind == "websocket.close":
                status.append(message.get("code", 1000))
            elif kind == "websocket.http.response.start":  # a refused handshake
                status.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - began
            code = status[0] if status else (1006 if scope["type"] == "websocket" else 500)
            endpoint = ENDPOINTS.get(scope["path"])
            if endpoint is not None:
                self.metrics.request_done(endpoint, code, seconds, state.get("key_name"))
            self._log(scope, request_id, code, seconds, state)

    def _log(self, scope: Scope, request_id: str, status: int, seconds: float, state: dict) -> None:
        record = {"id": request_id, "method": scope.get("method", "WEBSOCKET"), "path": scope["path"],
                  "status": status, "key": state.get("key_name"), "ms": round(seconds * 1000, 1)}
        record.update({name: state[name] for name in LOGGED_STATE if name in state})
        if self.log_format == "json":
            logger.info(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **record}))
        else:
            logger.info(" ".join(f"{name}={value}" for name, value in record.items() if value is not None))


def log_to_stderr(log_format: str = "text") -> logging.Handler:
    """Write the access log's lines to standard error, in place of the ASGI server's (uvicorn's, Ray Serve's): each
    line as it is (``json``) or after its time (``text``). Returns the handler, for ``logger.removeHandler``."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s" if log_format == "json" else "%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def _client_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"x-request-id":
            text = value.decode("latin-1").strip()
            return text if CLIENT_ID.fullmatch(text) else None
    return None
