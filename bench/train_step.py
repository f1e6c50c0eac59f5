"""Where a training step's time goes: features, encoder, predictor + joint, loss, backward, optimiser.

    .venv/bin/python bench/train_step.py --manifest data/synth/train.jsonl --head rnnt --threads 2

Uses the bundled-model shape (d_model 144, 6 layers, BPE 128) on real batches of the synthetic corpus
(``--batch-seconds`` of padded audio each). Prints the median of ``--steps`` steps per phase.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from transdec.losses import transducer_loss
from transdec.model.protocol import HeadSpec
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import ModelConfig, PredictorConfig, TransducerModel
from transdec.training.data import bucketed_batches, collate, read_manifest
from transdec.training.specaugment import SpecAugmentConfig, spec_augment

HEADS = {
    "rnnt": (lambda v: HeadSpec("rnnt", v), PredictorConfig("lstm"), 0.0),
    "tdt": (lambda v: HeadSpec("tdt", v, durations=(0, 1, 2, 3, 4)), PredictorConfig("lstm"), 0.05),
    "multiblank": (lambda v: HeadSpec("multiblank", v, big_blank_durations=(2, 4, 8)), PredictorConfig("stateless"),
                   0.05),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--head", choices=sorted(HEADS), default="rnnt")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-seconds", type=float, default=150.0)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--vocab-size", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)

    entries = read_manifest(args.manifest)[:4000]
    tokenizer = Tokenizer.train([e.text for e in entries], args.vocab_size)
    make_head, predictor, sigma = HEADS[args.head]
    head = make_head(args.vocab_size)
    torch.manual_seed(0)
    model = TransducerModel(ModelConfig(head=head, predictor=predictor, sigma=sigma), tokenizer).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    token_ids = [tokenizer.encode(e.text) for e in entries]
    batches = bucketed_batches([e.duration for e in entries], args.batch_seconds, seed=0, epoch=0)
    generator = torch.Generator().manual_seed(0)
    phases: dict[str, list[float]] = {}
    utterances, audio = [], []

    for step, indices in enumerate(batches[: args.steps + 1]):
        batch = collate(entries, indices, token_ids, model.sample_rate)
        times = [time.perf_counter()]
        with torch.no_grad():
            features, lengths = model.features(batch.waveforms, batch.waveform_lengths)
            features = spec_augment(features, lengths, SpecAugmentConfig(), generator)
        times.append(time.perf_counter())
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            encoded, enc_lengths = model.encode_features(features, lengths)
            times.append(time.perf_counter())
            logits = model.joint(encoded, model.predictor(batch.targets))
        times.append(time.perf_counter())
        loss = transducer_loss(head, logits.float(), batch.targets, enc_lengths, batch.target_lengths, sigma=sigma)
        times.append(time.perf_counter())
        optimizer.zero_grad()
        loss.backward()
        times.append(time.perf_counter())
        optimizer.step()
        times.append(time.perf_counter())
        if step == 0:
            continue  # warm-up
        for name, (a, b) in zip(["features+specaug", "encoder fwd", "predictor+joint fwd", "loss fwd", "backward",
                                 "optimizer"], zip(times, times[1:])):
            phases.setdefault(name, []).append(b - a)
        phases.setdefault("total", []).append(times[-1] - times[0])
        utterances.append(len(indices))
        audio.append(float(batch.waveform_lengths.sum()) / model.sample_rate)

    print(f"head {args.head}, {model.num_parameters() / 1e6:.2f} M parameters, {args.threads} threads, "
          f"bf16 {args.bf16}, median of {len(utterances)} steps, {statistics.median(utterances)} utterances "
          f"({statistics.median(audio):.0f} s of audio) per step")
    total = statistics.median(phases["total"])
    print("| phase | seconds | share |\n|---|---|---|")
    for name, values in phases.items():
        print(f"| {name} | {statistics.median(values):.3f} | {100 * statistics.median(values) / total:.0f}% |")


if __name__ == "__main__":
    main()
