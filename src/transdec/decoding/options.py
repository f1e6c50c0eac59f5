"""Options of the decoding strategies: one frozen dataclass per strategy, checked when made.

Every options class derives from :class:`DecodingOptions`, whose fields :func:`~transdec.decoding.api.decode`
applies around any strategy; the fields a class adds are the keyword arguments of its strategy's function.
Each field's ``metadata["help"]`` documents it and becomes the help of its command-line flag
(``max_symbols_per_frame`` -> ``--max-symbols-per-frame``), so a new strategy's options reach the CLI with
no edits there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transdec.decoding.inputs import check_max_symbols, check_window_size


def option(default: Any, help: str, **metadata: Any) -> Any:
    """A dataclass field with the help text of its command-line flag (and e.g. ``choices``)."""
    return field(default=default, metadata={"help": help, **metadata})


@dataclass(frozen=True)
class DecodingOptions:
    """What every strategy takes; :func:`~transdec.decoding.api.decode` applies it around the strategy call."""

    cpu_threads: int | None = option(
        None, "intra-op threads for decoding on a CPU (default: transdec chooses; see transdec.runtime); "
              "ignored on other devices")

    def __post_init__(self) -> None:
        if self.cpu_threads is not None and (isinstance(self.cpu_threads, bool) or self.cpu_threads < 1):
            raise ValueError(f"cpu_threads must be at least 1 or None, got {self.cpu_threads}")


@dataclass(frozen=True)
class GreedyOptions(DecodingOptions):
    """Options of every greedy strategy."""

    max_symbols_per_frame: int | None = option(
        10, "tokens allowed at one frame; after them the blank is forced, and scored (none: no limit; a model that "
            "never emits a blank then never stops)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_max_symbols(self.max_symbols_per_frame)


WINDOW_HELP = "WIND window: frames scored per joint call while looking for the next label (1 = frame by frame); " \
              "never changes the output"


@dataclass(frozen=True)
class WindOptions(GreedyOptions):
    """Greedy decoding that scores a window of frames per joint call while looking for the next label (WIND)."""

    window_size: int = option(8, WINDOW_HELP)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_window_size(self.window_size)


GRAPH_MODES = ("auto", "while_loops", "step_graphs", "off")


@dataclass(frozen=True)
class GraphOptions(DecodingOptions):
    """How a search that CUDA graphs can capture runs on a GPU (never changes the output)."""

    cuda_graphs: str = option("auto", "on a GPU: 'while_loops' (the whole search as one graph with device-side "
                                      "loops), 'step_graphs' (each step a graph, the loops on the host), 'off', or "
                                      "'auto' (the fastest that works here)", choices=GRAPH_MODES)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.cuda_graphs not in GRAPH_MODES:
            raise ValueError(f"cuda_graphs must be one of {GRAPH_MODES}, got {self.cuda_graphs!r}")


MERGE_RULES = ("max", "logsumexp", "none")


@dataclass(frozen=True)
class BeamOptions(GreedyOptions):
    """Options every beam search takes. ``max_symbols_per_frame`` means what it means in greedy decoding: after
    that many tokens at one frame a hypothesis' only emission is the forced blank, scored like any other."""

    beam_size: int = option(4, "hypotheses kept per utterance")
    nbest: int = option(1, "hypotheses returned per utterance, best first (at most beam_size)")
    merge: str = option("max", "hypotheses with the same tokens in the same search state: keep the best ('max'), "
                               "keep it with the summed probability ('logsumexp'), or keep both ('none')",
                        choices=MERGE_RULES)
    length_norm: bool = option(False, "rank finished hypotheses by score per token instead of score")
    keep_greedy: bool = option(False, "also decode greedily and keep greedy decoding's hypothesis among the final "
                                      "ones, so that the best never scores below greedy's (costs a greedy search)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.beam_size, bool) or not isinstance(self.beam_size, int) or self.beam_size < 1:
            raise ValueError(f"beam_size must be a positive integer, got {self.beam_size!r}")
        if isinstance(self.nbest, bool) or not isinstance(self.nbest, int) or not 1 <= self.nbest <= self.beam_size:
            raise ValueError(f"nbest must lie in [1, beam_size={self.beam_size}], got {self.nbest!r}")
        if self.merge not in MERGE_RULES:
            raise ValueError(f"merge must be one of {MERGE_RULES}, got {self.merge!r}")


PRUNING_MODES = ("late", "early")


@dataclass(frozen=True)
class PruningOptions(BeamOptions):
    """Beam options with fusions' place in the ranking (beam-search paper, Sec. 2.3)."""

    pruning: str = option("late", "with fusions (an LM): rank candidates by the fused scores ('late'), or by the "
                                  "Transducer's alone and add the fusions' to those kept ('early')",
                          choices=PRUNING_MODES)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pruning not in PRUNING_MODES:
            raise ValueError(f"pruning must be one of {PRUNING_MODES}, got {self.pruning!r}")


@dataclass(frozen=True)
class CandidateOptions(PruningOptions):
    """Pruning options with ALSD's choice of a step's kept candidates (docs/decoding.md, "Beam search against greedy
    decoding")."""

    dominance_slots: int = option(
        0, "ALSD / ALSD++: of a step's beam_size kept candidates, how many go to those dominated by the fewest "
           "others rather than the best scored (default 0: Saon's ranking, the beam_size best)")

    def __post_init__(self) -> None:
        super().__post_init__()
        slots = self.dominance_slots
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
            raise ValueError(f"dominance_slots must be a non-negative integer, got {slots!r}")


@dataclass(frozen=True)
class ExpansionOptions(BeamOptions):
    """Beam options with mAES's adaptive expansion (mAES and AES++)."""

    expansion_beta: int = option(2, "mAES / AES++: candidates per hypothesis and step beyond beam_size")
    expansion_gamma: float = option(2.3, "mAES / AES++: drop a hypothesis' candidates scoring more than this below "
                                         "its best one (log-prob; inf keeps them all)")
    num_steps: int = option(2, "mAES / AES++: expansion steps per frame")

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.expansion_beta, bool) or not isinstance(self.expansion_beta, int) or self.expansion_beta < 0:
            raise ValueError(f"expansion_beta must be a non-negative integer, got {self.expansion_beta!r}")
        if (isinstance(self.expansion_gamma, bool) or not isinstance(self.expansion_gamma, (int, float))
                or not self.expansion_gamma >= 0):  # NaN fails this too
            raise ValueError(f"expansion_gamma must be a non-negative number, got {self.expansion_gamma!r}")
        if isinstance(self.num_steps, bool) or not isinstance(self.num_steps, int) or self.num_steps < 1:
            raise ValueError(f"num_steps must be a positive integer, got {self.num_steps!r}")
