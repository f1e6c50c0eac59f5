"""The whole pipeline on a CPU, side by side: audio files in, text out, on parakeet-shaped models.

Systems (each in a process of its own, so that its peak memory is its own):

* ``transdec-fp32``, ``transdec-bf16`` (where the CPU has bfloat16 instructions), ``transdec-int8``,
  ``transdec-int8-bf16`` (int8 products, bfloat16 attention; where the CPU has bfloat16 instructions): PyTorch,
  ``transdec.load_model(NEMO, quantize="int8", compute_dtype=torch.bfloat16)`` or either alone, greedy
  label-looping;
* ``ort-fp32``, ``ort-int8``: transdec over ONNX Runtime on the model's export (``transdec export onnx
  --quantize int8``), the same decoding;
* ``sherpa-fp32``, ``sherpa-int8``: sherpa-onnx's ``OfflineRecognizer`` on the same export files, greedy search,
  one ``decode_stream`` per recording at batch 1 and ``decode_streams`` of the batch otherwise;
* ``nemo``: NeMo's ``transcribe()`` on the ``.nemo`` (run with ``--nemo-python``, NeMo's own virtualenv);
* ``ggml-q8_0``, ``ggml-q4_k_m``: transcribe.cpp (a ggml port; ``--ggml-cli`` its ``transcribe-cli``) on the
  model converted to GGUF and quantized to 8 or 4 bits (the third path of ``--model``: a folder holding
  ``*-Q8_0.gguf`` and ``*-Q4_K_M.gguf``), in its ``--batch`` mode with ``--batch-size``; the time of a call is its
  process's wall time less the model load it reports, and its memory the process's peak.

Each system is given the same recordings as files (cut from ``examples/``, ``--recordings`` of each length in
``--seconds``) and transcribes them at each ``--batches`` size with each ``--threads`` count. Timed: reading the
files, features, encoder, decoding and text, each recording encoded whole (transdec with ``chunking=None``, as NeMo
and sherpa-onnx do); after one untimed pass over the short recordings, ``--repeats`` timed passes per cell, the
median kept. RTFx = audio seconds / wall seconds. Peak memory: the process's resident peak (``VmHWM``) while the
cell runs (reset before it through ``/proc/self/clear_refs``), the model loaded; also the resident memory after
loading and the peak of loading. Texts: how many recordings each system transcribes exactly as its float32
counterpart (transdec-fp32 for transdec, ONNX Runtime and NeMo; sherpa-fp32 for sherpa-int8), whitespace aside.

``--rounds`` runs the whole sequence of systems that many times (fresh processes each round): the tables show the
median RTFx and, with two or more rounds, the range.

    python bench/cpu_pipeline.py run --model v3=DIR/parakeet_tdt_0.6b_v3_shape.nemo,ONNX_DIR \\
        --nemo-python /work/nemo-venv/bin/python --threads 1 2 --batches 1 8 --seconds 5 60 --json out.json
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
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This folder holds bench/onnx.py, which would shadow the onnx package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

SYSTEMS = ("transdec-fp32", "transdec-bf16", "transdec-int8", "transdec-int8-bf16", "ort-fp32", "ort-int8",
           "sherpa-fp32", "sherpa-int8", "nemo", "ggml-q8_0", "ggml-q4_k_m")
#: The float32 counterpart whose texts each system's are compared with.
REFERENCE = {"sherpa-int8": "sherpa-fp32", "sherpa-fp32": "sherpa-fp32"}
CLIPS = ("espeak_logic", "piper_allens_axiom", "piper_are_you_making_this_up")


@dataclass
class Cell:
    """One measurement: a system transcribing ``recordings`` files of ``seconds`` at ``batch`` with ``threads``."""

    model: str
    system: str
    threads: int
    batch: int
    seconds: float
    audio_seconds: float = 0.0
    times: list[float] = field(default_factory=list)
    peak_mb: float = 0.0
    load_rss_mb: float = 0.0
    load_peak_mb: float = 0.0
    load_seconds: float = 0.0
    texts: list[str] = field(default_factory=list)

    @property
    def rtfx(self) -> float:
        return self.audio_seconds / statistics.median(self.times)


# ------------------------------------------------------------------------------------------------ recordings

def make_recordings(folder: Path, seconds: list[float], count: int) -> dict[float, list[str]]:
    """``count`` recordings of each length, 16 kHz 16-bit WAV (which every system reads, transcribe.cpp only that):
    the example clips joined in turn with 0.3 s pauses, each recording starting at another clip and offset, so that
    no two are alike."""
    import numpy as np
    import soundfile as sf

    clips = [sf.read(ROOT / "examples" / f"{name}.flac", dtype="float32")[0] for name in CLIPS]
    pause = np.zeros(4800, dtype=np.float32)
    loop = np.concatenate([piece for clip in clips for piece in (clip, pause)])
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[float, list[str]] = {}
    for length in seconds:
        samples = int(length * 16000)
        paths = []
        for number in range(count):
            start = (number * 17_003) % len(loop)
            audio = np.tile(loop, samples // len(loop) + 2)[start: start + samples]
            path = folder / f"rec{number}_{length:g}s.wav"
            if not path.is_file():
                sf.write(path, audio, 16000, subtype="PCM_16")
            paths.append(str(path))
        out[length] = paths
    return out


# ------------------------------------------------------------------------------------------------ worker

def _memory(field_name: str) -> float:
    """``VmRSS`` or ``VmHWM`` of this process, MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def _normalised(text: str) -> str:
    return " ".join(text.replace("▁", " ").split())


