"""Which encoder operations run in bfloat16 under CPU autocast (``transdec train --bf16`` on a CPU).

On the CPUs measured here (docs/benchmarks.md, "bfloat16 autocast"), oneDNN's bfloat16 convolutions and
attention are *slower* than float32 in the backward pass, while the bfloat16 matrix products of the linear
layers are much faster. So under CPU autocast the convolutions and the attention core run in float32 and only
the linear layers take bfloat16: a training step 1.45-1.5x faster than float32 on a Zen 5 EPYC, against 1.09x
with everything in bfloat16. On a GPU, and without autocast, nothing changes.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor


def float32_under_cpu_autocast(operation: Callable[..., Tensor], *inputs: Tensor) -> Tensor:
    """``operation(*inputs)``, in float32 (floating inputs upcast) when CPU autocast is on."""
    if inputs[0].device.type != "cpu" or not torch.is_autocast_enabled("cpu"):
        return operation(*inputs)
    with torch.autocast("cpu", enabled=False):
        return operation(*(x.float() if x.is_floating_point() else x for x in inputs))
