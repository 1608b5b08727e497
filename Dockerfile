# syntax=docker/dockerfile:1
# rlvr images, one file, two targets:
#   docker build --target trainer  -t rlvr-trainer:0.1.0  .   # GPU nodes and the Ray head: verl + vLLM + rlvr
#   docker build --target verifier -t rlvr-verifier:0.1.0 .   # CPU verifier nodes: rlvr without torch or verl
# Pins: base images by tag here; pin them by digest at release (`docker buildx imagetools inspect
# IMAGE:TAG` prints it; write IMAGE:TAG@sha256:...). Python packages by exact version: verl's own
# `vllm` extra pins torch 2.11.0, vllm 0.24.0 and transformers 5.9.0, and its `flash-attn-cu130torch211`
# extra flash-attn 2.8.3, repeated below so a resolver that disagrees fails the build instead of
# picking something else. rlvr's own pins live in pyproject.toml (dependencies = the verifier side;
# the `train` extra = the trainer side; `aws` = the cluster launcher's AWS SDK for the head).
#
# ONE Python for every image: Ray refuses a node whose Python differs from the head's down to the
# patch level (ray._private.utils.check_version_info), so a verifier node on another Python never
# joins. Both targets take python3 from the same Ubuntu release (24.04 in both base images; Ubuntu keeps the
# patch level fixed for a release's lifetime) and each build checks it got exactly PYTHON_VERSION.
# tests/cluster/test_images.py reads both targets and fails when they could differ.
# Driver: CUDA 13.0 needs NVIDIA driver >= 580 on the GPU nodes (the image's CUDA does not bring one).

ARG PYTHON_VERSION=3.12.3
# CUDA 13.0: verl 0.9.1's kernels for torch 2.11 are built for cu130 (its flash-attn-cu130torch211
# extra). The devel flavour carries nvcc and headers, which vLLM's and FlashInfer's JIT kernels and the
# flash-attn build need.
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04
# The same Ubuntu release as CUDA_IMAGE's (the test checks they agree).
ARG BASE_IMAGE=ubuntu:24.04

# ---- the project's files, shared by both targets ------------------------------------------------
FROM ${BASE_IMAGE} AS source
WORKDIR /opt/rlvr
COPY pyproject.toml README.md ./
COPY verifiers/ verifiers/
COPY launch/ launch/
COPY cluster/ cluster/
COPY recipes/ recipes/

# ---- verifier: slim CPU image for the verifier pool (and the RayJob submitter) ------------------
FROM ${BASE_IMAGE} AS verifier
ARG PYTHON_VERSION
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH
# python3 from the same Ubuntu release as the trainer (one Python, see the top); wget for KubeRay's
# exec health probes (KubeRay 1.5 probes with wget); rsync for `ray up`'s docker runner, which syncs
# file_mounts into every container. Ubuntu images ship a user `ubuntu` with uid 1000: it makes way
# for `rlvr` (1000:1000, the uid cluster/k8s runs as).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates wget rsync \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && python -c "import sys; v='%d.%d.%d' % sys.version_info[:3]; sys.exit(0 if v == '${PYTHON_VERSION}' else 'Python ' + v + ' != PYTHON_VERSION ${PYTHON_VERSION}')" \
    && userdel --remove ubuntu \
    && groupadd --gid 1000 rlvr && useradd --uid 1000 --gid 1000 --create-home --shell /usr/sbin/nologin rlvr
COPY --from=source /opt/rlvr /opt/rlvr
# rlvr's `dependencies` are the verifier side only (ray, sympy, jsonschema, ...): no torch, no verl.
RUN pip install /opt/rlvr \
    && python -c "import importlib.util as u, sys; sys.exit(bool(u.find_spec('torch') or u.find_spec('verl')))"
USER 1000:1000
WORKDIR /home/rlvr

