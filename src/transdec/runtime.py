"""CPU settings chosen by transdec so that users need not know about them.

A greedy decoding loop is thousands of small tensor operations. Measured on a 2-core machine with a
parakeet-sized decoder (``docs/benchmarks.md``):

* Two OpenMP threads instead of one made label-looping about 1.4x faster at batch 16-32 when the other
  core was idle, no faster at batch 1-4, and about 3x *slower* at every batch size when another
  process kept the other core busy (OpenMP worker threads spin-wait for work between operations).
  So the loop runs with one intra-op thread unless the caller asks for more; the caller's setting is
  restored afterwards, so an encoder run outside the loop keeps all its threads.
* ``nn.LSTM`` with one time step goes through oneDNN on CPU and was 3-7x slower per step; the
  LSTM predictor's ``step`` therefore writes the cell out itself (see
  :class:`~transdec.model.predictors.LSTMPredictor`), whatever the global backend flags say.

And one setting for the whole process (:func:`configure_malloc`): glibc's malloc gives blocks above 32 MB
fresh pages from the kernel and returns them on ``free``, so the large activations of a training batch or an
encoder batch are faulted in and zeroed again every step. Keeping freed memory in the process made a CPU
training step 1.30x faster and the encoder in ``transdec evaluate`` 1.28x, but raised peak memory by 12% and
61% (the heap fragments as batch shapes change); tcmalloc (``LD_PRELOAD``) was faster still with *less*
memory (``bench/allocator.py``, ``docs/benchmarks.md``). So ``transdec train`` keeps freed memory by
default and the other commands do not; ``TRANSDEC_GLIBC_MALLOC=keep`` or ``=default`` chooses.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from typing import Iterator

import torch

#: Intra-op threads for CPU decoding loops when the caller does not choose.
DEFAULT_CPU_DECODING_THREADS = 1


@contextlib.contextmanager
def decoding_threads(device: torch.device | str, num_threads: int | None = None) -> Iterator[int]:
    """Run the block with ``num_threads`` (default :data:`DEFAULT_CPU_DECODING_THREADS`) intra-op threads.

    Only CPU devices are affected; yields the thread count the block runs with.
    """
    if torch.device(device).type != "cpu":
        yield torch.get_num_threads()
        return
    chosen = DEFAULT_CPU_DECODING_THREADS if num_threads is None else num_threads
    previous = torch.get_num_threads()
    if chosen == previous:
        yield chosen
        return
    torch.set_num_threads(chosen)
    try:
        yield chosen
    finally:
        torch.set_num_threads(previous)


#: Blocks below this size come from the heap, and up to this much freed memory stays in the process.
KEPT_FREED_BYTES = 1 << 30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, from glibc's <malloc.h>
#: The environment variable that overrides a command's choice, and its values.
MALLOC_ENV = "TRANSDEC_GLIBC_MALLOC"
MALLOC_SETTINGS = ("keep", "default")


def keep_freed_memory() -> bool:
    """Make glibc's malloc reuse large freed blocks instead of unmapping them (Linux with glibc only).

    Process-wide, so it is for programs that own their process. Returns whether glibc took the settings.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return all(libc.mallopt(parameter, ctypes.c_int(KEPT_FREED_BYTES)) == 1
                   for parameter in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD))
    except (OSError, AttributeError):  # another C library (musl has no mallopt)
        return False


def configure_malloc(default: str) -> bool:
    """Apply ``$TRANSDEC_GLIBC_MALLOC`` (``keep`` or ``default``), or ``default`` when it is unset; returns
    whether freed memory is now kept."""
    choice = os.environ.get(MALLOC_ENV) or default
    if choice not in MALLOC_SETTINGS:
        raise ValueError(f"{MALLOC_ENV} must be one of {', '.join(MALLOC_SETTINGS)}, got {choice!r}")
    return choice == "keep" and keep_freed_memory()
