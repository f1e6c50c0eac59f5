"""Why WIND gains little at batch 1 on a model: the cost of one predictor step and of one joint call, and the
best speed-up that follows from them.

    .venv/bin/python bench/wind_costs.py --manifest data/synth/test.jsonl --model tiny-en-rnnt

Times the batch-1 path (``greedy_wind``) at window 1 and at ``--window`` on ``--utterances`` held-out
utterances, counts its predictor and joint calls, then times each call alone. A window skips blank frames' joint
calls but not the per-token predictor step, so even windows that cost no more than one frame give at most
``(step + calls_1 * call_1) / (step + calls_w * call_1)`` per token.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lstm_step import microseconds_per_call  # noqa: E402
from wind import model_sources  # noqa: E402  (the held-out utterances bench/wind.py times, encoded)

from transdec.decoding.emissions import GreedyHead  # noqa: E402
from transdec.decoding.scoring import Scoring  # noqa: E402
from transdec.decoding.greedy.wind import greedy_wind  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--model", default="tiny-en-rnnt")
    parser.add_argument("--utterances", type=int, default=20)
    parser.add_argument("--window", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)

    sources = list(model_sources(args.manifest, args.utterances, [args.model]))
    if not sources:
        raise SystemExit(f"{args.model}: no such bundled model or model file")
    _, model, encoded, _ = sources[0]  # encoded: [(frames [1, T, D], lengths [1])] per utterance

    rows = {}
    for window in (1, args.window):
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            results = [greedy_wind(model, frames, lengths, window_size=window) for frames, lengths in encoded]
            best = min(best, time.perf_counter() - start)
        rows[window] = (best, sum(r.stats.predictor_calls for r in results), sum(r.stats.joint_calls for r in results))
    frames = sum(int(lengths[0]) for _, lengths in encoded)

    read = GreedyHead(Scoring(model.head), torch.device("cpu"))
    with torch.inference_mode():
        encoder_proj = model.joint.project_encoder(encoded[0][0])[0]
        state = model.predictor.initial_state(1)
        label = torch.tensor([0])
        predictor_proj = model.joint.project_predictor(model.predictor.step(label, state)[0])

        def predictor_step():
            model.joint.project_predictor(model.predictor.step(label, state)[0])

        def joint_call(size: int):
            emissions = read(model.joint.combine(encoder_proj[:size], predictor_proj))
            return emissions.is_blank.tolist(), emissions.advance.tolist(), emissions.scores.tolist()

        step_us = microseconds_per_call(predictor_step, 2000)
        call_us = {w: microseconds_per_call(lambda: joint_call(w), 2000) for w in rows}

    tokens = rows[1][1]
    print(f"{args.model}: {len(encoded)} utterances, {frames} frames, {tokens} predictor steps "
          f"({tokens / frames:.2f} per frame)")
    print("| window | decoder ms | joint calls | per step | us per joint call | speed-up |")
    print("|---|---|---|---|---|---|")
    for window, (seconds, _, calls) in rows.items():
        print(f"| {window} | {seconds * 1e3:.1f} | {calls} | {calls / tokens:.2f} | {call_us[window]:.1f} | "
              f"{rows[1][0] / seconds:.2f}x |")
    calls_1, calls_w = rows[1][2] / tokens, rows[args.window][2] / tokens
    bound = (step_us + calls_1 * call_us[1]) / (step_us + calls_w * call_us[1])
    print(f"predictor step with its joint projection: {step_us:.1f} us; bound with windows as cheap as one "
          f"frame: {bound:.2f}x; 2x would need a step under {(calls_1 - 2 * calls_w) * call_us[1]:.1f} us")


if __name__ == "__main__":
    main()
