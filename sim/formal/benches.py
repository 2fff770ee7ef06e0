"""The harness scaffolding every property builds on: :class:`Bench` (the module, its sync and
reset-less ``past`` domains, latched checks), the cores' free environment, and the table models
(:class:`LegalTable`, any legal rANS table; :class:`LocalTansTable`, any legal tANS table seen through
the rows a run reads; :class:`TablePlatform`) with the shadow bookkeeping the lemmas share
(:class:`CommandLedger`, :func:`load_tracker`).
"""

from __future__ import annotations

from amaranth.hdl import (Array, Assert, Assume, Cat, Cover, ClockDomain, ClockSignal, Const, Module, Mux, Shape,
                          Signal, Value)
from amaranth.hdl._ast import AnyConst, AnySeq
from amaranth.lib import data
from amaranth.lib.memory import Memory
from amaranth.utils import bits_for as _bits

from ...hdl.common import DecodeStatus
from .contract import streams_of, transfer_of
from .params import PINNED_RANS_TABLE, PINNED_TANS_EXTRA, PINNED_TANS_SPREAD, SMALL, XN_BAKED, small_core


# -- the harness's bench ---------------------------------------------------------------------------


class Bench:
    """A harness module: the sync domain (clock port; reset free or tied low), a reset-less ``past``
    domain for the harness's own registers, and helpers for environments and checks."""

    def __init__(self, *, free_reset: bool):
        self.m = m = Module()
        m.domains.sync = self.cd = ClockDomain("sync")
        m.domains.past = ClockDomain("past", reset_less=True)
        m.d.comb += ClockSignal("past").eq(ClockSignal("sync"))
        self.rst = self.cd.rst
        if free_reset:
            m.d.comb += self.rst.eq(AnySeq(1))
        self.started = Signal(name="started")         # low in the first clock only
        m.d.past += self.started.eq(1)
        self.p_rst = self.past(self.rst, "rst")
        self.dut_module = None                        # the core's module, where a harness elaborates it
        self.checked: list[str] = []                    # output streams whose rules are asserted
        self.covers: list[str] = []                     # what the harness's Cover statements say
        self.latched: list[str] = []                    # messages of the checks made by :meth:`check`
        self.cycle = Signal(8, name="cycle")            # clocks since the start, saturating
        self.platform = None                            # a :class:`TablePlatform` for direct tables
        #: A yosys selection of wires whose registers start in any state (the ``sat`` runner drops their
        #: ``init`` values): a harness that quantifies over every state of a block, for a property that a
        #: run from there settles (every reachable state is one of them). ``None``: every register
        #: starts at its ``init`` value.
        self.free_start: str | None = None
        m.d.past += self.cycle.eq(Mux(self.cycle == 255, 255, self.cycle + 1))

    def check(self, enable, test, message: str) -> None:
        """``test`` must hold in every clock where ``enable`` is high, *latched*: a violation sets a
        register ``bad_<i>`` that an ``Assert`` sees in every later clock (the report names the clock
        of the violation itself, read back from the trace). Checking
        the last clock of a run alone (SymbiYosys's ``skip``) then checks every clock of it: one
        solver call over the whole unrolled run instead of one per clock."""
        m = self.m
        bad = Signal(name=f"bad_{len(self.latched)}")
        self.latched.append(message)
        m.d.past += bad.eq(bad | (enable & ~test))
        m.d.comb += Assert(~bad, message)

    def cover(self, test, what: str) -> None:
        """A ``Cover``: some trace within the depth makes ``test`` true (the harness is not vacuous)."""
        # Also latched in ``covered_<i>``, for the ``sat`` runner (:func:`_sat_covers`), which asks for
        # a trace where that register is high in the last clock.
        reached = Signal(name=f"covered_{len(self.covers)}", attrs={"keep": 1})    # nothing reads it
        self.m.d.past += reached.eq(reached | test)
        self.covers.append(what)
        self.m.d.comb += Cover(test, what)

    def past(self, value, name: str) -> Signal:
        """``value`` one clock ago (0 in the first clock)."""
        v = Value.cast(value)
        r = Signal(len(v), name=f"past_{name}")
        self.m.d.past += r.eq(v)
        return r

    def source(self, port, name: str, *, valid=None, payload=None) -> None:
        """Drive the input stream ``port`` (free where ``valid``/``payload`` are not given) and assume
        the stream rules of it: once valid, it stays valid with the same payload until taken."""
        m = self.m
        m.d.comb += [port.valid.eq(AnySeq(1) if valid is None else valid),
                     port.p.eq(AnySeq(len(Value.cast(port.p))) if payload is None else payload)]
        held = self.past(port.valid & ~port.ready, f"{name}_held")
        p_payload = self.past(port.p, f"{name}_payload")
        with m.If(self.started & held & ~self.p_rst):
            m.d.comb += Assume(port.valid & (Value.cast(port.p) == p_payload))

    def check_output(self, port, name: str) -> None:
        """Assert the stream rules of the output stream ``port``."""
        m = self.m
        self.checked.append(name)
        held = self.past(port.valid & ~port.ready, f"{name}_held")
        p_payload = self.past(port.p, f"{name}_payload")
        with m.If(self.started & held & ~self.p_rst):
            m.d.comb += Assert(port.valid, f"{name}.valid retracted before the transfer")
            m.d.comb += Assert(Value.cast(port.p) == p_payload, f"{name}.payload changed while valid & ~ready")
        self.cover(self.started & held & ~self.p_rst & transfer_of(port), f"{name}: held under back-pressure, then taken")


