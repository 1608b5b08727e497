"""Errors rlvr reports to the user as one clear line (never a traceback)."""


class UserError(Exception):
    """A problem with the user's input or environment: the message names the problem and the fix."""
