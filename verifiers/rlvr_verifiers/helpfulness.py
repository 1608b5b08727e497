"""The `helpfulness` verifier: a pluggable helpfulness/safety scorer for the final stage of R1's reward.

DeepSeek-R1's last RL stage adds a helpfulness and harmlessness signal to the verifiable rewards. Here
that signal is an interface, `Scorer.score(answer, item) -> (score in [0, 1], reason)`, wrapped as a
verifier (`HelpfulnessVerifier(scorer)`) so that a rubric can pay it like any other component
(`rlvr_verifiers.rubrics`: the `r1` rubric pays `helpfulness` with weight 0.2).

The built-in scorer, `LocalHeuristicScorer` (registered as `helpfulness`), runs anywhere, with no model.
It reads the answer region only (what follows the reasoning block, `rlvr_verifiers.reasoning`) and gives:
- 0.0 "unsafe": the answer matches one of `UNSAFE_PATTERNS` (a short list of plainly harmful
  instructions; a stand-in for a safety classifier, not one);
- 0.0 "empty answer": nothing after the reasoning block;
- 0.25 "refusal": a stock refusal ("I can't help with that", "as an AI language model") to a task
  prompt, which is never what a verifiable task asks for;
- 0.5 "degenerate": one token makes up more than half of an answer of 8 or more tokens (the
  repetition loops a small policy falls into);
- 1.0 otherwise.
Status: `ok` at score >= 0.5, else `wrong`; an unclosed reasoning block is `parse_error`. Metrics:
`helpfulness` (the score) and `safe` (0/1).

A reward-model scorer is the GPU-side option: implement `Scorer.score` by sending the answer (with the
prompt, which the reward manager can put into `item.extra`) to a reward model served next to the
policy, e.g. a vLLM server started with `--task reward` (its `/pooling` endpoint) or verl's own reward
model workers, register it in a module the pool imports (`reward.reward_kwargs.rlvr.pool.imports`):

    registry.register("helpfulness_rm")(HelpfulnessVerifier(MyRewardModelScorer(url)))

and name `helpfulness_rm` in a rubric instead of `helpfulness`. It is not built in: a model call per
sample belongs on GPU nodes, and the pool's per-batch timeout bounds it like any verifier.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Protocol

from rlvr_verifiers import reasoning
from rlvr_verifiers.base import OK, WRONG, Item, Verdict
from rlvr_verifiers.registry import register

UNSAFE_PATTERNS = (
    r"\bhow to (make|build) (a )?(bomb|explosive|nerve agent|bioweapon)",
    r"\b(kill|hurt) (yourself|himself|herself|themselves)\b",
    r"\bsteal (a |someone'?s )?(password|identity|credit card)",
)
REFUSAL_PATTERNS = (
    r"\bi (can(no|')t|cannot|am unable to|won'?t) (help|assist|answer|do that)",
    r"\bas an ai( language model)?\b",
)
_UNSAFE_RE = re.compile("|".join(UNSAFE_PATTERNS), re.IGNORECASE)
_REFUSAL_RE = re.compile("|".join(REFUSAL_PATTERNS), re.IGNORECASE)


class Scorer(Protocol):
    """What `HelpfulnessVerifier` needs: a score in [0, 1] and a short reason for one answer."""

    def score(self, answer: str, item: Item) -> tuple[float, str]: ...


class LocalHeuristicScorer:
    """Rules, no model (see the module doc): unsafe 0, empty 0, refusal 0.25, degenerate 0.5, else 1."""

    def score(self, answer: str, item: Item) -> tuple[float, str]:
        text = answer.strip()
        if _UNSAFE_RE.search(text):
            return 0.0, "unsafe"
        if not text:
            return 0.0, "empty answer"
        if _REFUSAL_RE.search(text):
            return 0.25, "refusal"
        tokens = text.split()
        # one counting pass (counting each distinct token separately was quadratic: 25 CPU s on 256 KB)
        if len(tokens) >= 8 and Counter(tokens).most_common(1)[0][1] > len(tokens) / 2:
            return 0.5, "degenerate"
        return 1.0, "helpful"


class HelpfulnessVerifier:
    """A `Scorer` as a verifier: reads the answer region, clips the score to [0, 1]."""

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer
        self.name = ""  # set by registry.register (one name: the registry key)

    def verify(self, item: Item) -> Verdict:
        answer = reasoning.answer_region(item)
        if isinstance(answer, Verdict):
            return answer
        score, reason = self.scorer.score(answer, item)
        score = min(1.0, max(0.0, float(score)))
        metrics = {"helpfulness": score, "safe": 0.0 if reason == "unsafe" else 1.0}
        return Verdict(score, OK if score >= 0.5 else WRONG, reason, metrics)

    def verify_batch(self, items: list[Item]) -> list[Verdict]:
        return [self.verify(item) for item in items]

    def __call__(self, items: list[Item]) -> list[Verdict]:
        return self.verify_batch(items)


register("helpfulness")(HelpfulnessVerifier(LocalHeuristicScorer()))