# ---- trainer: GPU image for verl's workers and the Ray head (the job's driver) -------------------
FROM ${CUDA_IMAGE} AS trainer
ARG PYTHON_VERSION
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH
# Ubuntu's packages are pinned by the base image's snapshot; pin their versions at release too.
# Same python3 as the verifier target (one Python); wget and rsync as there. openssh-client: the Ray
# autoscaler of cluster/ray-cluster.yaml runs in the head's container (this image) and sets up every
# worker node over ssh (then rsyncs file_mounts to it): without an ssh client no worker ever joins.
# build-essential: gcc/g++ for the flash-attn build below and for the JIT kernels of Triton, vLLM and
# FlashInfer, stated here rather than trusted to come with the CUDA devel base. libjemalloc2: what
# rlvr.cpu_allocator=jemalloc preloads into CPU-platform workers (the cpu-smoke overlay runs this image).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev git ca-certificates wget rsync \
       openssh-client build-essential libjemalloc2 \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && python -c "import sys; v='%d.%d.%d' % sys.version_info[:3]; sys.exit(0 if v == '${PYTHON_VERSION}' else 'Python ' + v + ' != PYTHON_VERSION ${PYTHON_VERSION}')" \
    && userdel --remove ubuntu \
    && groupadd --gid 1000 rlvr && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash rlvr
RUN pip install "verl[vllm]==0.9.1" "torch==2.11.0" "vllm==0.24.0" "transformers==5.9.0"
# flash-attn: verl's default attn_implementation (flash_attention_2) and its packed, padding-free
# batches (use_remove_padding) need it, and verl[vllm] does not bring it. Built from source against the
# torch above as verl's own stable vLLM Dockerfile does (no build isolation; the version of verl's
# flash-attn-cu130torch211 extra). FLASH_ATTENTION_FORCE_BUILD: flash-attn 2.8.3's setup.py otherwise
# first tries to download a prebuilt wheel, which it names for CUDA 12 under a CUDA 13 torch.
# Build cost, bounded here (the previous 16 jobs x 4 nvcc threads x 4 architectures needed ~140 GB):
# - FLASH_ATTN_CUDA_ARCHS: only the GPUs the trainer runs on, 80 (A100) and 90 (H100/H200); add 100
#   for B200/GB200 (each architecture repeats the whole compile). flash-attn passes its own -gencode
#   flags, so torch adds none (TORCH_CUDA_ARCH_LIST does not matter for this build).
# - Memory: flash-attn's setup.py reckons ~9 GB per job at 4 nvcc threads, so MAX_JOBS x NVCC_THREADS
#   x ~2.3 GB must fit the builder: the defaults, 4 jobs x 2 threads, peak near 20 GB. A large builder
#   (64 cores, 256 GB) can take --build-arg MAX_JOBS=16 --build-arg NVCC_THREADS=4.
# - Time (not measured here: no GPU builder): flash-attn's README gives 3-5 minutes on 64 cores with
#   every core busy; at the defaults' 8 compiler threads expect roughly 30-60 minutes for two
#   architectures (an estimate scaled from that figure). Build the trainer image once per release and
#   push it; nodes only pull.
ARG MAX_JOBS=4
ARG NVCC_THREADS=2
ARG FLASH_ATTN_CUDA_ARCHS="80;90"
RUN FLASH_ATTENTION_FORCE_BUILD=TRUE MAX_JOBS="${MAX_JOBS}" NVCC_THREADS="${NVCC_THREADS}" \
        FLASH_ATTN_CUDA_ARCHS="${FLASH_ATTN_CUDA_ARCHS}" \
        pip install --no-build-isolation "flash-attn==2.8.3" \
    && python -c "import flash_attn"
COPY --from=source /opt/rlvr /opt/rlvr
# Editable, so `rlvr` and a RayJob's `python -m rlvr_launch.jobs.driver` find the recipes in /opt/rlvr/recipes.
# `aws`: boto3 for the Ray autoscaler, which runs in the head's container (cluster/ray-cluster.yaml).
RUN pip install -e "/opt/rlvr[train,aws]"
USER 1000:1000
WORKDIR /home/rlvr
