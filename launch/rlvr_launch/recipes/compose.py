"""Recipe composition: Hydra over verl's own trainer config, validated the way verl validates it.

`compose(overrides)` is the one way every command (train, resolve, submit) turns a recipe plus
command-line overrides into the config verl runs. Mistakes are reported as `UserError`s that name
the problem and the fix: an unknown experiment lists the available ones, an unknown key names the
closest valid keys, a config verl rejects quotes verl's reason.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.recipes import recipe_checks

PRIMARY_CONFIG = "rlvr"
# Recipe groups rlvr owns (folders under recipes/); `rlvr ls` lists them in this order.
GROUPS = ("experiment", "algo", "model", "task", "platform", "rollout")
EMBEDDED_MODEL_PREFIX = "embedded://"


def _default_recipes_dir() -> Path:
    # launch/rlvr_launch/recipes/compose.py -> project root / recipes (editable install or a source checkout,
    # which is also what a Ray job's working_dir holds).
    return Path(__file__).resolve().parents[3] / "recipes"


RECIPES_DIR = Path(os.environ.get("RLVR_RECIPES_DIR", _default_recipes_dir()))


def recipes_dir() -> Path:
    path = Path(os.environ.get("RLVR_RECIPES_DIR", RECIPES_DIR))
    if not (path / f"{PRIMARY_CONFIG}.yaml").is_file():
        raise UserError(
            f"no recipes found at {path} (expected {PRIMARY_CONFIG}.yaml there); "
            "run rlvr from a checkout of the project or set RLVR_RECIPES_DIR"
        )
    return path


def group_entries(group: str) -> list[str]:
    folder = recipes_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def describe(group: str, name: str) -> str:
    """One-line purpose of a recipe: the experiment's rlvr.description, else its first comment line."""
    path = recipes_dir() / group / f"{name}.yaml"
    text = path.read_text()
    match = re.search(r'^\s*description:\s*"?(.*?)"?\s*$', text, flags=re.M)
    if match and match.group(1):
        return match.group(1)
    # Else the first sentence of the file's opening comment, whole (it often runs over several lines).
    paragraph: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# @package"):
            continue
        if not line.startswith("#") or not line.lstrip("# ").strip():
            if paragraph:
                break
            continue
        paragraph.append(line.lstrip("# ").strip())
    return first_sentence(" ".join(paragraph))


# A full stop that ends a sentence: not one of an abbreviation ("et al.", "sec.", "Dr.", "e.g.", "i.e.",
# "vs.") or inside a number.
_SENTENCE_END = re.compile(r"(?<!\bal)(?<!\bsec)(?<!\bDr)(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\bcf)\.(?=\s|$)")


def first_sentence(text: str) -> str:
    match = _SENTENCE_END.search(text)
    return text[: match.end()].strip() if match else text.strip()


def _check_group_choices(overrides: list[str]) -> None:
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in GROUPS:
            continue
        available = group_entries(key)
        if value not in available:
            close = difflib.get_close_matches(value, available, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise UserError(
                f"unknown {key} {value!r}.{hint} Available {key}s: {', '.join(available)} (see `rlvr ls`)"
            )


def _flat_keys(node, prefix: str = "") -> list[str]:
    from omegaconf import DictConfig

    keys = []
    if isinstance(node, DictConfig):
        for key in node.keys():
            path = f"{prefix}.{key}" if prefix else str(key)
            keys.append(path)
            try:
                child = node._get_node(key)
            except Exception:  # noqa: BLE001 - a node that cannot be read still names a key
                continue
            keys.extend(_flat_keys(child, path))
    return keys


def _unknown_key_error(message: str, base_overrides: list[str]) -> UserError | None:
    match = re.search(r"Could not override '([^']+)'", message) or re.search(
        r"Key '([^']+)' is not in struct", message
    )
    if not match:
        return None
    bad = match.group(1)
    # Compose the same recipe without the bad override to learn which keys exist.
    try:
        cfg = _hydra_compose([o for o in base_overrides if not o.lstrip("+~").startswith(bad + "=")])
        keys = _flat_keys(cfg)
    except Exception:  # noqa: BLE001 - the hint is best effort; the error itself is not
        keys = []
    parent = bad.rsplit(".", 1)[0] if "." in bad else ""
    siblings = [k for k in keys if k.rsplit(".", 1)[0] == parent] if parent else keys
    close = difflib.get_close_matches(bad, siblings, n=3, cutoff=0.5) or difflib.get_close_matches(
        bad, keys, n=3, cutoff=0.6
    )
    hint = f" Closest valid keys: {', '.join(close)}." if close else ""
    return UserError(
        f"unknown config key {bad!r}.{hint} To add a new key on purpose, write +{bad}=VALUE; "
        "`rlvr resolve` prints every key."
    )


def _hydra_compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(recipes_dir()), version_base=None):
        return hydra_compose(config_name=PRIMARY_CONFIG, overrides=list(overrides))


def embedded_model_dir(cache_dir: str | Path) -> Path:
    from rlvr_launch.recipes.embedded_models import TinySpec

    return Path(cache_dir) / "models" / f"tiny-qwen2-addition-{TinySpec().digest()}"


