"""transdec's predictor and joint protocol (:mod:`transdec.protocol`) over ONNX Runtime sessions, for the two
layouts of :mod:`transdec.export.onnx_graphs` (NeMo: LSTM state in and out; icefall: stateless context of ids)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transdec.protocol import HeadSpec


class OnnxLstmPredictor:
    """NeMo-layout decoder: ``targets [N, 1]`` int32, ``target_length [N]``, ``h, c [L, N, H]`` -> output, h, c.

    State: ``(h, c)`` torch tensors ``[L, B, H]``.
    """

    def __init__(self, session: Any, num_layers: int, hidden_size: int) -> None:
        self.session = session
        self.num_layers, self.hidden_size = num_layers, hidden_size
        self.inputs = [i.name for i in session.get_inputs()]
        if len(self.inputs) != 4:
            raise ValueError(f"a NeMo-layout decoder has 4 inputs (targets, target_length, 2 states); this one has "
                             f"{self.inputs}")
        self._ones: dict[int, np.ndarray] = {}  # target_length inputs by batch size, made once each

    def initial_state(self, batch_size: int) -> tuple[Tensor, Tensor]:
        zeros = torch.zeros(self.num_layers, batch_size, self.hidden_size)
        return zeros, zeros.clone()

    def step(self, labels: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """``labels [B]`` -> ``(output [B, H], (h, c))``."""
        batch = labels.shape[0]
        if batch == 0:
            return torch.zeros(0, self.hidden_size), state
        targets = labels.to(torch.int32).reshape(batch, 1).numpy()
        if batch not in self._ones:
            self._ones[batch] = np.ones(batch, dtype=np.int32)
        feeds = dict(zip(self.inputs, (targets, self._ones[batch],
                                       numpy_of(state[0]), numpy_of(state[1]))))
        output, _, h, c = self.session.run(None, feeds)
        return torch.from_numpy(output[:, :, 0]), (torch.from_numpy(h), torch.from_numpy(c))

    def select_state(self, mask: Tensor, if_true: tuple[Tensor, Tensor],
                     if_false: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        where = mask.view(1, -1, 1)
        return torch.where(where, if_true[0], if_false[0]), torch.where(where, if_true[1], if_false[1])

    def gather_state(self, state: tuple[Tensor, Tensor], indices: Tensor) -> tuple[Tensor, Tensor]:
        return state[0].index_select(1, indices), state[1].index_select(1, indices)


class OnnxStatelessPredictor:
    """icefall-layout decoder: ``y [N, context]`` icefall ids -> ``decoder_out [N, J]`` (already projected).

    State: the last ``context_size`` icefall ids ``[B, context]`` int64 (blank 0, token ``t`` as ``t + 1``, -1
    before the start), so the first step (transdec's blank) gives icefall's initial context ``[-1, ..., -1, 0]``.
    """

    def __init__(self, session: Any, context_size: int, num_tokens: int) -> None:
        self.session, self.context_size, self.num_tokens = session, context_size, num_tokens
        self.input = session.get_inputs()[0].name
        # icefall exports made with --use-int32-inputs take int32 ids; everything else int64.
        self.dtype = np.int32 if session.get_inputs()[0].type == "tensor(int32)" else np.int64
        # The output width, for empty batches (which are not run): from one run on the initial context.
        first = np.array([[-1] * (context_size - 1) + [0]], dtype=self.dtype)
        self.output_size = int(session.run(None, {self.input: first})[0].shape[1])

    def initial_state(self, batch_size: int) -> Tensor:
        return torch.full((batch_size, self.context_size), -1, dtype=torch.int64)

    def step(self, labels: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """``labels [B]`` transdec ids (``V`` = blank) -> ``(decoder_out [B, J], context [B, context])``."""
        ids = torch.where(labels >= self.num_tokens, torch.zeros_like(labels), labels + 1)
        context = torch.cat([state[:, 1:], ids.to(torch.int64).unsqueeze(1)], dim=1)
        if context.shape[0] == 0:
            return torch.zeros(0, self.output_size), context
        (output,) = self.session.run(None, {self.input: context.numpy().astype(self.dtype, copy=False)})
        return torch.from_numpy(output), context

    def select_state(self, mask: Tensor, if_true: Tensor, if_false: Tensor) -> Tensor:
        return torch.where(mask.unsqueeze(1), if_true, if_false)

    def gather_state(self, state: Tensor, indices: Tensor) -> Tensor:
        return state.index_select(0, indices)


class OnnxJoint:
    """The joiner session behind :class:`~transdec.protocol.Joint`. The projections are inside the joiner (NeMo
    layout) or the encoder and decoder (icefall layout), so ``project_*`` pass their input through and
    :meth:`combine` runs the joiner on the broadcast pairs.

    ``one_row_per_call``: run the joiner on one pair at a time. An int8 joiner quantizes its whole input with one
    scale per call, so a pair's scores would depend on the other pairs of the call; the batched searches need a
    hypothesis' scores to be the same whichever rows it is scored with (label-looping scores the rows that found
    a token again, and could read the blank as their label)."""

    def __init__(self, session: Any, layout: str, head: HeadSpec, one_row_per_call: bool = False) -> None:
        self.session, self.layout, self.head = session, layout, head
        self.one_row_per_call = one_row_per_call
        self.inputs = [i.name for i in session.get_inputs()]
        # icefall: output i of the joiner is transdec output order[i]; invert it once.
        self.restore: Tensor | None = None
        if layout == "icefall":
            from transdec.export.onnx_graphs import icefall_output_order

            self.restore = torch.argsort(torch.tensor(icefall_output_order(head)))

    def project_encoder(self, encoder_out: Tensor) -> Tensor:
        return encoder_out

    def project_predictor(self, predictor_out: Tensor) -> Tensor:
        return predictor_out

    def combine(self, encoder_proj: Tensor, predictor_proj: Tensor) -> Tensor:
        """Raw logits ``[..., C]`` of ``encoder_proj [..., D]`` and ``predictor_proj [..., H]``, broadcast like ``+``."""
        shape = _broadcast_shape(tuple(encoder_proj.shape[:-1]), tuple(predictor_proj.shape[:-1]))
        count = math.prod(shape)
        if count == 0:
            return torch.zeros(*shape, self.head.num_outputs)
        enc = encoder_proj.expand(*shape, encoder_proj.shape[-1]).reshape(count, -1)
        pred = predictor_proj.expand(*shape, predictor_proj.shape[-1]).reshape(count, -1)
        if self.one_row_per_call and count > 1:
            out = torch.cat([self._run(enc[i: i + 1], pred[i: i + 1]) for i in range(count)])
        else:
            out = self._run(enc, pred)
        if self.restore is not None:
            out = out.index_select(1, self.restore)
        return out.reshape(*shape, out.shape[-1])

    def _run(self, enc: Tensor, pred: Tensor) -> Tensor:
        """The joiner's logits ``[N, C]`` of ``enc [N, D]`` and ``pred [N, H]``."""
        if self.layout == "nemo":
            feeds = {self.inputs[0]: numpy_of(enc.unsqueeze(-1)), self.inputs[1]: numpy_of(pred.unsqueeze(-1))}
        else:
            feeds = {self.inputs[0]: numpy_of(enc), self.inputs[1]: numpy_of(pred)}
        (logits,) = self.session.run(None, feeds)
        return torch.from_numpy(logits).reshape(enc.shape[0], -1)


def _broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """``torch.broadcast_shapes`` for two shapes, without its overhead (this runs once per joint call)."""
    if a == b:
        return a
    width = max(len(a), len(b))
    a, b = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    return tuple(y if x == 1 else x for x, y in zip(a, b))


def numpy_of(tensor: Tensor) -> np.ndarray:
    """A contiguous NumPy view of a CPU tensor, for a session input."""
    return tensor.detach().contiguous().numpy()
