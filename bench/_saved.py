"""A bench's figures saved as JSON, with when and on how many cores they were measured, so that its
`--report FILE` path (what CI runs) can print a real run's table without training again."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def save(out: Path, figures: dict) -> dict:
    saved = {
        **figures,
        "cpu_count": os.cpu_count(),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(saved, indent=1) + "\n")
    return saved
