"""Cache-aware streaming, transdec against NVIDIA NeMo, on the same ``.nemo`` checkpoint and the same audio.

The driver runs in transdec's virtualenv and starts each side in its own process (NeMo's in NeMo's virtualenv,
which transdec never imports), in turn, ``--rounds`` times, the order alternating, so that the noise of a shared
machine shows; then it prints one markdown table::

    .venv/bin/python bench/nemo_streaming.py run --model /tmp/nemo_stream_full/fc_streaming_110m.nemo \\
        --nemo-python /work/nemo-venv/bin/python --streams 1 16 --contexts 70,6 --threads 1 --rounds 3

(the model: ``recipes/nemo_streaming_full.py``). ``--device cuda`` runs both sides on the GPU (each step's time
ends when the GPU has finished it; ``--nemo-python`` may then be the same interpreter, NeMo importable there).
``--precisions int8 bf16`` adds transdec sides with the model loaded with ``quantize="int8"`` and with
``compute_dtype=torch.bfloat16`` (their tokens are compared with NeMo's float32 ones like the others').
``--baseline-src DIR`` adds a side, transdec imported from another source tree (a copy from before a change), for
before/after rows in the same rounds. Each side alone: ``bench/nemo_streaming.py side --side nemo|transdec
--audio FILE.npy ...`` writes a JSON of its step times and tokens.

Audio: the recordings of ``examples/`` one after another, repeated; stream ``i`` starts ``i x 1.37 s`` into that
loop and is ``--seconds`` long (all streams equally long, so that they step in lockstep on both sides).

* NeMo: the loop of its cache-aware streaming example (``speech_to_text_cache_aware_streaming_infer.py``):
  every stream appended to one ``CacheAwareStreamingAudioBuffer`` (no online normalisation, no
  ``pad_and_drop_preencoded``), which computes each recording's features whole up front; then, per chunk of the
  buffer (all streams batched), ``conformer_stream_step`` with the caches and the ``greedy_batch`` hypotheses
  carried, ``max_symbols`` 10. A step is the buffer's next chunk and ``conformer_stream_step``; the features
  (``append_audio``) are outside the steps, timed apart, and counted in the throughput.
* transdec: a ``Recognizer`` (``StreamingOptions(max_streams=S, endpoint=None)``: its cache-aware streaming
  encoder, greedy search carried across chunks, ``max_symbols_per_frame`` 10); each stream is given one chunk's
  duration of samples, then ``decode()`` is called until no stream is ready (``input_finished`` after the last
  piece). A step is one ``decode()`` that stepped streams: its features (computed as audio arrives), encoder
  chunk and greedy search, all streams batched.

Per step time: p50 and p99 over the steps of a run (a 20 s run at ``[70, 6]``: 36 steps, so p99 is about the
slowest). Throughput: audio seconds of all streams / wall time of the whole run (features, steps, feeding).
Real-time streams: ``S x chunk seconds / p99 step`` (a process keeps up while a step takes less than the chunk).
Each round's numbers are per run; the table gives the best of the rounds and the range.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
SAMPLE_RATE = 16000
MAX_SYMBOLS = 10
OFFSET_SECONDS = 1.37
WARMUP_SECONDS = 3.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="both sides, interleaved, and the table")
    side = sub.add_parser("side", help="one side, to a JSON file")
    for p in (run, side):
        p.add_argument("--model", required=True)
        p.add_argument("--streams", type=int, nargs="+", default=[1, 16])
        p.add_argument("--contexts", nargs="+", default=["70,6"], help="look-aheads LEFT,RIGHT")
    run.add_argument("--nemo-python", default="/work/nemo-venv/bin/python")
    run.add_argument("--device", default="cpu", help="cpu or cuda, for both sides")
    run.add_argument("--threads", type=int, nargs="+", default=[1])
    run.add_argument("--rounds", type=int, default=3)
    run.add_argument("--seconds", type=float, default=20.0)
    run.add_argument("--json", default="", help="also write every round's numbers here")
    run.add_argument("--transdec-src", default=str(REPO / "src"),
                     help="the transdec source tree the transdec side imports")
    run.add_argument("--precisions", nargs="*", default=[], choices=("int8", "bf16"),
                     help="also transdec with an int8 or a bfloat16 encoder (rows 'transdec int8', 'transdec bf16')")
    run.add_argument("--baseline-src", default="",
                     help="also a transdec side importing this source tree (a copy from before a change): "
                          "its rows are 'transdec (baseline)'")
    side.add_argument("--side", choices=("nemo", "transdec"), required=True)
    side.add_argument("--audio", required=True, help=".npy [S, N] float32 at 16 kHz")
    side.add_argument("--threads", type=int, default=1)
    side.add_argument("--precision", choices=("fp32", "int8", "bf16"), default="fp32")
    side.add_argument("--device", default="cpu")
    side.add_argument("--out", required=True)
    return parser.parse_args()


# ------------------------------------------------------------------------------------------------------ audio

def stream_audio(streams: int, seconds: float) -> np.ndarray:
    """``[streams, seconds x 16000]`` float32: the example recordings looped, stream ``i`` from ``i x 1.37 s``."""
    import soundfile

    pieces = []
    for path in sorted((REPO / "examples").glob("*.flac")):
        data, rate = soundfile.read(path, dtype="float32")
        if rate != SAMPLE_RATE:
            raise ValueError(f"{path} is at {rate} Hz")
        pieces.append(data if data.ndim == 1 else data.mean(axis=1))
    loop = np.concatenate(pieces)
    length = round(seconds * SAMPLE_RATE)
    rows = []
    for i in range(streams):
        start = round(i * OFFSET_SECONDS * SAMPLE_RATE) % len(loop)
        tiled = np.tile(loop, (start + length) // len(loop) + 2)
        rows.append(tiled[start : start + length])
    return np.stack(rows).astype(np.float32)


# ------------------------------------------------------------------------------------------------------ sides

def finished(device: str) -> float:
    """``time.perf_counter()`` once ``device`` has done the work queued on it."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    return time.perf_counter()


