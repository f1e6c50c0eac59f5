"""The server's counters, written in Prometheus' text exposition format (version 0.0.4) for ``GET /metrics``.

Written here rather than with prometheus_client: a dozen series need no dependency, and each server (each
:func:`~transdec.serve.create_app`) keeps its own, where prometheus_client's default registry is one per process.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import deque
from collections.abc import Sequence

#: Request latency buckets, seconds.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Batches kept for the recent mean batch time (what ``Retry-After`` is estimated from).
RECENT_BATCHES = 32


class Histogram:
    """Counts of observations at or below each bucket's bound, their sum and count (cumulative, as Prometheus
    reads them)."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.bounds = sorted(buckets)
        self.counts = [0] * len(self.bounds)
        self.sum, self.count = 0.0, 0

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self.bounds, value)
        if index < len(self.counts):
            self.counts[index] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        join = f"{labels}," if labels else ""
        lines, total = [], 0
        for bound, count in zip(self.bounds, self.counts):
            total += count
            lines.append(f'{name}_bucket{{{join}le="{_number(bound)}"}} {total}')
        lines.append(f'{name}_bucket{{{join}le="+Inf"}} {self.count}')
        suffix = f"{{{labels}}}" if labels else ""
        lines += [f"{name}_sum{suffix} {_number(self.sum)}", f"{name}_count{suffix} {self.count}"]
        return lines


def batch_buckets(max_batch: int) -> list[int]:
    """Every size up to 16, then powers of two, and ``max_batch``: the exact sizes where they are few."""
    sizes = set(range(1, min(max_batch, 16) + 1)) | {2 ** k for k in range(5, 16) if 2 ** k < max_batch}
    return sorted(sizes | {max_batch})


class Metrics:
    """What the server counts; every method may be called from any thread."""

    def __init__(self, model_name: str, max_batch: int) -> None:
        self.model_name = model_name
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, int, str], int] = {}  # (endpoint, status, key name) -> count
        self.latency = Histogram(LATENCY_BUCKETS)
        self.batch_size = Histogram(batch_buckets(max_batch))
        self.audio_seconds = 0.0  # decoded by the transcription endpoint
        self.decode_seconds = 0.0  # the model thread's time on those batches
        self.recent_batches: deque[float] = deque(maxlen=RECENT_BATCHES)
        self.queued = 0  # admitted requests not yet decoding
        self.streams_active = 0
        self.streams: dict[str, int] = {}  # outcome -> count
        self.stream_audio_seconds = 0.0
        self.stream_steps = 0
        self.stream_step_seconds = 0.0

    def request_done(self, endpoint: str, status: int, seconds: float, key: str | None = None) -> None:
        """One request answered with ``status`` after ``seconds``; ``key``: the name of its API key (None: the server
        has no keys, or the request came without a valid one)."""
        with self._lock:
            labels = (endpoint, status, key or "")
            self.requests[labels] = self.requests.get(labels, 0) + 1
            self.latency.observe(seconds)

    def batch_done(self, size: int, audio_seconds: float, seconds: float) -> None:
        with self._lock:
            self.batch_size.observe(size)
            self.audio_seconds += audio_seconds
            self.decode_seconds += seconds
            self.recent_batches.append(seconds)

    def stream_step(self, seconds: float) -> None:
        with self._lock:
            self.stream_steps += 1
            self.stream_step_seconds += seconds

    def stream_audio(self, seconds: float) -> None:
        with self._lock:
            self.stream_audio_seconds += seconds

    def stream_ended(self, outcome: str) -> None:
        with self._lock:
            self.streams[outcome] = self.streams.get(outcome, 0) + 1

    def mean_batch_seconds(self) -> float:
        with self._lock:
            return sum(self.recent_batches) / len(self.recent_batches) if self.recent_batches else 0.0

    def render(self) -> str:
        """Every series in the text format."""
        with self._lock:
            out: list[str] = []

            def series(name: str, kind: str, help: str, lines: list[str]) -> None:
                out.extend([f"# HELP {name} {help}", f"# TYPE {name} {kind}", *lines])

            series("transdec_info", "gauge", "The model served.",
                   [f'transdec_info{{model="{_label(self.model_name)}"}} 1'])
            series("transdec_requests_total", "counter", "HTTP transcription requests by endpoint, status (401: no "
                   "valid API key, 429: its key's limit, 499: the client went away first) and API key name.",
                   [f'transdec_requests_total{{endpoint="{e}",status="{s}"' + (f',key="{_label(k)}"' if k else "")
                    + f"}} {n}" for (e, s, k), n in sorted(self.requests.items())])
            series("transdec_request_seconds", "histogram", "Time from a request's arrival to its response.",
                   self.latency.lines("transdec_request_seconds"))
            series("transdec_batch_size", "histogram", "Requests decoded together in one batch.",
                   self.batch_size.lines("transdec_batch_size"))
            series("transdec_audio_seconds_total", "counter", "Seconds of audio transcribed, by endpoint.",
                   [f'transdec_audio_seconds_total{{endpoint="transcriptions"}} {_number(self.audio_seconds)}',
                    f'transdec_audio_seconds_total{{endpoint="stream"}} {_number(self.stream_audio_seconds)}'])
            series("transdec_decode_seconds_total", "counter", "Time the model thread spent on transcription batches "
                   "(encoder and decoder).", [f"transdec_decode_seconds_total {_number(self.decode_seconds)}"])
            rtfx = self.audio_seconds / self.decode_seconds if self.decode_seconds > 0 else 0.0
            series("transdec_rtfx", "gauge", "Real-time factor of the transcription batches so far: audio seconds per "
                   "second of decoding.", [f"transdec_rtfx {_number(rtfx)}"])
            series("transdec_queue_depth", "gauge", "Requests admitted and not yet decoding.",
                   [f"transdec_queue_depth {self.queued}"])
            series("transdec_streams_active", "gauge", "Open WebSocket streams.",
                   [f"transdec_streams_active {self.streams_active}"])
            series("transdec_streams_total", "counter", "WebSocket streams by how they ended.",
                   [f'transdec_streams_total{{outcome="{o}"}} {n}' for o, n in sorted(self.streams.items())])
            series("transdec_stream_steps_total", "counter", "Batched streaming decode steps.",
                   [f"transdec_stream_steps_total {self.stream_steps}"])
            series("transdec_stream_step_seconds_total", "counter", "Time the model thread spent on streaming steps.",
                   [f"transdec_stream_step_seconds_total {_number(self.stream_step_seconds)}"])
            return "\n".join(out) + "\n"


def _number(value: float) -> str:
    if isinstance(value, int) or (math.isfinite(value) and value == int(value)):
        return str(int(value))
    return repr(float(value))


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
