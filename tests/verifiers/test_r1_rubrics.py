"""The R1 rewards as rubrics: `r1_zero` (correctness + format) and `r1` (correctness + format + language
consistency + helpfulness/safety), their `routed` correctness component, the pluggable helpfulness
scorer, and the recipe key that selects a rubric for training (reward.reward_kwargs.rlvr.rubric)."""

from __future__ import annotations

import pytest

from rlvr_verifiers import registry
from rlvr_verifiers.base import INVALID_INPUT, OK, PARSE_ERROR, WRONG, Item
from rlvr_verifiers.helpfulness import HelpfulnessVerifier, LocalHeuristicScorer
from rlvr_verifiers.rubric import ROUTED_KEY, Rubric

MATH = {ROUTED_KEY: "math"}


def test_builtin_rubrics_are_registered_lazily_under_their_names() -> None:
    names = registry.names()
    assert {"r1", "r1_zero", "helpfulness"} <= set(names)
    assert isinstance(registry.get("r1"), Rubric) and registry.get("r1").name == "r1"
    assert registry.get("r1_zero").primary == "routed"


@pytest.mark.parametrize(
    "response,score,status",
    [
        ("<think>3+4: count up. So 3+4=7.</think>7", 1.5, OK),  # right and well formed
        ("7", 1.0, OK),  # right, no reasoning block: no format reward
        ("<think>3+4 is 8</think>8", 0.5, WRONG),  # well formed, wrong: format pays alone
        ("8", 0.0, WRONG),
        ("<think>3+4 never closes", 0.0, PARSE_ERROR),  # no answer region: neither pays
    ],
)
def test_r1_zero_pays_correctness_plus_half_for_the_format(response: str, score: float, status: str) -> None:
    v = registry.get("r1_zero").verify(Item(response, "7", dict(MATH)))
    assert (v.score, v.status) == (pytest.approx(score), status), v
    assert v.metrics["routed/status_ok"] == float(status == OK)


@pytest.mark.parametrize(
    "response,score",
    [
        ("<think>3+4: count up. So 3+4=7.</think>7", 1.0 + 0.2 + 0.1 + 0.2),
        ("<think>三加四</think>7", 1.0 + 0.2 + 0.0 + 0.2),  # reasoning in the wrong script
        ("<think>3 and 4 mixed 三加四</think>7", 1.0 + 0.2 + 0.1 * 8 / 11 + 0.2),  # 8 of 11 letters Latin
        ("<think>ok</think>I cannot help with that", 0.0 + 0.2 + 0.1 + 0.2 * 0.25),  # refusal
        ("7", 1.0 + 0.0 + 0.0 + 0.2),
        ("<think>ok</think>how to make a bomb 7", 1.0 + 0.2 + 0.1 + 0.0),  # unsafe: helpfulness 0
    ],
)
def test_r1_rubric_weights_each_component_as_documented(response: str, score: float) -> None:
    v = registry.get("r1").verify(Item(response, "7", dict(MATH)))
    assert v.score == pytest.approx(score), v
    assert v.status == registry.get("math").verify(Item(response, "7")).status  # correctness decides


def test_routed_component_uses_each_items_own_verifier_in_one_batch() -> None:
    items = [
        Item("<think>a</think>7", "7", {ROUTED_KEY: "math"}),
        Item(
            "<think>a</think><answer>(3+5)*2</answer>",
            {"target": 16, "numbers": [2, 3, 5]},
            {ROUTED_KEY: "countdown"},
        ),
        Item(
            "<think>a</think><answer>3*5</answer>",
            {"target": 16, "numbers": [3, 5]},
            {ROUTED_KEY: "countdown"},
        ),
        Item("<think>a</think>7", "7", {}),  # nothing routed: the correctness component cannot decide
        Item("<think>a</think>7", "7", {ROUTED_KEY: "r1"}),  # a rubric is no correctness verifier
    ]
    verdicts = registry.get("r1_zero").verify_batch(items)
    assert [v.status for v in verdicts] == [OK, OK, WRONG, INVALID_INPUT, INVALID_INPUT]
    # invalid_input in the primary pays nothing, not even the format
    assert [v.score for v in verdicts] == pytest.approx([1.5, 1.5, 0.5, 0.0, 0.0])
    assert "routed_verifier" in verdicts[3].detail


def test_helpfulness_scorer_rules() -> None:
    scorer = LocalHeuristicScorer()
    item = Item("", None)
    assert scorer.score("7", item) == (1.0, "helpful")
    assert scorer.score("   ", item) == (0.0, "empty answer")
    assert scorer.score("As an AI language model I won't", item)[0] == 0.25
    assert scorer.score("Here is how to build a bomb", item) == (0.0, "unsafe")
    assert scorer.score("7 7 7 7 7 7 7 8", item) == (0.5, "degenerate")
    assert scorer.score("the sum of 3 and 4 is 7", item) == (1.0, "helpful")
    v = registry.get("helpfulness").verify(Item("<think>x</think>how to make a bomb", None))
    assert (v.score, v.status, v.metrics["safe"]) == (0.0, WRONG, 0.0)
    assert registry.get("helpfulness").verify(Item("<think>never closed", None)).status == PARSE_ERROR


def test_another_scorer_plugs_in_under_its_own_name() -> None:
    class LengthScorer:  # e.g. a reward model on GPU; here: longer answers score higher
        def score(self, answer: str, item: Item) -> tuple[float, str]:
            return min(1.0, len(answer.strip()) / 10), "length"

    registry.register("test_helpfulness_length")(HelpfulnessVerifier(LengthScorer()))
    rubric = Rubric.from_dict(
        {
            "name": "test_r1_length",
            "components": [{"verifier": "routed"}, {"verifier": "test_helpfulness_length", "weight": 0.5}],
        }
    )
    v = rubric.verify(Item("<think>a</think>7 is it", "7", dict(MATH)))
    # math reads "7 is it" as wrong (not the bare number); the plugged scorer pays 0.5 * 7/10
    assert (v.status, v.score) == (WRONG, pytest.approx(0.5 * 0.7))
    assert v.metrics["test_helpfulness_length/helpfulness"] == pytest.approx(0.7)


def test_bridge_config_selects_a_rubric_by_name_and_rejects_what_is_not_one() -> None:
    # the bridge is the one module importing verl (the `train` extra CI installs): never a skip
    from rlvr_verifiers.verl_bridge import BridgeConfig

    def config(**rlvr):
        return BridgeConfig.from_verl_config({"reward": {"reward_kwargs": {"rlvr": rlvr}}})

    assert config().rubric is None
    assert config(rubric="r1").rubric == "r1"
    with pytest.raises(ValueError, match=r"rlvr\.rubric: unknown verifier 'r2'; available: .*r1_zero"):
        config(rubric="r2")
    with pytest.raises(ValueError, match="'math' is a verifier, not a rubric"):
        config(rubric="math")
