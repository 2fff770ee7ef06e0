"""Errors that ansforge reports to the user as one line, without a traceback.

Every message names the file, tensor, field or parameter at fault and the offending value, so that the
command line can print it verbatim (``ansforge: error: <message>``) and exit with status 2.
"""

from __future__ import annotations

__all__ = ["AnsforgeError", "CheckpointError", "ConfigError", "PairFormatError", "ToolError"]


class AnsforgeError(Exception):
    """Base class of every error that is the user's input, not a bug in ansforge."""


class CheckpointError(AnsforgeError):
    """A checkpoint file is missing, truncated, inconsistent or of an unsupported kind."""


class ConfigError(AnsforgeError, ValueError):
    """A parameter is out of range or parameters contradict each other."""


class PairFormatError(AnsforgeError, ValueError):
    """Coding pairs do not fit their format: a code outside the table, extra data wider than its field."""


class ToolError(RuntimeError):
    """An external tool (yosys, nextpnr, Verilator, a compiler) is missing or failed on input it should
    take. Not the user's input: the command line prints the one-line message and exits with status 1."""
