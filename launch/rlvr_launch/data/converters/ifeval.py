"""Instruction following with checkable constraints (IFEval / RLVR-IFeval layouts) -> the `ifeval` verifier.

Two source row layouts, told apart by their keys:
- IFEval (google/IFEval, `input_data.jsonl`): `prompt` (str), `instruction_id_list` ([str]), `kwargs`
  ([{...}], one per instruction; null values are unused arguments).
- RLVR-IFeval (allenai/RLVR-IFeval, Tülu 3's RLVR data): `messages` ([{role, content}], the user turn is
  the prompt), `ground_truth` (JSON: {"func_name": open-instruct's checker name, its arguments...}),
  `constraint_type` (kept in extra_info). The func_name maps to IFEval's instruction id and its arguments
  to IFEval's names (FUNCTIONS below). Where open-instruct's checker means something IFEval's does not,
  the row says so with rlvr's extra arguments: keyword and letter counts are `exactly` N, paragraphs are
  separated by `* * *`, `validate_choice` lists its own options, `around` for sentences is +-1.
Ground truth (JSON): {"instruction_id_list": [...], "kwargs": [...]} (rlvr_verifiers.ifeval's layout); the
rlvr verifier validates every instruction and argument at conversion, so a row it would refuse never
reaches training.

Offline: `rlvr data ifeval --out DIR --source generate [--limit N] [--seed S]` writes N generated rows
(default 512): a base prompt x 1-3 constraints sampled from the families below with sampled arguments,
each constraint's instruction appended to the prompt in IFEval's wording. Seeded: the same N and seed
give the same rows. No download.

Dropped: no prompt (empty_prompt), no instructions (missing_instructions), an instruction the verifier
does not know or arguments it refuses (bad_instruction), an RLVR-IFeval func_name with no IFEval
counterpart (unknown_function), a ground truth that is not JSON (malformed_ground_truth).
"""

from __future__ import annotations

import json
import random
from typing import Any

from rlvr_launch.data.converters import Drop, verl_row

NAME = "ifeval"
VERIFIER = "ifeval"
HUB_ID = "google/IFEval"
HUB_CONFIG = None
SPLITS = {"train": "train", "test": None}
SCHEMA = "IFEval: prompt, instruction_id_list, kwargs | RLVR-IFeval: messages, ground_truth, constraint_type"
GENERATE = "generate"  # --source value of the offline generator
GENERATE_DEFAULT_ROWS = 512


def _n(gt: dict) -> Any:
    return gt.get("N")