# -- stream rules and progress (one core, free environment) ----------------------------------------


def free_core(core_name: str, mutant: str | None, *, pinned: bool = False,
               elaborated: bool = False) -> tuple[Bench, object, list]:
    """A core with every input free (input streams obeying the stream rules) and a free reset; with
    ``pinned`` (rANS), :data:`PINNED_RANS_TABLE` is written first and the table is not written after.
    With ``elaborated`` the core is elaborated here (its module in the harness; the harness may read
    its blocks through the module's ``submodules``: :attr:`Bench.dut_module`)."""
    b = Bench(free_reset=True)
    m = b.m
    dut = small_core(core_name, baked=pinned or core_name in XN_BAKED)
    m.submodules.dut = b.dut_module = elaborated_block(dut) if elaborated else dut
    ins, outs = streams_of(dut)
    if core_name in XN_BAKED:
        m.d.comb += dut.cfg.valid.eq(0)
        ins = [(n, p) for n, p in ins if n != "cfg"]
    if pinned:
        table = LegalTable(b, "rans", pinned=True)
        table.program(dut, role="pinned")
        m.d.comb += Assume(~table.prog | (~dut.cmd.valid & ~b.rst))
        ins = [(n, p) for n, p in ins if n != "cfg"]
    for name, port in ins:
        b.source(port, name)
    for name, port in outs:
        m.d.comb += port.ready.eq(AnySeq(1))
    return b, dut, outs


