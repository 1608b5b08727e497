"""The `format` verifier: the DeepSeek-R1 reasoning format, plus a language-consistency metric.

Format rule (score 1.0 / `ok`, else 0.0 / `wrong` with the reason), with the item's reasoning tags
(`rlvr_verifiers.reasoning`: `<think>`/`</think>` by default, `item.extra["reasoning_tags"]`):
- the response (leading whitespace ignored) starts with `<think>`;
- it holds exactly one `<think>` and exactly one `</think>`, spelled exactly so, in that order (no stray,
  nested or variant-spelled tags such as `<THINK>`);
- after `</think>` comes a non-empty answer (some non-whitespace text).
A reasoning block that never closes (no answer region under the shared rule) is `parse_error`,
"unclosed reasoning block"; reasoning tags switched off are `invalid_input` (nothing to check).
If the chat template already put `<think>` into the prompt, set `item.extra["think_prefilled"] = True`
(or ground truth `{"think_prefilled": true}`): the response is then read as if it began with `<think>`.

Language consistency (DeepSeek-R1's language-mixing signal), reported in `Verdict.metrics`:
- `language_consistency`: the share of the reasoning's letters (Unicode letters inside the think
  block; digits, punctuation and LaTeX commands like `\\frac` are not counted) that belong to the
  target language's script(s); 1.0 when the reasoning has no letters.
- target language: `item.extra["language"]`, else ground truth `{"language": ...}`, else "en".
  Languages map to scripts (en/fr/de/es/it/pt/... -> Latin, zh -> Han, ja -> Han+Hiragana+Katakana,
  ko -> Hangul, ru/uk/bg -> Cyrillic, ar -> Arabic, hi -> Devanagari, el -> Greek, he -> Hebrew,
  th -> Thai); an unknown language is `invalid_input`.
It is a script-level measure: it catches the usual mixing (Chinese inside English reasoning) but not
two languages of the same script (English vs French). A rubric can pay it as a component
(`Component("format", weight, metric="language_consistency")`); the format verdict itself never does.
"""

from __future__ import annotations

import re
from typing import Any

from rlvr_verifiers import reasoning
from rlvr_verifiers.base import INVALID_INPUT, OK, PARSE_ERROR, WRONG, Item, Verdict, too_large
from rlvr_verifiers.registry import Verifier, register

_SCRIPTS = {
    "latin": "A-Za-z\u00c0-\u024f\u1e00-\u1eff",
    "han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff",
    "hiragana": "\u3040-\u309f",
    "katakana": "\u30a0-\u30ff\u31f0-\u31ff",
    "hangul": "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f",
    "cyrillic": "\u0400-\u04ff",
    "arabic": "\u0600-\u06ff\u0750-\u077f",
    "devanagari": "\u0900-\u097f",
    "greek": "\u0370-\u03ff",
    "hebrew": "\u0590-\u05ff",
    "thai": "\u0e00-\u0e7f",
}
_LATIN_LANGS = [
    "en",
    "fr",
    "de",
    "es",
    "it",
    "pt",
    "nl",
    "sv",
    "da",
    "no",
    "fi",
    "pl",
    "cs",
    "sk",
    "ro",
    "hu",
    "tr",
    "id",
    "ms",
    "vi",
    "ca",
    "hr",
    "sl",
    "et",
    "lv",
    "lt",
]
LANGUAGE_SCRIPTS: dict[str, tuple[str, ...]] = {
    **{lang: ("latin",) for lang in _LATIN_LANGS},
    "zh": ("han",),
    "ja": ("han", "hiragana", "katakana"),
    "ko": ("hangul", "han"),
    "ru": ("cyrillic",),
    "uk": ("cyrillic",),
    "bg": ("cyrillic",),
    "ar": ("arabic",),
    "fa": ("arabic",),
    "hi": ("devanagari",),
    "el": ("greek",),
    "he": ("hebrew",),
    "th": ("thai",),
}
_LETTER_RE = re.compile(r"[^\W\d_]")
_LATEX_CMD_RE = re.compile(r"\\[A-Za-z]+")


