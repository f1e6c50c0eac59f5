"""Decoder-only speed of beam search against greedy label-looping, on a parakeet-sized decoder, on the CPU.

The decoder is the random parakeet-sized one of ``bench/greedy.py`` (2-layer LSTM predictor of width 640,
joint width 640, 1024 tokens, greedy emitting about one token per 2.5 encoder frames), on random encoder
outputs of 5-20 s utterances. Every strategy decodes the same batches in the same process, alternating,
and the table gives the median of the repeats and each time as a ratio to greedy label-looping at the same
batch size. The per-utterance baselines (``beam_alsd``, and ``beam_maes`` / ``beam_graves`` where
registered) run on the first ``--baseline-utterances`` utterances; the last table compares them with the
batched searches on exactly those utterances.

    python bench/beam.py                  # RNN-T and TDT, beams 2/4/8, B = 1, 16, 32
    python bench/beam.py --quick          # RNN-T, beam 4, B = 1 and 32, 8 utterances
    python bench/beam.py --heads rnnt --beams 4 --batch-sizes 32 --batched beam_alsd_pp --baselines none \
        --lm-ngrams 1000000 --lm-weight 0  # each beam search also with an n-gram LM fused (ratio to no LM)

With ``--lm FILE`` (an ARPA or compiled LM over the decoder's 1024 tokens) or ``--lm-ngrams N`` (a synthetic
order-4 LM of about N n-grams, as bench/ngram_lm.py makes them), every batched search also runs with the LM fused
by shallow fusion, and its column gives its time and its ratio to the same search without the LM. Weight 0 scores
the LM but leaves the search as it is without it, so the ratio is the LM's cost alone (a random LM with a weight
changes how many tokens the random decoder emits, and with them the search's length).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

from greedy import calibrated_model, describe_settings, make_batches, utterance_lengths, HEADS, FRAME_SECONDS
from transdec.decoding import STRATEGIES, DecodingConfig, InexactDecodingWarning, decode


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", default="rnnt,tdt")
    parser.add_argument("--beams", default="2,4,8")
    parser.add_argument("--batch-sizes", default="1,16,32")
    parser.add_argument("--batched", default="beam_alsd_pp,beam_aes_pp", help="batched searches (those registered)")
    parser.add_argument("--baselines", default="beam_alsd,beam_maes,beam_graves",
                        help="per-utterance searches (those registered)")
    parser.add_argument("--utterances", type=int, default=32)
    parser.add_argument("--baseline-utterances", type=int, default=32)
    parser.add_argument("--baseline-beam", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens-per-frame", type=float, default=0.4)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--memory-minutes", type=float, default=0.0,
                        help="also decode one recording this long (random encoder output) with ALSD++ at "
                             "--memory-beam and report the peak memory it added")
    parser.add_argument("--memory-beam", type=int, default=8)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--lm", default=None, help="an n-gram LM over the decoder's tokens to fuse (ARPA or .pt)")
    parser.add_argument("--lm-ngrams", type=int, default=0, help="fuse a synthetic order-4 LM of this many n-grams")
    parser.add_argument("--lm-weight", type=float, default=0.5)
    parser.add_argument("--lm-blank-scoring", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.heads, args.beams, args.batch_sizes, args.utterances, args.repeats = "rnnt", "4", "1,32", 8, 1
        args.baseline_utterances = 4
    return args


def seconds(model, batches, config: DecodingConfig) -> float:
    start = time.perf_counter()
    for frames, lengths in batches:
        decode(model, frames, lengths, config)
    return time.perf_counter() - start


def median_times(model, batches, configs: dict[str, DecodingConfig], repeats: int) -> dict[str, float]:
    """Median seconds of each config over ``repeats`` rounds, the configs alternating within a round."""
    samples: dict[str, list[float]] = {name: [] for name in configs}
    for name, config in configs.items():  # untimed warm-up
        decode(model, *batches[0], config)
    for _ in range(repeats):
        for name, config in configs.items():
            samples[name].append(seconds(model, batches, config))
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    args = parse_args()
    warnings.simplefilter("ignore", InexactDecodingWarning)
    batched = [s for s in args.batched.split(",") if s in STRATEGIES]
    baselines = [s for s in args.baselines.split(",") if s in STRATEGIES]
    beams = [int(b) for b in args.beams.split(",")]
    lengths = utterance_lengths(args.utterances, args.seed)
    print(f"# {describe_settings(args.threads)}")
    print(f"# {len(lengths)} utterances, {sum(lengths) * FRAME_SECONDS:.0f} s of audio, median of {args.repeats} repeats")
    for kind in args.heads.split(","):
        model = calibrated_model(HEADS[kind], args.tokens_per_frame, args.seed)
        fusions = bench_fusions(args, model.head.num_tokens)
        print(f"\n## {kind}: seconds to decode all utterances (ratio to greedy_label at the same batch size)")
        usable = batched
        names = [f"{s} beam {b}{lm}" for s in usable for b in beams for lm in ([""] + [" +lm"] * bool(fusions))]
        print("| B | greedy_label | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 2) + "|")
        for batch_size in [int(b) for b in args.batch_sizes.split(",")]:
            batches = make_batches(lengths, batch_size, args.seed)
            configs = {"greedy_label": DecodingConfig("greedy_label", cpu_threads=args.threads)}
            configs.update({f"{s} beam {b}": DecodingConfig(s, beam_size=b, cpu_threads=args.threads)
                            for s in usable for b in beams})
            configs.update({f"{s} beam {b} +lm": DecodingConfig(s, beam_size=b, cpu_threads=args.threads,
                                                                fusions=tuple(fusions)) for s in usable for b in beams
                            if fusions})
            times = median_times(model, batches, configs, args.repeats)
            greedy = times["greedy_label"]
            print(f"| {batch_size} | {greedy:.2f} | "
                  + " | ".join(f"{times[n]:.2f} ({times[n] / greedy:.2f}x)" if not n.endswith(" +lm") else
                               f"{times[n]:.2f} ({times[n] / times[n.removesuffix(' +lm')]:.2f}x no LM)"
                               for n in names) + " |", flush=True)
        if baselines:
            subset = lengths[: args.baseline_utterances]
            beam = args.baseline_beam
            print(f"\n## {kind}: {len(subset)} utterances, beam {beam}: per-utterance baselines against the batched "
                  f"searches at B = {len(subset)} (seconds; ratio of the baseline to the batched search)")
            configs = {s: DecodingConfig(s, beam_size=beam, cpu_threads=args.threads) for s in usable + baselines}
            times = median_times(model, make_batches(subset, len(subset), args.seed), configs, 1)
            for name in baselines:
                ratios = ", ".join(f"{times[name] / times[b]:.1f}x {b}" for b in usable)
                print(f"- {name}: {times[name]:.2f} s ({ratios})", flush=True)
            for name in usable:
                print(f"- {name}: {times[name]:.2f} s")
    if args.memory_minutes:
        long_recording_memory(args.memory_minutes, args.memory_beam, args.tokens_per_frame, args.seed)


def bench_fusions(args: argparse.Namespace, vocab_size: int) -> list:
    """The LM fusion of ``--lm`` / ``--lm-ngrams`` (none without them)."""
    if not (args.lm or args.lm_ngrams):
        return []
    import tempfile
    from pathlib import Path

    from ngram_lm import synthetic_arpa
    from transdec.decoding import Fusion
    from transdec.lm import NGramLM

    if args.lm:
        lm = NGramLM.load(args.lm, vocab_size)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "lm.arpa"
            written = synthetic_arpa(path, args.lm_ngrams, 4, args.seed)
            lm = NGramLM.load(path, vocab_size)
        print(f"# synthetic order-4 LM of {written} n-grams, weight {args.lm_weight}")
    return [Fusion(lm, args.lm_weight, blank_scoring=args.lm_blank_scoring)]


def long_recording_memory(minutes: float, beam: int, tokens_per_frame: float, seed: int) -> None:
    """Peak resident memory added by decoding one long recording (resident size sampled every 5 ms while it runs)."""
    import ctypes
    import threading

    from transdec.decoding.beam.alsd_pp import beam_alsd_pp
    from transdec.model.synthetic import random_encoder_output

    model = calibrated_model(HEADS["rnnt"], tokens_per_frame, seed)
    frames = round(minutes * 60 / FRAME_SECONDS)
    encoder_out, lengths = random_encoder_output([frames], 1024, seed=seed)
    page = os.sysconf("SC_PAGE_SIZE")

    def resident() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * page

    peak, done = [resident()], threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak.append(max(peak[-1], resident()))

    ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand freed heap back, so that the decode's own growth shows
    before = peak[0] = resident()
    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    result = beam_alsd_pp(model, encoder_out, lengths, beam_size=beam)
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    added = (max(peak[-1], resident()) - before) / 1024
    print(f"\n## one {minutes:g}-minute recording ({frames} frames), rnnt, ALSD++ beam {beam}: "
          f"{elapsed:.1f} s, {len(result.hypotheses()[0].tokens)} tokens, peak memory +{added / 1024:.0f} MB "
          f"(encoder output {encoder_out.numel() * 4 / 2**20:.0f} MB)")


if __name__ == "__main__":
    main()
