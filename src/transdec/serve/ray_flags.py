"""The ``--ray`` flags of ``transdec serve`` and the :class:`RayServeOptions` they make."""

from __future__ import annotations

import argparse
import re

from transdec.scale.flags import add_ray_address_argument, positive
from transdec.scale.options import is_address
from transdec.serve.ray_options import RayServeOptions

_COUNT_OR_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def add_ray_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags that serve from replicas on a Ray cluster."""
    group = parser.add_argument_group("Ray Serve (replicas on a Ray cluster; docs/scale.md; needs pip install "
                                      "'transdec[ray-serve]')")
    add_ray_address_argument(group, "serve from Ray Serve replicas, each with its own model and batching, behind Ray "
                                    "Serve's HTTP proxy on --host/--port", "the server's life",
                             "the model, --lm and --boost-phrases files")
    group.add_argument("--replicas", type=replica_count, default=None, metavar="N|MIN-MAX",
                       help="model replicas: N, or MIN-MAX for Ray Serve to scale between with the load (aiming at "
                            "--max-batch requests in flight per replica); default one per GPU with --device cuda, "
                            "else one per --ray-cpus-per-replica CPUs of the cluster")
    group.add_argument("--ray-cpus-per-replica", type=positive(float), default=RayServeOptions.cpus_per_replica,
                       metavar="N",
                       help="CPUs each replica asks for; on CPUs, its PyTorch threads (default %(default)g)")


def replica_count(text: str) -> tuple[int, int | None]:
    """An argparse type: ``N`` (a fixed count: ``(N, None)``) or ``MIN-MAX`` (autoscaling: ``(MIN, MAX)``)."""
    match = _COUNT_OR_RANGE.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"expected N or MIN-MAX replicas, got {text!r}")
    least, most = int(match[1]), None if match[2] is None else int(match[2])
    if least < 1 or (most is not None and most < least):
        raise argparse.ArgumentTypeError(f"expected at least 1 replica, and MIN no more than MAX, got {text}")
    return least, most


def ray_serve_options(args: argparse.Namespace) -> RayServeOptions | None:
    """The :class:`RayServeOptions` of the flags; None without ``--ray``.

    Raises:
        ValueError: an address that is none, or ``--replicas``/``--ray-cpus-per-replica`` without ``--ray``.
    """
    if args.ray is None:
        given = [flag for flag, value in (("--replicas", args.replicas),
                                          ("--ray-cpus-per-replica",
                                           None if args.ray_cpus_per_replica == RayServeOptions.cpus_per_replica
                                           else 1)) if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} without --ray")
        return None
    if not is_address(args.ray):
        raise ValueError(f"--ray {args.ray}: expected auto, HOST:PORT or ray://HOST:PORT as the address (or --ray "
                         "alone, for a cluster on this machine)")
    least, most = args.replicas or (None, None)
    return RayServeOptions(args.ray, least, most, args.ray_cpus_per_replica)
