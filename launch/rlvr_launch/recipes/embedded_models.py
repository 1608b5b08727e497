"""The embedded models a recipe names (`embedded://tiny`, `embedded://student`): what determines each one
and the cache folder it is built in. rlvr_launch.runs.embedded_model builds them; composition needs only
their names and folders, so it reads them here without importing the builder (or torch).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

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
