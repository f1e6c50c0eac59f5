"""The predictor-and-joint half of a Transducer: the part that decoding runs."""

from __future__ import annotations

from torch import nn

from transdec.model.joint import JointNetwork
from transdec.model.predictors import LSTMPredictor, StatelessPredictor
from transdec.protocol import HeadSpec


class TransducerDecoder(nn.Module):
    """Bundles a head spec, a predictor and a joint; satisfies :class:`~transdec.protocol.DecodingModel`."""

    def __init__(self, head: HeadSpec, predictor: LSTMPredictor | StatelessPredictor, joint: JointNetwork) -> None:
        super().__init__()
        if joint.head != head:
            raise ValueError(f"the joint was built for {joint.head}, not {head}")
        if predictor.blank_id != head.predictor_blank_id:
            raise ValueError(
                f"the predictor's blank id is {predictor.blank_id}, the head needs {head.predictor_blank_id} (V)"
            )
        self.head = head
        self.predictor = predictor
        self.joint = joint