def nemo_side(model_path: str, audio: np.ndarray, contexts: list[list[int]], streams: list[int],
              device: str = "cpu") -> dict:
    import copy

    from nemo.utils import logging as nemo_logging

    nemo_logging.setLevel(nemo_logging.ERROR)
    from omegaconf import open_dict

    import nemo.collections.asr as nemo_asr
    from nemo.collections.asr.parts.utils.streaming_utils import CacheAwareStreamingAudioBuffer

    model = nemo_asr.models.ASRModel.restore_from(model_path, map_location=device).eval()
    decoding = copy.deepcopy(model.cfg.decoding)
    with open_dict(decoding):
        decoding.strategy = "greedy_batch"
        decoding.greedy.max_symbols = MAX_SYMBOLS
    model.change_decoding_strategy(decoding, verbose=False)
    encoder = model.encoder

    def one_run(batch: np.ndarray) -> dict:
        begin = time.perf_counter()
        buffer = CacheAwareStreamingAudioBuffer(model, online_normalization=False, pad_and_drop_preencoded=False)
        for row in batch:
            buffer.append_audio(row)
        features = finished(device) - begin
        cfg = encoder.streaming_cfg
        caches = encoder.get_initial_cache_state(batch_size=batch.shape[0])
        hypotheses, previous, steps = None, None, []
        chunks = iter(buffer)
        step = 0
        while True:
            started = finished(device)
            try:
                chunk, chunk_len = next(chunks)
            except StopIteration:
                break
            (previous, _, *caches, hypotheses) = model.conformer_stream_step(
                processed_signal=chunk, processed_signal_length=chunk_len, cache_last_channel=caches[0],
                cache_last_time=caches[1], cache_last_channel_len=caches[2],
                keep_all_outputs=buffer.is_buffer_empty(), previous_hypotheses=hypotheses,
                previous_pred_out=previous, drop_extra_pre_encoded=0 if step == 0 else cfg.drop_extra_pre_encoded,
                return_transcription=True)
            steps.append(finished(device) - started)
            step += 1
        total = finished(device) - begin
        return {"steps": steps, "total": total, "features": features,
                "tokens": [[int(t) for t in h.y_sequence] for h in hypotheses]}

    results = {}
    with torch.inference_mode():
        for context in contexts:
            encoder.set_default_att_context_size(context)
            for s in streams:
                one_run(audio[:s, : round(WARMUP_SECONDS * SAMPLE_RATE)])  # warm-up
                results[f"{context[0]},{context[1]}/{s}"] = one_run(audio[:s])
    return results


