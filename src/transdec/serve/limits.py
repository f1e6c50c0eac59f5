"""How much of the server one API key, or one slow client, may hold.

:class:`KeyLimits` counts each key's requests and streams in flight: one more than ``max_per_key`` is refused (429,
or a WebSocket closed with 1013), so that one client cannot take every place in the queue and every stream.
Servers without keys have no per-key limit (every client is the same anonymous one).

:func:`receive_within` reads a request body against a deadline, so that a client that uploads slowly, or stops
half-way, holds its connection for ``body_timeout`` seconds at most; the request's place in the queue is taken only
once its body has arrived, so slow uploads never keep other clients out.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable


class TooManyForKey(Exception):
    """The key has ``limit`` requests and streams in flight already."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(f"the API key {name!r} has {limit} requests and streams in flight, this server's limit per "
                         "key; retry when one has finished")
        self.name, self.limit = name, limit


class BodyTimeout(Exception):
    """The request body did not arrive within the deadline."""


class KeyLimits:
    """Requests and streams in flight per key name (see the module docstring)."""

    def __init__(self, max_per_key: int | None) -> None:
        self.max_per_key = max_per_key
        self.in_flight: dict[str, int] = {}

    def acquire(self, name: str | None) -> Callable[[], None]:
        """Count one more for ``name`` (None: a server without keys, not counted); returns the release, which may be
        called more than once. :class:`TooManyForKey` when the key is at its limit."""
        if name is None or self.max_per_key is None:
            return lambda: None
        if self.in_flight.get(name, 0) >= self.max_per_key:
            raise TooManyForKey(name, self.max_per_key)
        self.in_flight[name] = self.in_flight.get(name, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.in_flight[name] -= 1

        return release


def receive_within(receive: Callable[[], Awaitable[dict[str, Any]]],
                   seconds: float) -> Callable[[], Awaitable[dict[str, Any]]]:
    """``receive`` that raises :class:`BodyTimeout` once ``seconds`` have passed since the first call."""
    deadline: float | None = None

    async def receive_in_time() -> dict[str, Any]:
        nonlocal deadline
        now = time.monotonic()
        deadline = deadline or now + seconds
        try:
            return await asyncio.wait_for(receive(), max(deadline - now, 0.0))
        except asyncio.TimeoutError:
            raise BodyTimeout(f"the request body did not arrive within {seconds:g} s") from None

    return receive_in_time
