"""WIND (windowed inference for non-blank detection) inside batched label-looping.

Between two labels the predictor output does not change, so the joint can score a whole window of frames
``t .. t+w-1`` at once, ``[B, w, C]``, instead of one frame per call (WIND paper, Sec. 3.2).

Which window position is the next label? Not simply the first non-blank: that is only right for RNN-T,
where every blank moves exactly one frame. The reference decoder visits frames by following jumps: from
``t`` a blank moves ``advance(t)`` frames (1 for a blank, ``d`` for a big blank of duration ``d``, the
predicted duration for a TDT blank, at least 1), and it stops at the first visited frame whose argmax is
a label. A window position the jumps skip over is never looked at, even if its argmax is a label. So
inside a window we follow exactly that chain:

    next(k) = k + advance(k)   if position k is a blank inside the utterance
    next(k) = k                otherwise (a label, or past the utterance's end: the chain stops)

and positions at or past ``w`` (the chain left the window) also map to themselves. The chain from
position 0 has at most ``w`` steps, so ``ceil(log2 w)`` rounds of pointer doubling
(``next <- next[next]``, summing the blank log-probs along the way) give its end ``k*`` and the score of
the blanks it crossed, for every row at once and without a data-dependent loop. Then:

* ``k* < w`` inside the utterance: a label at frame ``t + k*``: its timestamp is ``t + k*`` (the frame
  where it was found, not the window start) and ``max_symbols_per_frame`` counts from that frame;
* ``t + k* >= length``: the utterance is finished;
* otherwise the chain jumped past the window: the next window starts at ``t + k*``.

RNN-T is the special case where every chain step is +1, i.e. the first non-blank, which it finds directly
from the run of leading blanks; for multi-blank and TDT the doubling gives output identical to the
reference. The tests check every head for windows 1 to 64.

:class:`WindowScan` is that window and chain for any rows, each with its own limit on the frames it may read:
label-looping's windowed pass (:class:`~transdec.decoding.greedy.label_looping.WindowSkipper`) takes each
utterance's length as the limit, or for streams the frames each stream has received.
"""

from __future__ import annotations

import math

import torch

from transdec.decoding.cuda import joint_kernel
from transdec.decoding.emissions import Emissions, GreedyHead
from transdec.protocol import Joint, JointOutputLayer


def max_advance(read: GreedyHead) -> int:
    head = read.head
    return max([1, *head.durations, *head.big_blank_durations])