# open-instruct func_name -> (IFEval instruction id, its kwargs from the RLVR-IFeval ground truth)
FUNCTIONS = {
    "verify_keywords": ("keywords:existence", lambda g: {"keywords": g.get("keyword_list")}),
    "verify_keyword_frequency": (
        "keywords:frequency",
        lambda g: {"keyword": g.get("word"), "frequency": _n(g), "relation": "exactly"},
    ),
    "validate_forbidden_words": (
        "keywords:forbidden_words",
        lambda g: {"forbidden_words": g.get("forbidden_words")},
    ),
    "verify_letter_frequency": (
        "keywords:letter_frequency",
        lambda g: {"letter": g.get("letter"), "let_frequency": _n(g), "let_relation": "exactly"},
    ),
    "validate_response_language": ("language:response_language", lambda g: {"language": g.get("language")}),
    "verify_paragraph_count": (
        "length_constraints:number_paragraphs",
        lambda g: {"num_paragraphs": _n(g), "divider": "* * *"},
    ),
    "validate_word_constraint": (
        "length_constraints:number_words",
        lambda g: {"num_words": _n(g), "relation": g.get("quantifier")},
    ),
    "verify_sentence_constraint": (
        "length_constraints:number_sentences",
        lambda g: (
            {"num_sentences": _n(g), "relation": g.get("quantifier"), "tolerance": 1}
            if g.get("quantifier") == "around"
            else {"num_sentences": _n(g), "relation": g.get("quantifier")}
        ),
    ),
    "validate_paragraphs": (
        "length_constraints:nth_paragraph_first_word",
        lambda g: {"num_paragraphs": _n(g), "nth_paragraph": g.get("i"), "first_word": g.get("first_word")},
    ),
    "verify_postscript": (
        "detectable_content:postscript",
        lambda g: {"postscript_marker": g.get("postscript_marker")},
    ),
    "validate_placeholders": (
        "detectable_content:number_placeholders",
        lambda g: {"num_placeholders": _n(g)},
    ),
    "verify_bullet_points": ("detectable_format:number_bullet_lists", lambda g: {"num_bullets": _n(g)}),
    "validate_title": ("detectable_format:title", lambda g: {}),
    "validate_choice": ("detectable_format:constrained_response", lambda g: {"options": g.get("options")}),
    "validate_highlighted_sections": (
        "detectable_format:number_highlighted_sections",
        lambda g: {"num_highlights": _n(g)},
    ),
    "validate_sections": (
        "detectable_format:multiple_sections",
        lambda g: {"section_spliter": g.get("section_splitter"), "num_sections": _n(g)},
    ),
    "validate_json_format": ("detectable_format:json_format", lambda g: {}),
    "validate_repeat_prompt": (
        "combination:repeat_prompt",
        lambda g: {"prompt_to_repeat": g.get("original_prompt")},
    ),
    "validate_two_responses": ("combination:two_responses", lambda g: {}),
    "validate_uppercase": ("change_case:english_capital", lambda g: {}),
    "validate_lowercase": ("change_case:english_lowercase", lambda g: {}),
    "validate_frequency_capital_words": (
        "change_case:capital_word_frequency",
        lambda g: {
            "capital_frequency": _n(g),
            "capital_relation": "exactly" if g.get("quantifier") == "around" else g.get("quantifier"),
        },
    ),
    "validate_end": ("startend:end_checker", lambda g: {"end_phrase": g.get("end_phrase")}),
    "validate_quotation": ("startend:quotation", lambda g: {}),
    "validate_no_commas": ("punctuation:no_comma", lambda g: {}),
}


def _validate(ids: list[str], kwargs: list[dict]) -> None:
    from rlvr_verifiers import ifeval

    for instruction_id, args in zip(ids, kwargs, strict=True):
        try:
            ifeval.build_check(instruction_id, args)
        except ValueError as exc:
            raise Drop("bad_instruction", str(exc)) from None


def _from_rlvr_ifeval(row: dict) -> tuple[str, list[str], list[dict], dict]:
    messages = row.get("messages")
    if hasattr(messages, "tolist"):
        messages = messages.tolist()
    users = [m.get("content") for m in (messages or []) if isinstance(m, dict) and m.get("role") == "user"]
    prompt = users[-1] if users else ""
    truth = row.get("ground_truth")
    if isinstance(truth, str):
        try:
            truth = json.loads(truth)
        except json.JSONDecodeError as exc:
            raise Drop("malformed_ground_truth", exc.msg) from None
    truths = truth if isinstance(truth, list) else [truth]
    if not truths or not all(isinstance(t, dict) for t in truths):
        raise Drop("malformed_ground_truth", repr(truth)[:100])
    ids, kwargs = [], []
    for t in truths:
        func = t.get("func_name")
        if func not in FUNCTIONS:
            raise Drop("unknown_function", str(func))
        instruction_id, arguments = FUNCTIONS[func]
        ids.append(instruction_id)
        kwargs.append({k: v for k, v in arguments(t).items() if v is not None})
    extra = {"constraint_type": row["constraint_type"]} if row.get("constraint_type") else {}
    return prompt, ids, kwargs, extra


def convert(row: dict, split: str, index: int) -> dict:
    if "ground_truth" in row and "messages" in row:
        prompt, ids, kwargs, extra = _from_rlvr_ifeval(row)
        source = "rlvr_ifeval"
    else:
        prompt, ids, kwargs = row.get("prompt"), row.get("instruction_id_list"), row.get("kwargs")
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if hasattr(kwargs, "tolist"):
            kwargs = kwargs.tolist()
        if not isinstance(ids, list) or not ids:
            raise Drop("missing_instructions")
        kwargs = kwargs if isinstance(kwargs, list) else [{} for _ in ids]
        if len(kwargs) != len(ids):
            raise Drop("bad_instruction", f"{len(ids)} instructions, {len(kwargs)} kwargs")
        kwargs = [{k: v for k, v in (a or {}).items() if v is not None} for a in kwargs]
        extra = {"key": row["key"]} if row.get("key") is not None else {}
        source = "ifeval"
    if not isinstance(prompt, str) or not prompt.strip():
        raise Drop("empty_prompt")
    _validate(ids, kwargs)
    return verl_row(
        data_source=source,
        prompt=[{"role": "user", "content": prompt}],
        ability="instruction_following",
        ground_truth={"instruction_id_list": ids, "kwargs": kwargs},
        split=split,
        index=index,
        verifier=VERIFIER,
        extra=extra,
    )


