"""The small model protocol every transdec decoder is written against.

A Transducer decoder needs three things from a model, and nothing else:

* a :class:`HeadSpec` saying how to read the joint's output vector;
* a :class:`Predictor` (the "decoder" or prediction network) that advances one label at a time;
* a :class:`Joint` that combines encoder frames with predictor outputs into logits.

Anything with ``head``, ``predictor`` and ``joint`` attributes of these kinds is a
:class:`DecodingModel`: transdec's own modules, or adapters around NeMo, icefall or ONNX models. A
:class:`SpeechModel` adds what transcription needs around the decoder: audio to encoder frames and a tokenizer.

Output layout (the one NeMo uses, so NeMo models fit without remapping), with ``V = num_tokens``:

=============  ==========================================  ==============================
kind           joint output ``[..., C]``                   blank
=============  ==========================================  ==============================
``rnnt``       ``V`` tokens, blank                          ``V``
``tdt``        ``V`` tokens, blank, ``len(durations)``      ``V``
               duration logits
``multiblank`` ``V`` tokens, big blanks, blank; big blank   ``V + len(big_blank_durations)``
               ``i`` sits at ``blank - 1 - i``
=============  ==========================================  ==============================

The joint returns raw logits; decoders normalise them (log-softmax) themselves, so that scores mean
the same on every device. For TDT the label logits (tokens and blank) and the duration logits are
normalised separately; for multi-blank all ``C`` outputs share one softmax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import torch

HeadKind = Literal["rnnt", "tdt", "multiblank"]

#: A predictor's recurrent state. Opaque to decoders: only the predictor creates, selects and gathers it.
PredictorState = Any


@dataclass(frozen=True)
class HeadSpec:
    """How to read the joint output.

    Attributes:
        kind: ``"rnnt"``, ``"tdt"`` or ``"multiblank"``.
        num_tokens: size ``V`` of the non-blank vocabulary.
        durations: TDT only: the frame advance of each duration output, e.g. ``(0, 1, 2, 3, 4)``.
        big_blank_durations: multi-blank only: the frame advance of each big blank, e.g. ``(2, 4, 8)``.
    """

    kind: HeadKind
    num_tokens: int
    durations: tuple[int, ...] = ()
    big_blank_durations: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # Accept lists from configs but store tuples, so the spec stays hashable and immutable.
        object.__setattr__(self, "durations", tuple(int(d) for d in self.durations))
        object.__setattr__(self, "big_blank_durations", tuple(int(d) for d in self.big_blank_durations))
        if self.kind not in ("rnnt", "tdt", "multiblank"):
            raise ValueError(f"HeadSpec.kind must be 'rnnt', 'tdt' or 'multiblank', got {self.kind!r}")
        if self.num_tokens < 1:
            raise ValueError(f"HeadSpec.num_tokens must be at least 1, got {self.num_tokens}")
        if self.kind == "tdt":
            if not self.durations:
                raise ValueError("a TDT head needs durations, e.g. (0, 1, 2, 3, 4)")
            if min(self.durations) < 0 or len(set(self.durations)) != len(self.durations):
                raise ValueError(f"TDT durations must be distinct and non-negative, got {self.durations}")
            if max(self.durations) < 1:
                raise ValueError(f"TDT durations need at least one positive value, got {self.durations}")
        elif self.durations:
            raise ValueError(f"durations are for TDT heads only, got them for kind={self.kind!r}")
        if self.kind == "multiblank":
            if not self.big_blank_durations:
                raise ValueError("a multi-blank head needs big_blank_durations, e.g. (2, 4, 8)")
            if min(self.big_blank_durations) < 2 or len(set(self.big_blank_durations)) != len(
                self.big_blank_durations
            ):
                raise ValueError(
                    f"big blank durations must be distinct and at least 2, got {self.big_blank_durations}"
                )
        elif self.big_blank_durations:
            raise ValueError(f"big_blank_durations are for multi-blank heads only, got kind={self.kind!r}")

    @property
    def blank_id(self) -> int:
        """Index of the standard blank; it also serves as the start-of-sequence input of predictors."""
        return self.num_tokens + len(self.big_blank_durations)

    @property
    def predictor_blank_id(self) -> int:
        """The blank as predictors see it, used as start-of-sequence: ``num_tokens`` for every head.

        Predictors have ``V + 1`` inputs; big blanks are never fed to them, so for multi-blank heads
        this differs from :attr:`blank_id`.
        """
        return self.num_tokens

    @property
    def num_labels(self) -> int:
        """Number of label outputs (tokens and every blank), i.e. the size of the label softmax."""
        return self.blank_id + 1

    @property
    def num_outputs(self) -> int:
        """Width ``C`` of the joint output: labels, then TDT duration logits."""
        return self.num_labels + len(self.durations)

    def big_blank_id(self, i: int) -> int:
        """Output index of big blank ``i`` (duration ``big_blank_durations[i]``)."""
        return self.blank_id - 1 - i

    @property
    def forced_advance(self) -> int:
        """Frames the forced blank moves: 1, or for TDT its smallest positive duration (1 in every usual head).

        After ``max_symbols_per_frame`` tokens at one frame, decoders take the *forced blank*: the standard blank
        (TDT: with that duration), scored like any emission, as the only emission allowed there."""
        return min(d for d in self.durations if d > 0) if self.kind == "tdt" else 1

    @property
    def forced_duration_index(self) -> int:
        """TDT: the index of the forced blank's duration among ``durations`` (0 for other heads)."""
        return self.durations.index(self.forced_advance) if self.kind == "tdt" else 0


