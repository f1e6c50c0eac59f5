"""What ``transdec serve --ray`` asks of a Ray cluster: :class:`RayServeOptions` (what the user asks for) and
:class:`ServePlan` (what each replica asks Ray for, worked out from the cluster's resources, and the options of
the Ray Serve deployment). Plain data: nothing here imports Ray."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from transdec.scale.options import LOCAL, gpu_replicas, is_address
from transdec.serve.options import ServeOptions

#: Seconds between a draining replica's checks for requests still in flight (Ray's default, 2 s, would add up to
#: 2 s to every shutdown for nothing).
DRAIN_CHECK_SECONDS = 0.2


@dataclass(frozen=True)
class RayServeOptions:
    """How ``transdec serve --ray`` spreads a model over a Ray cluster.

    Attributes:
        address: the cluster, as :class:`~transdec.scale.options.RayOptions` has it: ``"local"`` (the default)
            starts one on this machine for the server's life; ``"auto"``, ``"HOST:PORT"`` or ``"ray://HOST:PORT"``
            joins a running one, which stays up after.
        replicas: model replicas, each a Ray Serve replica with its own model and batching; the least of them
            where ``max_replicas`` is given. Default: one per GPU with a CUDA device, else one per
            ``cpus_per_replica`` CPUs of the cluster.
        max_replicas: the most replicas: Ray Serve scales between ``replicas`` and this many with the load
            (aiming at one full batch in flight per replica). None: a fixed count.
        cpus_per_replica: CPUs each replica asks for; a CPU replica runs that many PyTorch threads (at least 1).
            Where more replicas are asked for than the cluster's CPUs hold, each asks for a share of them (its
            thread count stays).
        name: the Ray Serve application's name (one per cluster: it is served at ``/``).
    """

    address: str = LOCAL
    replicas: int | None = None
    max_replicas: int | None = None
    cpus_per_replica: float = 1.0
    name: str = "transdec"

    def __post_init__(self) -> None:
        if not is_address(self.address):
            raise ValueError(f"Ray address {self.address!r}: expected auto, HOST:PORT or ray://HOST:PORT (or local)")
        if self.replicas is not None and self.replicas < 1:
            raise ValueError(f"replicas must be at least 1, got {self.replicas}")
        if self.max_replicas is not None and self.max_replicas < (self.replicas or 1):
            raise ValueError(f"max_replicas must be at least replicas ({self.replicas or 1}), got {self.max_replicas}")
        if not (math.isfinite(self.cpus_per_replica) and self.cpus_per_replica > 0):
            raise ValueError(f"cpus_per_replica must be a positive number, got {self.cpus_per_replica}")


@dataclass(frozen=True)
class ServePlan:
    """Replicas between ``min_replicas`` and ``max_replicas`` (equal: a fixed count), each asking Ray for
    ``num_cpus`` CPUs and ``num_gpus`` GPUs and running ``threads`` PyTorch threads."""

    min_replicas: int
    max_replicas: int
    num_cpus: float
    num_gpus: float
    threads: int

    @property
    def autoscaled(self) -> bool:
        return self.max_replicas > self.min_replicas

    def describe(self) -> str:
        count = (f"{self.min_replicas}-{self.max_replicas} replicas, autoscaled" if self.autoscaled else
                 f"{self.min_replicas} replica{'s' if self.min_replicas > 1 else ''}")
        each = f"{self.num_gpus:g} GPU, {self.num_cpus:g} CPU" if self.num_gpus else (
            f"{self.num_cpus:g} CPU, {self.threads} thread{'s' if self.threads > 1 else ''}")
        return f"{count} ({each} each)"

    def deployment_options(self, options: ServeOptions) -> dict[str, Any]:
        """The keyword arguments of ``serve.deployment`` for replicas that serve with ``options``."""
        if self.autoscaled:
            # A replica is busy once a whole batch is in flight: more load than that gathers the next batch,
            # which a new replica would decode at once instead.
            scaling: dict[str, Any] = {"autoscaling_config": {
                "min_replicas": self.min_replicas, "max_replicas": self.max_replicas,
                "initial_replicas": self.min_replicas, "target_ongoing_requests": options.max_batch}}
        else:
            scaling = {"num_replicas": self.min_replicas}
        resources: dict[str, float] = {"num_cpus": self.num_cpus}
        if self.num_gpus:
            resources["num_gpus"] = self.num_gpus
        return {
            **scaling,
            "ray_actor_options": resources,
            # Ray Serve sends a replica at most this many requests at once (its default, 5, would starve dynamic
            # batching): its whole queue, a batch and its streams, so that the replica's own limits answer first
            # (503 with Retry-After, 1013), as without Ray.
            "max_ongoing_requests": options.max_queue + options.max_batch + options.streaming.max_streams,
            # Requests the proxy holds while every replica is full: bounded, one more gets Ray's 503.
            "max_queued_requests": options.max_queue,
            "graceful_shutdown_timeout_s": options.shutdown_timeout,
            "graceful_shutdown_wait_loop_s": DRAIN_CHECK_SECONDS,
            # Ray's own INFO lines and access log: the replicas write transdec's access log instead.
            "logging_config": {"log_level": "WARNING", "enable_access_log": False},
        }


def plan_serving(options: RayServeOptions, cpus: float, gpus: float, device: str) -> ServePlan:
    """The replicas a cluster of ``cpus`` CPUs and ``gpus`` GPUs runs for ``options`` on ``device``.

    The least replicas must fit the cluster as it is; more (autoscaling) may wait for nodes that a Ray
    autoscaler adds.

    Raises:
        ValueError: a CUDA device on a cluster without GPUs, more GPU replicas than GPUs, or CPUs too few.
    """
    threads = max(1, int(options.cpus_per_replica))
    if device.startswith("cuda"):
        least = gpu_replicas(device, options.replicas, options.cpus_per_replica, cpus, gpus)
        return ServePlan(least, options.max_replicas or least, options.cpus_per_replica, 1.0, threads)
    if cpus <= 0:
        raise ValueError("the Ray cluster has no CPU for a replica")
    least = options.replicas or max(1, int(cpus // options.cpus_per_replica))
    num_cpus = min(options.cpus_per_replica, cpus / least)
    return ServePlan(least, options.max_replicas or least, round(num_cpus, 4), 0.0, threads)
