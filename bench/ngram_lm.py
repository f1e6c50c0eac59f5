"""Scale of the tensor n-gram LM: load time from ARPA and from the compiled form, memory, and scoring throughput.

The ARPA file is synthetic: every n-gram (orders 1..N) of a random Zipf-distributed token stream over a 1024-token
vocabulary, with random log-probs and backoffs (the LM's speed depends on its shape, not on its numbers). Scoring
is timed for N states at once against one joint call of the bundled ``tiny-en-rnnt`` on the same N rows.

    python bench/ngram_lm.py --ngrams 1000000 10000000
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

import torch

from transdec.lm import NGramLM, read_arpa
from transdec.lm.ngram import TOKEN_OFFSET
from transdec.loading import load_model

VOCAB = 1024


def synthetic_arpa(path: Path, target: int, order: int, seed: int) -> int:
    """Write an ARPA file of about ``target`` n-grams; returns the number written."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(VOCAB)]
    sections: list[set[tuple[int, ...]]] = [set() for _ in range(order)]
    sections[0].update((t,) for t in range(VOCAB))
    chunk = 100_000
    while sum(len(s) for s in sections) < target:
        stream = rng.choices(range(VOCAB), weights, k=chunk)
        for n in range(2, order + 1):
            sections[n - 1].update(tuple(stream[i : i + n]) for i in range(chunk - n + 1))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\\data\\\n")
        f.write(f"ngram 1={len(sections[0]) + 3}\n")
        for n in range(2, order + 1):
            f.write(f"ngram {n}={len(sections[n - 1])}\n")
        f.write("\n\\1-grams:\n-99\t<s>\t-0.5\n-2.0\t</s>\n-5.0\t<unk>\t-0.3\n")
        for n in range(1, order + 1):
            if n > 1:
                f.write(f"\n\\{n}-grams:\n")
            for gram in sections[n - 1]:
                words = " ".join(chr(t + TOKEN_OFFSET) for t in gram)
                backoff = f"\t{-rng.random():.4f}" if n < order else ""
                f.write(f"{-rng.uniform(0.1, 4.0):.4f}\t{words}{backoff}\n")
        f.write("\n\\end\\\n")
    return sum(len(s) for s in sections) + 3


def resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ngrams", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--order", type=int, default=4)
    parser.add_argument("--states", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_model("tiny-en-rnnt")
    print(f"# {args.order}-gram, {VOCAB} tokens, torch {torch.__version__}, {os.cpu_count()} cores, 1 thread")
    print("| n-grams | ARPA MB | read ARPA + build s | load .pt s | .pt MB | RSS after load MB | "
          f"scores [N={args.states}, V] ms | joint [N, C] ms | ratio | advance ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for target in args.ngrams:
        with tempfile.TemporaryDirectory() as folder:
            arpa, compiled = Path(folder) / "lm.arpa", Path(folder) / "lm.pt"
            count = synthetic_arpa(arpa, target, args.order, seed=target)
            start = time.perf_counter()
            lm = NGramLM.from_arpa(read_arpa(arpa), VOCAB)
            build = time.perf_counter() - start
            lm.save(compiled)
            del lm
            before = resident_mb()
            start = time.perf_counter()
            lm = NGramLM.load(compiled, VOCAB)
            load = time.perf_counter() - start
            resident = resident_mb() - before
            generator = torch.Generator().manual_seed(0)
            states = torch.randint(0, lm.backoff.shape[0], (args.states,), generator=generator)
            tokens = torch.randint(0, VOCAB, (args.states,), generator=generator)
            timings = {}
            joint, head = model.joint, model.head
            encoder_proj = torch.randn(args.states, joint.project_encoder(torch.zeros(1, 1, model.encoder.output_dim)).shape[-1])
            predictor_proj = torch.randn_like(encoder_proj)
            with torch.inference_mode():
                for name, call in {"scores": lambda: lm.token_logprobs(states),
                                   "joint": lambda: joint.combine(encoder_proj, predictor_proj),
                                   "advance": lambda: lm.advance(states, tokens)}.items():
                    call()
                    start = time.perf_counter()
                    for _ in range(args.repeats):
                        call()
                    timings[name] = (time.perf_counter() - start) / args.repeats * 1000
            print(f"| {count:,} | {arpa.stat().st_size / 2**20:.0f} | {build:.1f} | {load:.2f} | "
                  f"{compiled.stat().st_size / 2**20:.0f} | {resident:.0f} | {timings['scores']:.2f} | "
                  f"{timings['joint']:.2f} | {timings['scores'] / timings['joint']:.1f}x | {timings['advance']:.3f} |",
                  flush=True)
            del head


if __name__ == "__main__":
    main()