def embedded_path(path: str, cache_dir: str | Path) -> Path:
    """The cache folder of an embedded model named in a recipe (`embedded://tiny`, `embedded://student`)."""
    from rlvr_launch.recipes.embedded_models import MODELS, STUDENT, model_dir, student_model_dir

    name = path[len(EMBEDDED_MODEL_PREFIX) :]
    if name == "tiny":
        return embedded_model_dir(cache_dir)
    if name == STUDENT:
        return student_model_dir(Path(cache_dir))
    if name in MODELS:  # a real model converted from a package's file (runs/real_models.py)
        return model_dir(cache_dir, name)
    raise UserError(
        f"unknown embedded model {path!r}; the embedded models are embedded://tiny, embedded://{STUDENT} "
        f"(the distillation student) and {', '.join('embedded://' + n for n in sorted(MODELS))}"
    )


def _finalise(cfg) -> None:
    """Absolute rlvr paths; the embedded model's cache path in place of its `embedded://` name."""
    from omegaconf import open_dict

    with open_dict(cfg):
        cfg.rlvr.cache_dir = str(Path(os.path.expanduser(str(cfg.rlvr.cache_dir))).resolve())
        cfg.rlvr.data_dir = str(Path(os.path.expanduser(str(cfg.rlvr.data_dir))).resolve())
        path = str(cfg.actor_rollout_ref.model.path)
        if path.startswith(EMBEDDED_MODEL_PREFIX):
            cfg.actor_rollout_ref.model.path = str(embedded_path(path, cfg.rlvr.cache_dir))
        _finalise_teachers(cfg)  # embedded:// teacher paths of distillation.teacher_models


def _finalise_teachers(cfg) -> None:
    """`embedded://NAME` teacher paths -> their cache folders (as for the actor's model)."""
    from omegaconf import OmegaConf

    for teacher in (OmegaConf.select(cfg, "distillation.teacher_models", default=None) or {}).values():
        path = teacher.get("model_path")
        if isinstance(path, str) and path.startswith(EMBEDDED_MODEL_PREFIX):
            teacher.model_path = str(embedded_path(path, cfg.rlvr.cache_dir))


def _check_micro_batches(cfg) -> None:
    """verl asserts deep in a worker, mid-run, that micro-batches divide the data (engine/utils.py):
    check it here, before anything starts."""
    from omegaconf import OmegaConf

    n_gpus = int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.nnodes)
    n = int(cfg.actor_rollout_ref.rollout.n)
    batch = int(cfg.data.train_batch_size) * n // max(1, n_gpus)
    mini = int(cfg.actor_rollout_ref.actor.ppo_mini_batch_size) * n // max(1, n_gpus)
    checks = []
    if not cfg.actor_rollout_ref.actor.use_dynamic_bsz:
        checks.append(("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", mini, "mini-batch"))
    if not OmegaConf.select(cfg, "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz", default=False):
        checks.append(("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", batch, "batch"))
        checks.append(("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", batch, "batch"))
    for key, size, what in checks:
        micro = OmegaConf.select(cfg, key, default=None)
        if micro and size % int(micro):
            fits = max(d for d in range(1, int(micro) + 1) if size % d == 0)
            raise UserError(
                f"{key}={micro} does not divide the {size} samples per GPU of a {what} "
                f"(prompts x rollout.n / GPUs); set it to a divisor of {size}, e.g. {key}={fits}"
            )


# The keys users change most, with the type and range verl needs. verl types most of them loosely
# (`total_training_steps: null` accepts any string), so a typo like `=abc` or `rollout.n=-3` would pass
# composition and fail later, deep in a worker. (key, kind, lowest, highest, None allowed, what it is)
INT, NUMBER = "an integer", "a number"
_EXAMPLE = {INT: "8", NUMBER: "0.5"}
VALUE_RULES: tuple[tuple[str, str, float | None, float | None, bool, str], ...] = (
    ("trainer.total_training_steps", INT, 1, None, True, "training steps"),
    ("trainer.total_epochs", INT, 1, None, False, "epochs"),
    ("trainer.save_freq", INT, -1, None, False, "steps between checkpoints (-1: never)"),
    ("trainer.test_freq", INT, -1, None, False, "steps between validations (-1: never)"),
    ("trainer.nnodes", INT, 1, None, False, "nodes"),
    ("trainer.n_gpus_per_node", INT, 1, None, False, "GPUs per node"),
    ("data.train_batch_size", INT, 1, None, False, "prompts per step"),
    ("data.val_batch_size", INT, 1, None, True, "prompts per validation batch"),
    ("data.max_prompt_length", INT, 1, None, False, "prompt tokens"),
    ("data.max_response_length", INT, 1, None, False, "response tokens"),
    ("actor_rollout_ref.rollout.n", INT, 1, None, False, "responses per prompt"),
    ("actor_rollout_ref.rollout.temperature", NUMBER, 0, None, False, "sampling temperature"),
    ("actor_rollout_ref.rollout.top_p", NUMBER, 0, 1, False, "nucleus sampling mass"),
    ("actor_rollout_ref.rollout.val_kwargs.n", INT, 1, None, False, "responses per held-out prompt"),
    ("actor_rollout_ref.rollout.val_kwargs.temperature", NUMBER, 0, None, False, "held-out temperature"),
    ("actor_rollout_ref.rollout.val_kwargs.top_p", NUMBER, 0, 1, False, "held-out nucleus sampling mass"),
    ("actor_rollout_ref.actor.optim.lr", NUMBER, 0, 1, False, "learning rate"),
    ("actor_rollout_ref.actor.ppo_mini_batch_size", INT, 1, None, False, "prompts per mini-batch"),
    ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", INT, 1, None, True, "samples per micro-batch"),
    ("actor_rollout_ref.actor.ppo_epochs", INT, 1, None, False, "passes over each batch"),
    ("actor_rollout_ref.actor.clip_ratio_low", NUMBER, 0, None, False, "lower clip bound"),
    ("actor_rollout_ref.actor.clip_ratio_high", NUMBER, 0, None, False, "upper clip bound"),
    ("actor_rollout_ref.actor.kl_loss_coef", NUMBER, 0, None, False, "KL loss coefficient"),
    ("actor_rollout_ref.actor.entropy_coeff", NUMBER, None, None, False, "entropy bonus"),
    (
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        INT,
        1,
        None,
        True,
        "samples per micro-batch",
    ),
    (
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        INT,
        1,
        None,
        True,
        "samples per micro-batch",
    ),
)


