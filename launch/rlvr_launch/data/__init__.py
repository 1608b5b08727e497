"""Data: `rlvr data` (convert) and the converters, one module per dataset (converters/NAME.py).

Imports only rlvr_launch.errors and rlvr_verifiers.
"""
