"""Does beam search ever end below greedy decoding? Every beam strategy against greedy on parakeet-sized decoders.

Exactness tests check the searches against brute force on tiny problems; this checks what a user switching from
greedy to beam search expects on decoders of the benchmarks' size: that the best beam hypothesis scores at least as
high as greedy's. For each decoder, head, strategy and beam size it counts the utterances whose best hypothesis
scores below greedy's by more than 1e-6 and gives the worst gap. Scores are compared under the same rule on both
sides: the log-probability of a path (``merge="max"``, every strategy's hypothesis is then one path, as greedy's is),
no length normalisation, the forced blank after ``max_symbols_per_frame`` tokens scored alike.

The decoders are bench/greedy.py's random parakeet-sized ones (2-layer LSTM predictor of width 640, joint 640,
1,024 tokens), on random encoder outputs of 5-20 s utterances:

* ``benchmark``: the benchmarks' decoder, blank logits shifted for ~0.4 greedy tokens per frame;
* ``loopy``: blanks made rarer (~1 greedy token per frame), so that greedy decoding reaches
  ``max_symbols_per_frame`` at many frames (strong token loops; the share of frames is printed).

    python bench/beam_quality.py                                   # every strategy, head, beam 2/4/8 (long)
    python bench/beam_quality.py --quick                           # RNN-T, benchmark decoder, 8 utterances
    python bench/beam_quality.py --heads rnnt --strategies beam_wind_batched --beams 2,4,8

``--nemo`` adds NeMo's batched ALSD (``malsd_batch``, which recombines by log-sum-exp) at ``--nemo-beam`` on the same
weights beside ALSD++ with ``merge="logsumexp"``: the count below greedy for each (by the scores each search
reports) and how often their best hypotheses have the same tokens. It needs NeMo in the running interpreter (its
own virtualenv, ``nemo-toolkit[asr]==3.0.0`` with torch pinned as in constraints.txt, and ``PYTHONPATH=src:bench``).
"""

from __future__ import annotations

import argparse
import collections
import time
import warnings
from dataclasses import dataclass

import torch

from greedy import FRAME_SECONDS, HEADS, calibrated_model, describe_settings, make_batches, utterance_lengths
from transdec.decoding import STRATEGIES, DecodingConfig, InexactDecodingWarning, decode
from transdec.decoding.hypothesis import Hypothesis

