"""Context tables: the golden model, the MiniLM criterion, and the extended cores (both engines)."""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.model.llm.checkpoint import open_checkpoint, select_tensors
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.context import ContextPlan, decode_context, encode_context
from ansforge.model.errors import ConfigError
from ansforge.model.dtypes.pairs import BF16, convert, fp32_to_bf16_rne
from ansforge.model.coding.probability import ideal_bits
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.context import context_core, context_matrix_job
from ansforge.sim.verilator import VerilatorEngine

#: The paper's per-matrix ideal on MiniLM (Table 1 "Ideal", BENCHMARKS.md).
MINILM_IDEAL = 10.6140


def _matrices(path):
    ck = open_checkpoint(path)
    out = []
    for info in select_tensors(ck):
        rec = ck.tensor(info.name)
        bits, _ = convert(rec.array, rec.dtype, "bf16")
        out.append((info.name, bits.reshape(rec.shape)))
    return out


def _ideal_per_weight(mats) -> float:
    bits = n = 0
    for _, m in mats:
        p = BF16.split(m)
        bits += ideal_bits(p.counts()) + p.extra_bits_total()
        n += m.size
    return bits / n


@pytest.fixture(scope="module")
def stories_mats(stories):
    return _matrices(stories)


@pytest.fixture(scope="module")
def stories_coded(stories_mats):
    return {c: encode_context(parse_codec(c), stories_mats, BF16, fold=1) for c in ("tans8", "rans16")}


def test_minilm_context_tables_beat_the_papers_ideal_by_half_a_percent(minilm):
    """The whole of MiniLM coded (its size is the claim). Decoding it back is the same decode_context
    that test_stories_context_tables_round_trip_and_report_their_gain runs on every stories260K matrix
    for both codecs, and compress --context's MiniLM container is decoded and checked in
    tests/model/test_container_context.py (test_minilm_context_figure_from_the_file)."""
    mats = _matrices(minilm)
    assert abs(_ideal_per_weight(mats) - MINILM_IDEAL) < 5e-4
    coded = encode_context(parse_codec("rans16"), mats, BF16, fold=1)
    c = coded.cost
    assert c.total_bits == c.stream_bits + c.code_table_bits + c.frequency_bits + c.select_bits + c.header_bits
    assert c.stream_bits == coded.words.size * 32 and c.select_bits > 0 and c.frequency_bits > 0
    assert c.bits_per_weight <= MINILM_IDEAL * 0.995, c.bits_per_weight


@pytest.mark.parametrize("codec", ["tans8", "rans16"])
def test_stories_context_tables_round_trip_and_report_their_gain(codec, stories_mats, stories_coded):
    coded = stories_coded[codec]
    assert all(np.array_equal(b, m) for b, (_, m) in zip(decode_context(coded), stories_mats))
    # (coded by the compiled coder: the golden coder's words)
    golden = coded.spec.coder().encode(coded.tables, coded.runs, coded.symbols, coded.extras)
    assert np.array_equal(coded.words, golden.words)
    single = encode_context(parse_codec(codec), stories_mats, BF16, single=True)
    # both sides charged: one table per matrix vs K sets, selects and the folded code table
    assert coded.cost.bits_per_weight < single.cost.bits_per_weight
    assert max(p.n_sets for p in coded.plans) > 1


def test_plans_cover_their_matrix_and_are_checked():
    plan = ContextPlan("cols", 4, 2, (0, 1, 1))
    runs = plan.runs((3, 10))
    assert sum(r.count for r in runs) == 30 and [r.count for r in runs[:3]] == [4, 6, 4]
    with pytest.raises(ConfigError, match="n_sets"):
        ContextPlan("rows", 1, 17, (0,))
    with pytest.raises(ConfigError, match="axis"):
        ContextPlan("diagonal", 1, 1, (0,))
    with pytest.raises(ConfigError, match="3 selects for 2 groups"):
        ContextPlan("rows", 2, 2, (0, 1, 0)).runs((4, 4))


@pytest.mark.parametrize("kind", ["tans-decoder", "tans-encoder", "rans-decoder", "rans-encoder"])
def test_extended_cores_are_bit_exact_on_stories_with_context_tables(kind, stories_coded):
    coded = stories_coded["tans8" if kind.startswith("tans") else "rans16"]
    core = context_core(kind, coded)
    assert core.table_sets >= max(p.n_sets for p in coded.plans)
    engine = VerilatorEngine()
    switches = pairs = cycles = 0
    for i in range(len(coded.names)):
        job = context_matrix_job(kind, coded, i, core)
        r = engine.run(job, stall_prob=0.1 if i % 5 == 0 else 0.0, seed=i)
        ok, errs = job.check(r)
        assert ok, (coded.names[i], errs)
        switches += len(coded.plans[i].runs(coded.shapes[i])) - 1
        if i % 5:
            pairs += job.pairs
            cycles += r.cycles
    assert switches > 100
    # one pair per clock through every switch: only each command's start-up and flush cycles are extra
    assert cycles <= pairs + 12 * len(coded.names)


