"""The FastAPI application: ``create_app(model, options)``.

Everything a server holds (its model thread, batcher, streams and metrics) belongs to the app it made, in
``app.state.transdec``, and starts and stops with the app's lifespan: no global state, so that several apps (the
tests make a few) live side by side in one process.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException

from transdec.biasing.items import bind_boosts
from transdec.biasing.phrases import BoostPhrase
from transdec.protocol import SpeechModel
from transdec.serve.access import RequestLog
from transdec.serve.auth import Authentication
from transdec.serve.batcher import DynamicBatcher
from transdec.serve.errors import ApiError, error_type_for
from transdec.serve.limits import KeyLimits
from transdec.serve.metrics import Metrics
from transdec.serve.openai_api import transcription_router
from transdec.serve.options import ServeOptions, streaming_options
from transdec.serve.streams import StreamingHub
from transdec.serve.websocket import stream_router, unavailable_stream_router
from transdec.serve.worker import ModelWorker
from transdec.streaming import Recognizer
from transdec.transcribe import Transcript, transcribe

logger = logging.getLogger("transdec.serve")


@dataclass
class ServerState:
    """What one app holds."""

    model: SpeechModel
    options: ServeOptions
    metrics: Metrics
    worker: ModelWorker
    batcher: DynamicBatcher
    hub: StreamingHub | None  # None where the decoding strategy does not stream


def create_app(model: SpeechModel, options: ServeOptions = ServeOptions()) -> FastAPI:
    """An app that serves ``model``: OpenAI's ``POST /v1/audio/transcriptions`` (dynamically batched), the
    ``/v1/audio/stream`` WebSocket, ``GET /health``, ``GET /metrics`` and ``GET /v1/models``. Run it with any ASGI
    server (``transdec serve`` uses uvicorn, :func:`transdec.serve.run`)."""
    metrics = Metrics(options.model_name, options.max_batch)
    worker = ModelWorker()

    def decode_batch(waveforms: list, phrases: list[list[BoostPhrase]]) -> list[Transcript]:
        # One call: the batch encoded as one padded batch and decoded at once, each with its own phrases.
        return transcribe(model, waveforms, options.decoding, batch_size=len(waveforms), chunking=options.chunking,
                          phrases=phrases if any(phrases) else None, boost=options.boost)

    batcher = DynamicBatcher(decode_batch, worker, metrics, model.sample_rate, options.max_batch, options.max_wait_ms,
                             options.max_queue)
    limits = KeyLimits(options.max_per_key)  # shared by requests and streams: one count per key
    # Boosts given as text are tokenized for the model here, as transcribe does for the batches.
    try:
        recognizer = Recognizer(model, streaming_options(options, bind_boosts(options.decoding, model.tokenizer)))
    except ValueError as error:  # the strategy, or an option of it, does not stream: transcription only
        logger.warning("the WebSocket refuses streams: %s", error)
        hub, stream_routes = None, unavailable_stream_router(str(error))
    else:
        hub = StreamingHub(recognizer, worker, metrics, options.stream_buffer_seconds)
        stream_routes = stream_router(hub, limits, options.stream_idle_timeout)
    state = ServerState(model, options, metrics, worker, batcher, hub)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        batcher.start()
        if hub is not None:
            hub.start()
        try:
            yield
        finally:
            # The ASGI server has stopped taking connections and waited for the requests in flight; finish what
            # is queued, then free the model thread.
            await batcher.stop()
            if hub is not None:
                await hub.stop()
            worker.close()

    app = FastAPI(title="transdec", summary="Transducer speech recognition, OpenAI-compatible", lifespan=lifespan)
    app.state.transdec = state
    app.include_router(transcription_router(batcher, limits, options, model.sample_rate))
    app.include_router(stream_routes)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": options.model_name}

    @app.get("/metrics")
    async def prometheus_metrics() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    _add_error_handlers(app)
    # Outermost first: every request gets its id and log line, those refused for their key too.
    app.add_middleware(Authentication, keys=options.api_keys, open_paths=options.open_paths)
    app.add_middleware(RequestLog, metrics=metrics, log_format=options.log_format)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error in OpenAI's shape, the server's own and the framework's (404, 405, ...) alike."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, error: ApiError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status, headers=error.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> JSONResponse:
        body = ApiError(error.status_code, str(error.detail), error_type_for(error.status_code)).body()
        return JSONResponse(body, status_code=error.status_code, headers=getattr(error, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse(ApiError(400, str(error)).body(), status_code=400)

    @app.exception_handler(Exception)
    async def server_error(request: Request, error: Exception) -> JSONResponse:
        logger.exception("request failed")
        body = ApiError(500, f"the server failed: {type(error).__name__}: {error}", "server_error").body()
        return JSONResponse(body, status_code=500)
