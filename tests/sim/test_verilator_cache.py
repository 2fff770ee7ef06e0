"""The Verilator engine's build cache: Verilator's run-time library is compiled once and linked by every
design built after it, and a damaged copy of it is rebuilt, not trusted."""

from __future__ import annotations

import numpy as np

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


def test_the_runtime_library_is_built_once_and_linked_by_later_designs(tmp_path):
    first = _job("tans-decoder", 1)
    exe = VerilatorEngine(cache_dir=tmp_path).build(first.core)
    kept = _runtime(tmp_path)
    assert set(kept) == {"verilated.o", "verilated_threads.o"}
    assert all((exe.parent / name).read_bytes() == data for name, data in kept.items())

    # another design (other Verilog, other harness): its objects are the kept ones, and it runs bit-exact
    second = _job("tans-encoder", 2)
    engine = VerilatorEngine(cache_dir=tmp_path)
    exe2 = engine.build(second.core)
    assert exe2 != exe
    assert all((exe2.parent / name).read_bytes() == data for name, data in kept.items())
    ok, errors = second.check(engine.run(second, stall_prob=0.2, seed=3))
    assert ok, errors
    # ... and it read verilated.h precompiled (kept beside them, one per flag set): g++'s dependency
    # lists of the first design name the headers verilated.h includes, the second's do not
    (pch,) = tmp_path.glob("pch-*")
    assert pch.name[4:] == runtime_key(tmp_path) and list((pch / "verilated_pch.h.gch").glob("*.gch"))
    deps = {exe: " ".join(d.read_text() for d in exe.parent.glob("*.d")) for exe in (exe, exe2)}
    assert "verilatedos.h" in deps[exe] and "verilatedos.h" not in deps[exe2]


def test_a_damaged_precompiled_header_is_not_trusted(tmp_path):
    VerilatorEngine(cache_dir=tmp_path).build(_job("tans-decoder", 1).core)
    VerilatorEngine(cache_dir=tmp_path).build(_job("tans-encoder", 2).core)
    (pch,) = tmp_path.glob("pch-*")
    for f in (pch / "verilated_pch.h.gch").glob("*.gch"):
        f.write_bytes(f.read_bytes()[:4096])
    job = _job("tans-decoder", 3)
    ok, errors = job.check(VerilatorEngine(cache_dir=tmp_path).run(job, stall_prob=0.2, seed=1))
    assert ok, errors


def test_a_damaged_runtime_library_is_rebuilt_and_replaced(tmp_path):
    VerilatorEngine(cache_dir=tmp_path).build(_job("tans-decoder", 1).core)
    (runtime,) = tmp_path.glob("runtime-*")
    (runtime / "verilated.o").write_bytes(b"not an object file")
    job = _job("tans-encoder", 2)
    engine = VerilatorEngine(cache_dir=tmp_path)
    ok, errors = job.check(engine.run(job))
    assert ok, errors
    assert _runtime(tmp_path)["verilated.o"][:4] == b"\x7fELF"
