"""Serve a model over HTTP (pip install 'transdec[serve]'; docs/serve.md): POST /v1/audio/transcriptions as OpenAI's API
has it, requests arriving together decoded in one batch; streaming recognition over the WebSocket /v1/audio/stream;
GET /health and GET /metrics (Prometheus). SIGTERM or Ctrl-C stops taking requests, finishes those in flight and
exits 0. With --ray, the same server runs as Ray Serve replicas on a Ray cluster, behind Ray Serve's HTTP proxy
(docs/scale.md).
"""

from __future__ import annotations

import argparse
import dataclasses

from transdec.cli.argtypes import at_least, finite, seconds
from transdec.cli.common import (add_buffered_arguments, add_device_argument, add_length_policy_arguments,
                                 add_long_audio_arguments, add_model_argument, buffered_options, chunking,
                                 device_problem, fail, load_for_decoding, replica_loader, require_one_strategy)
from transdec.cli.fusions import (add_boost_arguments, add_lm_arguments, boost_options, lm_problem,
                                  require_one_lm_weight)
from transdec.decoding.flags import add_decoding_arguments, decoding_configs
from transdec.scale.flags import absolute_paths
from transdec.scale.options import LOCAL
from transdec.serve.ray_flags import add_ray_serve_arguments, ray_serve_options


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve", help="an HTTP server: OpenAI's transcription API, streaming over a WebSocket, metrics",
        description=__doc__)
    add_model_argument(p)
    add_device_argument(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s; 0.0.0.0: all)")
    p.add_argument("--port", type=at_least(0, 65535), default=8000, help="(default: %(default)s; 0: any free port)")
    p.add_argument("--language", default="en",
                   help="the language the model transcribes (ISO-639-1; requests naming another are refused; "
                        "'any' accepts all; default: %(default)s)")
    limits = p.add_argument_group("batching and limits")
    limits.add_argument("--max-batch", type=at_least(1), default=16, help="requests decoded together (default: 16)")
    limits.add_argument("--max-wait-ms", type=seconds, default=10.0,
                        help="how long a request waits for others to batch with (default: 10)")
    limits.add_argument("--max-queue", type=at_least(1), default=64,
                        help="requests admitted and not yet decoding; more get 503 with Retry-After (default: 64)")
    limits.add_argument("--max-audio-seconds", type=finite, default=300.0,
                        help="the longest recording a request may send (default: 300)")
    limits.add_argument("--max-request-mb", type=finite, default=25.0, help="the largest request (default: 25)")
    limits.add_argument("--max-streams", type=at_least(1), default=16,
                        help="WebSocket streams at once, decoded in one batch; more are closed with 1013 "
                             "(default: 16)")
    limits.add_argument("--max-per-key", type=at_least(1), default=32,
                        help="requests and streams one API key may have in flight; more get 429 (default: 32)")
    limits.add_argument("--body-timeout", type=finite, default=60.0, metavar="SECONDS",
                        help="time a client has to send a whole request; a slower one gets 408 (default: 60)")
    limits.add_argument("--stream-idle-timeout", type=finite, default=30.0, metavar="SECONDS",
                        help="a WebSocket stream that sends nothing for this long is closed with 1008, its place "
                             "freed (default: 30)")
    limits.add_argument("--max-phrase-weight", type=finite, default=10.0,
                        help="the largest weight a request may give a boost phrase (default: 10)")
    access = p.add_argument_group("access and logs (docs/serve.md)")
    access.add_argument("--api-key", action="append", default=[], metavar="[NAME:]KEY",
                        help="a key requests must bring (Authorization: Bearer KEY), named in logs and metrics; "
                             "repeat for several; also --api-keys-file and the TRANSDEC_API_KEYS variable (which, "
                             "unlike this flag, other users of the machine cannot read)")
    access.add_argument("--api-keys-file", default=None, metavar="FILE", help="keys, one [NAME:]KEY a line")
    access.add_argument("--public-metrics", action="store_true", help="serve /metrics without a key")
    access.add_argument("--public-docs", action="store_true", help="serve /docs (the OpenAPI page) without a key")
    access.add_argument("--log-format", choices=["text", "json"], default="text",
                        help="the one line logged per request: key=value text or a JSON object (default: text)")
    streaming = p.add_argument_group("streaming (buffered windows, as transdec stream)")
    add_buffered_arguments(streaming, chunk_help="audio encoded at a time (default: 480)")
    add_length_policy_arguments(p)
    add_long_audio_arguments(p)
    add_lm_arguments(p)
    add_boost_arguments(p, items=False)
    p.add_argument("--allow-upsampling", action="store_true", help="accept audio below the model's sample rate")
    add_ray_serve_arguments(p)
    add_decoding_arguments(p, default="greedy_label")


