"""``ray_transcribe``: a batch of files transcribed on a Ray cluster, written as ``transdec transcribe`` writes.

The driver (this process) lists the items, skips those a resumed output holds already, cuts the rest into windows
and makes them a Ray Data dataset of one row per window. Reading tasks (CPU) turn each window into waveforms at the
model's rate; an actor pool of model replicas transcribes them, a window per call; the results come back to the
driver as they are done, which writes them through the same ordered writer as a single-process run
(:func:`~transdec.transcribe_files.write_transcripts`), so the output, its order, resumption, the reports of bad
items and the exit codes are those of ``transdec transcribe``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tqdm import tqdm

from transdec.audio import AudioError
from transdec.biasing.items import BoostOptions
from transdec.decoding import DecodingConfig
from transdec.long_audio import ChunkingConfig
from transdec.scale.cluster import RayNotInstalled, connect, import_ray
from transdec.scale.options import RayOptions, ReplicaPlan, plan_replicas, window_size
from transdec.scale.replica import NamedModel, ReplicaLoader, WindowTranscriber
from transdec.scale.windows import ItemResult, make_windows, pack, read_windows, unpack
from transdec.sources import AudioItem, collect_inputs
from transdec.transcribe import Transcript
from transdec.transcribe_files import COMMAND, model_source, write_transcripts

#: Seconds between progress lines where there is no progress bar (standard error is not a terminal).
REPORT_EVERY = 30.0


def ray_transcribe(model: str | os.PathLike[str] | ReplicaLoader, paths: Sequence[str],
                   decoding: DecodingConfig | None = None, *, batch_size: int = 16, output_format: str = "text",
                   output: str | None = None, resume: bool = False, allow_upsampling: bool = False,
                   chunking: ChunkingConfig | None = ChunkingConfig(), item_boost: BoostOptions | None = None,
                   device: str = "cpu", options: RayOptions = RayOptions()) -> int:
    """Transcribe every item under ``paths`` (audio files, folders, NeMo manifests) on a Ray cluster; returns the
    exit code of ``transdec transcribe``: 0, 1 if any item failed or there was nothing to transcribe, 2 if the
    model, the cluster or the output is unusable (one line on standard error says why), 130 if interrupted.

    The output is that of :func:`~transdec.transcribe_files.transcribe_files` with the same arguments: ``output``
    (standard output if None) written in input order in ``output_format`` (``text``, ``jsonl``, ``manifest``),
    replaced only by a complete run; an interrupted run keeps every finished result in ``<output>.partial``, and
    ``resume=True`` transcribes only the items that file lacks. Each item that cannot be read or transcribed is
    reported (its manifest line and why) and the others go on. Progress and throughput (seconds of audio per
    second) go to standard error.

    ``model``: a bundled model name or a model path, decoded by ``decoding`` (default greedy); or a
    :data:`~transdec.scale.replica.ReplicaLoader`, called with the device on every replica, which returns the model
    and its decoding (``decoding`` must be None then). The model is loaded once on this machine's CPU first, to
    check it and learn its sample rate. ``device``: ``cpu`` or ``cuda`` (each replica on a GPU of its own).
    ``options``: the cluster and how the work is split (:class:`~transdec.scale.options.RayOptions`).

    Every node must see the audio files (and model files) at the same paths: relative paths are taken from this
    process's working directory.
    """
    if callable(model) and not isinstance(model, (str, os.PathLike)):
        if decoding is not None:
            raise ValueError("decoding is for a model name; a ReplicaLoader returns its own decoding")
        loader: ReplicaLoader = model
    else:
        name = os.fspath(model)
        loader = NamedModel(os.path.abspath(name) if os.path.exists(name) else name, decoding or DecodingConfig())
    try:
        import_ray()
        sample_rate, source = _check_model(loader)
    except (RayNotInstalled, FileNotFoundError, ValueError) as error:
        print(f"{COMMAND}: error: {error}", file=sys.stderr)
        return 2
    items, failures = collect_inputs(list(paths))
    if not items:
        return write_transcripts(items, failures, lambda todo, progress: iter(()), output_format, output, resume,
                                 source)
    with contextlib.ExitStack() as stack:
        try:
            cluster = stack.enter_context(connect(options.address))
            plan = plan_replicas(options, cluster.cpus, cluster.gpus, device)
        except (ConnectionError, ValueError) as error:
            print(f"{COMMAND}: error: Ray: {str(error).splitlines()[0]}", file=sys.stderr)
            return 2
        run = RayRun(loader, sample_rate, plan, options, device, batch_size, chunking, allow_upsampling, item_boost,
                     f"{cluster.cpus:g} CPU(s), {cluster.gpus:g} GPU(s)")
        return write_transcripts(items, failures, run.results, output_format, output, resume, source)


def _check_model(loader: ReplicaLoader) -> tuple[int, dict | None]:
    """Load the model on this machine's CPU, as a replica will; its sample rate and, for a model fetched by Hub
    name, what was fetched (written with each JSON line)."""
    model, _ = loader("cpu")
    return model.sample_rate, model_source(model)


@dataclass
class RayRun:
    """One run's dataset: the reading step, the actor pool, and the results as they come back."""

    loader: ReplicaLoader
    sample_rate: int
    plan: ReplicaPlan
    options: RayOptions
    device: str
    batch_size: int
    chunking: ChunkingConfig | None
    allow_upsampling: bool
    item_boost: BoostOptions | None
    cluster: str

    def results(self, todo: list[AudioItem],
                progress: tqdm) -> Iterator[tuple[int, AudioItem, Transcript | AudioError]]:
        """``(position, item, transcript or error)`` of every item of ``todo``, a window at a time as replicas
        finish them (in any order); see :data:`~transdec.transcribe_files.Results`."""
        ray = import_ray()
        size = window_size(self.options, self.batch_size)
        windows = make_windows(todo, size, self.item_boost is not None)
        progress.write(f"{COMMAND}: ray: {len(todo)} item(s) in {len(windows)} window(s) of up to {size}, "
                       f"{self.plan.describe()}, on a cluster of {self.cluster}", file=sys.stderr)
        if len(windows) < self.plan.replicas:
            progress.write(f"{COMMAND}: ray: {len(windows)} window(s) keep only {len(windows)} of the "
                           f"{self.plan.replicas} replicas busy; a smaller --ray-window spreads them",
                           file=sys.stderr)
        dataset = ray.data.from_items([{"window": pack(window)} for window in windows],
                                      override_num_blocks=len(windows))
        dataset = dataset.map_batches(read_windows, batch_size=1, num_cpus=self.plan.read_cpus,
                                      fn_kwargs={"sample_rate": self.sample_rate,
                                                 "allow_upsampling": self.allow_upsampling})
        # A fixed pool of replicas. One that dies (its process killed, its node lost) is restarted and its window
        # done again: Ray Data gives its actors max_restarts=-1 and max_task_retries=-1 unless told otherwise.
        dataset = dataset.map_batches(
            WindowTranscriber, batch_size=1, compute=ray.data.ActorPoolStrategy(size=self.plan.replicas),
            num_cpus=self.plan.num_cpus, num_gpus=self.plan.num_gpus or None,
            fn_constructor_kwargs={"loader": self.loader, "device": self.device, "threads": self.plan.threads,
                                   "batch_size": self.batch_size, "chunking": self.chunking,
                                   "boost": self.item_boost})
        meter = Throughput(len(todo))
        batches = iter(dataset.iter_batches(batch_size=None, batch_format="numpy"))
        try:
            for batch in batches:
                for cell in batch["results"]:
                    results: list[ItemResult] = unpack(cell)
                    meter.add(results)
                    progress.update(len(results))
                    progress.set_postfix_str(meter.rate(), refresh=False)
                    if progress.disable and meter.due():
                        progress.write(f"{COMMAND}: ray: {meter.report()}", file=sys.stderr)
                    for result in results:
                        item = todo[result.position]
                        if result.transcript is not None:
                            yield result.position, item, result.transcript
                        else:
                            yield result.position, item, AudioError(_named(result.error or "failed", item))
        finally:
            # Stop the dataset now if the run stops early (interrupted): its replicas and tasks let go of the
            # cluster at once, not when the garbage collector gets to them.
            close = getattr(batches, "close", None)
            if close is not None:
                close()
        progress.write(f"{COMMAND}: ray: {meter.report()}", file=sys.stderr)