class LegalTable:
    """A legal table of the small configuration, written into the cores through their ``cfg`` streams
    in the first :attr:`clocks` clocks, one entry per clock: rANS, any legal one (``AnyConst``) or
    :data:`PINNED_RANS_TABLE`; tANS, the pinned one only (an arbitrary tANS table is
    :class:`LocalTansTable`, which every proof over an arbitrary table uses: ``docs/formal.md``, Round 4).
    """

    def __init__(self, b: Bench, family: str, *, pinned: bool = False, direct: bool = False):
        if family == "tans" and not pinned:
            raise ValueError("an arbitrary tANS table is a LocalTansTable")
        self.b, self.family, self.direct = b, family, direct
        m = b.m
        sh = SMALL[family]
        self.n_sym = n = sh["max_symbols"]
        K = sh["max_extra_bits"]
        self.k = [Signal(_bits(K), name=f"k{s}") for s in range(n)]
        pinned_k = PINNED_TANS_EXTRA if family == "tans" else [k for _, k in PINNED_RANS_TABLE]
        for s in range(n):
            # A pinned table is made of constants (yosys folds them before the solver sees them).
            m.d.comb += [self.k[s].eq(min(pinned_k[s], K) if pinned else AnyConst(len(self.k[s]))), Assume(self.k[s] <= K)]
        self.prog = Signal(name="programming")
        self.t = Signal(8, name="prog_t")
        if family == "tans":
            R = sh["table_log"]
            L = 1 << R
            self.R, self.L = R, L
            # direct: the memories hold the table from the first clock (:class:`TablePlatform`), and
            # one arbitrary row (slot ``j0``, symbol row ``q0``) is written through ``cfg`` in one
            # clock, so that the write path is checked on every row without 32 write clocks.
            self.clocks = 1 if direct else L
            if direct:
                self.j0, self.q0 = Signal(R, name="written_slot"), Signal(_bits(n - 1), name="written_symbol")
                m.d.comb += [self.j0.eq(AnyConst(R)), self.q0.eq(AnyConst(len(self.q0)))]
            # The table as the encoder holds it: slots ``cum[s] .. cum[s] + f[s] - 1`` belong to symbol
            # ``s`` and slot ``j`` holds state ``state[j]`` (the pinned spread read symbol by symbol).
            # The decoder's row of ``state[j]`` follows from ``j`` alone
            # (``y = f[s] + j - cum[s]``), so the inverse relation is built in, not searched for.
            order = sorted(range(L), key=lambda x: (PINNED_TANS_SPREAD[x], x))
            pin_f = [PINNED_TANS_SPREAD.count(q) for q in range(n)]
            self.freq = [Signal(R + 1, name=f"f{q}") for q in range(n)]
            self.state = [Signal(R, name=f"slot{j}_state") for j in range(L)]
            for q in range(n):
                m.d.comb += self.freq[q].eq(pin_f[q])
            for j in range(L):
                m.d.comb += self.state[j].eq(order[j])
        else:
            P = sh["precision_bits"]
            self.P = P
            self.clocks = 0 if pinned else n        # pinned: baked into the cores (small_core(baked=True))
            self.used = Signal(range(n + 1), name="symbols_used")
            m.d.comb += [self.used.eq(n if pinned else AnyConst(len(self.used))),
                         Assume((self.used >= 1) & (self.used <= n))]
            self.freq = [Signal(P + 1, name=f"f{s}") for s in range(n)]
            for s in range(n):
                m.d.comb += self.freq[s].eq(PINNED_RANS_TABLE[s][0] if pinned else AnyConst(P + 1))
                m.d.comb += Assume(Mux(s < self.used, self.freq[s] >= 1, self.freq[s] == 0))
                with m.If(s >= self.used):
                    m.d.comb += Assume(self.k[s] == 0)
            m.d.comb += Assume(sum(self.freq) == (1 << P))
        self.cum = [Const(0, 8)]
        for s in range(n - 1):
            c = Signal(8, name=f"cum{s + 1}")
            m.d.comb += c.eq(self.cum[-1] + self.freq[s])
            self.cum.append(c)
        m.d.comb += self.prog.eq(self.t < self.clocks)
        m.d.past += self.t.eq(Mux(self.prog, self.t + 1, self.t))

    def legal_pair(self, symbol, extra) -> Value:
        """The pair codes a symbol of the table (non-zero frequency) with extra bits that fit its width."""
        ok = Const(0, 1)
        for s in range(self.n_sym):
            ok = ok | ((symbol == s) & (self.freq[s] != 0) & ((extra >> self.k[s]) == 0))
        return ok

    def program(self, core, *, role: str) -> None:
        """Drive ``core``'s table-write stream(s) for this table while :attr:`prog` is high (no write after)."""
        m = self.b.m
        t = self.t
        if self.family == "rans" and self.clocks == 0:
            m.d.comb += core.cfg.valid.eq(0)
            return
        if self.family == "rans":
            P = self.P
            at = Signal(range(self.n_sym), name=f"{role}_at")
            m.d.comb += at.eq(t[:len(at)])
            f = Array(self.freq)[at]
            c = Mux(at < self.used, Array(self.cum)[at], 1 << P)
            k = Array(self.k)[at]
            m.d.comb += [core.cfg.valid.eq(self.prog), core.cfg.p.addr.eq(at),
                         core.cfg.p.data.eq(f | (c << (P + 1)) | (k << (2 * P + 2)))]
            return
        if self.direct:
            self._present(core, role)
        R, L = self.R, self.L
        j = self.j0 if self.direct else t[:R]           # the slot written this clock
        s = Signal(range(self.n_sym), name=f"{role}_slot_symbol")
        for q in range(1, self.n_sym):                  # the last symbol whose run starts at or before j
            with m.If((self.cum[q] <= j) & (self.freq[q] != 0)):
                m.d.comb += s.eq(q)
        f = Array(self.freq)[s]
        k = Array(self.k)[s]
        x = Array(self.state)[j]
        if role == "dec":
            y = Signal(R + 2, name="dec_y")
            m.d.comb += y.eq(f + j - Array(self.cum)[s])
            nb = Signal(range(R + 2), name="dec_nb")
            m.d.comb += nb.eq(R + 1 - bit_length_of(m, y, "dec_y"))
            d = core.cfg.p.data
            m.d.comb += [core.cfg.valid.eq(self.prog), core.cfg.p.addr.eq(x), d.symbol.eq(s), d.nb.eq(nb),
                         d.base.eq(((y << nb) - L)[:R]), d.need.eq(nb + k)]
        else:
            sym_at = Signal(range(self.n_sym), name="enc_sym_at")
            m.d.comb += sym_at.eq(self.q0 if self.direct else t[:len(sym_at)])
            fs = Array(self.freq)[sym_at]
            nbh = Signal(range(R + 2), name="enc_nb_high")
            m.d.comb += nbh.eq(R + 1 - bit_length_of(m, fs, "enc_f"))
            e = core.sym_cfg.p.data
            m.d.comb += [core.sym_cfg.valid.eq(self.prog & (t < self.n_sym)), core.sym_cfg.p.addr.eq(sym_at),
                         e.freq.eq(fs), e.cum.eq(Array(self.cum)[sym_at]), e.nb_high.eq(nbh),
                         e.threshold.eq(fs << nbh), e.k.eq(Array(self.k)[sym_at])]
            m.d.comb += [core.state_cfg.valid.eq(self.prog), core.state_cfg.p.addr.eq(j),
                         core.state_cfg.p.data.eq(x)]

    def _slot_symbol(self, j: int) -> Value:
        """The symbol whose run of slots holds slot ``j`` (a constant)."""
        m = self.b.m
        s = Signal(range(self.n_sym), name=f"slot{j}_symbol")
        for q in range(1, self.n_sym):
            with m.If((self.cum[q] <= j) & (self.freq[q] != 0)):
                m.d.comb += s.eq(q)
        return s

    def _present(self, core, role: str) -> None:
        """tANS, ``direct``: the table memories of ``core`` hold this table from the first clock
        (:class:`TablePlatform` builds them as registers whose contents are these values); :meth:`program`
        then writes one row of it through ``cfg``."""
        b, m = self.b, self.b.m
        R, L = self.R, self.L
        if b.platform is None:
            b.platform = TablePlatform()
        if role == "dec":
            layout = tans_layout(core.cfg.p.data)
            # The decoder's row of each state as a witness: its symbol and ``y`` (``AnyConst``), tied to
            # the slots by "the row of state[j] is the row slot j implies" (an ``Assume`` per slot), so
            # that the solver reads a decoded symbol off one assumption instead of inverting the
            # slot->state permutation itself.
            dsym = [Signal(range(self.n_sym), name=f"state{x}_symbol") for x in range(L)]
            dy = [Signal(R + 1, name=f"state{x}_y") for x in range(L)]
            for x in range(L):
                m.d.comb += [dsym[x].eq(AnyConst(len(dsym[x]))), dy[x].eq(AnyConst(R + 1))]
            for j in range(L):
                s = self._slot_symbol(j)
                y = Signal(R + 1, name=f"slot{j}_y")
                m.d.comb += y.eq(Array(self.freq)[s] + j - Array(self.cum)[s])
                m.d.comb += Assume((Array(dsym)[self.state[j]] == s) & (Array(dy)[self.state[j]] == y))
            words = []
            for x in range(L):
                nb = Signal(range(R + 2), name=f"state{x}_nb")
                m.d.comb += nb.eq(R + 1 - bit_length_of(m, dy[x], f"state{x}_y"))
                row = Signal(layout, name=f"dec_row{x}")
                m.d.comb += [row.symbol.eq(dsym[x]), row.nb.eq(nb), row.base.eq(((dy[x] << nb) - L)[:R]),
                             row.need.eq(nb + Array(self.k)[dsym[x]])]
                words.append(Value.cast(row))
            b.platform.contents["dec"] = words
        else:
            layout = tans_layout(core.sym_cfg.p.data)
            syms = []
            for q in range(self.n_sym):
                fs = self.freq[q]
                nbh = Signal(range(R + 2), name=f"enc_nb_high{q}")
                m.d.comb += nbh.eq(R + 1 - bit_length_of(m, fs, f"enc_f{q}"))
                e = Signal(layout, name=f"enc_sym_row{q}")
                m.d.comb += [e.freq.eq(fs), e.cum.eq(self.cum[q]), e.nb_high.eq(nbh), e.threshold.eq(fs << nbh),
                             e.k.eq(self.k[q])]
                syms.append(Value.cast(e))
            b.platform.contents["sym"] = syms
            b.platform.contents["state"] = list(self.state)


