"""The one-state tANS encoder's coder (``tansR``, ``N = 1``): symbol table, state table, state
register and packer, one pair per clock (what Table 3 measures).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..common import pair_layout, word_layout
from .shape import TansShape, symbol_entry, tans_encoder_writes, thermometer

__all__ = ["TansEncoderCoder", "TansEncoderCoderProbe"]


@dataclass(frozen=True)
class TansEncoderCoderProbe:
    """The pipeline's stage registers, the accumulator and the state, which the formal pipeline lemma
    (``encoder_pipeline``) ties to the golden encoder: what the formal lemmas read of
    :class:`TansEncoderCoder` (its ``probe`` once elaborated; not ports)."""

    v1: Value
    e1: Value
    base1: Value
    extra1: Value
    v3: Value
    bits3: Value
    len3: Value
    acc: Value
    cnt: Value
    x: Value
    flushing: Value


class TansEncoderCoder(wiring.Component):
    """The tANS encoder's coder alone (what Table 3 measures): symbol and state tables, the state
    register and the bit accumulator, in a three-stage pipeline at one pair per clock.

    Ports
    -----
    i : In(stream)
        ``{symbol, extra}`` (and ``set`` with table sets), the pairs from the last to the first.
    o : Out(stream)
        ``W``-bit words in push order, a register; ``last`` marks a stream's final (partial) word.
    flush : In(1)
        Held high after the stream's last pair has been given: once the pipeline is empty the coder
        writes the final state index and the marker bit (``X``, ``R + 1`` bits), emits what is left and
        starts the next stream from ``X = L``.
    flushed : Out(1)
        The stream's last word leaves ``o`` this cycle.
    sym_cfg, state_cfg : In(stream), programmable cores
        Symbol-table rows ``{freq, cum, nb_high, threshold, k}`` at ``set · 2**symbol_bits + symbol``;
        state-table rows at ``set << R | slot``; one write per clock each.

    Pipeline
    --------
    1. The pair and its symbol-table row are registered (the table is read at ``i``'s symbol).
    2. The loop: ``n = nb_high - (X < threshold)``; ``X := L | state[(cum - freq) + (X >> n)]``;
       the pair's bits (``n`` low bits of ``X``, then ``k`` extra bits) and their count are registered.
       This is the only loop-carried path: compare ∥ shift → select → add → table.
    3. The bits are or-ed into the accumulator at its fill count (``< W``); a full word goes to ``o``.
       When fields can be wider than a word (``R + K > W``: escape codes), a clock that emits a
       word also inserts the next field behind it, so a wide field costs no clock as long as the
       average stays below ``W`` bits per pair.

    Both tables are read combinationally (LUT-RAM); a table's write address is multiplexed onto its
    read address, so each maps as a single-port RAM (``RAM64X1S``, ``RAM256X1S``). Table writes and
    pairs must not be given in the same cycle (the shell accepts writes only when idle).

    Measured area, clock and the variants tried: ``docs/design/tans.md`` (one-state encoder).
    """

    def __init__(self, shape: "TansShape"):
        self._shape = sh = shape
        self._sym_entry = symbol_entry(sh)
        #: The pipeline's registers, filled in by :meth:`elaborate`: the formal pipeline lemma
        #: (``sim/formal/``, ``encoder_pipeline``) states its invariants over them. Not ports.
        self.probe: TansEncoderCoderProbe | None = None      # set by elaborate
        ports = {"i": In(stream.Signature(pair_layout(sh.symbol_bits, sh.K, sh.set_bits))),
                 "o": Out(stream.Signature(word_layout(sh.W))),
                 "flush": In(1), "flushed": Out(1)}
        if sh.programmable:
            ports["sym_cfg"] = In(stream.Signature(data.StructLayout(
                {"addr": sh.symbol_bits + sh.set_bits, "data": self._sym_entry})))
            ports["state_cfg"] = In(stream.Signature(data.StructLayout({"addr": sh.R + sh.set_bits, "data": sh.R})))
        super().__init__(ports)

    @property
    def accumulator_bits(self) -> int:
        """Width of the bit accumulator: ``W + max(R + K, R + 1) - 1``."""
        return self._shape.W + max(self._shape.need_max, self._shape.R + 1) - 1

    def elaborate(self, platform):
        sh = self._shape
        # The flush inserts the final state with its marker (R + 1 bits): wider than a pair's field
        # when K = 0 (found by ``ansforge prove``'s round trip with a symbolic table).
        R, W, L, K, F = sh.R, sh.W, sh.L, sh.K, max(sh.need_max, sh.R + 1)
        A = self.accumulator_bits
        m = Module()

        if sh.table is None:
            sym_init, state_init = [], []
        else:
            sym_w, state_w = tans_encoder_writes(sh.table)
            sym_init, state_init = [r["data"] for r in sym_w], [r["data"] for r in state_w]
        m.submodules.symbols = symbols = Memory(shape=self._sym_entry, depth=sh.sets << sh.symbol_bits,
                                                init=sym_init)
        m.submodules.states = states = Memory(shape=R, depth=L * sh.sets, init=state_init)
        sym_rd, state_rd = symbols.read_port(domain="comb"), states.read_port(domain="comb")
        sym_addr = Cat(self.i.p.symbol, self.i.p.set) if sh.sets > 1 else self.i.p.symbol

        # Stage 1: the pair and its symbol row.
        v1 = Signal()
        e1 = Signal(self._sym_entry)
        base1 = Signal(R)                   # cum - freq (mod 2**R): slot = base1 + (X >> n)
        extra1 = Signal(max(1, K))
        set1 = Signal(max(1, sh.set_bits))
        # Stage 2 -> 3: the pair's bits.
        v3 = Signal()
        bits3 = Signal(F)
        len3 = Signal(range(F + 1))
        # Stage 3: the accumulator (oldest bit at 0).
        acc = Signal(A)
        cnt = Signal(range(A + 1))
        X = Signal(R + 1, init=L, name="x")
        FLUSHING = Signal()

        # Stage 3: insert when there is room below W, or emit a full word.
        o_free = ~self.o.valid | self.o.ready
        merged = Signal(A)
        tot = Signal(range(A + F + 1))
        m.d.comb += [merged.eq(acc | (bits3 << cnt)[:A]), tot.eq(cnt + len3)]
        insert = Signal()
        insert_wide = Signal()  # an insertion behind the word that leaves this clock
        word_now = Signal()     # the insertion completes a word, or ends the stream (the last, partial word)
        m.d.comb += [word_now.eq((tot >= W) | FLUSHING),
                     insert.eq(v3 & (cnt < W) & (~word_now | o_free))]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(insert):
            with m.If(word_now):
                m.d.sync += [self.o.valid.eq(1), self.o.p.data.eq(merged[:W]),
                             self.o.p.last.eq(FLUSHING & (tot <= W)),
                             acc.eq(merged >> W), cnt.eq(Mux(tot >= W, tot - W, 0))]
            with m.Else():
                m.d.sync += [acc.eq(merged), cnt.eq(tot)]
        with m.Elif(o_free & ((cnt >= W) | (FLUSHING & ~v3 & (cnt != 0)))):
            m.d.sync += [self.o.valid.eq(1), self.o.p.data.eq(acc[:W]), self.o.p.last.eq(FLUSHING & (cnt <= W)),
                         acc.eq(acc >> W), cnt.eq(Mux(cnt >= W, cnt - W, 0))]
            if F > W:
                # Fields wider than a word (escape codes) leave a whole word behind: emit it and
                # insert the next field in the same clock, so that only the average rate (below W
                # bits per pair) has to fit the output, not each pair.
                with m.If(v3 & ~FLUSHING & (cnt >= W)):
                    m.d.comb += insert_wide.eq(1)
                    m.d.sync += [acc.eq((acc >> W) | (bits3 << (cnt - W).as_unsigned()[:len(cnt)])[:A]), cnt.eq(cnt - W + len3)]
        stage3_free = ~v3 | insert | insert_wide
        with m.If(insert | insert_wide):
            m.d.sync += v3.eq(0)

        # Stage 2: the state update (the loop).
        lt = Signal()
        n = Signal(range(R + 1))
        xs = Signal(R)
        slot = Signal(R)
        m.d.comb += [lt.eq(X < e1.threshold), n.eq(e1.nb_high - lt), xs.eq(X >> n), slot.eq(base1 + xs)]
        fire2 = Signal()
        m.d.comb += fire2.eq(v1 & stage3_free)
        with m.If(fire2):
            m.d.sync += [X.eq(L | state_rd.data), v3.eq(1),
                         bits3.eq((X & thermometer(n, R + 1)) | ((extra1 & thermometer(e1.k, max(1, K))) << n)),
                         len3.eq(n + e1.k)]

        # Stage 1.
        m.d.comb += self.i.ready.eq(~v1 | fire2)
        with m.If(fire2):
            m.d.sync += v1.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [v1.eq(1), e1.eq(sym_rd.data), base1.eq(sym_rd.data.cum - sym_rd.data.freq),
                         extra1.eq(self.i.p.extra)]
            if sh.sets > 1:
                m.d.sync += set1.eq(self.i.p.set)

        # Flush: the final state index and its marker bit (X itself), then the last partial word.
        with m.If(self.flush & ~FLUSHING & ~v1 & stage3_free & ~(self.i.valid & self.i.ready)):
            m.d.sync += [FLUSHING.eq(1), v3.eq(1), bits3.eq(X), len3.eq(R + 1), X.eq(L)]
        m.d.comb += self.flushed.eq(self.o.valid & self.o.ready & self.o.p.last)
        with m.If(self.flushed):
            m.d.sync += FLUSHING.eq(0)

        # Table reads and writes: a write's address replaces the read address (single-port RAMs).
        state_addr = Cat(slot, set1[:sh.set_bits]) if sh.sets > 1 else slot
        if sh.programmable:
            sym_wr, state_wr = symbols.write_port(), states.write_port()
            m.d.comb += [self.sym_cfg.ready.eq(1), self.state_cfg.ready.eq(1),
                         sym_wr.addr.eq(sym_rd.addr), sym_wr.data.eq(self.sym_cfg.p.data),
                         sym_wr.en.eq(self.sym_cfg.valid),
                         state_wr.addr.eq(state_rd.addr), state_wr.data.eq(self.state_cfg.p.data),
                         state_wr.en.eq(self.state_cfg.valid),
                         sym_rd.addr.eq(Mux(self.sym_cfg.valid, self.sym_cfg.p.addr, sym_addr)),
                         state_rd.addr.eq(Mux(self.state_cfg.valid, self.state_cfg.p.addr, state_addr))]
        else:
            m.d.comb += [sym_rd.addr.eq(sym_addr), state_rd.addr.eq(state_addr)]
        self.probe = TansEncoderCoderProbe(v1=v1, e1=e1, base1=base1, extra1=extra1, v3=v3, bits3=bits3, len3=len3,
                                           acc=acc, cnt=cnt, x=X, flushing=FLUSHING)
        return m
