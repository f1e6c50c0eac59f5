"""The ``--ray*`` flags of ``transdec transcribe`` and the :class:`RayOptions` they make."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from transdec.scale.options import LOCAL, RayOptions, is_address


def add_ray_address_argument(group: argparse._ArgumentGroup, what: str, lifetime: str, files: str) -> None:
    """``--ray [ADDRESS]``: ``what`` it does, a cluster started on this machine for ``lifetime`` without an address,
    and the ``files`` every node must see."""
    group.add_argument("--ray", nargs="?", const=LOCAL, default=None, metavar="ADDRESS",
                       help=f"{what}. ADDRESS: auto (the cluster `ray start` made on this machine), HOST:PORT of a "
                            f"head node, or ray://HOST:10001 (Ray Client); none: start a cluster on this machine for "
                            f"{lifetime}. Every node must see {files} at the same paths")


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags that send a run to a Ray cluster."""
    group = parser.add_argument_group("Ray cluster (many machines, many replicas; docs/scale.md; needs "
                                      "pip install 'transdec[ray]')")
    add_ray_address_argument(group, "transcribe on a Ray cluster: reading in CPU tasks, a pool of model replicas, the "
                                    "output as without --ray", "the run", "the audio and model files")
    group.add_argument("--ray-replicas", type=positive(int), default=None, metavar="N",
                       help="model replicas (default: one per GPU with --device cuda, else one per "
                            "--ray-cpus-per-replica CPUs, less what reading takes)")
    group.add_argument("--ray-cpus-per-replica", type=positive(float), default=RayOptions.cpus_per_replica,
                       metavar="N",
                       help="CPUs each replica asks for; on CPUs, its PyTorch threads (default %(default)g)")
    group.add_argument("--ray-window", type=positive(int), default=None, metavar="ITEMS",
                       help="items a replica transcribes per call, sorted by length there (default 8 x "
                            "--batch-size, as without --ray, which gives the same output to the byte; less spreads a "
                            "small run over more replicas)")


def ray_options(args: argparse.Namespace) -> RayOptions:
    """The :class:`RayOptions` of the ``--ray*`` flags.

    Raises:
        ValueError: an address that is none (argparse takes the path after a bare ``--ray`` for one), or
            ``--ray-*`` without ``--ray``.
    """
    if args.ray is None:
        given = [flag for flag, value in (("--ray-replicas", args.ray_replicas), ("--ray-window", args.ray_window),
                                          ("--ray-cpus-per-replica",
                                           None if args.ray_cpus_per_replica == RayOptions.cpus_per_replica else 1))
                 if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} without --ray")
        return RayOptions()
    if not is_address(args.ray):
        if Path(args.ray).exists():
            raise ValueError(f"--ray took {args.ray} for the cluster's address: put --ray after the paths, or give "
                             "the address (--ray auto)")
        raise ValueError(f"--ray {args.ray}: expected auto, HOST:PORT or ray://HOST:PORT as the address (or --ray "
                         "alone, after the paths, for a cluster on this machine)")
    return RayOptions(args.ray, args.ray_replicas, args.ray_cpus_per_replica, window=args.ray_window)


def positive(kind: type):
    """An argparse type: a positive finite ``kind``."""
    def parse(text: str):
        value = kind(text)
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse says "invalid int value" for a non-number
    return parse


def absolute_paths(args: argparse.Namespace, names: tuple[str, ...] = ("model", "lm", "boost_phrases")) -> None:
    """Make the flags ``names`` that name existing files absolute: replicas run in other directories."""
    for name in names:
        value = getattr(args, name, None)
        if value and Path(value).exists():
            setattr(args, name, str(Path(value).resolve()))
