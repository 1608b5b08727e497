"""Tokenizer and parser for the `math` verifier: a LaTeX / plain-text math subset -> expression trees (nested
lists), bounded in depth.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from rlvr_verifiers.math_bounds import MAX_DEPTH, ParseFailure, TooComplex

_TOKEN_RE = re.compile(
    r"(?P<num>\d+\.\d*|\.\d+|\d+)"
    r"|(?P<cmd>\\[a-zA-Z]+|\\[{}|])"
    r"|(?P<op><=|>=|!=|\*\*|[-+*/^_(){}\[\],=<>|!])"
    r"|(?P<letter>[a-zA-Zα-ωΑ-Ω])"
    r"|(?P<ws>\s+)"
    r"|(?P<bad>.)",
    re.DOTALL,
)


_FUNCS = {
    "sin",
    "cos",
    "tan",
    "cot",
    "sec",
    "csc",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "ln",
    "log",
    "exp",
}


_GREEK = {
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
}


_REL = {
    "<": "<",
    ">": ">",
    "<=": "<=",
    ">=": ">=",
    "\\le": "<=",
    "\\leq": "<=",
    "\\ge": ">=",
    "\\geq": ">=",
    "\\lt": "<",
    "\\gt": ">",
    "\\ne": "!=",
    "\\neq": "!=",
    "!=": "!=",
    "\\leqslant": "<=",
    "\\geqslant": ">=",
}


_OPEN = {"(", "[", "{", "\\{"}


_CLOSE = {")", "]", "}", "\\}"}


def tokenize(s: str) -> list[tuple[str, str]]:
    tokens = []
    for m in _TOKEN_RE.finditer(s):
        kind = m.lastgroup
        if kind == "ws":
            continue
        if kind == "bad":
            raise ParseFailure(f"unexpected character {m.group()!r}")
        val = m.group()
        if kind == "cmd" and val in ("\\cdot", "\\times", "\\ast"):
            kind, val = "op", "*"
        elif kind == "cmd" and val == "\\div":
            kind, val = "op", "/"
        elif kind == "op" and val == "**":
            val = "^"
        tokens.append((kind, val))
    return tokens


def _num_node(text: str) -> list[Any]:
    if "." in text:
        return [
            "num",
            str(Fraction(text.rstrip(".") or "0") if text.endswith(".") else Fraction(text)),
            "dec",
        ]
    return ["num", text, "int"]


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.t = tokens
        self.i = 0
        self.depth = 0
        # Plain-text math (no TeX command, no brace anywhere): `2^10` is 2 to the 10th, as a calculator
        # or a programming language reads it. In TeX it renders 2^1 followed by 0, so with any TeX in the
        # answer an unbraced multi-digit exponent stays ambiguous.
        self.plain = not any(v.startswith("\\") or v in ("{", "}") for _, v in tokens)

    def peek(self, k: int = 0) -> tuple[str, str] | None:
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def next(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise ParseFailure("unexpected end")
        self.i += 1
        return tok

    def expect(self, val: str) -> None:
        tok = self.next()
        if tok[1] != val:
            raise ParseFailure(f"expected {val!r}, got {tok[1]!r}")

    def at(self, *vals: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[1] in vals

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooComplex(f"nesting deeper than {MAX_DEPTH}")

    # expr := term (('+'|'-') term)*
    def expr(self) -> list[Any]:
        self.enter()
        node = self.term()
        while self.at("+", "-"):
            op = self.next()[1]
            rhs = self.term()
            node = ["add", node, rhs if op == "+" else ["neg", rhs]]
        self.depth -= 1
        return node

    def _starts_atom(self) -> bool:
        tok = self.peek()
        if tok is None:
            return False
        kind, val = tok
        if kind in ("num", "letter"):
            return True
        if kind == "cmd":
            return (
                val[1:] in _FUNCS
                or val[1:] in _GREEK
                or val in ("\\pi", "\\frac", "\\sqrt", "\\binom", "\\infty", "\\overline")
            )
        return val in ("(", "{") or (val == "|" and False)

    def term(self) -> list[Any]:
        node = self.unary()
        while True:
            if self.at("*", "/"):
                op = self.next()[1]
                rhs = self.unary()
                node = ["mul", node, rhs] if op == "*" else ["div", node, rhs]
            elif self._starts_atom():
                if self.peek()[0] == "num" and _ends_with_number(node):
                    raise ParseFailure("two numbers side by side")
                rhs = self.power()
                if (
                    node[0] == "num"
                    and node[2] == "int"
                    and rhs[0] == "frac"
                    and rhs[1][0] == "num"
                    and rhs[1][2] == "int"
                    and rhs[2][0] == "num"
                    and rhs[2][2] == "int"
                ):
                    node = ["add", node, rhs]  # mixed number 2\frac{1}{2}
                elif (
                    node[0] == "neg"
                    and node[1][0] == "num"
                    and node[1][2] == "int"
                    and rhs[0] == "frac"
                    and rhs[1][0] == "num"
                    and rhs[1][2] == "int"
                    and rhs[2][0] == "num"
                    and rhs[2][2] == "int"
                ):
                    node = ["neg", ["add", node[1], rhs]]
                else:
                    node = ["mul", node, rhs]
            else:
                return node

    def unary(self) -> list[Any]:
        if self.at("-"):
            self.next()
            self.enter()
            node = ["neg", self.unary()]
            self.depth -= 1
            return node
        if self.at("+"):
            self.next()
            return self.unary()
        return self.power()

    def power(self) -> list[Any]:
        base = self.postfix(self.atom())
        if self.at("^"):
            self.next()
            exp = self.script_arg()
            return ["pow", base, exp]
        return base

    def postfix(self, node: list[Any]) -> list[Any]:
        while self.at("!"):
            self.next()
            node = ["fact", node]
        return node

    def script_arg(self) -> list[Any]:
        """The argument of ^ : a braced group or a single token (multi-digit bare numbers are ambiguous)."""
        tok = self.peek()
        if tok is None:
            raise ParseFailure("dangling ^")
        if tok[1] == "{":
            return self.group()
        if tok[1] == "-":
            self.next()
            return ["neg", self.script_arg()]
        if tok[0] == "num":
            if len(tok[1]) > 1 and not (self.plain and tok[1].isdigit()):
                raise ParseFailure("ambiguous unbraced multi-digit exponent")
            self.next()
            return _num_node(tok[1])
        return self.atom()

    def latex_arg(self) -> list[Any]:
        """A LaTeX macro argument: a braced group or a single character/command."""
        tok = self.peek()
        if tok is None:
            raise ParseFailure("missing argument")
        if tok[1] == "{":
            return self.group()
        if tok[0] == "num":
            self.next()
            if len(tok[1]) > 1:
                self.t.insert(self.i, ("num", tok[1][1:]))
            return _num_node(tok[1][0])
        if tok[0] == "letter":
            self.next()
            return ["var", tok[1]]
        return self.atom()

    def group(self) -> list[Any]:
        self.expect("{")
        node = self.expr()
        self.expect("}")
        return node

    def atom(self) -> list[Any]:
        self.enter()
        try:
            return self._atom()
        finally:
            self.depth -= 1

    def _atom(self) -> list[Any]:
        kind, val = self.next()
        if kind == "num":
            node = _num_node(val)
            if self.at("\\overline") and node[2] == "dec":
                self.next()
                rep = self.group()
                if rep[0] != "num" or rep[2] != "int":
                    raise ParseFailure("bad repeating decimal")
                return ["num", str(_repeating(val, self.t[self.i - 2][1])), "dec"]
            return node
        if kind == "letter":
            name = val
            if self.at("_"):
                self.next()
                tok = self.next()
                if tok[1] == "{":
                    parts = []
                    while not self.at("}"):
                        parts.append(self.next()[1])
                    self.expect("}")
                    name += "_" + "".join(parts)
                else:
                    name += "_" + tok[1]
            return ["var", name]
        if val in ("(", "["):
            node = self.expr()
            self.expect(")" if val == "(" else "]")
            return node
        if val == "{":
            node = self.expr()
            self.expect("}")
            return node
        if val == "|":
            node = self.expr()
            self.expect("|")
            return ["abs", node]
        if kind == "cmd":
            name = val[1:]
            if name == "pi":
                return ["pi"]
            if name == "infty":
                return ["inf"]
            if name in _GREEK:
                return ["var", name]
            if name == "frac":
                num = self.latex_arg()
                den = self.latex_arg()
                return ["frac", num, den]
            if name == "binom":
                return ["binom", self.latex_arg(), self.latex_arg()]
            if name == "sqrt":
                if self.at("["):
                    self.next()
                    index = self.expr()
                    self.expect("]")
                    return ["root", index, self.sqrt_arg()]
                return ["sqrt", self.sqrt_arg()]
            if name in _FUNCS:
                return self.function(name)
        raise ParseFailure(f"unexpected {val!r}")

    def sqrt_arg(self) -> list[Any]:
        tok = self.peek()
        if tok is not None and tok[0] == "num" and len(tok[1]) > 1:
            raise ParseFailure("ambiguous unbraced multi-digit square root")
        return self.latex_arg()

    def function(self, name: str) -> list[Any]:
        base = None
        if name == "log" and self.at("_"):
            self.next()
            base = self.latex_arg()
        power = None
        if self.at("^"):
            self.next()
            power = self.script_arg()
        if self.at("(", "{"):
            arg = self.atom()
        else:
            arg = self.power()
            while self._starts_atom() and not (self.peek()[0] == "cmd" and self.peek()[1][1:] in _FUNCS):
                arg = ["mul", arg, self.power()]
        node = ["log", base, arg] if base is not None else ["fn", name, arg]
        return ["pow", node, power] if power is not None else node


def _ends_with_number(node: list[Any]) -> bool:
    while node[0] in ("mul", "add", "pow"):
        node = node[-1]
    return node[0] == "num" or (node[0] == "fact")


def _repeating(prefix: str, digits: str) -> Fraction:
    """0.1\\overline{6} -> 1/6: prefix '0.1' then repeating block '6'."""
    whole, _, frac_part = prefix.partition(".")
    k, r = len(frac_part), len(digits)
    non_rep = Fraction(int(whole or "0")) + (Fraction(int(frac_part), 10**k) if frac_part else 0)
    return non_rep + Fraction(int(digits), (10**r - 1) * 10**k)


def parse_expr(text: str) -> list[Any]:
    parser = _Parser(tokenize(text))
    node = parser.expr()
    if parser.peek() is not None:
        raise ParseFailure(f"unexpected {parser.peek()[1]!r}")
    return node