class WindowScan:
    """The joint over a window of ``w`` frames per row and the reference's chain of blank jumps through it: what
    every windowed greedy search does once per joint call, whatever it keeps of the frames and of its rows.

    Frames are columns of ``encoder_proj [B, T, J]``; ``limits [B]`` is, per row, the first column it may not
    read (an utterance's length; for a stream, the end of the frames received so far). Positions at or past a
    row's limit end its chain: nothing is decided there.
    """

    def __init__(self, read: GreedyHead, joint: Joint, max_symbols_per_frame: int | None, window: int,
                 batch_size: int, device: torch.device, joint_layer: JointOutputLayer | None = None) -> None:
        self.read = read
        self.max_symbols = max_symbols_per_frame
        self.joint = joint
        self.joint_layer = joint_layer  # where given, the joint kernel computes the logits
        self.window = window
        self.rows = torch.arange(batch_size, device=device).unsqueeze(1)  # [B, 1]
        self.offsets = torch.arange(window, device=device)  # [w]
        # Chain positions: the window, then where a jump from its last position can land.
        self.positions = torch.arange(window + max_advance(read), device=device)  # [M]
        self.doublings = math.ceil(math.log2(window)) if window > 1 else 0
        # RNN-T blanks all move one frame, so its chain is simply the run of leading blanks.
        self._chain_end = self._first_non_blank if read.head.kind == "rnnt" else self._follow_jumps

    def logits(self, encoder_proj: torch.Tensor, predictor_proj: torch.Tensor, time: torch.Tensor) -> torch.Tensor:
        """Joint logits ``[B, w, C]`` of columns ``time .. time + w - 1`` of each row (clipped to the last column)."""
        if self.joint_layer is not None:
            return joint_kernel.joint_logits(self.joint_layer, encoder_proj, predictor_proj, time, self.window)
        frame_index = (time.unsqueeze(1) + self.offsets).clamp(max=max(encoder_proj.shape[1] - 1, 0))  # [B, w]
        return self.joint.combine(encoder_proj[self.rows, frame_index], predictor_proj.unsqueeze(1))

    def scan(self, encoder_proj: torch.Tensor, predictor_proj: torch.Tensor, context: tuple[torch.Tensor, ...],
             time: torch.Tensor, limits: torch.Tensor,
             tokens_at_frame: torch.Tensor) -> tuple[Emissions, torch.Tensor, torch.Tensor]:
        """Score each row's window from column ``time [B]`` and follow its blank chain from position 0.

        Returns the emissions ``[B, w]`` (fields), the chain's end ``[B]`` (a window position: a label there if it
        is below ``w`` and the row's limit; else where the chain left the window or the readable frames) and the
        log-prob of the blanks it crossed ``[B]``. ``tokens_at_frame [B]`` are the tokens emitted at ``time``: after
        ``max_symbols_per_frame`` of them the first emission is the forced blank.
        """
        inside = time.unsqueeze(1) + self.offsets < limits.unsqueeze(1)  # [B, w]
        # The forced blank (after max_symbols_per_frame tokens at a frame) can only be at the window's start.
        forced = None if self.max_symbols is None else (
            (tokens_at_frame >= self.max_symbols).unsqueeze(1) & (self.offsets == 0))
        emissions = self.read(self.logits(encoder_proj, predictor_proj, time), context, forced)  # fields [B, w]
        end, crossed = self._chain_end(inside & emissions.is_blank, emissions)
        return emissions, end, crossed

    def at(self, emissions: Emissions, end: torch.Tensor) -> Emissions:
        """The emission at each row's chain end ``end [B]`` (the window's last position where the end lies past
        it), ``[B]`` per field."""
        at = end.clamp(max=self.window - 1).unsqueeze(1)
        return Emissions(
            labels=emissions.labels.gather(1, at).squeeze(1),
            is_blank=emissions.is_blank.gather(1, at).squeeze(1),
            durations=None if emissions.durations is None else emissions.durations.gather(1, at).squeeze(1),
            advance=emissions.advance.gather(1, at).squeeze(1),
            label_logprobs=emissions.label_logprobs.gather(1, at).squeeze(1),
            scores=emissions.scores.gather(1, at).squeeze(1),
        )

    def _follow_jumps(self, step_blank: torch.Tensor, emissions: Emissions) -> tuple[torch.Tensor, torch.Tensor]:
        """End of the chain from position 0 and the log-prob of the blanks it crossed, ``[B]`` each, by
        pointer doubling (see the module docstring)."""
        w = self.window
        jump = self.positions.expand(step_blank.shape[0], -1).clone()  # [B, M]: positions map to themselves...
        jump[:, :w] = torch.where(step_blank, self.offsets + emissions.advance, self.offsets)  # ...or jump
        crossed = torch.zeros(jump.shape, dtype=emissions.scores.dtype, device=jump.device)
        crossed[:, :w] = torch.where(step_blank, emissions.scores, 0.0)
        for _ in range(self.doublings):
            crossed = crossed + crossed.gather(1, jump)
            jump = jump.gather(1, jump)
        return jump[:, 0], crossed[:, 0]

    def _first_non_blank(self, step_blank: torch.Tensor, emissions: Emissions) -> tuple[torch.Tensor, torch.Tensor]:
        """The same for RNN-T, where every blank moves one frame: the chain is the run of leading blanks,
        found in four operations instead of the doubling's dozen (at small batches, per-operation overhead
        rather than arithmetic sets the cost)."""
        leading_blanks = step_blank.long().cumprod(dim=1)  # [B, w]
        crossed = torch.where(leading_blanks.bool(), emissions.scores, 0.0).sum(dim=1)
        return leading_blanks.sum(dim=1), crossed
