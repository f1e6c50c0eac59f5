"""A Ray Serve replica of ``transdec serve``: its own model and the app :func:`~transdec.serve.create_app` makes of it,
dynamic batching, WebSocket streams and limits included, behind Ray Serve's HTTP proxy.

Ray Serve builds each replica's app on the replica (``serve.ingress`` given a function): the model is loaded
there, on the replica's device, and the app's lifespan (its model thread, batcher and streams) starts and stops
with the replica. The driver never holds an app.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from transdec.scale.replica import ReplicaLoader, replica_device
from transdec.serve.access import Receive, Scope, Send, log_to_stderr
from transdec.serve.options import ServeOptions
from transdec.serve.ray_options import ServePlan

#: The response header naming the replica that answered (Ray Serve's replica id, as its logs and actor names
#: have it).
REPLICA_HEADER = b"x-replica"
#: The Ray Serve deployment's name (``SERVE_REPLICA::<app>#TranscriptionReplica#<id>`` are its actors).
DEPLOYMENT = "TranscriptionReplica"


def replica_deployment(loader: ReplicaLoader, options: ServeOptions, plan: ServePlan, device: str) -> Any:
    """The Ray Serve deployment (``serve.deployment``) whose replicas serve ``loader``'s model with ``options``, as
    ``plan`` has them; ``.bind()`` makes the application ``serve.run`` deploys."""
    from ray import serve

    def build_app():
        # Called on each replica as it starts (pickled with its arguments; a closure, since serve.ingress calls a
        # function with none).
        return replica_app(loader, options, device, plan.threads, serve.get_replica_context().replica_tag)

    return serve.deployment(serve.ingress(build_app)(), name=DEPLOYMENT, **plan.deployment_options(options))


def replica_app(loader: ReplicaLoader, options: ServeOptions, device: str, threads: int, replica: str):
    """The app of one replica named ``replica``: ``loader``'s model on ``device`` (``threads`` PyTorch threads),
    served as :func:`~transdec.serve.create_app` serves it, its responses naming the replica."""
    import torch

    from transdec.serve.app import create_app

    torch.set_num_threads(threads)
    model, decoding = loader(replica_device(device))
    app = create_app(model, dataclasses.replace(options, decoding=decoding))
    app.add_middleware(ReplicaHeaders, replica=replica)  # outermost: it sees the access log's headers
    log_to_stderr(options.log_format)  # Ray sends a replica's standard error to the driver's, each line named
    return app


class ReplicaHeaders:
    """ASGI middleware: every response and WebSocket handshake names the replica in ``x-replica``. Ray Serve's proxy
    adds ``x-request-id`` to HTTP responses itself (the id the access log took from the request, which the proxy
    gave it), so the app's own is dropped there rather than sent twice; a handshake keeps the app's."""

    def __init__(self, app, replica: str) -> None:
        self.app, self.header = app, (REPLICA_HEADER, replica.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)

        async def send_naming_the_replica(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [(name, value) for name, value in message.get("headers", [])
                           if name.lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, self.header]}
            elif message["type"] == "websocket.accept":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_naming_the_replica)
