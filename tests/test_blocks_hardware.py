"""Issue 42, deliverable 2: every hardware path decodes the default container (``ansforge compress`` with no
options: version 6, blocks layout, tans8x16), one core command per independent block, bit-exact against the
container's own decoder; the lanes and the subsystem decode a tensor's blocks side by side, one lane each.

Tiny synthetic checkpoints and small blocks (``block_pairs``) keep it cheap: one Verilator build, the rest in
the Amaranth simulator with random back-pressure."""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.model.coding.container import DEFAULT_CODEC, compress_checkpoint, open_container
from ansforge.model.errors import ConfigError
from ansforge.model.llm.checkpoint import write_safetensors
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.lanes import decode_container_lanes
from ansforge.sim.subsystem import decode_container_subsystem
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


def test_subsystem_decodes_the_default_container(plain):
    """The AXI subsystem (tans8x16 lanes by default) on the container's own blocks, two per START."""
    runs = dict(decode_container_subsystem(plain, AmaranthEngine(), lanes=2, latency=4, stall_prob=0.2))
    assert runs["a"].weights == 500 and runs["bias"].weights == 70


def test_lanes_and_subsystem_refuse_several_row_shift_widths_in_one_line(shifted):
    with pytest.raises(ConfigError, match=r"tensor 'b' is coded with row_shifts of 5 widths .* simulate --container"):
        decode_container_lanes(shifted, None, lanes=2)
    with pytest.raises(ConfigError, match=r"tensor 'b' is coded with row shifts, which the subsystem does not "):
        decode_container_subsystem(shifted, None, lanes=2, names=["b"])
