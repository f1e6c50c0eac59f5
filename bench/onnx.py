"""transdec and sherpa-onnx side by side on the same model and audio, on the CPU with one thread each.

The model is exported once (``transdec.export.onnx``); then, in one run and in alternation:

* transdec, PyTorch, greedy label-looping (B=1 and batched) and one utterance at a time with a WIND window of 8
  (``greedy_wind``, the batch-1 path): whole pipeline (its own features) and decoder only;
* transdec over ONNX Runtime (``transdec.load_model(export_dir)``): the same;
* sherpa-onnx greedy search one stream at a time and all streams in one ``decode_streams`` call, and modified
  beam search (``--beam``), whole pipeline (its features are computed inside ``decode``);
* transdec ALSD++ beam search at the same beam, batched.

Every row runs once untimed, then ``--repeats`` rounds time each row once in turn. RTFx is audio seconds / wall
seconds (the median over rounds), and each row's ratio is to sherpa-onnx greedy one
stream at a time. Agreement: sherpa-onnx's features are recomputed with kaldi-native-fbank and decoded by transdec
(tests/onnx_helpers.py); the number of identical transcripts is printed.

    python bench/onnx.py                               # tiny-en-rnnt, 40 held-out files of data/synth/test.jsonl
    python bench/onnx.py --model tiny-en-tdt --files 40 --batch-size 16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
# This file is named onnx.py: with its folder first on the path, `import onnx` would import it instead of the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT / "tests"))

import transdec  # noqa: E402
from transdec.export.onnx import export_onnx  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-en-rnnt")
    parser.add_argument("--manifest", default=str(ROOT / "data/synth/test.jsonl"),
                        help="JSONL with audio_filepath (relative to the manifest); the examples/ if missing")
    parser.add_argument("--files", type=int, default=40, help="half from the start, half from the middle")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    return parser.parse_args()


def load_audio(args: argparse.Namespace) -> tuple[list[np.ndarray], list[str] | None]:
    import soundfile as sf
    import soxr

    manifest = Path(args.manifest)
    if manifest.is_file():
        rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
        half = args.files // 2
        rows = rows[:half] + rows[len(rows) // 2: len(rows) // 2 + args.files - half]
        paths = [manifest.parent / r["audio_filepath"] for r in rows]
        texts = [r.get("text", "") for r in rows]
    else:
        paths, texts = sorted((ROOT / "examples").glob("*.flac")), None
    audio = []
    for path in paths:
        samples, rate = sf.read(path, dtype="float32")
        if rate != 16000:
            samples = soxr.resample(samples, rate, 16000).astype(np.float32)
        audio.append(samples)
    return audio, texts


def timed_in_turn(jobs: list[tuple[str, Callable[[], object]]], repeats: int) -> list[tuple[str, float]]:
    """``(name, median seconds)`` of each job, run once untimed (allocations, ONNX Runtime's first-run set-up),
    then ``repeats`` rounds in which every job runs once in turn: slow phases of a shared machine then fall on
    every row alike."""
    for _, job in jobs:
        job()
    times: list[list[float]] = [[] for _ in jobs]
    for _ in range(repeats):
        for number, (_, job) in enumerate(jobs):
            start = time.perf_counter()
            job()
            times[number].append(time.perf_counter() - start)
    return [(name, statistics.median(t)) for (name, _), t in zip(jobs, times)]


def encode_all(model, audio: list[np.ndarray], batch_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Encoder outputs per batch, for the decoder-only timings."""
    batches = []
    with torch.inference_mode():
        for start in range(0, len(audio), batch_size):
            chunk = [torch.from_numpy(a) for a in audio[start:start + batch_size]]
            waves = torch.nn.utils.rnn.pad_sequence(chunk, batch_first=True)
            batches.append(model.encode(waves, torch.tensor([len(a) for a in chunk])))
    return batches


def decode_all(model, batches, config) -> list[list[int]]:
    tokens = []
    with torch.inference_mode():
        for encoded, lengths in batches:
            tokens += [h.tokens for h in transdec.decode(model, encoded, lengths, config).hypotheses()]
    return tokens


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    import sherpa_onnx
    from onnx_helpers import sherpa_nemo_features

    audio, references = load_audio(args)
    seconds = sum(len(a) for a in audio) / 16000
    model = transdec.load_model(args.model)
    export_dir = Path(tempfile.mkdtemp(prefix="transdec-onnx-"))
    export_onnx(model, export_dir)
    onnx_model = transdec.load_model(export_dir)
    from transdec.adapters.onnx import load_onnx

    sherpa_fe_model = load_onnx(export_dir, front_end="sherpa")  # sherpa-onnx's features, computed by transdec
    layout = onnx_model.config.layout
    model_type = "nemo_transducer" if layout == "nemo" else "transducer"

    def recognizer(method: str):
        return sherpa_onnx.OfflineRecognizer.from_transducer(
            str(export_dir / "encoder.onnx"), str(export_dir / "decoder.onnx"), str(export_dir / "joiner.onnx"),
            str(export_dir / "tokens.txt"), num_threads=1, decoding_method=method, model_type=model_type,
            max_active_paths=args.beam)

    greedy_rec, beam_rec = recognizer("greedy_search"), recognizer("modified_beam_search")

    def sherpa_one_at_a_time(rec):
        texts = []
        for samples in audio:
            stream = rec.create_stream()
            stream.accept_waveform(16000, samples)
            rec.decode_stream(stream)
            texts.append(stream.result.text)
        return texts

    def sherpa_all(rec):
        streams = []
        for samples in audio:
            stream = rec.create_stream()
            stream.accept_waveform(16000, samples)
            streams.append(stream)
        rec.decode_streams(streams)
        return [s.result.text for s in streams]

    greedy = transdec.DecodingConfig("greedy_label")
    wind = transdec.DecodingConfig("greedy_wind", window_size=8)  # the batch-1 path (WIND paper, Algorithm 2)
    # sherpa-onnx's greedy searches emit at most 10 symbols per frame (NeMo RNN-T), 5 (NeMo TDT), 1 (icefall).
    sherpa_max_symbols = 1 if layout == "icefall" else 5 if model.head.kind == "tdt" else 10
    beam = transdec.DecodingConfig("beam_alsd_pp", beam_size=args.beam)
    jobs: list[tuple[str, Callable[[], object]]] = [
        ("sherpa-onnx greedy, one stream at a time", lambda: sherpa_one_at_a_time(greedy_rec)),
        ("sherpa-onnx greedy, decode_streams (all)", lambda: sherpa_all(greedy_rec)),
        (f"sherpa-onnx modified beam {args.beam}, one stream at a time", lambda: sherpa_one_at_a_time(beam_rec)),
    ]
    for name, m in (("transdec PyTorch", model), ("transdec over ONNX Runtime", onnx_model)):
        jobs.append((f"{name} greedy_wind window 8, B=1", partial(m.transcribe, audio, wind, batch_size=1)))
        for batch in (1, args.batch_size):
            jobs.append((f"{name} greedy_label, B={batch}", partial(m.transcribe, audio, greedy, batch_size=batch)))
        jobs.append((f"{name} beam_alsd_pp {args.beam}, B={args.batch_size}",
                     partial(m.transcribe, audio, beam, batch_size=args.batch_size)))
    sherpa_greedy = transdec.DecodingConfig("greedy_label", max_symbols_per_frame=sherpa_max_symbols)
    for batch in (1, args.batch_size):
        jobs.append((f"transdec over ONNX Runtime, sherpa-onnx's features, greedy_label, B={batch}",
                     partial(sherpa_fe_model.transcribe, audio, sherpa_greedy, batch_size=batch)))
    decoder_jobs = []
    for name, m in (("transdec PyTorch", model), ("transdec over ONNX Runtime", onnx_model)):
        batches = {batch: encode_all(m, audio, batch) for batch in (1, args.batch_size)}
        decoder_jobs.append((f"{name} greedy_wind window 8 decoder only, B=1",
                             partial(decode_all, m, batches[1], wind)))
        for batch in (1, args.batch_size):
            decoder_jobs.append((f"{name} greedy_label decoder only, B={batch}",
                                 partial(decode_all, m, batches[batch], greedy)))
    times = timed_in_turn(jobs + decoder_jobs, args.repeats)
    rows, decoder_rows = times[: len(jobs)], times[len(jobs) :]

    # Agreement at the same features: sherpa-onnx's own, recomputed, decoded by transdec.
    same = 0
    sherpa_texts = sherpa_one_at_a_time(greedy_rec)
    if layout == "nemo":
        max_symbols = 5 if model.head.kind == "tdt" else 10
        for samples, text in zip(audio, sherpa_texts):
            features = sherpa_nemo_features(samples).unsqueeze(0)
            with torch.inference_mode():
                encoded, lengths = model.encode_features(features, torch.tensor([features.shape[1]]))
            result = transdec.decode(model, encoded, lengths, transdec.DecodingConfig(max_symbols_per_frame=max_symbols))
            same += model.tokenizer.decode(result.hypotheses()[0].tokens).strip() == text.strip()
    same_pipeline = [t.text for t in sherpa_fe_model.transcribe(audio, sherpa_greedy, batch_size=args.batch_size)]
    own = [t.text for t in model.transcribe(audio, greedy, batch_size=args.batch_size)]
    via_onnx = [t.text for t in onnx_model.transcribe(audio, greedy, batch_size=args.batch_size)]

    reference = rows[0][1]
    print(f"model {args.model} ({layout} layout), {len(audio)} files, {seconds:.1f} s of audio, CPU, 1 thread, "
          f"median of {args.repeats}; torch {torch.__version__}, sherpa-onnx {sherpa_onnx.__version__}\n")
    print("| whole pipeline | seconds | RTFx | vs sherpa-onnx greedy one at a time |")
    print("|---|---:|---:|---:|")
    for name, t in rows:
        print(f"| {name} | {t:.3f} | {seconds / t:.0f} | {reference / t:.2f}x |")
    print("\n| decoder only | seconds | RTFx |")
    print("|---|---:|---:|")
    for name, t in decoder_rows:
        print(f"| {name} | {t:.3f} | {seconds / t:.0f} |")
    print(f"\nsame features (sherpa-onnx's): {same}/{len(audio)} transcripts identical between sherpa-onnx and transdec")
    print(f"whole pipeline, transdec over ONNX Runtime with front_end='sherpa' vs sherpa-onnx greedy: "
          f"{sum(a.strip() == b.strip() for a, b in zip(same_pipeline, sherpa_texts))}/{len(audio)} identical")
    print(f"transdec over ONNX Runtime vs PyTorch (transdec's features): "
          f"{sum(a == b for a, b in zip(own, via_onnx))}/{len(audio)} identical")
    if references:
        import jiwer

        beam_texts = sherpa_one_at_a_time(beam_rec)
        print(f"WER: transdec greedy (its Kaldi features) {100 * jiwer.wer(references, own):.2f}%, "
              f"sherpa-onnx greedy (its NeMo-style features) {100 * jiwer.wer(references, sherpa_texts):.2f}%, "
              f"sherpa-onnx modified beam {args.beam} {100 * jiwer.wer(references, beam_texts):.2f}%; "
              f"transcripts identical across front ends: {sum(a == b for a, b in zip(own, sherpa_texts))}/{len(audio)}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
