"""Time and peak memory of transcribing one long recording (the example clips repeated) in one call.

    .venv/bin/python bench/long_audio.py --model tiny-en-rnnt --minutes 60

The recording is encoded in overlapping windows (``transdec.long_audio``) and decoded in one pass, so
memory grows with the waveform and the encoder frames, not with attention over the whole recording. Like
``transdec transcribe``, it keeps glibc's malloc defaults unless ``TRANSDEC_GLIBC_MALLOC=keep``.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np

import transdec
from transdec.audio import load_audio
from transdec.runtime import configure_malloc

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny-en-rnnt")
    parser.add_argument("--minutes", type=float, default=60.0)
    args = parser.parse_args()
    kept = configure_malloc("default")  # as `transdec transcribe` does
    model = transdec.load_model(args.model)
    pause = np.zeros(model.sample_rate // 2, dtype=np.float32)
    pieces = []
    for path in sorted(EXAMPLES.glob("*.flac")):
        pieces += [load_audio(path, model.sample_rate), pause]
    one_round = np.concatenate(pieces)
    samples = int(args.minutes * 60 * model.sample_rate)
    recording = np.tile(one_round, samples // len(one_round) + 1)[:samples]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    result = model.transcribe([recording])[0]
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.minutes:g} min of audio ({recording.nbytes / 2**20:.0f} MiB of samples): {seconds:.1f} s "
          f"(RTFx {samples / model.sample_rate / seconds:.0f}), {len(result.words)} words, last ends at "
          f"{result.words[-1].end if result.words else 0:.1f} s; peak RSS {peak:.0f} MiB ({before:.0f} MiB "
          f"before transcribing; glibc keeping freed memory: {kept})")


if __name__ == "__main__":
    main()