# ---- the offline generator ----------------------------------------------------------------------------

BASE_PROMPTS = (
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a bicycle gear system works to a ten-year-old.",
    "Write a product description for a solar-powered backpack.",
    "Describe a typical day at a busy train station.",
    "Write a letter to a friend recommending your favourite book.",
    "Give advice to someone starting to learn the guitar.",
    "Write a blog post about the benefits of walking every day.",
    "Describe the water cycle.",
    "Write a poem about the first snow of winter.",
    "Explain why the sky looks blue.",
    "Write a review of an imaginary restaurant that serves only soup.",
    "Summarize the plot of a detective story set on a ship.",
    "Write a speech for a school science fair opening.",
    "Describe how to plant a tomato seedling.",
    "Write an email inviting colleagues to a team picnic.",
    "Explain what a budget is and why it helps.",
)
KEYWORDS = (
    "river",
    "lantern",
    "harbor",
    "garden",
    "silver",
    "journey",
    "window",
    "clock",
    "market",
    "forest",
)
END_PHRASES = ("Is there anything else I can help with?", "Let me know if you have additional questions.")


def _sample_constraint(rng: random.Random) -> tuple[str, dict, str]:
    """(instruction id, kwargs, instruction text in IFEval's wording)."""
    kind = rng.choice(
        (
            "no_comma",
            "lowercase",
            "capital",
            "words",
            "sentences",
            "paragraphs",
            "existence",
            "frequency",
            "forbidden",
            "letter",
            "bullets",
            "highlights",
            "title",
            "placeholders",
            "postscript",
            "end",
            "quotation",
            "json",
            "sections",
        )
    )
    if kind == "no_comma":
        return "punctuation:no_comma", {}, "In your entire response, refrain from the use of any commas."
    if kind == "lowercase":
        return (
            "change_case:english_lowercase",
            {},
            "Your entire response should be in English, and in all lowercase letters. No capital letters are allowed.",
        )
    if kind == "capital":
        return (
            "change_case:english_capital",
            {},
            "Your entire response should be in English, and in all capital letters.",
        )
    if kind in ("words", "sentences"):
        relation = rng.choice(("less than", "at least"))
        n = rng.randint(20, 120) if kind == "words" else rng.randint(2, 8)
        unit = "words" if kind == "words" else "sentences"
        phrase = "less than" if relation == "less than" else "at least"
        key = "num_words" if kind == "words" else "num_sentences"
        return (
            f"length_constraints:number_{unit}",
            {key: n, "relation": relation},
            f"Answer with {phrase} {n} {unit}.",
        )
    if kind == "paragraphs":
        n = rng.randint(2, 4)
        return (
            "length_constraints:number_paragraphs",
            {"num_paragraphs": n},
            f"There should be {n} paragraphs. Paragraphs are separated with the markdown divider: ***",
        )
    if kind == "existence":
        words = rng.sample(KEYWORDS, 2)
        return (
            "keywords:existence",
            {"keywords": words},
            f"Include keywords {words[0]}, {words[1]} in the response.",
        )
    if kind == "frequency":
        word, n = rng.choice(KEYWORDS), rng.randint(1, 4)
        return (
            "keywords:frequency",
            {"keyword": word, "frequency": n, "relation": "at least"},
            f"In your response, the word {word} should appear at least {n} times.",
        )
    if kind == "forbidden":
        words = rng.sample(("very", "really", "thing", "good", "nice"), 2)
        return (
            "keywords:forbidden_words",
            {"forbidden_words": words},
            f"Do not include keywords {words[0]}, {words[1]} in the response.",
        )
    if kind == "letter":
        letter, n = rng.choice("aeiourst"), rng.randint(3, 12)
        return (
            "keywords:letter_frequency",
            {"letter": letter, "let_frequency": n, "let_relation": "at least"},
            f"In your response, the letter {letter} should appear at least {n} times.",
        )
    if kind == "bullets":
        n = rng.randint(2, 5)
        return (
            "detectable_format:number_bullet_lists",
            {"num_bullets": n},
            f"Your answer must contain exactly {n} bullet points. Use the markdown bullet points such as:\n"
            "* This is point 1.\n* This is point 2",
        )
    if kind == "highlights":
        n = rng.randint(1, 3)
        return (
            "detectable_format:number_highlighted_sections",
            {"num_highlights": n},
            f"Highlight at least {n} sections in your answer with markdown, i.e. *highlighted section*.",
        )
    if kind == "title":
        return (
            "detectable_format:title",
            {},
            "Your answer must contain a title, wrapped in double angular brackets, such as <<poem of joy>>.",
        )
    if kind == "placeholders":
        n = rng.randint(1, 3)
        return (
            "detectable_content:number_placeholders",
            {"num_placeholders": n},
            f"The response must contain at least {n} placeholders represented by square brackets, such as "
            "[address].",
        )
    if kind == "postscript":
        marker = rng.choice(("P.S.", "P.P.S"))
        return (
            "detectable_content:postscript",
            {"postscript_marker": marker},
            f"At the end of your response, please explicitly add a postscript starting with {marker}",
        )
    if kind == "end":
        phrase = rng.choice(END_PHRASES)
        return (
            "startend:end_checker",
            {"end_phrase": phrase},
            f"Finish your response with this exact phrase {phrase}. No other words should follow this phrase.",
        )
    if kind == "quotation":
        return "startend:quotation", {}, "Wrap your entire response with double quotation marks."
    if kind == "json":
        return (
            "detectable_format:json_format",
            {},
            "Entire output should be wrapped in JSON format. You can use markdown ticks such as ```.",
        )
    splitter, n = rng.choice(("Section", "SECTION")), rng.randint(2, 4)
    return (
        "detectable_format:multiple_sections",
        {"section_spliter": splitter, "num_sections": n},
        f"Your response must have {n} sections. Mark the beginning of each section with {splitter} X, such "
        f"as:\n{splitter} 1\n[content of section 1]\n{splitter} 2\n[content of section 2]",
    )


