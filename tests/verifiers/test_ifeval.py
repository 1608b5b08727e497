"""The `ifeval` verifier: its checks, strict and loose modes, reward modes, the answer region, bad rows."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_verifiers import ifeval, registry
from rlvr_verifiers.base import INVALID_INPUT, OK, PARSE_ERROR, WRONG, Item


def gt(*pairs, **extra):
    return {"instruction_id_list": [p[0] for p in pairs], "kwargs": [p[1] for p in pairs], **extra}


def verify(response, ground_truth, **extra):
    return registry.get("ifeval").verify(Item(response, ground_truth, extra))


def test_registered_under_its_file_name():
    assert "ifeval" in registry.names()
    assert registry.get("ifeval").name == "ifeval"


def test_all_or_nothing_and_fraction():
    row = gt(("punctuation:no_comma", {}), ("detectable_format:title", {}))
    assert verify("<<Title>>\nno commas here", row).score == 1.0
    half = verify("<<Title>>\ncommas, here", row)
    assert (half.score, half.status) == (0.0, WRONG) and "punctuation:no_comma" in half.detail
    frac = verify("<<Title>>\ncommas, here", dict(row, reward="fraction"))
    assert (frac.score, frac.status) == (0.5, OK)
    none = verify("commas, here", dict(row, reward="fraction"))
    assert (none.score, none.status) == (0.0, WRONG)
    assert verify("<<Title>>\ncommas, here", row, ifeval_reward="fraction").score == 0.5


def test_loose_forgives_a_preamble_line_and_asterisks_strict_does_not():
    row = gt(("startend:quotation", {}))
    response = 'Sure, here it is:\n"A quoted answer."'
    assert verify(response, row).status == WRONG
    assert verify(response, dict(row, mode="loose")).status == OK
    assert verify(response, row, ifeval_mode="loose").status == OK
    bold = gt(("keywords:frequency", {"keyword": "**x**", "frequency": 1, "relation": "less than"}))
    assert verify("a **x** b", bold).status == WRONG
    assert verify("a **x** b", bold, ifeval_mode="loose").status == OK  # IFEval's loose deletes every *


def test_the_reasoning_block_is_not_the_answer():
    row = gt(("keywords:existence", {"keywords": ["banana"]}))
    assert verify("<think>banana</think> apple", row).status == WRONG
    assert verify("<think>apple</think> banana", row).status == OK
    assert verify("<think>banana and no end", row).status == PARSE_ERROR
    assert verify("banana", row, reasoning_tags="off").status == OK


def test_empty_answer_follows_nothing():
    row = gt(("punctuation:no_comma", {}))
    assert verify("   ", row).status == WRONG
    assert verify("<think>x</think>  ", row).status == WRONG


@pytest.mark.parametrize(
    "ground_truth, needle",
    [
        ("not json", "not JSON"),
        ({"instruction_id_list": []}, "non-empty list"),
        (gt(("keywords:nope", {})), "unknown ifeval instruction"),
        (gt(("keywords:frequency", {"keyword": "a", "frequency": 2})), "relation"),
        (gt(("keywords:frequency", {"keyword": "a", "frequency": 2, "relation": "most"})), "relation"),
        (gt(("punctuation:no_comma", {"colour": "red"})), "unknown argument"),
        (
            gt(
                (
                    "keywords:letter_frequency",
                    {"letter": "ab", "let_frequency": 1, "let_relation": "at least"},
                )
            ),
            "one",
        ),
        ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]}, "one per instruction"),
        (gt(("punctuation:no_comma", {}), mode="lenient"), "mode"),
        (
            gt(
                (
                    "length_constraints:nth_paragraph_first_word",
                    {"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "a"},
                )
            ),
            "beyond",
        ),
    ],
)
def test_bad_rows_are_invalid_input_naming_the_problem(ground_truth, needle):
    verdict = verify("anything", ground_truth)
    assert verdict.status == INVALID_INPUT and needle in verdict.detail, verdict


def test_null_arguments_are_dropped_like_the_published_rows():
    row = gt(("punctuation:no_comma", {"keyword": None, "num_words": None}))
    assert verify("fine", json.dumps(row)).status == OK


@pytest.mark.parametrize(
    "instruction, args, good, bad",
    [
        ("keywords:existence", {"keywords": ["Cat", "dog"]}, "a CAT and a Dog", "a cat only"),
        ("keywords:frequency", {"keyword": "war", "frequency": 2, "relation": "at least"}, "war, War", "war"),
        ("keywords:frequency", {"keyword": "a+b", "frequency": 1, "relation": "at least"}, "x a+b", "x aab"),
        ("keywords:forbidden_words", {"forbidden_words": ["rock"]}, "rocky road", "Rock on"),
        (
            "keywords:letter_frequency",
            {"letter": "#", "let_frequency": 2, "let_relation": "at least"},
            "#a #b",
            "#a",
        ),
        (
            "keywords:letter_frequency",
            {"letter": "t", "let_frequency": 2, "let_relation": "less than"},
            "Tea",
            "tT",
        ),
        ("length_constraints:number_words", {"num_words": 3, "relation": "less than"}, "one two", "a b c"),
        ("length_constraints:number_words", {"num_words": 3, "relation": "exactly"}, "a b c", "a b"),
        (
            "length_constraints:number_words",
            {"num_words": 10, "relation": "around", "tolerance": 1},
            "w " * 11,
            "w " * 12,
        ),
        (
            "length_constraints:number_sentences",
            {"num_sentences": 2, "relation": "at most"},
            "One. Two.",
            "Go. Run. Stop.",
        ),
        ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n***\nb", "a\n***\n\n***\nb"),
        (
            "length_constraints:nth_paragraph_first_word",
            {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
            'a\n\n"Then, b',
            "a\n\nthen\n\nc",
        ),
        ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[a] and [b]", "[a] and [b\n]"),
        ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "x\np. p. s y", "x\nP.S. y"),
        ("detectable_content:postscript", {"postscript_marker": "P.S."}, "x\nP.S. y", "x\nPS y"),
        ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n- b\nc", "* a\n** b\n- c\n- d"),
        ("detectable_format:constrained_response", {}, "My answer is no.", "My answer is no"),
        ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*a* **b**", "*a* * *"),
        (
            "detectable_format:multiple_sections",
            {"section_spliter": "Section", "num_sections": 2},
            "Section 1\na\nSection 2\nb",
            "Section 1\na\nSection two",
        ),
        ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', "{a: 1}"),
        ("detectable_format:title", {}, "<<A poem>>\ntext", "<< >>\ntext <<\n>>"),
        ("combination:two_responses", {}, "one\n******\ntwo", "one\n******\none"),
        ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, "say HI. hi", "Well. Say hi."),
        (
            "startend:end_checker",
            {"end_phrase": "Any questions?"},
            'x any questions?"',
            "x Any questions? Bye",
        ),
        ("startend:quotation", {}, ' "quoted" ', '"half'),
        (
            "change_case:capital_word_frequency",
            {"capital_frequency": 2, "capital_relation": "less than"},
            "ONE two",
            "DON'T stop",
        ),
        (
            "change_case:english_lowercase",
            {},
            "this is an english sentence about cats and dogs",
            "This is an English sentence about cats and dogs",
        ),
        (
            "change_case:english_capital",
            {},
            "THIS IS AN ENGLISH SENTENCE ABOUT CATS AND DOGS",
            "ЭТО ПРЕДЛОЖЕНИЕ НАПИСАНО НА РУССКОМ ЯЗЫКЕ",
        ),
        ("punctuation:no_comma", {}, "no commas", "one, two"),
        (
            "language:response_language",
            {"language": "ru"},
            "Это предложение написано на русском языке.",
            "This sentence is written in English.",
        ),
    ],
)
def test_each_family_follows_and_breaks(instruction, args, good, bad):
    row = gt((instruction, args))
    assert verify(good, row).status == OK, (instruction, good)
    assert verify(bad, row).status == WRONG, (instruction, bad)


def test_text_without_a_language_fails_the_language_checks():
    # IFEval's reference counts these as followed when langdetect finds nothing; rlvr does not pay them.
    assert verify("12345 !!!", gt(("language:response_language", {"language": "kn"}))).status == WRONG
    assert verify("123", gt(("change_case:english_lowercase", {}))).status == WRONG


@pytest.mark.parametrize(
    "text, count",
    [
        ("Hello world. This is Dr. Smith. He is 3.5 m tall!", 3),
        ("One sentence without an end", 1),
        ("Wait... what? Yes.", 3),
        ("e.g. this one. And that?", 2),
        ('He said "Stop." Then left.', 2),
        ("J. R. R. Tolkien wrote books. They sold.", 2),
        ("...", 0),
        ("", 0),
    ],
)
def test_count_sentences(text, count):
    assert ifeval.count_sentences(text) == count


# ---- the hand-written scans give the reference's regex results ----------------------------------------

ALPHABET = st.text(alphabet=" \n\t*-[]<>ab\r", max_size=40)


@settings(max_examples=400, deadline=None)
@given(ALPHABET)
def test_bullet_scan_equals_ifevals_regexes(text):
    expected = len(re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)) + len(
        re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    )
    assert ifeval.count_bullets(text) == expected


@settings(max_examples=400, deadline=None)
@given(ALPHABET)
def test_placeholder_and_title_scans_equal_ifevals_regexes(text):
    assert ifeval.count_placeholders(text) == len(re.findall(r"\[.*?\]", text))
    titles = re.findall(r"<<[^\n]+>>", text)
    assert ifeval.has_title(text) == any(t.lstrip("<").rstrip(">").strip() for t in titles)


def test_loose_variants_are_ifevals_eight():
    variants = ifeval.loose_variants("first *line*\nmiddle\nlast")
    assert variants == [
        "first *line*\nmiddle\nlast",
        "first line\nmiddle\nlast",
        "middle\nlast",
        "first *line*\nmiddle",
        "middle",
        "middle\nlast",
        "first line\nmiddle",
        "middle",
    ]


def test_config_refuses_unknown_modes():
    with pytest.raises(ValueError, match="mode must be one of strict, loose"):
        ifeval.IFEvalConfig(mode="lenient")
    with pytest.raises(ValueError, match="reward must be one of all, fraction"):
        ifeval.IFEvalConfig(reward="partial")


def test_the_reward_bridge_routes_ifeval_and_reasoning_gym_rows():
    from rlvr_verifiers import verl_bridge

    assert verl_bridge.route("ifeval", "instruction_following", {}) == "ifeval"
    assert verl_bridge.route("rlvr_ifeval", None, {}) == "ifeval"
    assert verl_bridge.route("some_source", "instruction_following", None) == "ifeval"
    # reasoning-gym's countdown is reasoning-gym's (its scorer), not rlvr's countdown verifier
    assert verl_bridge.route("reasoning_gym/countdown", "reasoning_gym", {}) == "reasoning_gym"
    row = gt(("punctuation:no_comma", {}))
    item = verl_bridge.make_item("ifeval", "no commas", json.dumps(row))
    assert item.ground_truth == row and registry.get("ifeval").verify(item).status == OK
    assert verl_bridge.make_item("ifeval", "x", "{broken").status == INVALID_INPUT


def test_word_counts_keep_combining_marks_inside_words():
    # Python's re splits "ಹ್ಯಾಂಬರ್ಗರ್" at each vowel sign (6 "words" here); nltk >= 3.10 (the `regex`
    # engine) and rlvr count 2, so an `at least N words` answer is not paid for inflated counts.
    assert ifeval.count_words("ಹ್ಯಾಂಬರ್ಗರ್ ಒಂದು") == 2
    assert ifeval.count_words("नमस्ते दुनिया, hello_world x²") == 4
    row = gt(("length_constraints:number_words", {"num_words": 3, "relation": "at least"}))
    assert verify("ಹ್ಯಾಂಬರ್ಗರ್ ಒಂದು", row).status == WRONG
