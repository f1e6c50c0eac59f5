"""Errors as OpenAI's API reports them: ``{"error": {"message", "type", "param", "code"}}`` with an HTTP status,
so that OpenAI clients raise their usual exceptions (``BadRequestError``, ...) with the server's message."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ApiError(Exception):
    """An error response: ``status``, a message that names the problem, OpenAI's error ``type``, the request
    field it concerns (``param``), a machine-readable ``code`` and extra headers (``Retry-After``)."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, "invalid_request_error", param, code)


def too_large(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(413, message, "invalid_request_error", param, code)


def overloaded(retry_after: int) -> ApiError:
    # OpenAI's clients retry a 503 by themselves, after Retry-After seconds.
    return ApiError(503, f"the server is at capacity (its queue is full); retry in {retry_after} s", "server_error",
                    None, "overloaded", {"Retry-After": str(retry_after)})


def error_type_for(status: int) -> str:
    """OpenAI's error type for an HTTP status the server did not choose a type for (404, 405, 422, 500, ...)."""
    return {401: "authentication_error", 404: "invalid_request_error", 429: "rate_limit_error"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error")
