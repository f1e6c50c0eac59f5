"""API keys: who may use the server, checked as OpenAI's clients send them, on HTTP and on the WebSocket.

A key is given as ``KEY`` or ``NAME:KEY`` (``--api-key``, a line of ``--api-keys-file``, a comma-separated entry of
``TRANSDEC_API_KEYS``); the name is what logs and metrics show, never the key (a key given without one is named by
the start of its SHA-256). Clients send ``Authorization: Bearer KEY`` (OpenAI's clients do, with
``api_key=KEY``); a browser's WebSocket, which cannot set headers, may send ``?api_key=KEY`` or the subprotocol
``bearer.KEY`` (offered beside ``transdec``, which the server then accepts).

:class:`Authentication` is an ASGI middleware in front of the app: a request without a valid key gets 401 in
OpenAI's error shape (a WebSocket: an error message and a close with 1008), except on the open paths (``/health``,
and ``/metrics`` and ``/docs`` where the server is told to leave them open). The name of the key a request came
with is put in its scope's state (``key_name``), for the limits, the log line and the metrics.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs

#: The environment variable a server reads keys from (comma-separated entries).
KEYS_VARIABLE = "TRANSDEC_API_KEYS"
#: The WebSocket subprotocol prefix that carries a key, for browsers: ``bearer.KEY``.
SUBPROTOCOL_PREFIX = "bearer."
#: The subprotocol a browser offers beside its key, which the server accepts (it never echoes the key).
SUBPROTOCOL = "transdec"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


@dataclass(frozen=True)
class ApiKeys:
    """The keys a server takes, each with its name; empty: the server is open to anyone who reaches it."""

    names: dict[bytes, str]  # SHA-256 of a key -> its name (keys are compared by digest, in constant time)

    @classmethod
    def gather(cls, keys: Sequence[str] = (), keys_file: str | None = None,
               environment: dict[str, str] | None = None) -> ApiKeys:
        """The keys of ``--api-key`` values, of a keys file (one entry a line; blank lines and ``#`` comments
        skipped) and of :data:`KEYS_VARIABLE` (default: the process environment's). ValueError naming where for
        an unreadable file, an empty key or a name given to two keys."""
        environment = os.environ if environment is None else environment
        entries = [(key, "--api-key") for key in keys]
        if keys_file is not None:
            try:
                lines = Path(keys_file).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as error:
                raise ValueError(f"--api-keys-file {keys_file}: cannot read it ({error})") from None
            entries += [(line, f"{keys_file}:{number}") for number, line in enumerate(lines, 1)
                        if line.strip() and not line.lstrip().startswith("#")]
        entries += [(entry, KEYS_VARIABLE) for entry in environment.get(KEYS_VARIABLE, "").split(",") if entry.strip()]
        names: dict[bytes, str] = {}
        for entry, where in entries:
            name, _, key = entry.strip().rpartition(":")
            name, key = name.strip(), key.strip()
            if not key:
                raise ValueError(f"{where}: an empty API key" + (f" (named {name!r})" if name else ""))
            digest = hashlib.sha256(key.encode()).digest()
            name = name or f"key-{digest.hex()[:8]}"
            if name in names.values() and names.get(digest) != name:
                raise ValueError(f"{where}: two keys are named {name!r}")
            names[digest] = name
        return cls(names)

    def __bool__(self) -> bool:
        return bool(self.names)

    def name_of(self, key: str | None) -> str | None:
        """The name of ``key``, None for a missing or unknown one; every known key is compared, in constant time."""
        if not key:
            return None
        digest = hashlib.sha256(key.encode()).digest()
        found = None
        for known, name in self.names.items():
            if hmac.compare_digest(known, digest):
                found = name
        return found


def presented_key(scope: Scope) -> str | None:
    """The key a request carries: ``Authorization: Bearer KEY``, else (a WebSocket) ``?api_key=KEY`` or the
    subprotocol ``bearer.KEY``."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
    kind, _, credentials = headers.get("authorization", "").partition(" ")
    if kind.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    if scope["type"] == "websocket":
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if query.get("api_key"):
            return query["api_key"][0]
        for protocol in scope.get("subprotocols", []):
            if protocol.startswith(SUBPROTOCOL_PREFIX):
                return protocol[len(SUBPROTOCOL_PREFIX):]
    return None


class Authentication:
    """The ASGI middleware that lets through requests with a valid key (see the module docstring)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], keys: ApiKeys,
                 open_paths: Sequence[str] = ("/health",)) -> None:
        self.app, self.keys, self.open_paths = app, keys, tuple(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not self.keys or self._open(scope["path"]):
            return await self.app(scope, receive, send)
        key = presented_key(scope)
        name = self.keys.name_of(key)
        if name is None:
            reason = ("no API key: send it as 'Authorization: Bearer KEY'" if key is None else
                      "the API key is not one this server takes")
            return await (_refuse_http(send, reason) if scope["type"] == "http" else
                          _refuse_websocket(receive, send, reason))
        scope.setdefault("state", {})["key_name"] = name
        await self.app(scope, receive, send)

    def _open(self, path: str) -> bool:
        return any(path == open_path or path.startswith(open_path.rstrip("/") + "/") for open_path in self.open_paths)


async def _refuse_http(send: Send, reason: str) -> None:
    body = json.dumps({"error": {"message": reason, "type": "invalid_request_error", "param": None,
                                 "code": "invalid_api_key"}}).encode()
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b'Bearer realm="transdec"')]})
    await send({"type": "http.response.body", "body": body})


async def _refuse_websocket(receive: Receive, send: Send, reason: str) -> None:
    """Accept, say why and close with 1008 (policy violation): a refused handshake would tell a browser nothing."""
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": json.dumps({"type": "error", "message": reason})})
    await send({"type": "websocket.close", "code": 1008, "reason": reason[:123]})