def runner(system: str, nemo_path: str, onnx_dir: str, threads: int, gguf_dir: str = "", ggml_cli: str = ""):
    """``transcribe(paths, batch) -> texts`` for ``system``, its model loaded."""
    if system.startswith("transdec-"):
        import torch

        import transdec

        options = {"transdec-int8": {"quantize": "int8"}, "transdec-bf16": {"compute_dtype": torch.bfloat16},
                   "transdec-int8-bf16": {"quantize": "int8", "compute_dtype": torch.bfloat16}}
        model = transdec.load_model(nemo_path, **options.get(system, {}))
        config = transdec.DecodingConfig("greedy_label")
        return lambda paths, batch: [t.text for t in model.transcribe(paths, config, batch_size=batch, chunking=None)]
    if system.startswith("ort-"):
        import transdec
        from transdec.adapters.onnx import load_onnx

        model = load_onnx(onnx_dir, num_threads=threads, variant=system.removeprefix("ort-"))
        config = transdec.DecodingConfig("greedy_label")
        return lambda paths, batch: [t.text for t in model.transcribe(paths, config, batch_size=batch, chunking=None)]
    if system.startswith("sherpa-"):
        return _sherpa_runner(onnx_dir, system.removeprefix("sherpa-"), threads)
    if system == "nemo":
        return _nemo_runner(nemo_path)
    if system.startswith("ggml-"):
        return _ggml_runner(ggml_cli, gguf_dir, system.removeprefix("ggml-").upper(), threads)
    raise ValueError(f"unknown system {system}")


class _GgmlCalls:
    """transcribe.cpp's CLI, a process per call: the seconds of its last call without its model load, and the
    largest peak memory of its processes (MB)."""

    def __init__(self, cli: str, model: Path, threads: int) -> None:
        self.cli, self.model, self.threads = cli, model, threads
        self.seconds = 0.0
        self.peak_mb = 0.0

    def __call__(self, paths: list[str], batch: int) -> list[str]:
        with tempfile.TemporaryDirectory() as scratch:
            listing = Path(scratch) / "files.txt"
            listing.write_text("".join(p + "\n" for p in paths))
            command = ["/usr/bin/time", "-f", "peak_kb=%M", self.cli, "-m", str(self.model), "-q", "--threads",
                       str(self.threads), "--batch", str(listing), "--batch-jsonl", "--batch-size", str(batch)]
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            wall = time.perf_counter() - started
        records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        load = next(r["load_ms"] for r in records if r.get("type") == "batch_header") / 1000
        self.seconds = wall - load
        peak = [line for line in done.stderr.splitlines() if line.startswith("peak_kb=")]
        self.peak_mb = max(self.peak_mb, int(peak[-1].split("=")[1]) / 1024 if peak else 0.0)
        texts = {r["file"]: r["text"] for r in records if "file" in r}
        return [texts[p] for p in paths]


def _ggml_runner(cli: str, gguf_dir: str, quant: str, threads: int) -> _GgmlCalls:
    model = next(Path(gguf_dir).glob(f"*-{quant}.gguf"))
    return _GgmlCalls(cli, model, threads)


def _sherpa_runner(onnx_dir: str, variant: str, threads: int):
    import sherpa_onnx
    import soundfile as sf

    suffix = ".int8.onnx" if variant == "int8" else ".onnx"
    folder = Path(onnx_dir)
    recognizer = sherpa_onnx.OfflineRecognizer.from_transducer(
        str(folder / f"encoder{suffix}"), str(folder / f"decoder{suffix}"), str(folder / f"joiner{suffix}"),
        str(folder / "tokens.txt"), num_threads=threads, decoding_method="greedy_search",
        model_type="nemo_transducer")

    def transcribe(paths: list[str], batch: int) -> list[str]:
        texts = []
        for start in range(0, len(paths), batch):
            streams = []
            for path in paths[start: start + batch]:
                samples, rate = sf.read(path, dtype="float32")
                stream = recognizer.create_stream()
                stream.accept_waveform(rate, samples)
                streams.append(stream)
            if batch == 1:
                recognizer.decode_stream(streams[0])
            else:
                recognizer.decode_streams(streams)
            texts += [s.result.text for s in streams]
        return texts

    return transcribe


