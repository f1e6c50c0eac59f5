"""AES++: adaptive expansion search batched over utterances and beams (beam-search paper, Sec. 2.2), RNN-T heads.

Frame-synchronous: at frame ``t`` every hypothesis of an utterance's beam (``K = beam_size``) stands at ``t``.
With ``S = min(num_steps, max_symbols_per_frame)`` expansion steps:

1. The *current set* starts as the beam. At each step one joint call scores every member at frame ``t``, and
   each member keeps as candidates its ``K + expansion_beta`` best labels, less those scoring more than
   ``expansion_gamma`` below its best (mAES's expansion pruning, per member).
2. A member whose candidates include the blank leaves the frame that way: it goes to the *pool*, scored with
   the blank.
3. Its token candidates make the next current set: the ``K`` best per utterance; one predictor call feeds them
   their tokens. A sequence can arise twice in a frame (``y + k`` from ``y``, and ``y + k`` already in the
   beam): two different paths, both kept until the pool merges them (mAES instead drops the second and adds
   its prefix's share by prefix search).
4. After the last step the members of the current set leave the frame by the blank, scored with one more joint
   call, and join the pool. So a frame holds at most ``S`` tokens of a hypothesis, and it is always left by a
   scored blank.
5. Pool entries with the same tokens (all now at ``t + 1``) are merged (``merge``: keep the best, or the best
   with the log of the summed probabilities); the ``K`` best become the beam of ``t + 1``.

Utterances past their end keep their beam. The n-best are the final beam by score (per token with
``length_norm``). All ``B x K`` hypotheses share every joint and predictor call; tokens go into the tree of
:class:`~transdec.decoding.beam_hyps.BatchedBeamHyps` (``S`` nodes per hypothesis and frame), and equal token
sequences are found by their hashes.

TDT and multi-blank emissions move hypotheses by different numbers of frames, which a frame-synchronous search
cannot hold; :mod:`transdec.decoding.beam_alsd_pp` searches those heads.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transdec.decoding.beam_hyps import HASH_BASE, HASH_MODULUS, BatchedBeamHyps, step_rows
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import ExpansionOptions
from transdec.decoding.registry import register_strategy
from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel


@register_strategy("beam_aes_pp", ExpansionOptions,
                   "AES++: adaptive expansion search batched over utterances and beams (RNN-T)")
@torch.inference_mode()
def beam_aes_pp(
    model: DecodingModel,
    encoder_out: torch.Tensor,
    lengths: torch.Tensor,
    max_symbols_per_frame: int | None = 10,
    beam_size: int = 4,
    nbest: int = 1,
    merge: str = "max",
    length_norm: bool = False,
    expansion_beta: int = 2,
    expansion_gamma: float = 2.3,
    num_steps: int = 2,
    fusions: Sequence[Fusion] = (),
) -> DecodingResult:
    """AES++ over ``encoder_out [B, T, D]`` with valid ``lengths [B]``; ``result.nbest`` has each utterance's
    ``nbest`` best hypotheses."""
    if model.head.kind != "rnnt":
        raise ValueError(f"beam_aes_pp searches frame by frame, which needs an RNN-T head (every blank moves one "
                         f"frame), not {model.head.kind!r}; use beam_alsd_pp")
    lengths = checked_lengths(encoder_out, lengths)
    options = ExpansionOptions(max_symbols_per_frame=max_symbols_per_frame, beam_size=beam_size, nbest=nbest, merge=merge,
                         length_norm=length_norm, expansion_beta=expansion_beta, expansion_gamma=expansion_gamma,
                         num_steps=num_steps)
    search = _AesSearch(model, encoder_out, lengths, options, Scoring(model.head, fusions))
    for frame in range(int(lengths.max()) if len(lengths) else 0):
        search.frame(frame)
    nbest_lists = search.nbest()
    return DecodingResult.from_nbest(nbest_lists, search.stats, encoder_out.device, encoder_out.dtype)


@dataclass
class _Set:
    """Hypotheses ``[B, K]`` within a frame: scores, token identity, and the tokens added at this frame."""

    scores: torch.Tensor
    am_scores: torch.Tensor
    hashes: torch.Tensor
    lengths: torch.Tensor
    last_tokens: torch.Tensor
    origins: torch.Tensor  # the beam slot at the start of the frame each one extends
    new_tokens: torch.Tensor  # [B, K, S], -1 past the tokens added at this frame
    new_logprobs: torch.Tensor  # [B, K, S], the tokens' label log-probs

    def gather(self, index: torch.Tensor) -> _Set:
        """Rows ``index [B, N]`` of each utterance."""
        def take(x: torch.Tensor) -> torch.Tensor:
            if x.dim() == 3:
                return x.gather(1, index.unsqueeze(2).expand(-1, -1, x.shape[2]))
            return x.gather(1, index)

        return _Set(*(take(getattr(self, name)) for name in _Set.__dataclass_fields__))


def _cat(sets: list[_Set]) -> _Set:
    return _Set(*(torch.cat([getattr(s, name) for s in sets], dim=1) for name in _Set.__dataclass_fields__))


class _AesSearch:
    def __init__(self, model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor, options: ExpansionOptions,
                 scoring: Scoring) -> None:
        self.head, self.predictor, self.joint = model.head, model.predictor, model.joint
        self.options, self.scoring = options, scoring
        batch_size, max_time, _ = encoder_out.shape
        beam, device = options.beam_size, encoder_out.device
        self.steps = min(options.num_steps, options.max_symbols_per_frame or options.num_steps)
        self.lengths = lengths
        self.encoder_proj = self.joint.project_encoder(encoder_out)  # [B, T, J]
        self.hyps = BatchedBeamHyps(batch_size, beam, device, encoder_out.dtype)
        self.slots = torch.arange(beam, device=device).expand(batch_size, beam)
        self.flat_base = (torch.arange(batch_size, device=device) * beam).unsqueeze(1)  # [B, 1]
        self.stats = DecodingStats()
        flat = batch_size * beam
        start = torch.full((flat,), self.head.predictor_blank_id, dtype=torch.long, device=device)
        out, self.state = self.predictor.step(start, self.predictor.initial_state(flat))
        self.predictor_proj = self.joint.project_predictor(out)  # [B*K, J]
        self.stats.predictor_calls += 1
        self.scorer_state = scoring.initial_state(flat, device)

    def frame(self, t: int) -> None:
        """Move every unfinished utterance's beam from frame ``t`` to ``t + 1``."""
        hyps, options, blank = self.hyps, self.options, self.head.blank_id
        batch_size, beam = hyps.scores.shape
        active = (t < self.lengths).unsqueeze(1)  # [B, 1]
        start = _Set(hyps.scores, hyps.am_scores, hyps.hashes, hyps.lengths, hyps.last_tokens, self.slots,
                     torch.full((batch_size, beam, self.steps), -1, dtype=torch.long, device=self.slots.device),
                     torch.zeros(batch_size, beam, self.steps, dtype=hyps.scores.dtype, device=self.slots.device))
        frames = self.encoder_proj[:, min(t, self.encoder_proj.shape[1] - 1)]  # [B, J]
        frames = frames.unsqueeze(1).expand(-1, beam, -1).flatten(0, 1)  # [B*K, J]
        # Finished utterances keep their beam: the pool's first part, from source 0 (the state at frame start).
        pool = [dataclasses.replace(start, scores=torch.where(active, -torch.inf, start.scores))]
        sources = [(self.state, self.predictor_proj, self.scorer_state)]
        pool_sources = [0]
        current = dataclasses.replace(start, scores=torch.where(active, start.scores, -torch.inf))
        state, projection, scorer_state = self.state, self.predictor_proj, self.scorer_state
        for step in range(self.steps):
            scored = self.scoring(self.joint.combine(frames, projection), self.scoring.context(scorer_state))
            self.stats.joint_calls += 1
            width = min(beam + options.expansion_beta, self.head.num_labels)
            top_scores, top_labels = scored.scores.topk(width, dim=1)  # [B*K, C]
            keep = (current.scores > -torch.inf).view(-1, 1).expand(-1, width)
            if not math.isinf(options.expansion_gamma):
                keep = keep & (top_scores >= top_scores[:, :1] - options.expansion_gamma)
            # Members with the blank among their candidates leave the frame by it.
            leaves = (keep & (top_labels == blank)).any(dim=1).view(batch_size, beam)
            pool.append(self._left_by_blank(current, scored, leaves))
            pool_sources.append(len(sources) - 1)
            # Their token candidates make the next set.
            tokens = keep & (top_labels != blank)
            next_set, parents, labels = self._next_set(current, top_scores, top_labels, tokens,
                                                       scored.label_logprobs, step)
            if not bool((next_set.scores > -torch.inf).any()):
                break
            flat_parents = (self.flat_base + parents).view(-1)
            fed = labels.view(-1)
            valid = (next_set.scores > -torch.inf).view(-1)
            state, projection = step_rows(self.predictor, self.joint, fed,
                                          self.predictor.gather_state(state, flat_parents), valid,
                                          self.head.predictor_blank_id)
            self.stats.predictor_calls += 1
            scorer_state = self.scoring.advance(self.scoring.gather_state(scorer_state, flat_parents), fed, valid)
            sources.append((state, projection, scorer_state))
            current = next_set
            if step == self.steps - 1:  # the last tokens leave the frame by the blank
                scored = self.scoring(self.joint.combine(frames, projection), self.scoring.context(scorer_state))
                self.stats.joint_calls += 1
                pool.append(self._left_by_blank(current, scored, current.scores > -torch.inf))
                pool_sources.append(len(sources) - 1)
        self._select(_cat(pool), pool_sources, sources, t)

    def _left_by_blank(self, members: _Set, scored, leaves: torch.Tensor) -> _Set:
        """``members`` that take the blank where ``leaves [B, K]``, the others dropped (score -inf)."""
        batch_size, beam = leaves.shape
        blank = self.head.blank_id
        score = scored.scores[:, blank].view(batch_size, beam)
        logprob = scored.label_logprobs[:, blank].view(batch_size, beam)
        return _Set(torch.where(leaves, members.scores + score, -torch.inf), members.am_scores + logprob,
                    members.hashes, members.lengths, members.last_tokens, members.origins, members.new_tokens,
                    members.new_logprobs)

    def _next_set(self, current: _Set, top_scores: torch.Tensor, top_labels: torch.Tensor,
                  tokens: torch.Tensor, label_logprobs: torch.Tensor, step: int) -> tuple[_Set, torch.Tensor, torch.Tensor]:
        """The ``K`` best token extensions per utterance of ``current`` (``tokens [B*K, C]`` marks the candidates),
        with the slot each extends and its token."""
        batch_size, beam = current.scores.shape
        width = top_labels.shape[1]
        labels = top_labels.view(batch_size, beam, width)
        scores = torch.where(tokens.view(batch_size, beam, width), current.scores.unsqueeze(2)
                             + top_scores.view(batch_size, beam, width), -torch.inf)
        hashes = (current.hashes.unsqueeze(2) * HASH_BASE + labels + 1) % HASH_MODULUS
        scores = scores.view(batch_size, beam * width)
        best, index = scores.topk(beam, dim=1)  # [B, K]
        parents = index // width
        chosen = labels.view(batch_size, beam * width).gather(1, index)
        parent_rows = (self.flat_base + parents).view(-1)
        am_logprobs = label_logprobs[parent_rows, chosen.view(-1)].view(batch_size, beam)
        extended = current.gather(parents)
        new_tokens, new_logprobs = extended.new_tokens.clone(), extended.new_logprobs.clone()
        new_tokens[:, :, step] = chosen
        new_logprobs[:, :, step] = am_logprobs
        next_set = _Set(best, extended.am_scores + am_logprobs,
                        hashes.view(batch_size, beam * width).gather(1, index), extended.lengths + 1, chosen,
                        extended.origins, new_tokens, new_logprobs)
        return next_set, parents, chosen

    def _select(self, pool: _Set, pool_sources: list[int], sources: list, t: int) -> None:
        """Merge equal sequences of the pool, keep each utterance's ``K`` best as the beam of ``t + 1``, and write
        their tokens into the tree."""
        hyps, beam = self.hyps, self.hyps.beam_size
        batch_size, size = pool.scores.shape
        alive = pool.scores > -torch.inf
        if self.options.merge != "none":
            same = ((pool.hashes.unsqueeze(2) == pool.hashes.unsqueeze(1))
                    & (pool.lengths.unsqueeze(2) == pool.lengths.unsqueeze(1))
                    & (pool.last_tokens.unsqueeze(2) == pool.last_tokens.unsqueeze(1))
                    & alive.unsqueeze(2) & alive.unsqueeze(1))  # [B, P, P]
            index = torch.arange(size, device=same.device)
            score_i, score_j = pool.scores.unsqueeze(2), pool.scores.unsqueeze(1)
            better = (score_i > score_j) | ((score_i == score_j) & (index.view(1, -1, 1) < index.view(1, 1, -1)))
            merged_away = (same & better).any(dim=1)
            if self.options.merge == "logsumexp":
                pool.scores = torch.where(same, pool.scores.unsqueeze(1), -torch.inf).logsumexp(dim=2)
                pool.am_scores = torch.where(same, pool.am_scores.unsqueeze(1), -torch.inf).logsumexp(dim=2)
            pool.scores = pool.scores.masked_fill(merged_away, -torch.inf)
        _, index = pool.scores.topk(beam, dim=1)  # [B, K]
        chosen = pool.gather(index)
        # Each chosen entry's predictor and fusion states: row (its slot in the pool part) of its source.
        part = index // beam
        rows = (self.flat_base + index % beam).view(-1)
        source_of_part = torch.tensor(pool_sources, device=index.device)[part].view(-1)
        state = projection = scorer_state = None
        for number, (source_state, source_projection, source_scorer) in enumerate(sources):
            mask = source_of_part == number
            if state is None:
                state = self.predictor.gather_state(source_state, rows)
                projection = source_projection[rows]
                scorer_state = self.scoring.gather_state(source_scorer, rows)
                continue
            if not bool(mask.any()):
                continue
            state = self.predictor.select_state(mask, self.predictor.gather_state(source_state, rows), state)
            projection = torch.where(mask.unsqueeze(1), source_projection[rows], projection)
            scorer_state = _select_scorer(self.scoring, mask, self.scoring.gather_state(source_scorer, rows),
                                          scorer_state)
        self.state, self.predictor_proj, self.scorer_state = state, projection, scorer_state
        hyps.reorder(chosen.origins)
        times = torch.full_like(chosen.origins, t)
        zeros = torch.zeros_like(chosen.origins)
        for step in range(self.steps):
            hyps.add_step(chosen.origins if step == 0 else self.slots, chosen.new_tokens[:, :, step], times, zeros,
                          chosen.new_logprobs[:, :, step])
        hyps.scores, hyps.am_scores = chosen.scores, chosen.am_scores

    def nbest(self) -> list[list[Hypothesis]]:
        hyps = self.hyps
        ranking = hyps.scores / hyps.lengths.clamp(min=1) if self.options.length_norm else hyps.scores
        top_scores, top = ranking.topk(self.options.nbest, dim=1)
        return hyps.hypotheses(torch.where(top_scores > -torch.inf, top, -1))


def _select_scorer(scoring: Scoring, mask: torch.Tensor, if_true: tuple, if_false: tuple) -> tuple:
    return tuple(f.scorer.select_state(mask, a, b) for f, a, b in zip(scoring.fusions, if_true, if_false, strict=True))