#: Greedy tokens per frame of each decoder, and the lowest blank_rate the calibration may try.
DECODERS = {"benchmark": (0.4, 0.3), "loopy": (1.0, 0.01)}
BATCHED = ("beam_alsd_pp", "beam_aes_pp", "beam_wind_batched")
BASELINES = ("beam_alsd", "beam_wind", "beam_graves", "beam_maes")
RNNT_ONLY = ("beam_wind", "beam_wind_batched")
#: A hypothesis scoring this much below greedy's counts as below it (rounding between searches stays far under).
TOLERANCE = 1e-6


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--decoders", default="benchmark,loopy", help=f"of {', '.join(DECODERS)}")
    parser.add_argument("--heads", default="rnnt,tdt,multiblank")
    parser.add_argument("--strategies", default=",".join(BATCHED), help="beam strategies (those registered)")
    parser.add_argument("--baselines", default="", help=f"per-utterance searches, on --baseline-utterances only "
                                                        f"(e.g. {','.join(BASELINES)})")
    parser.add_argument("--beams", default="2,4,8")
    parser.add_argument("--utterances", type=int, default=32)
    parser.add_argument("--baseline-utterances", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--window-size", type=int, default=8, help="the WIND searches' window")
    parser.add_argument("--max-symbols", type=int, default=10, help="max_symbols_per_frame of every search")
    parser.add_argument("--merge", default="max", help="merging of every beam search (max: scores are path scores)")
    parser.add_argument("--dominance-slots", default="0",
                        help="ALSD and ALSD++: kept candidates chosen by dominance, each of a comma-separated list "
                             "(a number, 'quarter': a quarter of the beam, at least 1, or 'all'); a row each")
    parser.add_argument("--nemo", action="store_true", help="NeMo's malsd_batch beside ALSD++ (logsumexp)")
    parser.add_argument("--nemo-beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.decoders, args.heads, args.utterances, args.beams = "benchmark", "rnnt", 8, "2,4"
    return args


@dataclass
class Row:
    """One search against greedy on the utterances of one decoder and head."""

    name: str
    below: int  # utterances whose best hypothesis scores below greedy's by more than TOLERANCE
    above: int  # ... above greedy's by more than TOLERANCE
    count: int
    worst: float  # the lowest best-minus-greedy score (0 when never below)
    tokens_per_frame: float
    seconds: float

    def markdown(self) -> str:
        worst = f"{self.worst:,.1f}" if self.below else "-"
        return (f"| {self.name} | {self.below} / {self.count} | {worst} | {self.above} | {self.tokens_per_frame:.2f} | "
                f"{self.seconds:.1f} |")


def compare(name: str, best: list[Hypothesis], greedy: list[Hypothesis], frames: int, seconds: float,
            scores: list[float] | None = None) -> Row:
    """A :class:`Row` of ``best`` (or of ``scores``, when the search reports its own) against ``greedy``."""
    scores = [h.score for h in best] if scores is None else scores
    gaps = [score - g.score for score, g in zip(scores, greedy)]
    return Row(name, sum(gap < -TOLERANCE for gap in gaps), sum(gap > TOLERANCE for gap in gaps), len(gaps),
               min(min(gaps, default=0.0), 0.0), sum(len(h.tokens) for h in best) / frames, seconds)


def decode_all(model, batches, config: DecodingConfig) -> tuple[list[Hypothesis], float]:
    """Each utterance's best hypothesis, and the seconds it took."""
    start = time.perf_counter()
    best = [h for frames, lengths in batches for h in decode(model, frames, lengths, config).hypotheses()]
    return best, time.perf_counter() - start


def limit_share(hyps: list[Hypothesis], lengths: list[int], limit: int) -> float:
    """The share of frames at which a hypothesis emitted ``limit`` tokens without moving on."""
    full = 0
    for hyp in hyps:
        staying = collections.Counter(t for t, d in zip(hyp.timestamps, hyp.durations) if d == 0)
        full += sum(count >= limit for count in staying.values())
    return full / sum(lengths)


def main() -> None:
    args = parse_args()
    warnings.simplefilter("ignore", InexactDecodingWarning)
    torch.set_num_threads(args.threads)
    strategies = [s for s in args.strategies.split(",") if s in STRATEGIES]
    baselines = [s for s in args.baselines.split(",") if s in STRATEGIES]
    beams = [int(b) for b in args.beams.split(",")]
    lengths = utterance_lengths(args.utterances, args.seed)
    print(f"# {describe_settings(args.threads)}")
    print(f"# {len(lengths)} utterances, {sum(lengths) * FRAME_SECONDS:.0f} s of audio; merge={args.merge}, "
          f"max_symbols_per_frame={args.max_symbols}, WIND window {args.window_size}; baselines on the first "
          f"{args.baseline_utterances}")
    nemo = None
    if args.nemo:
        import nemo_greedy as nemo
        nemo.quiet_nemo_logging()
    common = dict(max_symbols_per_frame=args.max_symbols)
    for decoder in args.decoders.split(","):
        rate, lowest = DECODERS[decoder]
        for kind in args.heads.split(","):
            model = calibrated_model(HEADS[kind], rate, args.seed, lowest_blank_rate=lowest)
            batches = make_batches(lengths, args.batch_size, args.seed)
            greedy, seconds = decode_all(model, batches, DecodingConfig("greedy_label", **common))
            print(f"\n## {decoder} decoder, {kind}: greedy {sum(len(h.tokens) for h in greedy) / sum(lengths):.2f} "
                  f"tokens per frame, at the limit of {args.max_symbols} tokens at "
                  f"{limit_share(greedy, lengths, args.max_symbols):.1%} of frames, {seconds:.1f} s")
            print("| search | below greedy | worst gap | above greedy | tokens / frame | seconds |")
            print("|---|---|---|---|---|---|")
            runs = [(s, beams, lengths, batches, greedy) for s in strategies]
            subset = lengths[: args.baseline_utterances]
            runs += [(s, beams, subset, make_batches(subset, len(subset), args.seed), greedy[: len(subset)])
                     for s in baselines]
            for strategy, sizes, used, used_batches, used_greedy in runs:
                if strategy in RNNT_ONLY and kind != "rnnt":
                    continue
                for beam in sizes:
                    for slots, label in slot_settings(strategy, beam, args.dominance_slots):
                        options = dict(common, beam_size=beam, merge=args.merge, **slots)
                        if "wind" in strategy:
                            options["window_size"] = args.window_size
                        best, seconds = decode_all(model, used_batches, DecodingConfig(strategy, **options))
                        print(compare(f"{strategy} beam {beam}{label}", best, used_greedy, sum(used),
                                      seconds).markdown(), flush=True)
            if nemo is not None and kind in nemo.SUPPORTED_HEADS:
                nemo_rows(nemo, model, batches, greedy, lengths, args)


def slot_settings(strategy: str, beam: int, spec: str) -> list[tuple[dict, str]]:
    """The ``dominance_slots`` options of ``--dominance-slots`` for an ALSD strategy at ``beam`` (with a row label);
    one empty setting for the other strategies."""
    if "alsd" not in strategy:
        return [({}, "")]
    named = {"quarter": max(1, beam // 4), "all": beam}
    settings = []
    for item in spec.split(","):
        slots = named[item] if item in named else int(item)
        settings.append(({"dominance_slots": slots}, f", {slots} by dominance" if slots else ""))
    return settings


def nemo_rows(nemo, model, batches, greedy: list[Hypothesis], lengths: list[int], args: argparse.Namespace) -> None:
    """NeMo's ``malsd_batch`` and ALSD++ with log-sum-exp merging at ``--nemo-beam`` (a row per
    ``--dominance-slots``): each against greedy by its own reported scores, and the utterances where their best
    hypotheses have the same tokens."""
    beam, frames = args.nemo_beam, sum(lengths)
    searcher = nemo.nemo_beam(model, beam_size=beam, max_symbols_per_step=args.max_symbols)
    start = time.perf_counter()
    theirs = [h for frames_b, lengths_b in batches for h in nemo.nemo_beam_hypotheses(searcher, frames_b, lengths_b)]
    nemo_seconds = time.perf_counter() - start
    print(f"\nBeside NeMo, beam {beam}, log-sum-exp merging (each by the scores it reports); 'same': utterances "
          "whose best hypotheses have the same tokens as NeMo's.")
    print("| search | below greedy | worst gap | above greedy | tokens / frame | seconds | same |")
    print("|---|---|---|---|---|---|---|")
    for slots, label in slot_settings("beam_alsd_pp", beam, args.dominance_slots):
        ours, seconds = decode_all(model, batches, DecodingConfig("beam_alsd_pp", beam_size=beam, merge="logsumexp",
                                                                  max_symbols_per_frame=args.max_symbols, **slots))
        same = sum(list(h.tokens) == list(t.tokens) for h, t in zip(ours, theirs))
        print(compare(f"beam_alsd_pp beam {beam}{label}", ours, greedy, frames, seconds).markdown()
              + f" {same} / {len(ours)} |")
    print(compare(f"NeMo malsd_batch beam {beam}", theirs, greedy, frames, nemo_seconds).markdown() + " - |",
          flush=True)


if __name__ == "__main__":
    main()
