"""The cluster configs a first real GPU run goes through, checked for what breaks that run (nothing here
is applied to a real cluster): the VM launcher's token mount, runs volume, HOME and AMI; the KubeRay
manifests' placement of verl and the pool, data preparation onto the shared runs volume, checkpoint
retention against the volume's size, and the pool's size from the verifier slots.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "cluster" / "k8s"
LAUNCHER = ROOT / "cluster" / "ray-cluster.yaml"
RESOURCE = "rlvr_verifier"
# Parameters of the models the recipes name (their Hugging Face configs), for checkpoint sizes.
MODEL_PARAMS = {
    "Qwen/Qwen2.5-0.5B-Instruct": 0.49e9,
    "Qwen/Qwen2.5-1.5B-Instruct": 1.54e9,
    "Qwen/Qwen2.5-7B-Instruct": 7.62e9,
    "Qwen/Qwen3-4B": 4.02e9,
}
# A verl FSDP checkpoint with optimizer state: fp32 weights + Adam's two moments.
CHECKPOINT_BYTES_PER_PARAM = 12


# ---- the VM launcher (cluster/ray-cluster.yaml) -----------------------------------------------------


@pytest.fixture(scope="module")
def launcher() -> dict:
    return yaml.safe_load(LAUNCHER.read_text())


def _docker(launcher: dict, node_type: str) -> dict:
    """The docker config Ray uses for a node type: the top level updated by the type's own (autoscaler.py)."""
    merged = dict(launcher["docker"])
    merged.update(launcher["available_node_types"][node_type].get("docker", {}))
    return merged


def _run_options(launcher: dict, node_type: str) -> list[str]:
    docker = _docker(launcher, node_type)
    own = "head_run_options" if node_type == launcher["head_node_type"] else "worker_run_options"
    return [*docker.get("run_options", []), *docker.get(own, [])]


def _env(options: list[str]) -> dict[str, str | None]:
    env = {}
    for option in options:
        words = shlex.split(option)
        if words[0] == "-e":
            name, sep, value = words[1].partition("=")
            env[name] = value if sep else None
    return env


def _volumes(options: list[str]) -> dict[str, str]:
    out = {}
    for option in options:
        words = shlex.split(option)
        if words[0] == "-v":
            source, _, dest = words[1].partition(":")
            out[dest.split(":")[0]] = source
    return out


def _init_commands(launcher: dict, node_type: str) -> str:
    node = launcher["available_node_types"][node_type]
    return " ".join(node.get("initialization_commands", launcher.get("initialization_commands", [])))


def test_every_container_finds_the_auth_token_where_file_mounts_put_it(launcher):
    mounts = launcher["file_mounts"]
    for node_type in launcher["available_node_types"]:
        options = _run_options(launcher, node_type)
        env = _env(options)
        assert env["RAY_AUTH_MODE"] == "token", node_type
        # file_mounts keys are paths INSIDE the containers (Ray bind-mounts the synced copy there)
        assert env.get("RAY_AUTH_TOKEN_PATH") in mounts, node_type
        assert mounts[env["RAY_AUTH_TOKEN_PATH"]] == "~/.ray/auth_token"
        # a -v of a host path nothing creates makes Docker create an empty directory there
        for dest, source in _volumes(options).items():
            assert re.search(rf"mkdir -p {re.escape(source)}\b", _init_commands(launcher, node_type)), (
                f"{node_type}: -v {source}:{dest}, but nothing creates {source} on the host"
            )


def test_runs_live_on_shared_storage_on_head_and_trainers_only(launcher):
    for node_type in launcher["available_node_types"]:
        options = _run_options(launcher, node_type)
        env, volumes = _env(options), _volumes(options)
        if node_type == "verifier_cpu":
            assert "/runs" not in volumes and "RLVR_RUNS_DIR" not in env, "no runs on verifier nodes"
            assert _init_commands(launcher, node_type) == ""
            continue
        assert env["RLVR_RUNS_DIR"] == "/runs" and "/runs" in volumes, node_type
        assert env["RLVR_DATA_DIR"].startswith("/runs/"), node_type
        init = _init_commands(launcher, node_type)
        assert "mount -t nfs4" in init and volumes["/runs"] in init, f"{node_type}: /runs is not shared"


def test_verifier_nodes_advertise_no_cpus_and_a_home_that_exists(launcher):
    verifier = launcher["available_node_types"]["verifier_cpu"]
    assert verifier["resources"]["CPU"] == 0 and verifier["resources"][RESOURCE] > 0
    options = _run_options(launcher, "verifier_cpu")
    home = _env(options)["HOME"]
    tmpfs = [shlex.split(o)[1].split(":")[0] for o in options if o.startswith("--tmpfs")]
    assert "--read-only" in options
    assert home in tmpfs, f"HOME={home} is not a writable mount on a read-only root ({tmpfs})"


def test_every_node_type_names_an_ami_with_a_cuda_13_driver(launcher):
    for node_type, node in launcher["available_node_types"].items():
        image = node["node_config"].get("ImageId", "")
        assert image, f"{node_type}: no ImageId (Ray's default AMI carries CUDA 11.2)"
        assert "nvidia-driver" in image and "ubuntu-24.04" in image, image


def test_images_the_launcher_runs_come_from_the_dockerfile_targets(launcher):
    assert "rlvr-trainer" in launcher["docker"]["image"]
    assert "rlvr-verifier" in _docker(launcher, "verifier_cpu")["worker_image"]


