"""Scoring: `rlvr score`, a JSONL file through the verifier pool (or its local path).

Imports only rlvr_launch.errors and rlvr_verifiers; generation scores its responses through it.
"""