def _script_re(language: str) -> re.Pattern[str]:
    scripts = LANGUAGE_SCRIPTS[language]
    return re.compile("[" + "".join(_SCRIPTS[s] for s in scripts) + "]")


_SCRIPT_RES = {lang: _script_re(lang) for lang in LANGUAGE_SCRIPTS}


def language_consistency(text: str, language: str = "en") -> float:
    """Share of the letters in `text` written in `language`'s script(s); 1.0 if there are none."""
    text = _LATEX_CMD_RE.sub(" ", text)
    letters = len(_LETTER_RE.findall(text))
    if not letters:
        return 1.0
    return len(_SCRIPT_RES[language].findall(text)) / letters


def check_format(response: str, tags: reasoning.Tags | None = None) -> tuple[bool, str, str]:
    """(ok, reason, reasoning text) for the R1 format with `tags` (default `<think>`/`</think>`)."""
    tags = tags or reasoning.default_tags()
    body = response.lstrip()
    if not body.startswith(tags.open):
        return False, f"response does not start with {tags.open}", ""
    # Variant spellings (`<THINK>`, `</ think>`) count as tags too: the accuracy verifiers honour them.
    found = reasoning.find_tags(body, tags)
    if [(kind, m.group()) for kind, m in found] != [("open", tags.open), ("close", tags.close)]:
        shown = [m.group() for _, m in found[:6]]
        return False, f"expected exactly one {tags.open}...{tags.close} block, found tags {shown}", ""
    close = found[1][1]
    reasoning_text = body[len(tags.open) : close.start()]
    answer = body[close.end() :]
    if not answer.strip():
        return False, f"no answer after {tags.close}", reasoning_text
    if not reasoning_text.strip():
        return False, f"empty {tags.open} block", reasoning_text
    return True, "R1 format", reasoning_text


@register("format")
class FormatVerifier(Verifier):
    name = "format"

    def verify(self, item: Item) -> Verdict:
        gt: Any = item.ground_truth if isinstance(item.ground_truth, dict) else {}
        extra = item.extra or {}
        language = str(extra.get("language", gt.get("language", "en"))).lower()
        if language not in LANGUAGE_SCRIPTS:
            return Verdict(
                0.0,
                INVALID_INPUT,
                f"unknown language {language!r}; known: {', '.join(sorted(LANGUAGE_SCRIPTS))}",
            )
        if not isinstance(item.response, str):
            return Verdict(0.0, INVALID_INPUT, "response must be a string")
        oversized = too_large(item.response)
        if oversized is not None:
            return oversized
        try:
            tags, prefilled = reasoning.item_settings(item)
        except ValueError as exc:
            return Verdict(0.0, INVALID_INPUT, str(exc)[:200])
        if tags is None:
            return Verdict(
                0.0,
                INVALID_INPUT,
                "reasoning tags are off, so there is no reasoning format to check: set reasoning_tags "
                "or leave the format verifier out of this task",
            )
        response = tags.open + item.response if prefilled else item.response
        if reasoning.split(response, tags).answer is None:  # the shared rule: no answer region
            detail = reasoning.unclosed_detail(tags, prefilled, item.response)
            return Verdict(0.0, PARSE_ERROR, detail, _metrics(False, "", language))
        ok, reason, reasoning_text = check_format(response, tags)
        return Verdict(
            1.0 if ok else 0.0, OK if ok else WRONG, reason, _metrics(ok, reasoning_text, language)
        )


def _metrics(ok: bool, reasoning_text: str, language: str) -> dict[str, float]:
    return {
        "format_ok": float(ok),
        "language_consistency": language_consistency(reasoning_text, language) if ok else 0.0,
        "think_chars": float(len(reasoning_text)),
    }