class LocalTansTable:
    """An arbitrary tANS table of the small configuration, described by what one pair's coding reads
    of it (``table="arbitrary"``; ``docs/formal.md`` *The local table*), presented as the memories'
    contents (:class:`TablePlatform`) with one arbitrary row of each memory written through ``cfg``.

    Free (``AnyConst``): a symbol ``s*`` (:attr:`sym`) with its frequency ``f`` (1 to ``L``), its first
    slot ``c`` (``c + f <= L``) and every symbol's extra width (``<= K``); the state of every slot; the
    decoder row of every state, as a witness ``(symbol, y)`` with ``y != 0``; every other symbol's
    encoder row (any bits). Assumed, for ``s*`` only (``Assume``): ``round_trip``, every slot ``j`` of
    ``s*`` (``c <= j < c + f``) has the row ``(s*, f + j - c)`` at its state; ``detection``, every
    state whose row names ``s*`` has ``f <= y < 2f`` and is the state of slot ``c + y - f``. Every
    legal table satisfies both for each of its symbols (with ``c = cum[s*]``), so with ``s*`` the
    pair's symbol (round trip) or the decoded one (detection, an ``Assume`` on ``o``) every trace of
    a legal table is a trace of this harness: what holds here holds on every legal table."""

    family = "tans"

    def __init__(self, b: Bench, prop: str, npairs: int = 1):
        assert prop in ("round_trip", "detection") and (npairs == 1 or prop == "round_trip"), (prop, npairs)
        self.b, self.prop, self.npairs = b, prop, npairs
        m = b.m
        sh = SMALL["tans"]
        self.n_sym = n = sh["max_symbols"]
        K = sh["max_extra_bits"]
        R = self.R = sh["table_log"]
        L = self.L = 1 << R
        self.clocks = 1
        self.prog = Signal(name="programming")
        self.t = Signal(8, name="prog_t")
        m.d.comb += self.prog.eq(self.t < self.clocks)
        m.d.past += self.t.eq(Mux(self.prog, self.t + 1, self.t))
        sb = _bits(n - 1)
        # One free symbol per pair (``s*_i``, its frequency and first slot); :attr:`sym`, :attr:`f`,
        # :attr:`c` are pair 0's.
        sfx = lambda i: "" if i == 0 else str(i)
        self.syms = [Signal(sb, name=f"the_symbol{sfx(i)}") for i in range(npairs)]
        self.fs = [Signal(R + 1, name=f"the_freq{sfx(i)}") for i in range(npairs)]
        self.cs = [Signal(R, name=f"the_cum{sfx(i)}") for i in range(npairs)]
        self.sym, self.f, self.c = self.syms[0], self.fs[0], self.cs[0]
        self.k = [Signal(_bits(K), name=f"k{q}") for q in range(n)]
        self.state = [Signal(R, name=f"slot{j}_state") for j in range(L)]
        self.dsym = [Signal(sb, name=f"state{x}_symbol") for x in range(L)]
        self.dy = [Signal(R + 1, name=f"state{x}_y") for x in range(L)]
        for v in self.syms + self.fs + self.cs + self.k + self.state + self.dsym + self.dy:
            m.d.comb += v.eq(AnyConst(len(v)))
        for f, c in zip(self.fs, self.cs):
            m.d.comb += [Assume((f >= 1) & (f <= L)), Assume(c + f <= L)]
        # Two pairs of one symbol describe it alike (a table has one frequency and first slot per symbol).
        for i in range(npairs):
            for h in range(i):
                with m.If(self.syms[h] == self.syms[i]):
                    m.d.comb += Assume((self.fs[h] == self.fs[i]) & (self.cs[h] == self.cs[i]))
        m.d.comb += [Assume(k <= K) for k in self.k]
        m.d.comb += [Assume(y != 0) for y in self.dy]
        dsym, dy, state = Array(self.dsym), Array(self.dy), Array(self.state)
        if prop == "round_trip":
            for sym, f, c in zip(self.syms, self.fs, self.cs):
                for j in range(L):
                    with m.If((c <= j) & (j < c + f)):
                        m.d.comb += Assume((dsym[self.state[j]] == sym) & (dy[self.state[j]] == f + j - c))
        else:
            for x in range(L):
                with m.If(self.dsym[x] == self.sym):
                    y = self.dy[x]
                    m.d.comb += Assume((y >= self.f) & (y < 2 * self.f) & (state[(self.c + y - self.f)[:R]] == x))
        # The written rows (one of each memory, clock 0): the harness's own value of that row.
        self.a0, self.j0 = Signal(R, name="written_state"), Signal(R, name="written_slot")
        self.q0 = Signal(sb, name="written_symbol")
        m.d.comb += [v.eq(AnyConst(len(v))) for v in (self.a0, self.j0, self.q0)]

    def legal_pair(self, symbol, extra, i: int = 0) -> Value:
        """Round trip: pair ``i`` is of symbol ``s*_i``, with extra bits that fit its width."""
        return (symbol == self.syms[i]) & ((extra >> Array(self.k)[symbol]) == 0)

    def restrict_decoded(self, dec) -> None:
        """Detection: the decoded pair (if any) is of symbol ``s*``."""
        with self.b.m.If(transfer_of(dec.o)):
            self.b.m.d.comb += Assume(dec.o.p.symbol == self.sym)

    def program(self, core, *, role: str) -> None:
        b, m = self.b, self.b.m
        R, L = self.R, self.L
        if b.platform is None:
            b.platform = TablePlatform()
        if role == "dec":
            layout = tans_layout(core.cfg.p.data)
            words = []
            for x in range(L):
                nb = Signal(range(R + 2), name=f"state{x}_nb")
                m.d.comb += nb.eq(R + 1 - bit_length_of(m, self.dy[x], f"state{x}_y"))
                row = Signal(layout, name=f"dec_row{x}")
                m.d.comb += [row.symbol.eq(self.dsym[x]), row.nb.eq(nb), row.base.eq(((self.dy[x] << nb) - L)[:R]),
                             row.need.eq(nb + Array(self.k)[self.dsym[x]])]
                words.append(Value.cast(row))
            b.platform.contents["dec"] = words
            m.d.comb += [core.cfg.valid.eq(self.prog), core.cfg.p.addr.eq(self.a0),
                         core.cfg.p.data.eq(Array(words)[self.a0])]
            return
        layout = tans_layout(core.sym_cfg.p.data)
        legals = []
        for i, (sym, f, c) in enumerate(zip(self.syms, self.fs, self.cs)):
            sfx = "" if i == 0 else str(i)
            nbh = Signal(range(R + 2), name=f"the_nb_high{sfx}")
            m.d.comb += nbh.eq(R + 1 - bit_length_of(m, f, f"the_freq{sfx}"))
            legal = Signal(layout, name=f"the_sym_row{sfx}")
            k = Array(self.k)[sym]
            if "thr" in dict(layout.members):   # the N-state row, as ``xn_symbol_rows`` makes it
                m.d.comb += [legal.base.eq((c - f)[:R]), legal.thr.eq(((f << nbh) - L) >> 1),
                             legal.sh.eq(R - nbh), legal.last.eq(nbh + k - 1)]
            else:
                m.d.comb += [legal.freq.eq(f), legal.cum.eq(c), legal.nb_high.eq(nbh),
                             legal.threshold.eq(f << nbh), legal.k.eq(k)]
            legals.append(legal)
        syms = []
        for q in range(self.n_sym):
            other = Signal(layout.size, name=f"sym{q}_row_bits")
            m.d.comb += other.eq(AnyConst(layout.size))
            row = Signal(layout.size, name=f"enc_sym_row{q}")
            value = other
            for sym, legal in reversed(list(zip(self.syms, legals))):     # equal symbols: equal rows
                value = Mux(sym == q, Value.cast(legal), value)
            m.d.comb += row.eq(value)
            syms.append(row)
        b.platform.contents["sym"] = syms
        b.platform.contents["state"] = list(self.state)
        m.d.comb += [core.sym_cfg.valid.eq(self.prog), core.sym_cfg.p.addr.eq(self.q0),
                     core.sym_cfg.p.data.eq(Array(syms)[self.q0]),
                     core.state_cfg.valid.eq(self.prog), core.state_cfg.p.addr.eq(self.j0),
                     core.state_cfg.p.data.eq(Array(self.state)[self.j0])]


