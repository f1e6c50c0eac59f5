"""``/v1/audio/stream``: streaming recognition over a WebSocket (the protocol is in docs/serve.md).

Client: a JSON config (``{"sample_rate": 16000, "encoding": "pcm_s16le"}``), binary frames of samples, then
``{"type": "end"}`` (or it closes, and its stream is dropped). Server: ``{"type": "partial", "text"}`` when the
current segment's text changes, ``{"type": "final", "start", "end", "text", "words"}`` for each segment an
endpoint (or the end) closes, then ``{"type": "done"}`` and a normal close. A problem is ``{"type": "error",
"message"}`` and a close with the code of :data:`CLOSE_CODES`.
"""

from __future__ import annotations

import asyncio
import json

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from transdec.serve.auth import SUBPROTOCOL
from transdec.serve.limits import KeyLimits, TooManyForKey
from transdec.serve.streams import Connection, HubFull, StreamConfig, StreamingHub

#: Close codes (RFC 6455): normal; the data was not what the protocol expects; the config or the audio did not come
#: in time, or the server's decoding strategy does not stream; the server failed; every stream is taken, or the
#: client's API key has its limit of streams (try again later).
CLOSE_CODES = {"done": 1000, "bad_data": 1003, "timeout": 1008, "unavailable": 1008, "error": 1011, "busy": 1013}
#: Seconds a client has to send its config after connecting.
CONFIG_TIMEOUT_SECONDS = 10.0


def stream_router(hub: StreamingHub, limits: KeyLimits, idle_timeout: float) -> APIRouter:
    """The WebSocket route of one server: each stream counts towards its API key's limit, and one that sends nothing
    for ``idle_timeout`` seconds is closed, its place freed."""
    router = APIRouter()

    @router.websocket("/v1/audio/stream")
    async def stream(websocket: WebSocket) -> None:
        await _accept(websocket)
        try:
            release = limits.acquire(websocket.scope.get("state", {}).get("key_name"))
        except TooManyForKey as error:
            hub.metrics.stream_ended("refused")
            return await _close(websocket, "busy", str(error))
        try:
            await _serve(websocket, hub, idle_timeout)
        finally:
            release()

    return router


async def _accept(websocket: WebSocket) -> None:
    """Accept the connection, with the subprotocol a browser offered beside its key (never the key itself)."""
    offered = websocket.scope.get("subprotocols", [])
    await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)


async def _serve(websocket: WebSocket, hub: StreamingHub, idle_timeout: float) -> None:
    """One client's stream, from its config to its end."""
    if hub.full:  # before waiting for a config that could not be served
        return await _refuse(websocket, hub)
    try:
        message = await asyncio.wait_for(websocket.receive(), CONFIG_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:
        return await _close(websocket, "timeout", f"no config within {CONFIG_TIMEOUT_SECONDS:g} s")
    if message["type"] == "websocket.disconnect":
        return
    try:
        config = StreamConfig.parse(_json(message))
    except ValueError as error:
        return await _close(websocket, "bad_data", str(error))
    try:
        connection = hub.connect(config)
    except HubFull:
        return await _refuse(websocket, hub)
    outcome = "disconnected"
    sender = asyncio.ensure_future(_send_events(websocket, connection))
    try:
        outcome = await _receive_audio(websocket, hub, connection, sender, idle_timeout)
        if outcome == "ended":
            outcome = await sender
    finally:
        hub.close(connection)
        sender.cancel()
        hub.metrics.stream_ended(outcome)


def unavailable_stream_router(reason: str) -> APIRouter:
    """The WebSocket route of a server that cannot stream (its decoding strategy has no stream search): every
    connection is told ``reason`` and closed."""
    router = APIRouter()

    @router.websocket("/v1/audio/stream")
    async def stream(websocket: WebSocket) -> None:
        await _accept(websocket)
        await _close(websocket, "unavailable", reason)

    return router


async def _receive_audio(websocket: WebSocket, hub: StreamingHub, connection: Connection,
                         sender: asyncio.Future, idle_timeout: float) -> str:
    """Feed the client's frames until its end ("ended"), its leaving ("disconnected"), ``idle_timeout`` seconds
    without a message ("idle") or a problem."""
    while True:
        try:
            message = await asyncio.wait_for(websocket.receive(), idle_timeout)
        except asyncio.TimeoutError:
            await _close(websocket, "timeout", f"no audio for {idle_timeout:g} s: the stream is closed and its place "
                                               "freed")
            return "idle"
        if message["type"] == "websocket.disconnect":
            return "disconnected"
        if message.get("bytes") is not None:
            try:
                hub.feed(connection, message["bytes"])
            except ValueError as error:
                await _close(websocket, "bad_data", str(error))
                return "bad_data"
            # Backpressure: read no more while the client is too far ahead of the recognizer.
            await connection.room.wait()
            if sender.done():  # the stream failed (its error is sent)
                return await sender
            continue
        try:
            request = _json(message)
            if not isinstance(request, dict) or request.get("type") != "end":
                raise ValueError(f'expected binary audio frames or {{"type": "end"}}, got {message.get("text")!r:.80}')
        except ValueError as error:
            await _close(websocket, "bad_data", str(error))
            return "bad_data"
        hub.end(connection)
        return "ended"


async def _send_events(websocket: WebSocket, connection: Connection) -> str:
    """Send the stream's messages until ``done`` (then close normally) or an error; returns the outcome."""
    try:
        while True:
            event = await connection.events.get()
            if event["type"] == "error":
                await _close(websocket, "error", event["message"])
                return "error"
            await websocket.send_json(event)
            if event["type"] == "done":
                await websocket.close(CLOSE_CODES["done"])
                return "completed"
    except (WebSocketDisconnect, RuntimeError, OSError):  # the client went away while we wrote
        return "disconnected"


async def _refuse(websocket: WebSocket, hub: StreamingHub) -> None:
    hub.metrics.stream_ended("refused")
    await _close(websocket, "busy", f"all {hub.max_streams} streams are in use; try again later")


async def _close(websocket: WebSocket, kind: str, message: str) -> None:
    """Tell the client what went wrong, then close with the matching code (the reason cut to the 123 bytes a close
    frame holds)."""
    if websocket.client_state != WebSocketState.CONNECTED:
        return
    try:
        if kind != "done":
            await websocket.send_json({"type": "error", "message": message})
        await websocket.close(CLOSE_CODES[kind], message.encode()[:123].decode(errors="ignore"))
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass


def _json(message: dict) -> object:
    """The JSON of a text message; ValueError for a binary one or text that is not JSON."""
    text = message.get("text")
    if text is None:
        raise ValueError("expected a JSON text message, got binary data")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None
