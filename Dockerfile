# syntax=docker/dockerfile:1
# rlvr images, one file, two targets:
#   docker build --target trainer  -t rlvr-trainer:0.1.0  .   # GPU nodes and the Ray head: verl + vLLM + rlvr
#   docker build --target verifier -t rlvr-verifier:0.1.0 .   # CPU verifier nodes: rlvr without torch or verl
# Pins: base images by tag here; pin them by digest at release (`docker buildx imagetools inspect
# IMAGE:TAG` prints it; write IMAGE:TAG@sha256:...). Python packages by exact version: verl's own
# `vllm` extra pins torch 2.11.0, vllm 0.24.0 and transformers 5.9.0, repeated below so a resolver
# that disagrees fails the build instead of picking something else. rlvr's own pins live in
# pyproject.toml (dependencies = the verifier side; the `train` extra = the trainer side).

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm
# CUDA 13.0: verl 0.9.1's kernels for torch 2.11 are built for cu130 (its flash-attn-cu130torch211
# extra). The devel flavour carries nvcc and headers, which vLLM's and FlashInfer's JIT kernels need.
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04

# ---- the project's files, shared by both targets ------------------------------------------------
FROM ${PYTHON_IMAGE} AS source
WORKDIR /opt/rlvr
COPY pyproject.toml README.md ./
COPY verifiers/ verifiers/
COPY launch/ launch/
COPY cluster/ cluster/
COPY recipes/ recipes/

# ---- verifier: slim CPU image for the verifier pool (and the RayJob submitter) ------------------
FROM ${PYTHON_IMAGE} AS verifier
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --gid 1000 rlvr && useradd --uid 1000 --gid 1000 --create-home --shell /usr/sbin/nologin rlvr
COPY --from=source /opt/rlvr /opt/rlvr
# rlvr's `dependencies` are the verifier side only (ray, sympy, jsonschema, ...): no torch, no verl.
RUN pip install /opt/rlvr \
    && python -c "import importlib.util as u, sys; sys.exit(bool(u.find_spec('torch') or u.find_spec('verl')))"
USER 1000:1000
WORKDIR /home/rlvr

# ---- trainer: GPU image for verl's workers and the Ray head (the job's driver) -------------------
FROM ${CUDA_IMAGE} AS trainer
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH
# Ubuntu's packages are pinned by the base image's snapshot; pin their versions at release too.
# Ubuntu 24.04 images ship a user `ubuntu` with uid 1000: it makes way for `rlvr` (1000:1000, the uid
# cluster/k8s runs as).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && userdel --remove ubuntu \
    && groupadd --gid 1000 rlvr && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash rlvr
RUN pip install "verl[vllm]==0.9.1" "torch==2.11.0" "vllm==0.24.0" "transformers==5.9.0"
COPY --from=source /opt/rlvr /opt/rlvr
# Editable, so `rlvr` and a RayJob's `python -m rlvr_launch.job` find the recipes in /opt/rlvr/recipes.
RUN pip install -e "/opt/rlvr[train]"
USER 1000:1000
WORKDIR /home/rlvr
