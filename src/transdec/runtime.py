"""CPU settings for decoding loops, chosen by transdec so that users need not know about them.

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
"""

from __future__ import annotations

import contextlib
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
