"""The `format` verifier (R1 think format, language consistency), composite rubrics (weighted, with
logged-only metrics kept out of the reward), and the registry contract (one name, no duplicates)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlvr_verifiers import registry
from rlvr_verifiers.base import Item, Verdict
from rlvr_verifiers.rubric import Component, Rubric

FORMAT = registry.get("format")


@pytest.mark.parametrize(
    "response,ok",
    [
        ("<think>2+2 is 4</think>The answer is 4.", True),
        ("  \n<think>reasoning</think>\n\\boxed{4}", True),
        ("The answer is 4.", False),  # no think block
        ("<think>unfinished reasoning and an answer", False),  # never closed
        ("<think>a</think>", False),  # nothing after it
        ("<think>a</think>   \n", False),
        ("<think>a</think><think>b</think>4", False),  # two blocks
        ("<think>a<think>b</think>4", False),  # nested open tag
        ("<think>a</think>4</think>", False),  # stray close tag
        ("Sure. <think>a</think>4", False),  # not at the start
        ("<think>  </think>4", False),  # empty reasoning
    ],
)
def test_r1_format_requires_one_closed_think_block_then_an_answer(response: str, ok: bool) -> None:
    v = FORMAT.verify(Item(response, None))
    assert (v.status == "ok") is ok, v
    assert v.metrics["format_ok"] == float(ok)


def test_prefilled_think_tag_is_honoured() -> None:
    assert FORMAT.verify(Item("reasoning</think>4", None, {"think_prefilled": True})).status == "ok"
    assert FORMAT.verify(Item("reasoning</think>4", None)).status == "wrong"


def test_language_consistency_measures_the_share_of_target_script_letters() -> None:
    english = FORMAT.verify(Item("<think>We add the numbers and get four.</think>4", None))
    mixed = FORMAT.verify(Item("<think>We add 我们相加 numbers.</think>4", None))
    chinese_target = FORMAT.verify(Item("<think>我们把数字相加 ok</think>4", None, {"language": "zh"}))
    assert english.metrics["language_consistency"] == 1.0
    assert mixed.metrics["language_consistency"] == pytest.approx(
        len("Weaddnumbers") / len("Weadd我们相加numbers")
    )
    assert chinese_target.metrics["language_consistency"] == pytest.approx(7 / 9)
    # LaTeX commands and digits are not words of any language.
    latex = FORMAT.verify(Item("<think>\\frac{1}{2} + \\sqrt{2} = 12345</think>4", None, {"language": "zh"}))
    assert latex.metrics["language_consistency"] == 1.0


def test_language_from_ground_truth_and_unknown_language_is_invalid_input() -> None:
    v = FORMAT.verify(Item("<think>Мы складываем</think>4", {"language": "ru"}))
    assert v.metrics["language_consistency"] == 1.0
    assert FORMAT.verify(Item("<think>x</think>4", None, {"language": "klingon"})).status == "invalid_input"


def test_language_consistency_is_logged_not_paid_by_the_format_verdict() -> None:
    v = FORMAT.verify(Item("<think>全部中文推理</think>4", None))
    assert v.score == 1.0 and v.metrics["language_consistency"] == 0.0


# ------------------------------------------------------------------------------------------ rubrics

R1_MATH = Rubric.from_dict(
    {
        "name": "r1_math",
        "components": [{"verifier": "math", "weight": 0.9}, {"verifier": "format", "weight": 0.1}],
        "logged_only": ["countdown"],
    }
)


def test_rubric_pays_the_weighted_sum_and_takes_the_primary_status() -> None:
    right = R1_MATH.verify(Item("<think>2+2</think>\\boxed{4}", "4"))
    wrong_math = R1_MATH.verify(Item("<think>2+2</think>\\boxed{5}", "4"))
    no_format = R1_MATH.verify(Item("\\boxed{4}", "4"))
    assert (right.score, right.status) == (pytest.approx(1.0), "ok")
    assert (wrong_math.score, wrong_math.status) == (pytest.approx(0.1), "wrong")
    assert (no_format.score, no_format.status) == (pytest.approx(0.9), "ok")
    assert right.metrics["math/score"] == 1.0 and right.metrics["format/score"] == 1.0


def test_logged_only_verifiers_appear_in_metrics_but_never_in_the_score() -> None:
    v = R1_MATH.verify(Item("<think>x</think>\\boxed{4}", "4"))
    assert "countdown/score" in v.metrics  # it ran (and, with a math ground truth, failed)
    assert v.metrics["countdown/status_ok"] == 0.0
    assert v.score == pytest.approx(1.0)


def test_a_metric_can_be_a_paid_component() -> None:
    rubric = Rubric(
        "lang",
        (Component("math", 0.8), Component("format", 0.2, metric="language_consistency")),
    )
    mixed = rubric.verify(Item("<think>half 一半</think>\\boxed{4}", "4"))
    assert mixed.score == pytest.approx(0.8 + 0.2 * (4 / 6))
    assert mixed.status == "ok"


def test_invalid_item_earns_nothing_from_side_components() -> None:
    v = R1_MATH.verify(Item("<think>x</think>\\boxed{4}", ["not", "a", "string"]))
    assert (v.status, v.score) == ("invalid_input", 0.0)


def test_rubric_batch_keeps_order_and_length() -> None:
    items = [Item("<think>x</think>\\boxed{" + str(k) + "}", "3") for k in range(6)]
    verdicts = R1_MATH.verify_batch(items)
    assert [v.status for v in verdicts] == ["wrong", "wrong", "wrong", "ok", "wrong", "wrong"]


@pytest.mark.parametrize(
    "spec,error",
    [
        ({"name": "x", "components": []}, ValueError),
        ({"name": "x", "components": [{"verifier": "nope"}]}, KeyError),
        ({"name": "x", "components": [{"verifier": "math", "weight": -1}]}, ValueError),
        ({"name": "x", "components": ["math"], "logged_only": ["math"]}, ValueError),
        ({"name": "x", "components": ["math"], "primary": "format"}, ValueError),
        ({"name": "x", "components": ["math"], "weights": 1}, ValueError),
    ],
)
def test_bad_rubric_definitions_fail_loudly(spec: dict, error: type) -> None:
    with pytest.raises(error):
        Rubric.from_dict(spec)


# ----------------------------------------------------------------------------------------- registry


def test_registry_key_equals_module_file_name() -> None:
    for name in ("math", "countdown", "tool_call", "format"):
        verifier = registry.get(name)
        assert verifier.name == name
        assert type(verifier).__module__ == f"rlvr_verifiers.{name}"


def test_registering_a_name_twice_is_an_error() -> None:
    class Dummy(registry.Verifier):
        def verify(self, item: Item) -> Verdict:
            return Verdict(1.0, "ok")

    registry.register("test_dummy_once")(Dummy)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("test_dummy_once")(Dummy())
    with pytest.raises(ValueError, match="already registered"):
        registry.register("math")(Dummy)


def test_unknown_verifier_names_the_available_ones() -> None:
    with pytest.raises(KeyError, match="available: .*countdown.*math"):
        registry.get("maths")


def test_a_rubric_registers_as_a_verifier() -> None:
    rubric = Rubric("test_rubric_reg", (Component("math"),))
    registry.register("test_rubric_reg")(rubric)
    assert registry.get("test_rubric_reg").verify_batch([Item("\\boxed{1}", "1")])[0].status == "ok"


def test_importing_the_verifiers_never_imports_torch_or_verl() -> None:
    code = (
        "import sys\n"
        "from rlvr_verifiers import registry, rubric\n"
        "registry.names()\n"
        "bad = [m for m in ('torch', 'verl', 'sympy') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # sympy stays out of the parent process too: it runs only in the symbolic worker processes.
    assert out.stdout.strip() == ""
