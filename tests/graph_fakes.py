"""Stand-ins that let the CUDA-graph wrappers run on the CPU: "capture" keeps the steps and "replay" runs them
eagerly, and a conditional graph runs its loops on the host, on the flags the steps write."""

import contextlib
import types

import torch

from transdec.decoding.cuda.conditional_graphs import While


class NoStream:
    """Stands in for a CUDA stream."""

    def __init__(self, device=None) -> None:
        pass

    def wait_stream(self, other) -> None:
        pass


class InterpretedGraph:
    """Stands in for a ConditionalGraph: runs its pieces on the host, each While as long as its flag tensor (which
    the steps must write in place) says."""

    def __init__(self, pieces, device) -> None:
        self.pieces = pieces

    def launch(self) -> None:
        self._run(self.pieces)

    def _run(self, pieces) -> None:
        for piece in pieces:
            if isinstance(piece, While):
                for _ in range(10_000):
                    if not bool(piece.flag):
                        break
                    self._run(piece.body)
                else:
                    raise RuntimeError("a While flag never went false: the steps do not write it")
            else:
                piece.replay()


def replay_eagerly(monkeypatch, *modules, interpret_conditionals: bool = False) -> None:
    """Patch CUDA streams, and each module's ``capture_graph`` (and with ``interpret_conditionals`` its
    ``ConditionalGraph``), so that its graphs run eagerly on the CPU."""
    monkeypatch.setattr(torch.cuda, "Stream", NoStream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: NoStream())
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    for module in modules:
        monkeypatch.setattr(module, "capture_graph",
                            lambda steps, pool, stream, keep: types.SimpleNamespace(replay=steps))
        if interpret_conditionals:
            monkeypatch.setattr(module, "ConditionalGraph", InterpretedGraph)
