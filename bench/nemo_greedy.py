"""NVIDIA NeMo's batched greedy and beam Transducer decoders on a transdec model's weights, for side-by-side benchmarks.

transdec never imports NeMo; this module does, lazily (inside its functions), so that importing it costs
nothing where NeMo is absent. It was written against ``nemo-toolkit==3.0.0``.

* :func:`nemo_modules` copies a transdec ``TransducerDecoder`` (LSTM predictor, RNN-T or TDT head; made by
  :func:`transdec.model.synthetic.random_decoder` or trained) into NeMo's own ``RNNTDecoder`` and
  ``RNNTJoint``. The layouts agree without remapping: embedding ``[V + 1, H]`` with the blank ``V`` as a
  zero padding row, ``nn.LSTM`` weights, joint ``Linear(De, J)``, ``Linear(H, J)``, activation, ``Linear(J, C)``
  with outputs ``V`` tokens, blank, then the TDT duration logits (NeMo's ``num_extra_outputs``).
* :func:`nemo_greedy` builds NeMo's label-looping batched greedy decoder for it (``GreedyBatchedRNNTInfer``
  with ``loop_labels=True``, or ``GreedyBatchedTDTInfer``), with or without CUDA graphs.
* :func:`nemo_decode` runs NeMo's public ``forward`` (Hypothesis objects, as NeMo's own ``transcribe``
  gets them) and returns token ids; :func:`nemo_decode_batched` runs only the decoding loop (NeMo's
  ``decoding_computer``) and leaves the result on the device, which is what ``transdec.decode`` does.
* :func:`nemo_beam` builds NeMo's batched beam search (``malsd_batch``) on the same weights, :func:`nemo_ngram_lm` its
  GPU n-gram LM, and :func:`nemo_beam_best` runs the search and returns the best hypotheses' tokens
  (:func:`nemo_beam_hypotheses`: with their frames and NeMo's scores).
* :func:`time_call` times any decode call fairly on CUDA (warm-up, ``torch.cuda.synchronize``).

CUDA graphs (NeMo's "label-looping with CUDA graphs"): NeMo captures the graphs at the first call and keeps
them for later calls whose batch size and padded length are no larger than the captured ones (at least
375 frames are allocated); a larger batch or a longer input recaptures. A smaller batch replays the graphs of
the larger one, with the extra rows empty but still computed, so time each batch size with its own decoder
object (:func:`nemo_greedy` is cheap; the capture happens in the warm-up call), or call
:func:`reset_cuda_graphs` before warming up a new batch size. On CPU, NeMo silently runs the same algorithm
without graphs.

Numerics: on CPU NeMo's joint applies ``log_softmax`` over all outputs (durations included) before the argmax;
on CUDA it takes the argmax of raw logits (``log_softmax=None``, NeMo's default). transdec takes the argmax of
the log-softmax of the label part. Both are the same argmax up to float rounding, so float32 near-ties may
break differently (see ``bench/nemo_check.py --investigate``). On a GPU, NeMo's LSTM runs in cuDNN, whose float32
RNNs may use TF32 tensor cores by default (``torch.backends.cudnn.rnn.fp32_precision == "tf32"``); transdec's LSTM
step does not use cuDNN. :func:`cudnn_rnn_fp32_precision` reads and sets that switch.

NeMo on a machine without network access (Python 3.12, x86_64, PyTorch already installed): carry the wheels in
``.whl/`` (NeMo 3.0.0 and the packages that image lacks, lightning 2.4.0 among them: the image's 2.6.6 breaks
NeMo's import) and, from the repository root::

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import torch

#: transdec head kinds with a NeMo label-looping greedy decoder here (NeMo's batched multi-blank greedy decoder
#: skips frames by the batch minimum, so its results depend on the batch: not a fair reference).
SUPPORTED_HEADS = ("rnnt", "tdt")


def nemo_modules(
    model: Any,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    log_softmax: bool | None = None,
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """NeMo ``RNNTDecoder`` and ``RNNTJoint`` holding exactly the weights of a transdec decoder.

    Args:
        model: a transdec ``TransducerDecoder`` with an ``LSTMPredictor`` (embedding width = LSTM width, as
            NeMo requires) and a ``JointNetwork``, for an ``rnnt`` or ``tdt`` head.
        device, dtype: where and in what precision the NeMo modules live.
        log_softmax: NeMo's joint option: ``None`` (NeMo's default) normalises on CPU only, ``False`` never,
            ``True`` always.

    Returns:
        ``(decoder, joint)`` in eval mode. ``decoder.predict(labels [B, 1], state)`` gives ``[B, 1, H]`` and
        ``(h, c)`` each ``[L, B, H]``; ``joint.joint_after_projection(f [B, T, J], g [B, U, J])`` gives
        ``[B, T, U, C]`` with ``C = V + 1 + len(durations)``.
    """
    from nemo.collections.asr.modules.rnnt import RNNTDecoder, RNNTJoint

    head, predictor, joint = model.head, model.predictor, model.joint
    if head.kind not in SUPPORTED_HEADS:
        raise ValueError(f"NeMo comparison supports heads {SUPPORTED_HEADS}, not {head.kind!r}")
    if not hasattr(predictor, "lstm"):
        raise ValueError("NeMo's RNNTDecoder is an LSTM predictor; this model's predictor is not an LSTMPredictor")
    lstm = predictor.lstm
    embedding_dim = predictor.embedding.embedding_dim
    if embedding_dim != predictor.hidden_size:
        raise ValueError(f"NeMo's RNNTDecoder needs embedding width = LSTM width, got {embedding_dim} and {predictor.hidden_size}")
    if predictor.blank_id != head.num_tokens:
        raise ValueError("the predictor's blank must be token id V, as in NeMo (blank as pad)")

    nemo_decoder = RNNTDecoder(
        prednet={"pred_hidden": predictor.hidden_size, "pred_rnn_layers": predictor.num_layers, "dropout": 0.0},
        vocab_size=head.num_tokens,
        blank_as_pad=True,
    )
    nemo_joint = RNNTJoint(
        jointnet={
            "encoder_hidden": joint.encoder_dim,
            "pred_hidden": joint.predictor_dim,
            "joint_hidden": joint.encoder_projection.out_features,
            "activation": joint.activation,
            "dropout": 0.0,
        },
        num_classes=head.num_tokens,
        num_extra_outputs=len(head.durations),
        log_softmax=log_softmax,
    )
    # The layouts must agree before any weight is copied: a mismatch is a NeMo change, not a rounding issue.
    if nemo_joint.num_classes_with_blank != head.num_outputs:
        raise RuntimeError(f"NeMo's joint has {nemo_joint.num_classes_with_blank} outputs, transdec's {head.num_outputs}")

    copies = {
        nemo_decoder.prediction["embed"].weight: predictor.embedding.weight,
        nemo_joint.enc.weight: joint.encoder_projection.weight,
        nemo_joint.enc.bias: joint.encoder_projection.bias,
        nemo_joint.pred.weight: joint.predictor_projection.weight,
        nemo_joint.pred.bias: joint.predictor_projection.bias,
        nemo_joint.joint_net[-1].weight: joint.output.weight,
        nemo_joint.joint_net[-1].bias: joint.output.bias,
    }
    nemo_lstm = nemo_decoder.prediction["dec_rnn"].lstm
    for name, source in lstm.named_parameters():
        copies[getattr(nemo_lstm, name)] = source
    if len(list(nemo_lstm.parameters())) != len(list(lstm.parameters())):
        raise RuntimeError("NeMo's LSTM has a different set of parameters")
    with torch.no_grad():
        for target, source in copies.items():
            if target.shape != source.shape:
                raise RuntimeError(f"shape mismatch copying weights: NeMo {tuple(target.shape)}, transdec {tuple(source.shape)}")
            target.copy_(source)
    if nemo_decoder.prediction["embed"].padding_idx != head.num_tokens:
        raise RuntimeError("NeMo's embedding does not pad the blank")
    return nemo_decoder.to(device=device, dtype=dtype).eval(), nemo_joint.to(device=device, dtype=dtype).eval()


def nemo_greedy(
    model: Any,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    *,
    cuda_graphs: bool = False,
    max_symbols_per_step: int | None = 10,
    log_softmax: bool | None = None,
    preserve_alignments: bool = False,
) -> Any:
    """NeMo's label-looping batched greedy decoder on a copy of ``model``'s weights.

    Args:
        model: see :func:`nemo_modules`.
        cuda_graphs: NeMo's ``use_cuda_graph_decoder``; on CUDA with cuda-python (``cuda.bindings``) and a
            driver for CUDA >= 12.6, the whole loop is one graph with conditional nodes ("full_graph"),
            else per-stage graphs ("no_while_loops"). Ignored on CPU. With graphs, ``None`` symbols becomes 10.
        max_symbols_per_step: tokens allowed at one frame before time is forced on; pass the same value as
            transdec's ``DecodingConfig.max_symbols_per_frame`` (its default is 10).
        log_softmax: see :func:`nemo_modules`.
        preserve_alignments: record every step (blanks too) with its logits; slow, for debugging only.

    Returns:
        A ``GreedyBatchedRNNTInfer`` (``loop_labels=True``) or ``GreedyBatchedTDTInfer``; its
        ``decoding_computer`` is the label-looping loop.
    """
    from nemo.collections.asr.parts.submodules.rnnt_greedy_decoding import (
        GreedyBatchedRNNTInfer,
        GreedyBatchedTDTInfer,
    )

    decoder, joint = nemo_modules(model, device, dtype, log_softmax)
    head = model.head
    common = dict(
        decoder_model=decoder,
        joint_model=joint,
        blank_index=head.blank_id,
        max_symbols_per_step=max_symbols_per_step,
        preserve_alignments=preserve_alignments,
        use_cuda_graph_decoder=cuda_graphs,
    )
    if head.kind == "rnnt":
        return GreedyBatchedRNNTInfer(loop_labels=True, **common)
    return GreedyBatchedTDTInfer(durations=list(head.durations), include_duration=True, **common)


def nemo_beam(
    model: Any,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    *,
    beam_size: int = 4,
    cuda_graphs: bool = False,
    max_symbols_per_step: int = 10,
    lm: Any = None,
    lm_weight: float = 0.0,
) -> Any:
    """NeMo's batched ALSD beam search (``malsd_batch``: ``BeamBatchedRNNTInfer`` / ``BeamBatchedTDTInfer``) on a
    copy of ``model``'s weights, scored as transdec's ``beam_alsd_pp`` scores by default: no length normalisation,
    late pruning, and with ``lm`` (an ``NGramGPULanguageModel``, :func:`nemo_ngram_lm`) no LM score on blanks
    (transdec's ``Fusion(lm, lm_weight)``). Its ``decoding_computer`` is the search loop."""
    from nemo.collections.asr.parts.submodules.rnnt_beam_decoding import BeamBatchedRNNTInfer
    from nemo.collections.asr.parts.submodules.tdt_beam_decoding import BeamBatchedTDTInfer

    decoder, joint = nemo_modules(model, device, dtype)
    head = model.head
    common = dict(
        decoder_model=decoder, joint_model=joint, blank_index=head.blank_id, beam_size=beam_size,
        search_type="malsd_batch", score_norm=False, max_symbols_per_step=max_symbols_per_step,
        fusion_models=None if lm is None else [lm], fusion_models_alpha=None if lm is None else [lm_weight],
        blank_lm_score_mode="no_score", pruning_mode="late", allow_cuda_graphs=cuda_graphs,
    )
    if head.kind == "rnnt":
        return BeamBatchedRNNTInfer(**common)
    return BeamBatchedTDTInfer(durations=list(head.durations), **common)


def nemo_ngram_lm(arpa_path: str, vocab_size: int, device: torch.device | str) -> Any:
    """NeMo's GPU n-gram LM (NGPU-LM) from an ARPA file in NeMo's token convention, scored as KenLM scores it
    (no ``<unk>`` renormalisation), as transdec's ``NGramLM`` does."""
    from nemo.collections.asr.parts.submodules.ngram_lm import NGramGPULanguageModel

    return NGramGPULanguageModel.from_arpa(arpa_path, vocab_size=vocab_size, normalize_unk=False).to(device)


def nemo_beam_best(beam: Any, encoder_out: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    """The search loop alone, then each utterance's best hypothesis as token ids: what a caller of
    ``beam_alsd_pp`` gets (transdec's result also holds its hypotheses on the host)."""
    beam.decoder.eval()
    beam.joint.eval()
    with torch.inference_mode():
        batched, _state = beam.decoding_computer(x=encoder_out, out_len=lengths.to(encoder_out.device))
        hypotheses = batched.to_hyps_list(score_norm=False)[: encoder_out.shape[0]]
    return [[int(t) for t in h.y_sequence] for h in hypotheses]


def nemo_beam_hypotheses(beam: Any, encoder_out: torch.Tensor, lengths: torch.Tensor) -> list[Any]:
    """The search loop, then each utterance's best hypothesis as a transdec ``Hypothesis``: tokens, each token's
    frame (TDT: and duration) and NeMo's score of it (its log-sum-exp of the alignments it recombined)."""
    from transdec.decoding.hypothesis import Hypothesis

    beam.decoder.eval()
    beam.joint.eval()
    with torch.inference_mode():
        batched, _state = beam.decoding_computer(x=encoder_out, out_len=lengths.to(encoder_out.device))
        hypotheses = batched.to_hyps_list(score_norm=False)[: encoder_out.shape[0]]
    result = []
    for h in hypotheses:
        tokens = [int(t) for t in h.y_sequence]
        durations = [int(d) for d in h.token_duration] if getattr(h, "token_duration", None) is not None \
            else [0] * len(tokens)
        result.append(Hypothesis(tokens, [int(t) for t in h.timestamp], durations, [], float(h.score)))
    return result


def cuda_graphs_mode(greedy: Any) -> str | None:
    """NeMo's CUDA-graphs mode for this decoder: ``"full_graph"``, ``"no_while_loops"`` or None (no graphs).

    NeMo may fall back from full graphs to ``"no_while_loops"`` at the first call, so read it after a warm-up.
    It is not None on CPU when graphs were asked for, but CPU inputs never use them.
    """
    mode = greedy.decoding_computer.cuda_graphs_mode
    return None if mode is None else str(mode)


def reset_cuda_graphs(greedy: Any) -> None:
    """Drop NeMo's captured graphs and buffers; the next call captures them again for its own batch size."""
    greedy.decoding_computer.reset_cuda_graphs_state()


def nemo_decode(greedy: Any, encoder_out: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    """Token ids per utterance from NeMo's public decoder call.

    Args:
        greedy: from :func:`nemo_greedy`, on the device and dtype of ``encoder_out``.
        encoder_out: ``[B, T, D]`` encoder frames (transdec's layout; NeMo gets a ``[B, D, T]`` view of it).
        lengths: ``[B]`` int64 valid frames per utterance, on the same device.

    Returns:
        ``B`` lists of token ids (blanks excluded). Repeated calls are independent.
    """
    return [hyp.y_sequence.tolist() for hyp in nemo_hypotheses(greedy, encoder_out, lengths)]


def nemo_hypotheses(greedy: Any, encoder_out: torch.Tensor, lengths: torch.Tensor) -> list[Any]:
    """NeMo ``Hypothesis`` objects (``y_sequence``, ``timestamp``, ``token_duration`` for TDT, ``score``).

    NeMo's batched TDT decoder reports wrong ``token_duration`` at B > 1 (its tokens and timestamps are right).
    """
    lengths = lengths.to(encoder_out.device)
    (hypotheses,) = greedy(encoder_output=encoder_out.transpose(1, 2), encoded_lengths=lengths)
    return hypotheses


def nemo_decode_batched(greedy: Any, encoder_out: torch.Tensor, lengths: torch.Tensor) -> Any:
    """Only NeMo's label-looping loop: ``encoder_out [B, T, D]``, ``lengths [B]`` -> NeMo ``BatchedHyps``.

    The result stays on the device: ``transcript [B', N]``, ``timestamps [B', N]`` and ``current_lengths [B']``
    (``B' >= B`` with CUDA graphs captured for a larger batch; rows past ``B`` are empty). This skips what
    :func:`nemo_decode` adds after the loop (building a Python ``Hypothesis`` per utterance and moving each
    one's predictor state to the CPU), so it matches ``transdec.decode``, which also returns device tensors.
    """
    greedy.decoder.eval()
    greedy.joint.eval()
    with torch.inference_mode():
        batched_hyps, _state = greedy.decoding_computer(x=encoder_out, out_len=lengths.to(encoder_out.device))
    return batched_hyps


def batched_tokens(batched_hyps: Any, batch_size: int) -> list[list[int]]:
    """Token ids of the first ``batch_size`` rows of a NeMo ``BatchedHyps`` (one host copy)."""
    lengths = batched_hyps.current_lengths[:batch_size].tolist()
    transcript = batched_hyps.transcript[:batch_size].cpu()
    return [transcript[b, :n].tolist() for b, n in enumerate(lengths)]


def time_call(
    fn: Callable[..., Any], args: Sequence[Any], *, warmup: int = 2, repeats: int = 5, device: torch.device | str | None = None
) -> list[float]:
    """Wall-clock seconds of ``repeats`` calls ``fn(*args)`` after ``warmup`` untimed ones.

    On CUDA every call is bracketed by ``torch.cuda.synchronize`` so that queued kernels count; the warm-up
    calls capture NeMo's CUDA graphs (and let cuDNN/cuBLAS pick their kernels) before timing starts.
    """
    device = torch.device(device) if device is not None else _device_of(args)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn(*args)
    sync()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        sync()
        seconds.append(time.perf_counter() - start)
    return seconds


def _device_of(args: Sequence[Any]) -> torch.device:
    for arg in args:
        if isinstance(arg, torch.Tensor):
            return arg.device
    return torch.device("cpu")


def cudnn_rnn_fp32_precision(precision: str | None = None) -> str:
    """The float32 precision of cuDNN's RNNs (NeMo's LSTM predictor on a GPU; transdec's LSTM step is plain
    matrix products and does not use cuDNN): ``"tf32"`` (PyTorch's default: TF32 tensor cores allowed, ~1e-4
    relative error per product) or ``"ieee"``. With an argument, sets it first. Returns the setting in force.
    """
    rnn = getattr(torch.backends.cudnn, "rnn", None)
    if rnn is not None and hasattr(rnn, "fp32_precision"):  # PyTorch >= 2.9
        if precision is not None:
            rnn.fp32_precision = precision
        return rnn.fp32_precision
    if precision is not None:  # older PyTorch: one switch for all of cuDNN
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    return "tf32" if torch.backends.cudnn.allow_tf32 else "ieee"


def quiet_nemo_logging() -> None:
    """Only errors from NeMo's logger (its import and decoder construction print many warnings)."""
    from nemo.utils import logging as nemo_logging

    nemo_logging.setLevel(nemo_logging.ERROR)
