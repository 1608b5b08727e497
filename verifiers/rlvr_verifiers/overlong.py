"""DAPO's soft overlong punishment (arXiv:2503.14476 sec. 3.4, eq. 13), for the reward bridge to apply.

    R_length(y) = 0                                   if |y| <= L_max - L_cache
                = ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
                = -1                                  if |y| > L_max
(scaled by `penalty_factor`), added to the verifier's score. Configured as in verl's `dapo` reward
manager (verl/experimental/reward_loop/reward_manager/dapo.py), so recipes/algo/dapo.yaml serves both:
`reward.reward_kwargs.overlong_buffer_cfg.{enable, len, penalty_factor, log}` and
`reward.reward_kwargs.max_resp_len` (L_max; L_cache = len).

The verifier's verdict is not changed: `acc` stays the verified score (DAPO's dynamic sampling filters
on it), only the paid reward carries the penalty. Pure Python: no torch, no verl.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OverlongConfig:
    enable: bool = field(default=False, metadata={"help": "apply the soft overlong punishment"})
    buffer_len: int = field(
        default=0, metadata={"help": "L_cache: tokens before L_max where the penalty ramps"}
    )
    max_resp_len: int = field(
        default=0, metadata={"help": "L_max: the generation budget (data.max_response_length)"}
    )
    penalty_factor: float = field(default=1.0, metadata={"help": "penalty at L_max (DAPO: 1.0)"})
    log: bool = field(default=True, metadata={"help": "report overlong_reward / overlong per sample"})

    def __post_init__(self) -> None:
        if not self.enable:
            return
        if self.buffer_len <= 0:
            raise ValueError(
                "reward.reward_kwargs.overlong_buffer_cfg.len must be > 0 when overlong shaping is on"
            )
        if self.max_resp_len <= self.buffer_len:
            raise ValueError(
                f"reward.reward_kwargs.overlong_buffer_cfg.len={self.buffer_len} must be below max_resp_len="
                f"{self.max_resp_len} (data.max_response_length): the penalty ramp must fit in the generation "
                "budget; lower reward.reward_kwargs.overlong_buffer_cfg.len"
            )

    @classmethod
    def from_verl_config(cls, config: Any) -> OverlongConfig:
        reward = config.get("reward", config) if hasattr(config, "get") else {}
        kwargs = (reward.get("reward_kwargs") or {}) if hasattr(reward, "get") else {}
        cfg = kwargs.get("overlong_buffer_cfg") or {}
        if not cfg or not cfg.get("enable", False):
            return cls()
        return cls(
            enable=True,
            buffer_len=int(cfg.get("len", 0) or 0),
            max_resp_len=int(kwargs.get("max_resp_len") or 0),
            penalty_factor=float(cfg.get("penalty_factor", 1.0)),
            log=bool(cfg.get("log", True)),
        )

    def penalty(self, response_length: int) -> float:
        """The (non-positive) reward added for a response of `response_length` tokens."""
        if not self.enable:
            return 0.0
        expected = self.max_resp_len - self.buffer_len
        exceed = int(response_length) - expected
        return min(-exceed / self.buffer_len * self.penalty_factor, 0.0) if exceed > 0 else 0.0

    def extra_info(self, response_length: int) -> dict[str, float]:
        """Per-sample columns (present for every sample when enabled and logged, as verl requires)."""
        if not (self.enable and self.log):
            return {}
        p = self.penalty(response_length)
        return {"overlong_reward": p, "overlong": float(p < 0)}