def _nemo_runner(nemo_path: str):
    import logging

    import nemo.collections.asr as nemo_asr
    from omegaconf import open_dict

    logging.getLogger("nemo_logger").setLevel(logging.ERROR)
    model = nemo_asr.models.ASRModel.restore_from(nemo_path, map_location="cpu").eval()
    with open_dict(model.cfg):  # transcribe() builds its dataloader from these, which a bare config lacks
        model.cfg.validation_ds = {"sample_rate": 16000, "batch_size": 1, "shuffle": False, "num_workers": 0}

    def transcribe(paths: list[str], batch: int) -> list[str]:
        hypotheses = model.transcribe(paths, batch_size=batch, verbose=False, num_workers=0)
        if isinstance(hypotheses, tuple):  # hybrid models: (best, all)
            hypotheses = hypotheses[0]
        return [h.text if hasattr(h, "text") else str(h) for h in hypotheses]

    return transcribe


def worker(spec: dict) -> None:
    """Load one system and measure its cells; a JSON line per cell on standard output."""
    import torch

    threads = spec["threads"]
    torch.set_num_threads(threads)
    started = time.perf_counter()
    transcribe = runner(spec["system"], spec["nemo"], spec["onnx"], threads, spec.get("gguf", ""),
                        spec.get("ggml_cli", ""))
    load_seconds = time.perf_counter() - started
    # A system whose calls run in processes of their own (transcribe.cpp) has no model in this one.
    load_rss, load_peak = (0.0, 0.0) if hasattr(transcribe, "peak_mb") else (_memory("VmRSS"), _memory("VmHWM"))
    recordings = {float(k): v for k, v in spec["recordings"].items()}
    import soundfile as sf

    warm = recordings[min(recordings)]
    for batch in spec["batches"]:
        transcribe(warm[:batch], batch)  # untimed: lazy set-up, first allocations
    for seconds in sorted(recordings):
        paths = recordings[seconds]
        audio = sum(sf.info(p).frames / sf.info(p).samplerate for p in paths)
        for batch in spec["batches"]:
            cell = Cell(spec["name"], spec["system"], threads, batch, seconds, audio, load_rss_mb=load_rss,
                        load_peak_mb=load_peak, load_seconds=load_seconds)
            _reset_peak()
            for _ in range(spec["repeats"]):
                start = time.perf_counter()
                texts = transcribe(paths, batch)
                # A process per call (transcribe.cpp): its own time without the model load, and its own peak.
                cell.times.append(getattr(transcribe, "seconds", None) or time.perf_counter() - start)
            cell.peak_mb = getattr(transcribe, "peak_mb", None) or _memory("VmHWM")
            cell.texts = [_normalised(t) for t in texts]
            print(json.dumps(asdict(cell)), flush=True)


# ------------------------------------------------------------------------------------------------ driver

def cpu_has_bfloat16() -> bool:
    try:
        return "avx512_bf16" in Path("/proc/cpuinfo").read_text() or "amx_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def run(args: argparse.Namespace) -> list[Cell]:
    folder = Path(args.audio_dir or tempfile.mkdtemp(prefix="transdec-cpu-pipeline-"))
    recordings = make_recordings(folder, args.seconds, args.recordings)
    systems = [s for s in args.systems if not s.endswith("bf16") or cpu_has_bfloat16()]
    cells: list[Cell] = []
    for round_number in range(args.rounds):
        for name, nemo_path, onnx_dir, *gguf in args.model:
            for threads in args.threads:
                for system in systems:
                    python = args.nemo_python if system == "nemo" else sys.executable
                    if (system == "nemo" and not python) or (system.startswith("ggml-") and not (gguf and
                                                                                                args.ggml_cli)):
                        continue
                    spec = {"name": name, "system": system, "threads": threads, "nemo": nemo_path, "onnx": onnx_dir,
                            "gguf": gguf[0] if gguf else "", "ggml_cli": args.ggml_cli,
                            "recordings": {str(k): v for k, v in recordings.items()}, "batches": args.batches,
                            "repeats": args.repeats}
                    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                                        os.environ.get("PYTHONPATH", "")])))
                    if system == "nemo":  # NeMo's own virtualenv; transdec is not needed there
                        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
                    print(f"[round {round_number + 1}] {name} {system} {threads} thread(s)", file=sys.stderr,
                          flush=True)
                    process = subprocess.run([python, __file__, "worker", json.dumps(spec)], env=env,
                                             capture_output=True, text=True)
                    if process.returncode != 0:
                        print(f"  failed:\n{process.stderr[-3000:]}", file=sys.stderr, flush=True)
                        continue
                    for line in process.stdout.splitlines():
                        if line.startswith("{"):
                            cell = Cell(**json.loads(line))
                            cells.append(cell)
                            print(f"  {cell.seconds:g} s B={cell.batch}: RTFx {cell.rtfx:.2f}, peak "
                                  f"{cell.peak_mb:,.0f} MB", file=sys.stderr, flush=True)
    return cells


