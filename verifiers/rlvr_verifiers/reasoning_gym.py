"""The `reasoning_gym` verifier: reasoning-gym's own scorer for the row's dataset (PyPI `reasoning-gym`).

Ground truth (a dict, or that dict as a JSON string), written by `rlvr data reasoning_gym`:
    {"dataset": "basic_arithmetic", "entry": {"question": ..., "answer": ..., "metadata": {...}}}
`entry` is the generated entry as reasoning-gym made it (JSON round trip: tuples become lists); the score
is `reasoning_gym.get_score_answer_fn(dataset)(answer, entry)`, a float in [0, 1].

Which answer is scored (rlvr's answer-region rule, `rlvr_verifiers.reasoning`: only after the last
`</think>`; an unclosed reasoning block is `parse_error`): the content of the LAST `<answer>...</answer>`
block when the answer region has one (reasoning-gym's own convention, `reasoning_gym.utils.extract_answer`),
else the whole answer region; stripped either way. Empty -> `parse_error`. Longer than `max_answer_chars`
-> `wrong` (never handed to the scorer).

Reward: reasoning-gym's scorers pay small amounts for well-formed wrong answers (countdown 0.01 / 0.05, a
Python-list spelling of a matrix 0.1, ...). By default (`partial_credit: false`) rlvr pays 1 for a full
score and 0 otherwise (status `ok` / `wrong`, the scorer's value in `metrics["rg_score"]`); with
`partial_credit: true` (config or `item.extra["partial_credit"]`) it pays the scorer's value (`ok` when > 0).

Where it runs, and why not in the sandbox: the scorer is trusted library code and the answer is data, so it
runs in the verifier pool's process (the sandbox would re-import reasoning-gym, ~1.3 s of CPU, for every
item). But reading reasoning-gym 0.1.25 shows that some scorers do NOT treat the answer as data: they call
Python's `eval` on it (binary_matrix, n_queens, spiral_matrix, string_insertion: a fallback that accepts a
Python-list spelling) or sympy's `parse_expr` (countdown, puzzle24, polynomial_multiplication,
simple_integration, intermediate_integration), and `parse_expr` is `eval` underneath: an answer like
`__import__('os').system(...)` would run in the pool. So before any scoring, those scorer modules get
guarded replacements bound in their own module namespace (module globals shadow builtins; nothing else in
the process changes):
- `eval` -> a literal reader: the text must parse as a Python literal (numbers, strings, lists, tuples,
  dicts, sets; `ast.literal_eval`, after the length cap), else the scorer's own except-branch sees a
  ValueError;
- `parse_expr` -> the same sympy `parse_expr`, called only when the text is a small arithmetic expression:
  digits, single-letter variables, + - * / ^ ** ( ) . and a fixed list of elementary functions (sin, exp,
  log, sqrt ...), at most 200 characters and 200 syntax nodes, every constant at most 10^9, and a power's
  exponent only a constant of magnitude at most 100 (no power towers), else a ValueError.
`UNSAFE_SCORERS` lists these modules; tests/verifiers/test_reasoning_gym.py fails when a dataset's scorer
module calls eval / exec / parse_expr / sympify and is not listed, so a reasoning-gym upgrade that adds one
is caught. With the guards, every scorer's work is bounded by the answer cap; the pool's item timeout
remains the last bound. Note that reasoning-gym imports sympy (and numpy) into the pool process, ~94 MB of
RSS and ~1.3 s of CPU once per process, on the first reasoning_gym item; rlvr's `math` verifier keeps sympy
in killable worker processes because sympy can run for minutes on adversarial input, which the guarded
parse_expr above prevents here by admitting only small expressions.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any

from rlvr_verifiers import reasoning
from rlvr_verifiers.base import INVALID_INPUT, OK, PARSE_ERROR, WRONG, Item, Verdict
from rlvr_verifiers.registry import Verifier, register
from rlvr_verifiers.scan import tagged_blocks

# reasoning-gym dataset -> the module whose scorer evaluates the answer, and the names guarded there.
UNSAFE_SCORERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "binary_matrix": ("reasoning_gym.algorithmic.binary_matrix", ("eval",)),
    "n_queens": ("reasoning_gym.games.n_queens", ("eval",)),
    "spiral_matrix": ("reasoning_gym.algorithmic.spiral_matrix", ("eval",)),
    "string_insertion": ("reasoning_gym.algorithmic.string_insertion", ("eval",)),
    "number_sorting": ("reasoning_gym.algorithmic.number_sorting", ("eval",)),  # evals the reference answer
    "countdown": ("reasoning_gym.games.countdown", ("parse_expr",)),
    "puzzle24": ("reasoning_gym.games.puzzle24", ("parse_expr",)),
    "polynomial_multiplication": ("reasoning_gym.algebra.polynomial_multiplication", ("parse_expr",)),
    "simple_integration": ("reasoning_gym.algebra.simple_integration", ("parse_expr",)),
    "intermediate_integration": ("reasoning_gym.algebra.intermediate_integration", ("parse_expr",)),
}
# Datasets whose scorer module calls one of those primitives only on generated data, never on the answer
# (read in reasoning-gym 0.1.25's source): not guarded, listed so the test knows they were reviewed.
REVIEWED_SAFE = {
    "basic_arithmetic": "eval() computes the generated expression's answer at generation time",
    "bitwise_arithmetic": "eval() computes the generated problem's answer at generation time",
    "propositional_logic": "its parse_expr is the module's own recursive-descent parser, no eval",
    "codeio": "exec() runs reasoning-gym's own generator code at generation time; score_answer compares JSON",
}

MAX_EXPR_CHARS = 200
MAX_EXPR_NODES = 200
MAX_CONSTANT = 10**9
MAX_EXPONENT = 100
FUNCTIONS = frozenset(
    "sin cos tan cot sec csc asin acos atan sinh cosh tanh exp log ln sqrt Abs abs pi oo".split()
)


def check_expression(text: str) -> None:
    """ValueError unless `text` is a small arithmetic expression (see the module doc)."""
    if not isinstance(text, str) or len(text) > MAX_EXPR_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPR_CHARS} characters")
    if not re.fullmatch(r"[0-9A-Za-z\s+\-*/^().,]*", text):
        raise ValueError("expression holds characters outside digits, letters, + - * / ^ ( ) . ,")
    try:
        tree = ast.parse(text.replace("^", "**").strip(), mode="eval")
    except SyntaxError:
        raise ValueError("not an arithmetic expression") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_EXPR_NODES:
        raise ValueError(f"expression has more than {MAX_EXPR_NODES} nodes")
    for node in nodes:
        if isinstance(node, ast.Expression | ast.Load | ast.operator | ast.unaryop):
            continue
        if isinstance(node, ast.BinOp | ast.UnaryOp):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
                inner = list(ast.walk(node.right))
                if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in inner) or any(
                    isinstance(n, ast.Constant) and abs(n.value) > MAX_EXPONENT for n in inner
                ):
                    raise ValueError(f"a power's exponent must be a constant of magnitude <= {MAX_EXPONENT}")
            elif not isinstance(
                node.op, ast.Add | ast.Sub | ast.Mult | ast.Div | ast.USub | ast.UAdd | ast.Pow
            ):
                raise ValueError(f"operator {type(node.op).__name__} is not allowed")
            continue
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float) or abs(node.value) > MAX_CONSTANT:
                raise ValueError(f"constant {node.value!r} is not a number of magnitude <= {MAX_CONSTANT}")
            continue
        if isinstance(node, ast.Name):
            if len(node.id) != 1 and node.id not in FUNCTIONS:
                raise ValueError(
                    f"name {node.id!r} is neither a one-letter variable nor an elementary function"
                )
            continue
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                raise ValueError("only elementary functions may be called")
            continue
        raise ValueError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def literal_eval(text: Any, *args: Any, **kwargs: Any) -> Any:
    """The guarded `eval`: Python literals only (reasoning-gym's fallbacks read list spellings)."""
    if not isinstance(text, str) or args or kwargs:
        raise ValueError("the guarded eval reads one string")
    if len(text) > 100_000:
        raise ValueError("literal longer than 100000 characters")
    try:
        return ast.literal_eval(text.strip())
    except (SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a Python literal: {type(exc).__name__}") from None


def _guarded_parse_expr(real: Any) -> Any:
    def parse_expr(text: Any, *args: Any, **kwargs: Any) -> Any:
        check_expression(text)
        return real(text, *args, **kwargs)

    parse_expr.rlvr_guarded = True
    return parse_expr


def _sympy_view(sympy: types.ModuleType) -> types.ModuleType:
    view = types.ModuleType("sympy")
    view.__dict__["__getattr__"] = lambda name: getattr(sympy, name)
    view.parse_expr = _guarded_parse_expr(sympy.parse_expr)
    return view


_GUARD_LOCK = threading.Lock()
_guarded: set[str] = set()


def guard(dataset: str) -> None:
    """Bind the guarded primitives in `dataset`'s scorer module (idempotent; see the module doc)."""
    if dataset not in UNSAFE_SCORERS or dataset in _guarded:
        return
    module_name, names = UNSAFE_SCORERS[dataset]
    with _GUARD_LOCK:
        if dataset in _guarded:
            return
        __import__(module_name)
        module = sys.modules[module_name]
        for name in names:
            if name == "eval":
                module.eval = literal_eval
                continue
            if hasattr(module, name):  # `from sympy.parsing.sympy_parser import parse_expr`
                if not getattr(getattr(module, name), "rlvr_guarded", False):
                    setattr(module, name, _guarded_parse_expr(getattr(module, name)))
                continue
            # `import sympy as sp` ... `sp.parse_expr(answer)`: the module's sympy becomes a view of sympy
            # whose parse_expr is guarded (sympy itself, and every other user of it, is left alone).
            for key, value in list(vars(module).items()):
                if isinstance(value, types.ModuleType) and value.__name__ == "sympy":
                    setattr(module, key, _sympy_view(value))
        _guarded.add(dataset)


def _scorer(dataset: str) -> Any:
    try:
        import reasoning_gym
    except ImportError:
        raise ImportError(
            "the reasoning_gym verifier needs reasoning-gym: pip install 'rlvr[reasoning-gym]'"
        ) from None

    try:
        fn = reasoning_gym.get_score_answer_fn(dataset)
    except ValueError:
        return None
    guard(dataset)
    return fn


@dataclass
class ReasoningGymConfig:
    partial_credit: bool = field(
        default=False,
        metadata={
            "help": "Pay reasoning-gym's score as it is (its scorers give e.g. 0.01 for a well-formed wrong "
            "countdown answer); off: pay 1 for a full score, 0 otherwise. item.extra['partial_credit'] "
            "overrides it."
        },
    )
    max_answer_chars: int = field(
        default=10_000, metadata={"help": "A longer answer is `wrong` without reaching the scorer."}
    )


def parse_ground_truth(gt: Any) -> tuple[str, dict]:
    if isinstance(gt, str | bytes):
        try:
            gt = json.loads(gt)
        except json.JSONDecodeError as exc:
            raise ValueError(f"reasoning_gym ground truth is not JSON: {exc.msg}") from None
    if not isinstance(gt, dict):
        raise ValueError('reasoning_gym ground truth must be {"dataset": NAME, "entry": {...}}')
    dataset, entry = gt.get("dataset"), gt.get("entry")
    if not isinstance(dataset, str) or not dataset:
        raise ValueError(f"reasoning_gym ground truth needs a dataset name, got {dataset!r}")
    if not isinstance(entry, dict) or "answer" not in entry:
        raise ValueError(
            "reasoning_gym ground truth needs the generated entry (with its answer and metadata)"
        )
    entry.setdefault("metadata", {})
    return dataset, entry


def extract_answer(region: str) -> str:
    # one linear pass (scan.tagged_blocks == re.findall of <answer>(.*?)</answer>, which rescans the rest of
    # the text from every unclosed <answer>: quadratic on a degenerate response)
    blocks = tagged_blocks(region, "<answer>", "</answer>", ignore_case=True)
    return (blocks[-1] if blocks else region).strip()


@register("reasoning_gym")
class ReasoningGymVerifier(Verifier):
    name = "reasoning_gym"

    def __init__(self, config: ReasoningGymConfig | None = None) -> None:
        self.config = config or ReasoningGymConfig()

    def verify(self, item: Item) -> Verdict:
        try:
            dataset, entry = parse_ground_truth(item.ground_truth)
        except ValueError as exc:
            return Verdict(0.0, INVALID_INPUT, str(exc)[:300])
        region = reasoning.answer_region(item)  # never read inside the reasoning block (reasoning.py)
        if isinstance(region, Verdict):
            return region
        answer = extract_answer(region)
        if not answer:
            return Verdict(0.0, PARSE_ERROR, "empty answer (expected <answer>...</answer>)")
        if len(answer) > self.config.max_answer_chars:
            return Verdict(0.0, WRONG, f"answer longer than {self.config.max_answer_chars} characters")
        try:
            scorer = _scorer(dataset)
        except ImportError as exc:
            return Verdict(0.0, INVALID_INPUT, str(exc))
        if scorer is None:
            return Verdict(0.0, INVALID_INPUT, f"unknown reasoning-gym dataset {dataset!r}")
        try:
            score = float(scorer(answer, entry))
        except Exception as exc:  # noqa: BLE001 - a scorer failing on a strange answer is a wrong answer
            return Verdict(0.0, WRONG, f"{dataset} scorer raised {type(exc).__name__} on the answer")
        partial = bool((item.extra or {}).get("partial_credit", self.config.partial_credit))
        metrics = {"rg_score": score}
        detail = f"{dataset}: score {score:g}"
        if score >= 1.0:
            return Verdict(1.0, OK, detail, metrics)
        if partial and score > 0:
            return Verdict(score, OK, detail, metrics)
        return Verdict(0.0, WRONG, detail, metrics)
