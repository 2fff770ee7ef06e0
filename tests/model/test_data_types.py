"""The coding-pair data types of §3: exact round trips, NumPy references, Table 2, invalid definitions."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansforge.model.dtypes.custom_float import MINIFLOATS, MinifloatFormat
from ansforge.model.errors import AnsforgeError, ConfigError
from ansforge.model.dtypes.integers import DirectCode, NzMsbCode, linear_quantize
from ansforge.model.dtypes.layout import CodeLayout
from ansforge.model.dtypes.posit import POSITS, PositFormat
from ansforge.model.dtypes.saliency import join_salient, salient_mask, split_salient
from ansforge.model.dtypes.ternary import (GroupMaskCode, HybridCode, RunLengthCode, absmean_ternarize, dense_matvec,
                                    zero_skipping_matvec)


def _nearest_even_reference(fmt: MinifloatFormat, x: np.ndarray) -> np.ndarray:
    """Independent RNE: search the sorted table of every finite value; ties go to the even pattern."""
    pats = np.arange(1 << (fmt.total_bits - 1), dtype=np.int64)          # non-negative patterns
    vals = fmt.to_float64(pats)
    keep = np.isfinite(vals)
    sv, sp = vals[keep], pats[keep]
    a = np.abs(x.astype(np.float64))
    i = np.clip(np.searchsorted(sv, a), 1, sv.size - 1)
    lo, hi = sv[i - 1], sv[i]
    up = (a - lo > hi - a) | ((a - lo == hi - a) & (sp[i] % 2 == 0))
    out = np.where(up, sp[i], sp[i - 1])
    # Beyond the largest finite value: IEEE rounding decides between max and "infinity" at the
    # half-way point max + ulp/2; the format's overflow rule says what "infinity" is.
    ulp = sv[-1] - sv[-2]
    over = (a >= sv[-1] + ulp / 2) if fmt.specials == "ieee" or not fmt.saturate else (a > sv[-1])
    if fmt.saturate:
        out = np.where(a > sv[-1], sp[-1], out)
    elif fmt.specials == "ieee":
        out = np.where(over, fmt._inf_bits(), out)
    out = np.where(a >= sv[-1], np.where(over & ~fmt.saturate, out, sp[-1]) if fmt.saturate else out, out)
    return (out | (np.signbit(x).astype(np.int64) << (fmt.total_bits - 1))).astype(np.int64)


def _samples(fmt: MinifloatFormat, rng, top: float) -> np.ndarray:
    return np.concatenate([
        (rng.standard_normal(200_000) * rng.choice([1e-3, 0.05, 1, 100, top / 4], 200_000)).astype(np.float32),
        # exact ties between neighbours, and values around the largest finite one
        (fmt.to_float64(np.arange(1, 1 << (fmt.total_bits - 1), 7)) * (1 + 2.0 ** -(fmt.mantissa_bits + 1))
         ).astype(np.float32),
        np.float32([top, top * 1.01, top * 1.2, -top * 3, 0.0, -0.0]),
    ])


# -- §3.1 custom floats -------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(MINIFLOATS))
def test_every_pattern_round_trips_through_value_and_pairs(name):
    fmt = MINIFLOATS[name]
    pats = np.arange(1 << fmt.total_bits, dtype=np.int64).astype(fmt.bits_dtype)
    vals = fmt.to_float64(pats)
    ok = np.isnan(vals) | (fmt.from_float(vals) == pats)
    assert ok.all(), np.flatnonzero(~ok)[:5]
    pairs = fmt.pairs.split(pats)
    assert np.array_equal(fmt.pairs.join(pairs), pats)
    assert int(pairs.extra_bits_per_code[0]) == 1 + fmt.mantissa_bits


@pytest.mark.parametrize("name", ["e8m2", "e8m3", "e5m2", "e4m3", "fp16"])
def test_rounding_from_fp32_matches_the_nearest_even_reference(name):
    fmt = MINIFLOATS[name]
    rng = np.random.default_rng(7)
    top = fmt.max_finite
    with np.errstate(over="ignore"):          # E8Mm's range reaches fp32's: some products overflow to Inf
        x = _samples(fmt, rng, top)
    x = x[np.isfinite(x)]
    got = fmt.from_float(x).astype(np.int64)
    ref = _nearest_even_reference(fmt, x)
    if fmt.saturate:
        ref = np.where(np.abs(x) > top, fmt._max_bits() | (np.signbit(x).astype(np.int64) << (fmt.total_bits - 1)),
                       ref)
    assert np.array_equal(got, ref), np.flatnonzero(got != ref)[:5]
    if name == "fp16":      # and NumPy's own float16 conversion
        with np.errstate(over="ignore"):
            assert np.array_equal(got, x.astype(np.float16).view(np.uint16).astype(np.int64))


def test_fp8_saturation_follows_the_ocp_rules():
    e4m3, e5m2 = MINIFLOATS["e4m3"], MINIFLOATS["e5m2"]
    assert e4m3.max_finite == 448.0 and e5m2.max_finite == 57344.0
    big = np.array([1e6, -1e6, np.inf, -np.inf, np.nan])
    assert e4m3.to_float64(e4m3.from_float(big))[:4].tolist() == [448, -448, 448, -448]
    assert np.isnan(e4m3.to_float64(e4m3.from_float(big[4:])))[0]
    assert e5m2.to_float64(e5m2.from_float(big))[:4].tolist() == [57344, -57344, np.inf, -np.inf]
    assert np.isnan(e4m3.to_float64(e4m3.from_float(big[:1], saturate=False)))[0]
    assert e5m2.to_float64(e5m2.from_float(big[:1], saturate=False))[0] == np.inf


# -- §3.2 posits --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(POSITS))
def test_every_posit_pattern_round_trips(name):
    pf = POSITS[name]
    pats = np.arange(1 << pf.n, dtype=np.int64)
    pairs = pf.split(pats)
    assert np.array_equal(pf.join(pairs).astype(np.int64), pats)
    widths = pf.layout().extra_bits_per_code()
    assert np.all(pairs.extra.astype(np.int64) >> widths[pairs.codes] == 0)
    vals = pf.to_float64(pats)
    ok = ~np.isnan(vals)
    assert np.array_equal(pf.from_float(vals[ok]).astype(np.int64), pats[ok])
    # values are strictly monotone in the two's-complement order, as posits are
    signed = np.where(pats >= 1 << (pf.n - 1), pats - (1 << pf.n), pats)
    order = np.argsort(signed[ok])
    assert np.all(np.diff(vals[ok][order]) > 0)


def test_posit_reference_values():
    p80, p161 = PositFormat(8, 0), PositFormat(16, 1)
    v = p80.to_float64(np.array([0x40, 0x60, 0x50, 0xC0, 0x01, 0x7F]))
    assert v.tolist() == [1.0, 2.0, 1.5, -1.0, 2.0 ** -6, 64.0]
    assert p161.to_float64(np.array([0x7FFF, 0x0001]))[:].tolist() == [2.0 ** 28, 2.0 ** -28]
    # the fraction width depends on the code: the regime of 1.0 leaves n - 3 - es bits
    assert p80.split(np.array([0x40])).extra_bits_per_code[p80.split(np.array([0x40])).codes[0]] == 1 + 5


# -- §3.3 integers ------------------------------------------------------------------------------
def test_nz_msb_codes_follow_fig6_and_round_trip():
    c = NzMsbCode(11)
    p = c.split(np.array([-1, 13, 0]))
    assert p.codes.tolist() == [1, 4, 0] and p.extra.tolist() == [1, 0b0101, 0]
    v = np.arange(-2047, 2048)
    assert np.array_equal(c.join(c.split(v)), v)
    u = NzMsbCode(16, signed=False)
    v = np.arange(1 << 16)
    assert np.array_equal(u.join(u.split(v)), v)
    d = DirectCode(7)
    v = np.arange(-127, 128)
    assert np.array_equal(d.join(d.split(v)), v)
    assert d.n_codes == 128 and d.extra_bits_per_code[1] == 1 and d.extra_bits_per_code[0] == 0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.lists(st.integers(-2047, 2047), min_size=1, max_size=200))
def test_saturated_extra_width_rounds_to_nearest_even(cap, values):
    c = NzMsbCode(11, max_extra_bits=cap)
    v = np.asarray(values)
    r = c.saturate(v)
    assert np.array_equal(c.join(c.split(v)), r)
    assert np.all(c.split(v).extra.astype(np.int64) >> c.extra_bits_per_code[c.split(v).codes] == 0)
    # the rounded value is one a capped code can hold, and no such value is nearer
    a = np.abs(v)
    for x, y in zip(a.tolist(), np.abs(r).tolist()):
        k = max(x.bit_length() - 1, 0)
        step = 1 << max(k - (cap - 1), 0)
        assert abs(x - y) <= step // 2 or (y < x and x + step > 2047)


def test_linear_quantization_is_the_papers_formula():
    w = np.array([0.5, -1.0, 0.25, 0.0, 1 / 3])
    q, scale = linear_quantize(w, 6)
    assert scale == 1 / 63 and q.tolist() == [32, -63, 16, 0, 21]
    with pytest.raises(AnsforgeError, match="non-finite weight .*flat index 1"):
        linear_quantize(np.array([0.0, np.nan]), 6)


def test_table2_numbers_recomputed_independently(stories):
    from ansforge.analysis.table2 import compute_table2, stored_values
    from ansforge.model.llm.checkpoint import open_checkpoint, select_tensors

    t = compute_table2(stories, (6, 11))
    ck = open_checkpoint(stories)
    total, n = {6: 0.0, 11: 0.0}, 0
    for info in select_tensors(ck):
        w = stored_values(ck.tensor(info.name)).ravel()
        n += w.size
        for nb in (6, 11):
            q = np.rint(w / (np.abs(w).max() / (2 ** nb - 1)))
            a = np.abs(q).astype(np.int64)
            k = np.zeros_like(a)
            nz = a > 0
            k[nz] = np.floor(np.log2(a[nz])).astype(np.int64) + 1            # code = NZ-MSB + 1
            _, c = np.unique(k, return_counts=True)
            p = c / c.sum()
            total[nb] += -(c * np.log2(p)).sum() + k.sum()                   # code k carries k bits
    for nb in (6, 11):
        assert abs(t.row(nb).nz_msb_per_weight - total[nb] / n) < 1e-9
    assert all(0.98 < s < 1.03 for s in compute_table2(stories).slopes())


def test_quant_table_and_fig5_commands(stories, tmp_path):
    out = tmp_path / "t2.json"
    r = subprocess.run([sys.executable, "-m", "ansforge", "quant-table", "--model", str(stories), "--json", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "+/- 2047" in r.stdout and "Slope per extra Nb" in r.stdout
    assert [row["nb"] for row in json.loads(out.read_text())["rows"]] == [6, 7, 8, 9, 10, 11]
    png = tmp_path / "fig5.png"
    r = subprocess.run([sys.executable, "-m", "ansforge", "figure", "quant-histogram", "--model", str(stories),
                        "-o", str(png)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"
    r = subprocess.run([sys.executable, "-m", "ansforge", "quant-table", "--model", str(stories), "--nb", "0"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--nb" in r.stderr and "Traceback" not in r.stderr


# -- §3.5 saliency ------------------------------------------------------------------------------
def test_salient_pairs_keep_important_weights_exact(stories):
    from ansforge.model.llm.checkpoint import open_checkpoint
    from ansforge.model.dtypes.pairs import fp32_to_bf16_rne

    rec = open_checkpoint(stories).tensor("layers.0.attention.wq.weight")
    b16 = fp32_to_bf16_rne(rec.array).reshape(rec.shape)
    mask = salient_mask(b16, 0.02)
    sp = split_salient(b16, mask, 2, 7)
    out = join_salient(sp).reshape(b16.shape)
    assert np.array_equal(out[mask], b16[mask])
    e8m2 = MinifloatFormat("e8m2", 8, 2)
    x = (b16.astype(np.uint32) << 16).view(np.float32)
    ref = e8m2.from_float(x[~mask]).astype(np.uint16) << np.uint16(5)
    assert np.array_equal(out[~mask], ref)
    shared = set(sp.ordinary.tolist()) & set(sp.important.tolist())
    assert shared, "important and ordinary weights share exponents, each with its own code"
    assert sp.layout().n_codes == sp.ordinary.size + sp.important.size


# -- §3.6 binary and ternary --------------------------------------------------------------------
def test_papers_run_length_and_group_examples():
    rl = RunLengthCode(8)
    p = rl.split(np.array([0, 0, 0, -1, 1, 0, 0, 1]))
    runs, signs = rl.runs_and_signs(p)
    assert runs.tolist() == [3, 0, 2] and signs.tolist() == [-1, 1, 1]
    g = GroupMaskCode(8).split(np.array([0, -1, 1, 0, 0, -1, 0, 0]))
    assert g.codes.tolist() == [0b01100100] and g.extra.tolist() == [0b101]


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 400), st.floats(0.0, 0.95), st.booleans(), st.integers(0, 2 ** 31))
def test_binary_and_ternary_codes_round_trip(n, zeros, ternary, seed):
    rng = np.random.default_rng(seed)
    w = np.where(rng.random(n) < zeros, 0, rng.choice([-1, 1] if ternary else [1], n))
    for code in (RunLengthCode(n, ternary), GroupMaskCode(n, ternary), HybridCode(n, ternary)):
        assert np.array_equal(code.join(code.split(w)), w), type(code).__name__


def test_zero_skipping_dot_product_equals_the_dense_one(stories):
    from ansforge.model.llm.checkpoint import open_checkpoint

    ck = open_checkpoint(stories)
    rng = np.random.default_rng(3)
    for name in ("layers.0.attention.wq.weight", "layers.4.feed_forward.w2.weight"):
        rec = ck.tensor(name)
        t, _ = absmean_ternarize(rec.array.reshape(rec.shape))
        rows, cols = t.shape
        code = RunLengthCode(t.size)
        pairs = code.split(t)
        for x in (rng.integers(-2 ** 15, 2 ** 15, cols), rng.integers(-2 ** 40, 2 ** 40, cols)):
            assert np.array_equal(zero_skipping_matvec(code, pairs, cols, x), dense_matvec(t, x))
        assert pairs.codes.size == np.count_nonzero(t)       # one pair per non-zero weight: zeros are skipped


# -- invalid definitions --------------------------------------------------------------------------
def test_invalid_definitions_raise_naming_the_field():
    with pytest.raises(ConfigError, match="code sets 'ordinary' .* and 'important' .* overlap at code 16"):
        CodeLayout.from_json({"name": "salient", "sets": [{"name": "ordinary", "first": 0, "extra_bits": 4, "count": 32},
                                                          {"name": "important", "first": 16, "extra_bits": 8,
                                                           "count": 32}]})
    with pytest.raises(ConfigError, match=r"'scale': extra_bits\[\d+\] = 13 .*max_extra_bits=8"):
        POSITS["posit<16,1>"].layout().check_core(64, 8)
    POSITS["posit<16,1>"].layout().check_core(64, 16)
    with pytest.raises(ConfigError, match="code set 'mask' reaches code 254.*max_symbols=64"):
        HybridCode(1000).layout().check_core(64, 8)
    with pytest.raises(ConfigError, match="posit es = 6 is too large for n = 8"):
        PositFormat(8, 6)
    with pytest.raises(ConfigError, match="sets\\[0\\] lacks the field 'first'"):
        CodeLayout.from_json({"sets": [{"name": "a", "extra_bits": 3}]})
    with pytest.raises(ConfigError, match="mantissa_bits"):
        MinifloatFormat("e8m30", 8, 30)
    with pytest.raises(ConfigError, match="ordinary_mantissa_bits"):
        split_salient(np.zeros(4, np.uint16), np.zeros(4, bool), 9)


def test_types_command_measures_every_type(stories, tmp_path):
    out = tmp_path / "types.json"
    r = subprocess.run([sys.executable, "-m", "ansforge", "types", "--model", str(stories), "--json", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    rows = {row["type"]: row["ideal_bits_per_weight"] for row in doc["rows"]}
    charged = {row["type"]: row["bits_per_weight"] for row in doc["rows"]}
    assert abs(rows["bf16 (E8M7)"] - 10.6125) < 5e-4           # Table 1's Ideal for stories260K
    # §3.1: E8M2 and E8M3 keep the exponents, so they cost bf16's ideal minus 5 and 4 mantissa bits
    assert abs(rows["e8m2 (E8M2)"] - (rows["bf16 (E8M7)"] - 5)) < 0.01
    assert abs(rows["e8m3 (E8M3)"] - (rows["bf16 (E8M7)"] - 4)) < 0.01
    assert charged["salient 1% by |w|: bf16 + E8M3, one space"] < charged["E8M3 + separate outlier store (1%)"]
    assert all(r < 2 for k, r in charged.items() if k.startswith("ternary"))
    assert all(charged[k] >= rows[k] for k in rows)
    fields = {"bits_per_weight", "rel_rmse", "max_rel_err", "clamped", "flushed", "saturated", "kl_nats",
              "greedy_agreement"}
    assert all(fields <= set(row) for row in doc["rows"])
    assert doc["effect_positions"] == 32 and all(row["kl_nats"] is not None for row in doc["rows"])
