"""Prediction networks implementing :class:`~transdec.protocol.Predictor`.

Both take the blank id as start-of-sequence and embed it as zeros (NeMo's "blank as pad"), so that the
first step sees no label.
"""

from __future__ import annotations

import torch
from torch import nn

from transdec.model.decoding_weights import transposed

LSTMState = tuple[torch.Tensor, torch.Tensor]


class LSTMPredictor(nn.Module):
    """Embedding followed by an ``num_layers``-layer LSTM.

    State: ``(h, c)``, each ``[num_layers, B, hidden_size]``.
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        num_layers: int = 1,
        embedding_dim: int | None = None,
        blank_id: int | None = None,
    ) -> None:
        """
        Args:
            vocab_size: tokens plus the blank (``V + 1``).
            hidden_size: LSTM width ``H``, the size of the predictor output.
            num_layers: number of stacked LSTM layers.
            embedding_dim: label embedding width (default ``hidden_size``).
            blank_id: the start-of-sequence / blank input, embedded as zeros (default ``vocab_size - 1``).
        """
        super().__init__()
        self.blank_id = vocab_size - 1 if blank_id is None else blank_id
        embedding_dim = hidden_size if embedding_dim is None else embedding_dim
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=self.blank_id)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, num_layers=num_layers, batch_first=True)
        self.hidden_size = hidden_size
        self.num_layers = num_layers

    @property
    def output_size(self) -> int:
        return self.hidden_size

    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        """Teacher-forced outputs for training: ``labels [B, U] -> [B, U + 1, H]``.

        Output ``u`` has seen start-of-sequence and the first ``u`` labels.
        """
        sos = torch.full_like(labels[:, :1], self.blank_id)
        output, _ = self.lstm(self.embedding(torch.cat([sos, labels], dim=1)))
        return output

    def initial_state(self, batch_size: int) -> LSTMState:
        weight = self.lstm.weight_hh_l0
        zeros = weight.new_zeros(self.num_layers, batch_size, self.hidden_size)
        return zeros, zeros.clone()

    def step(self, labels: torch.Tensor, state: LSTMState) -> tuple[torch.Tensor, LSTMState]:
        """One label per hypothesis: ``labels [B]`` -> ``(output [B, H], (h, c))``.

        The cell is written out with matrix products rather than calling ``nn.LSTM``: on CPU, ``nn.LSTM``
        with one time step goes through oneDNN and was measured 3-7x slower per step (see
        ``docs/benchmarks.md``, "LSTM predictor step"), and the explicit form does not depend on global backend flags. Decoding
        at batch 1 is bound by per-operation overhead, so the first layer's input gates come from a
        table ``embedding @ W_ih + biases`` (one row per label, rebuilt whenever a weight changes) and
        the gate non-linearities are applied in as few operations as possible, and the weights are multiplied
        in the layout small products run fastest in (:mod:`transdec.model.decoding_weights`).
        """
        h, c = state
        if labels.is_cuda:
            return self._fused_cell_step(labels, h, c)
        hidden = self.hidden_size
        new_h, new_c = [], []
        x = None
        for layer in range(self.num_layers):
            if layer == 0:
                input_gates = self._first_layer_input_gates(labels)
            else:
                input_gates = torch.addmm(self._bias(layer), x, transposed(self.lstm, f"weight_ih_l{layer}"))
            gates = torch.addmm(input_gates, h[layer], transposed(self.lstm, f"weight_hh_l{layer}"))
            sigmoids = gates.sigmoid()  # the cell-gate slice of it is unused
            in_gate, forget_gate = sigmoids[:, :hidden], sigmoids[:, hidden : 2 * hidden]
            out_gate = sigmoids[:, 3 * hidden :]
            c_layer = torch.addcmul(forget_gate * c[layer], in_gate, gates[:, 2 * hidden : 3 * hidden].tanh())
            x = out_gate * c_layer.tanh()
            new_h.append(x)
            new_c.append(c_layer)
        if self.num_layers == 1:
            return x, (x.unsqueeze(0), c_layer.unsqueeze(0))
        return x, (torch.stack(new_h), torch.stack(new_c))

    def _fused_cell_step(self, labels: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, LSTMState]:
        """The same step with ``torch.lstm_cell``: on CUDA one fused kernel per layer does the gate arithmetic,
        where the explicit cell takes eight (GPU decoding is bound by the number of kernels, not by FLOPs)."""
        params = self.lstm._parameters
        x = self.embedding(labels)
        new_h, new_c = [], []
        for layer in range(self.num_layers):
            x, c_layer = torch.lstm_cell(
                x, (h[layer], c[layer]), params[f"weight_ih_l{layer}"], params[f"weight_hh_l{layer}"],
                params[f"bias_ih_l{layer}"], params[f"bias_hh_l{layer}"],
            )
            new_h.append(x)
            new_c.append(c_layer)
        return x, (torch.stack(new_h), torch.stack(new_c))

    def _first_layer_input_gates(self, labels: torch.Tensor) -> torch.Tensor:
        """``W_ih · embedding(label) + b_ih + b_hh`` for each label: ``[B] -> [B, 4H]``."""
        # Direct dictionary access: nn.Module attribute lookup costs microseconds, and this runs per label.
        lstm = self.lstm._parameters
        weights = (self.embedding._parameters["weight"], lstm["weight_ih_l0"], lstm["bias_ih_l0"], lstm["bias_hh_l0"])
        # Computed directly when gradients must flow, for weights made under inference mode, which have no version
        # counter to tell when the table is stale, and in an ONNX export's trace, whose graph must read the weights.
        if ((torch.is_grad_enabled() and any(w.requires_grad for w in weights)) or weights[0].is_inference()
                or torch.jit.is_tracing()):
            return torch.addmm(self._bias(0), self.embedding(labels), self.lstm.weight_ih_l0.t())
        # In-place updates (optimizer steps, load_state_dict) bump _version; moves and casts reallocate.
        key = [(w._version, w.data_ptr()) for w in weights]
        if self.__dict__.get("_gate_table_key") != key:
            with torch.no_grad():
                table = torch.addmm(self._bias(0), self.embedding.weight, self.lstm.weight_ih_l0.t())
            self.__dict__["_gate_table"], self.__dict__["_gate_table_key"] = table, key
        return self.__dict__["_gate_table"].index_select(0, labels)

    def _bias(self, layer: int) -> torch.Tensor:
        return getattr(self.lstm, f"bias_ih_l{layer}") + getattr(self.lstm, f"bias_hh_l{layer}")

    def select_state(self, mask: torch.Tensor, if_true: LSTMState, if_false: LSTMState) -> LSTMState:
        where = mask.view(1, -1, 1)
        return torch.where(where, if_true[0], if_false[0]), torch.where(where, if_true[1], if_false[1])

    def gather_state(self, state: LSTMState, indices: torch.Tensor) -> LSTMState:
        return state[0].index_select(1, indices), state[1].index_select(1, indices)


class StatelessPredictor(nn.Module):
    """Concatenated embeddings of the last ``context_size`` labels (the multi-blank paper's predictor).

    State: the last ``context_size`` labels, ``[B, context_size]`` int64, most recent last; blank
    fills positions before the start of the sequence.
    """

    def __init__(self, vocab_size: int, hidden_size: int, context_size: int = 2, blank_id: int | None = None) -> None:
        """
        Args:
            vocab_size: tokens plus the blank (``V + 1``).
            hidden_size: output width ``H``; each context position gets ``H / context_size`` of it.
            context_size: number of previous labels the output depends on.
            blank_id: the start-of-sequence / blank input, embedded as zeros (default ``vocab_size - 1``).
        """
        super().__init__()
        if context_size < 1:
            raise ValueError(f"context_size must be at least 1, got {context_size}")
        if hidden_size % context_size:
            raise ValueError(f"hidden_size {hidden_size} must be divisible by context_size {context_size}")
        self.blank_id = vocab_size - 1 if blank_id is None else blank_id
        self.context_size = context_size
        self.hidden_size = hidden_size
        self.embeddings = nn.ModuleList(
            nn.Embedding(vocab_size, hidden_size // context_size, padding_idx=self.blank_id)
            for _ in range(context_size)
        )

    @property
    def output_size(self) -> int:
        return self.hidden_size

    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        """Teacher-forced outputs for training: ``labels [B, U] -> [B, U + 1, H]``."""
        padded = torch.cat([labels.new_full((labels.shape[0], self.context_size), self.blank_id), labels], dim=1)
        contexts = padded.unfold(1, self.context_size, 1)  # [B, U + 1, context_size]
        return self._embed(contexts)

    def initial_state(self, batch_size: int) -> torch.Tensor:
        device = self.embeddings[0].weight.device
        return torch.full((batch_size, self.context_size), self.blank_id, dtype=torch.long, device=device)

    def step(self, labels: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``labels [B]`` -> ``(output [B, H], context [B, context_size])``."""
        context = torch.cat([state[:, 1:], labels.unsqueeze(1)], dim=1)
        return self._embed(context), context

    def _embed(self, contexts: torch.Tensor) -> torch.Tensor:
        return torch.cat([embed(contexts[..., i]) for i, embed in enumerate(self.embeddings)], dim=-1)

    def select_state(self, mask: torch.Tensor, if_true: torch.Tensor, if_false: torch.Tensor) -> torch.Tensor:
        return torch.where(mask.unsqueeze(1), if_true, if_false)

    def gather_state(self, state: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return state.index_select(0, indices)
