"""Interleaved states (docs/bitstream.md §8): codecs ``tans8x2``, ``rans16x4`` …, whose pair ``j`` is coded
with state ``j mod N`` in one shared word stream.

Golden round trips for N = 1, 2, 3, 4, 8 (several runs and tables, escape symbols, empty and tiny
streams), random access from every checkpoint, the compiled kernels equal to the golden coders for every
N, N = 1 unchanged (digests taken with the coder before interleaving existed), the container (version 5,
checkpoint records of N states, crafted records refused) and the hardware paths' one-line refusal.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct

import numpy as np
import pytest

from ansforge.analysis.fuzz import edit_records, split_records
from ansforge.model.coding import fastans
from ansforge.model.coding.codecs import Codec, parse_codec
from ansforge.model.coding.container import VERSION_STATES, ContainerError, compress_checkpoint, open_container
from ansforge.model.coding.lanes import decode_lanes, encode_lanes
from ansforge.model.coding.rans import RansParams
from ansforge.model.coding.stream import Checkpoint, Run, StreamError
from ansforge.model.coding.tans import TansParams
from ansforge.model.errors import ConfigError
from ..support import ansforge, one_line_error

STATES = (1, 2, 3, 4, 8)
FAMILIES = ("tans8", "rans16", "rans24", "tans5", "rans9")


def _codec(family: str, n: int) -> Codec:
    return parse_codec(family if n == 1 else f"{family}x{n}")


def _fixed_stream(spec, seed=2024):
    """Three tensors of skewed bf16 exponents (escape symbols included), one empty: fixed inputs."""
    rng = np.random.default_rng(seed)
    tables, syms, exs, runs = [], [], [], []
    for i, n in enumerate((3001, 0, 1777)):
        n_codes = (70, 3, 12)[i]
        p = rng.dirichlet(np.full(n_codes, 0.3))
        codes = rng.choice(n_codes, size=n, p=p).astype(np.uint16)
        counts = np.bincount(codes, minlength=n_codes).astype(np.int64)
        extra = rng.integers(0, 256, n, dtype=np.uint64)
        ct, t = spec.tables(counts, 8 if n else 0)
        s, e = ct.to_symbols(codes, extra)
        tables.append(t), syms.append(np.asarray(s, np.int64)), exs.append(np.asarray(e, np.uint64))
        runs.append(Run(i, int(s.size)))
    return tables, runs, np.concatenate(syms), np.concatenate(exs)


def _random_stream(spec, rng, sizes):
    """Tensors of random skewed alphabets (up to 90 codes: escape symbols) and bf16/fp32 extra widths,
    coded as runs that switch tables (tensor 0's table comes back for the last run)."""
    tables, syms, exs, runs = [], [], [], []
    for i, n in enumerate(sizes):
        n_codes = int(rng.integers(1, 90))
        w = (8, 24)[i % 2]
        p = rng.dirichlet(np.full(n_codes, 0.3))
        codes = rng.choice(n_codes, size=n, p=p).astype(np.uint16)
        counts = np.bincount(codes, minlength=n_codes).astype(np.int64)
        extra = rng.integers(0, 1 << w, n, dtype=np.uint64)
        ct, t = spec.tables(counts, w if n else 0)
        s, e = ct.to_symbols(codes, extra)
        tables.append(t), syms.append(np.asarray(s, np.int64)), exs.append(np.asarray(e, np.uint64))
        runs.append(Run(i, int(s.size)))
    if sizes and sizes[0]:  # the first tensor's table again, for its first pairs: a run that revisits a table
        k = min(sizes[0], 37)
        syms.append(syms[0][:k]), exs.append(exs[0][:k]), runs.append(Run(0, k))
    return tables, runs, np.concatenate(syms), np.concatenate(exs)


# ------------------------------------------------------------------------------------------------
# names, parameters, records

def test_names_parameters_and_records():
    for name, kind, n in (("tans8x2", "tans", 2), ("rans16x4", "rans", 4), ("rans24x2", "rans", 2),
                          ("tans12x16", "tans", 16), ("tans8", "tans", 1)):
        c = parse_codec(name)
        assert (c.kind, c.states, c.name) == (kind, n, name)
        rec = c.to_json()
        assert ("states" in rec) == (n > 1) and rec.get("states", 1) == n
        assert Codec.from_json(json.loads(json.dumps(rec))) == c
        assert (f" x{n}" in c.label()) == (n > 1)
    assert parse_codec("tans8x1") == parse_codec("tans8") and parse_codec("rans16x1").name == "rans16"
    assert parse_codec("rans16x2").params == RansParams(32, 16, 16, states=2)   # the interleaved preset
    assert parse_codec("rans24x2").is_constriction  # its quantizer; its words are not constriction's (§8)
    for bad in ("tans8x0", "tans8x17", "rans16x", "tans8x2x2"):
        with pytest.raises(ConfigError, match="codec"):
            parse_codec(bad)
    for params in (lambda: TansParams(states=0), lambda: TansParams(states=17), lambda: RansParams(states=True)):
        with pytest.raises(ConfigError, match="states must be an integer from 1 to 16"):
            params()
    for states in (1, "2", 2.0, True):  # a record spells states only as an integer > 1
        with pytest.raises(ConfigError, match="states"):
            Codec.from_json({**parse_codec("tans8x2").to_json(), "states": states})


# ------------------------------------------------------------------------------------------------
# N = 1 is today's bitstream

#: sha256 (first 16 hex digits) of the words and checkpoints of :func:`_fixed_stream`, taken with the
#: single-state coders as they were before interleaving (main at 125d659).
N1_DIGESTS = {"tans8": "eabbb12eca49bf16", "tans5": "76de32887aa1adc8", "tans12": "d1663b3b2b588ce3",
              "rans16": "6717f707ca2dfbf8", "rans24": "037115870e229cd2", "rans9": "d2ad8bfb00e828e5"}


@pytest.mark.parametrize("codec", sorted(N1_DIGESTS))
def test_one_state_words_are_unchanged(codec):
    spec = parse_codec(codec)
    tables, runs, s, e = _fixed_stream(spec)
    for st in (spec.coder().encode(tables, runs, s, e, 500), fastans.encode(spec, tables, runs, s, e, 500)):
        h = hashlib.sha256(np.asarray(st.words, np.uint64).tobytes())
        h.update(repr([c.as_tuple() for c in st.checkpoints]).encode())
        assert h.hexdigest()[:16] == N1_DIGESTS[codec]
        assert all(isinstance(c.state, int) for c in st.checkpoints)


#: sha256 of ``ansforge compress --model stories260K.bin`` (one stream), written by main at 125d659.
STORIES_DIGESTS = {"tans8": "628260e9e7e028dd8302d6bfb0b82f1dab999b66839b58fbd7d2a83b0ec3db09",
                   "rans16": "e4a80876d2f0a7d03a3e7bcc9925c16343ab7ef98c7ae6f05584423cdb3d9518"}


@pytest.mark.parametrize("codec", sorted(STORIES_DIGESTS))
def test_one_state_containers_are_byte_identical(stories, tmp_path, codec):
    out = tmp_path / "m.ansf"
    r = ansforge("compress", "--model", stories, "--codec", codec, "--layout", "model", "-o", out)
    assert r.returncode == 0, r.stderr
    assert hashlib.sha256(out.read_bytes()).hexdigest() == STORIES_DIGESTS[codec]
    assert struct.unpack_from("<I", out.read_bytes(), 8)[0] == 2


# ------------------------------------------------------------------------------------------------
# golden round trips, random access, and the kernels equal to the golden coders

@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("n", STATES)
def test_round_trip_checkpoints_and_kernels(family, n):
    spec = _codec(family, n)
    rng = np.random.default_rng(hash((family, n)) % 2 ** 32)
    coder = spec.coder()
    for sizes, interval in (((1500, 0, 900), 211), ((0,), 1), ((1,), 1), ((n - 1, 2), 1), ((3, n + 1), 2)):
        tables, runs, s, e = _random_stream(spec, rng, sizes)
        g = coder.encode(tables, runs, s, e, interval)
        f = fastans.encode(spec, tables, runs, s, e, interval)
        assert f.words.dtype == g.words.dtype and np.array_equal(f.words, g.words)
        assert f.checkpoints == g.checkpoints
        assert len(g.checkpoints) == max(0, (s.size - 1) // interval)
        for c in g.checkpoints:
            assert isinstance(c.state, int) if n == 1 else (isinstance(c.state, tuple) and len(c.state) == n)
        gs, ge, gend = coder.decode(g.words, tables, runs)
        assert np.array_equal(gs, s) and np.array_equal(ge, e)
        fs, fe, fend = fastans.decode(spec, g.words, tables, runs)
        assert np.array_equal(fs, s) and np.array_equal(fe, e) and fend == gend
        # Random access: from every checkpoint, a window starting there or a few pairs later (pair i's
        # state is lane i mod N's), and resuming from the checkpoint a decode returns.
        for c in g.checkpoints[:12] + g.checkpoints[-3:]:
            start = min(s.size, c.pair + int(rng.integers(0, 3)))
            count = int(rng.integers(0, s.size - start + 1))
            r_g = coder.decode(g.words, tables, runs, start, count, c)
            r_f = fastans.decode(spec, g.words, tables, runs, start, count, c)
            assert np.array_equal(r_g[0], s[start:start + count]) and np.array_equal(r_g[1], e[start:start + count])
            assert np.array_equal(r_f[0], r_g[0]) and np.array_equal(r_f[1], r_g[1]) and r_f[2] == r_g[2]
            rest = coder.decode(g.words, tables, runs, r_g[2].pair, None, r_g[2])
            assert np.array_equal(rest[0], s[r_g[2].pair:])
        for threads in (1, 3):
            ss, ee = fastans.decode_segments(spec, g.words, tables, runs, g.checkpoints, threads)
            assert np.array_equal(ss, s) and np.array_equal(ee, e)


@pytest.mark.parametrize("codec", ["tans8x4", "rans16x4", "rans24x2"])
def test_errors_are_the_golden_errors(codec):
    """Truncated and corrupted streams, and checkpoints of the wrong shape, fail alike in both coders."""
    spec = parse_codec(codec)
    tables, runs, s, e = _fixed_stream(spec)
    st = spec.coder().encode(tables, runs, s, e, 500)
    w = np.asarray(st.words)
    N = spec.states
    cp = st.checkpoints[1]
    lim = 1 << spec.state_bits
    cases = [(w[1:], None, 0), (w[:-1], None, 0), (w[:2], None, 0), (w[:0], None, 0),
             (np.concatenate([w[:5], w[6:]]), None, 0), (w ^ np.asarray(1, w.dtype), None, 0),
             (w, Checkpoint(cp.pair, cp.word, cp.bit, cp.state[:-1]), cp.pair),
             (w, Checkpoint(cp.pair, cp.word, cp.bit, cp.state[0]), cp.pair),
             (w, Checkpoint(cp.pair, cp.word, cp.bit, (lim,) + cp.state[1:]), cp.pair),
             (w, Checkpoint(cp.pair, cp.word, cp.bit, (-1,) * N), cp.pair)]
    failures = 0
    for words, c, start in cases:
        got = []
        for decode in (lambda: spec.coder().decode(words, tables, runs, start, None, c),
                       lambda: fastans.decode(spec, words, tables, runs, start, None, c)):
            try:
                r = decode()
                got.append(("ok", r[0].tolist(), r[1].tolist(), r[2]))
            except StreamError as exc:
                got.append(("error", str(exc)))
        assert got[0] == got[1], (words.size, c, got[0][:2], got[1][:2])
        failures += got[0][0] == "error"
    assert failures >= 8  # every case but a lucky flip is refused
    if spec.kind == "rans":
        with pytest.raises(StreamError, match=f"cannot hold its {N} states"):
            spec.coder().decode(w[-3:], tables, runs)
        with pytest.raises(StreamError, match=f"cannot hold its {N} states"):
            fastans.decode(spec, w[-3:], tables, runs)


def test_rans_lanes_of_zero_cost_symbols_pop_nothing():
    """A state whose pairs cost nothing (f = 2**P - 1 of a two-symbol alphabet, no additional data)
    beside states that push words every pair: why N > 1 rANS states start at 2**(S - W). Starting at
    0, state 0 would stay below 2**(S - W) and its decoder would pop the other states' words."""
    for codec in ("rans16x2", "rans16x3", "rans24x4"):
        spec = parse_codec(codec)
        ct, t = spec.tables(np.array([10 ** 9, 1, 1, 1], np.int64), 0)
        n = 2000
        s = np.where(np.arange(n) % spec.states == 0, 0, np.arange(n) % 3 + 1).astype(np.int64)
        s = np.minimum(s, t.freqs.size - 1)
        e = np.zeros(n, np.uint64)
        g = spec.coder().encode([t], [Run(0, n)], s, e, 64)
        assert g.n_words > spec.states * 2
        for dec in (spec.coder().decode, lambda *a: fastans.decode(spec, *a)):
            ds, de, _ = dec(g.words, [t], [Run(0, n)])
            assert np.array_equal(ds, s)
        ss, _ = fastans.decode_segments(spec, g.words, [t], [Run(0, n)], g.checkpoints, 2)
        assert np.array_equal(ss, s)


def test_interleaving_costs_about_the_flush():
    """N states cost about N - 1 extra final states (and rANS about S - W bits per state), nothing more."""
    for family in ("tans8", "rans16"):
        bits = {}
        for n in (1, 2, 4, 8):
            spec = _codec(family, n)
            tables, runs, s, e = _fixed_stream(spec)
            bits[n] = spec.coder().encode(tables, runs, s, e).n_words * spec.word_bits
        for n in (2, 4, 8):
            flush = n * (-(-spec.state_bits // spec.word_bits)) * spec.word_bits
            assert abs(bits[n] - bits[1]) <= flush + 2 * spec.word_bits + 0.002 * bits[1], (family, n, bits)


def test_bulk_lanes_refuse_interleaved_states():
    spec = parse_codec("tans8x2")
    tables, runs, s, e = _fixed_stream(spec)
    with pytest.raises(ConfigError, match="tans8x2 interleaves 2 states in one stream; the bulk lanes"):
        encode_lanes(spec, tables[0], s[:3001], e[:3001], 4)
    with pytest.raises(ConfigError, match="bulk lanes"):
        decode_lanes(spec, tables[0], [np.zeros(3, np.uint16)], 3)


# ------------------------------------------------------------------------------------------------
# container

@pytest.fixture(scope="module")
def reference(stories, tmp_path_factory):
    d = tmp_path_factory.mktemp("ref")
    compress_checkpoint(stories, d / "m.ansf", "tans8")
    r = ansforge("decompress", d / "m.ansf", "-o", d / "m.safetensors")
    assert r.returncode == 0, r.stderr
    return (d / "m.safetensors").read_bytes()


@pytest.mark.parametrize("codec", ["tans8x4", "rans16x2"])
def test_cli_round_trip_on_stories(stories, tmp_path, reference, codec):
    f = tmp_path / "m.ansf"
    r = ansforge("compress", "--model", stories, "--codec", codec, "--checkpoint-interval", "20000", "-o", f)
    assert r.returncode == 0, r.stderr
    blob = f.read_bytes()
    assert struct.unpack_from("<I", blob, 8)[0] == VERSION_STATES
    c = open_container(f)
    st = c.streams[0]
    assert st.spec == parse_codec(codec) and len(st.checkpoints) == (st.n_pairs - 1) // 20000
    assert all(isinstance(cp.state, tuple) and len(cp.state) == st.spec.states for cp in st.checkpoints)
    rec = split_records(blob).records[-1]
    assert rec["codec"]["states"] == st.spec.states
    assert all(isinstance(cp[3], list) and len(cp[3]) == st.spec.states for cp in rec["checkpoints"])
    for threads in ("1", "3"):
        r = ansforge("decompress", f, "-o", tmp_path / "m.safetensors", "--threads", threads, "--force")
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "m.safetensors").read_bytes() == reference
    # Random access from each checkpoint: pair i's state is lane i mod N's.
    s_all, e_all = c.decode_stream(st)
    for cp in st.checkpoints:
        for start in (cp.pair, cp.pair + 1, cp.pair + st.spec.states - 1):
            s, e = c.decode_stream(st, start, 50)
            assert np.array_equal(s, s_all[start:start + 50]) and np.array_equal(e, e_all[start:start + 50])
    name = c.names[-1]
    full = c.read(name).ravel()
    assert np.array_equal(c.decode_range(name, full.size - 7, 7), full[-7:])


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory):
    """A small tans8x2 container (bf16 and fp32 tensors, checkpoints every 300 pairs)."""
    from ansforge.model.llm.checkpoint import write_safetensors
    d = tmp_path_factory.mktemp("x2")
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((40, 50)) * 0.02).astype(np.float32)
    write_safetensors(d / "m.safetensors", [("a", "F32", a.shape)], lambda i, n: [a])
    compress_checkpoint(d / "m.safetensors", d / "m.ansf", "tans8x2", checkpoint_interval=300)
    return d / "m.ansf"



@pytest.mark.parametrize("edit, needle", [
    (lambda cps: cps[0].__setitem__(3, cps[0][3][:1]), "holds 1 states, codec tans8x2 has 2"),
    (lambda cps: cps[0].__setitem__(3, cps[0][3] + [0]), "holds 3 states, codec tans8x2 has 2"),
    (lambda cps: cps[0].__setitem__(3, [cps[0][3][0], 256]), "does not fit"),
    (lambda cps: cps[0].__setitem__(3, [-1, 0]), "does not fit"),
    (lambda cps: cps[0].__setitem__(3, 7), "is not [pair, word, bit, [2 states]]"),
    (lambda cps: cps[0].__setitem__(3, [1.5, 0]), "is not [pair, word, bit, [2 states]]"),
])
def test_crafted_checkpoint_states_are_refused(interleaved, tmp_path, edit, needle):
    def fn(r):
        edit(r.records[r.n_tensors]["checkpoints"])
    bad = edit_records(interleaved, tmp_path / "bad.ansf", fn)
    with pytest.raises(ContainerError, match="checkpoint"):
        open_container(bad)
    one_line_error(ansforge("decompress", bad, "-o", tmp_path / "o.safetensors"), "bad.ansf", needle)


def test_states_need_version_5_and_one_state_records_stay_plain(interleaved, tmp_path):
    def older(r):
        r.version = 3
    bad = edit_records(interleaved, tmp_path / "v3.ansf", older)
    one_line_error(ansforge("inspect", bad), "v3.ansf", "tans8x2 interleaves 2 states, which needs container "
                                                        "version 5, not 3")

    def one_state(r):  # states dropped from the codec, N-state checkpoints left: refused as malformed
        del r.records[r.n_tensors]["codec"]["states"]
        r.records[r.n_tensors]["codec"]["name"] = "tans8"
    bad = edit_records(interleaved, tmp_path / "n1.ansf", one_state)
    one_line_error(ansforge("inspect", bad), "n1.ansf", "is not [pair, word, bit, state]")


# ------------------------------------------------------------------------------------------------
# the hardware paths refuse N > 1

def test_hardware_paths_refuse_interleaved_states(stories, interleaved, tmp_path):
    """Each core takes the codecs its row of the core registry names (tANS any N = 1 .. 16; the rANS decoder
    1 or 5 to 16, the rANS encoder 1 or 16: their own test files test those); every other count is refused
    in one line naming which cores take what, and the lanes and the subsystem in one line naming the counts."""
    from ansforge.hdl.cores import build_core, takes_text
    from ansforge.sim.lanes import decode_container_lanes
    from ansforge.hdl.rans import ENCODER_XN_STATES, XN_STATES
    assert XN_STATES == tuple(range(5, 17)) and ENCODER_XN_STATES == (16,)
    line = "codec {}: no {} core takes it ({}; docs/bitstream.md §8)"
    for codec, role in (("rans16x4", "decoder"), ("rans16x2", "decoder"), ("rans24x3", "encoder")):
        spec = parse_codec(codec)
        want = line.format(codec, role, takes_text("rans", role))
        with pytest.raises(ConfigError, match=re.escape(want)):
            build_core(spec, role, programmable=True)
    c = open_container(interleaved)
    with pytest.raises(ConfigError, match="codec tans8x2 interleaves 2 states"):
        decode_container_lanes(c, None, lanes=2)
    one_line_error(ansforge("verilog", "--top", "subsystem", "--codec", "rans16x2", "-o", tmp_path / "x.v"),
                    "--" + line.format("rans16x2", "decoder", takes_text("rans", "decoder")))
    for args, role in ((("verilog", "--core", "rans-decoder", "--codec", "rans16x4", "-o", tmp_path / "x.v"), "decoder"),
                       (("simulate", "--core", "rans-decoder", "--codec", "rans16x4", "--model", stories), "decoder"),
                       (("simulate", "--core", "rans-encoder", "--codec", "rans16x4", "--model", stories), "encoder"),
                       (("testbench", "--core", "rans-encoder", "--codec", "rans24x3", "--model", stories,
                         "-o", tmp_path / "tb"), "encoder")):
        codec = args[args.index("--codec") + 1]
        one_line_error(ansforge(*args), "--" + line.format(codec, role, takes_text("rans", role)))
    assert not (tmp_path / "x.v").exists() and not (tmp_path / "tb").exists()


@pytest.mark.parametrize("codec", ["tans8x2", "rans16x3"])
def test_fuzzed_interleaved_containers_raise_only_our_errors(tmp_path, codec):
    """Structured edits, flips, truncations and appended bytes of an interleaved container (its N-state
    checkpoints included): only AnsforgeError, none over 5 s."""
    from ansforge.analysis.fuzz import fuzz_container
    from ansforge.model.llm.checkpoint import write_safetensors
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((30, 40)) * 0.02).astype(np.float32)
    b = (rng.standard_normal(500) * 0.1).astype(np.float32)
    write_safetensors(tmp_path / "m.safetensors", [("a", "F32", a.shape), ("b", "F32", b.shape)],
                      lambda i, n: [a if n == "a" else b])
    compress_checkpoint(tmp_path / "m.safetensors", tmp_path / "m.ansf", codec, checkpoint_interval=97)
    rep = fuzz_container((tmp_path / "m.ansf").read_bytes(), tmp_path, 300, seed=len(codec), measure_memory=False)
    assert rep.crashes == [], rep.summary() + "\n" + "\n".join(map(str, rep.crashes[:10]))
    assert rep.slow == [] and rep.max_seconds < 5.0, rep.summary()
    assert rep.raised > 200, rep.summary()
