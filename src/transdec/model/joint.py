"""The joint network, implementing :class:`~transdec.protocol.Joint` for every head kind."""

from __future__ import annotations

import torch
from torch import nn

from transdec.model.decoding_weights import linear
from transdec.protocol import HeadSpec, JointOutputLayer

# In place: applied to a fresh sum, and each one's gradient needs only its output.
_ACTIVATIONS = {"relu": torch.relu_, "tanh": torch.tanh_, "sigmoid": torch.sigmoid_}


class JointNetwork(nn.Module):
    """``logits = output(activation(encoder_projection(f) + predictor_projection(g)))``.

    The output width is ``head.num_outputs`` (see :mod:`transdec.protocol` for the layout).
    """

    def __init__(
        self,
        encoder_dim: int,
        predictor_dim: int,
        joint_dim: int,
        head: HeadSpec,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"unknown joint activation {activation!r}; choose from {sorted(_ACTIVATIONS)}")
        self.head = head
        self.encoder_dim = encoder_dim
        self.predictor_dim = predictor_dim
        self.encoder_projection = nn.Linear(encoder_dim, joint_dim)
        self.predictor_projection = nn.Linear(predictor_dim, joint_dim)
        self.activation = activation
        self.output = nn.Linear(joint_dim, head.num_outputs)

    def project_encoder(self, encoder_out: torch.Tensor) -> torch.Tensor:
        """``[B, T, De] -> [B, T, J]``."""
        if encoder_out.shape[-1] != self.encoder_dim:
            raise ValueError(
                f"encoder output has feature size {encoder_out.shape[-1]}, the joint expects {self.encoder_dim}"
            )
        return self.encoder_projection(encoder_out)

    def project_predictor(self, predictor_out: torch.Tensor) -> torch.Tensor:
        """``[..., H] -> [..., J]``."""
        return linear(predictor_out, self.predictor_projection)

    def combine(self, encoder_proj: torch.Tensor, predictor_proj: torch.Tensor) -> torch.Tensor:
        """Raw logits ``[..., C]`` from projections ``[..., J]``."""
        # No module call: at batch 1 this runs once per decoding step, and module-call overhead was half its time.
        return linear(_ACTIVATIONS[self.activation](encoder_proj + predictor_proj), self.output)

    def output_layer(self) -> JointOutputLayer:
        """What :meth:`combine` applies after the sum (:class:`~transdec.protocol.DenseJoint`)."""
        return JointOutputLayer(self.activation, self.output.weight, self.output.bias)

    def forward(self, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> torch.Tensor:
        """Full lattice of logits for training: ``[B, T, De], [B, U + 1, H] -> [B, T, U + 1, C]``."""
        return self.combine(
            self.project_encoder(encoder_out).unsqueeze(2), self.project_predictor(predictor_out).unsqueeze(1)
        )


class SimpleJoint(nn.Module):
    """The trivial joint of the pruned loss (:mod:`transdec.losses.pruned`): logits
    ``encoder_output(f_t) + predictor_output(g_u)`` over the ``V`` tokens and the blank (last).

    Used only in training, to place the bands where the real joint is evaluated; it is not part of a
    model file.
    """

    def __init__(self, encoder_dim: int, predictor_dim: int, num_tokens: int) -> None:
        super().__init__()
        self.encoder_output = nn.Linear(encoder_dim, num_tokens + 1)
        self.predictor_output = nn.Linear(predictor_dim, num_tokens + 1)

    @torch.no_grad()
    def start_from_ctc(self, ctc: nn.Linear) -> None:
        """Start as a CTC output layer (same layout: tokens, then blank) with no predictor term.

        A trained CTC head places the pruned loss's bands well from the first step; a random simple joint
        places them badly until it has learnt, and meanwhile the pruned loss pushes a model started from
        trained weights towards wrong alignments. Measured on three dev batches with the first bundled
        RNN-T: pruned loss (5 rows) 13.61 / 7.63 / 11.39 per utterance from the CTC head, the full loss
        13.61 / 7.63 / 11.38; from a random simple joint 276.6 / 46.6 / 165.0.
        """
        self.encoder_output.load_state_dict(ctc.state_dict())
        nn.init.zeros_(self.predictor_output.weight)
        nn.init.zeros_(self.predictor_output.bias)

    def forward(self, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B, T, De], [B, U + 1, H] -> ([B, T, V + 1], [B, U + 1, V + 1])``."""
        return self.encoder_output(encoder_out), self.predictor_output(predictor_out)
