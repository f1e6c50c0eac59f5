"""NeMo checkpoints in transdec: the full-size check and the side-by-side timing against NeMo.

Three commands, on the random-weight parakeet-shaped models that ``recipes/nemo_fixtures.py --full-size DIR`` builds
(``DIR/NAME.nemo`` and NeMo's outputs on one clip, ``DIR/NAME.outputs.pt``)::

    # in transdec's virtualenv (no NeMo): load time, peak memory, encoder output and tokens against NeMo's
    .venv/bin/python bench/nemo_checkpoints.py check DIR

    # encoder time and peak memory on one long recording: full or sliding-window attention, whole or in windows
    # (one process each)
    .venv/bin/python bench/nemo_checkpoints.py long DIR/NAME.nemo --seconds 600 [--local-attention 128,128]
    .venv/bin/python bench/nemo_checkpoints.py long DIR/NAME.nemo --seconds 3600 --windows 30

    # in NeMo's virtualenv (transdec from src/): NeMo and transdec on the same weights and inputs, CPU, one thread
    OMP_NUM_THREADS=1 /work/nemo-venv/bin/python bench/nemo_checkpoints.py speed DIR/NAME.nemo

``speed`` times, in one run: the front end and encoder (NeMo's ``preprocessor`` + ``encoder`` against transdec's
``encode``) and the greedy decoder (NeMo's batched label-looping ``greedy_batch`` against transdec's
``greedy_label``) on the same encoder output, at several batch sizes, and checks that the tokens are identical.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

# This file is named nemo.py: its own folder must not be on the path, or "import nemo" would find it.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import transdec  # noqa: E402
from transdec.decoding import DecodingConfig  # noqa: E402
from transdec.padding import pad_batch  # noqa: E402

MAX_SYMBOLS = 10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="load and compare each DIR/*.nemo (no NeMo needed)")
    check.add_argument("directory")
    long = commands.add_parser("long", help="encoder time and peak memory on one long recording (no NeMo needed)")
    long.add_argument("model")
    long.add_argument("--seconds", type=float, default=600.0)
    long.add_argument("--local-attention", default="", metavar="LEFT,RIGHT",
                      help="switch to sliding-window attention first (e.g. 128,128)")
    long.add_argument("--windows", default="", metavar="CHUNK[,CONTEXT]",
                      help="encode in windows of CHUNK seconds with CONTEXT seconds each side (transdec.long_audio; "
                           "CONTEXT defaults to the encoder's receptive field, or 5 s for full attention)")
    long.add_argument("--threads", type=int, default=1)
    windows = commands.add_parser("windows", help="tokens of long recordings in windows against whole, per .nemo in DIR")
    windows.add_argument("directory")
    windows.add_argument("--seconds", type=float, default=120.0)
    windows.add_argument("--chunks", default="30,10", help="comma-separated window chunk seconds")
    speed = commands.add_parser("speed", help="NeMo against transdec on one .nemo (needs NeMo)")
    speed.add_argument("model")
    speed.add_argument("--batch-sizes", default="1,4")
    speed.add_argument("--utterances", type=int, default=8, help="utterances to decode (built from examples/)")
    speed.add_argument("--repeats", type=int, default=3, help="decoder timings per batch size (the median is kept)")
    return parser.parse_args()


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def check(directory: Path) -> int:
    """Each full-size model: load time and peak memory, then encoder output and tokens against NeMo's on its clip."""
    torch.set_num_threads(1)
    failures = 0
    for path in sorted(directory.glob("*.nemo")):
        expected = torch.load(path.with_suffix(".outputs.pt"), weights_only=True)
        before = peak_rss_gb()
        started = time.perf_counter()
        model = transdec.load_model(str(path))
        load_seconds = time.perf_counter() - started
        load_peak = peak_rss_gb()
        row = {"model": path.stem, "parameters_m": round(model.num_parameters() / 1e6, 1),
               "file_gb": round(path.stat().st_size / 1e9, 2), "load_s": round(load_seconds, 2),
               "peak_rss_gb": round(load_peak, 2), "rss_before_gb": round(before, 2)}
        with torch.inference_mode():
            for i, samples in enumerate(expected["samples"]):
                audio = samples.float()[None] / 32768.0
                started = time.perf_counter()
                encoded, lengths = model.encode(audio, torch.tensor([audio.shape[1]]))
                row["encode_s"] = round(time.perf_counter() - started, 2)
                reference = expected["encoder"][i]
                row["encoder_max_abs_diff"] = float((encoded[0, : reference.shape[0]] - reference).abs().max())
                row["encoder_max_abs"] = float(reference.abs().max())
                hyp = transdec.decode(model, encoded, lengths,
                                      DecodingConfig(max_symbols_per_frame=expected["max_symbols"])).hypotheses()[0]
                row["tokens"] = len(hyp.tokens)
                row["tokens_identical"] = list(hyp.tokens) == expected["tokens"][i]
                row["timestamps_identical"] = list(hyp.timestamps) == expected["timestamps"][i]
                if expected["head"] == "tdt":
                    row["durations_identical"] = list(hyp.durations) == expected["durations"][i]
        failures += not (row["tokens_identical"] and row["encoder_max_abs_diff"] < 1e-3)
        print(json.dumps(row), flush=True)
        del model
    return 1 if failures else 0


