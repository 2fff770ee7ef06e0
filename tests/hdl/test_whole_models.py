"""Whole models through every core in Verilator: one suite over the core registry (issue 44 item 5: one
parametrized suite instead of a whole-model test per variant).

Each row of :data:`RUNS` puts every matrix of a real checkpoint through one programmable core, one
command per matrix (:func:`~ansforge.sim.model_run.simulate_matrices`: its table written, its pairs or
words in, the outputs checked against the golden model's), no gaps: bit-exact, and the clocks each
command costs beyond one per pair held to what the design reaches. The rows are the registry's base builds at
the default container format (``tans8x16``, ``rans16x16``) on all of MiniLM (22.7 M pairs, escape
fields wider than a word) and on stories260K (36 matrices of 7,204 pairs on average, where each command's
prologue and flush weigh most), and the paper's one-state codecs (``tans8``, ``rans16``, and ``rans24``,
whose words are also constriction's) on stories260K. :func:`test_whole_model_under_back_pressure` runs
stories260K again through the rANS cores with random gaps on every stream.

The ``-x2``/``-x5`` builds are the same classes at other ``N``; they are bit-exact under back-pressure
in the Amaranth simulator (``tests/sim/test_contracts.py``, ``tests/hdl/test_tans_xn.py``,
``tests/hdl/test_rans_xn_decoder.py``) rather than here, each Verilator build being a minute of g++.
"""

from __future__ import annotations

import pytest

from ansforge.hdl.cores import REGISTRY
from ansforge.sim.model_run import model_pairs, simulate_matrices

#: ``(core, codec, model, overhead, floor)``: every command (a matrix) costs at most its pairs plus
#: ``overhead`` clocks (``None``: not a constant, below), and the whole model runs at ``floor`` pairs per
#: clock or more. Measured: the interleaved tANS cores 20 to 22 clocks a command (N + 4 to N + 6: the
#: head's states, the pipeline and the flush; the decoder's first word a clock after its command;
#: 0.99996 pairs per clock over MiniLM, 0.99701 over stories260K); the interleaved rANS encoder 18 or 19 (its flush's 16 port words and two, one more for
#: an odd word count; 0.99997 and 0.99742); the interleaved rANS decoder 35 to 50 on stories260K and up
#: to 8,662 on MiniLM, because its symbol search steps where a bucket meets several symbols (0.99926 and
#: 0.99460); the one-state cores 3 to 8 (the tANS decoder 0.99889 over stories260K, its first word a
#: clock after each command).
RUNS = [
    ("tans-decoder", "tans8x16", "MiniLM", 22, 0.9999),
    ("tans-encoder", "tans8x16", "MiniLM", 21, 0.9999),
    ("rans-decoder", "rans16x16", "MiniLM", None, 0.999),
    ("rans-encoder", "rans16x16", "MiniLM", 19, 0.9999),
    ("tans-decoder", "tans8x16", "stories260K", 22, 0.997),
    ("tans-encoder", "tans8x16", "stories260K", 21, 0.997),
    ("rans-decoder", "rans16x16", "stories260K", None, 0.994),
    ("rans-encoder", "rans16x16", "stories260K", 19, 0.997),
    ("tans-decoder", "tans8", "stories260K", 8, 0.9988),
    ("tans-encoder", "tans8", "stories260K", 5, 0.999),
    ("rans-decoder", "rans16", "stories260K", 5, 0.999),
    ("rans-encoder", "rans16", "stories260K", 4, 0.999),
    ("rans-decoder", "rans24", "stories260K", 5, 0.999),
    ("rans-encoder", "rans24", "stories260K", 4, 0.999),
]
SIZES = {"stories260K": (36, 259_328), "MiniLM": (40, 22_682_112)}


@pytest.fixture(scope="module")
def pairs(stories, minilm):
    """``pairs(model, codec)``: every matrix of the model as pairs of ``codec``, each computed once."""
    paths, made = {"stories260K": stories, "MiniLM": minilm}, {}

    def get(model, codec):
        if (model, codec) not in made:
            made[model, codec] = model_pairs(str(paths[model]), codec)
        return made[model, codec]
    return get


def test_every_base_build_runs_a_whole_model_at_the_default_format():
    """A base build added to the registry gets its rows here."""
    assert {(row.name, row.default_codec) for row in REGISTRY if row.base == row.name} \
        <= {(core, codec) for core, codec, model, *_ in RUNS if model == "MiniLM"}


@pytest.mark.parametrize("core,codec,model,overhead,floor", RUNS, ids=lambda v: v if isinstance(v, str) else None)
def test_whole_model_at_one_pair_per_clock(core, codec, model, overhead, floor, pairs):
    rep = simulate_matrices(core, codec, pairs(model, codec), engine="verilator")
    assert rep.bit_exact, rep.errors[:3]
    assert (rep.matrices, rep.pairs) == SIZES[model]
    if codec == "rans24":
        assert rep.constriction_exact
    if overhead is not None:
        worst = max(rep.per_matrix, key=lambda row: row["cycles"] - row["pairs"])
        assert worst["cycles"] - worst["pairs"] <= overhead, worst
    assert rep.pairs / rep.cycles >= floor, (rep.pairs, rep.cycles)


@pytest.mark.parametrize("core,codec", sorted({(core, codec) for core, codec, model, *_ in RUNS
                                               if model == "stories260K" and codec in ("rans16", "rans16x16")}))
def test_whole_model_under_back_pressure(core, codec, pairs):
    """All of stories260K with random valid and ready gaps (p = 0.3) on every stream through the rANS
    cores: bit-exact (the same Verilator build as the run above). The tANS cores take the same gaps on a
    long stream of their own in Verilator (``tests/hdl/test_tans_xn.py``'s long-stream round trip), and
    every core under them in the contract suite."""
    rep = simulate_matrices(core, codec, pairs("stories260K", codec), engine="verilator", stall_prob=0.3, seed=2)
    assert rep.bit_exact, rep.errors[:3]
    assert rep.pairs == SIZES["stories260K"][1]
