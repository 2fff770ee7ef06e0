"""Containers written before the interleaved hardware family still decode to the same values
(tests/data/pre42, written by main at a0dd501: one per codec family and container version)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from ansforge.model.coding.container import open_container

DATA = Path(__file__).resolve().parents[1] / "data" / "pre42"

#: file stem: (container version, codec of every coded stream, context plans on the matrices)
FIXTURES = {
    "tans8": (3, "tans8", False),
    "tans8x2": (5, "tans8x2", False),
    "tans8x16": (5, "tans8x16", False),
    "rans16": (3, "rans16", False),
    "rans16x5": (5, "rans16x5", False),
    "rans16x16": (5, "rans16x16", False),
    "rans24": (3, "rans24", False),
    "tans8_context": (4, "tans8", True),
    "rans16_context": (4, "rans16", True),
}


def _model() -> dict[str, np.ndarray]:
    """The tensors make_fixtures.py coded, rebuilt from its seed."""
    rng = np.random.default_rng(42)
    a = (rng.standard_normal((64, 96)) * 0.02).astype(np.float32)
    a[:, ::7] *= 4.0
    c = (rng.standard_normal((48, 64)) * 0.05).astype(np.float32)
    c[5::6] = c[5::6].astype(np.float16).astype(np.float32)
    b = ((rng.standard_normal(100) * 0.1).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return {"w.a": a, "w.c": c, "w.b": b, "ids": np.arange(6, dtype=np.int32)}


def _sha256_list() -> dict[str, str]:
    text = (DATA / "README.md").read_text()
    return {line.split()[1]: line.split()[0] for line in text.splitlines()
            if len(line.split()) == 2 and line.split()[1].endswith(".ansf")}


def test_every_fixture_is_the_file_that_was_written():
    sums = _sha256_list()
    assert set(sums) == {f"{n}.ansf" for n in FIXTURES}
    for name, digest in sums.items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("name", FIXTURES)
def test_a_container_written_before_issue_42_decodes_to_the_same_values(name):
    version, codec, context = FIXTURES[name]
    c = open_container(DATA / f"{name}.ansf")
    assert c.version == version
    plans = {t["name"]: bool(t.get("context")) for t in c.tensors}
    assert plans == {"w.a": context, "w.c": context, "w.b": False, "ids": False}
    assert {s.spec.name for s in c.streams} == {codec}
    want = _model()
    assert np.array_equal(c.read("w.a").view(np.float32), want["w.a"])
    assert np.array_equal(c.read("w.c").view(np.float32), want["w.c"])
    assert np.array_equal(c.read("w.b"), want["w.b"])
    assert np.array_equal(c.read("ids").view(np.int32), want["ids"])
    assert np.array_equal(c.decode_range("w.a", 1000, 3000).view(np.float32), want["w.a"].ravel()[1000:4000])
