"""The verifier registry: one name per verifier, equal to its module file name and its config value.

    from rlvr_verifiers import registry
    registry.get("math").verify_batch([Item(response, ground_truth)])

A verifier is an object with a `name`, `verify(item) -> Verdict` and `verify_batch(items) -> list[Verdict]`
(a plain TRL-style batch function; `Verifier` below gives the batch loop for free).

`register(name)` decorates a class (instantiated once, without arguments) or an instance; registering a
name twice raises ValueError. Built-in verifiers live in `rlvr_verifiers/<name>.py` and are imported
lazily, the first time `get(name)` or `names()` needs them, so importing the registry imports no verifier
(and never torch or verl). Built-in rubrics (`rlvr_verifiers.rubrics`: `r1`, `r1_zero`) are built the same way
(added by `build_on_first_use` when the package is imported).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

from rlvr_verifiers.base import Item, Verdict

# Built-in verifiers: registry key == module file name == config value.
BUILTIN = ("math", "countdown", "tool_call", "format", "code", "helpfulness")

_REGISTRY: dict[str, Any] = {}
_LOCK = threading.RLock()


class Verifier:
    """Convenience base: subclasses set `name` and implement `verify`; `verify_batch` maps it."""

    name: str = ""

    def verify(self, item: Item) -> Verdict:  # pragma: no cover - abstract
        raise NotImplementedError

    def verify_batch(self, items: list[Item]) -> list[Verdict]:
        return [self.verify(item) for item in items]

    def __call__(self, items: list[Item]) -> list[Verdict]:
        return self.verify_batch(items)


def register(name: str) -> Callable[[Any], Any]:
    """Decorator registering a verifier class (instantiated with no arguments) or instance under `name`."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"verifier name must be a non-empty string, got {name!r}")

    def decorate(obj: Any) -> Any:
        verifier = obj() if isinstance(obj, type) else obj
        for attr in ("verify", "verify_batch"):
            if not callable(getattr(verifier, attr, None)):
                raise TypeError(f"verifier {name!r} has no callable {attr}(); see rlvr_verifiers.registry")
        if getattr(verifier, "name", "") not in ("", name):
            raise ValueError(f"verifier registered as {name!r} calls itself {verifier.name!r}: use one name")
        with _LOCK:
            if name in _REGISTRY:
                raise ValueError(
                    f"verifier {name!r} is already registered ({type(_REGISTRY[name]).__name__}); "
                    "pick another name or remove the duplicate registration"
                )
            try:
                verifier.name = name
            except AttributeError:
                pass
            _REGISTRY[name] = verifier
        return obj

    return decorate


# Verifiers built on first use, by name (the built-in rubrics: rlvr_verifiers.rubrics adds them when the
# package is imported, so the registry imports no rubric and no rubric imports it back).
_BUILT_ON_FIRST_USE: dict[str, Callable[[], Any]] = {}


def build_on_first_use(name: str, build: Callable[[], Any]) -> None:
    """`get(name)` / `names()` register `build()` under `name` the first time they need it; one name once."""
    if name in _BUILT_ON_FIRST_USE or name in BUILTIN:
        raise ValueError(f"verifier {name!r} is already a built-in")
    _BUILT_ON_FIRST_USE[name] = build


def _load_builtin(name: str) -> None:
    if name in _REGISTRY:
        return
    if name not in BUILTIN:
        # Built-in rubrics (rlvr_verifiers.rubrics: weighted sums of verifiers, defined as data).
        if name in _BUILT_ON_FIRST_USE:
            _REGISTRY[name] = _BUILT_ON_FIRST_USE[name]()
        return
    try:
        importlib.import_module(f"rlvr_verifiers.{name}")
    except ModuleNotFoundError as exc:
        # A built-in that is not installed (yet) is simply absent; a missing dependency is an error.
        if exc.name != f"rlvr_verifiers.{name}":
            raise


def names() -> list[str]:
    """Sorted names of every available verifier (built-ins imported on first call)."""
    with _LOCK:
        for builtin in (*BUILTIN, *_BUILT_ON_FIRST_USE):
            _load_builtin(builtin)
        return sorted(_REGISTRY)


def get(name: str) -> Any:
    """The verifier registered as `name`; KeyError listing the available names otherwise."""
    with _LOCK:
        _load_builtin(name)
        if name in _REGISTRY:
            return _REGISTRY[name]
    raise KeyError(f"unknown verifier {name!r}; available: {', '.join(names())}")
