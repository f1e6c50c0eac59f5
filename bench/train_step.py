"""Where a training step's time goes, with the full lattice loss and with the pruned loss, side by side.

    .venv/bin/python bench/train_step.py --manifest data/synth/train.jsonl --head rnnt --prune-ranges 0 5
    python3 bench/train_step.py --manifest ... --device cuda --bf16 --prune-ranges 5 --lattices loop kernel
    .venv/bin/python bench/train_step.py --manifest data/synth/train.jsonl --threads 1 --prune-ranges 5 \
        --precisions float32 bf16
    python3 bench/train_step.py --manifest ... --device cuda --bf16 --prune-ranges 5 --lattices kernel \
        --pad-to-seconds 0 1 --steps 40

Uses the bundled-model shape (d_model 144, 4 layers, LSTM / joint 320, BPE 256) on real batches of the
synthetic corpus (``--batch-seconds`` of padded audio each). Every batch is trained once per setting in turn
(``--prune-ranges``, 0 = the full lattice; each setting has its own copy of the model and optimiser), so all
settings see the same batches under the same machine load. Prints the median of ``--steps`` steps per phase.
On a GPU, ``--lattices loop kernel`` also compares the lattice recursions as frame loops and as Triton kernels
(:mod:`transdec.losses.lattice_kernels`).
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import statistics
import time

import torch

from transdec.model.conformer import ConformerConfig
from transdec.model.joint import SimpleJoint
from transdec.protocol import HeadSpec
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import ModelConfig, PredictorConfig, TransducerModel
from transdec.runtime import configure_malloc
from transdec.training.data import bucketed_batches, collate, padding_multiples, read_training_manifest
from transdec.training.specaugment import SpecAugmentConfig
from transdec.training.trainer import TrainConfig, training_loss

HEADS = {
    "rnnt": (lambda v: HeadSpec("rnnt", v), PredictorConfig("lstm", 320), 0.0),
    "tdt": (lambda v: HeadSpec("tdt", v, durations=(0, 1, 2, 3, 4)), PredictorConfig("lstm", 320), 0.05),
    "multiblank": (lambda v: HeadSpec("multiblank", v, big_blank_durations=(2, 4, 8)),
                   PredictorConfig("stateless", 320), 0.05),
}
PHASES = ["forward (features, encoder, predictor, joint, losses)", "backward", "optimiser"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--head", choices=sorted(HEADS), default="rnnt")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-seconds", type=float, default=100.0)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--vocab-size", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prune-ranges", type=int, nargs="+", default=[0, 5],
                        help="settings to compare: 0 = full lattice, S > 0 = pruned loss with S rows per frame")
    parser.add_argument("--lattices", nargs="+", choices=["loop", "kernel"], default=["loop"],
                        help="lattice recursions to compare (kernel: Triton, CUDA only)")
    parser.add_argument("--layouts", nargs="+", choices=["channels_last", "contiguous"], default=["channels_last"],
                        help="memory layouts of the subsampling convolutions to compare")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precisions", nargs="+", choices=["float32", "bf16"], default=["float32"],
                        help="encoder precisions to compare (bf16: autocast of the encoder, as `transdec train --bf16`)")
    parser.add_argument("--bf16", action="store_true", help="short for --precisions bf16")
    parser.add_argument("--pad-to-seconds", type=float, nargs="+", default=[0.0],
                        help="batch paddings to compare (`transdec train --pad-to-seconds`; 0 = none): on CUDA, "
                             "padded shapes repeat and cuDNN reuses its plans (compare with enough --steps)")
    parser.add_argument("--json", help="also write the medians here: {setting: {phase: seconds}}")
    args = parser.parse_args()
    if args.bf16:
        args.precisions = ["bf16"]
    device = torch.device(args.device)
    configure_malloc("keep")  # as `transdec train` does
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)

    entries = read_training_manifest(args.manifest)[:4000]
    tokenizer = Tokenizer.train([e.text for e in entries], args.vocab_size)
    make_head, predictor, sigma = HEADS[args.head]
    torch.manual_seed(0)
    model = TransducerModel(ModelConfig(head=make_head(args.vocab_size), predictor=predictor, sigma=sigma,
                                        encoder=ConformerConfig(num_layers=args.layers, dropout=0.0),
                                        joint_dim=320), tokenizer).train()
    runs = {}
    for prune_range, lattice, layout, precision, pad in itertools.product(
            args.prune_ranges, args.lattices, args.layouts, args.precisions, args.pad_to_seconds):
        config = TrainConfig("", "", "", prune_range=prune_range, prune_warmup_steps=0, bf16=precision == "bf16",
                             specaugment=SpecAugmentConfig(time_masks=2))
        run_model = copy.deepcopy(model).to(device)
        run_model.encoder.subsampling.set_memory_format(
            torch.channels_last if layout == "channels_last" else torch.contiguous_format)
        simple_joint = SimpleJoint(144, predictor.hidden_size, args.vocab_size).to(device) if prune_range else None
        parameters = list(run_model.parameters()) + (list(simple_joint.parameters()) if simple_joint else [])
        optimizer = torch.optim.AdamW(parameters, lr=1e-4)
        name = "full lattice" if prune_range == 0 else f"pruned {prune_range}"
        if len(args.lattices) > 1:
            name += f", {lattice}"
        if len(args.layouts) > 1:
            name += f", {layout}"
        if len(args.precisions) > 1:
            name += f", {precision}"
        if len(args.pad_to_seconds) > 1:
            name += f", padded to {pad:g} s multiples" if pad else ", unpadded"
        runs[name] = (lattice, pad, config, run_model, simple_joint, optimizer,
                      {phase: [] for phase in PHASES + ["total"]})
    token_ids = [tokenizer.encode(e.text) for e in entries]
    # Batches as the most-padded setting makes them (same size per padded length), the same rows for every setting;
    # more epochs (each shuffled differently) where one has too few batches for --steps.
    batches, epoch = [], 0
    while len(batches) <= args.steps:
        batches += bucketed_batches([e.duration for e in entries], args.batch_seconds, seed=0, epoch=epoch,
                                    pad_seconds=max(args.pad_to_seconds))
        epoch += 1
    utterances, audio = [], []

    def now() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    for step, indices in enumerate(batches[: args.steps + 1]):
        padded = {pad: collate(entries, [[i] for i in indices], token_ids, model.sample_rate, 0.0,
                               *padding_multiples(pad, model.sample_rate)).to(device) for pad in args.pad_to_seconds}
        for lattice, pad, config, run_model, simple_joint, optimizer, phases in runs.values():
            batch = padded[pad]
            os.environ["TRANSDEC_LATTICE"] = lattice
            generator = torch.Generator().manual_seed(step)
            times = [now()]
            loss, _ = training_loss(run_model, batch, config, generator, simple_joint, step=10**6)
            times.append(now())
            optimizer.zero_grad()
            loss.backward()
            times.append(now())
            optimizer.step()
            times.append(now())
            if step == 0:
                continue  # warm-up
            for name, (a, b) in zip(PHASES, zip(times, times[1:])):
                phases[name].append(b - a)
            phases["total"].append(times[-1] - times[0])
        if step:
            utterances.append(len(indices))
            audio.append(float(batch.waveform_lengths.sum()) / model.sample_rate)

    print(f"head {args.head}, {model.num_parameters() / 1e6:.2f} M parameters, {args.device}, {args.threads} threads, "
          f"{'bf16 encoder, ' if args.precisions == ['bf16'] else ''}median of "
          f"{len(utterances)} steps, {statistics.median(utterances)} utterances ({statistics.median(audio):.0f} s "
          "of audio) per step")
    names = list(runs)
    print("| phase, seconds | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for phase in PHASES + ["total"]:
        cells = [f"{statistics.median(run[-1][phase]):.3f}" for run in runs.values()]
        print(f"| {phase} | " + " | ".join(cells) + " |")
    print("| all steps, summed | " + " | ".join(f"{sum(run[-1]['total']):.3f}" for run in runs.values()) + " |")
    baseline = statistics.median(next(iter(runs.values()))[-1]["total"])
    print("| step speed vs first | " + " | ".join(
        f"{baseline / statistics.median(run[-1]['total']):.2f}x" for run in runs.values()) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: {phase: statistics.median(times) for phase, times in run[-1].items()}
                       for name, run in runs.items()}, f)


if __name__ == "__main__":
    main()
