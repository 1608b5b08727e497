"""rlvr_verifiers: verifiers, the sandbox, the Ray verifier pool, and the verl reward bridge.

Nothing here imports torch or verl except `verl_bridge`, so a verifier node runs on a slim CPU image.
"""
