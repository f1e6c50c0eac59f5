"""The ``nn.Module`` wrappers that are traced into the three ONNX graphs of an export.

Two layouts, the two that sherpa-onnx runs (see :mod:`transdec.export.onnx` for the files and metadata):

* ``"nemo"`` (LSTM predictors): the graphs take and return NeMo's channels-first tensors. Encoder
  ``audio_signal [N, F, T]``, ``length [N]`` -> ``outputs [N, D, T']``, ``encoded_lengths [N]``; decoder
  ``targets [N, 1]`` int32, ``target_length [N]`` int32, ``states.1 [L, N, H]``, ``states.2 [L, N, H]`` ->
  ``outputs [N, H, 1]``, ``prednet_lengths [N]``, ``states [L, N, H]``, ``states.3 [L, N, H]``; joiner
  ``encoder_outputs [N, D, T]``, ``decoder_outputs [N, H, U]`` -> ``outputs [N, T, U, C]`` raw logits in transdec's
  (and NeMo's) output layout.
* ``"icefall"`` (stateless predictors): encoder ``x [N, T, F]``, ``x_lens [N]`` -> ``encoder_out [N, T', J]``
  (already projected for the joint), ``encoder_out_lens [N]``; decoder ``y [N, context]`` int64 icefall ids
  (blank 0, token ``t`` is ``t + 1``, -1 before the start) -> ``decoder_out [N, J]`` (projected); joiner
  ``encoder_out [N, J]``, ``decoder_out [N, J]`` -> ``logit [N, C]`` with the blank moved to index 0.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transdec.protocol import HeadSpec


class RotaryTable(nn.Module):
    """Stands in for :class:`transdec.model.conformer.RotaryEmbedding` during export: float32 tables of the first
    ``max_frames`` positions, sliced to the input's length.

    ONNX Runtime has no float64 ``Cos``, which the live module computes in; a table read by ``Slice`` is also
    cheaper than recomputing the angles for every utterance.
    """

    def __init__(self, rotary: nn.Module, max_frames: int) -> None:
        super().__init__()
        positions = torch.arange(max_frames, dtype=torch.float64)
        angles = positions.unsqueeze(1) * rotary.inverse_frequencies.cpu().unsqueeze(0)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, frames: int, device: torch.device, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """``cos, sin`` each ``[frames, head_dim / 2]``."""
        return self.cos[:frames].to(dtype), self.sin[:frames].to(dtype)


class NemoLayoutEncoder(nn.Module):
    """``audio_signal [N, F, T]``, ``length [N]`` int64 -> ``outputs [N, D, T']``, ``encoded_lengths [N]`` int64."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, audio_signal: Tensor, length: Tensor) -> tuple[Tensor, Tensor]:
        encoded, lengths = self.encoder(audio_signal.transpose(1, 2), length)
        return encoded.transpose(1, 2), lengths.to(torch.int64)


class NemoLayoutLstmDecoder(nn.Module):
    """One LSTM predictor step with explicit state: see the module docstring for the names and shapes."""

    def __init__(self, predictor: nn.Module) -> None:
        super().__init__()
        self.predictor = predictor

    def forward(self, targets: Tensor, target_length: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, ...]:
        output, (h_next, c_next) = self.predictor.step(targets[:, 0].to(torch.int64), (h, c))
        # sherpa-onnx passes target_length by position and discards this output, but an input no node reads is
        # pruned from the graph and the positional inputs then no longer line up: so the graph reads it.
        return output.unsqueeze(-1), target_length + 0, h_next, c_next


class NemoLayoutJoiner(nn.Module):
    """``encoder_outputs [N, D, T]``, ``decoder_outputs [N, H, U]`` -> logits ``[N, T, U, C]``."""

    def __init__(self, joint: nn.Module) -> None:
        super().__init__()
        self.joint = joint

    def forward(self, encoder_outputs: Tensor, decoder_outputs: Tensor) -> Tensor:
        f = self.joint.project_encoder(encoder_outputs.transpose(1, 2)).unsqueeze(2)
        g = self.joint.project_predictor(decoder_outputs.transpose(1, 2)).unsqueeze(1)
        return self.joint.combine(f, g)


class IcefallLayoutEncoder(nn.Module):
    """``x [N, T, F]``, ``x_lens [N]`` int64 -> ``encoder_out [N, T', J]`` (projected), ``encoder_out_lens [N]``."""

    def __init__(self, encoder: nn.Module, joint: nn.Module) -> None:
        super().__init__()
        self.encoder, self.joint = encoder, joint

    def forward(self, x: Tensor, x_lens: Tensor) -> tuple[Tensor, Tensor]:
        encoded, lengths = self.encoder(x, x_lens)
        return self.joint.project_encoder(encoded), lengths.to(torch.int64)


class IcefallLayoutStatelessDecoder(nn.Module):
    """``y [N, context]`` icefall ids -> ``decoder_out [N, J]``: the stateless predictor's output, projected."""

    def __init__(self, predictor: nn.Module, joint: nn.Module, head: HeadSpec) -> None:
        super().__init__()
        self.predictor, self.joint = predictor, joint
        self.blank = head.predictor_blank_id

    def forward(self, y: Tensor) -> Tensor:
        # icefall ids to transdec's: blank 0 and "before the start" -1 are both transdec's blank (embedded as zeros).
        labels = torch.where(y <= 0, torch.full_like(y, self.blank), y - 1)
        # A step that shifts in the last label gives the output of the whole context; the first column of the
        # state is shifted out and never read.
        state = torch.cat([labels[:, :1], labels[:, :-1]], dim=1)
        output, _ = self.predictor.step(labels[:, -1], state)
        return self.joint.project_predictor(output)


class IcefallLayoutJoiner(nn.Module):
    """``encoder_out [N, J]``, ``decoder_out [N, J]`` -> ``logit [N, C]``, the standard blank first."""

    def __init__(self, joint: nn.Module, head: HeadSpec) -> None:
        super().__init__()
        self.joint = joint
        self.register_buffer("order", torch.tensor(icefall_output_order(head)), persistent=False)

    def forward(self, encoder_out: Tensor, decoder_out: Tensor) -> Tensor:
        return self.joint.combine(encoder_out, decoder_out).index_select(-1, self.order)


def icefall_output_order(head: HeadSpec) -> list[int]:
    """transdec output index of each icefall output: the standard blank first, then every other output in order."""
    return [head.blank_id] + [i for i in range(head.num_outputs) if i != head.blank_id]