def run(args: argparse.Namespace) -> int:
    import importlib.util

    try:  # the serve extra
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401

        if not (importlib.util.find_spec("python_multipart") or importlib.util.find_spec("multipart")):
            raise ImportError("python-multipart, which reads uploaded forms, is not installed")
        from transdec.serve import ServeOptions, run as run_server
        from transdec.serve.auth import ApiKeys
    except ImportError as error:
        return fail("transdec serve", f"{error}; pip install 'transdec[serve]'")
    from transdec.streaming import StreamingOptions

    try:  # every option is checked before the model is loaded
        decodings = decoding_configs(args)
        require_one_strategy(args, decodings, "serve")
        ray = ray_serve_options(args)
        # on a cluster, the replicas' nodes have the device, not necessarily this one
        problem = lm_problem(args) or (ray is None and device_problem(args.device))
        if problem:
            raise ValueError(problem)
        require_one_lm_weight(args, "serve")
        args.item_phrases = True  # each request may bring its own phrases, boosted with --boost-weight
        boost = boost_options(args)
        streaming = StreamingOptions(args.max_streams, buffered_options(args))
        try:
            options = ServeOptions(model_name=args.model, language=None if args.language == "any" else args.language,
                                   decoding=decodings[0], chunking=chunking(args), boost=boost, streaming=streaming,
                                   max_batch=args.max_batch, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                                   max_audio_seconds=args.max_audio_seconds, max_request_mb=args.max_request_mb,
                                   allow_upsampling=args.allow_upsampling,
                                   api_keys=ApiKeys.gather(args.api_key, args.api_keys_file),
                                   open_paths=open_paths(args), max_per_key=args.max_per_key,
                                   body_timeout=args.body_timeout, stream_idle_timeout=args.stream_idle_timeout,
                                   max_phrase_weight=args.max_phrase_weight, log_format=args.log_format)
        except ValueError as error:  # ServeOptions names its field first: name the flag instead
            field, _, rest = str(error).partition(" ")
            raise ValueError(f"--{field.replace('_', '-')} {rest}") from None
        if ray is None or ray.address == LOCAL:  # else Ray Serve's proxy listens on the head node, elsewhere
            check_can_listen(args.host, args.port)
        if ray is None:  # on a cluster, each replica loads the model (serve_on_ray checks it here first)
            model, decodings = load_for_decoding(args, decodings, boost)
            options = dataclasses.replace(options, decoding=decodings[0])
    except (FileNotFoundError, ValueError) as error:
        return fail("transdec serve", error)
    if ray is not None:
        from transdec.serve.ray_server import serve_on_ray

        absolute_paths(args)  # the replicas load the model, LM and phrases from other directories
        return serve_on_ray(replica_loader(args, decodings), options, ray, args.host, args.port, args.device)
    run_server(model, options, args.host, args.port)
    return 0


def open_paths(args: argparse.Namespace) -> tuple[str, ...]:
    """The paths served without a key: ``/health``, and what ``--public-metrics`` and ``--public-docs`` open."""
    docs = ("/docs", "/redoc", "/openapi.json") if args.public_docs else ()
    return ("/health", *(("/metrics",) if args.public_metrics else ()), *docs)


def check_can_listen(host: str, port: int) -> None:
    """Refuse an address the server could not listen on (taken, not this machine's), before the model loads."""
    import socket

    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, protocol, _, address = addresses[0]
        with socket.socket(family, kind, protocol) as probe:
            # as uvicorn binds: a port whose last connections are still closing is free
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:
        raise ValueError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
