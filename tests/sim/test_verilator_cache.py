"""The Verilator engine's build cache: Verilator's run-time library is compiled once and linked by every
design built after it, and a damaged copy of it is rebuilt, not trusted."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ansforge.model.coding.codecs import parse_codec
from ansforge.sim.jobs import make_job
from ansforge.sim.verilator import VerilatorEngine


def _job(kind: str, seed: int):
    rng = np.random.default_rng(seed)
    counts = (rng.integers(1, 1000, size=20) ** 2).astype(np.int64)
    spec = parse_codec("tans8")
    ct, table = spec.tables(counts, 8)
    s, e = ct.to_symbols(rng.choice(20, size=500, p=counts / counts.sum()), rng.integers(0, 256, size=500))
    return make_job(kind, spec, table, s, e)


def _runtime(cache):
    (runtime,) = cache.glob("runtime-*")
    return {p.name: p.read_bytes() for p in runtime.iterdir()}


def runtime_key(cache):
    (runtime,) = cache.glob("runtime-*")
    return runtime.name[len("runtime-"):]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache in which two designs were built, one after the other (the run-time library and the
    precompiled header come with the first): ``(cache, first executable, second executable, the
    library's objects after the first build, the second design's job and engine)``. Each test that
    damages the cache works on a copy of it (:func:`_copy`), so that the builds are made once."""
    cache = tmp_path_factory.mktemp("verilator-cache")
    exe = VerilatorEngine(cache_dir=cache).build(_job("tans-decoder", 1).core)
    kept = _runtime(cache)
    second = _job("tans-encoder", 2)
    engine = VerilatorEngine(cache_dir=cache)
    exe2 = engine.build(second.core)
    return cache, exe, exe2, kept, second, engine


def _copy(cache, tmp_path):
    to = tmp_path / "cache"
    shutil.copytree(cache, to, symlinks=True)
    return to


def test_the_runtime_library_is_built_once_and_linked_by_later_designs(built):
    cache, exe, exe2, kept, second, engine = built
    assert set(kept) == {"verilated.o", "verilated_threads.o"}
    assert all((exe.parent / name).read_bytes() == data for name, data in kept.items())

    # another design (other Verilog, other harness): its objects are the kept ones, and it runs bit-exact
    assert exe2 != exe
    assert all((exe2.parent / name).read_bytes() == data for name, data in kept.items())
    ok, errors = second.check(engine.run(second, stall_prob=0.2, seed=3))
    assert ok, errors
    # ... and it read verilated.h precompiled (kept beside them, one per flag set): g++'s dependency
    # lists of the first design name the headers verilated.h includes, the second's do not
    (pch,) = cache.glob("pch-*")
    assert pch.name[4:] == runtime_key(cache) and list((pch / "verilated_pch.h.gch").glob("*.gch"))
    deps = {exe: " ".join(d.read_text() for d in exe.parent.glob("*.d")) for exe in (exe, exe2)}
    assert "verilatedos.h" in deps[exe] and "verilatedos.h" not in deps[exe2]


def test_a_damaged_precompiled_header_is_not_trusted(built, tmp_path):
    cache = _copy(built[0], tmp_path)
    (pch,) = cache.glob("pch-*")
    for f in (pch / "verilated_pch.h.gch").glob("*.gch"):
        f.write_bytes(f.read_bytes()[:4096])
    job = _job("tans-decoder", 3)                       # a design not in the cache: built after the damage
    before = set(cache.iterdir())
    ok, errors = job.check(VerilatorEngine(cache_dir=cache).run(job, stall_prob=0.2, seed=1))
    assert ok, errors
    assert len(set(cache.iterdir()) - before) == 1      # it was built, not found


def test_a_damaged_runtime_library_is_rebuilt_and_replaced(built, tmp_path):
    cache = _copy(built[0], tmp_path)
    (runtime,) = cache.glob("runtime-*")
    (runtime / "verilated.o").write_bytes(b"not an object file")
    job = _job("tans-encoder", 4)                       # a design not in the cache: it links the library
    engine = VerilatorEngine(cache_dir=cache)
    ok, errors = job.check(engine.run(job))
    assert ok, errors
    assert _runtime(cache)["verilated.o"][:4] == b"\x7fELF"