def tans_layout(view) -> data.StructLayout:
    return data.Layout.cast(view.shape())


class TablePlatform:
    """The formal-only platform of harnesses with a direct table: Amaranth's ``Memory`` asks
    ``platform.get_memory(memory)`` for its implementation; the tANS table memories (recognised by
    their row layouts) become one register per row whose contents are the harness's values (``AnyConst``
    expressions) until a write port writes the row; every other memory is built as usual."""

    def __init__(self):
        self.contents: dict[str, list] = {}
        #: Keys whose memories keep their contents: their write ports are left out (a harness that
        #: ``Assume``s no write to them; otherwise the rows' "written" registers would be free in an
        #: induction step).
        self.frozen: set[str] = set()

    @staticmethod
    def _key(memory) -> str | None:
        shape = memory.shape
        if isinstance(shape, data.StructLayout):
            names = {n for n, _ in shape}
            if "split0" in names:                       # the rANS decoder's bucket table
                return "rans_bucket"
            if names in ({"freq", "cum", "k"}, {"freq", "cum", "rcp", "sa", "sb", "k"}):
                return "rans_symbol"                    # the rANS symbol table (the xN encoder's: reciprocals)
            if "threshold" in names or "thr" in names:     # a symbol row: one state's, or N states'
                return "sym"
            return "dec" if "base" in names else None
        if memory.depth == 1 << SMALL["tans"]["table_log"] and Shape.cast(shape).width == SMALL["tans"]["table_log"]:
            return "state"
        return None

    def get_memory(self, memory):
        init = self.contents.get(self._key(memory))
        if init is None:
            return Memory.elaborate(memory, None)
        assert len(init) == memory.depth, (self._key(memory), len(init), memory.depth)
        m = Module()
        width = Shape.cast(memory.shape).width
        words = []
        for a in range(memory.depth):
            w = Signal(width, name=f"row{a}")
            m.d.comb += w.eq(init[a])
            words.append(w)
        for i, port in enumerate(() if self._key(memory) in self.frozen else memory.write_ports):
            rows = []
            for a, w in enumerate(words):
                written = Signal(name=f"w{i}_written{a}")
                value = Signal(width, name=f"w{i}_row{a}")
                with m.If(port.en.any() & (port.addr == a)):
                    m.d[port.domain] += [written.eq(1), value.eq(port.data)]
                rows.append(Mux(written, value, w))
            words = rows
        for port in memory.read_ports:
            v = Array(words)[port.addr]
            if port.domain == "comb":
                m.d.comb += Value.cast(port.data).eq(v)
            else:
                with m.If(port.en):
                    m.d[port.domain] += Value.cast(port.data).eq(v)
        return m


