"""ALSD++: alignment-length synchronous beam search batched over utterances and beams (beam-search paper, Sec. 2).

The search is the one :mod:`transdec.decoding.beam_alsd` spells out per utterance, with identical results:
every hypothesis takes one emission per step; the ``beam_size`` best candidates of each utterance are kept;
hypotheses with the same tokens in the same state are merged; finished hypotheses stay in the beam with
their scores. Here every step is a few tensor operations on all ``B x K`` hypotheses at once: one joint call,
one top-k per utterance, one predictor call for the hypotheses that emitted a token (state gathered from
the hypothesis each one extends, with the protocol's ``gather_state`` / ``select_state``), and merging by
comparing token-sequence hashes (:class:`~transdec.decoding.beam_hyps.BatchedBeamHyps`), ``K x K`` integer
comparisons per utterance. The tokens are kept in a tree of parent pointers, never copied.

Each hypothesis keeps its own frame, so RNN-T blanks move it by one frame, multi-blank big blanks by their
durations and TDT emissions by their durations, exactly as greedy decoding does; ``beam_size=1`` gives the
greedy label-looping result (tokens, timestamps, durations and score) for every head. Candidates per
hypothesis are its ``K`` best labels (times its ``K`` best durations for TDT): no other can be among the
utterance's ``K`` best.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transdec.decoding.beam_hyps import BatchedBeamHyps, merge_equal, pairwise_equal, step_rows
from transdec.decoding.emissions import lookup_tables
from transdec.decoding.inputs import checked_lengths
from transdec.decoding.options import PruningOptions
from transdec.decoding.registry import register_strategy
from transdec.decoding.results import DecodingResult, DecodingStats
from transdec.decoding.scoring import Fusion, Scoring
from transdec.protocol import DecodingModel


@register_strategy("beam_alsd_pp", PruningOptions,
                   "ALSD++: alignment-length synchronous beam search batched over utterances and beams")
@torch.inference_mode()
def beam_alsd_pp(
    model: DecodingModel,
    encoder_out: torch.Tensor,
    lengths: torch.Tensor,
    max_symbols_per_frame: int | None = 10,
    beam_size: int = 4,
    nbest: int = 1,
    merge: str = "max",
    length_norm: bool = False,
    pruning: str = "late",
    fusions: Sequence[Fusion] = (),
) -> DecodingResult:
    """Beam search over ``encoder_out [B, T, D]`` with valid ``lengths [B]``; ``result.nbest`` has each
    utterance's ``nbest`` best hypotheses."""
    lengths = checked_lengths(encoder_out, lengths)
    options = PruningOptions(max_symbols_per_frame=max_symbols_per_frame, beam_size=beam_size, nbest=nbest,
                                  merge=merge, length_norm=length_norm, pruning=pruning)
    search = _AlsdSearch(model, encoder_out, lengths, options, Scoring(model.head, fusions))
    while search.step():
        pass
    nbest_lists = search.nbest()
    return DecodingResult.from_nbest(nbest_lists, search.stats, encoder_out.device, encoder_out.dtype)


