"""rlvr_verifiers: verifiers, the sandbox, the Ray verifier pool, and the verl reward bridge.

Nothing here imports torch or verl except `verl_bridge`, so a verifier node runs on a slim CPU image.
"""

from rlvr_verifiers import rubrics  # noqa: E402, F401 - adds the built-in rubrics (r1, r1_zero) to the registry
