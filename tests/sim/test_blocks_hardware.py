"""Issue 42, deliverable 2: every hardware path decodes the default container (``ansforge compress`` with no
options: version 6, blocks layout, tans8x16), one core command per independent block, bit-exact against the
container's own decoder; the lanes and the subsystem decode a tensor's blocks side by side, one lane each,
tensors with several tables (row-shift widths, context plans) included.

Tiny synthetic checkpoints and small blocks (``block_pairs``) keep it cheap: one Verilator build (the one
core), the lanes and the subsystem in the Amaranth simulator, one START per tensor, with random
back-pressure. The lanes without runs (one table) are ``plain``'s test; the lanes and the subsystem with
runs are ``several_tables``'s (the subsystem without runs: tests/hdl/test_subsystem.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.model.coding.container import DEFAULT_CODEC, compress_checkpoint, open_container
from ansforge.model.errors import ConfigError
from ansforge.model.llm.checkpoint import write_safetensors
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.lanes import decode_container_lanes
from ansforge.sim.container_plan import decode_container_subsystem
from ansforge.sim.weights import HardwareWeights


def _checkpoint(path, tensors):
    write_safetensors(path, [(n, "F32", t.shape) for n, t in tensors], lambda i, n: [tensors[i][1]])
    return path


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    """A matrix cut into 4 blocks, a matrix whose rows have several row-shift widths (fp16-precision and
    coarser rows: the default container codes them with narrower tables), a bias of one width."""
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((40, 50)) * 0.02).astype(np.float32)
    b = (rng.standard_normal((30, 16)) * 0.1).astype(np.float32)
    b[:10] = b[:10].astype(np.float16).astype(np.float32)
    b[10:20] = np.round(b[10:20] * 64) / 64
    bias = (rng.standard_normal(70) * 0.1).astype(np.float16).astype(np.float32)
    d = tmp_path_factory.mktemp("blocks")
    m = _checkpoint(d / "m.safetensors", [("a", a), ("b", b), ("bias", bias)])
    compress_checkpoint(m, d / "m.ansf", block_pairs=600)     # the defaults but the block size
    return open_container(d / "m.ansf")


def test_the_default_container_decodes_in_the_core_one_command_per_block(shifted):
    """simulate --container / generate --via hardware: the tans8x16 core, each block one command (resume 0,
    its CRC checked in hardware), the row-shift widths as table sets switched by ``sel``, bit-exact."""
    c = shifted
    st = c.streams[0]
    assert c.version == 6 and st.spec.name == DEFAULT_CODEC == "tans8x16" and st.block_pairs == 600
    widths = {r["name"]: len({z for _, z in r.get("row_shifts", [])}) for r in c.tensors}
    assert widths == {"a": 0, "b": 5, "bias": 1}            # measured: the default layout shifts rows
    hw = HardwareWeights(c, "verilator")
    assert hw.table_sets == 8 and type(hw._core).__name__ == "TansXnDecoder" and hw._core.states == 16
    for name in ("a", "b", "bias"):
        got, _ = hw.tensor(name)
        assert np.array_equal(np.asarray(got).view(np.uint8).ravel(), c.read(name).view(np.uint8).ravel()), name
    assert hw.commands == len(st.blocks) == 6 and hw.pairs == 2000 + 480 + 70


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((20, 25)) * 0.02).astype(np.float32)
    bias = (rng.standard_normal(70) * 0.1).astype(np.float32)
    d = tmp_path_factory.mktemp("plain")
    m = _checkpoint(d / "p.safetensors", [("a", a), ("bias", bias)])
    compress_checkpoint(m, d / "p.ansf", pairs="bf16", block_pairs=150)
    return open_container(d / "p.ansf")


def test_lanes_decode_the_blocks_side_by_side(plain):
    """4 interleaved decoders on one memory port: matrix ``a``'s blocks of 150, 150, 150 and 50 pairs in one
    command (one lane each), under random output gaps; every lane's pairs the container's block's."""
    c = plain
    assert [blk.count for blk in c.streams[0].spans] == [150, 150, 150, 50, 70]
    runs = dict(decode_container_lanes(c, AmaranthEngine(), lanes=4, beat_words=4, latency=4, stall_prob=0.2))
    assert runs["a"].pairs == 500 and runs["bias"].pairs == 70
    assert runs["a"].pairs / runs["a"].cycles > 1.0          # side by side: more than one pair per clock


