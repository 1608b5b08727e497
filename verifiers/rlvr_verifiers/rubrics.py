"""Built-in rubrics (rlvr_verifiers.rubric.Rubric), registered lazily under their names like the built-in
verifiers: `registry.get("r1")` builds and registers the `r1` rubric on first use, in whichever process
asks (a pool actor included). Select one for training with `reward.reward_kwargs.rlvr.rubric=NAME`: the
rlvr reward manager then scores every sample with the rubric, its `routed` component being the verifier
the sample's data source routes to (math for `addition`, code for code rows, ...).

- `r1_zero`: DeepSeek-R1-Zero's two rule rewards: correctness (1.0) + the R1 format, `<think>...</think>`
  then the answer (0.5; the `format` verifier).
- `r1`: the final RL stage of DeepSeek-R1: correctness (1.0) + format (0.2) + language consistency of the
  reasoning (0.1; the `format` verdict's `language_consistency` metric) + helpfulness/safety (0.2; the
  `helpfulness` verifier, a local heuristic scorer, pluggable: rlvr_verifiers.helpfulness).
Status is always correctness's (the `routed` component is the primary one): `ok` means the answer is right.
"""

from __future__ import annotations

import functools
from typing import Any

from rlvr_verifiers import registry

BUILTIN_RUBRICS: dict[str, dict[str, Any]] = {
    "r1_zero": {
        "components": [
            {"verifier": "routed", "weight": 1.0},
            {"verifier": "format", "weight": 0.5},
        ],
    },
    "r1": {
        "components": [
            {"verifier": "routed", "weight": 1.0},
            {"verifier": "format", "weight": 0.2},
            {"verifier": "format", "weight": 0.1, "metric": "language_consistency"},
            {"verifier": "helpfulness", "weight": 0.2},
        ],
    },
}


def build(name: str):
    """The built-in rubric `name` (not registered; registry.get registers it)."""
    from rlvr_verifiers.rubric import Rubric

    return Rubric.from_dict({"name": name, **BUILTIN_RUBRICS[name]})


for _name in BUILTIN_RUBRICS:  # rlvr_verifiers/__init__.py imports this module, so every process has them
    registry.build_on_first_use(_name, functools.partial(build, _name))
