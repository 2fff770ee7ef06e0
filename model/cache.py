"""Where ansforge keeps what it builds once and reads back: ``$ANSFORGE_CACHE``, by default
``~/.cache/ansforge`` (Verilator builds under ``verilator/``, yosys syntheses under ``yosys/``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """The cache folder (it may not exist yet)."""
    return Path(os.environ.get("ANSFORGE_CACHE") or Path.home() / ".cache" / "ansforge")