@runtime_checkable
class Predictor(Protocol):
    """The prediction network, advanced one label at a time for a batch of ``B`` hypotheses.

    The predictor's vocabulary is ``V + 1``: the tokens and the blank
    (:attr:`HeadSpec.predictor_blank_id`, i.e. ``V``), which doubles as the start-of-sequence input.
    Big blanks are never fed to a predictor.
    """

    def initial_state(self, batch_size: int) -> PredictorState:
        """State before any label, for ``batch_size`` hypotheses, on the predictor's device and dtype."""
        ...

    def step(self, labels: torch.Tensor, state: PredictorState) -> tuple[torch.Tensor, PredictorState]:
        """Feed one label per hypothesis.

        Args:
            labels: ``[B]`` int64 token ids, or ``V`` (the blank) for start-of-sequence.
            state: the state for the same ``B`` hypotheses.

        Returns:
            ``(output [B, H], new_state)``: the output after consuming ``labels``, and the state that
            has consumed them. ``state`` itself is not modified.
        """
        ...

    def select_state(self, mask: torch.Tensor, if_true: PredictorState, if_false: PredictorState) -> PredictorState:
        """Per hypothesis, ``if_true`` where ``mask [B]`` is True, else ``if_false``."""
        ...

    def gather_state(self, state: PredictorState, indices: torch.Tensor) -> PredictorState:
        """The states of hypotheses ``indices [B']`` (repeats allowed), e.g. to reorder beams."""
        ...


@runtime_checkable
class Joint(Protocol):
    """The joint network, split so that decoders can project each input once and reuse it."""

    def project_encoder(self, encoder_out: torch.Tensor) -> torch.Tensor:
        """``[B, T, De] -> [B, T, J]``; decoders call this once per batch, before the decoding loop."""
        ...

    def project_predictor(self, predictor_out: torch.Tensor) -> torch.Tensor:
        """``[..., H] -> [..., J]``; decoders call this once per predictor step."""
        ...

    def combine(self, encoder_proj: torch.Tensor, predictor_proj: torch.Tensor) -> torch.Tensor:
        """Raw logits ``[..., C]`` from projections ``[..., J]`` (broadcasting like ``+``)."""
        ...


@dataclass(frozen=True, eq=False)
class JointOutputLayer:
    """What a joint of the form ``combine(f, g) = activation(f + g) @ weight.T + bias`` is made of.

    Attributes:
        activation: ``"relu"``, ``"tanh"`` or ``"sigmoid"``.
        weight: ``[C, J]``, the output layer's weight (the joint's own tensor, not a copy).
        bias: ``[C]`` or None.
    """

    activation: str
    weight: torch.Tensor
    bias: torch.Tensor | None


