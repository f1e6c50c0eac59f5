"""An encoder's (and the joint's) matrix products in int8 or bfloat16 on a CPU, chosen when a model is loaded.

A parakeet-sized Transducer spends nearly all of its CPU time in the encoder, and four fifths of the encoder's
arithmetic are the matrix products of its linear layers and pointwise convolutions (docs/benchmarks.md, "CPU:
the whole pipeline"). Two ways to make them cheaper, both approximations of the float32 model whose accuracy is
measured rather than assumed (docs/cpu.md, "Accuracy"):

* ``quantize="int8"`` (:func:`quantize_int8`): every ``nn.Linear`` of the encoder, every pointwise (kernel 1)
  ``nn.Conv1d`` of its convolution modules and the joint's projection of the encoder output become
  :class:`Int8Linear`: weights stored as int8 with one scale per output channel, the input quantized to 8 bits per
  call with one scale per call (dynamic quantization, what ONNX Runtime's ``quantize_dynamic`` and so sherpa-onnx's
  int8 models do), and an int8 x int8 -> int32 product (FBGEMM, with AVX-512 VNNI where the CPU has it). The
  float32 weights are dropped, so those layers take a quarter of their memory. Everything else (features,
  subsampling convolutions, norms, attention scores, the predictor, and the joint's per-step products) stays
  float32.

  Why not the joint's per-step products: one scale per call makes a row's result depend on the other rows of the
  call, and the batched searches rely on the joint giving a hypothesis the same scores whichever rows it is
  computed with (label-looping asks again for the rows that found a token; with int8 there, a row could find a
  token in one call and read the blank as its label in the next). The encoder projection is computed once per
  batch, so every step reads the same frames. A recording's int8 encoder output does depend on what else is in
  its batch (as with sherpa-onnx's int8 models): transcripts in int8 can differ between batch sizes.
* ``compute_dtype=torch.bfloat16`` (:func:`encoder_in_bfloat16`): the whole encoder's weights and arithmetic in
  bfloat16 (oneDNN; fast on CPUs with AVX-512 BF16 or AMX, :func:`cpu_has_bfloat16`), its output given to the
  decoder in float32. Half the encoder's memory.
* both (:func:`attention_in`): the int8 layers, with the attention's scores, softmax and weighted values in
  bfloat16 (the query, key and value projections stay int8). Those are the part of a long recording's encoder time
  that grows with the square of its length, and int8 does nothing for them; on a CPU with bfloat16 instructions
  they run about three times faster than in float32.

Why these kernels: ``bench/linear_kernels.py`` times each candidate at an encoder's shapes (PyTorch's int8
dynamic linear on FBGEMM and oneDNN, torchao's int8, int8 weight-only products, bfloat16, ONNX Runtime's int8);
the figures and the choice are in docs/benchmarks.md, "int8 and bfloat16 kernels". PyTorch marks its quantized
tensors deprecated (torchao is the successor, but its CPU int8 path measured slower here), so the int8 weights are
made with that warning silenced: it is about PyTorch's future, not something a user of transdec can act on.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator

import torch
from torch import Tensor, nn

#: The values of ``load_model(..., quantize=)`` and ``--quantize``.
QUANTIZATIONS = ("int8",)
#: The dtypes ``load_model(..., compute_dtype=)`` takes for an encoder (float32: as loaded).
ENCODER_DTYPES = (torch.float32, torch.bfloat16)


class Int8Linear(nn.Module):
    """``x [..., in] -> [..., out]`` (x's dtype), ``x W^T + b`` with ``W`` int8 per output channel and ``x`` quantized
    per call (one scale and zero point for the whole input, from its range), accumulated in int32.

    The packed weight is FBGEMM's (``torch.ops.quantized.linear_prepack``), made from the float32 layer by
    :meth:`from_float`; :attr:`weight` gives back the dequantized weight where a reader needs a float one (the
    joint's output layer description, ``DenseJoint``)."""

    def __init__(self, packed: torch.ScriptObject, in_features: int, out_features: int) -> None:
        super().__init__()
        self._packed = packed
        self.in_features, self.out_features = in_features, out_features

    @classmethod
    def from_float(cls, weight: Tensor, bias: Tensor | None) -> Int8Linear:
        """From a float ``weight [out, in]`` and ``bias [out]`` (symmetric per-channel scales: max |w| / 127)."""
        weight = weight.detach().float().cpu()
        scales = (weight.abs().amax(dim=1) / 127.0).clamp(min=1e-12).double()
        with _quantized_tensors(), _fbgemm_packing():
            quantized = torch.quantize_per_channel(weight, scales, torch.zeros_like(scales, dtype=torch.long), 0,
                                                   torch.qint8)
            packed = torch.ops.quantized.linear_prepack(quantized, None if bias is None else bias.detach().float().cpu())
        return cls(packed, weight.shape[1], weight.shape[0])

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        out = torch.ops.quantized.linear_dynamic(x.reshape(-1, shape[-1]).float().contiguous(), self._packed,
                                                 _reduce_range())
        return out.reshape(*shape[:-1], self.out_features).to(x.dtype)  # bfloat16 decoding reads bfloat16 frames

    @property
    def weight(self) -> Tensor:
        """The dequantized weight ``[out, in]`` (float32, made on each access)."""
        return self._unpacked()[0].dequantize()

    @property
    def bias(self) -> Tensor | None:
        return self._unpacked()[1]

    def _unpacked(self) -> tuple[Tensor, Tensor | None]:
        with _quantized_tensors():
            return torch.ops.quantized.linear_unpack(self._packed)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weights, dynamic int8 input"


class Int8PointwiseConv1d(nn.Module):
    """A pointwise (kernel 1) ``nn.Conv1d`` as :class:`Int8Linear` over the channels: ``x [B, C_in, T]`` ->
    ``[B, C_out, T]`` (a transposed view; the convolution modules that read it take any strides)."""

    def __init__(self, linear: Int8Linear) -> None:
        super().__init__()
        self.linear = linear

    @classmethod
    def from_float(cls, conv: nn.Conv1d) -> Int8PointwiseConv1d:
        return cls(Int8Linear.from_float(conv.weight[:, :, 0], conv.bias))

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x.transpose(1, 2)).transpose(1, 2)


def quantize_int8(model: nn.Module) -> int:
    """Make ``model``'s encoder and the joint's encoder projection int8 in place (see the module docstring); returns
    how many layers became int8. ``model`` is a CPU model with ``encoder`` and ``joint`` modules (transdec's own, a NeMo
    checkpoint's)."""
    _require_cpu(model, "int8 quantization")
    count = 0
    joint = model.joint
    projection = getattr(joint, "encoder_projection", None)
    if isinstance(projection, nn.Linear):  # the joint's other products run per search step (module docstring)
        joint.encoder_projection = Int8Linear.from_float(projection.weight, projection.bias)
        count += 1
    for part in (model.encoder,):
        for parent in list(part.modules()):
            for name, child in list(parent.named_children()):
                replacement: nn.Module | None = None
                if isinstance(child, nn.Linear):
                    replacement = Int8Linear.from_float(child.weight, child.bias)
                elif _is_pointwise_conv1d(child):
                    replacement = Int8PointwiseConv1d.from_float(child)
                if replacement is not None:
                    setattr(parent, name, replacement)
                    count += 1
    _release_freed_memory()
    return count


def encoder_in_bfloat16(model: nn.Module) -> None:
    """Run ``model``'s encoder in bfloat16 (weights and arithmetic), handing its frames to the decoder in the
    dtype the encoder had (float32)."""
    encoder = model.encoder
    dtype = next(encoder.parameters()).dtype
    if dtype == torch.bfloat16:
        return
    encoder.to(torch.bfloat16)
    encoder.output_dtype = dtype
    _release_freed_memory()


def check_precision(quantize: str | None, compute_dtype: torch.dtype | None) -> None:
    """Raise ``ValueError`` saying why, where :func:`apply_precision` cannot take these settings (before a model is
    loaded for nothing)."""
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {', '.join(QUANTIZATIONS)} or None, got {quantize!r}")
    if compute_dtype is not None and compute_dtype not in ENCODER_DTYPES:
        names = ", ".join(str(d).removeprefix("torch.") for d in ENCODER_DTYPES)
        raise ValueError(f"an encoder's compute_dtype must be one of {names}, got {compute_dtype}")


def apply_precision(model: nn.Module, quantize: str | None = None,
                    compute_dtype: torch.dtype | None = None) -> nn.Module:
    """``model`` with ``quantize`` (``"int8"`` or None) and its encoder in ``compute_dtype`` (bfloat16, or
    None / float32: as loaded) applied in place; with both, the int8 layers and the attention in bfloat16.
    Returns ``model``."""
    check_precision(quantize, compute_dtype)
    if not hasattr(model, "encoder") or not hasattr(model, "joint"):
        raise ValueError(f"{type(model).__name__}: int8 and bfloat16 encoders are for PyTorch models (transdec's "
                         "own and NeMo checkpoints); an ONNX export has its own int8 graphs (transdec export onnx "
                         "--quantize int8, onnx_variant='int8')")
    bfloat16 = compute_dtype not in (None, torch.float32)
    if quantize == "int8":
        quantize_int8(model)
        if bfloat16:
            attention_in(model.encoder, compute_dtype)
    elif bfloat16:
        encoder_in_bfloat16(model)
    return model


def attention_in(encoder: nn.Module, dtype: torch.dtype) -> None:
    """Run the attention core (scores, softmax, weighted values) of ``encoder``'s attention modules (those with an
    ``attention_dtype`` attribute) in ``dtype``, their projections as they are."""
    for module in encoder.modules():
        if hasattr(module, "attention_dtype"):
            module.attention_dtype = dtype


def cpu_has_bfloat16() -> bool:
    """Whether this CPU has bfloat16 instructions (AVX-512 BF16 or AMX), where a bfloat16 encoder is fast; elsewhere
    PyTorch emulates them, slower than float32. Read from ``/proc/cpuinfo`` (Linux); False where it cannot tell."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``, Linux); empty where they cannot be read."""
    return _cpu_flags()


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            return frozenset(next((line for line in info if line.startswith("flags")), "").split())
    except OSError:
        return frozenset()


@functools.lru_cache(maxsize=1)
def _reduce_range() -> bool:
    """Whether inputs are quantized to 7 bits instead of 8. Without VNNI (AVX-512 VNNI or AVX-VNNI), FBGEMM sums
    pairs of 8-bit products in 16 bits, which full-range inputs can overflow; PyTorch's own int8 layers take 7 bits
    there for that reason. With VNNI the sums are 32-bit and the 8th bit is free accuracy (every int8 figure in the
    docs was measured with it)."""
    flags = cpu_flags()
    return not ({"avx512_vnni", "avx_vnni"} & flags) and "avx2" in flags or not flags


def _is_pointwise_conv1d(module: nn.Module) -> bool:
    return (isinstance(module, nn.Conv1d) and module.kernel_size == (1,) and module.stride == (1,)
            and module.groups == 1 and module.dilation == (1,) and module.padding in ((0,), "valid"))


def _require_cpu(model: nn.Module, what: str) -> None:
    devices = {p.device.type for p in model.parameters()}
    if devices != {"cpu"}:
        raise ValueError(f"{what} runs on a CPU (PyTorch's int8 kernels); this model is on {', '.join(devices)}")


@contextlib.contextmanager
def _quantized_tensors() -> Iterator[None]:
    """Silence PyTorch's deprecation warning for its quantized tensor types, which :class:`Int8Linear` is made from
    (see the module docstring)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*quantiz.*deprecated", category=UserWarning)
        warnings.filterwarnings("ignore", message=r".*deprecated.*quantiz", category=UserWarning)
        yield


@contextlib.contextmanager
def _fbgemm_packing() -> Iterator[None]:
    """Pack weights for FBGEMM where PyTorch has it (x86), whatever the process's quantized engine: the packed weight
    then chooses the kernel of every call, the one ``bench/linear_kernels.py`` measured."""
    engines = torch.backends.quantized.supported_engines
    if "fbgemm" not in engines:
        yield
        return
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    try:
        yield
    finally:
        torch.backends.quantized.engine = previous


def _release_freed_memory() -> None:
    """Hand the float32 weights just freed back to the operating system (glibc keeps freed heap otherwise)."""
    import ctypes
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # another C library
            pass
