"""Streaming recognition: word errors against whole-recording decoding at several latencies, and the compute per
chunk, batched over concurrent streams against one stream at a time, in one run.

    .venv/bin/python bench/streaming.py accuracy --manifest data/synth/test.jsonl --models tiny-en-rnnt
    .venv/bin/python bench/streaming.py speed --model tiny-en-rnnt --streams 1 4 16 32

``accuracy``: every utterance streamed whole (no endpoints) in buffered windows, chunk and right context half the
latency each (rounded to encoder frames), against greedy transcription of the whole recording; WER with no
normaliser (the manifests' references are normalised).

``speed``: ``S`` streams of the example recordings (repeated to ``--seconds``) are fed one chunk each per step;
a step is one ``Recognizer.decode()`` of all streams batched, or, for "one at a time", one ``decode()`` of each
stream's own recogniser in turn. The compute per chunk of audio is the step's time; a process keeps up with real time while a step
takes less than the chunk's duration, so the streams it sustains are ``S x chunk / p99 step``. "final" is the time
from the last piece of audio (``input_finished``) to the final result.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import transdec
from transdec.audio import load_audio
from transdec.evaluate import normalizer
from transdec.manifest import read_manifest
from transdec.metrics import word_error_rate
from transdec.streaming import BufferedOptions, Recognizer, StreamingOptions

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def stream_all(model, recordings: list[np.ndarray], options: StreamingOptions, piece: int) -> list[str]:
    """Each recording streamed whole (one segment), ``max_streams`` at a time; their texts."""
    texts = [""] * len(recordings)
    for first in range(0, len(recordings), options.max_streams):
        recognizer = Recognizer(model, options)
        group = list(range(first, min(first + options.max_streams, len(recordings))))
        streams = {i: recognizer.open() for i in group}
        fed = dict.fromkeys(group, 0)
        while not all(stream.done for stream in streams.values()):
            for i, stream in streams.items():
                if fed[i] < len(recordings[i]):
                    stream.accept_waveform(recordings[i][fed[i] : fed[i] + piece], model.sample_rate)
                    fed[i] += piece
                    if fed[i] >= len(recordings[i]):
                        stream.input_finished()
            while recognizer.decode():
                pass
        for i, stream in streams.items():
            texts[i] = stream.result().text
    return texts


def accuracy(args: argparse.Namespace) -> None:
    entries, errors = read_manifest(args.manifest, required=("text",), check_files=True)
    if errors:
        raise SystemExit(f"{args.manifest}: {len(errors)} bad entries, the first: {errors[0]}")
    entries = entries[:: args.every][: args.limit or None]
    normalise = normalizer("none")
    references = [normalise(entry.text) for entry in entries]
    print(f"{len(entries)} utterances of {args.manifest} (every {args.every}); WER %, greedy; latency = chunk + "
          f"right context, left context {args.left_context:g} s")
    print("| model | whole recording | " + " | ".join(f"{latency:g} s" for latency in args.latencies) + " |")
    print("|---|---|" + "---|" * len(args.latencies))
    for name in args.models:
        model = transdec.load_model(name)
        recordings = [load_audio(entry.audio_filepath, model.sample_rate) for entry in entries]
        whole = [normalise(result.text) for result in model.transcribe(recordings)]
        cells = [f"{100 * word_error_rate(references, whole):.2f}"]
        shift = model.frame_shift_seconds
        for latency in args.latencies:
            frames = max(2, round(latency / shift))
            chunk, right = (frames + 1) // 2 * shift, frames // 2 * shift
            options = StreamingOptions(max_streams=32, buffered=BufferedOptions(chunk, args.left_context, right),
                                       endpoint=None)
            streamed = [normalise(text) for text in stream_all(model, recordings, options, model.sample_rate // 10)]
            cells.append(f"{100 * word_error_rate(references, streamed):.2f} ({chunk:g} + {right:g} s)")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def speed(args: argparse.Namespace) -> None:
    model = transdec.load_model(args.model, device=args.device)
    rate = model.sample_rate
    pause = np.zeros(rate // 2, np.float32)
    clips = [np.concatenate([load_audio(path, rate), pause]) for path in sorted(EXAMPLES.glob("*.flac"))]
    chunk_seconds = args.chunk_ms / 1000
    options = BufferedOptions(chunk_seconds, args.left_context, chunk_seconds)
    print(f"{args.model} on {args.device}, buffered: chunk {args.chunk_ms:g} ms + right context {args.chunk_ms:g} ms, left "
          f"{args.left_context:g} s; {args.seconds:g} s per stream; torch threads: {torch.get_num_threads()}")
    print("| streams | decoding | step p50 ms | step p99 ms | RTFx | real-time streams sustained | final ms p50 |")
    print("|---|---|---|---|---|---|---|")
    for count in args.streams:
        recordings = [np.tile(clips[i % len(clips)], int(args.seconds * rate) // len(clips[i % len(clips)]) + 1)
                      [: int(args.seconds * rate)] for i in range(count)]
        rows = {}
        for mode in ("batched", "one at a time"):
            rows[mode] = run_speed(model, recordings, options, mode == "batched")
        for mode, (steps, finals, total) in rows.items():
            p50, p99 = np.percentile(steps, 50), np.percentile(steps, 99)
            audio = count * args.seconds
            sustained = count * chunk_seconds / p99
            print(f"| {count} | {mode} | {1000 * p50:.1f} | {1000 * p99:.1f} | {audio / total:.0f} | "
                  f"{sustained:.0f} | {1000 * statistics.median(finals):.1f} |", flush=True)


def run_speed(model, recordings: list[np.ndarray], options: BufferedOptions, batched: bool):
    """Per-step times (each step: one chunk of every stream), times to the final result, total seconds. Batched:
    one recogniser for all streams; else a recogniser of one stream each, stepped in turn."""
    streaming = StreamingOptions(max_streams=len(recordings) if batched else 1, buffered=options, endpoint=None)
    recognizers = [Recognizer(model, streaming) for _ in range(1 if batched else len(recordings))]
    streams = [recognizers[i % len(recognizers)].open() for i in range(len(recordings))]
    chunk = round(options.chunk_seconds * model.sample_rate)
    steps, finals = [], []
    fed = 0
    begin = time.perf_counter()
    while not all(stream.done for stream in streams):
        last = False
        for stream, samples in zip(streams, recordings):
            if fed < len(samples):
                stream.accept_waveform(samples[fed : fed + chunk], model.sample_rate)
                if fed + chunk >= len(samples):
                    stream.input_finished()
                    last = True
        fed += chunk
        start = time.perf_counter()
        for recognizer in recognizers:
            while recognizer.decode():
                pass
        if model.device.type == "cuda":
            torch.cuda.synchronize(model.device)
        (finals if last else steps).append(time.perf_counter() - start)
    return steps, finals, time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    a = commands.add_parser("accuracy")
    a.add_argument("--manifest", default="data/synth/test.jsonl")
    a.add_argument("--models", nargs="+", default=["tiny-en-rnnt", "tiny-en-tdt", "tiny-en-multiblank"])
    a.add_argument("--latencies", nargs="+", type=float, default=[0.5, 1.0, 2.0])
    a.add_argument("--left-context", type=float, default=2.0)
    a.add_argument("--every", type=int, default=1, help="every N-th utterance only")
    a.add_argument("--limit", type=int, default=0, help="only the first N (of those)")
    s = commands.add_parser("speed")
    s.add_argument("--model", default="tiny-en-rnnt")
    s.add_argument("--streams", nargs="+", type=int, default=[1, 4, 16, 32])
    s.add_argument("--chunk-ms", type=float, default=480)
    s.add_argument("--left-context", type=float, default=2.0)
    s.add_argument("--seconds", type=float, default=20.0)
    s.add_argument("--device", default="cpu")
    args = parser.parse_args()
    accuracy(args) if args.command == "accuracy" else speed(args)


if __name__ == "__main__":
    main()