def elaborated_inside(block):
    """``block`` elaborated now, as :func:`elaborated_block`, and that module what its later elaborations
    return: a core that composes ``block`` (and is elaborated after) holds the very module, so a
    harness can read ``block``'s :attr:`probe` while the core is built as shipped around it."""
    mod = elaborated_block(block)
    block.elaborate = lambda platform: mod
    return mod


def check_decoded_pair(b: "Bench", dec, k_out, index: int, symbol, extra) -> None:
    """A decoder step lemma's checks on its pairs (``k_out`` counts those taken from ``dec.o``): none
    beyond pair ``index``, and pair ``index`` is ``(symbol, extra)``."""
    out = transfer_of(dec.o)
    b.check(out, k_out <= index, "the decoder returns more pairs than the command asks for")
    b.check(out & (k_out == index), dec.o.p.symbol == symbol, "the decoded symbol is not the encoded one")
    b.check(out & (k_out == index), dec.o.p.extra == extra, "the decoded extra bits are not the encoded ones")


def bit_length_of(m: Module, v: Signal, name: str) -> Signal:
    """``v.bit_length()`` as a signal (a priority encoder)."""
    n = Signal(range(len(v) + 1), name=f"{name}_bitlen")
    for i in range(len(v)):
        with m.If(v[i]):
            m.d.comb += n.eq(i + 1)
    return n


