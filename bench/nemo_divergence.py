"""Where and why NeMo's and transdec's float32 greedy tokens part (``bench/nemo_check.py --investigate SEEDS``).

For every utterance whose tokens differ, NeMo's decoder is run again with every step recorded (blanks too, with
its float32 logits as computed in the batch). Walking NeMo's steps against transdec's output (tokens, timestamps,
TDT durations) gives the first step that transdec's output rules out. Along the steps since the last token both
agree on, each NeMo decision is compared with the same step evaluated in float64 (the float32 weights and frames,
computed exactly enough to order the logits); the smallest float64 top-2 margin there is where a float32 rounding
could have turned the decision. A difference is a near-tie when that margin is no larger than the numeric
difference between the two implementations (~1e-6 for float32 rounding, ~1e-4 for TF32 products), and a bug when
the decisions that differ are clear in float64 (large margins).

Found on a 2-core CPU (torch 2.13, NeMo 3.0.0, transdec b2cb393 plus working tree, parakeet-sized random decoder,
utterances of 5-20 s, max 10 symbols per frame):

* plain float32, NeMo's defaults (log-softmax on CPU), B=32: 1 of 2,560 RNN-T and 0 of 2,560 TDT utterances differ.
  The one: NeMo's log-softmaxed float32 values of two labels were equal (margin 0), float64 puts them 4.2e-7 apart;
  NeMo took the lower index, transdec and the float64 reference the other.
* raw logits (NeMo's CUDA behaviour, ``--log-softmax off``), B=128: 0 of 2,560 RNN-T, 0 of 2,560 TDT.
* NeMo's LSTM with TF32 operands (``--emulate-tf32-lstm``; B=128, raw logits, 512 utterances per head): rounded
  3 RNN-T and 2 TDT utterances, truncated 9 (1.8%) and 5 (1.0%), against 4/128 and 2/128 seen on an H100. Every
  one is a single NeMo decision that float64 calls otherwise, a label near-tie (float64 margins 2.8e-6 to 1.9e-4;
  the TDT durations there were clear, margins 0.28 to 0.95), and the float64 reference decodes as transdec does.
* margins (``--margins 4``, 128 utterances): the smallest top-2 logit margin along an utterance is below 1e-5 in
  none, below 1e-4 in 1 (RNN-T) / 3 (TDT, label or duration), below 1e-3 in 35 / 45: disagreement rates of 2-3%
  point to logit differences between 1e-4 and 1e-3, far above float32 rounding (~1e-6) and of the size that TF32
  products in the LSTM give.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

import nemo_greedy
import transdec
from transdec.decoding import DecodingConfig

MAX_SYMBOLS = 10


@dataclass
class Step:
    """One NeMo decision on an utterance: frame, label, TDT duration, and the margins that decided it."""

    index: int
    frame: int
    label: int
    duration: int | None
    tokens_before: int
    nemo_label_margin: float  # top-1 minus top-2 of NeMo's recorded float32 label logits
    nemo_duration_margin: float | None
    f64_label: int
    f64_duration: int | None
    f64_label_margin: float
    f64_duration_margin: float | None
    tdec_label: int  # transdec's float32 decision at this step, evaluated at batch 1 on the CPU
    tdec_duration: int | None


def top2_margin(values: torch.Tensor) -> tuple[int, float]:
    """``(argmax, top-1 minus top-2)`` of a 1-D tensor."""
    top = values.double().topk(2)
    return int(top.indices[0]), float(top.values[0] - top.values[1])


class Replay:
    """Joint logits of one utterance at (tokens emitted so far, frame), from transdec modules at batch 1."""

    def __init__(self, model, frames: torch.Tensor) -> None:
        self.model = model
        self.encoder_proj = model.joint.project_encoder(frames.to(model.joint.output.weight.dtype).unsqueeze(0))[0]
        self.predictor_proj = []  # after 0, 1, 2, ... tokens
        self.state = model.predictor.initial_state(1)
        self._feed(model.head.predictor_blank_id)

    def _feed(self, label: int) -> None:
        out, self.state = self.model.predictor.step(torch.tensor([label]), self.state)
        self.predictor_proj.append(self.model.joint.project_predictor(out)[0])

    @torch.inference_mode()
    def logits(self, tokens: list[int], count: int, frame: int) -> torch.Tensor:
        while len(self.predictor_proj) <= count:
            self._feed(tokens[len(self.predictor_proj) - 1])
        return self.model.joint.combine(self.encoder_proj[frame], self.predictor_proj[count])


def nemo_steps(recorded, b: int, head) -> list[tuple[int, int, int | None, torch.Tensor]]:
    """``(frame, label, duration, logits [C])`` of every step NeMo took on row ``b`` (blanks included), on the CPU."""
    n = int(recorded.current_lengths[b])
    frames, labels = recorded.timestamps[b, :n].tolist(), recorded.transcript[b, :n].tolist()
    all_logits = recorded.logits[b, :n].cpu()
    steps = []
    for frame, label, logits in zip(frames, labels, all_logits):
        duration = head.durations[int(logits[head.num_labels :].argmax())] if head.kind == "tdt" else None
        steps.append((frame, label, duration, logits))
    return steps


def analyse(model32, model64, head, frames, ours, steps) -> dict:
    """The first NeMo step that transdec's output rules out, and the closest call since the last common token."""
    replay64, replay32 = Replay(model64, frames), Replay(model32, frames)
    tokens, timestamps, durations = ours.tokens, ours.timestamps, ours.durations
    emitted, segment, nemo_tokens = 0, [], []
    for index, (frame, label, duration, logits) in enumerate(steps):
        z64 = replay64.logits(nemo_tokens, emitted, frame)
        z32 = replay32.logits(nemo_tokens, emitted, frame)
        labels = slice(0, head.num_labels)
        rest = slice(head.num_labels, None)
        f64_label, f64_margin = top2_margin(z64[labels])
        _, nemo_margin = top2_margin(logits[labels])
        step = Step(index, frame, label, duration, emitted, nemo_margin, None, f64_label, None, f64_margin, None,
                    int(z32[labels].argmax()), None)
        if head.kind == "tdt":
            d64, step.f64_duration_margin = top2_margin(z64[rest])
            step.f64_duration = head.durations[d64]
            step.nemo_duration_margin = top2_margin(logits[rest])[1]
            step.tdec_duration = head.durations[int(z32[rest].argmax())]
        segment.append(step)
        is_token = label < head.num_tokens
        if is_token:
            consistent = (emitted < len(tokens) and tokens[emitted] == label and timestamps[emitted] == frame
                          and (head.kind != "tdt" or durations[emitted] == duration))
        else:
            advance = max(duration, 1) if head.kind == "tdt" else 1
            consistent = not (emitted < len(tokens) and frame <= timestamps[emitted] < frame + advance)
        if not consistent:
            return {"first_inconsistent": step, "segment": segment, "token_index": emitted}
        if is_token:
            nemo_tokens.append(label)
            emitted += 1
            segment = []
    return {"first_inconsistent": None, "segment": segment, "token_index": emitted}


