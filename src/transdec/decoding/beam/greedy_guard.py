"""``keep_greedy``: greedy decoding's hypothesis kept among a beam search's final hypotheses.

A beam search prunes, and a hypothesis it prunes early may be the one greedy decoding ends on: on random
parakeet-sized decoders ALSD++ at beam 2 still ends below greedy's score on one utterance in 32 now and then
(docs/decoding.md, "Beam search against greedy decoding"). With the option a strategy also decodes greedily and
ranks greedy's hypothesis with its own n-best, so its best never scores below greedy's. The greedy hypothesis
comes from a search at beam 1 that is greedy decoding exactly, with the same fusions, so that its score includes
what the beam's do (ALSD++, or a per-utterance specification at beam 1); it costs that search.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transdec.decoding.results import DecodingResult, DecodingStats, Hypothesis


def with_greedy(result: DecodingResult, greedy: DecodingResult, count: int, length_norm: bool) -> DecodingResult:
    """``result``'s n-best lists with each utterance's greedy hypothesis (``greedy``'s best) among their
    candidates: one per token sequence (the higher score; the beam's on a tie), ranked as the n-best are (by score,
    or per token with ``length_norm``; the beam's first on a tie), the ``count`` best; the call counts of both."""
    nbest = []
    for hyps, greedy_hyp in zip(result.nbest, greedy.hypotheses(), strict=True):
        by_tokens: dict[tuple[int, ...], Hypothesis] = {}
        for hyp in [*hyps, greedy_hyp]:
            key = tuple(hyp.tokens)
            if key not in by_tokens or hyp.score > by_tokens[key].score:
                by_tokens[key] = hyp
        ranked = sorted(by_tokens.values(), key=lambda h: -h.score / max(len(h.tokens), 1) if length_norm
                        else -h.score)
        nbest.append(ranked[:count])
    stats = DecodingStats(predictor_calls=result.stats.predictor_calls + greedy.stats.predictor_calls,
                          joint_calls=result.stats.joint_calls + greedy.stats.joint_calls)
    return DecodingResult.from_nbest(nbest, stats, result.hyps.scores.device, result.hyps.scores.dtype)


def kept_greedy(result: DecodingResult, options: Any, greedy: Callable[[], DecodingResult]) -> DecodingResult:
    """A beam strategy's ``result``, with ``options.keep_greedy`` the greedy hypothesis ``greedy()`` decodes kept
    among its n-best (:func:`with_greedy`)."""
    if not options.keep_greedy:
        return result
    return with_greedy(result, greedy(), options.nbest, options.length_norm)