def mask(n, width: int) -> Value:
    """``(1 << n) - 1`` as ``width`` bits (``n`` a value)."""
    return Cat(*(n > i for i in range(width)))


# -- the composition's lemmas (k-induction on one block each; docs/formal.md, Round 7) -------------


def elaborated_block(block):
    """``block`` elaborated now (so that its :attr:`probe` holds its registers for the invariants),
    as the module to add to the harness in its place."""
    mod = block.elaborate(None)
    unused_ok(block)        # the module stands for it
    # The fragment's origins name the module only: :func:`~.mutants.mutate` finds the block here.
    mod.elaborated_from = block
    return mod


def unused_ok(*blocks) -> None:
    """Mark ``blocks`` as deliberately never elaborated by Amaranth (a lemma harness elaborates them
    itself, or builds a core only for one of its blocks), so that no ``UnusedElaboratable`` warning is
    printed. Amaranth has no public way to say so; this is its own flag, set in this one place."""
    for block in blocks:
        block._MustUse__silence = True


def top_mask(n, width: int) -> Value:
    """The top ``n`` bits of ``width`` set (``n`` a value, at most ``width``)."""
    return ~(Const((1 << width) - 1, width) >> n)[:width]


class CommandLedger:
    """What a decoder-shell lemma keeps per command (``decoder_counts`` of both families): the accepted
    command's pair and word counts ``N``, ``Nw``, the pairs ``k`` decoded (``pair``) and words ``t``
    taken since, the commands not yet reported (``owed``), and whether the command whose report was
    decided (``finishing``) decoded all its ``N`` pairs (``pend_full``), carried to the report whose
    ``done`` is due (``due``: ``done_full``)."""

    def __init__(self, b: Bench, bits: int, cmd, take, pair, done, finishing, due):
        m = b.m
        self.N, self.Nw = Signal(bits, name="command_count"), Signal(bits, name="command_words")
        self.k, self.t = Signal(bits, name="pairs_decoded"), Signal(bits, name="words_taken")
        self.owed = Signal(2, name="reports_owed")
        self.pend_full = Signal(name="finished_decoded_all")
        self.done_full = Signal(name="reported_decoded_all")
        accept = transfer_of(cmd)
        with m.If(b.rst):
            m.d.past += [self.N.eq(0), self.Nw.eq(0), self.k.eq(0), self.t.eq(0), self.owed.eq(0),
                         self.pend_full.eq(0), self.done_full.eq(0)]
        with m.Else():
            with m.If(accept):
                m.d.past += [self.N.eq(cmd.p.count), self.Nw.eq(cmd.p.words), self.k.eq(0), self.t.eq(take)]
            with m.Else():
                m.d.past += [self.k.eq(self.k + pair), self.t.eq(self.t + take)]
            m.d.past += self.owed.eq(self.owed + accept - done)
            with m.If(finishing):
                m.d.past += self.pend_full.eq(self.k + pair == self.N)
            with m.If(due):
                m.d.past += self.done_full.eq(self.pend_full)
        self._m = m

    def check_reports(self, done, status, idle, reporting, draining) -> None:
        """Assert one ``done`` per command accepted (never more; at most two owed besides one whose
        ``done`` is high), ``OK`` only for a command that decoded its ``N`` pairs, and the invariants that
        tie the counts to the shell (``idle``, a report ``reporting`` its last pair, ``draining``)."""
        m, owed = self._m, self.owed
        with m.If(done):
            m.d.comb += Assert(owed != 0, "done without a command")
        # At most two owed after this clock's done: the running command and one report waiting.
        m.d.comb += Assert((owed != 3) | done, "a command is not reported")
        with m.If(done & (status == DecodeStatus.OK)):
            m.d.comb += Assert(self.done_full, "OK reported for a command that did not decode its N pairs")
        m.d.comb += [Assert(self.k <= self.N, "inv: k <= N"), Assert(self.t <= self.Nw, "inv: t <= Nw"),
                     Assert(owed == (~idle).as_unsigned() + reporting + done, "inv: reports owed"),
                     Assert(~(draining & reporting), "inv: no report waits while draining")]


def load_tracker(b: Bench, coder) -> tuple[Signal, Signal, Value]:
    """For an rANS decoder coder's ``load``/``step``/``ended``: ``loaded`` (a state was loaded since the
    reset), ``fresh`` (and no pair decoded since the last load) and ``kept``, the clocks in which
    ``ended`` must still be high if it was (``ended`` drops only in a load's clock or the next: the
    shell loads a command's word count with its first state)."""
    m = b.m
    loaded = Signal(name="loaded")
    fresh = Signal(name="fresh")
    with m.If(b.rst):
        m.d.past += [loaded.eq(0), fresh.eq(0)]
    with m.Elif(coder.load):
        m.d.past += [loaded.eq(1), fresh.eq(1)]
    with m.Elif(coder.step):
        m.d.past += fresh.eq(0)
    kept = b.past(coder.ended & ~b.rst, "was_ended") & ~coder.load & ~b.past(coder.load, "was_load") & ~b.p_rst
    return loaded, fresh, kept
