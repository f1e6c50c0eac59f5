"""Training loop: AdamW with warm-up and cosine decay, SpecAugment, duration buckets, gradient clipping,
resumable checkpoints, periodic greedy WER on a dev set, and checkpoint averaging.

An experiment folder holds everything::

    exp_dir/train_config.json   how the run was started
    exp_dir/tokenizer.model     BPE model trained on the training transcripts (or the one given, or the
                                tokenizer of the model named by ``init_from``, unless only its
                                encoder is taken)
    exp_dir/checkpoints/step-000400.pt ...   the last few training states (model, optimiser, data position)
    exp_dir/log.jsonl           loss, learning rate and dev WER over time

Running the same command again resumes from the newest checkpoint: the same batches in the same order,
the same learning rate, the elapsed training time carried on.

Batches are read by background threads while the previous one trains (on ``device``, CPU or GPU). A run
can be given a fixed time instead of a fixed number of steps (``budget_minutes``): the learning-rate decay
then follows elapsed training time, which is what a fixed share of a borrowed machine calls for. Such a run
resumes correctly but does not replay bit for bit, since its schedule depends on timing.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.nn.functional as F

from transdec.decoding import DecodingConfig
from transdec.decoding.options import option
from transdec.loading import load_model
from transdec.losses import transducer_loss
from transdec.losses.pruned import pruned_transducer_loss
from transdec.manifest import ManifestEntry
from transdec.metrics import word_error_rate
from transdec.model.checkpoint import save_model
from transdec.model.joint import SimpleJoint
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import ModelConfig, TransducerModel
from transdec.training.data import (Batch, bucketed_batches, collate, load_entry, long_form_rows, padding_multiples,
                                    read_training_manifest, row_seconds)
from transdec.training.specaugment import SpecAugmentConfig, spec_augment
from transdec.transcribe import transcribe

TRAIN_STATE_FORMAT = "transdec-train-state"


@dataclass
class TrainConfig:
    """How to train (the model's shape is a separate :class:`~transdec.model.transducer_model.ModelConfig`).

    Each field's ``metadata["help"]`` documents it and is the help of its ``transdec train`` flag
    (``peak_lr`` -> ``--peak-lr``; see :mod:`transdec.training.flags`).
    """

    train_manifest: str = option(MISSING, "JSONL manifest of the training utterances")
    dev_manifest: str = option(MISSING, "JSONL manifest of the utterances whose WER is reported during training")
    exp_dir: str = option(MISSING, "run directory: tokenizer, checkpoints and log (a run in it is resumed)")
    max_steps: int = option(20000, "training steps; with --budget, the most")
    peak_lr: float = option(2e-3, "learning rate at the end of the warm-up")
    warmup_steps: int = option(800, "steps of linear learning-rate warm-up")
    final_lr_ratio: float = option(0.02, "the learning rate's cosine decay ends at this share of --peak-lr")
    weight_decay: float = option(1e-3, "AdamW weight decay")
    batch_seconds: float = option(150.0, "padded audio seconds per batch")
    max_duration: float = option(16.0, "skip longer training utterances; long-form rows may be longer")
    long_form_share: float = option(
        0.0, "join this share of the utterances (0-1) into long-form rows, so that the model learns the attention "
             "span of long recordings", metavar="SHARE")
    long_form_seconds: float = option(40.0, "the longest long-form row", metavar="SECONDS")
    long_form_pause: float = option(0.3, "silence between the utterances of a long-form row", metavar="SECONDS")
    grad_clip: float = option(1.0, "clip the gradient's norm to this")
    ctc_weight: float = option(0.3, "weight of the auxiliary CTC loss; transdec train gives a new model a CTC "
                                    "head only where it is above 0")
    specaugment: SpecAugmentConfig = field(default_factory=SpecAugmentConfig)
    bf16: bool = option(False, "bfloat16 autocast for the encoder (on a CPU its linear layers only, ~1.5x faster "
                               "steps)")
    eval_every: int = option(500, "steps between dev WER evaluations")
    save_every: int = option(200, "steps between checkpoints")
    keep_checkpoints: int = option(5, "newest checkpoints kept")
    log_every: int = option(25, "steps between log lines")
    seed: int = option(1, "seed of the initial weights, the batch order and SpecAugment")
    threads: int | None = option(None, "intra-op CPU threads (default: one per core)")
    time_limit_minutes: float | None = option(None, "save and stop after this many minutes (resume later)",
                                              flag="time_limit", metavar="MINUTES")
    device: str = option("cpu", "cpu or cuda")
    budget_minutes: float | None = option(
        None, "train for this much time in all: the learning-rate decay follows elapsed training time instead of "
              "--max-steps (which still caps the run)", flag="budget", metavar="MINUTES")
    loader_threads: int = option(2, "threads reading the next batches")
    init_from: str | None = option(
        None, "start a new run from this model file's weights and tokenizer (names and shapes that match are copied; "
              "a TDT joint gets an RNN-T joint's label rows)", metavar="MODEL")
    init_encoder_only: bool = option(False, "with --init-from: copy only the encoder; the tokenizer is trained anew "
                                            "(--vocab-size)")
    prune_range: int = option(
        0, "train with the pruned loss: the joint only on this many lattice rows per frame, placed by a trivial "
           "joint's alignments (0, the default: the full lattice)", metavar="ROWS")
    simple_loss_scale: float = option(0.5, "pruned loss: weight of the simple loss once warmed up")
    prune_warmup_steps: int = option(500, "pruned loss: steps over which its weight rises from 0.1 to 1 (and the "
                                          "simple loss's falls to --simple-loss-scale)")
    reload_manifest: bool = option(False, "read the training manifest again at each epoch, e.g. while its corpus is "
                                          "synthesised")
    # Padding makes batch shapes repeat. cuDNN builds a convolution plan for every new input shape (and caches
    # it per shape): the likely reason convolutions took ~90 ms a call on an H100 with the GPU idle.
    pad_to_seconds: float | None = option(
        None, "pad each batch's audio to a multiple of this many seconds (and its tokens to a multiple of 16) so "
              "that batch shapes repeat and cuDNN reuses its plans (default: 1 on CUDA, else 0: no padding)",
        metavar="SECONDS")

    def __post_init__(self) -> None:
        # Settled here, so that train_config.json records the padding the run used.
        if self.pad_to_seconds is None:
            self.pad_to_seconds = 1.0 if self.device.startswith("cuda") else 0.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        data = dict(data)
        return cls(specaugment=SpecAugmentConfig(**data.pop("specaugment")), **data)


def learning_rate(step: int, config: TrainConfig, train_seconds: float = 0.0) -> float:
    """Linear warm-up to ``peak_lr``, then cosine decay to ``final_lr_ratio * peak_lr`` at ``max_steps`` (or,
    with ``budget_minutes``, when that much training time has passed)."""
    if step < config.warmup_steps:
        return config.peak_lr * (step + 1) / config.warmup_steps
    if config.budget_minutes is not None:
        progress = min(1.0, train_seconds / (60 * config.budget_minutes))
    else:
        progress = min(1.0, (step - config.warmup_steps) / max(1, config.max_steps - config.warmup_steps))
    floor = config.final_lr_ratio
    return config.peak_lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def pruned_loss_weights(step: int, config: TrainConfig) -> tuple[float, float]:
    """``(pruned, simple)`` loss weights at ``step``: while the simple joint learns where the alignments are
    (its bands are poor at first), the pruned loss counts little and the simple loss fully (as in icefall)."""
    progress = min(1.0, step / config.prune_warmup_steps) if config.prune_warmup_steps else 1.0
    return 0.1 + 0.9 * progress, 1.0 - progress * (1.0 - config.simple_loss_scale)


def training_loss(model: TransducerModel, batch: Batch, config: TrainConfig, generator: torch.Generator,
                  simple_joint: SimpleJoint | None = None,
                  step: int = 0) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Transducer loss (plus weighted auxiliary CTC) of one batch, mean over utterances; the batch is on the
    model's device. With ``config.prune_range``, the transducer loss is the pruned loss (``simple_joint``
    places its bands) plus the simple loss, weighted by :func:`pruned_loss_weights` at ``step``. The parts
    are detached scalars, read only when logged (reading one waits for the GPU)."""
    with torch.no_grad():
        features, frame_counts = model.features(batch.waveforms, batch.waveform_lengths)
        features = spec_augment(features, frame_counts, config.specaugment, generator)
    with torch.autocast(batch.waveforms.device.type, dtype=torch.bfloat16, enabled=config.bf16):
        encoded, lengths = model.encode_features(features, frame_counts)
    # Predictor and joint stay in float32: they are cheap, oneDNN has no bfloat16 LSTM, and bfloat16 logits
    # of magnitude ~20 would carry errors of ~0.1 into the loss.
    predicted = model.predictor(batch.targets)
    encoded = encoded.float()
    if config.prune_range:
        if simple_joint is None:
            raise ValueError("the pruned loss (prune_range > 0) needs a simple joint")
        pruned, simple = pruned_transducer_loss(
            model.head, model.joint, encoded, predicted, *simple_joint(encoded, predicted),
            batch.targets, lengths, batch.target_lengths, config.prune_range, sigma=model.config.sigma)
        pruned_weight, simple_weight = pruned_loss_weights(step, config)
        loss = pruned_weight * pruned + simple_weight * simple
        parts = {"transducer": pruned.detach(), "simple": simple.detach()}
    else:
        logits = model.joint(encoded, predicted)  # [B, T, U + 1, C]
        loss = transducer_loss(model.head, logits, batch.targets, lengths, batch.target_lengths,
                               sigma=model.config.sigma)
        parts = {"transducer": loss.detach()}
    if config.ctc_weight and model.ctc is not None:
        log_probs = model.ctc(encoded).log_softmax(-1).transpose(0, 1)  # [T, B, V + 1]
        ctc = F.ctc_loss(log_probs, batch.targets, lengths, batch.target_lengths, blank=model.head.num_tokens,
                         reduction="sum", zero_infinity=True) / len(batch.indices)
        parts["ctc"] = ctc.detach()
        loss = loss + config.ctc_weight * ctc
    return loss, parts


def transfer_weights(model: torch.nn.Module, source: dict[str, torch.Tensor]) -> list[str]:
    """Copy ``source`` weights into ``model`` where names match; returns one line per tensor not copied whole.

    A tensor whose shape differs only in its first dimension gets the leading rows both have: this carries
    an RNN-T joint's label outputs (tokens, then blank) over to a TDT joint, whose extra rows are the
    duration logits, which keep their fresh initialisation.
    """
    notes = []
    with torch.no_grad():
        for name, target in model.state_dict().items():
            weights = source.get(name)
            if weights is None:
                notes.append(f"{name}: not in the source, left as initialised")
            elif weights.shape == target.shape:
                target.copy_(weights)
            elif weights.shape[1:] == target.shape[1:]:
                rows = min(weights.shape[0], target.shape[0])
                target[:rows].copy_(weights[:rows])
                notes.append(f"{name}: first {rows} of {target.shape[0]} rows copied")
            else:
                notes.append(f"{name}: shape {tuple(weights.shape)} in the source, {tuple(target.shape)} here; "
                             "left as initialised")
    return notes


def transcribe_entries(model: TransducerModel, entries: list[ManifestEntry], batch_size: int = 32,
                       decoding: DecodingConfig | None = None) -> list[str]:
    """Greedy transcripts of manifest entries, in manifest order."""
    was_training = model.training
    model.eval()
    waveforms = [load_entry(e, model.sample_rate) for e in entries]
    texts = [t.text for t in transcribe(model, waveforms, decoding, batch_size)]
    model.train(was_training)
    return texts


class Trainer:
    """Runs (or resumes) one experiment. See the module docstring for the folder layout."""

    def __init__(self, config: TrainConfig, model_config: ModelConfig | None = None,
                 tokenizer: Tokenizer | None = None) -> None:
        self.config = config
        self.exp_dir = Path(config.exp_dir)
        self.checkpoint_dir = self.exp_dir / "checkpoints"
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self.train_entries = self.read_train_manifest()
        self.dev_entries = read_training_manifest(config.dev_manifest)

        latest = self.latest_checkpoint()
        state: dict[str, Any] | None = None
        if latest is not None:
            state = torch.load(latest, map_location="cpu", weights_only=True)
            model_config = ModelConfig.from_dict(state["model_config"])
            tokenizer = Tokenizer.from_bytes(state["tokenizer"])
        elif model_config is None:
            raise ValueError(f"{self.exp_dir} holds no checkpoint to resume; a model config is needed to start")
        source = None
        if state is None and config.init_from is not None:
            source = load_model(config.init_from)
            if not config.init_encoder_only:
                if source.head.num_tokens != model_config.head.num_tokens:
                    raise ValueError(
                        f"{config.init_from} has {source.head.num_tokens} tokens, this run "
                        f"{model_config.head.num_tokens}; copying embeddings and outputs needs the same tokenizer "
                        "(take only the encoder instead)")
                tokenizer = source.tokenizer  # the copied embeddings and outputs only mean anything with its tokens
                tokenizer.save(self.exp_dir / "tokenizer.model")
        if tokenizer is None:
            tokenizer = Tokenizer.train([e.text for e in self.train_entries], model_config.head.num_tokens)
            tokenizer.save(self.exp_dir / "tokenizer.model")

        torch.manual_seed(config.seed)
        self.device = torch.device(config.device)
        self.model = TransducerModel(model_config, tokenizer).to(self.device)
        # The pruned loss's simple joint is trained along with the model but is not part of the model file.
        self.simple_joint = SimpleJoint(model_config.encoder.model_dim, model_config.predictor.hidden_size,
                                        model_config.head.num_tokens).to(self.device) if config.prune_range else None
        self.optimizer = torch.optim.AdamW(self.parameters(), lr=config.peak_lr, betas=(0.9, 0.98),
                                           weight_decay=config.weight_decay)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.token_ids = [tokenizer.encode(e.text) for e in self.train_entries]
        self.step, self.epoch, self.batch_in_epoch, self.train_seconds = 0, 0, 0, 0.0
        if state is not None:
            if (self.simple_joint is not None) != ("simple_joint" in state):
                raise ValueError(f"{latest} was saved by a run {'with' if 'simple_joint' in state else 'without'} "
                                 "the pruned loss; resume it with the same --prune-range setting")
            self.model.load_state_dict(state["model"])
            if self.simple_joint is not None:
                self.simple_joint.load_state_dict(state["simple_joint"])
            self.optimizer.load_state_dict(state["optimizer"])  # moves its moments to the parameters' device
            self.generator.set_state(state["generator"])
            self.step, self.epoch = state["step"], state["epoch"]
            self.batch_in_epoch, self.train_seconds = state["batch_in_epoch"], state["train_seconds"]
            print(f"resumed from {latest} (step {self.step}, {self.train_seconds / 60:.1f} min trained)")
        else:
            if source is not None:
                weights = source.state_dict()
                if config.init_encoder_only:
                    weights = {name: w for name, w in weights.items() if name.startswith("encoder.")}
                notes = transfer_weights(self.model, weights)
                print(f"initialised from {config.init_from} ({len(notes)} tensor(s) not copied whole)")
                for line in notes:
                    print(f"  {line}")
            if self.simple_joint is not None and self.model.ctc is not None:
                self.simple_joint.start_from_ctc(self.model.ctc)
            (self.exp_dir / "train_config.json").write_text(json.dumps(
                {"train": dataclasses.asdict(config), "model": model_config.to_dict()}, indent=2))
        self._stop_requested = False

    def read_train_manifest(self) -> list[ManifestEntry]:
        config = self.config
        entries = [e for e in read_training_manifest(config.train_manifest) if e.duration <= config.max_duration]
        if not entries:
            raise ValueError(f"{config.train_manifest}: no utterances of at most {config.max_duration} s")
        return entries

    def parameters(self) -> list[torch.nn.Parameter]:
        """Everything the optimiser trains: the model and, with the pruned loss, the simple joint."""
        extra = list(self.simple_joint.parameters()) if self.simple_joint is not None else []
        return list(self.model.parameters()) + extra

    # ----------------------------------------------------------------------------------------- checkpoints

    def latest_checkpoint(self) -> Path | None:
        checkpoints = sorted(self.checkpoint_dir.glob("step-*.pt"))
        return checkpoints[-1] if checkpoints else None

    def save_checkpoint(self) -> Path:
        path = self.checkpoint_dir / f"step-{self.step:06d}.pt"
        state = {
            "format": TRAIN_STATE_FORMAT,
            "model_config": self.model.config.to_dict(),
            "tokenizer": self.model.tokenizer.to_bytes(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "step": self.step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "train_seconds": self.train_seconds,
        }
        if self.simple_joint is not None:
            state["simple_joint"] = self.simple_joint.state_dict()
        tmp = path.with_name(path.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)
        for old in sorted(self.checkpoint_dir.glob("step-*.pt"))[: -self.config.keep_checkpoints]:
            old.unlink()
        return path

    # ---------------------------------------------------------------------------------------------- loop

    def log(self, record: dict[str, Any]) -> None:
        with open(self.exp_dir / "log.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": self.step, "minutes": round(self.train_seconds / 60, 2), **record}) + "\n")

    def evaluate(self) -> float:
        hyps = transcribe_entries(self.model, self.dev_entries)
        return word_error_rate([e.text for e in self.dev_entries], hyps)

    def batch_positions(self) -> Iterator[tuple[int, int, list[list[int]]]]:
        """``(epoch, batch_in_epoch, rows)`` of every batch from the current position on; a row is the
        utterance indices it joins (see :func:`~transdec.training.data.long_form_rows`) in
        ``self.train_entries`` as it is when the batch is yielded (``reload_manifest`` replaces it between
        epochs)."""
        config = self.config
        durations = [e.duration for e in self.train_entries]
        epoch, position = self.epoch, self.batch_in_epoch
        first_pass = True  # the entries are as read (or resumed with) already
        while True:
            if config.reload_manifest and not first_pass:
                self.train_entries = self.read_train_manifest()
                self.token_ids = [self.model.tokenizer.encode(e.text) for e in self.train_entries]
                durations = [e.duration for e in self.train_entries]
            rows = long_form_rows(durations, config.long_form_share, config.long_form_seconds,
                                  config.long_form_pause, config.seed, epoch)
            seconds = row_seconds(rows, durations, config.long_form_pause)
            batches = bucketed_batches(seconds, config.batch_seconds, config.seed, epoch,
                                       pad_seconds=config.pad_to_seconds)
            for index in range(position, len(batches)):
                yield epoch, index, [rows[i] for i in batches[index]]
            epoch, position, first_pass = epoch + 1, 0, False

    def out_of_time(self) -> bool:
        budget = self.config.budget_minutes
        return budget is not None and self.train_seconds >= 60 * budget

    def train(self) -> None:
        from tqdm import tqdm

        config = self.config
        torch.set_num_threads(config.threads or os.cpu_count() or 1)
        # Subnormal numbers appear in the optimiser's second moments and made CPU steps markedly slower.
        torch.set_flush_denormal(True)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        previous_handler = signal.signal(signal.SIGTERM, self._request_stop)
        session_start = time.monotonic()
        self.model.train()
        # A run with a time budget ends on time, not on max_steps: its bar counts training minutes.
        if config.budget_minutes is not None:
            progress = tqdm(total=config.budget_minutes, initial=round(self.train_seconds / 60, 2), desc="train",
                            unit="min", mininterval=10, bar_format="{l_bar}{bar}| {n:.1f}/{total:.0f} min{postfix}")
        else:
            progress = tqdm(total=config.max_steps, initial=self.step, desc="train", mininterval=10)
        running: dict[str, torch.Tensor] = {}
        positions = self.batch_positions()
        pad_samples, pad_tokens = padding_multiples(config.pad_to_seconds, self.model.sample_rate)
        loader = ThreadPoolExecutor(max(1, config.loader_threads))
        pending: deque[tuple[int, int, Future[Batch]]] = deque()
        try:
            while self.step < config.max_steps and not self.out_of_time() and not self._stop_requested:
                while len(pending) < max(1, config.loader_threads):
                    epoch, index, rows = next(positions)
                    pending.append((epoch, index, loader.submit(
                        collate, self.train_entries, rows, self.token_ids, self.model.sample_rate,
                        config.long_form_pause, pad_samples, pad_tokens)))
                epoch, index, batch = pending.popleft()
                step_start = time.monotonic()
                self._train_step(batch.result(), running)
                self.epoch, self.batch_in_epoch = epoch, index + 1
                self.step += 1
                step_seconds = time.monotonic() - step_start
                self.train_seconds += step_seconds
                progress.update(1 if config.budget_minutes is None
                                else min(step_seconds / 60, max(0.0, progress.total - progress.n)))
                if self.step % config.log_every == 0:
                    averages = {k: round(v.item() / config.log_every, 4) for k, v in running.items()}
                    self.log({"lr": learning_rate(self.step, config, self.train_seconds), **averages})
                    progress.set_postfix(step=self.step, loss=averages.get("loss"))
                    running.clear()
                if self.step % config.eval_every == 0:
                    try:
                        wer = self.evaluate()
                    except Exception as error:  # a diagnostic must not end a long run; say so and go on
                        self.log({"dev_wer_error": repr(error)})
                        progress.write(f"step {self.step}: dev evaluation failed: {error!r}")
                    else:
                        self.log({"dev_wer": round(wer, 4)})
                        progress.write(f"step {self.step}: dev WER {100 * wer:.2f}%")
                if self.step % config.save_every == 0:
                    self.save_checkpoint()
                if config.time_limit_minutes is not None and (
                        time.monotonic() - session_start > 60 * config.time_limit_minutes):
                    break
        except KeyboardInterrupt:
            progress.write("interrupted")
        finally:
            loader.shutdown(wait=True, cancel_futures=True)
            progress.close()
            signal.signal(signal.SIGTERM, previous_handler)
            if self.step > 0:
                print(f"saved {self.save_checkpoint()} (step {self.step}, {self.train_seconds / 60:.1f} min trained)")

    def _train_step(self, batch: Batch, running: dict[str, torch.Tensor]) -> None:
        batch = batch.to(self.device)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.step, self.config, self.train_seconds)
        loss, parts = training_loss(self.model, batch, self.config, self.generator, self.simple_joint, self.step)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.parameters(), self.config.grad_clip)
        if torch.isfinite(grad_norm):  # a rare non-finite batch is skipped rather than poisoning the weights
            self.optimizer.step()
        for key, value in {"loss": loss.detach(), **parts, "grad_norm": grad_norm.detach()}.items():
            running[key] = running[key] + value if key in running else value

    def _request_stop(self, signum: int, frame: Any) -> None:
        self._stop_requested = True


