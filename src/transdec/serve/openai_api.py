"""``POST /v1/audio/transcriptions``, as OpenAI's API has it (and ``GET /v1/models``).

The form fields (docs/serve.md has the table): ``file`` (required), ``model`` (any name: there is one model),
``response_format``, ``timestamp_granularities[]``, ``language`` (checked against the model's), ``keywords[]`` and
``boost`` (this request's own boost phrases), and ``prompt``, ``temperature``, ``include[]``,
``chunking_strategy`` (accepted and ignored, as OpenAI allows for models without them).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile

from transdec.audio import AudioError
from transdec.biasing.phrases import BoostPhrase
from transdec.serve.batcher import DynamicBatcher, QueueFull, Slot
from transdec.serve.errors import ApiError, bad_request, overloaded, too_large
from transdec.serve.limits import BodyTimeout, KeyLimits, TooManyForKey, receive_within
from transdec.serve.options import ServeOptions
from transdec.serve.responses import FORMATS, GRANULARITIES, subtitles, verbose_json
from transdec.serve.uploads import AudioTooLong, read_upload
from transdec.transcribe import Transcript

#: Status recorded for a request whose client went away before its response (nginx's "client closed request").
CLIENT_GONE = 499


class _BodyTooLarge(Exception):
    pass


def transcription_router(batcher: DynamicBatcher, limits: KeyLimits, options: ServeOptions,
                         sample_rate: int) -> APIRouter:
    """The transcription and model-listing routes of one server."""
    router = APIRouter()

    @router.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": options.model_name, "object": "model", "created": 0,
                                            "owned_by": "transdec"}]}

    @router.post("/v1/audio/transcriptions")
    async def transcriptions(request: Request) -> Response:
        try:
            release = limits.acquire(getattr(request.state, "key_name", None))
        except TooManyForKey as error:
            raise ApiError(429, str(error), "rate_limit_error", None, "too_many_concurrent_requests") from None
        try:
            return await _transcribe(request, batcher, options, sample_rate)
        finally:
            release()

    return router


async def _transcribe(request: Request, batcher: DynamicBatcher, options: ServeOptions, sample_rate: int) -> Response:
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > options.max_request_bytes:  # refused before it is read
        raise _request_too_large(options)
    form = await _read_form(request, options)
    try:
        fields = _Fields.parse(form, options)
        data = await fields.upload.read()
    finally:
        await form.close()
    try:  # a place in the queue only now, with the upload in: a slow upload keeps nobody out
        slot = batcher.admit()
    except QueueFull as full:
        raise overloaded(full.retry_after) from None
    with slot:
        try:
            waveform = await run_in_threadpool(read_upload, data, fields.upload.filename or "audio", sample_rate,
                                               options.max_audio_seconds, options.allow_upsampling)
        except AudioTooLong as error:
            raise too_large(str(error), "file", "audio_too_long") from None
        except (AudioError, ValueError) as error:
            raise bad_request(str(error), "file", "invalid_audio") from None
        del data
        request.state.audio_seconds = round(len(waveform) / sample_rate, 3)
        return await _decode(request, batcher, slot, waveform, fields, options)


async def _decode(request: Request, batcher: DynamicBatcher, slot: Slot, waveform: np.ndarray, fields: _Fields,
                  options: ServeOptions) -> Response:
    """The response with the transcript of ``waveform``, decoded in the next batch; a client that goes away first
    takes its request out of the queue (status 499)."""
    timing: dict[str, float] = {}
    try:
        job = asyncio.ensure_future(batcher.transcribe(slot, waveform, fields.phrases, timing))
        gone = asyncio.ensure_future(_client_gone(request))
        try:
            await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            abandoned = not job.done()
            if abandoned:  # the client went away: drop its request (from the queue, if not yet decoding)
                job.cancel()
        if abandoned:
            await asyncio.wait({job})
            return Response(status_code=CLIENT_GONE)
        transcript = job.result()
    finally:
        for name, value in timing.items():
            setattr(request.state, name, value)
    return fields.response(transcript, options)


async def _read_form(request: Request, options: ServeOptions) -> FormData:
    """The multipart form, read through a receive that counts the body (a request without Content-Length, chunked,
    is cut off at the size limit too) and keeps its end, to tell a body cut off before its closing boundary (which
    the form parser takes silently, without the part it was in) from a form without a file."""
    received = 0
    tail = b""
    receive_in_time = receive_within(request.receive, options.body_timeout)

    async def receive() -> Any:
        nonlocal received, tail
        message = await receive_in_time()
        body = message.get("body", b"")
        received += len(body)
        if received > options.max_request_bytes:
            raise _BodyTooLarge
        tail = (tail + body)[-_TAIL_BYTES:]
        return message

    try:
        form = await Request(request.scope, receive).form(max_files=1, max_fields=1000)
    except _BodyTooLarge:
        raise _request_too_large(options) from None
    except BodyTimeout as error:  # a slow or stalled upload: its connection goes, with its place
        raise ApiError(408, f"{error}: send the whole request faster, or ask for a longer --body-timeout",
                       "invalid_request_error", "file", "request_timeout") from None
    except Exception as error:  # starlette's MultiPartException / HTTPException: a malformed form
        raise bad_request(f"the request body is not a valid multipart form: {_form_problem(error)}") from None
    boundary = _boundary(request.headers.get("content-type", ""))
    if boundary and b"--" + boundary + b"--" not in tail:
        await form.close()
        raise bad_request("the multipart body ends before its closing boundary: the upload was cut off (send the "
                          "whole form)")
    return form


#: Bytes of the body's end kept to find the closing boundary (which only an epilogue could push out of them).
_TAIL_BYTES = 4096


def _boundary(content_type: str) -> bytes | None:
    """The boundary of a ``multipart/form-data`` content type, None for other types."""
    kind, _, parameters = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        return None
    for parameter in parameters.split(";"):
        name, _, value = parameter.strip().partition("=")
        if name.lower() == "boundary":
            return value.strip().strip('"').encode("latin-1", errors="replace")
    return None


def _form_problem(error: BaseException) -> str:
    """What the form parser found wrong: its own reason, which starlette's errors keep as their causes."""
    reasons: list[str] = []
    while error is not None and len(reasons) < 4:
        reason = str(error).removeprefix("400: ").strip()
        if "header size" in reason:
            return "a part's headers are longer than the server reads (a filename thousands of characters long?)"
        if reason and not isinstance(error, LookupError) and not any(reason in seen or seen in reason
                                                                     for seen in reasons):
            reasons.append(reason)
        error = error.__cause__ or error.__context__
    return "; ".join(reasons) or "the form parser refused it"


