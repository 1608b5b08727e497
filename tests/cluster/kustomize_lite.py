"""Render rlvr's kustomize overlays in Python, for tests on machines without kustomize/kubectl.

Covers exactly the subset cluster/k8s uses: `resources` (files and directories), `components`
(kind: Component), inline JSON 6902 `patches` (add/remove/replace) selected by kind and name, and the
`images` transformer (newName/newTag on every `containers`/`initContainers` image, as kustomize does
for custom resources too). Anything else in a kustomization file is an error here, so the manifests
cannot silently outgrow what the tests render. test_k8s_manifests.py checks the output equals
`kubectl kustomize` where that exists.

Order follows kustomize: accumulate resources, then each component's resources and transformations,
then the kustomization's own patches, then images.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "components", "patches", "images"}


def _load_docs(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _kustomization(directory: Path) -> dict:
    data = yaml.safe_load((directory / "kustomization.yaml").read_text()) or {}
    unknown = set(data) - SUPPORTED_KEYS
    if unknown:
        raise ValueError(
            f"{directory}/kustomization.yaml uses {sorted(unknown)}, which kustomize_lite does not render"
        )
    return data


def render(directory: Path) -> list[dict]:
    """The resources `kustomize build directory` would print (as Python objects, in order)."""
    return _build(Path(directory), accumulated=None)


def _build(directory: Path, accumulated: list[dict] | None) -> list[dict]:
    spec = _kustomization(directory)
    resources = [] if accumulated is None else accumulated
    for entry in spec.get("resources", []):
        path = (directory / entry).resolve()
        resources.extend(_build(path, None) if path.is_dir() else _load_docs(path))
    for entry in spec.get("components", []):
        resources = _build((directory / entry).resolve(), resources)
    for patch in spec.get("patches", []):
        _apply_patch(resources, patch, directory)
    for image in spec.get("images", []):
        for resource in resources:
            _set_images(resource, image)
    return resources


def _matches(resource: dict, target: dict) -> bool:
    group, _, version = resource.get("apiVersion", "").rpartition("/")
    checks = {
        "kind": resource.get("kind"),
        "name": resource.get("metadata", {}).get("name"),
        "group": group,
        "version": version,
    }
    return all(checks[key] == value for key, value in target.items())


def _apply_patch(resources: list[dict], patch: dict, directory: Path) -> None:
    if set(patch) - {"target", "patch"}:
        raise ValueError(
            f"{directory}: only inline JSON 6902 patches with a target are rendered here: {patch}"
        )
    operations = yaml.safe_load(patch["patch"])
    hits = [r for r in resources if _matches(r, patch["target"])]
    if not hits:
        raise ValueError(f"{directory}: patch target {patch['target']} matches no resource")
    for resource in hits:
        for op in operations:
            _json_patch(resource, op)


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.lstrip("/").split("/")]


def _json_patch(doc: dict, op: dict) -> None:
    *parents, last = _pointer(op["path"])
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    kind = op["op"]
    if isinstance(node, list):
        index = len(node) if last == "-" else int(last)
        if kind == "add":
            node.insert(index, copy.deepcopy(op["value"]))
        elif kind == "replace":
            node[index] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del node[index]
        else:
            raise ValueError(f"unsupported op {kind}")
        return
    if kind in ("replace", "remove") and last not in node:
        raise KeyError(f"{op['path']} does not exist (JSON patch {kind} needs it)")
    if kind in ("add", "replace"):
        node[last] = copy.deepcopy(op["value"])
    elif kind == "remove":
        del node[last]
    else:
        raise ValueError(f"unsupported op {kind}")


def _split_image(image: str) -> tuple[str, str]:
    name, at, digest = image.partition("@")
    if at:
        return name, "@" + digest
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        return name[:colon], ":" + name[colon + 1 :]
    return name, ""


def _set_images(node, image: dict) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                for container in value:
                    if isinstance(container, dict) and "image" in container:
                        name, tag = _split_image(container["image"])
                        if name == image["name"]:
                            new_tag = ":" + image["newTag"] if "newTag" in image else tag
                            container["image"] = image.get("newName", name) + new_tag
            _set_images(value, image)
    elif isinstance(node, list):
        for item in node:
            _set_images(item, image)
