"""How a Ray job is split over a cluster: :class:`RayOptions` (what the user asks for) and :class:`ReplicaPlan`
(what each model replica and reading task asks Ray for, worked out from the cluster's resources)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: ``--ray`` given without an address: start a local cluster (Ray's ``address="local"``).
LOCAL = "local"
_HOST_PORT = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d+$")


@dataclass(frozen=True)
class RayOptions:
    """What a Ray transcription asks of the cluster.

    Attributes:
        address: where the cluster is: ``"local"`` (the default) starts a cluster on this machine for the run
            and stops it after; ``"auto"`` joins the cluster ``ray start`` made on this machine; ``"HOST:PORT"``
            joins the cluster of that head node; ``"ray://HOST:10001"`` joins through Ray Client. A process that
            has called ``ray.init`` already runs on that cluster whatever this says, and it stays up after.
        replicas: model replicas (actors, each holding a loaded model); default one per GPU with a CUDA device,
            else as many as the cluster's CPUs hold at ``cpus_per_replica`` each beside one reading task.
        cpus_per_replica: CPUs each replica asks for; a CPU replica runs that many PyTorch threads (at least 1).
            Where more replicas are asked for than the CPUs hold, each asks for a share of them instead (its
            thread count stays).
        read_cpus: CPUs each reading task (audio files read and resampled, a window at a time) asks for.
        window: items a replica transcribes per call, sorted by length there and cut into batches (default
            ``8 * batch_size``, as ``transdec transcribe`` reads them: the same batches, so the same output to the
            byte). Smaller windows spread a small run over more replicas; their other batches may change the last
            digit of a confidence or time.
    """

    address: str = LOCAL
    replicas: int | None = None
    cpus_per_replica: float = 1.0
    read_cpus: float = 0.5
    window: int | None = None

    def __post_init__(self) -> None:
        if not is_address(self.address):
            raise ValueError(f"Ray address {self.address!r}: expected auto, HOST:PORT or ray://HOST:PORT (or local)")
        if self.replicas is not None and self.replicas < 1:
            raise ValueError(f"replicas must be at least 1, got {self.replicas}")
        for name in ("cpus_per_replica", "read_cpus"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value}")
        if self.window is not None and self.window < 1:
            raise ValueError(f"window must be at least 1, got {self.window}")


def is_address(text: str) -> bool:
    """Whether ``text`` names a Ray cluster: ``local``, ``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``."""
    return text in (LOCAL, "auto") or text.startswith("ray://") or bool(_HOST_PORT.match(text))


@dataclass(frozen=True)
class ReplicaPlan:
    """The resources of a run: ``replicas`` actors of ``num_cpus`` CPUs and ``num_gpus`` GPUs, each running
    ``threads`` PyTorch threads, and reading tasks of ``read_cpus`` CPUs."""

    replicas: int
    num_cpus: float
    num_gpus: float
    threads: int
    read_cpus: float

    def describe(self) -> str:
        each = f"{self.num_gpus:g} GPU, {self.num_cpus:g} CPU" if self.num_gpus else (
            f"{self.num_cpus:g} CPU, {self.threads} thread{'s' if self.threads > 1 else ''}")
        return f"{self.replicas} replica{'s' if self.replicas > 1 else ''} ({each} each)"


def plan_replicas(options: RayOptions, cpus: float, gpus: float, device: str) -> ReplicaPlan:
    """The replicas a cluster of ``cpus`` CPUs and ``gpus`` GPUs runs for ``options`` on ``device``.

    Raises:
        ValueError: a CUDA device on a cluster without GPUs, more GPU replicas than GPUs, or no room for a
            reading task beside the replicas.
    """
    read = options.read_cpus
    if device.startswith("cuda"):
        replicas = gpu_replicas(device, options.replicas, options.cpus_per_replica, cpus, gpus, read, " and reading")
        return ReplicaPlan(replicas, options.cpus_per_replica, 1.0, max(1, int(options.cpus_per_replica)), read)
    if cpus <= read:
        raise ValueError(f"the Ray cluster has {cpus:g} CPU(s): none left for a replica beside reading "
                         f"({read:g} CPU)")
    threads = max(1, int(options.cpus_per_replica))
    replicas = options.replicas or max(1, int((cpus - read) // options.cpus_per_replica))
    num_cpus = min(options.cpus_per_replica, (cpus - read) / replicas)
    return ReplicaPlan(replicas, round(num_cpus, 4), 0.0, threads, read)


def gpu_replicas(device: str, replicas: int | None, cpus_per_replica: float, cpus: float, gpus: float,
                 other_cpus: float = 0.0, others: str = "") -> int:
    """How many replicas of one GPU each: ``replicas``, or one per GPU. ValueError where the cluster has no GPU,
    fewer GPUs, or too few CPUs for them and ``other_cpus`` more (what ``others`` names)."""
    if gpus < 1:
        raise ValueError(f"--device {device}: the Ray cluster has no GPU (use --device cpu)")
    replicas = replicas or int(gpus)
    if replicas > gpus:
        raise ValueError(f"{replicas} replicas of one GPU each: the Ray cluster has {gpus:g} GPU(s)")
    needed = replicas * cpus_per_replica + other_cpus
    if needed > cpus:
        raise ValueError(f"{replicas} GPU replicas of {cpus_per_replica:g} CPU each{others} need {needed:g} CPUs, "
                         f"the Ray cluster has {cpus:g}")
    return replicas


def window_size(options: RayOptions, batch_size: int) -> int:
    """Items per window: ``options.window``, else ``8 * batch_size``, what ``transdec transcribe`` reads at a time
    (the same windows make the same batches, so the output is the same to the byte)."""
    return options.window if options.window is not None else 8 * batch_size
