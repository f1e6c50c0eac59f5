"""Randomly initialised decoders and encoder outputs, for exactness tests and decoder benchmarks."""

from __future__ import annotations

from typing import Literal, Sequence

import torch

from transdec.model.joint import JointNetwork
from transdec.model.predictors import LSTMPredictor, StatelessPredictor
from transdec.protocol import HeadSpec
from transdec.model.transducer_decoder import TransducerDecoder


def random_decoder(
    head: HeadSpec,
    predictor: Literal["lstm", "stateless"] = "lstm",
    *,
    encoder_dim: int = 16,
    predictor_dim: int = 16,
    joint_dim: int = 16,
    num_layers: int = 1,
    context_size: int = 2,
    blank_rate: float | None = None,
    logit_scale: float = 4.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> TransducerDecoder:
    """A decoder with random weights, in eval mode.

    Args:
        blank_rate: if given, every blank logit (standard and big) is shifted so that on random encoder
            frames and random label histories a blank wins the argmax this often: near 1 gives a
            blank-heavy model, near 0 a label-heavy one.
        logit_scale: multiplies the joint's output weights; the default init gives logits so flat that
            the argmax hardly depends on the inputs.
        seed: seeds the initialisation; the global RNG is left untouched.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        vocab = head.num_tokens + 1
        if predictor == "lstm":
            net = LSTMPredictor(vocab, predictor_dim, num_layers=num_layers, blank_id=head.predictor_blank_id)
        elif predictor == "stateless":
            net = StatelessPredictor(vocab, predictor_dim, context_size=context_size, blank_id=head.predictor_blank_id)
        else:
            raise ValueError(f"predictor must be 'lstm' or 'stateless', got {predictor!r}")
        joint = JointNetwork(encoder_dim, predictor_dim, joint_dim, head)
        model = TransducerDecoder(head, net, joint).to(dtype).eval()
        with torch.no_grad():
            joint.output.weight.mul_(logit_scale)
            if blank_rate is not None:
                joint.output.bias[head.num_tokens : head.num_labels] += _blank_shift(model, blank_rate)
    return model


def _blank_shift(model: TransducerDecoder, blank_rate: float) -> float:
    """The shift of the blank logits that makes a blank the argmax on ``blank_rate`` of random probes."""
    if not 0.0 < blank_rate < 1.0:
        raise ValueError(f"blank_rate must lie strictly between 0 and 1, got {blank_rate}")
    head, dtype = model.head, model.joint.output.weight.dtype
    histories = torch.randint(0, head.num_tokens, (64, 32))
    predictor_proj = model.joint.project_predictor(model.predictor(histories).flatten(0, 1))  # [N, J]
    frames = torch.randn(predictor_proj.shape[0], model.joint.encoder_dim, dtype=dtype)
    logits = model.joint.combine(model.joint.project_encoder(frames), predictor_proj)
    best_token = logits[:, : head.num_tokens].max(dim=1).values
    best_blank = logits[:, head.num_tokens : head.num_labels].max(dim=1).values
    return float(torch.quantile((best_token - best_blank).double(), blank_rate))


def random_encoder_output(
    lengths: Sequence[int],
    encoder_dim: int,
    *,
    max_length: int | None = None,
    padding_value: float = 0.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random encoder frames ``[B, T, encoder_dim]`` and ``lengths [B]``.

    Frames past each utterance's length hold ``padding_value`` (use NaN to prove a decoder never reads
    them). ``T`` is ``max_length`` or the longest length.
    """
    total = max(lengths, default=0) if max_length is None else max_length
    generator = torch.Generator().manual_seed(seed)
    frames = torch.randn(len(lengths), total, encoder_dim, generator=generator, dtype=torch.float64).to(dtype)
    lengths_tensor = torch.tensor(list(lengths), dtype=torch.long)
    padding = torch.arange(total).unsqueeze(0) >= lengths_tensor.unsqueeze(1)
    frames[padding] = padding_value
    return frames, lengths_tensor