@pytest.fixture(scope="module")
def several_tables(tmp_path_factory):
    """A tensor of 3 row-shift widths (fp16, bf16 and fp32 rows: the default container shifts them, see
    ``shifted``) and a ``--context`` matrix (rows of two scales: a plan of 2 table sets switched every row,
    one mantissa bit folded into its codes), blocks of 512 pairs: one START per tensor."""
    rng = np.random.default_rng(1)
    b = (rng.standard_normal((30, 16)) * 0.1).astype(np.float32)
    b[:10] = b[:10].astype(np.float16).astype(np.float32)
    b[10:20] = (b[10:20].view(np.uint32) & 0xFFFF0000).view(np.float32)     # bf16 precision
    rng = np.random.default_rng(5)
    m = (rng.standard_normal((32, 32)) * np.where(np.arange(32) % 3 == 0, 0.5, 0.004)[:, None]).astype(np.float32)
    d = tmp_path_factory.mktemp("tables")
    src = _checkpoint(d / "t.safetensors", [("b", b), ("m", m)])
    compress_checkpoint(src, d / "t.ansf", block_pairs=512, context=True)
    return open_container(d / "t.ansf")


def test_lanes_and_subsystem_decode_row_shifts_and_context_plans(several_tables):
    """Every table of a tensor a table set of every lane, each block's runs read from memory beside its
    words: the lanes' pairs are the container's (row shifts restored), the subsystem's weights what
    ``decompress`` writes; the blocks side by side, the lanes under random output gaps. Both features in
    one container: the lanes one command per tensor, the subsystem one START for all three blocks (each
    lane loading its blocks' tables): one system each, in the Amaranth simulator."""
    c = several_tables
    st = c.streams[0]
    assert c.record("b")["row_shifts"] and "context" not in c.record("b")
    assert {z for _, z in c.record("b")["row_shifts"]} == {13, 16, 0}
    plan = c.record("m")["context"]
    assert plan["n_sets"] == 2 and plan["fold"] == 1 and plan["params"] == {"axis": "rows", "group": 1}
    assert [blk.count for blk in st.spans] == [480, 512, 512]
    lanes = dict(decode_container_lanes(c, AmaranthEngine(), lanes=2, beat_words=4, latency=4, stall_prob=0.2))
    assert lanes["b"].pairs == 480 and lanes["m"].pairs == 1024
    sub = decode_container_subsystem(c, AmaranthEngine(), lanes=2, latency=4, stall_prob=0.2)
    weights, cycles = sum(r.weights for _, r in sub), sum(r.cycles for _, r in sub)
    assert len(sub) == 1 and weights == 480 + 1024                  # one START: the three blocks dealt to two lanes
    # the blocks at 0.7 of the bound under the output gaps (their sets switching every row), and the
    # tables (three sets of b's, two of m's, each lane loading the ones it needs) at most four clocks a
    # beat: these tensors are 1,504 weights against 3,901 beats of tables
    r = sub[0][1]
    assert r.cycles <= r.weights / r.bound / 0.7 + 4 * r.table_beats, r


def test_subsystem_refuses_more_than_one_folded_bit_in_one_line():
    """The float stage restores one folded mantissa bit (its entry's one-bit ``hidden``); two are refused."""
    from ansforge.sim.subsystem import float_writes

    assert len(float_writes("fp32", 24, [254, 255], 1)) == 2
    with pytest.raises(ConfigError, match=r"^the tensor's context plan folds 2 mantissa bits into its codes; the "
                                          r"subsystem's float stage takes at most 1 \(compress_checkpoint's"):
        float_writes("fp32", 24, [508], 2)