# ---- KubeRay --------------------------------------------------------------------------------------------


def _kubectl() -> str | None:
    beside = Path(sys.executable).with_name("kubectl")
    return str(beside) if beside.is_file() else shutil.which("kubectl")


def render(overlay: str) -> list[dict]:
    kubectl = _kubectl()
    if kubectl:
        out = subprocess.run(
            [kubectl, "kustomize", str(K8S / "overlays" / overlay)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        return [r for r in yaml.safe_load_all(out) if r]
    import kustomize_lite  # the project's renderer where kubectl is not installed

    return kustomize_lite.render(K8S / "overlays" / overlay)


OVERLAYS = sorted(p.parent.name for p in (K8S / "overlays").glob("*/kustomization.yaml"))


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render(request.param)


def _one(resources: list[dict], kind: str) -> dict:
    (found,) = [r for r in resources if r["kind"] == kind]
    return found


def _groups(cluster: dict) -> dict[str, dict]:
    return {g["groupName"]: g for g in cluster["spec"]["workerGroupSpecs"]}


def _resources(group: dict) -> dict:
    raw = group["rayStartParams"].get("resources")
    return json.loads(json.loads(raw) if raw and raw.startswith('"') else raw or "{}")


def _container_env(template: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in template["spec"]["containers"][0].get("env", [])}


def _mounts(template: dict) -> dict[str, str]:
    """mountPath -> volume name."""
    return {m["mountPath"]: m["name"] for m in template["spec"]["containers"][0].get("volumeMounts", [])}


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_verl_cannot_land_on_verifier_pods(rendered):
    """verl spreads its agent/reward-loop workers over every node with CPUs; verifier pods have none for Ray."""
    name, resources = rendered
    groups = _groups(_one(resources, "RayCluster"))
    assert groups["verifier"]["rayStartParams"]["num-cpus"] == "0", name
    assert _resources(groups["verifier"])[RESOURCE] > 0
    assert groups["trainer"]["rayStartParams"].get("num-cpus") != "0", name


def test_verifier_home_is_a_writable_mount(rendered):
    name, resources = rendered
    template = _groups(_one(resources, "RayCluster"))["verifier"]["template"]
    home = _container_env(template)["HOME"]
    assert home in _mounts(template), f"{name}: HOME={home} on a read-only root"


def test_the_job_prepares_its_data_onto_the_runs_volume_the_trainers_read(rendered):
    name, resources = rendered
    cluster = _one(resources, "RayCluster")
    head = cluster["spec"]["headGroupSpec"]["template"]
    trainer = _groups(cluster)["trainer"]["template"]
    runs_claim = {v["name"]: v for v in head["spec"]["volumes"]}
    for template in (head, trainer):
        data_dir = _container_env(template)["RLVR_DATA_DIR"]
        mounted = [p for p in _mounts(template) if data_dir.startswith(p.rstrip("/") + "/")]
        assert mounted, f"{name}: RLVR_DATA_DIR={data_dir} is on no volume"
        volume = _mounts(template)[mounted[0]]
        claims = {v["name"]: v for v in template["spec"]["volumes"]}
        assert claims[volume]["persistentVolumeClaim"]["claimName"] == "rlvr-runs"
    assert runs_claim
    entrypoint = shlex.split(_one(resources, "RayJob")["spec"]["entrypoint"])
    assert "--prepare-data" in entrypoint, f"{name}: the job never prepares its data"


def test_checkpoints_kept_fit_the_runs_volume_and_the_pool_fills_the_verifier_slots(rendered, monkeypatch):
    from rlvr_launch.recipes.compose import compose
    from rlvr_launch.runs import placement

    name, resources = rendered
    cluster = _one(resources, "RayCluster")
    job = _one(resources, "RayJob")
    head_env = _container_env(cluster["spec"]["headGroupSpec"]["template"])
    monkeypatch.setenv("RLVR_DATA_DIR", head_env["RLVR_DATA_DIR"])
    overrides = [a for a in shlex.split(job["spec"]["entrypoint"]) if "=" in a and not a.startswith("--")]
    cfg = compose(overrides)
    assert cfg.data.train_files.startswith(head_env["RLVR_DATA_DIR"] + "/"), name

    # the pool: one actor per verifier slot the cluster provisions
    groups = _groups(cluster)
    nodes = [{"CPU": 0.0}] + [dict(_resources(groups["verifier"]), CPU=0.0)] * groups["verifier"]["replicas"]
    planned = placement.plan(cfg, nodes)
    assert planned.num_actors == _resources(groups["verifier"])[RESOURCE] * groups["verifier"]["replicas"]

    if str(cfg.trainer.device) != "cuda":
        return
    keep = cfg.trainer.max_actor_ckpt_to_keep
    assert keep and keep > 0, f"{name}: checkpoints are never pruned"
    claim = _one(resources, "PersistentVolumeClaim")["spec"]["resources"]["requests"]["storage"]
    size = float(claim.removesuffix("Gi")) * 2**30
    need = keep * CHECKPOINT_BYTES_PER_PARAM * MODEL_PARAMS[str(cfg.actor_rollout_ref.model.path)]
    assert size >= need + 20 * 2**30, f"{name}: {keep} checkpoints need {need / 2**30:.0f}Gi + data; {claim}"
