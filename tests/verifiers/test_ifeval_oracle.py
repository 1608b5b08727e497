"""rlvr's `ifeval` verifier against IFEval's reference checker (lm-eval's `tasks/ifeval`) on IFEval's own rows.

The oracle: lm-eval 0.4.13's `lm_eval/tasks/ifeval/{instructions,instructions_registry,instructions_util}.py`,
loaded on their own (lm-eval's package `__init__`s import its whole evaluation stack). Install it without its
dependencies, `pip install --no-deps lm-eval==0.4.13`, next to the `test` extra (nltk, immutabledict). Two of
its parts need nltk's punkt model, a data download no offline machine can make:
- `capital_word_frequency` tokenizes with `nltk.word_tokenize` (punkt splits sentences first): the oracle here
  uses nltk's own word tokenizer on the whole text (`NLTKWordTokenizer`, what word_tokenize applies to each
  sentence), which differs only where a sentence-final period sticks to a word.
- `number_sentences` counts punkt sentences: no oracle (rlvr's own rule, tested in test_ifeval.py).

Responses: for each IFEval row, `RESPONSES_PER_ROW` candidates are composed from fragments drawn with a
fixed seed out of the row's own arguments (its keywords, forbidden words, end phrase, prompt to repeat,
splitter, first word, letter ...) and of each family's markup (bullets, `***`, `******`, `<<title>>`,
`[placeholder]`, `*highlight*`, P.S., JSON, quotes, case changes, other languages), so every family sees
responses that follow and responses that break it. Each instruction of each row is checked in strict and
loose mode by both; agreement is reported per family (`python -m pytest ... -s` prints the table).

Adjudicated disagreements (rlvr stricter, never a false accept; anything else fails the test):
- `langdetect_failed`: the text has nothing langdetect can read (no letters): the reference counts the
  language / english-case instruction as followed, rlvr does not.
- `oracle_random_letter`: `letter_frequency` with a letter outside a-z (IFEval rows 1122 `#`, 1129 `!`): the
  reference's build_description replaces such a letter with a RANDOM ASCII letter, so its verdict is noise;
  rlvr counts the character the row names, and these cases are checked against a direct count instead.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import types
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from rlvr_verifiers import ifeval

DATA = Path(__file__).parent / "data" / "ifeval" / "input_data_subset.jsonl"
RESPONSES_PER_ROW = 24
SEED = 34
NO_ORACLE = {"length_constraints:number_sentences"}


def _load_oracle():
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(
            "the IFEval oracle needs lm-eval's ifeval checkers: pip install --no-deps lm-eval==0.4.13 "
            "(plus the test extra: nltk, immutabledict, langdetect)"
        )
    root = Path(spec.submodule_search_locations[0])
    for name, path in (
        ("lm_eval.tasks", root / "tasks"),
        ("lm_eval.tasks.ifeval", root / "tasks" / "ifeval"),
    ):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [str(path)]
            sys.modules[name] = module
    import nltk

    real_download = nltk.download
    nltk.download = lambda *a, **k: False  # no network: punkt is never fetched
    try:
        from lm_eval.tasks.ifeval import instructions_util, utils
    finally:
        nltk.download = real_download
    from nltk.tokenize import NLTKWordTokenizer

    tokenizer = NLTKWordTokenizer()
    oracle_nltk = types.SimpleNamespace(word_tokenize=tokenizer.tokenize, tokenize=nltk.tokenize)
    instructions_util.nltk = oracle_nltk  # capital_word_frequency only (see the module doc)
    return utils


def _oracle_follows(utils, row: dict, instruction_id: str, kwargs: dict, response: str, mode: str) -> bool:
    """lm-eval's own test_instruction_following_strict / _loose (its loose variants included), for one
    instruction of the row."""
    example = utils.InputExample(
        key=row["key"], instruction_id_list=[instruction_id], prompt=row["prompt"], kwargs=[kwargs]
    )
    judge = (
        utils.test_instruction_following_strict
        if mode == "strict"
        else utils.test_instruction_following_loose
    )
    return judge(example, response).follow_instruction_list[0]


# ---- candidate responses ------------------------------------------------------------------------------

WORDS = (
    "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches near old "
    "harbors and bright lanterns glow across calm water as travelers share stories about distant mountains"
).split()
OTHER_LANGUAGES = {
    "ru": "Решётка это структура из точек которые повторяются в пространстве. Дети могут представить сетку.",
    "hi": "स्टार्टअप के लिए अच्छे विचार बहुत हैं। नई सोच से नया काम शुरू होता है।",
    "kn": "ಹ್ಯಾಂಬರ್ಗರ್ ಒಂದು ಸ್ಯಾಂಡ್ವಿಚ್ ಅಲ್ಲ ಎಂದು ಹಲವರು ಹೇಳುತ್ತಾರೆ. ಇದು ಬ್ರೆಡ್ ಮತ್ತು ಮಾಂಸ ಹೊಂದಿದೆ.",
    "pa": "ਸਾਫਟਵੇਅਰ ਇੰਜੀਨੀਅਰ ਦੀ ਤਕਨੀਕੀ ਯੋਗਤਾ ਨੂੰ ਪਰਖਣ ਲਈ ਕੋਡ ਦੀ ਗੁਣਵੱਤਾ ਵੇਖੋ। ਟੈਸਟ ਵੀ ਜ਼ਰੂਰੀ ਹਨ।",
    "fr": "Il est important de manger sainement pour guérir le corps. Les légumes aident beaucoup.",
}


def _row_words(row: dict) -> list[str]:
    found: list[str] = []
    for kwargs in row["kwargs"]:
        for key in ("keywords", "forbidden_words"):
            found += kwargs.get(key) or []
        for key in ("keyword", "first_word", "letter"):
            if kwargs.get(key):
                found.append(kwargs[key])
    return found


def _sentence(rng: random.Random, extra: list[str]) -> str:
    pool = WORDS + extra * 3
    words = [rng.choice(pool) for _ in range(rng.randint(3, 14))]
    if rng.random() < 0.3:
        words[rng.randrange(len(words))] += ","
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice([".", ".", "!", "?", ""])


def _block(rng: random.Random, row: dict, extra: list[str]) -> str:
    splitter = next((k["section_spliter"] for k in row["kwargs"] if k.get("section_spliter")), "Section")
    kind = rng.choice(
        ["prose", "prose", "bullets", "highlight", "placeholder", "title", "section", "json", "lang", "many"]
    )
    if kind == "bullets":
        marks = ["* ", "- ", "** ", "  * ", "*", "-"]
        return "\n".join(rng.choice(marks) + _sentence(rng, extra) for _ in range(rng.randint(1, 5)))
    if kind == "highlight":
        word = rng.choice(WORDS + extra)
        return (
            _sentence(rng, extra) + " " + rng.choice([f"*{word}*", f"**{word} {word}**", "* *", f"*{word}"])
        )
    if kind == "placeholder":
        return (
            _sentence(rng, extra)
            + " "
            + " ".join(rng.choice(["[name]", "[address]", "[", "[]"]) for _ in range(rng.randint(1, 8)))
        )
    if kind == "title":
        return rng.choice(["<<A Title>>", "<< >>", "<<Title", "<<<Deep>>>"]) + "\n" + _sentence(rng, extra)
    if kind == "section":
        return "\n".join(
            f"{rng.choice([splitter, splitter.upper(), splitter.lower()])} {k + 1}\n{_sentence(rng, extra)}"
            for k in range(rng.randint(1, 5))
        )
    if kind == "json":
        return rng.choice(
            [
                '{"text": "' + _sentence(rng, extra).replace('"', "") + '"}',
                "```json\n[1, 2]\n```",
                "{bad json}",
            ]
        )
    if kind == "lang":
        return rng.choice(list(OTHER_LANGUAGES.values()))
    if kind == "many":
        return " ".join(_sentence(rng, extra) for _ in range(rng.randint(20, 60)))
    return " ".join(_sentence(rng, extra) for _ in range(rng.randint(1, 4)))


def candidate_responses(row: dict, rng: random.Random, count: int) -> list[str]:
    extra = _row_words(row)
    kw = {k: v for kwargs in row["kwargs"] for k, v in kwargs.items() if v}
    out = []
    for _ in range(count):
        blocks = [_block(rng, row, extra) for _ in range(rng.randint(1, 5))]
        if "num_paragraphs" in kw and rng.random() < 0.6:
            n = kw["num_paragraphs"] + rng.choice([-1, 0, 0, 1])
            blocks = [_block(rng, row, extra) for _ in range(max(1, n))]
            first = kw.get("first_word")
            if first and rng.random() < 0.7:
                nth = min(kw.get("nth_paragraph", 1), len(blocks)) - 1
                blocks[nth] = rng.choice([first, first.upper(), '"' + first, first + ","]) + " " + blocks[nth]
        separator = rng.choice(["\n\n", "\n\n", "\n***\n", " *** ", "\n", "\n******\n", "\n\n***\n\n"])
        text = separator.join(blocks)
        if "prompt_to_repeat" in kw and rng.random() < 0.6:
            repeat = kw["prompt_to_repeat"]
            text = rng.choice([repeat, repeat.lower(), repeat[:-5], "Sure. " + repeat]) + "\n" + text
        if rng.random() < 0.25:
            text = rng.choice(["Sure, here it is:", "Here you go.", "***"]) + "\n" + text
        if "postscript_marker" in kw or rng.random() < 0.15:
            marker = kw.get("postscript_marker", "P.S.")
            text += (
                "\n"
                + rng.choice([marker, marker.lower(), "P.S.", "P. P. S", "PS"])
                + " "
                + _sentence(rng, extra)
            )
        if rng.random() < 0.1:
            text += "\n" + rng.choice(["My answer is yes.", "My answer is no", "my answer is maybe."])
        if "end_phrase" in kw and rng.random() < 0.6:
            phrase = kw["end_phrase"]
            text += " " + rng.choice(
                [phrase, phrase.lower(), phrase + " Bye.", phrase[:-1], '"' + phrase + '"']
            )
        if "language" in kw and rng.random() < 0.5:
            text = OTHER_LANGUAGES.get(kw["language"], text)
        ids = set(row["instruction_id_list"])
        if "detectable_format:json_format" in ids and rng.random() < 0.3:
            body = json.dumps({"text": _sentence(rng, extra), "items": [rng.choice(WORDS) for _ in range(3)]})
            text = rng.choice([body, f"```json\n{body}\n```", f"```JSON\n{body}```", body[:-1]])
        if "combination:two_responses" in ids and rng.random() < 0.4:
            first, second = _sentence(rng, extra), rng.choice([_sentence(rng, extra), ""])
            text = rng.choice(
                [f"{first}\n******\n{second}", f"{first} ****** {first}", f"******{first}******"]
            )
        if "detectable_format:constrained_response" in ids and rng.random() < 0.4:
            text = rng.choice(["My answer is yes.", "My answer is maybe. Because.", "My answer is No."])
        transform = rng.random()
        if transform < 0.2:
            text = text.upper()
        elif transform < 0.4:
            text = text.lower()
        if rng.random() < 0.2:
            text = text.replace(",", "")
        if rng.random() < 0.12:
            text = '"' + text + '"'
        if rng.random() < 0.05:
            text = rng.choice(["", "   ", "\n", "***", "12345", "!!!"])
        out.append(text)
    return out


# ---- the agreement run --------------------------------------------------------------------------------


def _rows() -> list[dict]:
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    rows.append(  # the one family none of the vendored rows holds
        {
            "key": -1,
            "prompt": "Is the sky blue? Answer with one of the following options: My answer is yes., My answer is "
            "no., My answer is maybe.",
            "instruction_id_list": ["detectable_format:constrained_response"],
            "kwargs": [{}],
        }
    )
    return rows


def _langdetect_fails(text: str) -> bool:
    return ifeval.detect_language(text) is None


LANGUAGE_FAMILIES = {
    "language:response_language",
    "change_case:english_lowercase",
    "change_case:english_capital",
}


def agreement() -> tuple[dict, list]:
    oracle = _load_oracle()
    rng = random.Random(SEED)
    table: dict[tuple[str, str], Counter] = defaultdict(Counter)
    disagreements = []
    for row in _rows():
        responses = candidate_responses(row, rng, RESPONSES_PER_ROW)
        for instruction_id, kwargs in zip(row["instruction_id_list"], row["kwargs"], strict=True):
            if instruction_id in NO_ORACLE:
                continue
            check = ifeval.build_check(instruction_id, kwargs)
            letter = kwargs.get("letter") or "a"
            random_letter = instruction_id == "keywords:letter_frequency" and not (
                "a" <= letter.lower() <= "z"
            )
            for response in responses:
                for mode in ("strict", "loose"):
                    theirs = _oracle_follows(oracle, row, instruction_id, kwargs, response, mode)
                    ours = ifeval.followed(response, [(instruction_id, check)], mode)[0]
                    counts = table[(instruction_id, mode)]
                    counts["cases"] += 1
                    if random_letter:
                        n, relation = kwargs["let_frequency"], kwargs["let_relation"]
                        variants = [response] if mode == "strict" else ifeval.loose_variants(response)
                        direct = any(
                            v.strip()
                            and ((v.count(letter) < n) if relation == "less than" else (v.count(letter) >= n))
                            for v in variants
                        )
                        counts["rlvr_followed"] += ours
                        counts["adjudicated_oracle_random_letter"] += 1
                        if direct != ours:
                            disagreements.append(
                                (row["key"], instruction_id, mode, "direct", direct, ours, response[:300])
                            )
                        continue
                    counts["oracle_followed"] += theirs
                    counts["rlvr_followed"] += ours
                    if theirs == ours:
                        counts["agree"] += 1
                        continue
                    variants = [response] if mode == "strict" else ifeval.loose_variants(response)
                    if (
                        instruction_id in LANGUAGE_FAMILIES
                        and theirs
                        and not ours
                        and any(v.strip() and _langdetect_fails(v) for v in variants)
                    ):
                        counts["adjudicated_langdetect_failed"] += 1
                        continue
                    disagreements.append((row["key"], instruction_id, mode, theirs, ours, response[:300]))
    return table, disagreements


def test_ifeval_agrees_with_lm_eval_on_ifeval_rows():
    table, disagreements = agreement()
    print(
        f"\n{'instruction':48} {'mode':6} {'cases':>5} {'agree':>5} {'adjud':>5} {'oracle+':>7} {'rlvr+':>5}"
    )
    for (instruction_id, mode), c in sorted(table.items()):
        print(
            f"{instruction_id:48} {mode:6} {c['cases']:5} {c['agree']:5} "
            f"{c['adjudicated_langdetect_failed'] + c['adjudicated_oracle_random_letter']:5} {c['oracle_followed']:7} {c['rlvr_followed']:5}"
        )
    families = {instruction_id for instruction_id, _ in table}
    assert families == set(ifeval.INSTRUCTION_IDS) - NO_ORACLE
    for (instruction_id, mode), c in table.items():
        # each family saw responses that follow it and responses that do not (else agreement says little)
        assert 0 < c["rlvr_followed"] < c["cases"], (instruction_id, mode, dict(c))
    by_family = Counter((d[1], d[2]) for d in disagreements)
    assert not disagreements, f"{dict(by_family)}\n" + "\n".join(map(repr, disagreements[:12]))
