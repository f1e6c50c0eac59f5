"""Load test of ``transdec serve``: real HTTP clients in separate processes against a real server, dynamic batching
against ``--max-batch 1``, and one server against Ray Serve replicas (``--ray``), in one run.

    .venv/bin/python bench/serve.py --clients 1 8 32 64 --seconds 20
    .venv/bin/python bench/serve.py --clients 1 8 --seconds 5          # a quick check
    .venv/bin/python bench/serve.py --modes dynamic --ray 1 2 --clients 1 8 32 --seconds 10

For each mode (``dynamic``: ``--max-batch 16 --max-wait-ms 10``; ``single``: ``--max-batch 1``) a server is
started as ``transdec serve`` in a subprocess; for each client count ``C`` the clients, spread over
``--processes`` processes (threads inside each), each send the example recordings one after another (a closed
loop: the next request when the last one is answered) for ``--seconds``. Reported: requests answered, throughput
in audio seconds transcribed per second of wall time, p50 and p99 latency from sending a request to its answer,
the mean batch size the server's ``/metrics`` counted, the share of the wall time its model thread spent
decoding (``model busy``), and the requests that failed (503 included: the queue is
large enough here that none should). The clients share the machine with the server: on a small machine their CPU
time is part of what is measured.

``--ray N ...`` adds a mode per replica count: ``transdec serve --ray --replicas N`` (a local Ray cluster of this
machine's CPUs, each replica asking for an equal share of them, ``--ray-cpus-per-replica``, and running as many
PyTorch threads; ``--max-batch 16 --max-wait-ms 10`` in each replica), behind Ray Serve's HTTP proxy. Each replica
has its own ``/metrics``, reached through the proxy at random: they are read until every replica has answered
(``x-replica``), and the batches summed; ``model busy`` is the replicas' mean.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx
import soundfile

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.flac"))
MODES = {"dynamic": ["--max-batch", "16", "--max-wait-ms", "10"], "single": ["--max-batch", "1"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client_process(url: str, threads: int, seconds: float, offset: int) -> list[tuple[float, float, int]]:
    """``threads`` closed-loop clients for ``seconds``; ``(latency, audio seconds, status)`` per request."""
    files = [(path.name, path.read_bytes(), soundfile.info(path).duration) for path in EXAMPLES]
    results: list[tuple[float, float, int]] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(number: int) -> None:
        with httpx.Client(timeout=120) as http:
            position = number
            while time.monotonic() < stop:
                name, data, duration = files[position % len(files)]
                position += 1
                began = time.perf_counter()
                response = http.post(f"{url}/v1/audio/transcriptions", files={"file": (name, data)},
                                     data={"model": "x"})
                with lock:
                    results.append((time.perf_counter() - began, duration, response.status_code))

    workers = [threading.Thread(target=client, args=(offset + i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results


def batch_stats(url: str, replicas: int = 1) -> tuple[float, float, float]:
    """The server's batch count, the requests in them and the model thread's seconds on them, from /metrics; summed
    over ``replicas`` Ray Serve replicas, whose metrics the proxy hands out one at a time."""
    seen: dict[str, tuple[float, ...]] = {}
    for _ in range(50 * replicas):
        response = httpx.get(f"{url}/metrics")
        seen[response.headers.get("x-replica", "")] = tuple(
            float(re.search(rf"^{name} (\S+)$", response.text, re.M)[1]) for name in
            ("transdec_batch_size_count", "transdec_batch_size_sum", "transdec_decode_seconds_total"))
        if len(seen) == replicas:
            break
    else:
        raise RuntimeError(f"/metrics reached {len(seen)} of {replicas} replicas")
    return tuple(sum(values) for values in zip(*seen.values()))


def server_command(mode: str, args: argparse.Namespace, port: int) -> tuple[list[str], int]:
    """The ``transdec serve`` command of ``mode`` and its replicas (1 without Ray)."""
    command = [sys.executable, "-m", "transdec", "serve", "--model", args.model, "--port", str(port),
               "--max-queue", "1024"]
    if not mode.startswith("ray"):
        return command + MODES[mode], 1
    replicas = int(mode.removeprefix("ray x"))
    cpus = args.ray_cpus_per_replica or max(1, os.cpu_count() // replicas)
    return command + MODES["dynamic"] + ["--ray", "--replicas", str(replicas), "--ray-cpus-per-replica",
                                         f"{cpus:g}"], replicas


def run_mode(mode: str, args: argparse.Namespace) -> list[dict]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command, replicas = server_command(mode, args, port)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    log = tempfile.TemporaryFile("w+")  # read for `ray: serving`: all replicas up, not only the first
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    rows = []
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                log.seek(0)
                up = not mode.startswith("ray") or "ray: serving" in log.read()
                if up and httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"the {mode} server did not start:\n{log.read()[-2000:]}")
            time.sleep(0.2)
        client_process(url, 1, 0.5, 0)  # warm-up
        for clients in args.clients:
            processes = min(args.processes, clients)
            shares = [clients // processes + (i < clients % processes) for i in range(processes)]
            batches_before = batch_stats(url, replicas)
            began = time.perf_counter()
            with ProcessPoolExecutor(processes) as pool:
                futures = [pool.submit(client_process, url, share, args.seconds, sum(shares[:i]))
                           for i, share in enumerate(shares)]
                results = [result for future in futures for result in future.result()]
            wall = time.perf_counter() - began
            batches_after = batch_stats(url, replicas)
            ok = [(latency, audio) for latency, audio, status in results if status == 200]
            latencies = sorted(latency for latency, _ in ok)
            batches = batches_after[0] - batches_before[0]
            rows.append({
                "mode": mode, "clients": clients, "requests": len(ok), "failed": len(results) - len(ok),
                "throughput": sum(audio for _, audio in ok) / wall,
                "p50": 1000 * statistics.median(latencies) if latencies else float("nan"),
                "p99": (1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies
                        else float("nan")),
                "batch": (batches_after[1] - batches_before[1]) / batches if batches else float("nan"),
                "busy": (batches_after[2] - batches_before[2]) / wall / replicas})
            row = rows[-1]
            print(f"{mode:9s} {clients:4d} clients: {row['requests']:5d} requests, {row['throughput']:7.1f} audio s/s, "
                  f"p50 {row['p50']:7.1f} ms, p99 {row['p99']:7.1f} ms, mean batch {row['batch']:5.2f}, "
                  f"model busy {100 * row['busy']:3.0f}%, "
                  f"{row['failed']} failed", flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(120)
        log.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-en-rnnt")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--seconds", type=float, default=20.0, help="each client count's duration")
    parser.add_argument("--processes", type=int, default=4, help="client processes (the clients are their threads)")
    parser.add_argument("--modes", nargs="*", choices=list(MODES), default=list(MODES))
    parser.add_argument("--ray", type=int, nargs="+", default=[], metavar="REPLICAS",
                        help="a mode per count: transdec serve --ray --replicas N (dynamic batching in each)")
    parser.add_argument("--ray-cpus-per-replica", type=float, default=None,
                        help="CPUs (and threads) of each replica (default: this machine's CPUs over the replicas)")
    args = parser.parse_args()
    modes = [*args.modes, *(f"ray x{count}" for count in args.ray)]
    rows = [row for mode in modes for row in run_mode(mode, args)]
    print("\n| mode | clients | requests | throughput (audio s/s) | p50 ms | p99 ms | mean batch | model busy | failed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['mode']} | {row['clients']} | {row['requests']} | {row['throughput']:.1f} | {row['p50']:.0f} | "
              f"{row['p99']:.0f} | {row['batch']:.2f} | {100 * row['busy']:.0f}% | {row['failed']} |")


if __name__ == "__main__":
    main()
