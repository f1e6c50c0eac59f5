"""Serving a model over HTTP: OpenAI's transcription API with dynamic batching, streaming over a WebSocket, health
and Prometheus metrics (``pip install 'transdec[serve]'``; docs/serve.md).

::

    from transdec.serve import ServeOptions, create_app, run

    app = create_app(transdec.load_model("tiny-en-rnnt"), ServeOptions(max_batch=16))  # any ASGI server runs it
    run(model, options, host="127.0.0.1", port=8000)                                   # or uvicorn, until SIGTERM
    serve_on_ray("tiny-en-rnnt", options, RayServeOptions(replicas=2))                 # or Ray Serve replicas

Modules, one job each: :mod:`~transdec.serve.options` (ServeOptions), :mod:`~transdec.serve.app` (the app),
:mod:`~transdec.serve.openai_api` (``/v1/audio/transcriptions``), :mod:`~transdec.serve.batcher` (dynamic
batching), :mod:`~transdec.serve.worker` (the model thread), :mod:`~transdec.serve.websocket` and
:mod:`~transdec.serve.streams` (``/v1/audio/stream``), :mod:`~transdec.serve.uploads` (uploaded audio),
:mod:`~transdec.serve.responses` (response formats), :mod:`~transdec.serve.errors` (OpenAI's error shape),
:mod:`~transdec.serve.metrics` (``/metrics``), :mod:`~transdec.serve.server` (uvicorn, graceful shutdown);
on a Ray cluster (``transdec serve --ray``, docs/scale.md): :mod:`~transdec.serve.ray_options` (RayServeOptions, the
replicas' resources), :mod:`~transdec.serve.ray_replica` (a replica's app), :mod:`~transdec.serve.ray_server`
(deploy, drain), :mod:`~transdec.serve.ray_flags` (``--ray``, ``--replicas``).

This package imports FastAPI only where the app is made (and Ray only where it is deployed), so ``ServeOptions`` and
``RayServeOptions`` import without the extras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from transdec.serve.options import ServeOptions
from transdec.serve.ray_options import RayServeOptions

if TYPE_CHECKING:
    from transdec.serve.app import create_app
    from transdec.serve.ray_server import serve_on_ray
    from transdec.serve.server import run

__all__ = ["RayServeOptions", "ServeOptions", "create_app", "run", "serve_on_ray"]


def __getattr__(name: str) -> Any:
    # create_app and run need FastAPI (the serve extra): imported on first use, with its ImportError then.
    if name == "create_app":
        from transdec.serve.app import create_app

        return create_app
    if name == "run":
        from transdec.serve.server import run

        return run
    if name == "serve_on_ray":
        from transdec.serve.ray_server import serve_on_ray

        return serve_on_ray
    raise AttributeError(f"module 'transdec.serve' has no attribute {name!r}")