def deciding_margin(step: Step) -> float:
    """The smaller float64 top-2 margin of a step (label, and duration for TDT)."""
    if step.f64_duration_margin is None:
        return step.f64_label_margin
    return min(step.f64_label_margin, step.f64_duration_margin)


def describe(step: Step, head) -> str:
    text = (f"step {step.index} frame {step.frame} after {step.tokens_before} tokens: NeMo label {step.label} "
            f"(f32 margin {step.nemo_label_margin:.2e}), float64 label {step.f64_label} (margin {step.f64_label_margin:.2e}), "
            f"transdec CPU b=1 f32 label {step.tdec_label}")
    if head.kind == "tdt":
        text += (f"; NeMo duration {step.duration} (f32 margin {step.nemo_duration_margin:.2e}), float64 duration "
                 f"{step.f64_duration} (margin {step.f64_duration_margin:.2e}), transdec CPU b=1 f32 duration {step.tdec_duration}")
    return text


def investigate(args, build, batches, log_softmax) -> None:
    """Decode ``args.investigate`` seeds in float32 with both decoders on ``args.device`` and explain each difference.

    The replays (float64, and transdec at batch 1 in float32) run on the CPU.
    """
    batch_size = max(int(b) for b in args.batch_sizes.split(","))
    device = torch.device(args.device)
    graphs = args.graphs != "off"
    if args.emulate_tf32_lstm and device.type != "cpu":
        raise ValueError("--emulate-tf32-lstm is a CPU experiment; on a GPU set --cudnn-rnn-precision instead")
    for size in args.sizes.split(","):
        for kind in args.heads.split(","):
            model32, encoder_dim = build(size, kind, args.seed)  # CPU, for the replays; not modified
            model64 = copy.deepcopy(model32).double()
            model = copy.deepcopy(model32).to(device)
            head = model32.head
            greedy = nemo_greedy.nemo_greedy(model, device, cuda_graphs=graphs, max_symbols_per_step=MAX_SYMBOLS,
                                             log_softmax=log_softmax)
            if args.emulate_tf32_lstm:
                emulate_tf32_lstm(greedy, args.emulate_tf32_lstm)
            recorder = None
            config = DecodingConfig(strategy="greedy_label", max_symbols_per_frame=MAX_SYMBOLS)
            total = differing = 0
            near_ties = []
            for seed in range(args.investigate):
                for encoder_out, lengths in batches(args.utterances, encoder_dim, batch_size, 10_000 + 1000 * seed,
                                                    torch.float32, device):
                    ours = transdec.decode(model, encoder_out, lengths, config).hypotheses()
                    theirs = nemo_greedy.nemo_decode(greedy, encoder_out, lengths)
                    total += len(ours)
                    rows = [b for b, (o, t) in enumerate(zip(ours, theirs)) if o.tokens != t]
                    if not rows:
                        continue
                    if recorder is None:
                        recorder = nemo_greedy.nemo_greedy(model, device, max_symbols_per_step=MAX_SYMBOLS,
                                                           log_softmax=log_softmax, preserve_alignments=True)
                        if args.emulate_tf32_lstm:
                            emulate_tf32_lstm(recorder, args.emulate_tf32_lstm)
                    recorded = nemo_greedy.nemo_decode_batched(recorder, encoder_out, lengths)
                    assert nemo_greedy.batched_tokens(nemo_greedy.nemo_decode_batched(greedy, encoder_out, lengths),
                                                      len(ours)) == theirs
                    for b in rows:
                        differing += 1
                        frames = encoder_out[b, : int(lengths[b])].double().cpu()
                        steps = nemo_steps(recorded, b, head)
                        recorded_tokens = [label for _, label, _, _ in steps if label < head.num_tokens]
                        result = analyse(model32, model64, head, frames, ours[b], steps)
                        segment = result["segment"]
                        closest = min(segment, key=deciding_margin)
                        flips = [s for s in segment if s.f64_label != s.label or (s.duration is not None and s.f64_duration != s.duration)]
                        near_ties.append(deciding_margin(closest))
                        print(f"[{size} {kind} seed {seed} row {b} T={int(lengths[b])}] tokens transdec {len(ours[b].tokens)} / "
                              f"NeMo {len(theirs[b])}; recorded run same tokens: {recorded_tokens == theirs[b]}; "
                              f"first differing token index {result['token_index']}")
                        if result["first_inconsistent"] is not None:
                            print("   first NeMo step transdec's output rules out: " + describe(result["first_inconsistent"], head))
                        print("   closest float64 call since the last common token: " + describe(closest, head))
                        print(f"   NeMo steps in that stretch that disagree with float64: {len(flips)}"
                              + (f" (first: {describe(flips[0], head)})" if flips else "")
                              + f"; float64 reference path agrees with: {reference_side(model64, frames, ours[b].tokens, theirs[b])}",
                              flush=True)
            print(f"== {size} {kind}: {differing} of {total} utterances differ (float32, {device.type}, B={batch_size}, "
                  f"{args.investigate} seeds, NeMo graphs {nemo_greedy.cuda_graphs_mode(greedy) if graphs else 'off'}"
                  f"{f', NeMo LSTM with TF32 operands ({args.emulate_tf32_lstm})' if args.emulate_tf32_lstm else ''}); "
                  f"smallest float64 margins at the deciding steps: {[f'{m:.1e}' for m in sorted(near_ties)]}", flush=True)