class _AlsdSearch:
    """The state of one batched search; :meth:`step` runs one search step."""

    def __init__(self, model: DecodingModel, encoder_out: torch.Tensor, lengths: torch.Tensor,
                 options: PruningOptions,
                 scoring: Scoring) -> None:
        self.head, self.predictor, self.joint = model.head, model.predictor, model.joint
        self.options, self.scoring = options, scoring
        batch_size, self.max_time, _ = encoder_out.shape
        beam, device = options.beam_size, encoder_out.device
        self.lengths = lengths.unsqueeze(1)  # [B, 1]
        self.rows = torch.arange(batch_size, device=device).unsqueeze(1)  # [B, 1]
        self.advance_by_label, self.duration_values = lookup_tables(self.head, device)
        self.encoder_proj = self.joint.project_encoder(encoder_out)  # [B, T, J]
        self.hyps = BatchedBeamHyps(batch_size, beam, device, encoder_out.dtype)
        self.stats = DecodingStats()
        flat = batch_size * beam
        start = torch.full((flat,), self.head.predictor_blank_id, dtype=torch.long, device=device)
        out, self.state = self.predictor.step(start, self.predictor.initial_state(flat))
        self.predictor_proj = self.joint.project_predictor(out)  # [B*K, J]
        self.stats.predictor_calls += 1
        self.scorer_state = scoring.initial_state(flat, device)
        self.context = scoring.context(self.scorer_state)

    def step(self) -> bool:
        """One emission for every hypothesis; False once every hypothesis is finished."""
        hyps, head = self.hyps, self.head
        batch_size, beam = hyps.scores.shape
        active = (hyps.time < self.lengths) & (hyps.scores > -torch.inf)  # [B, K]
        if not bool(active.any()):
            return False
        frames = self.encoder_proj[self.rows, hyps.time.clamp(max=self.max_time - 1)]  # [B, K, J]
        scored = self.scoring(self.joint.combine(frames.flatten(0, 1), self.predictor_proj), self.context)
        self.stats.joint_calls += 1
        emission = self._best_emissions(scored)  # fields [B*K, E]

        # Candidates: each active hypothesis' best emissions, and for a finished one itself, unchanged.
        scores = hyps.scores.view(-1, 1)
        flat_active = active.view(-1, 1)
        early = self.options.pruning == "early"
        candidates = torch.cat([torch.where(flat_active, scores + emission["score"], -torch.inf),
                                torch.where(flat_active, -torch.inf, scores)], dim=1)  # [B*K, E + 1]
        width = candidates.shape[1]
        if early:  # rank by the Transducer's log-probs, score by the fused ones
            ranking = torch.cat([torch.where(flat_active, scores + emission["am_logprob"], -torch.inf),
                                 torch.where(flat_active, -torch.inf, scores)], dim=1)
            _, top = ranking.view(batch_size, beam * width).topk(beam, dim=1)
            # Slots in score order, as merging expects: the best of equal hypotheses is the best scored.
            top_scores, order = candidates.view(batch_size, beam * width).gather(1, top).sort(
                dim=1, descending=True, stable=True)
            top = top.gather(1, order)
        else:
            top_scores, top = candidates.view(batch_size, beam * width).topk(beam, dim=1)  # [B, K]
        parents, which = top // width, top % width
        stays = which == width - 1
        flat_parents = (self.rows * beam + parents).view(-1)  # [B*K]
        pick = (flat_parents, which.clamp(max=width - 2).view(-1))
        labels = emission["label"][pick].view(batch_size, beam)
        durations = emission["duration"][pick].view(batch_size, beam)
        am_logprobs = emission["am_logprob"][pick].view(batch_size, beam)
        label_logprobs = emission["label_logprob"][pick].view(batch_size, beam)

        hyps.reorder(parents)
        tokens = ~stays & (labels < head.num_tokens)
        if head.kind == "tdt":
            advance = torch.where(labels == head.blank_id, durations.clamp(min=1), durations)
        else:
            advance = self.advance_by_label[labels]
        advance = advance.masked_fill(stays, 0)
        tokens_at_frame = torch.where(tokens & (advance == 0), hyps.tokens_at_frame + 1,
                                      torch.where(stays, hyps.tokens_at_frame, 0))
        time = hyps.time + advance
        if self.options.max_symbols_per_frame is not None:
            forced = tokens_at_frame >= self.options.max_symbols_per_frame
            time = time + forced
            tokens_at_frame = tokens_at_frame.masked_fill(forced, 0)
        hyps.add_step(parents, torch.where(tokens, labels, -1), hyps.time, durations, label_logprobs)
        hyps.scores = top_scores
        hyps.am_scores = hyps.am_scores + am_logprobs.masked_fill(stays, 0.0)
        hyps.time, hyps.tokens_at_frame = time, tokens_at_frame
        self._feed(flat_parents, labels.view(-1), tokens.view(-1))
        if self.options.merge != "none":
            self._merge()
        return True

    def _best_emissions(self, scored) -> dict[str, torch.Tensor]:
        """Each hypothesis' ``E`` best emissions ``[B*K, E]``: its ``K`` best labels (times its ``K`` best
        durations for TDT) with their decision scores, scores without fusions and label log-probs."""
        beam = self.options.beam_size
        by = scored.label_logprobs if self.options.pruning == "early" else scored.scores
        _, labels = by.topk(min(beam, scored.scores.shape[1]), dim=1)  # [N, k1]
        label_scores = scored.scores.gather(1, labels)
        label_logprobs = scored.label_logprobs.gather(1, labels)
        if scored.duration_logprobs is None:
            return {"label": labels, "duration": torch.zeros_like(labels), "score": label_scores,
                    "am_logprob": label_logprobs, "label_logprob": label_logprobs}
        duration_logprobs, duration_index = scored.duration_logprobs.topk(
            min(beam, scored.duration_logprobs.shape[1]), dim=1)  # [N, k2]
        n, k1, k2 = labels.shape[0], labels.shape[1], duration_index.shape[1]

        def outer(per_label: torch.Tensor, per_duration: torch.Tensor) -> torch.Tensor:
            return (per_label.unsqueeze(2) + per_duration.unsqueeze(1)).view(n, k1 * k2)

        return {
            "label": labels.unsqueeze(2).expand(n, k1, k2).reshape(n, k1 * k2),
            "duration": self.duration_values[duration_index].unsqueeze(1).expand(n, k1, k2).reshape(n, k1 * k2),
            "score": outer(label_scores, duration_logprobs),
            "am_logprob": outer(label_logprobs, duration_logprobs),
            "label_logprob": label_logprobs.unsqueeze(2).expand(n, k1, k2).reshape(n, k1 * k2),
        }

    def _feed(self, parents: torch.Tensor, labels: torch.Tensor, tokens: torch.Tensor) -> None:
        """Take each hypothesis' predictor and fusion state from its parent ``[B*K]`` and advance the rows that
        emitted a token (``tokens [B*K]``) by their ``labels``: one predictor call for the whole batch."""
        self.state = self.predictor.gather_state(self.state, parents)
        self.predictor_proj = self.predictor_proj[parents]
        self.scorer_state = self.scoring.gather_state(self.scorer_state, parents)
        if not bool(tokens.any()):
            self.context = self.scoring.context(self.scorer_state)
            return
        new_state, projected = step_rows(self.predictor, self.joint, labels, self.state, tokens,
                                         self.head.predictor_blank_id)
        self.stats.predictor_calls += 1
        self.state = self.predictor.select_state(tokens, new_state, self.state)
        self.predictor_proj = torch.where(tokens.unsqueeze(1), projected, self.predictor_proj)
        self.scorer_state = self.scoring.advance(self.scorer_state, labels, tokens)
        self.context = self.scoring.context(self.scorer_state)

    def _merge(self) -> None:
        """Merge hypotheses with the same tokens in the same state into the best of them (see the module
        docstring of :mod:`transdec.decoding.beam_alsd`)."""
        hyps = self.hyps
        finished = hyps.time >= self.lengths
        alive = hyps.scores > -torch.inf
        same_state = (finished.unsqueeze(2) & finished.unsqueeze(1)) | (
            ~finished.unsqueeze(2) & ~finished.unsqueeze(1) & pairwise_equal(hyps.time)
            & pairwise_equal(hyps.tokens_at_frame))
        same = hyps.same_tokens() & same_state & alive.unsqueeze(2) & alive.unsqueeze(1)  # [B, K, K]
        # Slots are in score order, so the one of a group that ranks ahead is its lowest slot.
        hyps.scores, hyps.am_scores = merge_equal(same, hyps.scores, hyps.am_scores, self.options.merge)

    def nbest(self) -> list[list]:
        """Each utterance's ``nbest`` best hypotheses, best first."""
        return self.hyps.best(self.options.nbest, self.options.length_norm)
