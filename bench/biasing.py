"""What phrase boosting costs the decoder: greedy label-looping and ALSD++ beam 4 on one batch of real encoder output,
without boosting and with N boosted phrases (at the weights the evaluation chose on dev), timed interleaved in one run
(ratios against no boosting).

The batch is the first ``--batch`` utterances of the biasing test set (``recipes/biasing_corpus.py``), encoded once by
the bundled ``tiny-en-rnnt``; the phrases are the set's whole phrase list (key phrases and distractors), topped up to
N with two-word combinations of its words (seeded). Building the tree is timed on its own.

    python bench/biasing.py --phrases 1000 10000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import torch

import transdec
from transdec.audio import load_audio
from transdec.biasing import Boost, BoostingTree, read_phrase_file, tokenize_phrases
from transdec.decoding import DecodingConfig, decode
from transdec.long_audio import encode_batch


def phrase_list(path: Path, count: int, seed: int = 0) -> list[str]:
    """``count`` phrases: those of ``path``, then two-word combinations of their words."""
    phrases = [p.text for p in read_phrase_file(path)]
    words = sorted({word for phrase in phrases for word in phrase.split()})
    rng, seen = random.Random(seed), set(phrases)
    while len(phrases) < count:
        phrase = " ".join(rng.sample(words, 2))
        if phrase not in seen:
            seen.add(phrase)
            phrases.append(phrase)
    return phrases[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/biasing"))
    parser.add_argument("--model", default="tiny-en-rnnt")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--phrases", type=int, nargs="+", default=[1000])
    parser.add_argument("--greedy-weight", type=float, default=1.0, help="boost weight of greedy (dev-chosen: 1)")
    parser.add_argument("--beam-weight", type=float, default=4.0, help="boost weight of beam search (dev-chosen: 4)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = transdec.load_model(args.model)
    manifest = args.data / "test.jsonl"
    entries = [json.loads(line) for line in manifest.read_text().splitlines()[: args.batch]]
    waveforms = [torch.from_numpy(load_audio(manifest.parent / e["audio_filepath"], model.sample_rate))
                 for e in entries]
    with torch.inference_mode():
        encoded, lengths = encode_batch(model, waveforms, None)

    strategies = {"greedy_label": (DecodingConfig("greedy_label"), args.greedy_weight),
                  "beam_alsd_pp beam 4": (DecodingConfig("beam_alsd_pp", beam_size=4), args.beam_weight)}
    runs: dict[str, DecodingConfig] = {}
    for name, (base, weight) in strategies.items():
        runs[name] = base
        for count in args.phrases:
            start = time.perf_counter()
            phrases = tokenize_phrases(phrase_list(args.data / "phrases.txt", count), model.tokenizer)
            tree = BoostingTree.build([phrases], model.head.num_tokens)
            built = time.perf_counter() - start
            print(f"{count} phrases: {tree.num_nodes} nodes, arcs per node padded to {tree.width}, tokenized and "
                  f"built in {built:.2f} s")
            runs[f"{name} + {count} phrases"] = DecodingConfig(base.strategy, base.options,
                                                               fusions=[Boost(tree, weight)])
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    with torch.inference_mode():
        for config in runs.values():  # warm-up
            decode(model, encoded, lengths, config)
        for _ in range(args.repeats):
            for name, config in runs.items():
                start = time.perf_counter()
                decode(model, encoded, lengths, config)
                seconds[name].append(time.perf_counter() - start)
    audio_seconds = sum(len(w) for w in waveforms) / model.sample_rate
    print(f"\n{args.model}, batch {args.batch} ({audio_seconds:.1f} s of audio), {args.threads} thread(s), "
          f"median of {args.repeats}, torch {torch.__version__}")
    print("| decoding | decode ms | x no boosting |\n|---|---|---|")
    for name, times in seconds.items():
        base = next(s for s in strategies if name.startswith(s))
        median = statistics.median(times)
        print(f"| {name} | {1000 * median:.1f} | {median / statistics.median(seconds[base]):.2f} |")


if __name__ == "__main__":
    main()
