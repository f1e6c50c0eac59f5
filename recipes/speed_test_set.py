"""A small held-out test set that travels: for timing ``transdec evaluate`` on a machine that cannot synthesise
speech (a GPU machine without network access, espeak-ng or soundfile).

    .venv/bin/python recipes/speed_test_set.py --out .gpu-data
    .venv/bin/transdec evaluate .gpu-data/test.jsonl --decoding greedy_label --device cuda

It holds the first espeak-ng readings of the synthetic corpus's test plan (``recipes/synthetic_corpus.py``,
default settings: the same sentences, voices, gains and noise as the espeak-ng half of the test set on which
``docs/models.md`` reports WER), in plan order, as many as fit in ``--max-bytes`` (about 9 minutes in 12 MB:
the added white noise is what FLAC cannot shrink). The manifest's audio paths are relative to its own folder,
which is how transdec resolves them, so it works from any working directory.

Needs Debian's ``espeak-ng``, ``bible-kjv`` and ``fortunes`` (``apt-get install espeak-ng bible-kjv fortunes``);
takes about 10 s on 2 cores. The same versions of those packages give the same files.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import soundfile

CORPUS = Path(__file__).resolve().parent / "synthetic_corpus.py"
MANIFEST = "test.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path(".gpu-data"))
    parser.add_argument("--max-bytes", type=int, default=12_000_000, help="audio and manifest together")
    parser.add_argument("--candidates", type=int, default=200,
                        help="espeak-ng readings synthesised to choose from (more than fit)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp)
        # The corpus's own steps with its defaults, so the plan is the test set's, not a copy of its settings.
        for step in (["text"], ["audio", "--splits", "test", "--voices", "espeak",
                                "--index-range", "0", str(args.candidates)]):
            subprocess.run([sys.executable, str(CORPUS), *step, "--out", str(corpus)], check=True,
                           stdout=subprocess.DEVNULL)
        plan = [json.loads(line) for line in (corpus / "plan_test.jsonl").read_text(encoding="utf-8").splitlines()]
        readings = [u for u in plan if u["voice"] == "espeak"][: args.candidates]
        if args.out.exists():
            shutil.rmtree(args.out)
        (args.out / "audio").mkdir(parents=True)
        lines, used, seconds = [], 0, 0.0
        for utterance in readings:
            source = corpus / "audio" / "test" / f"{utterance['id']}.flac"
            duration = round(soundfile.info(str(source)).duration, 3)
            entry = {"audio_filepath": f"audio/{source.name}", "duration": duration, "text": utterance["text"],
                     "voice": utterance["voice"]}
            line = json.dumps(entry) + "\n"
            size = source.stat().st_size + len(line.encode())
            if used + size > args.max_bytes:
                break
            shutil.copyfile(source, args.out / entry["audio_filepath"])
            lines.append(line)
            used += size
            seconds += entry["duration"]
    if len(lines) == len(readings):
        print(f"warning: all {len(readings)} candidates fit; --candidates could be larger", file=sys.stderr)
    (args.out / MANIFEST).write_text("".join(lines), encoding="utf-8")
    print(f"{args.out / MANIFEST}: {len(lines)} utterances, {seconds / 60:.1f} min, {used / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
