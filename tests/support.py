"""Helpers the test modules share (a test module imports no other test module's names).

* :func:`ansforge` runs the command line as a child process; :func:`one_line_error` checks a refusal
  (exit status 2, one ``ansforge: error:`` line naming what it must).
* :func:`rans_table`, :func:`crowded_freqs`: rANS tables for the core tests.
* :func:`corrupt_words`: a random corruption of a word stream.
* :func:`reset_mid_command`: a core reset in the middle of a command, then the next one.
* :func:`words_per_pair`: the words each pair of an interleaved rANS stream pushes (the tests' own count).
* :func:`queued_job`, :func:`idle_clocks`, :func:`check_done_once_per_command`: commands queued back to back.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from amaranth.hdl import Module, ResetInserter, ResetSignal, Signal
from amaranth.sim import Simulator

from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.codetable import CodeTable
from ansforge.model.coding.rans import RansParams, RansTable
from ansforge.model.coding.stream import Run
from ansforge.model.dtypes.pairs import PAIR_FORMATS
from ansforge.model.dtypes.quantized import FP8_FORMATS
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.formal.contract import CoreContract
from ansforge.sim.jobs import CoreJob, build_core, make_job
from ansforge.sim.streams import stream_put

__all__ = ["ansforge", "one_line_error", "rans_table", "crowded_freqs", "corrupt_words", "reset_mid_command",
           "words_per_pair", "CODECS", "queued_job", "idle_clocks", "check_done_once_per_command"]


def ansforge(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "ansforge", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ansforge: error: "), r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert str(n) in lines[0], (n, lines[0])
    return lines[0]


def rans_table(freqs, P=16, params=None, extra=8):
    params = params or RansParams(48, 32, P)
    t = RansTable(CodeTable(tuple(range(len(freqs))), (), 0, tuple(int(v) for v in freqs), P), params)
    t.extra_bits = np.full(len(freqs), extra, dtype=np.int64)
    return t


def crowded_freqs(rng, n=64, P=16):
    """A table whose buckets meet many symbols: runs of frequency-1..3 symbols between big ones."""
    f = np.where(rng.random(n) < 0.8, rng.integers(1, 4, size=n), rng.integers(200, 2500, size=n))
    f[-1] = 0
    f[-1] += (1 << P) - f.sum()
    assert f[-1] > 0
    return f


def corrupt_words(rng, words: np.ndarray, word_bits: int) -> tuple[str, np.ndarray]:
    mode = rng.choice(["flip", "flip", "burst", "truncate", "append", "drop_top"])
    w = words.copy()
    if mode == "flip":
        for _ in range(int(rng.integers(1, 4))):
            w[rng.integers(w.size)] ^= np.uint64(1 << int(rng.integers(word_bits)))
    elif mode == "burst":
        w[rng.integers(w.size)] = np.uint64(int(rng.integers(1 << word_bits)))
    elif mode == "truncate":
        w = w[:max(0, w.size - int(rng.integers(1, 5)))]
    elif mode == "drop_top":
        w = w[int(rng.integers(1, 3)):]
    else:
        w = np.concatenate([w, rng.integers(0, 1 << word_bits, size=int(rng.integers(1, 5)), dtype=np.uint64)])
    return str(mode), w


def reset_mid_command(job, split: int, mid_clocks: int, *, hold_output: bool = False) -> dict:
    """Load ``job``'s programmable core, offer its two commands (the second queued), reset it after
    ``mid_clocks`` clocks, give the second command again with its words (``job.inputs[split:]``) and
    run to its ``done``, with the core's contract (:class:`~ansforge.sim.formal.contract.CoreContract`)
    asserted throughout. Returns ``{"dones": [phase …], "got": [(phase, payload) …], "status"}``
    (phase 0 before the reset, 1 the second command, 2 four clocks after); ``status`` is a decoder's
    last one. ``hold_output``: ``o`` is not taken before the reset (the core is reset holding an output).
    The reset tests of the one-state and the interleaved cores share it."""
    core = job.core
    decoder = hasattr(core, "status")
    rst = Signal()
    top = Module()
    top.submodules.core = ResetInserter({"sync": rst})(core)
    # The core's role's contract watches the whole run, the reset included.
    top.submodules.contract = CoreContract(core, rst=rst | ResetSignal("sync"), sampled=True)
    seen = {"dones": [], "got": [], "status": None}

    async def run(ctx, cmds, words, clocks, phase):
        """Offer ``cmds`` and ``words`` (one per clock as accepted), take every output, for ``clocks``
        clocks or, with ``clocks=None``, until a ``done``."""
        ctx.set(core.o.ready, not (hold_output and phase == 0))
        kc = kw = 0
        t = 0
        while clocks is None or t < clocks:
            ctx.set(core.cmd.valid, kc < len(cmds))
            if kc < len(cmds):
                ctx.set(core.cmd.payload.as_value(), cmds[kc])
            ctx.set(core.i.valid, kw < len(words))
            if kw < len(words):
                ctx.set(core.i.payload.as_value(), words[kw])
            _, _, cv, cr, iv, ir, ov, op, d, st = await ctx.tick().sample(
                core.cmd.valid, core.cmd.ready, core.i.valid, core.i.ready, core.o.valid,
                core.o.payload.as_value(), core.done, core.status if decoder else core.done)
            kc += int(cv and cr)
            kw += int(iv and ir)
            if ov and (phase or not hold_output):
                seen["got"].append((phase, int(op)))
            if d:
                seen["dones"].append(phase)
                seen["status"] = int(getattr(st, "value", st))
                if clocks is None:
                    break
            t += 1
        ctx.set(core.cmd.valid, 0)
        ctx.set(core.i.valid, 0)
        return kc, kw

    async def drive(ctx):
        for name, writes in job.cfg.items():
            for w in writes:
                await stream_put(ctx, getattr(core, name), w)
        data = job.inputs.tolist()
        kc, kw = await run(ctx, job.commands, data, mid_clocks, 0)   # mid-run of the first, the second queued
        for _ in range(500 if hold_output else 0):             # until the core holds an output
            if ctx.get(core.o.valid):
                break
            c, w = await run(ctx, job.commands[kc:], data[kw:], 1, 0)
            kc, kw = kc + c, kw + w
        ctx.set(rst, 1)
        await ctx.tick().repeat(2)
        ctx.set(rst, 0)
        await run(ctx, job.commands[1:], data[split:], None, 1)
        await run(ctx, [], [], 4, 2)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(drive)
    sim.run()
    return seen


def words_per_pair(params, table, s, e) -> np.ndarray:
    """Per pair of ``s, e``: the words its encoding pushes (0, 1 or 2: the chunk's and the symbol's),
    with the golden model's arithmetic (``model/coding/rans.py``, ``RansCoder.encode``) per lane, the
    tests' own count. A decoder pops exactly these words for the pair (the stack is LIFO)."""
    S, W, P, n_st = params.state_bits, params.word_bits, params.precision_bits, params.states
    xs = [1 << (S - W)] * n_st
    lane, moved = (len(s) - 1) % n_st if len(s) else 0, np.zeros(len(s), dtype=np.int64)
    for j in range(len(s) - 1, -1, -1):
        sym, x, k = int(s[j]), xs[lane], int(table.extra_bits[int(s[j])])
        pc = ps = False
        if k:
            fu = 1 << (P - k)
            pc = x >> (S - P) >= fu
            x = x >> W if pc else x
            x = ((x // fu) << P) | ((int(e[j]) & ((1 << k) - 1)) * fu + x % fu)
        f = int(table.freqs[sym])
        ps = x >> (S - P) >= f
        x = x >> W if ps else x
        xs[lane] = ((x // f) << P) | (int(table.cum[sym]) + x % f)
        moved[j] = pc + ps
        lane = lane - 1 if lane else n_st - 1
    return moved


#: The codec of each family the command-queue checks use by default (the paper's one-state ones).
CODECS = {"tans": "tans8", "rans": "rans16"}


def _codec_table(kind, rng, n_codes=20, codec=None, *, direct=False):
    spec = parse_codec(codec or CODECS[kind.split("-")[0]])
    # ``direct``: counts within a factor of 10, drawn again until every code has a symbol of its own (the
    # table builder may still merge rare codes behind an escape where that codes shorter): no escape
    # symbol, 8 extra bits, the paper's configuration (R + K = W for tans8).
    for _ in range(100):
        counts = (rng.integers(100, 1000, size=n_codes) if direct else rng.integers(1, 1000, size=n_codes) ** 2).astype(np.int64)
        ct, table = spec.tables(counts, 8)
        if not direct or int(table.extra_bits.max()) <= 8:
            break
    return spec, ct, table, counts


def queued_job(kind: str, commands: int = 4, pairs: int = 40, seed: int = 1, *, programmable: bool = False,
               codec: str | None = None, paper: bool = False):
    """``commands`` independent streams of ``pairs`` pairs each, as one job (commands back to back), for
    ``codec`` (default: :data:`CODECS`'s of the core's family). ``paper``: a table of 16 codes, each its
    own symbol, and a core of 8 extra bits (the paper's configuration); else 20 codes, the rare ones
    behind an escape symbol, and the extra bits the table needs."""
    rng = np.random.default_rng(seed)
    spec, ct, table, counts = _codec_table(kind, rng, 16 if paper else 20, codec=codec, direct=paper)
    assert not paper or int(table.extra_bits.max()) <= 8, "no table of direct symbols drawn"
    core = build_core(kind, spec, table, programmable=programmable, max_extra_bits=8 if paper else None)
    parts = []
    for _ in range(commands):
        s, e = ct.to_symbols(rng.choice(counts.size, size=pairs, p=counts / counts.sum()), rng.integers(0, 256, size=pairs))
        parts.append(make_job(kind, spec, table, s, e, core=core))
    job = CoreJob(kind, core, cfg=parts[0].cfg, pairs=commands * pairs, words=sum(p.words for p in parts))
    job.commands = [c for p in parts for c in p.commands]
    job.inputs = np.concatenate([p.inputs for p in parts])
    job.expected = np.concatenate([p.expected for p in parts])
    job.expected_status = [s for p in parts for s in p.expected_status]
    job.per_command_inputs = [len(p.inputs) for p in parts]
    job.per_command_outputs = [len(p.expected) for p in parts]
    return job


def idle_clocks(kind: str, commands: int = 4, pairs: int = 40, codec: str | None = None) -> list[int]:
    """Bit-exact run of :func:`queued_job`; the idle clocks at each command boundary."""
    job = queued_job(kind, commands, pairs, codec=codec)
    core = job.core
    port = core.o if kind.endswith("decoder") else core.i
    res = AmaranthEngine().run(job, trace={"pair": port.valid & port.ready})
    ok, errs = job.check(res)
    assert ok, errs
    t = np.flatnonzero(res.trace["pair"])
    assert t.size == job.pairs
    return [int(t[k * pairs] - t[k * pairs - 1] - 1) for k in range(1, commands)]


def check_done_once_per_command(kind: str, codec: str | None = None) -> None:
    """``done`` is high for exactly one clock per command, and never before the command's last
    pair has left ``o`` (decoders) / its last word has left ``o`` (encoders)."""
    job = queued_job(kind, commands=3, pairs=12, codec=codec)
    core = job.core
    res = AmaranthEngine().run(job, trace={"done": core.done, "o": core.o.valid & core.o.ready})
    assert job.check(res)[0]
    done, o = res.trace["done"], res.trace["o"]
    assert int(done.sum()) == 3
    # the outputs of command k are all out before its done: count outputs before each done clock
    per_cmd = np.cumsum([len(job.expected) // 3] * 3) if kind.endswith("decoder") else None
    outs_before = [int(o[:c].sum()) for c in np.flatnonzero(done)]
    if per_cmd is not None:
        assert all(b >= n for b, n in zip(outs_before, per_cmd)), (outs_before, per_cmd)
    assert outs_before == sorted(outs_before)


def random_stream(spec, rng, sizes, fmt: str = "bf16", n_codes_max: int = 60):
    """Tensors of skewed random exponent distributions (escape symbols where a code is rare) as one stream
    of ``spec``, ``sizes[i]`` pairs in tensor ``i``, pairs of ``fmt`` (a float's or an fp8 format's name).
    Returns (tables, symbols, extras, runs, code tables, exponent tables)."""
    f = {**PAIR_FORMATS, **FP8_FORMATS}[fmt]
    tables, syms, exs, runs, cts, exps = [], [], [], [], [], []
    for i, n in enumerate(sizes):
        n_codes = int(rng.integers(1, min(n_codes_max, 1 << f.exponent_bits) + 1))
        p = rng.dirichlet(np.full(n_codes, 0.3))
        codes = rng.choice(n_codes, size=n, p=p).astype(np.uint16)
        counts = np.bincount(codes, minlength=n_codes).astype(np.int64)
        extra = rng.integers(0, 1 << f.extra_bits, n, dtype=np.uint64)
        ct, t = spec.tables(counts, f.extra_bits)
        s, e = ct.to_symbols(codes, extra)
        tables.append(t), syms.append(s), exs.append(e), runs.append(Run(i, s.size)), cts.append(ct)
        exps.append(np.sort(rng.choice(1 << f.exponent_bits, size=n_codes, replace=False)))
    return tables, np.concatenate(syms), np.concatenate(exs), runs, cts, exps


def corrupt_blobs(good: bytes, rng, cases: int):
    """``cases`` damaged copies of ``good``: every tenth cut short at a random length, the others with one
    byte XORed with a random non-zero value."""
    for case in range(cases):
        blob = bytearray(good)
        if case % 10 == 9:
            blob = blob[:int(rng.integers(0, len(blob)))]
        else:
            blob[int(rng.integers(0, len(blob)))] ^= int(rng.integers(1, 256))
        yield bytes(blob)


def check_fast_decode(spec, encoded, tables, runs, symbols, extras, rng, checkpoints: int = 3, skip: int = 40) -> None:
    """``fastans.decode`` (the backend in use) of ``encoded`` (the golden encoder's stream) against the
    golden decoder and the pairs coded: the whole stream, then from each of the first ``checkpoints``
    random-access checkpoints a random range starting up to ``skip`` pairs past it."""
    from ansforge.model.coding import fastans

    golden = spec.coder()
    gs, ge, gc = golden.decode(encoded.words, tables, runs)
    fs, fe, fc = fastans.decode(spec, encoded.words, tables, runs)
    assert np.array_equal(fs, gs) and np.array_equal(fe, ge) and fc == gc
    assert np.array_equal(fs, symbols) and np.array_equal(fe, extras)
    for cp in encoded.checkpoints[:checkpoints]:
        start = cp.pair + int(rng.integers(0, skip))
        count = int(rng.integers(0, symbols.size - start + 1))
        r_g = golden.decode(encoded.words, tables, runs, start, count, cp)
        r_f = fastans.decode(spec, encoded.words, tables, runs, start, count, cp)
        assert np.array_equal(r_f[0], r_g[0]) and np.array_equal(r_f[1], r_g[1]) and r_f[2] == r_g[2]
