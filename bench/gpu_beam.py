"""Beam search on a GPU beside greedy decoding and beside NeMo, decoder only and whole system, with and without an
n-gram LM; and the LM's scoring of every token for a batch of states beside one joint call.

    python bench/gpu_beam.py --output beam.md

The decoder is the parakeet-sized random one of ``bench/greedy.py`` (LSTM 2x640, joint 640, 1024 tokens, blank
logits shifted until greedy decoding emits about 0.4 tokens per frame) on random encoder frames. The whole system
adds parakeet-tdt-0.6b's front end and encoder shapes: NeMo's mel front end (128 bins) and a FastConformer (24
layers, d_model 1024, 8x depthwise-striding subsampling) with random weights under bf16 autocast
(``--encoder-dtype``), run on ``--utterances`` random speech-like signals of 5-20 s; the decoder then reads random
frames of the encoder output's shape (a random-weight encoder's frames make nearly every decision of a random
decoder a near-tie). The LM is a synthetic 4-gram over the 1024 tokens (``bench/ngram_lm.py``'s, about
``--lm-ngrams`` n-grams), fused with weight ``--lm-weight``.

For each batch size and head, in one process, each row runs once alone (graph capture; a failing row is named and
dropped), then ``--repeats`` times in turn, the median reported:

* decoder only: transdec greedy label-looping (CUDA graphs), greedy with the LM, ALSD++ (``beam_alsd_pp``,
  ``--beam-size``, ``merge="logsumexp"`` as NeMo merges) with ``cuda_graphs`` off / step_graphs / while_loops,
  ALSD++ with the LM; greedy and ALSD++ while_loops with the joint as PyTorch operations instead of its kernel
  (``transdec.decoding.cuda.joint_kernel``); NeMo 3.0.0's label-looping greedy and ``malsd_batch`` beam search with CUDA graphs, without
  and with its NGPU-LM on the same ARPA file, on the same weights (``bench/nemo_greedy.py``), when NeMo imports;
* decoder only: AES++ (``beam_aes_pp``, the same beam and merge, its default expansion) and, on RNN-T, batched
  WIND beam search (``beam_wind_batched``, window 8) in each graph mode;
* decoder only, with phrase boosting: greedy and ALSD++ with a boosting tree of ``--boost-phrases`` random
  phrases (2-5 tokens) fused;
* whole system (features + encoder + decoder): greedy, ALSD++, ALSD++ with the LM.

The LM table times, for ``--lm-states`` random states x 1024 tokens: transdec's level walk (its CPU path), the
fixed-shape ``searchsorted`` resolution and the Triton kernel (``transdec.lm.ngram_kernels``), NeMo's NGPU-LM
``advance`` (all tokens' scores and next states), and one joint call of the decoder on as many rows; each eagerly
(one call per launch) and replayed from a CUDA graph of 20 calls (the time a call costs inside a graphed search).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import greedy as greedy_bench  # noqa: E402  (the parakeet-sized random decoder)
import ngram_lm as lm_bench  # noqa: E402  (the synthetic ARPA files)
from gpu import describe, load_nemo  # noqa: E402

from transdec.adapters.nemo_encoder import NemoConformerEncoder, NemoEncoderConfig  # noqa: E402
from transdec.adapters.nemo_features import NemoMelConfig, NemoMelFrontEnd  # noqa: E402
from transdec.biasing import Boost, BoostingTree  # noqa: E402
from transdec.decoding import DecodingConfig, Fusion, decode  # noqa: E402
from transdec.lm import NGramLM, ngram_kernels  # noqa: E402

SAMPLE_RATE = 16000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", default="rnnt,tdt")
    parser.add_argument("--batch-sizes", default="32,128")
    parser.add_argument("--utterances", type=int, default=128)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--lm-ngrams", type=int, default=150_000, help="size of the synthetic 4-gram LM")
    parser.add_argument("--lm-weight", type=float, default=0.02,
                        help="small, so that the random decoder emits about as many tokens as without the LM")
    parser.add_argument("--lm-states", type=int, default=128)
    parser.add_argument("--boost-phrases", type=int, default=1000, help="random phrases of the boosting rows")
    parser.add_argument("--encoder-layers", type=int, default=24)
    parser.add_argument("--encoder-dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-nemo", action="store_true")
    parser.add_argument("--skip", default="", help="comma-separated parts to leave out: decoders, frames (the AES++ "
                        "and WIND beam rows), system, lm")
    parser.add_argument("--output", default=None, help="also write the tables (markdown) here")
    parser.add_argument("--device", default="cuda", help="cpu only checks that the script runs")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


# ----------------------------------------------------------------------------------------------- the system

def random_boost(count: int, vocab_size: int, seed: int, device: torch.device) -> Boost:
    """A boosting tree of ``count`` random phrases of 2-5 tokens, weight 1 (so about as many nodes as a list of
    ``count`` names), on ``device``."""
    generator = torch.Generator().manual_seed(seed)
    phrases = [(torch.randint(0, vocab_size, (int(torch.randint(2, 6, (), generator=generator)),),
                              generator=generator).tolist(), 1.0) for _ in range(count)]
    return Boost(BoostingTree.build([phrases], vocab_size, device=device), 1.0)


def front_end_and_encoder(layers: int, device: torch.device) -> tuple[NemoMelFrontEnd, NemoConformerEncoder]:
    """parakeet-tdt-0.6b's front end and encoder shapes with random weights (NeMo's initialisation is not
    needed for timing; LayerNorms keep the activations in range)."""
    torch.manual_seed(0)
    mel = NemoMelFrontEnd(NemoMelConfig(num_mel_bins=128, n_fft=512, normalize="none", preemph=0.97))
    encoder = NemoConformerEncoder(NemoEncoderConfig(
        feat_in=128, n_layers=layers, d_model=1024, n_heads=8, subsampling="dw_striding", subsampling_factor=8,
        subsampling_conv_channels=256, conv_kernel_size=9, xscaling=False))
    return mel.to(device).eval(), encoder.to(device).eval()


def speech_like_audio(count: int, seed: int) -> list[torch.Tensor]:
    """``count`` waveforms of 5-20 s: noise shaped by a random syllable-rate envelope and a few formant-like tones."""
    generator = torch.Generator().manual_seed(seed)
    waves = []
    for seconds in (5.0 + 15.0 * torch.rand(count, generator=generator)).tolist():
        n = int(seconds * SAMPLE_RATE)
        t = torch.arange(n) / SAMPLE_RATE
        envelope = torch.sin(2 * math.pi * (2 + 4 * torch.rand(1, generator=generator)) * t).abs()
        tones = sum(torch.sin(2 * math.pi * float(f) * t) for f in 200 + 2000 * torch.rand(3, generator=generator))
        noise = torch.randn(n, generator=generator)
        waves.append((0.1 * envelope * (tones + 0.5 * noise)).clamp(-1, 1))
    return waves


def audio_batches(waves: list[torch.Tensor], batch_size: int, device: torch.device):
    batches = []
    for start in range(0, len(waves), batch_size):
        chunk = waves[start : start + batch_size]
        padded = torch.nn.utils.rnn.pad_sequence(chunk, batch_first=True)
        batches.append((padded.to(device), torch.tensor([len(w) for w in chunk], device=device)))
    return batches


def encoder_runner(mel, encoder, dtype: torch.dtype):
    def encode(waves: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.inference_mode():
            features, frames = mel(waves, lengths)
            with torch.autocast(waves.device.type, dtype=dtype, enabled=dtype != torch.float32):
                out, out_lengths = encoder(features, frames)
        return out.float(), out_lengths

    return encode


def calibrated_decoder(head, probe: list[tuple[torch.Tensor, torch.Tensor]], target: float, seed: int, device):
    """The parakeet-sized random decoder whose greedy token rate on ``probe`` encoder outputs is closest to
    ``target`` tokens per frame."""
    frames = sum(int(n.sum()) for _, n in probe)
    low, high = 0.3, 0.999
    for _ in range(9):
        blank_rate = (low + high) / 2
        model = greedy_bench.build_model(head, blank_rate, seed).to(device)
        tokens = sum(int(decode(model, f, n).hyps.lengths.sum()) for f, n in probe)
        low, high = (blank_rate, high) if tokens / frames > target else (low, blank_rate)
    return greedy_bench.build_model(head, (low + high) / 2, seed).to(device)


# ------------------------------------------------------------------------------------------------ runners

def transdec_runner(model, batches, config: DecodingConfig, joint_kernel: bool = True):
    """Decodes every batch; the best tokens of the last pass land in ``outputs``. ``joint_kernel=False``: the
    graphs compute the joint with PyTorch operations instead of ``transdec.decoding.cuda.joint_kernel``."""
    outputs: list[list[int]] = []

    def run() -> None:
        outputs.clear()
        os.environ["TRANSDEC_JOINT_KERNEL"] = "1" if joint_kernel else "0"
        for frames, lengths in batches:
            outputs.extend(h.tokens for h in decode(model, frames, lengths, config).hypotheses())

    return run, outputs


def system_runner(model, waves_in, batches, config: DecodingConfig, encode):
    """Features and encoder on each batch of waveforms, then the decoder on ``batches``' random frames of the
    encoder's output shape: a random-weight encoder's frames make nearly every decision of a random decoder a
    near-tie, so the decisions come from the calibrated random frames, and the encoder contributes its time."""
    outputs: list[list[int]] = []

    def run() -> None:
        outputs.clear()
        for (inputs, lengths), (frames, frame_lengths) in zip(waves_in, batches, strict=True):
            encoded, _ = encode(inputs, lengths)
            outputs.extend(h.tokens for h in decode(model, frames, frame_lengths, config).hypotheses())

    return run, outputs


def nemo_runner(call, batches):
    outputs: list[list[int]] = []

    def run() -> None:
        outputs.clear()
        for frames, lengths in batches:
            outputs.extend(call(frames, lengths))

    return run, outputs


def same(a: list[list[int]], b: list[list[int]]) -> str:
    return f"{sum(x == y for x, y in zip(a, b))}/{len(b)}"


# --------------------------------------------------------------------------------------------- the LM table

def timed_calls(call, repeats: int = 200, graph_calls: int = 20) -> tuple[float, float | None]:
    """Microseconds per call: eagerly (``repeats`` calls, synchronised at the ends), and replayed from a CUDA
    graph holding ``graph_calls`` calls (None where the call cannot be captured)."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    torch.cuda.synchronize()
    eager = (time.perf_counter() - start) / repeats * 1e6
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            call()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(graph_calls):
                call()
        graph.replay()
        torch.cuda.synchronize()
        replays = max(1, repeats // graph_calls)
        start = time.perf_counter()
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
        graphed = (time.perf_counter() - start) / (replays * graph_calls) * 1e6
    except Exception as error:  # the level walk reads sizes back: not capturable, by design
        print(f"# not capturable: {type(error).__name__}: {str(error)[:120]}", flush=True)
        graphed = None
        torch.cuda.synchronize()
    return eager, graphed


def lm_rows(lm: NGramLM, nemo_lm, model, states_count: int, seed: int) -> list[str]:
    generator = torch.Generator().manual_seed(seed)
    device = lm.device
    states = torch.randint(0, lm.backoff.shape[0], (states_count,), generator=generator).to(device)
    reference = lm.all_logprobs(states).gather(1, lm.token_column.expand(states_count, -1))
    calls = {
        "transdec level walk (CPU path)": lambda: lm.all_logprobs(states).gather(1, lm.token_column.expand(states_count, -1)),
        "transdec searchsorted (fixed shape)": lambda: ngram_kernels.token_logprobs_searched(lm, states),
    }
    if ngram_kernels.kernel_available(device):
        calls["transdec Triton kernel"] = lambda: ngram_kernels.token_logprobs_kernel(lm, states)
    if nemo_lm is not None:
        nemo_states = torch.randint(0, nemo_lm.num_states, (states_count,), generator=generator).to(device)
        calls["NeMo NGPU-LM advance"] = lambda: nemo_lm.advance(nemo_states)
    joint = model.joint
    encoder_proj = torch.randn(states_count, joint.output.in_features, device=device)
    predictor_proj = torch.randn_like(encoder_proj)
    calls[f"joint call, {states_count} rows"] = lambda: joint.combine(encoder_proj, predictor_proj)
    rows = [f"| scoring {states_count} states x {lm.vocab_size} tokens | eager us/call | in a CUDA graph us/call | "
            "/ joint (graph) | equal to the level walk |", "|---|---|---|---|---|"]
    results = {}
    with torch.inference_mode():
        for name, call in calls.items():
            results[name] = timed_calls(call)
        joint_graphed = results[f"joint call, {states_count} rows"][1]
        for name, (eager, graphed) in results.items():
            check = "-"
            if name.startswith("transdec"):
                check = str(torch.allclose(calls[name](), reference, rtol=1e-6, atol=1e-5))
            ratio = f"{graphed / joint_graphed:.2f}x" if graphed and joint_graphed else "-"
            rows.append(f"| {name} | {eager:.1f} | {'-' if graphed is None else f'{graphed:.1f}'} | {ratio} | {check} |")
            print(rows[-1], flush=True)
    return rows


# ------------------------------------------------------------------------------------------------------ main

def timed_rows(runners: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each runner: each warmed up alone first (synchronised, so that a failing row is named
    and dropped), then all timed in turn ``repeats`` times."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    working = {}
    for name, run in runners.items():
        try:
            run()
            sync()
            working[name] = run
        except Exception as error:
            print(f"# {name} failed: {type(error).__name__}: {str(error)[:300]}", flush=True)
    samples: dict[str, list[float]] = {name: [] for name in working}
    for _ in range(repeats):
        for name, run in working.items():
            sync()
            start = time.perf_counter()
            run()
            sync()
            samples[name].append(time.perf_counter() - start)
    return {name: sorted(values)[len(values) // 2] for name, values in samples.items()}


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    skip = set(filter(None, args.skip.split(",")))
    encoder_dtype = getattr(torch, args.encoder_dtype)
    lines = [f"# {describe(device)}; encoder under {args.encoder_dtype} autocast"]
    print(lines[0], flush=True)
    nemo = load_nemo(args.no_nemo)
    workdir = Path(tempfile.mkdtemp())
    arpa = workdir / "lm.arpa"
    start = time.perf_counter()
    count = lm_bench.synthetic_arpa(arpa, args.lm_ngrams, 4, seed=args.seed)
    lm = NGramLM.load(arpa, 1024, device=device)
    nemo_lm = nemo.nemo_ngram_lm(str(arpa), 1024, device) if nemo is not None else None
    print(f"# LM: {count:,} n-grams (order 4), made and loaded in {time.perf_counter() - start:.1f} s", flush=True)

    waves = speech_like_audio(args.utterances, args.seed)
    seconds_of_audio = sum(len(w) for w in waves) / SAMPLE_RATE
    mel, encoder = front_end_and_encoder(args.encoder_layers, device)
    encode = encoder_runner(mel, encoder, encoder_dtype)
    sample_lengths = torch.tensor([len(w) for w in waves])
    frame_lengths = encoder.output_lengths(mel.num_frames(sample_lengths)).tolist()
    models = {}
    for kind in args.heads.split(","):
        probe = [(f.to(device), n.to(device)) for f, n in greedy_bench.make_batches(frame_lengths[:8], 8, args.seed + 1)]
        models[kind] = calibrated_decoder(greedy_bench.HEADS[kind], probe, 0.4, args.seed, device)
    lm_table = []
    if "lm" not in skip and device.type == "cuda":
        lm_table = lm_rows(lm, nemo_lm, next(iter(models.values())), args.lm_states, args.seed)

    lines.append(f"\n{args.utterances} utterances, {seconds_of_audio:.0f} s of audio; beam {args.beam_size}; "
                 f"LM {count:,} 4-grams, weight {args.lm_weight}; median of {args.repeats}.")
    header = ("| head | B | row | RTFx | time / greedy (same part) | tokens/frame | same best tokens as NeMo "
              "malsd (with LM: as NeMo malsd + LM) |")
    table = [header, "|---|---|---|---|---|---|---|"]
    fusion = [Fusion(lm, args.lm_weight)]
    boost = [random_boost(args.boost_phrases, 1024, args.seed, device)]
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
        waves_in = audio_batches(waves, batch_size, device)
        batches = [(f.to(device), n.to(device)) for f, n in greedy_bench.make_batches(frame_lengths, batch_size, args.seed)]
        for kind, model in models.items():
            runners, outputs = {}, {}

            def add(name, pair):
                runners[name], outputs[name] = pair

            beam = dict(beam_size=args.beam_size, merge="logsumexp")  # NeMo's malsd recombines by log-sum-exp
            if "decoders" not in skip:
                add("greedy", transdec_runner(model, batches, DecodingConfig()))
                add("greedy, PyTorch joint", transdec_runner(model, batches, DecodingConfig(), joint_kernel=False))
                add("greedy + LM", transdec_runner(model, batches, DecodingConfig(fusions=fusion)))
                for mode in ("off", "step_graphs", "while_loops"):
                    add(f"ALSD++ {mode}", transdec_runner(model, batches, DecodingConfig(
                        "beam_alsd_pp", cuda_graphs=mode, **beam)))
                add("ALSD++ while_loops, PyTorch joint", transdec_runner(model, batches, DecodingConfig(
                    "beam_alsd_pp", cuda_graphs="while_loops", **beam), joint_kernel=False))
                add("ALSD++ + LM", transdec_runner(model, batches, DecodingConfig("beam_alsd_pp", fusions=fusion, **beam)))
                for mode in ("off", "step_graphs", "while_loops") if "frames" not in skip else ():
                    add(f"AES++ {mode}", transdec_runner(model, batches, DecodingConfig(
                        "beam_aes_pp", cuda_graphs=mode, **beam)))
                    if kind == "rnnt":
                        add(f"WIND beam {mode}", transdec_runner(model, batches, DecodingConfig(
                            "beam_wind_batched", cuda_graphs=mode, window_size=8, **beam)))
                add("greedy + boost", transdec_runner(model, batches, DecodingConfig(fusions=boost)))
                add("ALSD++ + boost", transdec_runner(model, batches, DecodingConfig("beam_alsd_pp", fusions=boost,
                                                                                     **beam)))
                if nemo is not None:
                    greedy = nemo.nemo_greedy(model, device, cuda_graphs=True)
                    add("NeMo greedy", nemo_runner(lambda f, n, g=greedy: nemo.batched_tokens(
                        nemo.nemo_decode_batched(g, f, n), f.shape[0]), batches))
                    for name, with_lm in (("NeMo malsd", False), ("NeMo malsd + LM", True)):
                        searcher = nemo.nemo_beam(model, device, beam_size=args.beam_size, cuda_graphs=True,
                                                  lm=nemo_lm if with_lm else None, lm_weight=args.lm_weight)
                        add(name, nemo_runner(lambda f, n, s=searcher: nemo.nemo_beam_best(s, f, n), batches))
            if "system" not in skip:
                add("system: greedy", system_runner(model, waves_in, batches, DecodingConfig(), encode))
                add("system: ALSD++", system_runner(model, waves_in, batches, DecodingConfig("beam_alsd_pp", **beam),
                                                    encode))
                add("system: ALSD++ + LM", system_runner(
                    model, waves_in, batches, DecodingConfig("beam_alsd_pp", fusions=fusion, **beam), encode))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                times = timed_rows(runners, args.repeats)
            for message in sorted({str(w.message)[:300] for w in caught}):
                print(f"# warning: {message}", flush=True)
            frames = sum(int(n.sum()) for _, n in batches)
            for name, seconds in times.items():
                base = "system: greedy" if name.startswith("system") else (
                    "NeMo greedy" if name.startswith("NeMo") else "greedy")
                ratio = f"{seconds / times[base]:.2f}x" if base in times else "-"
                nemo_name = "NeMo malsd + LM" if "LM" in name else "NeMo malsd"
                compared = nemo_name in times and name.startswith(("ALSD", "AES", "WIND")) and "boost" not in name
                agree = same(outputs[name], outputs[nemo_name]) if compared else "-"
                rate = sum(len(t) for t in outputs[name]) / frames
                table.append(f"| {kind} | {batch_size} | {name} | {seconds_of_audio / seconds:,.0f} | {ratio} | "
                             f"{rate:.3f} | {agree} |")
                print(table[-1], flush=True)
            for ours, theirs in (("ALSD++ while_loops", "NeMo malsd"), ("ALSD++ + LM", "NeMo malsd + LM"),
                                 ("greedy", "NeMo greedy")):
                if ours in times and theirs in times:
                    line = f"| {kind} | {batch_size} | **{ours} / {theirs} speed** | **{times[theirs] / times[ours]:.2f}x** | | | |"
                    table.append(line)
                    print(line, flush=True)
    lines += ["", *lm_table, "", *table]
    print("\n".join(lines))
    if args.output:
        with open(args.output, "w") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