def long_recording(path: Path, seconds: float, local_attention: str, windows: str, threads: int) -> int:
    """One recording of ``seconds`` (the example recordings repeated) through the encoder, whole or in windows:
    time and peak memory. Run each setting in its own process: the peak is the process's."""
    from transdec.long_audio import ChunkingConfig, encode_long

    torch.set_num_threads(threads)
    model = transdec.load_model(str(path))
    loaded = peak_rss_gb()
    if local_attention:
        model.use_local_attention(*(int(v) for v in local_attention.split(",")))
    audio = torch.cat(utterances(1, whole=True))
    audio = audio.repeat(int(seconds * 16000 // len(audio)) + 1)[: int(seconds * 16000)]
    started = time.perf_counter()
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the windowing note
        if windows:
            chunk, *context = (float(v) for v in windows.split(","))
            _, lengths = encode_long(model, audio, ChunkingConfig(chunk, context[0] if context else None))
        else:
            _, lengths = model.encode(audio[None], torch.tensor([len(audio)]))
    print(json.dumps({"model": path.stem, "seconds": seconds, "attention": local_attention or "full",
                      "windows": windows or "none", "threads": threads,
                      "frames": int(lengths), "encode_s": round(time.perf_counter() - started, 1),
                      "rss_after_load_gb": round(loaded, 2), "peak_rss_gb": round(peak_rss_gb(), 2)}))
    return 0


def windowed_against_whole(directory: Path, seconds: float, chunks: list[float]) -> int:
    """For each model in ``directory``: one recording of ``seconds`` (the example recordings repeated) decoded
    greedily from its whole encoding and from windows of each chunk size (default context); the token error rate
    of the windowed tokens against the whole ones (edit distance over token ids / whole tokens)."""
    import jiwer

    from transdec.long_audio import ChunkingConfig, encode_long

    audio = torch.cat(utterances(1, whole=True))
    audio = audio.repeat(int(seconds * 16000 // len(audio)) + 1)[: int(seconds * 16000)]
    for path in sorted(directory.glob("*.nemo")):
        model = transdec.load_model(str(path))
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            encoded, lengths = model.encode(audio[None], torch.tensor([len(audio)]))
            whole = transdec.decode(model, encoded, lengths).hypotheses()[0].tokens
            row = {"model": path.stem, "seconds": seconds, "receptive_field": model.encoder.receptive_field,
                   "whole_tokens": len(whole)}
            for chunk in chunks:
                encoded, lengths = encode_long(model, audio, ChunkingConfig(chunk))
                tokens = transdec.decode(model, encoded, lengths).hypotheses()[0].tokens
                rate = jiwer.wer(" ".join(map(str, whole)), " ".join(map(str, tokens))) if whole else float(bool(tokens))
                row[f"token_error_rate_{chunk:g}s"] = round(rate, 4)
        print(json.dumps(row), flush=True)
    return 0


def utterances(count: int, whole: bool = False) -> list[torch.Tensor]:
    """``count`` utterances of 4-12 s: the bundled example recordings joined and cut at different points."""
    import soundfile as sf

    examples = Path(__file__).resolve().parents[1] / "examples"
    audio = torch.cat([torch.from_numpy(sf.read(p, dtype="float32")[0]) for p in sorted(examples.glob("*.flac"))])
    if whole:  # the recordings joined, once
        return [audio]
    audio = torch.cat([audio, audio, audio])
    generator = torch.Generator().manual_seed(0)
    out = []
    for _ in range(count):
        seconds = 4 + 8 * torch.rand(1, generator=generator).item()
        start = int(torch.randint(0, len(audio) - int(12 * 16000), (1,), generator=generator))
        out.append(audio[start : start + int(seconds * 16000)].clone())
    return out


def speed(path: Path, batch_sizes: list[int], count: int, repeats: int) -> int:
    """NeMo against transdec on the same weights and inputs (CPU, one thread), with identical tokens checked."""
    from omegaconf import open_dict
    import nemo.collections.asr as nemo_asr
    from nemo.utils import logging as nemo_logging

    nemo_logging.setLevel(nemo_logging.ERROR)
    torch.set_num_threads(1)
    nemo_model = nemo_asr.models.ASRModel.restore_from(str(path), map_location="cpu").eval()
    model = transdec.load_model(str(path))
    head = model.head.kind
    decoding = copy.deepcopy(nemo_model.cfg.decoding)
    with open_dict(decoding):
        decoding.strategy = "greedy_batch"
        decoding.greedy.max_symbols = MAX_SYMBOLS
        decoding.greedy.loop_labels = True
        decoding.greedy.use_cuda_graph_decoder = False
    nemo_model.change_decoding_strategy(decoding, verbose=False)
    waves = utterances(count)
    audio_seconds = sum(len(w) for w in waves) / 16000
    rows = []
    with torch.inference_mode():
        # Encoder (with the front end), each side on the whole set as batches of the largest size.
        batch = max(batch_sizes)
        encoder_times = {"nemo": 0.0, "transdec": 0.0}
        encoded_rows: list[torch.Tensor] = []
        difference = 0.0
        for start in range(0, count, batch):
            audio, lengths = pad_batch(waves[start : start + batch], dtype=torch.float32)
            began = time.perf_counter()
            features, feature_lengths = nemo_model.preprocessor(input_signal=audio, length=lengths)
            nemo_encoded, nemo_lengths = nemo_model.encoder(audio_signal=features, length=feature_lengths)
            encoder_times["nemo"] += time.perf_counter() - began
            began = time.perf_counter()
            encoded, encoded_lengths = model.encode(audio, lengths)
            encoder_times["transdec"] += time.perf_counter() - began
            nemo_encoded = nemo_encoded.transpose(1, 2)
            difference = max([difference] + [float((encoded[i, :n] - nemo_encoded[i, :n]).abs().max())
                                             for i, n in enumerate(encoded_lengths.tolist())])
            encoded_rows += [nemo_encoded[i, :n] for i, n in enumerate(nemo_lengths.tolist())]
        print(json.dumps({"part": "encoder", "batch_size": batch, "nemo_s": round(encoder_times["nemo"], 2),
                          "transdec_s": round(encoder_times["transdec"], 2),
                          "speedup": round(encoder_times["nemo"] / encoder_times["transdec"], 2),
                          "max_abs_diff": difference, "audio_s": round(audio_seconds, 1)}), flush=True)
        # Decoder: both on NeMo's encoder output.
        for batch in batch_sizes:
            nemo_times, transdec_times, same, tokens = [], [], True, 0
            for _ in range(repeats):
                nemo_total = transdec_total = 0.0
                for start in range(0, count, batch):
                    encoder_out, lengths = pad_batch(encoded_rows[start : start + batch])
                    began = time.perf_counter()
                    hyps = nemo_model.decoding.rnnt_decoder_predictions_tensor(
                        encoder_output=encoder_out.transpose(1, 2), encoded_lengths=lengths, return_hypotheses=True)
                    nemo_total += time.perf_counter() - began
                    began = time.perf_counter()
                    result = transdec.decode(model, encoder_out, lengths, DecodingConfig(max_symbols_per_frame=MAX_SYMBOLS))
                    transdec_total += time.perf_counter() - began
                    same &= [list(map(int, h.y_sequence)) for h in hyps] == [list(h.tokens) for h in result.hypotheses()]
                    tokens += sum(len(h.tokens) for h in result.hypotheses())
                nemo_times.append(nemo_total)
                transdec_times.append(transdec_total)
            nemo_s, transdec_s = statistics.median(nemo_times), statistics.median(transdec_times)
            rows.append({"part": "decoder", "head": head, "batch_size": batch, "nemo_s": round(nemo_s, 3),
                         "transdec_s": round(transdec_s, 3), "speedup": round(nemo_s / transdec_s, 2),
                         "tokens_identical": same, "audio_s": round(audio_seconds, 1),
                         "tokens": tokens // repeats})
            print(json.dumps(rows[-1]), flush=True)
    return 0 if all(r["tokens_identical"] for r in rows) else 1


def main() -> int:
    args = parse_args()
    if args.command == "check":
        return check(Path(args.directory))
    if args.command == "long":
        return long_recording(Path(args.model), args.seconds, args.local_attention, args.windows, args.threads)
    if args.command == "windows":
        return windowed_against_whole(Path(args.directory), args.seconds, [float(c) for c in args.chunks.split(",")])
    return speed(Path(args.model), [int(b) for b in args.batch_sizes.split(",")], args.utterances, args.repeats)


if __name__ == "__main__":
    sys.exit(main())
