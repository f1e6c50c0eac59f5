"""Greedy CTC decoding of a hybrid model's CTC head, as a strategy beside the Transducer ones.

Hybrid RNN-T/CTC models (NeMo's ``EncDecHybridRNNTCTCBPEModel``, transdec models trained with a CTC head) share
one encoder between a Transducer and a linear CTC head over the same ``V`` tokens and the blank (last). The best
label of each frame is taken, repeats merged and blanks dropped; a token's timestamp is the first frame of its
run and its log-prob that frame's; the score is the sum of the frames' best log-probs (the best path's).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import DecodingOptions
from transdec.decoding.registry import takes_options
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion
from transdec.protocol import DecodingModel


@takes_options(DecodingOptions)
@torch.inference_mode()
def ctc_greedy(model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: DecodingOptions,
               fusions: Sequence[Fusion] = ()) -> DecodingResult:
    """Decode ``encoder_out [B, T, D]`` with valid ``lengths [B]`` by the model's ``ctc`` head (a module mapping
    ``[B, T, D]`` to logits ``[B, T, V + 1]``, blank last)."""
    lengths = checked_lengths(encoder_out, lengths)
    ctc = getattr(model, "ctc", None)
    if ctc is None:
        raise ValueError("ctc_greedy needs a model with a CTC head (a hybrid RNN-T/CTC model); this one has none")
    if fusions:
        raise ValueError("ctc_greedy does not take language-model fusion")
    log_probs = ctc(encoder_out).float().log_softmax(-1)  # [B, T, V + 1]
    if log_probs.shape[-1] != model.head.num_tokens + 1:
        raise ValueError(f"the CTC head has {log_probs.shape[-1]} outputs; the model has "
                         f"{model.head.num_tokens} tokens and the blank")
    best_logprobs, best = log_probs.max(-1)  # [B, T]
    blank = model.head.num_tokens
    hypotheses = []
    for labels, scores, length in zip(best.tolist(), best_logprobs.tolist(), lengths.tolist()):
        hyp = Hypothesis(score=sum(scores[:length]))
        for t in range(length):
            if labels[t] != blank and (t == 0 or labels[t - 1] != labels[t]):
                hyp.tokens.append(labels[t])
                hyp.timestamps.append(t)
                hyp.durations.append(0)
                hyp.token_logprobs.append(scores[t])
        hypotheses.append(hyp)
    return DecodingResult(BatchedHyps.from_hypotheses(hypotheses, encoder_out.device, encoder_out.dtype),
                          DecodingStats())