def report(cells: list[Cell]) -> str:
    """Markdown tables: per model and thread count, a row per system."""
    lines = []
    keys = sorted({(c.model, c.threads) for c in cells})
    for model, threads in keys:
        mine = [c for c in cells if c.model == model and c.threads == threads]
        columns = sorted({(c.seconds, c.batch) for c in mine})
        systems = [s for s in SYSTEMS if any(c.system == s for c in mine)]
        lines += [f"\n{model}, {threads} thread(s): RTFx (median of rounds; range), peak memory MB at the longest "
                  "recordings and largest batch, texts equal to float32\n"]
        header = " | ".join(f"{s:g} s B={b}" for s, b in columns)
        lines.append(f"| system | {header} | peak MB | load RSS MB | equal texts |")
        lines.append("|---|" + "---:|" * (len(columns) + 3))
        for system in systems:
            row = []
            for seconds, batch in columns:
                runs = [c for c in mine if c.system == system and c.seconds == seconds and c.batch == batch]
                if not runs:
                    row.append("-")
                    continue
                values = sorted(c.rtfx for c in runs)
                text = f"{statistics.median(values):.2f}"
                if len(values) > 1:
                    text += f" ({values[0]:.2f}-{values[-1]:.2f})"
                row.append(text)
            longest = max(columns, key=lambda sb: (sb[0], sb[1]))
            last = [c for c in mine if c.system == system and (c.seconds, c.batch) == longest]
            peak = f"{max(c.peak_mb for c in last):,.0f}" if last else "-"
            load = "-" if system.startswith("ggml-") else \
                f"{max(c.load_rss_mb for c in mine if c.system == system):,.0f}"
            equal = _equal_texts(mine, system)
            lines.append(f"| {system} | " + " | ".join(row) + f" | {peak} | {load} | {equal} |")
    return "\n".join(lines)


def _equal_texts(cells: list[Cell], system: str) -> str:
    reference = REFERENCE.get(system, "transdec-fp32")
    same = total = 0
    for cell in (c for c in cells if c.system == system):
        ref = next((c for c in cells if c.system == reference and (c.seconds, c.batch) == (cell.seconds, cell.batch)),
                   None)
        if ref is None:
            continue
        same += sum(a == b for a, b in zip(cell.texts, ref.texts))
        total += len(cell.texts)
    return f"{same}/{total}" if total else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    go = commands.add_parser("run")
    go.add_argument("--model", action="append", required=True, metavar="NAME=NEMO,ONNX_DIR[,GGUF_DIR]",
                    type=lambda text: (text.split("=", 1)[0], *text.split("=", 1)[1].split(",")),
                    help="a .nemo, its ONNX export (transdec export onnx NEMO DIR --quantize int8) and, for the "
                         "ggml rows, a folder of its GGUF files")
    go.add_argument("--ggml-cli", default="", help="transcribe.cpp's transcribe-cli (no ggml rows without it)")
    go.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    go.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    go.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    go.add_argument("--seconds", nargs="+", type=float, default=[5.0, 60.0])
    go.add_argument("--recordings", type=int, default=8)
    go.add_argument("--repeats", type=int, default=1, help="timed passes per cell in a process (median)")
    go.add_argument("--rounds", type=int, default=1, help="runs of the whole sequence, in fresh processes")
    go.add_argument("--nemo-python", default="", help="NeMo's virtualenv's python (no nemo row without it)")
    go.add_argument("--audio-dir", default="", help="where the recordings are written (default: a temporary one)")
    go.add_argument("--json", default="", help="also write every cell here")
    work = commands.add_parser("worker")
    work.add_argument("spec")
    args = parser.parse_args()
    if args.command == "worker":
        worker(json.loads(args.spec))
        return
    cells = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(c) for c in cells], indent=1))
    print(report(cells))


if __name__ == "__main__":
    main()
