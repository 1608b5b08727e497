"""The `thinking_budget` agent loop, observed: what each server call got and returned, and what the loop
handed to training, one JSON line per sample (for tests that run the loop inside verl's trainer).

The loop itself is rlvr's, unchanged; the recorder only wraps the server client verl gives it (calls
are forwarded as they are) and writes the loop's output after `run`. Ray workers import this module by
its file name (the test puts this folder on PYTHONPATH); the records go to $RLVR_TEST_BUDGET_RECORDS/
<pid>.jsonl (one file per worker process, so concurrent workers never interleave lines).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rlvr_cluster.thinking_budget import ThinkingBudgetAgentLoop

RECORDS_ENV = "RLVR_TEST_BUDGET_RECORDS"
NAME = "thinking_budget_recorded"
TARGET = f"{__name__}.RecordingThinkingBudgetAgentLoop"


class _RecordingClient:
    def __init__(self, client, calls: list[dict]):
        self._client = client
        self._calls = calls

    async def generate(self, *args, **kwargs):
        params = dict(kwargs.get("sampling_params") or {})
        out = await self._client.generate(*args, **kwargs)
        self._calls.append(
            {
                "prompt_ids": list(kwargs["prompt_ids"]),
                "max_tokens": params.get("max_tokens"),
                "token_ids": list(out.token_ids),
                "log_probs": list(out.log_probs) if out.log_probs is not None else None,
            }
        )
        return out

    def __getattr__(self, name):
        return getattr(self._client, name)


class RecordingThinkingBudgetAgentLoop(ThinkingBudgetAgentLoop):
    async def run(self, sampling_params, **kwargs):
        calls: list[dict] = []
        real = self.server_manager
        self.server_manager = _RecordingClient(real, calls)
        try:
            out = await super().run(sampling_params, **kwargs)
        finally:
            self.server_manager = real
        record = {
            "calls": calls,
            "prompt_ids": out.prompt_ids,
            "response_ids": out.response_ids,
            "response_mask": out.response_mask,
            "response_logprobs": out.response_logprobs,
            "extra_fields": {
                k: out.extra_fields[k]
                for k in ("thinking_budget", "thinking_budget_hit", "thinking_tokens", "answer_tokens")
            },
            "response_length": self.response_length,
        }
        folder = Path(os.environ[RECORDS_ENV])
        with open(folder / f"{os.getpid()}.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")
        return out
