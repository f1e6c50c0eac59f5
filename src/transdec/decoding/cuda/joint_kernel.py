"""A search pass's joint call as one Triton kernel: frame gather, add, activation and output product.

Each pass of a batched search scores every hypothesis at its frame (a window of frames with WIND): it gathers the
hypotheses' encoder projections, adds their predictor projections, applies the activation and multiplies by the
output layer. PyTorch runs that as five kernels (gather, add, activation, the matrix product and its split-K
reduction), two thirds of a greedy pass under CUDA graphs (docs/benchmarks.md, "Where a GPU decode's time goes").
:func:`joint_logits` is one kernel: it reads each hypothesis' frame straight from ``encoder_proj`` and keeps the
hidden activations in registers.

It serves joints of the form ``output(activation(f + g))`` that describe themselves through
:meth:`~transdec.protocol.DenseJoint.output_layer` (:class:`~transdec.model.joint.JointNetwork`, so transdec's models
and every NeMo checkpoint). float32 products run in IEEE precision, not TF32, so the logits are PyTorch's up to
float32 rounding; tanh is ``2 sigmoid(2x) - 1``, within rounding of ``torch.tanh`` in absolute terms. The tests hold
the kernel to :meth:`~transdec.protocol.Joint.combine` and the searches using it to the reference, on the CPU through
Triton's interpreter (``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import os
import warnings

import torch

from transdec.protocol import Joint, JointOutputLayer

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU wheels of torch come without Triton
    triton = None

_ACTIVATIONS = {"relu": 0, "tanh": 1, "sigmoid": 2}
_TORCH_ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}


def enabled() -> bool:
    """Whether searches may use the kernel: Triton is here and ``TRANSDEC_JOINT_KERNEL=0`` (which turns it off, for
    comparisons) is not set. Graph caches key on it: a graph captured with the kernel is not replayed without."""
    return triton is not None and os.environ.get("TRANSDEC_JOINT_KERNEL") != "0"


def fused_layer(joint: Joint, device: torch.device) -> JointOutputLayer | None:
    """``joint``'s output layer when the kernel can compute its ``combine`` on ``device``, else None (not
    :func:`enabled`, the joint does not describe itself or has an activation the kernel lacks)."""
    if not enabled():
        return None
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return None
    describe = getattr(joint, "output_layer", None)
    layer = describe() if callable(describe) else None
    if layer is None or layer.activation not in _ACTIVATIONS or not _works(layer, device):
        return None
    return layer


# Per process: (device, dtype, activation) -> whether the kernel compiled and computed the joint there.
_CHECKED: dict[tuple[torch.device, torch.dtype, str], bool] = {}


def _works(layer: JointOutputLayer, device: torch.device) -> bool:
    """Whether the kernel compiles for ``layer``'s dtype and activation on ``device`` and computes its joint on a
    small random batch; checked once per process, with a warning where it does not (searches then use
    ``combine``)."""
    dtype = layer.weight.dtype
    key = (device, dtype, layer.activation)
    if key not in _CHECKED:
        generator = torch.Generator().manual_seed(0)
        probe = JointOutputLayer(layer.activation, *(torch.randn(*shape, generator=generator).to(device, dtype)
                                                    for shape in ((40, 48), (40,))))
        encoder_proj, predictor_proj = (torch.randn(*shape, generator=generator).to(device, dtype)
                                        for shape in ((2, 3, 48), (4, 48)))
        time = torch.tensor([0, 2, 1, 5], device=device)  # two hypotheses per utterance, windows of two frames
        try:
            got = joint_logits(probe, encoder_proj, predictor_proj, time, window=2).double()
            rows = torch.tensor([[0], [0], [1], [1]], device=device)
            frames = encoder_proj.double()[rows, (time[:, None] + torch.arange(2, device=device)).clamp(max=2)]
            hidden = _TORCH_ACTIVATIONS[layer.activation](frames + predictor_proj.double()[:, None])
            want = hidden @ probe.weight.double().T + probe.bias.double()
            scale = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
            _CHECKED[key] = bool(((got - want).abs() <= scale * (1 + want.abs())).all())
            reason = "it computed the joint wrongly"
        except Exception as error:  # a compiler or driver that refuses the kernel: use combine instead
            _CHECKED[key] = False
            reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        if not _CHECKED[key]:
            warnings.warn(f"the joint kernel does not work for {dtype} on {device} ({reason}); the joint runs as "
                          "PyTorch operations", RuntimeWarning, stacklevel=3)
    return _CHECKED[key]


def joint_logits(layer: JointOutputLayer, encoder_proj: torch.Tensor, predictor_proj: torch.Tensor,
                 time: torch.Tensor, window: int = 1) -> torch.Tensor:
    """The joint's logits ``[N, window, C]`` of ``N = B * G`` hypotheses, ``G`` per utterance, each at frames
    ``time .. time + window - 1`` (clipped to the last frame), i.e.
    ``combine(encoder_proj[n // G, frames], predictor_proj[n])``.

    Args:
        encoder_proj: ``[B, T, J]``, the projected encoder output.
        predictor_proj: ``[N, J]``, each hypothesis' projected predictor output.
        time: ``[N]`` (or ``[B, G]``) long, each hypothesis' frame.
    """
    batch, max_time, width = encoder_proj.shape
    hyps = predictor_proj.shape[0]
    if time.numel() != hyps or hyps % max(batch, 1) != 0:
        raise ValueError(f"{hyps} predictor rows and {time.numel()} frames for a batch of {batch}")
    classes = layer.weight.shape[0]
    dtype = encoder_proj.dtype
    out = torch.empty(hyps, window, classes, dtype=dtype, device=encoder_proj.device)
    if out.numel() == 0:
        return out
    encoder_proj, predictor_proj, weight = (t if t.stride(-1) == 1 else t.contiguous()
                                            for t in (encoder_proj, predictor_proj, layer.weight))
    rows = hyps * window
    # Few rows (greedy at B <= 32): narrow column blocks, so that the programs cover the GPU's multiprocessors.
    block_m = 16 if rows <= 16 else 32
    block_n = 16 if rows <= 32 else 32 if rows <= 128 else 64
    grid = (triton.cdiv(rows, block_m), triton.cdiv(classes, block_n))
    bias = layer.bias if layer.bias is not None else weight  # not read without HAS_BIAS
    _joint_logits[grid](
        encoder_proj, encoder_proj.stride(0), encoder_proj.stride(1), predictor_proj, predictor_proj.stride(0),
        time.reshape(-1).contiguous(), weight, weight.stride(0), bias, out, rows, max_time, width, classes,
        GROUP=hyps // batch, WINDOW=window, ACTIVATION=_ACTIVATIONS[layer.activation],
        HAS_BIAS=layer.bias is not None, HALF=dtype in (torch.float16, torch.bfloat16),
        IEEE=dtype == torch.float32, FLOAT64=dtype == torch.float64, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=32,
    )
    return out


if triton is not None:

    @triton.jit
    def _joint_logits(encoder_proj, stride_eb, stride_et, predictor_proj, stride_p, time, weight, stride_w, bias, out,
                      rows, max_time, width, classes, GROUP: tl.constexpr, WINDOW: tl.constexpr,
                      ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, HALF: tl.constexpr, IEEE: tl.constexpr,
                      FLOAT64: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # output rows: hypothesis * WINDOW + position
        n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = m < rows
        hyp = m // WINDOW
        frame = tl.minimum(tl.load(time + hyp, mask=row_ok, other=0) + m % WINDOW, max_time - 1)
        frame_rows = encoder_proj + (hyp // GROUP).to(tl.int64) * stride_eb + frame.to(tl.int64) * stride_et
        predictor_rows = predictor_proj + hyp.to(tl.int64) * stride_p
        columns = weight + n.to(tl.int64) * stride_w
        if FLOAT64:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64)
        else:  # float32, and the float32 accumulator of half-precision products
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for start in range(0, width, BLOCK_K):
            k = start + tl.arange(0, BLOCK_K)
            a_mask = row_ok[:, None] & (k < width)[None, :]
            f = tl.load(frame_rows[:, None] + k[None, :], mask=a_mask, other=0.0)
            g = tl.load(predictor_rows[:, None] + k[None, :], mask=a_mask, other=0.0)
            # Half precision: the sum and activation in float32, rounded once to the joint's dtype (PyTorch rounds
            # after each, within that rounding), the product accumulated in float32, as PyTorch does.
            if HALF:
                x = f.to(tl.float32) + g.to(tl.float32)
            else:
                x = f + g
            if ACTIVATION == 0:
                x = tl.maximum(x, 0.0)
            elif ACTIVATION == 1:
                x = 2.0 * tl.sigmoid(2.0 * x) - 1.0
            else:
                x = tl.sigmoid(x)
            x = x.to(f.dtype)
            # Padding columns of x may be non-zero (sigmoid(0)); the weight's padding rows are zero.
            w = tl.load(columns[None, :] + k[:, None], mask=(k < width)[:, None] & (n < classes)[None, :], other=0.0)
            if IEEE:
                acc = tl.dot(x, w, acc, input_precision="ieee")
            else:
                acc = tl.dot(x, w, acc)
        if HAS_BIAS:
            acc += tl.load(bias + n, mask=n < classes, other=0.0).to(acc.dtype)[None, :]
        tl.store(out + m.to(tl.int64)[:, None] * classes + n[None, :], acc.to(out.dtype.element_ty),
                 mask=row_ok[:, None] & (n < classes)[None, :])
