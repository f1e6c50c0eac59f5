"""Label-looping's bookkeeping as two Triton kernels, for CUDA graphs.

Inside a CUDA graph a step costs about the same per kernel, however small, so the dozens of elementwise
operations around each joint call dominate. Two kernels replace them, one program per row:

* :func:`search_pass`: from the joint logits of a row's window ``[W, C]`` (``W = 1`` without WIND), the
  greedy emission at each position (argmax label and its log-probability, TDT duration, advance; at position 0
  the forced blank after ``max_symbols_per_frame`` tokens at the frame), then the
  chain of blank jumps the reference follows from position 0 (see :mod:`transdec.decoding.greedy.wind_window`):
  moves the row's frame, adds the crossed blanks' log-probs to its score, and stores the emission where
  the chain stopped (the row's label, if it found one) and whether the row is still searching;
* :func:`end_label`: appends each active row's label to its hypothesis and moves its frame as the label
  says, and gives the next predictor input.

They compute what :class:`~transdec.decoding.emissions.GreedyHead`, the skippers and
``LabelLoopingSearch.end_label`` compute, with the log-softmax as ``max - logsumexp``; the tests hold them
to the per-utterance reference (on CPU through Triton's interpreter, ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import os

import torch

from transdec.protocol import HeadSpec

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU wheels of torch come without Triton
    triton = None


def kernels_available(device: torch.device) -> bool:
    """Whether the kernels run for tensors on ``device`` (on CPU only through Triton's interpreter);
    ``TRANSDEC_GREEDY_KERNELS=0`` turns them off, for comparisons."""
    if triton is None or os.environ.get("TRANSDEC_GREEDY_KERNELS") == "0":
        return False
    return device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def found_buffers(batch_size: int, dtype: torch.dtype, device: torch.device) -> dict[str, torch.Tensor]:
    """The per-row emission that :func:`search_pass` stores and :func:`end_label` reads."""
    integers = {name: torch.zeros(batch_size, dtype=torch.long, device=device)
                for name in ("labels", "advance", "durations")}
    floats = {name: torch.zeros(batch_size, dtype=dtype, device=device) for name in ("label_logprobs", "logprobs")}
    return integers | floats


def search_pass(head: HeadSpec, logits: torch.Tensor, advance_table: torch.Tensor, durations: torch.Tensor,
                time: torch.Tensor, lengths: torch.Tensor, tokens_at_frame: torch.Tensor, scores: torch.Tensor,
                searching: torch.Tensor, found: dict[str, torch.Tensor], max_symbols_per_frame: int | None) -> None:
    """One search pass over logits ``[B, W, C]``; updates ``time``, ``tokens_at_frame``, ``scores`` and
    ``searching`` (all ``[B]``) and the ``found`` emission tensors (``[B]``: label, advance, duration,
    label_logprob, logprob) in place."""
    batch, window, _ = logits.shape
    block_c = triton.next_power_of_2(head.num_labels)
    _search_pass[(batch,)](
        logits, logits.stride(0), logits.stride(1), advance_table, durations,
        time, lengths, tokens_at_frame, scores, searching,
        found["labels"], found["advance"], found["durations"], found["label_logprobs"], found["logprobs"],
        NUM_TOKENS=head.num_tokens, NUM_LABELS=head.num_labels, NUM_DURATIONS=len(head.durations),
        TDT=head.kind == "tdt", W=window, BLOCK_W=triton.next_power_of_2(window), BLOCK_C=block_c,
        BLOCK_D=triton.next_power_of_2(max(len(head.durations), 1)), num_warps=max(1, min(8, block_c // 256)),
        UPCAST=logits.dtype in (torch.float16, torch.bfloat16), MAX_SYMBOLS=max_symbols_per_frame or 0,
        BLANK=head.blank_id, FORCED_ADVANCE=head.forced_advance, FORCED_DURATION=head.forced_duration_index,
    )


def end_label(head: HeadSpec, found: dict[str, torch.Tensor], time: torch.Tensor, lengths: torch.Tensor,
              tokens_at_frame: torch.Tensor, active: torch.Tensor, labels: torch.Tensor, hyps) -> None:
    """Record each active row's found label in ``hyps`` and move its frame; updates ``time``,
    ``tokens_at_frame``, ``active`` and the next predictor inputs ``labels`` in place."""
    _end_label[(time.shape[0],)](
        found["labels"], found["advance"], found["durations"], found["label_logprobs"], found["logprobs"],
        time, lengths, tokens_at_frame, active, labels,
        hyps.tokens, hyps.timestamps, hyps.durations, hyps.token_logprobs, hyps.lengths, hyps.scores,
        hyps.tokens.stride(0), BLANK_INPUT=head.predictor_blank_id, TDT=head.kind == "tdt",
    )


if triton is not None:

    @triton.jit
    def _search_pass(logits, stride_b, stride_w, advance_table, durations,
                     time, lengths, tokens_at_frame, scores, searching,
                     found_label, found_advance, found_duration, found_label_logprob, found_logprob,
                     NUM_TOKENS: tl.constexpr, NUM_LABELS: tl.constexpr, NUM_DURATIONS: tl.constexpr,
                     TDT: tl.constexpr, W: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr,
                     BLOCK_D: tl.constexpr, UPCAST: tl.constexpr, MAX_SYMBOLS: tl.constexpr, BLANK: tl.constexpr,
                     FORCED_ADVANCE: tl.constexpr, FORCED_DURATION: tl.constexpr):
        row = tl.program_id(0)
        positions = tl.arange(0, BLOCK_W)
        rows = logits + row * stride_b + positions[:, None] * stride_w  # [BLOCK_W, 1] pointers
        classes = tl.arange(0, BLOCK_C)[None, :]
        x = tl.load(rows + classes, mask=(positions[:, None] < W) & (classes < NUM_LABELS), other=float("-inf"))
        if UPCAST:  # a joint in lower precision: normalise in float32
            x = x.to(tl.float32)
        best = tl.max(x, axis=1)
        label = tl.argmax(x, axis=1)
        log_total = tl.log(tl.sum(tl.exp(x - best[:, None]), axis=1))
        label_logprob = -log_total  # max - logsumexp
        # The forced blank: after MAX_SYMBOLS tokens at the row's frame, position 0 emits the blank, whatever
        # the argmax (its log-prob: its logit - logsumexp).
        start = tl.load(time + row)
        if MAX_SYMBOLS > 0:
            forced = (positions == 0) & (tl.load(tokens_at_frame + row) >= MAX_SYMBOLS)
        else:
            forced = positions < 0
        blank_logit = tl.sum(tl.where(classes == BLANK, x, 0.0), axis=1)
        label = tl.where(forced, BLANK, label)
        label_logprob = tl.where(forced, blank_logit - best - log_total, label_logprob)
        if TDT:
            options = tl.arange(0, BLOCK_D)[None, :]
            y = tl.load(rows + NUM_LABELS + options, mask=(positions[:, None] < W) & (options < NUM_DURATIONS),
                        other=float("-inf"))
            if UPCAST:
                y = y.to(tl.float32)
            best_y = tl.max(y, axis=1)
            log_total_y = tl.log(tl.sum(tl.exp(y - best_y[:, None]), axis=1))
            duration = tl.load(durations + tl.argmax(y, axis=1))
            duration_logprob = -log_total_y
            forced_logit = tl.sum(tl.where(options == FORCED_DURATION, y, 0.0), axis=1)
            duration = tl.where(forced, FORCED_ADVANCE, duration)
            duration_logprob = tl.where(forced, forced_logit - best_y - log_total_y, duration_logprob)
            logprob = label_logprob + duration_logprob
            is_blank = label == NUM_TOKENS
            advance = tl.where(is_blank, tl.maximum(duration, 1), duration)
        else:
            duration = tl.zeros_like(label)
            logprob = label_logprob
            is_blank = label >= NUM_TOKENS
            advance = tl.load(advance_table + label).to(label.dtype)

        length = tl.load(lengths + row)
        # The reference's chain of blank jumps from position 0: it stops at the first visited label, at the
        # utterance's end, or past the window. Jumps only go forward, so one sweep visits the chain in order.
        end = start - start
        crossed = tl.sum(tl.zeros_like(logprob), axis=0)
        for k in tl.static_range(W):
            here = positions == k
            blank_here = tl.sum(tl.where(here, is_blank.to(tl.int32), 0), axis=0) > 0
            jump = (end == k) & blank_here & (start + k < length)
            crossed += tl.where(jump, tl.sum(tl.where(here, logprob, 0.0), axis=0), 0.0)
            end = tl.where(jump, k + tl.sum(tl.where(here, advance, 0), axis=0), end)

        was_searching = tl.load(searching + row) != 0
        moved = start + end
        if was_searching:
            tl.store(time + row, moved)
            tl.store(scores + row, tl.load(scores + row) + crossed)
            if end > 0:
                tl.store(tokens_at_frame + row, 0)
        tl.store(searching + row, (was_searching & (end >= W) & (moved < length)).to(tl.int1))
        # The emission where the chain stopped: the row's label if it is still inside the window.
        at = positions == tl.minimum(end, W - 1)
        tl.store(found_label + row, tl.sum(tl.where(at, label, 0), axis=0))
        tl.store(found_advance + row, tl.sum(tl.where(at, advance, 0), axis=0))
        tl.store(found_duration + row, tl.sum(tl.where(at, duration, 0), axis=0))
        tl.store(found_label_logprob + row, tl.sum(tl.where(at, label_logprob, 0.0), axis=0))
        tl.store(found_logprob + row, tl.sum(tl.where(at, logprob, 0.0), axis=0))

    @triton.jit
    def _end_label(found_label, found_advance, found_duration, found_label_logprob, found_logprob,
                   time, lengths, tokens_at_frame, active, labels,
                   hyp_tokens, hyp_timestamps, hyp_durations, hyp_token_logprobs, hyp_lengths, hyp_scores,
                   hyp_stride, BLANK_INPUT: tl.constexpr, TDT: tl.constexpr):
        row = tl.program_id(0)
        frame = tl.load(time + row)
        length = tl.load(lengths + row)
        label = tl.load(found_label + row)
        advance = tl.load(found_advance + row)
        count = tl.load(tokens_at_frame + row)
        if frame < length:
            slot = row * hyp_stride + tl.load(hyp_lengths + row)
            tl.store(hyp_tokens + slot, label)
            tl.store(hyp_timestamps + slot, frame)
            if TDT:
                tl.store(hyp_durations + slot, tl.load(found_duration + row))
            tl.store(hyp_token_logprobs + slot, tl.load(found_label_logprob + row))
            tl.store(hyp_lengths + row, tl.load(hyp_lengths + row) + 1)
            tl.store(hyp_scores + row, tl.load(hyp_scores + row) + tl.load(found_logprob + row))
            count = tl.where(advance == 0, count + 1, 0)
            frame += advance
        else:
            count = count * 0
        tl.store(time + row, frame)
        tl.store(tokens_at_frame + row, count)
        still = frame < length
        tl.store(active + row, still.to(tl.int1))
        tl.store(labels + row, tl.where(still, label, BLANK_INPUT))