@runtime_checkable
class DenseJoint(Joint, Protocol):
    """A :class:`Joint` that can say what its ``combine`` computes, so that GPU searches can fuse it into one kernel
    with the frame gather around it (:mod:`transdec.decoding.cuda.joint_kernel`). Optional: decoders call
    ``combine`` on joints without it."""

    def output_layer(self) -> JointOutputLayer | None:
        """The layer ``combine`` applies, or None where it is not of that form."""
        ...


@runtime_checkable
class DecodingModel(Protocol):
    """What every transdec decoder needs: the head spec, the predictor and the joint."""

    @property
    def head(self) -> HeadSpec: ...

    @property
    def predictor(self) -> Predictor: ...

    @property
    def joint(self) -> Joint: ...


@runtime_checkable
class TextTokenizer(Protocol):
    """Token ids to text, as transcription needs it (a sentencepiece model in practice)."""

    def decode(self, ids: list[int]) -> str:
        """The text of token ids ``< V``."""
        ...

    def word_starts(self, ids: list[int]) -> list[bool]:
        """Per token, whether it begins a word (for word timings)."""
        ...


@runtime_checkable
class SpeechModel(DecodingModel, Protocol):
    """A whole recogniser: audio to encoder frames, the decoding parts, and a tokenizer.

    This is all that transcription (:mod:`transdec.transcribe`, :mod:`transdec.long_audio`,
    :mod:`transdec.evaluate`) reads of a model. transdec's own
    :class:`~transdec.model.transducer_model.TransducerModel` is one; models from other toolkits
    (:mod:`transdec.adapters`: NeMo checkpoints, ONNX exports) implement it to be transcribed and evaluated like
    the bundled ones. Shapes: ``B`` recordings, ``N`` samples, ``T`` encoder frames of width ``D``.
    """

    @property
    def device(self) -> torch.device:
        """Where :meth:`encode` wants its waveforms (and returns its frames)."""
        ...

    @property
    def sample_rate(self) -> int:
        """Audio samples per second the model takes."""
        ...

    @property
    def frame_shift_seconds(self) -> float:
        """Seconds between two encoder frames (timestamps are in frames of this size)."""
        ...

    @property
    def receptive_field(self) -> int | None:
        """Encoder frames on each side that one output frame depends on (times :attr:`frame_shift_seconds`: its
        reach in seconds), or ``None`` where it is unbounded (attention over the whole input). Long recordings
        are encoded in windows with this much context by default, which makes them exact."""
        ...

    @property
    def tokenizer(self) -> TextTokenizer: ...

    def encode(self, waveforms: torch.Tensor, lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Mono float audio ``[B, N]`` in ``[-1, 1]`` on :attr:`device` with valid sample counts ``[B]`` (``None``:
        all ``N``) to encoder frames ``[B, T, D]`` and their valid counts ``[B]``."""
        ...

    def encode_in_windows(self, waveform: torch.Tensor, chunk_seconds: float,
                          context_seconds: float | None) -> tuple[torch.Tensor, torch.Tensor]:
        """One recording ``[N]`` to encoder frames ``[1, T, D]`` and ``[1]`` (``T``), in memory bounded by the
        window instead of growing with ``N``: overlapping windows, each keeping the frames of ``chunk_seconds``
        and seeing ``context_seconds`` more on each side. ``context_seconds=None`` is exactly
        :attr:`receptive_field` frames (only where that is not ``None``), which makes the frames equal to
        :meth:`encode`'s up to float rounding. ``T`` is what :meth:`encode` gives for the whole recording.

        The model cuts the windows: its front end decides where a window may start and how features are
        normalised across windows (:mod:`transdec.long_audio`)."""
        ...

    def default_length_policy(self, device: torch.device | str) -> str:
        """How :meth:`encode` treats unseen input lengths on ``device`` when not told
        (:data:`transdec.model.transducer_model.LengthPolicy`); ``"none"`` for models without such a choice."""
        ...