def _request_too_large(options: ServeOptions) -> ApiError:
    return too_large(f"the request is larger than the server's limit of {options.max_request_mb:g} MB", "file",
                     "request_too_large")


async def _client_gone(request: Request) -> None:
    """Return when the client disconnects (the body has been read, so the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@dataclass
class _Fields:
    """The form's fields that matter, checked."""

    upload: UploadFile
    response_format: str
    words: bool
    phrases: list[BoostPhrase]

    @classmethod
    def parse(cls, form: FormData, options: ServeOptions) -> _Fields:
        upload = form.get("file")
        if isinstance(upload, str):
            raise bad_request("the field 'file' is text, not a file: send the audio as a file part (with a filename "
                              "in its Content-Disposition, as curl -F file=@audio.wav does)", "file", "missing_file")
        if not isinstance(upload, UploadFile):
            raise bad_request("a file is required: send the audio as the multipart field 'file'", "file",
                              "missing_file")
        response_format = _text(form, "response_format") or "json"
        if response_format not in FORMATS:
            raise bad_request(f"response_format {response_format!r} is not one of {', '.join(FORMATS)}",
                              "response_format")
        granularities = [*form.getlist("timestamp_granularities[]"), *form.getlist("timestamp_granularities")]
        for value in granularities:
            if value not in GRANULARITIES:
                raise bad_request(f"timestamp_granularities: {value!r} is not one of {', '.join(GRANULARITIES)}",
                                  "timestamp_granularities")
        language = _text(form, "language")
        if language and options.language and language.lower().split("-")[0] != options.language.lower():
            raise bad_request(f"language {language!r}: this server's model transcribes {options.language!r} only",
                              "language", "unsupported_language")
        if (_text(form, "stream") or "").lower() == "true":
            raise bad_request("stream=true is not supported here; stream audio through the WebSocket endpoint "
                              "/v1/audio/stream instead", "stream")
        return cls(upload, response_format, "word" in granularities,
                   _phrases(form, options.max_phrases, options.max_phrase_weight))

    def response(self, transcript: Transcript, options: ServeOptions) -> Response:
        if self.response_format == "json":
            return JSONResponse({"text": transcript.text})
        if self.response_format == "text":
            return PlainTextResponse(transcript.text + "\n")
        if self.response_format == "verbose_json":
            return JSONResponse(verbose_json(transcript, options.language, self.words))
        return PlainTextResponse(subtitles(transcript, self.response_format))


def _text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    if value is not None and not isinstance(value, str):
        raise bad_request(f"{name} must be a text field, not a file", name)
    return value.strip() if value is not None else None


def _phrases(form: FormData, limit: int, max_weight: float) -> list[BoostPhrase]:
    """This request's boost phrases: each ``keywords[]`` value (OpenAI's field for words to guide transcription),
    and each line of ``boost`` (a phrase, optionally a TAB and its weight, as in a phrase file, at most
    ``max_weight`` in absolute value)."""
    texts = [value for value in [*form.getlist("keywords[]"), *form.getlist("keywords")] if isinstance(value, str)]
    phrases = [BoostPhrase(text.strip()) for text in texts if text.strip()]
    boost = _text(form, "boost") or ""
    for number, line in enumerate(boost.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        text, _, weight = line.partition("\t")
        try:
            phrases.append(BoostPhrase(text.strip(), float(weight) if weight.strip() else 1.0))
        except ValueError as error:
            raise bad_request(f"boost line {number}: {error}", "boost") from None
        if abs(phrases[-1].weight) > max_weight:
            raise bad_request(f"boost line {number}: weight {phrases[-1].weight:g} is beyond this server's limit of "
                              f"{max_weight:g} (a factor on its boost weight)", "boost")
    if len(phrases) > limit:
        raise bad_request(f"{len(phrases)} boost phrases, more than the server's limit of {limit}", "boost")
    return phrases