def reference_side(model64, frames: torch.Tensor, ours: list[int], theirs: list[int]) -> str:
    """Which float32 output the float64 per-utterance reference decoder reproduces."""
    config = DecodingConfig(strategy="greedy_reference", max_symbols_per_frame=MAX_SYMBOLS)
    reference = transdec.decode(model64, frames.unsqueeze(0), torch.tensor([frames.shape[0]]), config).hypotheses()[0].tokens
    return {(True, False): "transdec", (False, True): "NeMo", (True, True): "both", (False, False): "neither"}[
        (reference == ours, reference == theirs)
    ]


def margin_profile(args, build, batches) -> None:
    """How close the greedy decisions come to ties: per utterance, the smallest top-2 margin of NeMo's raw float32
    logits over every step it takes (labels, and TDT durations), counted against thresholds.

    An utterance whose smallest margin is below the size of a rounding difference between two implementations
    can decode differently; the share of utterances below each threshold says what size of difference a given
    disagreement rate points to.
    """
    thresholds = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
    batch_size = max(int(b) for b in args.batch_sizes.split(","))
    for size in args.sizes.split(","):
        for kind in args.heads.split(","):
            model32, encoder_dim = build(size, kind, args.seed)
            head = model32.head
            device = torch.device(args.device)
            recorder = nemo_greedy.nemo_greedy(copy.deepcopy(model32).to(device), device, max_symbols_per_step=MAX_SYMBOLS,
                                               log_softmax=False, preserve_alignments=True)
            smallest = {"label": [], "duration": []}
            steps_total = 0
            for seed in range(args.margins):
                for encoder_out, lengths in batches(args.utterances, encoder_dim, batch_size, 10_000 + 1000 * seed,
                                                    torch.float32, device):
                    recorded = nemo_greedy.nemo_decode_batched(recorder, encoder_out, lengths)
                    for b in range(encoder_out.shape[0]):
                        n = int(recorded.current_lengths[b])
                        logits = recorded.logits[b, :n].double()
                        steps_total += n
                        top = logits[:, : head.num_labels].topk(2, dim=-1).values
                        smallest["label"].append(float((top[:, 0] - top[:, 1]).min()))
                        if kind == "tdt":
                            top = logits[:, head.num_labels :].topk(2, dim=-1).values
                            smallest["duration"].append(float((top[:, 0] - top[:, 1]).min()))
            count = len(smallest["label"])
            print(f"== {size} {kind}: {count} utterances, {steps_total} steps ({steps_total / count:.0f} per utterance); "
                  "utterances whose smallest top-2 margin of raw float32 logits is below:")
            for name, values in smallest.items():
                if values:
                    print(f"   {name:8s} " + ", ".join(f"{t:.0e}: {sum(v < t for v in values)}" for t in thresholds))
            if kind == "tdt":
                either = [min(a, b) for a, b in zip(smallest["label"], smallest["duration"])]
                print("   either   " + ", ".join(f"{t:.0e}: {sum(v < t for v in either)}" for t in thresholds))


