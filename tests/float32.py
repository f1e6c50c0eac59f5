"""How close two float32 computations of the same thing must be: the tolerance of every comparison with a stored
float32 reference (NeMo's outputs, ONNX Runtime's), the same on every CPU.

Two implementations that sum in different orders, or the same one on CPUs with different kernels (MKL's FFT and
matrix products take other code paths on AMD than on Intel), differ by rounding: float32's unit roundoff is 6e-8,
and it grows with every sum and layer. Measured: 1e-6 absolute on NeMo encoder frames of scale 3 (Intel Xeon), and
7.6e-6 of the value on a normalised log-mel feature of 15 (AMD EPYC; 1.1e-4 absolute). The check is
``|actual - expected| <= ATOL + RTOL * |expected|``: ``RTOL`` covers large values with four times the largest
relative difference measured, ``ATOL`` values near zero, whose error is set by the scale of the tensor rather than
by their own size. A real defect (a wrong window, a missing layer) moves values by 1e-2 or more.
"""

import numpy as np
import torch

ATOL = 1e-4
RTOL = 3e-5


def assert_float32_close(actual, expected, atol: float = ATOL, rtol: float = RTOL) -> None:
    """``actual`` and ``expected`` (tensors or arrays) equal within float32 rounding (see the module docstring)."""
    if isinstance(actual, torch.Tensor) or isinstance(expected, torch.Tensor):
        torch.testing.assert_close(torch.as_tensor(actual), torch.as_tensor(expected), atol=atol, rtol=rtol)
    else:
        np.testing.assert_allclose(actual, expected, atol=atol, rtol=rtol)