# Pairs a row never holds together (they cannot both be followed).
CONFLICTS = {
    frozenset({"change_case:english_lowercase", "change_case:english_capital"}),
    frozenset(
        {"change_case:english_lowercase", "detectable_format:multiple_sections"}
    ),  # splitters are cased
    frozenset({"change_case:english_capital", "detectable_format:multiple_sections"}),
    frozenset({"startend:quotation", "startend:end_checker"}),
    *(
        frozenset({"detectable_format:json_format", other})
        for other in (
            "startend:quotation",
            "startend:end_checker",
            "detectable_format:title",
            "detectable_content:postscript",
            "detectable_format:number_bullet_lists",
            "detectable_format:multiple_sections",
            "length_constraints:number_paragraphs",
        )
    ),
}


def generate(count: int, seed: int) -> list[dict]:
    """`count` IFEval-layout rows: a base prompt plus 1-3 non-conflicting sampled constraints (seeded)."""
    rng = random.Random(seed)
    rows = []
    for key in range(count):
        prompt = rng.choice(BASE_PROMPTS)
        ids: list[str] = []
        kwargs: list[dict] = []
        texts: list[str] = []
        for _ in range(rng.randint(1, 3)):
            instruction_id, args, text = _sample_constraint(rng)
            if instruction_id in ids or any(frozenset({instruction_id, i}) in CONFLICTS for i in ids):
                continue
            ids.append(instruction_id)
            kwargs.append(args)
            texts.append(text)
        rows.append(
            {"key": key, "prompt": " ".join([prompt, *texts]), "instruction_id_list": ids, "kwargs": kwargs}
        )
    return rows