def test_table_switches_under_back_pressure_amaranth():
    """12 rows of 64 weights (768 pairs, a table switch at every row's start at most) through each
    context core in the Python simulator, random gaps on both sides; whole models go through Verilator
    above."""
    rng = np.random.default_rng(5)
    scale = np.float32(2.0) ** (np.arange(12) % 4 * 4)[:, None].astype(np.float32)
    w = (rng.standard_normal((12, 64)).astype(np.float32) * scale * np.float32(1e-3))
    mats = [("rows-of-4-scales", fp32_to_bf16_rne(w))]
    for codec in ("tans8", "rans16"):
        coded = encode_context(parse_codec(codec), mats, BF16, groups=(1,), axes=("rows",), max_sets=4)
        assert coded.plans[0].n_sets >= 2
        for kind in ("decoder", "encoder"):
            name = f"{codec[:4]}-{kind}"
            core = context_core(name, coded)
            job = context_matrix_job(name, coded, 0, core)
            ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.3, seed=2))
            assert ok, (name, errs)


def test_cores_refuse_table_sets_without_programmability():
    from ansforge.hdl.rans import RansDecoder
    from ansforge.hdl.tans import TansXnEncoder

    with pytest.raises(ValueError, match="table_sets=4 needs programmable=True"):
        TansXnEncoder(table=None, programmable=False, table_sets=4)
    with pytest.raises(ValueError, match="table_sets must be between 1 and 16"):
        RansDecoder(programmable=True, table_sets=17)


# --- the context floor (``ansforge context --floor``) ----------------------------------------------------


def test_adaptive_bits_are_the_sequential_krichevsky_trofimov_code_length():
    """The closed form equals the code length an adaptive coder actually spends, symbol by symbol."""
    from math import log2

    from ansforge.analysis.context import adaptive_bits

    rng = np.random.default_rng(7)
    K = 5
    codes = rng.choice(K, size=(6, 9), p=[0.5, 0.2, 0.15, 0.1, 0.05])
    ctx = (np.arange(6)[:, None] // 3) * 2 + (np.arange(9)[None, :] % 2)
    counts = np.zeros((4, K))
    seq = 0.0
    for c, x in zip(ctx.ravel(), codes.ravel()):
        seq -= log2((counts[c, x] + 0.5) / (counts[c].sum() + K / 2))
        counts[c, x] += 1
    assert adaptive_bits(codes, ctx, K) == pytest.approx(seq, rel=1e-12)


def test_the_floor_of_one_table_is_the_papers_ideal_and_never_above_the_adaptive_coder(stories, stories_mats):
    from ansforge.analysis.context import context_floor

    floor = context_floor(stories, folds=(0, 1))
    one = next(r for r in floor.rows if r.family == "matrix" and r.fold == 0 and not r.sign)
    # Independently: Table 1's ideal (order-0 entropy of each matrix's exponents plus its raw bits).
    assert one.bits / floor.weights == pytest.approx(_ideal_per_weight(stories_mats), abs=1e-9)
    # Gibbs: no coder, adaptive or static, beats each context's empirical entropy.
    assert all(r.bits <= r.adaptive_bits for r in floor.rows)
    # More contexts never raise the floor (the one-table partition is coarser than every other).
    for r in floor.rows:
        base = next(b for b in floor.rows if b.family == "matrix" and b.fold == r.fold and b.sign == r.sign)
        assert r.bits <= base.bits + 1e-6


def test_minilm_goal_is_below_the_floor_of_every_layout_a_core_accepts(minilm):
    """Issue 23's 10.45 bits/weight: row x column contexts (16 per matrix, the cores' most), sign and up
    to two mantissa bits in the code (at most 256 symbols, the cores' most), no table charged yet."""
    from ansforge.analysis.context import context_floor

    floor = context_floor(minilm, folds=(0, 1, 2), families=("rows x cols",))
    assert all(r.symbols <= 256 for r in floor.rows)
    assert 10.45 < floor.best().bits / floor.weights < 10.47
    assert min(r.adaptive_bits for r in floor.rows) / floor.weights < 10.49   # beats the container's 10.51


def test_context_floor_cli_prints_the_table_and_refuses_a_bad_fold(stories, tmp_path):
    import json
    import subprocess
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", "ansforge", "context", "--model", str(stories), "--floor", *args],
                              capture_output=True, text=True, timeout=300)

    ok = run("--folds", "0,1", "--max-sets", "4", "--json", tmp_path / "f.json")
    assert ok.returncode == 0, ok.stderr
    assert "lowest floor" in ok.stdout and "rows x cols" in ok.stdout
    rows = json.loads((tmp_path / "f.json").read_text())["rows"]
    assert {r["family"] for r in rows} == {"matrix", "rows", "cols", "rows x cols"} and len(rows) == 16
    bad = run("--folds", "0,9")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "folds" in bad.stderr and not bad.stdout


def test_context_verb_defaults_to_the_default_format(stories, tmp_path, capsys):
    """`ansforge context` codes with the default format (tans8x16: table sets with interleaved states)
    when no codec is named, its tables built as compress --context builds them, every stored spread
    charged; one stories260K matrix (the whole model is the stories_coded fixture's, per codec)."""
    import json

    from ansforge.cli import main
    from ansforge.model.coding.registry import DEFAULT_FORMAT

    out = tmp_path / "c.json"
    assert main(["context", "--model", str(stories), "--include", "layers.0.feed_forward.w1.weight",
                 "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["codec"] == parse_codec(DEFAULT_FORMAT).label() == "tANS 8 bits x16" and doc["weights"] == 11008
    rows = {r["method"]: r for r in doc["rows"]}
    assert len(rows) == 3 and all(r["frequency_bits"] >= 8 * 2 for r in rows.values())
    paper, folded = doc["rows"][0], doc["rows"][-1]
    assert folded["bits_per_weight"] < paper["bits_per_weight"]
