"""The joint kernel compiled for NVIDIA GPUs on a machine without one: Triton lowers it to a cubin for sm_90
(H100, H200) with its bundled ptxas, in every dtype and activation a search runs it in, so that a GPU session
does not find a kernel that does not compile. (Its arithmetic is checked through the interpreter in
test_joint_kernel.py.)"""

import pytest

triton = pytest.importorskip("triton")
compiler = pytest.importorskip("triton.compiler")
backends = pytest.importorskip("triton.backends.compiler")

from transdec.decoding.cuda import joint_kernel  # noqa: E402

POINTERS = ("encoder_proj", "predictor_proj", "weight", "bias", "out")
TYPES = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


# (activation, window, hypotheses per utterance, block rows, block columns): each activation, window and block size once
VARIANTS = [(0, 1, 4, 32, 64), (1, 4, 1, 16, 32), (2, 1, 1, 32, 16)]


@pytest.mark.parametrize("dtype", TYPES)
def test_joint_kernel_compiles_for_sm90(dtype):
    kernel = joint_kernel._joint_logits
    for activation, window, group, block_m, block_n in VARIANTS:
        signature = {name: f"*{TYPES[dtype]}" if name in POINTERS else "*i64" if name == "time" else "i32"
                     for name in kernel.arg_names}
        constants = dict(GROUP=group, WINDOW=window, ACTIVATION=activation, HAS_BIAS=True,
                         HALF=dtype in ("bfloat16", "float16"), IEEE=dtype == "float32", FLOAT64=dtype == "float64",
                         BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=32)
        signature.update(dict.fromkeys(constants, "constexpr"))
        source = compiler.ASTSource(kernel, signature,
                                    constexprs={(kernel.arg_names.index(k),): v for k, v in constants.items()})
        compiled = triton.compile(source, target=backends.GPUTarget("cuda", 90, 32))
        assert compiled.asm["cubin"], (dtype, activation, window)
