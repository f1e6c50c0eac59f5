"""Check that NeMo's batched greedy decoders, on transdec's weights (bench/nemo_greedy.py), give transdec's tokens.

Needs NeMo (``nemo-toolkit[asr]==3.0.0``, installed with torch pinned as in constraints.txt, in its own
virtualenv) in the running interpreter, so it is not part of the test suite. From the repository root::

    python bench/nemo_check.py          # the equality check (3 minutes on 2 CPU cores)
    python bench/nemo_check.py --device cuda --graphs both
    python bench/nemo_check.py --investigate 80 --sizes parakeet     # float32 differences
    python bench/nemo_check.py --margins 4 --sizes parakeet          # how close to ties

The check decodes random encoder outputs (utterances of 5-20 s at 80 ms per frame, as bench/greedy.py) with
random decoders: parakeet-sized (LSTM 2x640, joint 640, 1024 tokens, encoder 1024, blank logits shifted for ~0.4
tokens per frame, as bench/greedy.py), small (LSTM 2x32, 64 tokens, ~0.4 tokens per frame) and dense (the small one
emitting ~8 tokens per frame, so that ``max_symbols_per_step`` = 10 forces time forward often); RNN-T and TDT
(durations 0..4); B=1 (8 utterances) and B=32 (32 utterances); float64 and float32. transdec runs
``DecodingConfig(strategy="greedy_label")``; NeMo runs its label-looping ``GreedyBatchedRNNTInfer`` /
``GreedyBatchedTDTInfer``. Tokens and timestamps are compared per utterance, and for TDT at B=1 token durations
(NeMo's batched TDT decoder reports wrong durations at B > 1, a known NeMo bug). A second part calls NeMo's
CUDA-graphs decoder with batches of changing size (on CPU its graph code path runs eagerly).

``--investigate SEEDS`` decodes many batches in float32 and explains each utterance whose tokens differ
(bench/nemo_divergence.py); ``--margins SEEDS`` counts how close the decisions come to ties.
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nemo_greedy  # noqa: E402  (bench/ is on the path now)
from greedy import calibrated_model, utterance_lengths  # noqa: E402

import transdec  # noqa: E402
from transdec.decoding import DecodingConfig  # noqa: E402
from transdec.protocol import HeadSpec  # noqa: E402
from transdec.model.synthetic import random_decoder, random_encoder_output  # noqa: E402

DURATIONS = (0, 1, 2, 3, 4)
MAX_SYMBOLS = 10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", default="small,dense,parakeet")
    parser.add_argument("--heads", default="rnnt,tdt")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--utterances", type=int, default=32, help="utterances per configuration (B=1 decodes 8 of them)")
    parser.add_argument("--graphs", default="off", choices=("off", "on", "both"), help="NeMo CUDA graphs (CUDA only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--investigate", type=int, default=0, metavar="SEEDS", help="float32 disagreement hunt over SEEDS seeds")
    parser.add_argument("--margins", type=int, default=0, metavar="SEEDS",
                        help="how close decisions come to ties over SEEDS seeds (smallest top-2 logit margin per utterance)")
    parser.add_argument("--emulate-tf32-lstm", choices=("round", "truncate"), default=None,
                        help="with --investigate on CPU: NeMo's LSTM reduces its matmul operands to TF32, as cuDNN may on a GPU")
    parser.add_argument("--cudnn-rnn-precision", choices=("tf32", "ieee"), default=None,
                        help="float32 precision of cuDNN RNNs (NeMo's LSTM on a GPU); default: PyTorch's (tf32)")
    parser.add_argument("--log-softmax", default="auto", choices=("auto", "on", "off"),
                        help="NeMo joint's log_softmax: auto = NeMo's default (on CPU only)")
    return parser.parse_args()


@functools.lru_cache(maxsize=None)
def build(size: str, kind: str, seed: int):
    """The random transdec decoder of a size and head kind (float32, CPU; cached: copy before moving or casting it),
    and its encoder width.

    ``parakeet`` and ``small`` emit ~0.4 tokens per frame; ``dense`` is ``small`` with blanks made rare (and for
    TDT duration 0 made common), so that ``max_symbols_per_step`` forces time forward often.
    """
    head = HeadSpec(kind, num_tokens=1024 if size == "parakeet" else 64, durations=DURATIONS if kind == "tdt" else ())
    if size == "parakeet":
        return calibrated_model(head, 0.4, seed), 1024  # LSTM 2x640, joint 640, encoder 1024: bench/greedy.py
    if size not in ("small", "dense"):
        raise ValueError(f"unknown size {size!r}")

    def small(blank_rate: float):
        return random_decoder(head, encoder_dim=32, predictor_dim=32, joint_dim=32, num_layers=2,
                              blank_rate=blank_rate, seed=seed)

    if size == "dense":
        model = small(0.2)
        if kind == "tdt":  # mostly duration 0, so that tokens pile up on one frame
            with torch.no_grad():
                model.joint.output.bias[head.num_labels] += 6.0
        return model, 32
    probe = batches(8, 32, 8, seed + 1, torch.float32, "cpu")[0]
    low, high = 0.05, 0.999  # bisect the blank rate for 0.4 tokens per frame, as bench/greedy.py does
    for _ in range(12):
        model = small((low + high) / 2)
        rate = int(transdec.decode(model, *probe).hyps.lengths.sum()) / int(probe[1].sum())
        low, high = ((low + high) / 2, high) if rate > 0.4 else (low, (low + high) / 2)
    return small((low + high) / 2), 32


def batches(count: int, encoder_dim: int, batch_size: int, seed: int, dtype: torch.dtype, device):
    """``count`` utterances of 5-20 s (each with its own seed), padded into batches of ``batch_size``."""
    lengths = utterance_lengths(count, seed)
    frames = [random_encoder_output([n], encoder_dim, seed=seed + i, dtype=dtype)[0][0] for i, n in enumerate(lengths)]
    out = []
    for start in range(0, count, batch_size):
        chunk = frames[start : start + batch_size]
        out.append((torch.nn.utils.rnn.pad_sequence(chunk, batch_first=True).to(device),
                    torch.tensor(lengths[start : start + batch_size], device=device)))
    return out


def log_softmax_option(args) -> bool | None:
    return {"auto": None, "on": True, "off": False}[args.log_softmax]


def timed(fn, *args):
    """``([seconds], fn(*args))``, synchronising CUDA."""
    result = []
    seconds = nemo_greedy.time_call(lambda: result.append(fn(*args)), (), warmup=0, repeats=1, device=_device(args))
    return seconds, result[0]


def _device(args) -> torch.device:
    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


def compare(model, greedy, encoder_out, lengths, check_durations: bool) -> dict:
    """Per-utterance agreement of transdec's label-looping and NeMo's decoder on one batch."""
    config = DecodingConfig(strategy="greedy_label", max_symbols_per_frame=MAX_SYMBOLS)
    (ours_s,), ours = timed(transdec.decode, model, encoder_out, lengths, config)
    (nemo_s,), theirs = timed(nemo_greedy.nemo_hypotheses, greedy, encoder_out, lengths)
    counts = {"utterances": 0, "tokens": 0, "timestamps": 0, "durations": 0, "emitted": 0, "differing": [],
              "nemo_s": nemo_s, "ours_s": ours_s}
    for b, (hyp, ref) in enumerate(zip(ours.hypotheses(), theirs)):
        tokens = ref.y_sequence.tolist()
        counts["utterances"] += 1
        counts["emitted"] += len(hyp.tokens)
        same_tokens = hyp.tokens == tokens
        counts["tokens"] += same_tokens
        counts["timestamps"] += same_tokens and hyp.timestamps == torch.as_tensor(ref.timestamp).tolist()
        if check_durations:
            counts["durations"] += same_tokens and hyp.durations == torch.as_tensor(ref.token_duration).tolist()
        if not same_tokens:
            counts["differing"].append(b)
    return counts


def models(args, device: torch.device):
    """``(size, head kind, dtype name, dtype, model, encoder dim)`` for every size, head and dtype asked for."""
    for size in args.sizes.split(","):
        for kind in args.heads.split(","):
            base, encoder_dim = build(size, kind, args.seed)
            for dtype_name in args.dtypes.split(","):
                dtype = getattr(torch, dtype_name)
                yield size, kind, dtype_name, dtype, copy.deepcopy(base).to(device=device, dtype=dtype), encoder_dim


def check(args) -> bool:
    device = torch.device(args.device)
    graphs = {"off": [False], "on": [True], "both": [False, True]}[args.graphs]
    ok = True
    print("| size | head | dtype | B | NeMo graphs | utterances | tokens equal | timestamps equal | durations equal | tokens/frame | NeMo s (1st calls) | transdec s (1st calls) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size, kind, dtype_name, dtype, model, encoder_dim in models(args, device):
        for batch_size in (int(b) for b in args.batch_sizes.split(",")):
            count = 8 if batch_size == 1 else args.utterances
            data = batches(count, encoder_dim, batch_size, args.seed + 1000, dtype, device)
            frames = sum(int(lengths.sum()) for _, lengths in data)
            for use_graphs in graphs:
                greedy = nemo_greedy.nemo_greedy(model, device, dtype, cuda_graphs=use_graphs,
                                                 max_symbols_per_step=MAX_SYMBOLS, log_softmax=log_softmax_option(args))
                total = {"utterances": 0, "tokens": 0, "timestamps": 0, "durations": 0, "emitted": 0,
                         "differing": [], "nemo_s": 0.0, "ours_s": 0.0}
                for encoder_out, lengths in data:
                    result = compare(model, greedy, encoder_out, lengths, check_durations=batch_size == 1)
                    for key in total:
                        total[key] += result[key]
                ok &= total["tokens"] == total["utterances"] and total["timestamps"] == total["utterances"]
                durations = f"{total['durations']}/{total['utterances']}" if kind == "tdt" and batch_size == 1 else "-"
                mode = nemo_greedy.cuda_graphs_mode(greedy) if device.type == "cuda" and use_graphs else "off"
                print(f"| {size} | {kind} | {dtype_name} | {batch_size} | {mode} | {total['utterances']} | "
                      f"{total['tokens']} | {total['timestamps']} | {durations} | {total['emitted'] / frames:.2f} | "
                      f"{total['nemo_s']:.2f} | {total['ours_s']:.2f} |"
                      + ("" if total["tokens"] == total["utterances"] else f" differing: {total['differing']}"),
                      flush=True)
    return ok


def check_changing_batches(args) -> bool:
    """NeMo's CUDA-graphs decoder called again and again with batches of changing size and length.

    NeMo keeps the state (and graphs) of the largest batch seen and pads smaller ones into it, and reallocates
    for a larger batch or a longer input. On CUDA this runs the real graphs through :func:`nemo_greedy.nemo_decode`;
    on CPU NeMo's graph path is run eagerly (its ``no_graphs`` test mode: the same stateful code, no capture).
    """
    device = torch.device(args.device)
    batch_sizes = (1, 4, 32, 8, 1, 32, 3)
    ok = True
    for size, kind, dtype_name, dtype, model, encoder_dim in models(args, device):
        greedy = nemo_greedy.nemo_greedy(model, device, dtype, cuda_graphs=True, max_symbols_per_step=MAX_SYMBOLS,
                                         log_softmax=log_softmax_option(args))
        computer = greedy.decoding_computer
        if device.type != "cuda":
            computer.force_cuda_graphs_mode("no_graphs")
        seen = []
        for i, batch_size in enumerate(batch_sizes):
            encoder_out, lengths = batches(batch_size, encoder_dim, batch_size, args.seed + 7 * i, dtype, device)[0]
            if device.type == "cuda":
                theirs = nemo_greedy.nemo_decode(greedy, encoder_out, lengths)
            else:
                with torch.inference_mode():
                    hyps, _ = computer.cuda_graphs_impl(encoder_output=encoder_out, encoder_output_length=lengths)
                theirs = nemo_greedy.batched_tokens(hyps, batch_size)
            config = DecodingConfig(strategy="greedy_label", max_symbols_per_frame=MAX_SYMBOLS)
            ours = [h.tokens for h in transdec.decode(model, encoder_out, lengths, config).hypotheses()]
            same = sum(o == t for o, t in zip(ours, theirs))
            ok &= same == batch_size
            seen.append(f"B={batch_size}: {same}/{batch_size} (state B={computer.state.batch_size}, T={computer.state.max_time})")
        print(f"changing batches, {size} {kind} {dtype_name}, NeMo mode {nemo_greedy.cuda_graphs_mode(greedy)}"
              f"{'' if device.type == 'cuda' else ' (run eagerly on CPU)'}: " + "; ".join(seen), flush=True)
    return ok


def main() -> None:
    args = parse_args()
    warnings.simplefilter("ignore")
    nemo_greedy.quiet_nemo_logging()
    torch.set_num_threads(1)  # NeMo's small-op loop on 2 busy-waiting OpenMP threads was ~100x slower here
    precision = nemo_greedy.cudnn_rnn_fp32_precision(args.cudnn_rnn_precision)
    print(f"# torch {torch.__version__}, device {args.device}, cuDNN RNN float32 precision {precision}, "
          f"cuBLAS float32 matmul precision {torch.get_float32_matmul_precision()}", flush=True)
    if args.margins:
        from nemo_divergence import margin_profile

        margin_profile(args, build, batches)
        return
    if args.investigate:
        from nemo_divergence import investigate

        investigate(args, build, batches, log_softmax_option(args))
        return
    ok = check(args)
    ok &= check_changing_batches(args)
    print("ALL EQUAL" if ok else "SOME DIFFER")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