def average_weights(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The mean of state dicts of one shape (in float64, stored in each tensor's dtype); integer buffers from the
    first."""
    averaged = {}
    for name, tensor in states[0].items():
        if tensor.is_floating_point():
            averaged[name] = torch.stack([state[name].double() for state in states]).mean(0).to(tensor.dtype)
        else:
            averaged[name] = tensor
    return averaged


def average_checkpoints(exp_dirs: str | Path | list[str | Path], last: int, output: str | Path, *,
                        half: bool = False, metadata: dict[str, Any] | None = None) -> TransducerModel:
    """Average the weights of the newest ``last`` training checkpoints of each run into one model file.

    Several runs are meant for a run and its continuation on other data (a model soup): starting from one
    another's weights, they stay close enough for their average to be a good model too.
    """
    paths = []
    for exp_dir in [exp_dirs] if isinstance(exp_dirs, (str, Path)) else exp_dirs:
        newest = sorted((Path(exp_dir) / "checkpoints").glob("step-*.pt"))[-last:]
        if not newest:
            raise FileNotFoundError(f"{exp_dir}/checkpoints holds no step-*.pt files")
        paths.extend(newest)
    states = [torch.load(p, map_location="cpu", weights_only=True) for p in paths]
    model = TransducerModel(ModelConfig.from_dict(states[-1]["model_config"]),
                            Tokenizer.from_bytes(states[-1]["tokenizer"]))
    model.load_state_dict(average_weights([s["model"] for s in states]))
    info = {"averaged_steps": [s["step"] for s in states], "train_minutes": round(states[-1]["train_seconds"] / 60, 1),
            "parameters": model.num_parameters(), **(metadata or {})}
    save_model(model, output, half=half, metadata=info)
    return model.eval()
