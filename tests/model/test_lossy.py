"""Figures of merit of the lossy §3 types, each against an independent computation on small inputs:
error statistics, charged and held-out sizes, KL divergence and greedy agreement, subdivided and
clipped integer codes, saliency by activation importance through the §4.3 interface, binary and
thresholded ternary weights, the outlier measurement, and the figures and commands that show them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from ansforge.analysis.lossy import (EffectProbe, charged_bits, error_stats, heldout_bits, ideal_bits, kl_nats,
                                     table_bits)
from ansforge.model.errors import ConfigError, PairFormatError
from ansforge.model.dtypes.integers import DirectCode, IntegerPairs, NzMsbCode, SubdividedCode, clip_quantize

MATRICES = ["--include", "layers.0.attention.wq.weight", "--include", "layers.1.feed_forward.w2.weight"]


# -- error statistics ---------------------------------------------------------------------------
def test_error_stats_match_a_loop_over_the_weights():
    rng = np.random.default_rng(3)
    w = rng.standard_normal(300) * 0.1
    w[:5] = [0.0, 1e-9, -2e-9, 5.0, -7.0]
    w_hat = np.round(w * 16) / 16
    w_hat[1], w_hat[2] = 1 / 64, -1 / 64                   # two tiny weights raised to ±min
    w_hat[3], w_hat[4] = 4.0, -4.0                          # two saturated to ±4
    s = error_stats(w, w_hat, min_mag=1 / 64, max_mag=4.0)
    sq_err = sq_ref = 0.0
    max_rel, flushed, clamped, saturated = 0.0, 0, 0, 0
    for a, b in zip(w.tolist(), w_hat.tolist()):
        sq_err += (b - a) ** 2
        sq_ref += a * a
        if a != 0:
            max_rel = max(max_rel, abs(b - a) / abs(a))
            flushed += b == 0
            clamped += b != 0 and abs(a) < 1 / 128
        saturated += abs(a) > 4.0
    assert math.isclose(s.rel_rmse, math.sqrt(sq_err / sq_ref), rel_tol=1e-12)
    assert math.isclose(s.max_rel_err, max_rel, rel_tol=1e-12)
    assert (s.n_flushed, s.n_clamped, s.n_saturated) == (flushed, clamped, saturated)
    assert clamped == 2 and saturated == 2 and flushed > 0
    both = s + error_stats(w[:10], w[:10])
    assert both.weights == 310 and both.n_flushed == s.n_flushed and both.sq_ref > s.sq_ref


def test_posit_and_fp8_errors_in_the_survey_recount_independently(stories):
    from ansforge.analysis.data_types import survey_types
    from ansforge.analysis.table2 import stored_values
    from ansforge.model.llm.checkpoint import open_checkpoint
    from ansforge.model.dtypes.custom_float import MINIFLOATS
    from ansforge.model.dtypes.posit import POSITS

    names = MATRICES[1::2]
    s = survey_types(stories, include=names, thresholds=())
    ck = open_checkpoint(stories)
    w = np.concatenate([stored_values(ck.tensor(n)).ravel() for n in names])
    pf = POSITS["posit<8,0>"]
    minpos = float(pf.to_float64(np.array([1]))[0])
    back = pf.to_float64(pf.from_float(w))
    assert s.row("posit<8,0>").errors.n_clamped == int(np.sum((np.abs(w) < minpos / 2) & (w != 0) & (back != 0)))
    assert s.row("posit<8,0>").errors.n_flushed == 0                  # posits never round to zero
    e4m3 = MINIFLOATS["e4m3"]
    back = e4m3.to_float64(e4m3.from_float(w.astype(np.float32)))
    r = s.row("e4m3 (E4M3)").errors
    assert r.n_flushed == int(np.sum((back == 0) & (w != 0))) > 0
    assert math.isclose(r.rel_rmse, float(np.sqrt(np.sum((back - w) ** 2) / np.sum(w ** 2))), rel_tol=1e-12)


# -- sizes --------------------------------------------------------------------------------------
def test_tables_charged_and_held_out_sizes_by_hand():
    counts = np.array([5, 0, 3, 0, 0, 0, 0, 1])
    # 3 used codes: 3 frequencies of 16 bits; identities: min(bitmap of 8, 3 indices of 3 bits) = 8
    assert table_bits(counts, 8) == 3 * 16 + 8
    assert table_bits(counts, 1024) == 3 * 16 + 3 * 10
    codes = np.array([0, 0, 2, 7, 0, 2, 0, 2, 0])
    pairs = IntegerPairs(codes, np.zeros(codes.size, np.uint64), np.array([0, 1, 2, 3, 4, 5, 6, 3], np.uint8))
    extra = 0 + 0 + 2 + 3 + 0 + 2 + 0 + 2 + 0
    c = np.bincount(codes, minlength=8)
    assert math.isclose(charged_bits(pairs, side_bits=32),
                        -sum(k * math.log2(k / 9) for k in c if k) + extra + table_bits(c, 8) + 32)
    # held out: first 4 codes coded with the last 5's histogram (+1/2 per code of 8), and back
    total = 0.0
    for coded, seen in ((codes[:4], codes[4:]), (codes[4:], codes[:4])):
        for x in coded.tolist():
            p = Fraction(2 * int(np.sum(seen == x)) + 1, 2 * seen.size + 8)
            total -= math.log2(p)
    assert math.isclose(heldout_bits(pairs), total + extra, rel_tol=1e-12)


def test_direct_codes_lose_their_ideal_advantage_once_tables_are_paid(stories):
    from ansforge.analysis.table2 import compute_table2

    t = compute_table2(stories, (11,))
    r = t.row(11)
    assert r.direct_bits < r.nz_msb_bits                                  # the paper's estimate flatters them
    assert r.direct_charged > r.nz_msb_charged and r.direct_heldout > r.nz_msb_heldout


# -- model effect -------------------------------------------------------------------------------
def test_kl_divergence_matches_the_definition():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 7)) * 3, rng.standard_normal((3, 7)) * 3
    got = kl_nats(a, b)
    for i in range(3):
        p = [math.exp(x) for x in a[i]]
        q = [math.exp(x) for x in b[i]]
        p = [x / sum(p) for x in p]
        q = [x / sum(q) for x in q]
        assert math.isclose(got[i], sum(pi * math.log(pi / qi) for pi, qi in zip(p, q)), rel_tol=1e-9)
    assert np.allclose(kl_nats(a, a), 0.0)


def test_effect_probe_against_a_hand_run_of_the_model(stories):
    from ansforge.model.llm.checkpoint import open_checkpoint
    from ansforge.model.llm.llama import CheckpointWeights, Llama, LlamaWeights, StoredMatrix, read_layout

    probe = EffectProbe(stories, 6)
    same = probe.measure({})
    assert same.kl_nats == 0.0 and same.greedy_agreement == 1.0 and same.positions == 6
    name = "layers.0.feed_forward.w1.weight"
    w = np.asarray(open_checkpoint(stories).tensor(name).array, dtype=np.float32)
    coarse = np.round(w * 8) / 8
    effect = probe.measure({name: coarse})
    weights = LlamaWeights.load(read_layout(stories), CheckpointWeights(stories))
    weights.tensors[name] = StoredMatrix(coarse.reshape(weights[name].shape), "F32")
    model = Llama(weights)
    logits = np.stack([model.forward(t, pos) for pos, t in enumerate(probe.tokens)])
    assert probe.tokens[0] == 1 and len(probe.tokens) == 6
    assert math.isclose(effect.kl_nats, float(np.mean(kl_nats(probe.ref_logits, logits))), rel_tol=1e-9)
    agree = np.mean(logits.argmax(-1) == np.array(probe.tokens[1:] + [int(probe.ref_logits[-1].argmax())]))
    assert effect.greedy_agreement == pytest.approx(agree) and effect.kl_nats > 0


def test_calibration_norms_are_the_inputs_of_each_matrix(stories):
    from ansforge.model.llm.llama import CheckpointWeights, Llama, LlamaWeights, read_layout

    probe = EffectProbe(stories, 3)
    model = Llama(LlamaWeights.load(read_layout(stories), CheckpointWeights(stories)))
    seen = []
    original = model.weights["layers.2.attention.wo.weight"]

    class Spy:
        def matvec(self, x):
            seen.append(np.asarray(x, np.float64))
            return original.matvec(x)

    model.weights.tensors["layers.2.attention.wo.weight"] = Spy()
    for pos, t in enumerate(probe.tokens):
        model.forward(t, pos)
    want = np.sqrt(np.sum(np.square(seen), axis=0))
    assert np.allclose(probe.input_norms["layers.2.attention.wo.weight"], want, rtol=1e-12)


def test_non_llama_gets_error_figures_only(minilm):
    from ansforge.analysis.data_types import survey_types

    s = survey_types(minilm, steps=4, include=["encoder.layer.0.attention.self.key.weight"], thresholds=())
    assert s.positions == 0 and "llama" in s.effect_note
    assert all(r.effect is None and r.errors.weights == 384 * 384 for r in s.rows)
    with pytest.raises(ConfigError, match="activation"):
        survey_types(minilm, steps=4, importance="activation", include=["encoder.layer.0.attention.self.key.weight"])


# -- §3.3 subdivision, saturation, clipping -----------------------------------------------------
@pytest.mark.parametrize("nb", [1, 2, 5, 8])
def test_subdivided_codes_round_trip_and_span_nz_msb_to_direct(nb):
    v = np.arange(-(2 ** nb - 1), 2 ** nb)
    for s in range(nb + 1):
        code = SubdividedCode(nb, s)
        pairs = code.split(v)
        assert np.array_equal(code.join(pairs), v)
        # independent: interval k = bit length of |v|, 2**min(s, k-1) codes per interval, counted in order
        sizes = [1] + [2 ** min(s, k - 1) for k in range(1, nb + 1)]
        assert code.n_codes == sum(sizes)
        for x, c, e in zip(v.tolist()[::5], pairs.codes.tolist()[::5], pairs.extra.tolist()[::5]):
            a = abs(x)
            k = a.bit_length()
            if k == 0:
                assert (c, e) == (0, 0)
                continue
            sub = min(s, k - 1)
            low = k - 1 - sub
            assert c == sum(sizes[:k]) + ((a - 2 ** (k - 1)) >> low)
            assert e == ((x < 0) << low) | (a & ((1 << low) - 1))
    assert np.array_equal(SubdividedCode(nb, 0).split(v).codes, NzMsbCode(nb).split(v).codes)
    assert np.array_equal(SubdividedCode(nb, max(nb - 1, 0)).split(v).codes, DirectCode(nb).split(v).codes)
    with pytest.raises(PairFormatError):
        SubdividedCode(nb, 0).split(np.array([2 ** nb]))


def test_nz_msb_codes_are_bit_lengths_on_both_sides_of_2_to_the_53():
    """The code of a nonzero integer is its magnitude's bit length, whichever way it is computed (a
    float exponent below 2**53, shifts above)."""
    for top in (52, 62):
        mags = [m for j in range(1, top + 1) for m in ((1 << j) - 1, 1 << j, (1 << j) + 1) if m < 1 << top]
        q = np.array([0] + mags + [-m for m in mags], dtype=np.int64)
        codes = NzMsbCode(62).split(q).codes
        assert codes.tolist() == [abs(int(v)).bit_length() for v in q]


def test_clip_quantize_saturates_beyond_the_clip():
    w = np.array([-3.0, -1.0, 0.2, 0.5, 1.0, 2.5])
    q, scale = clip_quantize(w, 3, 1.0)
    assert scale == 1 / 7 and q.tolist() == [-7, -7, 1, 4, 7, 7]       # rint(0.5 * 7) = 4 (ties to even)
    with pytest.raises(ConfigError, match="clip"):
        clip_quantize(w, 3, 0.0)


def test_quant_table_variants_recomputed(stories):
    from ansforge.analysis.table2 import compute_table2, stored_values
    from ansforge.model.llm.checkpoint import open_checkpoint

    names = MATRICES[1::2]
    t = compute_table2(stories, (8,), names, variants_nb=8, subdivide=(2,), saturate_bits=(4,), clips=(0.5,))
    ck = open_checkpoint(stories)
    want = {"sub": 0.0, "sat": 0.0, "clip": 0.0}
    err, ref, sat = 0.0, 0.0, 0
    for n in names:
        w = stored_values(ck.tensor(n)).ravel()
        m = np.abs(w).max()
        q = np.rint(w / (m / 255))
        a = np.abs(q).astype(np.int64)
        k = np.array([int(x).bit_length() for x in a])
        sub = np.where(k > 1, (a - (1 << np.maximum(k - 1, 0))) >> np.maximum(k - 1 - np.minimum(2, k - 1), 0), 0)
        sub_code = k * 16 + sub                                                      # any injective labelling
        width = np.where(k > 0, k - np.minimum(2, np.maximum(k - 1, 0)), 0)
        _, c = np.unique(sub_code, return_counts=True)
        want["sub"] += -np.sum(c * np.log2(c / c.sum())) + width.sum() + table_bits(c, SubdividedCode(8, 2).n_codes) + 32
        qc = np.clip(np.rint(w / (0.5 * m / 255)), -255, 255)
        err += np.sum((qc * 0.5 * m / 255 - w) ** 2)
        ref += np.sum(w ** 2)
        sat += int(np.sum(np.abs(w) > 0.5 * m))
    v = t.variant("subdivided s=2 (" + f"{SubdividedCode(8, 2).n_codes} codes)")
    assert math.isclose(v.charged, want["sub"], rel_tol=1e-12)
    clip = t.variant("NZ-MSB, clipped at 0.5·max|w|")
    assert math.isclose(clip.errors.rel_rmse, math.sqrt(err / ref), rel_tol=1e-9)
    assert clip.errors.n_saturated == sat > 0
    nz, satv = t.variant("NZ-MSB"), t.variant("NZ-MSB, additional data saturated to 4 bits")
    assert satv.ideal < nz.ideal and satv.errors.rel_rmse > nz.errors.rel_rmse


# -- §3.5 saliency by activation importance, §4.3 interface -------------------------------------
def test_activation_importance_chooses_and_decodes_through_the_interface():
    from ansforge.model.dtypes.interfaces import PairToFloatTable
    from ansforge.model.dtypes.pairs import fp32_to_bf16_rne
    from ansforge.model.dtypes.saliency import (activation_importance, interface_format, join_salient, salient_mask,
                                         split_salient)

    rng = np.random.default_rng(5)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    norms = np.array([0, 0, 0, 0, 0, 0, 0, 100.0])
    score = activation_importance(w, norms)
    assert score[3, 7] == abs(float(w[3, 7])) * 100 and score[3, 0] == 0
    b16 = fp32_to_bf16_rne(w)
    mask = salient_mask(b16, 0.125, score)
    assert mask.sum() == 16 and mask[:, 7].all()                       # the only column that moves outputs
    sp = split_salient(b16, mask, 2, 7)
    got = PairToFloatTable(interface_format(sp), "bf16").apply(sp.pairs.codes, sp.pairs.extra)
    assert np.array_equal(got, join_salient(sp))
    assert np.array_equal(got.reshape(w.shape)[:, 7], b16[:, 7])       # important weights exact
    with pytest.raises(ConfigError, match="one input norm per column"):
        activation_importance(w, norms[:3])


def test_types_by_activation_importance_on_a_llama(stories):
    from ansforge.analysis.data_types import survey_types

    s = survey_types(stories, steps=4, importance="activation", include=MATRICES[1::2], thresholds=())
    row = next(r for r in s.rows if r.name.startswith("salient"))
    assert "|w|·‖x‖" in row.name and row.effect is not None and row.effect.positions == 4


# -- §3.6 binary and thresholded ternary --------------------------------------------------------
def test_binary_and_threshold_ternary_by_hand():
    from ansforge.model.dtypes.ternary import GroupMaskCode, HybridCode, sign_binarize, threshold_ternarize

    w = np.array([0.1, -0.2, 0.0, 0.9, -1.2, 0.05])
    b, alpha = sign_binarize(w)
    assert b.tolist() == [1, 0, 1, 1, 0, 1] and math.isclose(alpha, np.abs(w).mean())
    t, a = threshold_ternarize(w, 1.0)                     # mean|w| = 0.40833
    assert t.tolist() == [0, 0, 0, 1, -1, 0] and math.isclose(a, 1.05)
    # a sparse matrix: hybrid differs from groups once whole groups are zero
    rng = np.random.default_rng(2)
    x = rng.standard_normal(4096)
    t, _ = threshold_ternarize(x, 3.0)
    g, h = GroupMaskCode(t.size).split(t), HybridCode(t.size).split(t)
    assert h.codes.size < g.codes.size and ideal_bits(h.counts()) != ideal_bits(g.counts())


# -- outliers -----------------------------------------------------------------------------------
def test_outlier_bits_and_prediction(stories):
    from ansforge.analysis.outliers import (gaussian_level, measure_outliers, pair_bits_per_weight, paper_ratio)
    from ansforge.analysis.table2 import PAPER_TABLE2
    from ansforge.model.dtypes.integers import ideal_pair_bits, linear_quantize

    assert math.isclose(gaussian_level(11, paper_ratio(11)), PAPER_TABLE2[11])
    rng = np.random.default_rng(9)
    w = rng.standard_normal(200_000)
    q, _ = linear_quantize(w, 11)
    pairs = NzMsbCode(11).split(q)
    per = pair_bits_per_weight(pairs)
    assert math.isclose(per.sum(), ideal_pair_bits(pairs), rel_tol=1e-12)
    level = gaussian_level(11, np.abs(w).max() / w.std())
    entropy = ideal_pair_bits(DirectCode(11).split(q)) / w.size        # H(q): sign and magnitude
    assert abs(entropy - level) < 0.01                                   # a Gaussian obeys the formula
    assert 0 < per.mean() - entropy < 0.1                                # NZ-MSB: flat within each interval
    r = measure_outliers(stories, 11, 0.001, MATRICES[1::2])
    m = r.matrices[0]
    assert m.top_weights == round(0.001 * m.weights) and 0 < m.top_bits < m.bits
    # (its top weights recounted by a whole stable sort: the partition picks the same ones, ties included)
    from ansforge.analysis.table2 import stored_values
    from ansforge.model.llm.checkpoint import open_checkpoint
    w = stored_values(open_checkpoint(stories).tensor(m.name)).ravel()
    per = pair_bits_per_weight(NzMsbCode(11).split(linear_quantize(w, 11)[0]))
    assert per[np.argsort(-np.abs(w), kind="stable")[:m.top_weights]].sum() == m.top_bits
    s = r.summary()
    assert s["max_over_sigma_max"] >= s["max_over_sigma_median"] > 3


# -- figures and commands -----------------------------------------------------------------------
def test_fig5_and_factory_figures_show_what_they_claim(stories):
    import matplotlib
    import matplotlib.pyplot as plt

    from ansforge.analysis.factory import PAPER_EXAMPLE, plot_factory
    from ansforge.analysis.table2 import plot_quant_histogram, stored_values
    from ansforge.model.llm.checkpoint import open_checkpoint
    from ansforge.model.dtypes.integers import linear_quantize

    backend = matplotlib.get_backend()
    info = plot_quant_histogram(stories, None, nb=11, bins=255)
    w = stored_values(open_checkpoint(stories).tensor(info["matrix"]))
    q, _ = linear_quantize(w, 11)
    counts, _ = np.histogram(q, np.linspace(-2047.5, 2047.5, 256))
    assert info["rare_bins"] == int(np.sum((counts > 0) & (counts <= 3))) > 0
    fig = info["figure"]
    left = fig.axes[0]
    assert left.get_yscale() == "log" and "stories260K.bin" in fig._suptitle.get_text()
    assert any(t.get_text() == "code 11" for t in left.texts)
    plt.close(fig)
    fig = plot_factory(PAPER_EXAMPLE)
    labels = [line.get_label() for ax in fig.axes for line in ax.get_lines()]
    assert {"shared, any N", "not shared, N = 1 (= shared)", "neither shared nor compressed"} <= set(labels)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "paper: 1.4 TB/s" in texts and "paper: 92 GB/s" in texts
    assert matplotlib.get_backend() == backend                         # a notebook's backend is left alone
    plt.close(fig)


def test_commands_write_the_new_figures_and_refuse_bad_input(stories, tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "ansforge", *args], capture_output=True, text=True)

    out, png = tmp_path / "q.json", tmp_path / "trade.png"
    r = run("quant-table", "--model", str(stories), "--nb", "7,8", "--variants-nb", "8", "--steps", "4",
            "--plot", str(png), "--json", str(out), *MATRICES)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert png.read_bytes()[:4] == b"\x89PNG" and "subdivided s=1" in r.stdout
    fields = {"bits_per_weight", "rel_rmse", "max_rel_err", "clamped", "flushed", "saturated", "kl_nats",
              "greedy_agreement"}
    assert all(fields <= set(v) for v in doc["variants"] + doc["rows"])
    assert all(v["kl_nats"] is not None for v in doc["variants"])
    out = tmp_path / "o.json"
    r = run("outliers", "--model", str(stories), "--json", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert abs(doc["max_over_sigma_median"] - 5.3) < 0.1 and len(doc["per_matrix"]) == 36
    for args, flag in ((("quant-table", "--clip", "2"), "--clip"), (("quant-table", "--subdivide", "x"), "--subdivide"),
                       (("outliers", "--top", "0"), "--top"), (("types", "--steps", "-1"), "--steps"),
                       (("types", "--importance", "activation", "--steps", "0"), "activation")):
        r = run(args[0], "--model", str(stories), *args[1:])
        assert r.returncode == 2 and flag in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