#: load_model's options for each ``--precision``.
PRECISIONS = {"fp32": {}, "int8": {"quantize": "int8"}, "bf16": {"compute_dtype": torch.bfloat16}}


def transdec_side(model_path: str, audio: np.ndarray, contexts: list[list[int]], streams: list[int],
                  precision: str = "fp32", device: str = "cpu") -> dict:
    import transdec
    from transdec.decoding import GreedyOptions
    from transdec.streaming import Recognizer, StreamingOptions

    results = {}
    for context in contexts:
        model = transdec.load_model(model_path, device=device, att_context_size=context, **PRECISIONS[precision])
        piece = (context[1] + 1) * round(model.frame_shift_seconds * SAMPLE_RATE)

        def one_run(batch: np.ndarray) -> dict:
            options = StreamingOptions(max_streams=batch.shape[0], endpoint=None,
                                       decoding=GreedyOptions(max_symbols_per_frame=MAX_SYMBOLS))
            begin = time.perf_counter()
            recognizer = Recognizer(model, options)
            opened = [recognizer.open() for _ in batch]
            steps, fed = [], 0
            while not all(stream.done for stream in opened):
                if fed < batch.shape[1]:
                    for stream, row in zip(opened, batch):
                        stream.accept_waveform(row[fed : fed + piece], SAMPLE_RATE)
                    fed += piece
                    if fed >= batch.shape[1]:
                        for stream in opened:
                            stream.input_finished()
                while True:
                    started = finished(device)
                    stepped = recognizer.decode()
                    if not stepped:
                        break
                    steps.append(finished(device) - started)
            total = finished(device) - begin
            return {"steps": steps, "total": total, "features": 0.0,
                    "tokens": [list(stream.result().tokens) for stream in opened]}

        for s in streams:
            one_run(audio[:s, : round(WARMUP_SECONDS * SAMPLE_RATE)])  # warm-up
            results[f"{context[0]},{context[1]}/{s}"] = one_run(audio[:s])
    return results


def side(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    audio = np.load(args.audio)
    contexts = [[int(c) for c in context.split(",")] for context in args.contexts]
    if args.side == "nemo":
        results = nemo_side(args.model, audio, contexts, args.streams, args.device)
    else:
        results = transdec_side(args.model, audio, contexts, args.streams, args.precision, args.device)
    Path(args.out).write_text(json.dumps({"side": args.side, "threads": args.threads, "torch": torch.__version__,
                                          "device": args.device,
                                          "results": results}))


# ----------------------------------------------------------------------------------------------------- driver

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarise(run: dict, streams: int, seconds: float, chunk_seconds: float) -> dict:
    steps = [t * 1000 for t in run["steps"]]
    p99 = percentile(steps, 0.99)
    return {"p50": statistics.median(steps), "p99": p99, "throughput": streams * seconds / run["total"],
            "realtime": streams * chunk_seconds / (p99 / 1000), "steps": len(steps), "features": run["features"]}


def spread(values: list[float], higher_better: bool) -> str:
    best = max(values) if higher_better else min(values)
    return f"{best:.1f} ({min(values):.1f}-{max(values):.1f})" if len(values) > 1 else f"{best:.1f}"


def driver(args: argparse.Namespace) -> None:
    precisions = {f"transdec {p}": p for p in args.precisions}
    python = {"nemo": args.nemo_python, "transdec": sys.executable, "baseline": sys.executable,
              **{name: sys.executable for name in precisions}}
    source = {"nemo": args.transdec_src, "transdec": args.transdec_src, "baseline": args.baseline_src,
              **{name: args.transdec_src for name in precisions}}
    sides = ("nemo", "transdec", *precisions, *(("baseline",) if args.baseline_src else ()))
    rounds: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        audio_path = Path(tmp) / "audio.npy"
        np.save(audio_path, stream_audio(max(args.streams), args.seconds))
        for threads in args.threads:
            for number in range(args.rounds):
                order = sides if number % 2 == 0 else sides[::-1]
                for name in order:
                    out = Path(tmp) / f"{name.replace(' ', '-')}.json"
                    # what PYTHONPATH held (NeMo's packages, where they are installed apart) after the source
                    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                               PYTHONPATH=os.pathsep.join(filter(None, (source[name],
                                                                        os.environ.get("PYTHONPATH")))))
                    command = [python[name], str(Path(__file__).resolve()), "side", "--side",
                               "nemo" if name == "nemo" else "transdec", "--model",
                               args.model, "--audio", str(audio_path), "--threads", str(threads), "--out", str(out),
                               "--streams", *map(str, args.streams), "--contexts", *args.contexts,
                               "--precision", precisions.get(name, "fp32"), "--device", args.device]
                    started = time.perf_counter()
                    subprocess.run(command, env=env, check=True, cwd=REPO)
                    data = json.loads(out.read_text())
                    data.update(round=number, side=name)
                    rounds.append(data)
                    print(f"threads {threads} round {number + 1} {name}: {time.perf_counter() - started:.0f} s",
                          file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rounds))
    table(rounds, args)