def round_to_tf32(x: torch.Tensor, truncate: bool = False) -> torch.Tensor:
    """float32 values reduced to TF32 (10 explicit mantissa bits), still stored as float32: rounded to nearest,
    or with ``truncate`` the low 13 bits dropped (what tensor cores do with float32 data given to them as TF32)."""
    bits = x.contiguous().view(torch.int32)
    if not truncate:
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32)


class TF32LSTM(torch.nn.Module):
    """An ``nn.LSTM`` (seq-first, no projection) whose matrix products see TF32-rounded operands and accumulate
    in float32: what cuDNN may do with a float32 LSTM on an Ampere or newer GPU when
    ``torch.backends.cudnn.rnn.fp32_precision == "tf32"`` (PyTorch's default). A CPU emulation, for experiments.
    """

    def __init__(self, lstm: torch.nn.LSTM, truncate: bool = False) -> None:
        super().__init__()
        self.lstm = lstm
        self.truncate = truncate

    def forward(self, x: torch.Tensor, state=None):
        lstm = self.lstm
        steps, batch, _ = x.shape
        if state is None:
            zeros = x.new_zeros(lstm.num_layers, batch, lstm.hidden_size)
            state = (zeros, zeros)
        h, c = list(state[0].unbind(0)), list(state[1].unbind(0))
        outputs = []
        for t in range(steps):
            layer_input = x[t]
            for layer in range(lstm.num_layers):
                tf32 = lambda x: round_to_tf32(x, self.truncate)  # noqa: E731
                w_ih = tf32(getattr(lstm, f"weight_ih_l{layer}"))
                w_hh = tf32(getattr(lstm, f"weight_hh_l{layer}"))
                gates = (tf32(layer_input) @ w_ih.t() + tf32(h[layer]) @ w_hh.t()
                         + getattr(lstm, f"bias_ih_l{layer}") + getattr(lstm, f"bias_hh_l{layer}"))
                i, f, g, o = gates.chunk(4, dim=-1)
                c[layer] = f.sigmoid() * c[layer] + i.sigmoid() * g.tanh()
                h[layer] = o.sigmoid() * c[layer].tanh()
                layer_input = h[layer]
            outputs.append(layer_input)
        return torch.stack(outputs), (torch.stack(h), torch.stack(c))


def emulate_tf32_lstm(greedy, mode: str) -> None:
    """Make a NeMo greedy decoder's predictor LSTM compute as :class:`TF32LSTM` (CPU experiments only);
    ``mode`` is ``"round"`` or ``"truncate"``."""
    rnn = greedy.decoder.prediction["dec_rnn"]
    rnn.lstm = TF32LSTM(rnn.lstm, truncate=mode == "truncate")
