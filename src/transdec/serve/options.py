"""What a server is set to do: its decoding, its batching and its limits, in one dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from transdec.biasing.items import BoostOptions
from transdec.decoding import DecodingConfig
from transdec.long_audio import ChunkingConfig
from transdec.serve.auth import ApiKeys
from transdec.streaming import StreamingOptions


@dataclass(frozen=True)
class ServeOptions:
    """How :func:`transdec.serve.create_app` serves a model.

    Attributes:
        model_name: the name ``/health`` and ``/v1/models`` report (requests may name any model: there is one).
        language: the language the model transcribes (ISO-639-1, reported in ``verbose_json``); a request naming
            another is refused, since a Transducer cannot switch language and would return garbage. ``None``
            accepts every request's language.
        decoding: strategy, options and fusions (LM, server-wide boost phrases) of every request.
        chunking: recordings longer than this are encoded in windows, as ``transdec transcribe`` does.
        boost: the weight (and depth scaling, case variants) of each request's own phrases.
        streaming: the WebSocket streams' recognizer (buffered windows, endpoints, ``max_streams``); its decoding
            and fusions are ``decoding``'s (see :func:`streaming_options`).
        max_batch: requests decoded together in one encoder and decoder call.
        max_wait_ms: how long the first request of a batch waits for others to join it.
        max_queue: requests admitted and not yet decoding (reading their upload, or waiting for a batch); one
            more is refused with 503, so memory stays bounded under overload.
        max_audio_seconds: the longest recording a request may send (413 beyond).
        max_request_mb: the largest request body, in MB of 10**6 bytes (413 beyond).
        max_phrases: the most boost phrases one request may send (400 beyond).
        allow_upsampling: accept audio below the model's sample rate (refused by default, as the CLI does).
        stream_buffer_seconds: audio a WebSocket client may send ahead of the recognizer before the server stops
            reading from it (backpressure through TCP).
        shutdown_timeout: seconds a graceful shutdown waits for requests in flight before cancelling them.
        api_keys: the keys requests must bring (:mod:`transdec.serve.auth`); empty: none needed.
        open_paths: paths served without a key (``/health``; ``/metrics``, ``/docs`` where asked for).
        max_per_key: requests and streams one key may have in flight (429 beyond; None: no limit).
        body_timeout: seconds a client has to send a request's whole body (408 after).
        stream_idle_timeout: seconds a WebSocket stream may send nothing before it is closed (1008) and its place
            freed.
        max_phrase_weight: the largest weight (in absolute value) a request may give a boost phrase, a factor on
            ``boost.weight``: a request's boosting cannot make the decoder emit a token at every frame.
        log_format: the access log's lines (one per request): ``"text"`` or ``"json"``.
    """

    model_name: str = "transdec"
    language: str | None = "en"
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    chunking: ChunkingConfig | None = ChunkingConfig()
    boost: BoostOptions = BoostOptions()
    streaming: StreamingOptions = StreamingOptions()
    max_batch: int = 16
    max_wait_ms: float = 10.0
    max_queue: int = 64
    max_audio_seconds: float = 300.0
    max_request_mb: float = 25.0
    max_phrases: int = 1000
    allow_upsampling: bool = False
    stream_buffer_seconds: float = 10.0
    shutdown_timeout: float = 60.0
    api_keys: ApiKeys = field(default_factory=lambda: ApiKeys({}))
    open_paths: tuple[str, ...] = ("/health",)
    max_per_key: int | None = 32
    body_timeout: float = 60.0
    stream_idle_timeout: float = 30.0
    max_phrase_weight: float = 10.0
    log_format: str = "text"

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_queue", "max_phrases", "max_per_key"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("max_audio_seconds", "max_request_mb", "stream_buffer_seconds", "shutdown_timeout",
                     "body_timeout", "stream_idle_timeout", "max_phrase_weight"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not self.max_wait_ms >= 0:
            raise ValueError(f"max_wait_ms must be 0 or more, got {self.max_wait_ms}")
        if self.log_format not in ("text", "json"):
            raise ValueError(f"log_format must be 'text' or 'json', got {self.log_format!r}")

    @property
    def max_request_bytes(self) -> int:
        return int(self.max_request_mb * 1_000_000)


def streaming_options(options: ServeOptions, decoding: DecodingConfig | None = None) -> StreamingOptions:
    """``options.streaming`` with the server's ``decoding`` (default ``options.decoding``): streams are searched as
    requests are, the strategy's own stream search with its options and fusions.

    Raises:
        ValueError: the strategy does not stream (the message names those that do).
    """
    return replace(options.streaming, decoding=decoding or options.decoding)