def table(rounds: list[dict], args: argparse.Namespace) -> None:
    print("| torch threads | look-ahead | streams | side | step p50 ms | step p99 ms | throughput (audio s/s) "
          "| real-time streams | throughput transdec/NeMo | real-time streams transdec/NeMo | tokens equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for threads in args.threads:
        for context in args.contexts:
            left, right = (int(c) for c in context.split(","))
            chunk_seconds = (right + 1) * 0.08
            for s in args.streams:
                key = f"{left},{right}/{s}"
                names = [n for n in ("nemo", "transdec", "transdec int8", "transdec bf16", "baseline")
                         if any(r["side"] == n for r in rounds)]
                per_side = {name: [summarise(r["results"][key], s, args.seconds, chunk_seconds) for r in rounds
                                   if r["side"] == name and r["threads"] == threads] for name in names}
                tokens = {name: [r["results"][key]["tokens"] for r in rounds
                                 if r["side"] == name and r["threads"] == threads] for name in names}
                best = {name: max(v["throughput"] for v in values) for name, values in per_side.items()}
                best_realtime = {name: max(v["realtime"] for v in values) for name, values in per_side.items()}
                for name in names:
                    values = per_side[name]
                    ratio = realtime_ratio = equal = ""
                    if name != "nemo":
                        ratio = f"{best[name] / best['nemo']:.2f}x"
                        realtime_ratio = f"{best_realtime[name] / best_realtime['nemo']:.2f}x"
                        same = sum(a == b for a, b in zip(tokens["nemo"][0], tokens[name][0]))
                        stable = all(t == tokens["nemo"][0] for t in tokens["nemo"]) and all(
                            t == tokens[name][0] for t in tokens[name])
                        equal = f"{same}/{s}" + ("" if stable else " (varies between rounds)")
                    label = {"nemo": "NeMo", "baseline": "transdec (baseline)"}.get(name, name)
                    print(f"| {threads} | [{left}, {right}] | {s} | {label} "
                          f"| {spread([v['p50'] for v in values], False)} | {spread([v['p99'] for v in values], False)} "
                          f"| {spread([v['throughput'] for v in values], True)} "
                          f"| {spread([v['realtime'] for v in values], True)} | {ratio} | {realtime_ratio} "
                          f"| {equal} |")
    features = [summarise(r["results"][k], 1, args.seconds, 1.0)["features"] for r in rounds if r["side"] == "nemo"
                for k in r["results"]]
    print(f"\nNeMo's whole-recording features (CacheAwareStreamingAudioBuffer.append_audio, outside its steps, in its "
          f"throughput): {min(features):.2f}-{max(features):.2f} s per run.")
    steps = {r["side"]: {k: len(v["steps"]) for k, v in r["results"].items()} for r in rounds}
    tokens = {r["side"]: {k: sum(map(len, v["tokens"])) for k, v in r["results"].items()} for r in rounds}
    print(f"Steps per run: {json.dumps(steps)}; tokens per run (all streams): {json.dumps(tokens)}")


def main() -> int:
    args = parse_args()
    if args.command == "side":
        side(args)
    else:
        driver(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
