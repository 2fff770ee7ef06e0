"""rANS decoder and encoder cores (§4.2, Table 3 "rANS Decoder/Encoder"), one coding pair per clock.

Both follow ``docs/bitstream.md`` bit for bit; :class:`~ansforge.model.rans.RansCoder` is their golden
model, and with the ``constriction`` preset (``S = 64, W = 32, P = 24``) their words are constriction's
``AnsCoder`` words. The symbol table (``freq, cum, k`` per symbol) comes from one
:class:`~ansforge.model.rans.RansTable`: ``Memory`` initial contents in a fixed build, or writes through
``cfg`` in a programmable one (:func:`rans_writes` derives both from the table).

The table is a memory with a combinational read port (LUTRAM). The decoder also keeps every
cumulative frequency in registers: it compares the quantile against all of them at once (the symbol
is the number of cumulatives ``<= q``). Unused symbol slots hold ``cum = 2**P`` so that they never
match.

A pair's additional data of ``k`` bits is coded as ``ceil(k / P)`` uniform chunks (most significant
first in the decoder), each of which, like the symbol, may move one word; the cores do the symbol and
every chunk in the pair's cycle, with a small word buffer of ``chunks + 1`` words on the word side.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Elaboratable, Module, Mux, Signal, Value
from amaranth.lib import data, stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from ..model.rans import RansTable
from .common import (BlockCrc, CoreParameters, DecodeStatus, TableSelect, bits_for, check_bool, check_int,
                     table_select_layout, decoder_ports,
                     encoder_ports)

__all__ = ["RansDecoder", "RansEncoder", "rans_writes"]


class _RansShape:
    def __init__(self, state_bits, word_bits, precision_bits, max_symbols, max_extra_bits, table, programmable,
                 table_sets=1):
        self.S = check_int("state_bits", state_bits, 16, 128)
        self.sets = check_int("table_sets", table_sets, 1, 16)
        if self.sets > 1 and not programmable:
            raise ValueError(f"table_sets={self.sets} needs programmable=True (the sets are written through cfg)")
        self.set_bits = bits_for(self.sets - 1) if self.sets > 1 else 0
        self.W = check_int("word_bits", word_bits, 8, 64)
        self.P = check_int("precision_bits", precision_bits, 5, 24)
        self.max_symbols = check_int("max_symbols", max_symbols, 2, 256)
        self.K = check_int("max_extra_bits", max_extra_bits, 0, 32)
        if self.S < self.W + self.P:
            raise ValueError(f"state_bits must be >= word_bits + precision_bits = {self.W + self.P}, not {self.S}")
        if self.S < 2 * self.W:
            raise ValueError(f"state_bits must be >= 2 * word_bits = {2 * self.W}, not {self.S}")
        check_bool("programmable", programmable)
        if table is None and not programmable:
            raise ValueError("table is required unless programmable=True (a fixed-table core bakes it in)")
        if table is not None:
            if not isinstance(table, RansTable):
                raise TypeError(f"table must be a model.rans.RansTable, not {type(table).__name__}")
            if table.params.precision_bits != self.P:
                raise ValueError(f"table has precision_bits {table.params.precision_bits}, the core {self.P}")
            if table.freqs.size > self.max_symbols:
                raise ValueError(f"table has {table.freqs.size} symbols, more than max_symbols={self.max_symbols}")
            if int(table.extra_bits.max()) > self.K:
                raise ValueError(f"table needs {int(table.extra_bits.max())} extra bits, "
                                 f"more than max_extra_bits={self.K}")
        self.table, self.programmable = table, programmable
        self.symbol_bits = bits_for(self.max_symbols - 1)
        self.slots = 1 << self.symbol_bits          # symbol entries per table set
        self.chunks = -(-self.K // self.P)
        self.entry = data.StructLayout({"freq": self.P + 1, "cum": self.P + 1, "k": bits_for(self.K)})


    def cfg_port(self):
        """The ``cfg`` write stream of a programmable core: ``{addr: set · slots + symbol, data: {freq, cum, k}}``."""
        return In(stream.Signature(data.StructLayout({"addr": self.symbol_bits + self.set_bits, "data": self.entry})))


def rans_writes(table: RansTable, max_symbols: int, table_set: int = 0) -> list[dict]:
    """The ``cfg`` write sequence for ``table`` in a core of ``max_symbols`` slots (unused slots get
    ``cum = 2**P``, ``freq = 0``: they never match), as table set ``table_set`` (addresses
    ``table_set · 2**ceil(log2 max_symbols) + symbol``)."""
    P = table.params.precision_bits
    rows = table.core_entries()
    base = table_set << bits_for(max_symbols - 1)
    out = [{"addr": base + s, "data": {"freq": int(r[0]), "cum": int(r[1]), "k": int(r[2])}}
           for s, r in enumerate(rows)]
    out += [{"addr": base + s, "data": {"freq": 0, "cum": 1 << P, "k": 0}} for s in range(len(rows), max_symbols)]
    return out


class _SymbolTable:
    """The per-symbol table ``{freq, cum, k}``: initialised from the model's table, written through
    ``cfg`` if programmable.

    Lookups by symbol go through a :class:`~amaranth.lib.memory.Memory` with a combinational read
    port (distributed LUTRAM on an FPGA, the paper's "inexpensive resource"). The decoder's symbol
    search compares the slot with every ``cum`` at once, so ``parallel_cum`` also keeps the
    cumulative frequencies in registers (``cum``).

    With table sets, the memory holds ``sets · slots`` entries (``set · slots + symbol``) and the
    decoder keeps every set's cumulative frequencies in registers, the current set's chosen by a mux.
    """

    def __init__(self, m: Module, sh: _RansShape, cfg, *, parallel_cum: bool = False):
        init = [r["data"] for r in rans_writes(sh.table, sh.max_symbols)] if sh.table is not None else \
            [{"freq": 0, "cum": 1 << sh.P, "k": 0}] * sh.max_symbols
        init = init + [{"freq": 0, "cum": 1 << sh.P, "k": 0}] * (sh.slots - len(init))
        init = init * sh.sets
        m.submodules.symbols = self._mem = Memory(shape=sh.entry, depth=sh.slots * sh.sets, init=init)
        self._rd = self._mem.read_port(domain="comb")
        self._sh = sh
        self.banks = [[Signal(sh.P + 1, name=f"cum{t}_{s}", init=init[t * sh.slots + s]["cum"])
                       for s in range(sh.max_symbols)] for t in range(sh.sets)] if parallel_cum else None
        self.cfg = cfg

    def cum(self, m: Module, table_set) -> list:
        """The cumulative frequency of every slot of ``table_set`` (a register per set, then a mux)."""
        if len(self.banks) == 1:
            return self.banks[0]
        out = [Signal(self._sh.P + 1, name=f"cum_{s}") for s in range(self._sh.max_symbols)]
        with m.Switch(table_set):
            for t, bank in enumerate(self.banks):
                with m.Case(t):
                    m.d.comb += [o.eq(c) for o, c in zip(out, bank)]
        return out

    def lookup(self, m: Module, symbol, table_set=None) -> data.View:
        """The entry of ``symbol`` (in ``table_set``), combinationally (one lookup per core)."""
        m.d.comb += self._rd.addr.eq(symbol if table_set is None else Cat(symbol, table_set))
        return self._rd.data

    def write(self, m: Module) -> None:
        """Accept one ``cfg`` write (call where the core is idle)."""
        if self.cfg is None:
            return
        wr = self._mem.write_port()
        m.d.comb += [self.cfg.ready.eq(1), wr.addr.eq(self.cfg.p.addr), wr.data.eq(self.cfg.p.data),
                     wr.en.eq(self.cfg.valid)]
        if self.banks is not None:
            # One address compare per register (a Switch would give every register every case).
            for t, bank in enumerate(self.banks):
                for s, reg in enumerate(bank):
                    with m.If(self.cfg.valid & (self.cfg.p.addr == t * self._sh.slots + s)):
                        m.d.sync += reg.eq(self.cfg.p.data.cum)


def _chunk_plan(m: Module, sh: _RansShape, k):
    """Per chunk slot ``j`` (``0 .. chunks-1``, decoder order): whether it codes bits for a symbol of
    ``k`` additional bits, and its width. Active slots are the last ``ceil(k / P)``; the first active
    one carries the ``k - P (n - 1)`` most significant bits, the others ``P`` each."""
    C, P = sh.chunks, sh.P
    n = Signal(range(C + 1))
    m.d.comb += n.eq(sum(((k > P * j).as_unsigned() for j in range(C)), Const(0, bits_for(C))))
    plan = []
    for j in range(C):
        active = Signal(name=f"chunk{j}_active")
        width = Signal(range(P + 1), name=f"chunk{j}_width")
        first = (n == C - j)
        m.d.comb += [active.eq(n >= C - j), width.eq(Mux(first, k - P * (C - 1 - j), P))]
        plan.append((active, width))
    return plan


class _RansCore(CoreParameters):
    """Read-only parameters shared by the rANS cores."""

    @property
    def state_bits(self) -> int:
        return self._shape.S

    @property
    def precision_bits(self) -> int:
        return self._shape.P


class RansDecoder(_RansCore):
    """rANS decoder: words (top of stack first) in, coding pairs out, one pair per clock.

    Parameters
    ----------
    state_bits, word_bits, precision_bits : int
        ``S``, ``W``, ``P`` with ``S >= W + P`` and ``S >= 2W`` (presets: paper 64/32/16,
        constriction 64/32/24).
    max_symbols : int
        Symbol slots, 2..256 (the paper: 64).
    max_extra_bits : int
        Widest additional data of a symbol, 0..32 (the paper: 8).
    table : RansTable or None
        Baked-in table, or the reset contents of a programmable core (``None``: no symbols).
    programmable : bool
        Add the ``cfg`` stream ``{addr, data: {freq, cum, k}}`` (accepted when idle).
    block_crc : bool
        As for :class:`~ansforge.hdl.tans.TansDecoder`.
    table_sets : int
        As for :class:`~ansforge.hdl.tans.TansDecoder` (context tables; ``sel`` port).

    Ports are those of :class:`~ansforge.hdl.tans.TansDecoder`, with a command ``state`` of ``S``
    bits (a checkpoint's rANS state; ``bit`` must be 0).

    Per cycle: symbol lookup (one comparator per slot), ``x = (x >> P) f + q - cum`` (one
    ``(S - P) x (P + 1)`` multiplier), then each chunk, with a conditional word pop after each step.
    A pop waits for a buffered word unless the stream has no words left (then, as in the golden model,
    there is no pop). The word buffer takes a word whenever it has room.
    """

    def __init__(self, *, state_bits: int = 64, word_bits: int = 32, precision_bits: int = 16, max_symbols: int = 64,
                 max_extra_bits: int = 8, table: RansTable | None = None, programmable: bool = False,
                 block_crc: bool = True, table_sets: int = 1):
        sh = _RansShape(state_bits, word_bits, precision_bits, max_symbols, max_extra_bits, table, programmable,
                        table_sets)
        self._shape = sh
        self._block_crc = check_bool("block_crc", block_crc)
        ports = decoder_ports(sh.S, 1, sh.W, sh.symbol_bits, sh.K)
        if programmable:
            ports["cfg"] = sh.cfg_port()
        if sh.sets > 1:
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        super().__init__(ports)

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, C = sh.S, sh.W, sh.P, sh.chunks
        D = C + 1                                   # word buffer depth: most pops one pair can make
        lo = 1 << (S - W)
        m = Module()
        table = _SymbolTable(m, sh, self.cfg if sh.programmable else None, parallel_cum=True)

        x = Signal(S)
        remaining = Signal.like(self.cmd.p.count)
        words_left = Signal.like(self.cmd.p.words)   # words of the stream not yet in the buffer
        check_end = Signal()
        words = [Signal(W, name=f"word{j}") for j in range(D)]
        n_buf = Signal(range(D + 1))
        ended = Signal()
        m.d.comb += ended.eq(words_left == 0)

        # -- one pair, combinationally ------------------------------------------------------------
        select = None
        if sh.sets > 1:
            pair_fire = Signal()
            m.d.comb += pair_fire.eq(self.o.valid & self.o.ready)
            select = TableSelect(m, self.sel, pair_fire)
        q = Signal(P)
        sym = Signal(sh.symbol_bits)
        cums = table.cum(m, None if select is None else select.set)
        m.d.comb += [q.eq(x[:P]),
                     sym.eq(sum(((c <= q).as_unsigned() for c in cums[1:]), Const(0, sh.symbol_bits)))]
        entry = table.lookup(m, sym, None if select is None else select.set)
        f, c, k = entry.freq, entry.cum, entry.k
        word_at = Array(words)

        stall = Signal()
        stalls = []

        def pop(xv, used, tag):
            """The state after a conditional pop of word ``used`` of the buffer."""
            want = xv < lo
            have = used < n_buf
            do = Signal(name=f"pop_{tag}")
            m.d.comb += do.eq(want & have)
            stalls.append(want & ~have & ~ended)
            xn = Signal(S, name=f"x_{tag}")
            m.d.comb += xn.eq(Mux(do, Cat(word_at[used], xv), xv))
            u = Signal(range(D + 1), name=f"used_{tag}")
            m.d.comb += u.eq(used + do)
            return xn, u

        x1 = Signal(S)
        m.d.comb += x1.eq((x >> P) * f + (q - c))
        xv, used = pop(x1, Const(0, bits_for(D)), "sym")
        extra = Const(0, max(1, sh.K))
        for j, (active, width) in enumerate(_chunk_plan(m, sh, k)):
            qj = xv[:P]
            keep = Signal(range(P + 1), name=f"chunk{j}_keep")
            m.d.comb += keep.eq(P - width)
            bits = Signal(max(1, sh.K), name=f"chunk{j}_bits")
            m.d.comb += bits.eq(qj >> keep)
            xc = Signal(S, name=f"x_chunk{j}")
            m.d.comb += xc.eq(Mux(active, ((xv >> P) << keep) | (qj & ((Const(1, P + 1) << keep) - 1)), xv))
            e_next = Signal(max(1, sh.K), name=f"extra{j}")
            m.d.comb += e_next.eq(Mux(active, (extra << width) | bits, extra))
            extra = e_next
            xv, used = pop(xc, used, f"chunk{j}")
        m.d.comb += stall.eq(Cat(*stalls).any())

        # -- word buffer: drop ``consume`` words, append an accepted one ----------------------------
        consume = Signal(range(D + 1))
        take = Signal()
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        with m.If(take):
            m.d.sync += words_left.eq(words_left - 1)
        for j in range(D):
            src = j + consume
            with m.If(src < n_buf):
                m.d.sync += words[j].eq(word_at[src])
            with m.Elif(take & (j == n_buf - consume)):
                m.d.sync += words[j].eq(self.i.p.data)
        m.d.sync += n_buf.eq(n_buf - consume + take)

        def finish(status):
            m.d.sync += self.status.eq(status)
            m.next = "DRAIN"

        block_crc = BlockCrc(m, W, self.cmd, self.i, present=self._block_crc)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                table.write(m)
                with m.If(self.cmd.valid):
                    cm = self.cmd.p
                    m.d.sync += [remaining.eq(cm.count), words_left.eq(cm.words), check_end.eq(cm.check_end),
                                 self.done.eq(0), self.status.eq(DecodeStatus.OK), n_buf.eq(0)]
                    with m.If(cm.resume):
                        m.d.sync += x.eq(cm.state)
                        m.next = "DECODE"
                    with m.Else():
                        m.d.sync += x.eq(0)
                        m.next = "INIT"

            with m.State("INIT"):
                # Pop the top word (never zero), then words until x >= 2**(S - W) or none is left.
                m.d.comb += self.i.ready.eq(~ended & (n_buf < D))
                with m.If(x >= lo):
                    m.next = "DECODE"
                with m.Elif(n_buf != 0):
                    m.d.comb += consume.eq(1)
                    m.d.sync += x.eq(Cat(words[0], x))
                    with m.If((x == 0) & (words[0] == 0)):
                        finish(DecodeStatus.ZERO_TOP_WORD)
                with m.Elif(ended):
                    m.next = "DECODE"

            with m.State("DECODE"):
                m.d.comb += [
                    self.i.ready.eq(~ended & (n_buf < D)),
                    self.o.valid.eq((remaining != 0) & ~stall if select is None
                                    else (remaining != 0) & ~stall & select.ready),
                    self.o.p.symbol.eq(sym),
                    self.o.p.extra.eq(extra),
                ]
                with m.If(self.o.valid & self.o.ready):
                    m.d.comb += consume.eq(used)
                    m.d.sync += [x.eq(xv), remaining.eq(remaining - 1)]
                with m.If(remaining == 0):
                    with m.If(~check_end):
                        finish(DecodeStatus.OK)
                    with m.Elif(x != 0):
                        finish(DecodeStatus.FINAL_STATE)
                    with m.Elif((n_buf != 0) | ~ended):
                        finish(DecodeStatus.TRAILING_DATA)
                    with m.Else():
                        finish(DecodeStatus.OK)

            with m.State("DRAIN"):
                m.d.comb += [self.i.ready.eq(~ended), consume.eq(n_buf)]
                with m.If(ended | ((words_left == 1) & take)):
                    m.d.sync += n_buf.eq(0)
                    m.next = "CHECK"

            with m.State("CHECK"):
                block_crc.check(self.status, self.done)
                m.next = "IDLE"
        return m


class _DividerStages(Elaboratable):
    """``len(bits)`` quotient bits of a restoring divider: per bit (most significant first)
    ``trial = 2 r + b``, ``q = trial >= d``, ``r = trial - q d``.

    The stages of one group are a single expression: the Amaranth simulator settles a chain of
    signals one delta cycle per link, and a group of three cuts the divider's chain threefold. The
    expression repeats its first stages (three uses per stage); synthesis merges the copies.
    """

    def __init__(self, remainder_in: Value, bits: list[Value], divisor: Signal):
        self.remainder_in, self.bits, self.divisor = remainder_in, bits, divisor
        self.q = Signal(len(bits))               # most significant first: q[len - 1] is bits[0]'s
        self.remainder_out = Signal(len(divisor))

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        r = self.remainder_in[:len(d)]
        qs = []
        for b in self.bits:
            trial = Cat(b, r)
            qs.append(trial >= d)
            r = Mux(trial >= d, trial - d, trial)
        m.d.comb += [self.q.eq(Cat(*reversed(qs))), self.remainder_out.eq(r)]
        return m


class _ArrayDivider(Elaboratable):
    """``dividend // divisor`` and ``dividend % divisor``, combinationally, as a restoring array divider.

    Valid when the quotient fits ``quotient_bits`` bits (``dividend < divisor << quotient_bits``):
    the dividend's top bits are then already a remainder, and one ``divisor_bits + 1``-bit compare
    and subtract per quotient bit finishes the division. A generic ``//`` of the ``S``-bit state
    would instead build ``S`` stages of ``S``-bit subtractors, which synthesis cannot finish.
    Groups of stages are modules of their own that read each other's remainders directly, so that
    the Amaranth simulator re-evaluates only the part of the array a change ripples through.
    """

    GROUP = 3

    def __init__(self, dividend_bits: int, divisor_bits: int, quotient_bits: int):
        assert dividend_bits > quotient_bits
        self.dividend = Signal(dividend_bits)
        self.divisor = Signal(divisor_bits)
        self.quotient = Signal(quotient_bits)
        self.remainder = Signal(divisor_bits)
        self._q = quotient_bits

    def elaborate(self, platform):
        m = Module()
        rem = self.dividend[self._q:]                  # < divisor by the precondition
        order = list(reversed(range(self._q)))         # quotient bits, most significant first
        parts = []
        for g in range(0, self._q, self.GROUP):
            idx = order[g:g + self.GROUP]
            m.submodules[f"q{idx[0]}"] = st = _DividerStages(rem, [self.dividend[i] for i in idx], self.divisor)
            parts.append(st.q)
            rem = st.remainder_out
        m.d.comb += [self.quotient.eq(Cat(*reversed(parts))), self.remainder.eq(rem)]
        return m


class RansEncoder(_RansCore):
    """rANS encoder: coding pairs in (back to front), words out in push order, one pair per clock.

    Parameters are those of :class:`RansDecoder`; ports those of
    :class:`~ansforge.hdl.tans.TansEncoder` (``cfg`` as in :class:`RansDecoder`; with ``table_sets``
    the pairs carry their ``set``).

    Per cycle: each chunk of the additional data (least significant first), then the symbol, each
    preceded by a conditional push; ``x // f`` and ``x % f`` come from one combinational array
    divider of ``S - min(P, W)`` compare-and-subtract stages (after the push ``x < f 2**(S - P)``, or
    ``x < 2**(S - W)``, bounds the quotient), no DSPs, as in the paper's encoder. Pushed words
    wait in a buffer of ``2 (chunks + 1)`` words; a pair is taken when ``chunks + 1`` slots are free.
    After the last pair the state's non-zero words are pushed, least significant first.
    """

    def __init__(self, *, state_bits: int = 64, word_bits: int = 32, precision_bits: int = 16, max_symbols: int = 64,
                 max_extra_bits: int = 8, table: RansTable | None = None, programmable: bool = False,
                 table_sets: int = 1):
        sh = _RansShape(state_bits, word_bits, precision_bits, max_symbols, max_extra_bits, table, programmable,
                        table_sets)
        self._shape = sh
        ports = encoder_ports(sh.W, sh.symbol_bits, sh.K, sh.set_bits)
        if programmable:
            ports["cfg"] = sh.cfg_port()
        super().__init__(ports)

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, C = sh.S, sh.W, sh.P, sh.chunks
        per_pair = C + 1
        D = 2 * per_pair
        m = Module()
        table = _SymbolTable(m, sh, self.cfg if sh.programmable else None)

        x = Signal(S)
        remaining = Signal.like(self.cmd.p.count)
        fifo = [Signal(W, name=f"out{j}") for j in range(D)]
        n_out = Signal(range(D + 1))
        s = self.i.p.symbol
        entry = table.lookup(m, s, self.i.p.set if sh.sets > 1 else None)
        f, c, k = entry.freq, entry.cum, entry.k

        pushes = []   # (enable, word) in push order

        def push_if(xv, limit_log2=None, limit=None, tag=""):
            """Push the low word when ``x >> (S - P) >= limit``; returns the state after it."""
            do = Signal(name=f"push_{tag}")
            if limit_log2 is not None:
                m.d.comb += do.eq((xv >> (S - P)) >= (Const(1, P + 1) << limit_log2))
            else:
                m.d.comb += do.eq((xv >> (S - P)) >= limit)
            pushes.append((do, xv[:W]))
            xn = Signal(S, name=f"x_after_push_{tag}")
            m.d.comb += xn.eq(Mux(do, xv >> W, xv))
            return xn

        xv = x
        rest = Signal(max(1, sh.K))
        m.d.comb += rest.eq(self.i.p.extra)
        plan = _chunk_plan(m, sh, k)
        for j in reversed(range(C)):                # least significant chunk first
            active, width = plan[j]
            keep = Signal(range(P + 1), name=f"chunk{j}_keep")   # the chunk's frequency is 2**keep
            m.d.comb += keep.eq(P - width)
            v = Signal(max(1, sh.K), name=f"chunk{j}_value")
            m.d.comb += v.eq(rest & ((Const(1, sh.K + 1) << width) - 1))
            nrest = Signal(max(1, sh.K), name=f"rest{j}")
            m.d.comb += nrest.eq(Mux(active, rest >> width, rest))
            rest = nrest
            xp = push_if(xv, limit_log2=keep, tag=f"chunk{j}")
            xc = Signal(S, name=f"x_chunk{j}")
            m.d.comb += xc.eq(((xp >> keep) << P) | (v << keep) | (xp & ((Const(1, P + 1) << keep) - 1)))
            for_push, _ = pushes[-1]
            gated = Signal(name=f"push_chunk{j}_gated")
            m.d.comb += gated.eq(for_push & active)
            pushes[-1] = (gated, pushes[-1][1])
            nx = Signal(S, name=f"x_after_chunk{j}")
            m.d.comb += nx.eq(Mux(active, xc, xv))
            xv = nx
        xp = push_if(xv, limit=f, tag="sym")
        m.submodules.divider = div = _ArrayDivider(S, P + 1, S - min(P, W))
        m.d.comb += [div.dividend.eq(xp), div.divisor.eq(f)]
        x_next = Signal(S)
        # Its own module: otherwise each stage of the divider's ripple would re-run the whole
        # encoder's combinational process in the Amaranth simulator.
        m.submodules.next_state = next_state = Module()
        next_state.d.comb += x_next.eq((div.quotient << P) | (c + div.remainder))

        # -- output buffer ------------------------------------------------------------------------
        emit = Signal()
        flushing = Signal()
        m.d.comb += [self.o.valid.eq(n_out != 0), self.o.p.data.eq(fifo[0]),
                     self.o.p.last.eq(flushing & (x == 0) & (n_out == 1)),
                     emit.eq(self.o.valid & self.o.ready)]
        fire = Signal()
        new_words = []
        count = Const(0, bits_for(per_pair))
        for do, word in pushes:
            en = Signal(name="push_en")
            m.d.comb += en.eq(fire & do)
            new_words.append((en, word, count))
            nc = Signal(range(per_pair + 1))
            m.d.comb += nc.eq(count + en)
            count = nc
        flush_word = Signal()
        base = Signal(range(D + 1))
        m.d.comb += base.eq(n_out - emit)
        fifo_at = Array(fifo)
        for j in range(D):
            src = j + emit
            with m.If(src < n_out):
                m.d.sync += fifo[j].eq(fifo_at[src])
            for en, word, pos in new_words:
                with m.If(en & (j == base + pos)):
                    m.d.sync += fifo[j].eq(word)
            with m.If(flush_word & (j == base)):
                m.d.sync += fifo[j].eq(x[:W])
        m.d.sync += n_out.eq(base + count + flush_word)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                table.write(m)
                with m.If(self.cmd.valid):
                    m.d.sync += [remaining.eq(self.cmd.p.count), x.eq(0), self.done.eq(0)]
                    m.next = "ENCODE"
            with m.State("ENCODE"):
                m.d.comb += [self.i.ready.eq((remaining != 0) & (n_out <= D - per_pair)),
                             fire.eq(self.i.valid & self.i.ready)]
                with m.If(fire):
                    m.d.sync += [x.eq(x_next), remaining.eq(remaining - 1)]
                with m.If(remaining == 0):
                    m.next = "FLUSH"
            with m.State("FLUSH"):
                # The state's non-zero words, least significant first.
                m.d.comb += flushing.eq(1)
                with m.If((x != 0) & (n_out < D)):
                    m.d.comb += flush_word.eq(1)
                    m.d.sync += x.eq(x >> W)
                with m.If((x == 0) & ((n_out == 0) | ((n_out == 1) & emit))):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
        return m