def _check_values(cfg) -> None:
    """Type and range of the keys users change most (VALUE_RULES), named with the fix."""
    from omegaconf import OmegaConf

    for key, kind, low, high, nullable, what in VALUE_RULES:
        value = OmegaConf.select(cfg, key, default="<absent>", throw_on_missing=False)
        if value == "<absent>" or (value is None and nullable):
            continue
        ok_type = isinstance(value, int) if kind == INT else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type or (kind == NUMBER and value != value):
            raise UserError(f"{key}={value!r} is not {kind} ({what}); give it as {key}={_EXAMPLE[kind]}")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = (
                f"between {low} and {high}"
                if low is not None and high is not None
                else f">= {low}"
                if low is not None
                else f"<= {high}"
            )
            raise UserError(f"{key}={value!r} is out of range: {what} must be {bounds}")


def validate(cfg) -> None:
    """Validate against verl's own checks and config dataclasses; raise UserError naming the problem."""
    import warnings

    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    warnings.filterwarnings("ignore", message="Disabled critic as algorithm.adv_estimator")
    _check_values(cfg)  # before verl's checks, which would fail on a mistyped value with a TypeError
    try:
        # verl prints "[validate_config] All configuration checks passed" to stdout; `rlvr resolve`'s
        # stdout must stay pure YAML, and a failure is reported by rlvr itself.
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            validate_config(
                config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg)
            )
        omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
        omega_conf_to_dataclass(cfg.algorithm)
        _check_micro_batches(cfg)
        recipe_checks.check(cfg)  # sizes DAPO's overlong buffer; rejects combinations that cannot run
        from rlvr_verifiers.verl_bridge import BridgeConfig

        BridgeConfig.from_verl_config(cfg)  # reward.reward_kwargs.rlvr: reasoning tags, pool, routes
        if OmegaConf.select(cfg, "algorithm.filter_groups.enable", default=False) and not cfg.trainer.use_v1:
            raise UserError(
                "algorithm.filter_groups.enable=true (dynamic sampling) is honoured only by verl's v1 trainer, "
                "and this config runs the legacy one: set trainer.use_v1=true (algo=dapo does)"
            )
    except UserError:
        raise
    except (AssertionError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise UserError(f"the composed config does not validate against verl 0.9.1: {e}") from None
    except Exception as e:  # omegaconf errors (missing mandatory value, bad interpolation)
        raise UserError(f"the composed config does not validate: {type(e).__name__}: {e}") from None


def compose(overrides: list[str] | None = None, *, check: bool = True):
    """The resolved-path, validated verl config for a recipe plus overrides."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides or [])
    _check_group_choices(overrides)
    try:
        cfg = _hydra_compose(overrides)
    except (HydraException, OmegaConfBaseException) as e:
        message = str(e).strip() or f"{type(e.__cause__).__name__}: {e.__cause__}"
        error = _unknown_key_error(message, overrides)
        if error is not None:
            raise error from None
        raise UserError(f"cannot compose the recipe: {message.splitlines()[0]}") from None
    try:
        _finalise(cfg)
    except OmegaConfBaseException as e:
        raise UserError(f"cannot resolve rlvr paths: {e}") from None
    if check:
        validate(cfg)
    return cfg


def _override_key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def merge_overrides(stored: list[str], new: list[str]) -> list[str]:
    """The stored overrides with the new ones on top (a key given again takes the new value)."""
    replaced = {_override_key(o) for o in new}
    return [o for o in stored if _override_key(o) not in replaced] + list(new)


def to_yaml(cfg, resolve: bool = True) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(cfg, resolve=resolve)
