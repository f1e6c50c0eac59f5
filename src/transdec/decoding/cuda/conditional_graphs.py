"""CUDA graphs with device-side while loops, assembled from graphs that PyTorch captured.

PyTorch captures the straight-line pieces of a loop (its allocator manages their temporaries in a private
pool); this module nests them as child graphs in one new graph that also holds the loops. A WHILE
conditional node runs its body as long as its condition is non-zero; a one-thread kernel, launched
before the node and again at the end of its body, sets the condition from a flag tensor that the pieces
write. Launching the graph then runs the whole loop nest with no host round trip.

Needs a CUDA 12.4+ driver and the ``cuda-python`` bindings (``cuda.bindings``) with NVRTC, which compiles
that kernel at first use. :func:`conditional_graphs_unavailable` says why they cannot be used, if so.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np
import torch

# cudaGraphSetConditional is a device-runtime builtin; NVRTC knows it once it is declared.
_SET_CONDITION_SOURCE = r"""
typedef unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                      unsigned int value);

extern "C" __global__ void set_condition(cudaGraphConditionalHandle handle, const bool* flag)
{
    cudaGraphSetConditional(handle, *flag ? 1u : 0u);
}
"""
_MIN_DRIVER_VERSION = 12040


@dataclass
class While:
    """Run ``body`` while the 0-dim bool CUDA tensor ``flag`` is true; checked before each pass.

    Whatever runs before the loop must set ``flag``, and ``body`` must update it.
    """

    flag: torch.Tensor
    body: list[Piece] = field(default_factory=list)


Piece = Union[torch.cuda.CUDAGraph, While]


class ConditionalGraph:
    """One executable CUDA graph running ``pieces`` in order: captured graphs and :class:`While` loops.

    The captured graphs must have been made with ``torch.cuda.CUDAGraph(keep_graph=True)``; they are cloned
    into this graph, and kept alive here because their memory pool holds the clones' temporaries.
    """

    def __init__(self, pieces: list[Piece], device: torch.device) -> None:
        driver = _bindings()[0]
        self._driver = driver
        self._device = device
        self._pieces = pieces
        self._keep_alive: list[Any] = []
        self._graph = self._exec = None
        with torch.cuda.device(device):
            self._context = _checked(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
            self._set_condition = _set_condition_kernel(torch.cuda.current_device())
            self._graph = _checked(driver.cuGraphCreate(0), "cuGraphCreate")
            self._add_sequence(self._graph, pieces, [])
            self._exec = _checked(driver.cuGraphInstantiate(self._graph, 0), "cuGraphInstantiate")

    def launch(self) -> None:
        """Run the graph on the current stream."""
        stream = self._driver.CUstream(torch.cuda.current_stream(self._device).cuda_stream)
        _checked(self._driver.cuGraphLaunch(self._exec, stream), "cuGraphLaunch")

    def __del__(self) -> None:
        driver = getattr(self, "_driver", None)
        if driver is None:
            return
        if self._exec is not None:
            driver.cuGraphExecDestroy(self._exec)
        if self._graph is not None:
            driver.cuGraphDestroy(self._graph)

    def _add_sequence(self, graph: Any, pieces: list[Piece], dependencies: list[Any]) -> list[Any]:
        """Add ``pieces`` to ``graph`` one after the other, after ``dependencies``; return the last node."""
        driver = self._driver
        for piece in pieces:
            if isinstance(piece, While):
                handle = _checked(
                    driver.cuGraphConditionalHandleCreate(self._graph, self._context, 0, 0),
                    "cuGraphConditionalHandleCreate",
                )
                self._keep_alive.append(handle)
                dependencies = [self._add_set_condition(graph, handle, piece.flag, dependencies)]
                params = driver.CUgraphNodeParams()
                params.type = driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
                params.conditional.handle = handle
                params.conditional.type = driver.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE
                params.conditional.size = 1
                params.conditional.ctx = self._context
                node = _add_node(driver, graph, dependencies, params)
                body = params.conditional.phGraph_out[0]
                body_end = self._add_sequence(body, piece.body, [])
                self._add_set_condition(body, handle, piece.flag, body_end)
                dependencies = [node]
            else:
                child = driver.CUgraph(piece.raw_cuda_graph())
                node = _checked(
                    driver.cuGraphAddChildGraphNode(graph, dependencies, len(dependencies), child),
                    "cuGraphAddChildGraphNode",
                )
                dependencies = [node]
        return dependencies

    def _add_set_condition(self, graph: Any, handle: Any, flag: torch.Tensor, dependencies: list[Any]) -> Any:
        if flag.device.type != "cuda" or flag.dtype != torch.bool or flag.numel() != 1:
            raise ValueError("a While flag must be a one-element bool CUDA tensor")
        driver = self._driver
        flag_pointer = np.array([flag.data_ptr()], dtype=np.uint64)
        # kernelParams: an array of pointers to each argument's value.
        arguments = np.array([handle.getPtr(), flag_pointer.ctypes.data], dtype=np.uint64)
        self._keep_alive += [flag, flag_pointer, arguments]
        params = driver.CUDA_KERNEL_NODE_PARAMS()
        params.func = self._set_condition
        params.gridDimX = params.gridDimY = params.gridDimZ = 1
        params.blockDimX = params.blockDimY = params.blockDimZ = 1
        params.sharedMemBytes = 0
        params.kernelParams = arguments.ctypes.data
        return _checked(
            driver.cuGraphAddKernelNode(graph, dependencies, len(dependencies), params), "cuGraphAddKernelNode"
        )


def conditional_graphs_unavailable(device: torch.device) -> str | None:
    """Why :class:`ConditionalGraph` cannot run on ``device``, or None if it can."""
    if device.type != "cuda":
        return f"CUDA graphs need a CUDA device, not {device.type}"
    try:
        driver = _bindings()[0]
    except ImportError as error:
        return f"the cuda-python bindings are not installed ({error}); pip install cuda-python"
    try:
        version = _checked(driver.cuDriverGetVersion(), "cuDriverGetVersion")
        if version < _MIN_DRIVER_VERSION:
            return f"conditional graph nodes need a CUDA 12.4+ driver; this one is {version // 1000}.{version % 1000 // 10}"
        with torch.cuda.device(device):
            _set_condition_kernel(torch.cuda.current_device())
    except RuntimeError as error:
        return str(error)
    return None


@functools.cache
def _bindings() -> tuple[Any, Any]:
    from cuda.bindings import driver, nvrtc

    return driver, nvrtc


@functools.cache
def _set_condition_kernel(device_index: int) -> Any:
    """The ``set_condition`` kernel, compiled for ``device_index``'s architecture (cached per process)."""
    driver, nvrtc = _bindings()
    torch.cuda.init()
    major, minor = torch.cuda.get_device_capability(device_index)
    program = _checked(
        nvrtc.nvrtcCreateProgram(_SET_CONDITION_SOURCE.encode(), b"set_condition.cu", 0, [], []),
        "nvrtcCreateProgram",
    )
    options = [f"--gpu-architecture=sm_{major}{minor}".encode()]
    (status,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
    if int(status) != 0:
        size = _checked(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(program, log)
        raise RuntimeError(f"NVRTC could not compile the loop-condition kernel: {log.decode(errors='replace')}")
    size = _checked(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize")
    cubin = b" " * size
    _checked(nvrtc.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
    nvrtc.nvrtcDestroyProgram(program)
    module = _checked(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
    return _checked(driver.cuModuleGetFunction(module, b"set_condition"), "cuModuleGetFunction")


def _add_node(driver: Any, graph: Any, dependencies: list[Any], params: Any) -> Any:
    """``cuGraphAddNode`` across binding versions: 13.x takes edge data, 12.x does not."""
    try:
        result = driver.cuGraphAddNode(graph, dependencies, None, len(dependencies), params)
    except TypeError:
        result = driver.cuGraphAddNode(graph, dependencies, len(dependencies), params)
    return _checked(result, "cuGraphAddNode")


def _checked(result: Any, call: str) -> Any:
    """The values of a ``cuda.bindings`` call (an error code, then values), raising on a failed call."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise RuntimeError(f"{call} failed: {status!r}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)
