"""A mixture of tasks in one run, declared in the recipe and built by `rlvr train` (issue 34):

    rlvr:
      task: mix
      mix: {addition: 2, ifeval: 1}     # task name -> weight (its share of the training rows)

Checked at composition (`@composition_check("mix")`, so by `rlvr train`, `resolve` and `submit` before
anything starts): at least two tasks, each a task rlvr can build data for (a converter of
rlvr_launch.data.converters, or rlvr's generated `addition` / `digit_sums`), each weight a positive finite
number, and every verifier the mixture's tasks need registered (rlvr_verifiers.registry). Each failure is
one line naming the task or weight and the fix.

Built by `rlvr train`'s prepare step (`prepare(cfg)`) into ${rlvr.data_dir}/mix with the code of `rlvr data
mix` (data/converters/mix.py): each task's converted folder ${rlvr.data_dir}/TASK is used as it is; a
missing one is built when rlvr can build it offline (the generated `addition` / `digit_sums`, a converter's
offline generator such as `rlvr data ifeval --source generate`), otherwise refused with the `rlvr data`
command that converts it. The mixture is rebuilt only when its weights (or parts) change: its conversion
report records the spec. Seed 0, as many training rows as the parts hold at the weights without repeating one.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.recipes.recipe_checks import composition_check
from rlvr_launch.runs import embedded_model as embedded

KEY = "rlvr.mix"
NAME = "mix"  # == the task name and its data folder
# rlvr's own generated tasks (rlvr.prepare) and the verifier their rows name (extra_info.verifier)
GENERATED = {embedded.ADDITION: "math", **dict.fromkeys(embedded.DIGIT_SUMS_INSTRUCTIONS, "math")}
SEED = 0


def weights(cfg) -> dict[str, object]:
    from omegaconf import OmegaConf

    node = OmegaConf.select(cfg, KEY, default=None)
    return {str(k): v for k, v in node.items()} if node else {}


def task_verifier(task: str) -> str | None:
    """The verifier a task's rows are written for; None for a task rlvr cannot build data for."""
    from rlvr_launch.data.converters import NAMES, load

    if task in GENERATED:
        return GENERATED[task]
    if task in NAMES and task != NAME:
        return load(task).VERIFIER
    return None


def known_tasks() -> list[str]:
    from rlvr_launch.data.converters import NAMES

    return sorted({*GENERATED, *(n for n in NAMES if n != NAME)})


@composition_check(NAME)
def check(cfg) -> None:
    """Refuse a mixture that cannot be built or scored (no-op without rlvr.mix)."""
    parts = weights(cfg)
    if not parts:
        return
    task = str(cfg.rlvr.get("task") or "")
    if task != NAME:
        raise UserError(
            f"{KEY} is set but task={task}, which trains on its own files: set task={NAME} (it trains on "
            f"the mixture, ${{rlvr.data_dir}}/{NAME}) or leave {KEY} empty"
        )
    if len(parts) < 2:
        raise UserError(
            f"{KEY} has one task ({', '.join(parts)}): a mixture needs two or more, or train task={next(iter(parts))}"
        )
    for task, weight in parts.items():
        if task_verifier(task) is None:
            raise UserError(f"{KEY}.{task}: unknown task {task!r}; known: {', '.join(known_tasks())}")
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
            or weight <= 0
        ):
            raise UserError(
                f"{KEY}.{task}={weight}: a weight must be a positive finite number, e.g. {KEY}.{task}=1"
            )
    from rlvr_verifiers import registry

    available = registry.names()
    for task in parts:
        verifier = task_verifier(task)
        if verifier not in available:
            raise UserError(
                f"{KEY}.{task} needs verifier {verifier!r}, which is not registered (available: "
                f"{', '.join(available)}): install the package that registers it, or drop {task} from {KEY}"
            )


def spec(cfg) -> str:
    """`rlvr data mix`'s --source value for the recipe's mixture (parts as folders under rlvr.data_dir)."""
    data_dir = Path(str(cfg.rlvr.data_dir)).expanduser()
    return "mix:" + ",".join(f"{data_dir / task}={float(w):g}" for task, w in weights(cfg).items())


def _ensure_part(task: str, data_dir: Path, log) -> None:
    from rlvr_launch.data import convert
    from rlvr_launch.data.converters import load

    folder = data_dir / task
    if task == embedded.ADDITION:  # built once per tiny-model spec (its own marker)
        embedded.ensure_addition_data(data_dir)
        return
    if task in embedded.DIGIT_SUMS_INSTRUCTIONS:
        embedded.ensure_digit_sums_data(data_dir, task)
        return
    if (folder / "train.parquet").is_file():
        return
    converter = load(task)
    generator = getattr(converter, "GENERATE", None)
    if generator is None or "spec" in inspect.signature(converter.generate).parameters:
        # no offline generator, or one that needs a choice only the user can make (reasoning_gym's dataset)
        raise UserError(
            f"{KEY}.{task}: no converted data at {folder}: convert it first (rlvr data {task} --out {folder} "
            f"[--source FILE]), then train again"
        )
    log(f"{KEY}: generating {task} offline into {folder} (rlvr data {task} --source {generator})")
    convert.prepare(task, folder, generator)


def prepare(cfg, log=print) -> Path | None:
    """Build ${rlvr.data_dir}/mix for the recipe's rlvr.mix (module doc); None without a mixture."""
    from rlvr_launch.data import convert

    parts = weights(cfg)
    if not parts:
        return None
    check(cfg)
    data_dir = Path(str(cfg.rlvr.data_dir)).expanduser()
    out = data_dir / NAME
    source = spec(cfg)
    report = out / convert.REPORT_NAME
    if (out / "train.parquet").is_file() and report.is_file():
        try:
            built = json.loads(report.read_text()).get("source")
        except (OSError, json.JSONDecodeError):
            built = None
        if built == source:
            return out
        log(f"{KEY}: the mixture in {out} was built from {built}; rebuilding it for {source}")
    for task in parts:
        _ensure_part(task, data_dir, log)
    result = convert.prepare(NAME, out, source, seed=SEED)
    counts = {s: info["written"] for s, info in result["splits"].items()}
    log(f"{KEY}: built {out} from {', '.join(f'{t}={w}' for t, w in parts.items())}: {counts} rows")
    return out