def _named(message: str, item: AudioItem) -> str:
    """An error message about ``item`` naming its path as given, not as the workers read it (absolute)."""
    return message.replace(os.path.abspath(item.path), str(item.path))


@dataclass
class Throughput:
    """Items and seconds of audio done since the run started, and since its first results (the replicas up)."""

    total: int
    done: int = 0
    audio_seconds: float = 0.0
    start: float = field(default_factory=time.monotonic)
    reported: float = field(default_factory=time.monotonic)
    first: float | None = None  # when the first results came
    audio_at_first: float = 0.0

    def add(self, results: list[ItemResult]) -> None:
        if self.first is None:
            self.first = time.monotonic()
            self.audio_at_first = sum(result.seconds for result in results)
        self.done += len(results)
        self.audio_seconds += sum(result.seconds for result in results)

    def rate(self) -> str:
        return f"{self.audio_seconds / max(time.monotonic() - self.start, 1e-9):.1f} s of audio/s"

    def due(self) -> bool:
        """Whether a progress line is due (every :data:`REPORT_EVERY` seconds)."""
        now = time.monotonic()
        if now - self.reported < REPORT_EVERY:
            return False
        self.reported = now
        return True

    def report(self) -> str:
        now = time.monotonic()
        line = (f"{self.done}/{self.total} item(s), {self.audio_seconds:.1f} s of audio in {now - self.start:.1f} s: "
                f"{self.rate()}")
        if self.first is not None and now - self.first > 0.1 and self.audio_seconds > self.audio_at_first:
            line += (f"; first results after {self.first - self.start:.1f} s, "
                     f"{(self.audio_seconds - self.audio_at_first) / (now - self.first):.1f} s of audio/s since")
        return line
