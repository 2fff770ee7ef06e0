"""The one-state rANS decoder's coder (:class:`RansDecoderCoder`): bucket and symbol lookup,
multiply-add, pops and chunks of one state in one clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..common import TableSelect, bits_for, pair_layout, table_select_layout
from .link import decoder_link
from .shape import BUCKET_SPLITS, RansShape
from .tables import RansTables, table_address
from .arithmetic import MultiplyAdd, chunk_plan, two_level_shift


@dataclass(frozen=True)
class RansDecoderCoderProbe:
    """The word buffer, its count, the symbol found and the state after it, which the formal pipeline lemma
    (``decoder_pipeline``) ties to the golden decoder: what the formal lemmas read of
    :class:`RansDecoderCoder` (its ``probe`` once elaborated; not ports)."""

    words: list[Signal]
    n_buf: Value
    sym: Value
    x_symbol: Value


class RansDecoderCoder(wiring.Component):
    """The rANS decoder's coder (``shell=False``): words in, pairs out (registered), one pair per clock.

    Ports: ``i`` (``W``-bit words, top of stack first), ``o`` (pairs ``{symbol, extra}``, a register),
    ``cfg`` (programmable cores), ``sel`` (table sets), and the control a shell drives: ``load`` (with
    ``load_state``: set the state, empty the word buffer), ``run`` (decode pairs), ``ended`` (no word
    will come: pops are skipped, as at the golden model's stack bottom); ``state`` (``x``), ``buffered``
    (words held) and ``step`` (a pair decoded this clock) go back. The stream's start (the first
    state from the top words) is the shell's: it loads the state it has read.

    Per clock, from the state register ``x`` (``S`` bits) with ``q = x mod 2**P``: the bucket table at
    ``q``'s top bits gives the candidate symbol; the symbol table gives its ``freq, cum, k``; a
    candidate with ``cum <= q < cum + freq`` decodes, ``x = (x >> P) freq + q - cum`` (one DSP, see
    :class:`MultiplyAdd`), each chunk of additional data, each step followed by a conditional word pop from
    a buffer of ``chunks + 1`` words (one word where ``chunks <= 1`` and ``k <= W - P``: then a pair pops
    at most once; ``i.ready`` then also holds in a clock that pops the buffered word). A wrong candidate (a bucket meeting more than ten symbols) costs
    a clock per symbol stepped. Latency: a pair is on ``o`` one clock after its step.
    """

    def __init__(self, shape: RansShape):
        self._shape = shape
        #: The coder's word buffer, filled in by :meth:`elaborate`: the formal lemma ``decoder_pipeline``
        #: (``sim/formal/``) states its invariants over it. Not ports.
        self.probe: RansDecoderCoderProbe | None = None      # set by elaborate
        super().__init__(self.ports(shape))

    @staticmethod
    def ports(sh: RansShape) -> dict:
        """The coder's signature members for ``sh``."""
        ports = {"i": In(stream.Signature(sh.W)), "o": Out(stream.Signature(pair_layout(sh.symbol_bits, sh.K))),
                 **decoder_link(sh).flip().members}
        if sh.programmable:
            ports["cfg"] = sh.cfg_port()
        if sh.sets > 1:
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        return ports

    @staticmethod
    def multiply_add(sh: RansShape) -> MultiplyAdd:
        """The state update ``(x >> P) * f + (x mod 2**P - cum)``: ``S - P`` by ``P + 1`` bits plus a
        ``P + 1``-bit addend, ``S`` bits out."""
        return MultiplyAdd(sh.S - sh.P, sh.P + 1, sh.P + 1, sh.S)

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, C = sh.S, sh.W, sh.P, sh.chunks
        D = 1 if sh.one_word else C + 1             # word buffer depth: the most pops one pair can make
        lo = 1 << (S - W)
        m = Module()
        m.submodules.entries = tables = RansTables(sh, buckets=True)
        if sh.programmable:
            wiring.connect(m, wiring.flipped(self.cfg), tables.cfg)

        x = Signal(S)
        words = [Signal(W, name=f"word{j}") for j in range(D)]
        n_buf = Signal(range(D + 1))
        o_valid = Signal()
        o_pair = Signal(self.o.p.shape())
        walking = Signal()
        walk_sym = Signal(sh.symbol_bits)
        m.d.comb += [self.state.eq(x), self.buffered.eq(n_buf != 0), self.o.valid.eq(o_valid),
                     self.o.p.eq(o_pair)]

        table_set = None
        run = Signal()
        if sh.sets > 1:
            m.submodules.table_select = select = TableSelect(sh.set_bits)
            wiring.connect(m, wiring.flipped(self.sel), select.sel)
            m.d.comb += select.fire.eq(self.step)
            table_set = select.set
            m.d.comb += run.eq(self.run & select.ready)
        else:
            m.d.comb += run.eq(self.run)

        # -- the candidate symbol and its entry ------------------------------------------------------
        q = Signal(P)
        m.d.comb += q.eq(x[:P])
        m.d.comb += tables.bucket_addr.eq(table_address(q[sh.off_bits:], table_set))
        bkt = tables.bucket
        cand = Signal(sh.symbol_bits)
        if sh.off_bits:
            low = q[:sh.off_bits]
            m.d.comb += cand.eq(bkt.base + sum((low > bkt[f"split{j}"]).as_unsigned()
                                               for j in range(BUCKET_SPLITS)))
        else:
            m.d.comb += cand.eq(bkt.base)
        sym = Signal(sh.symbol_bits)
        m.d.comb += sym.eq(Mux(walking, walk_sym, cand))
        m.d.comb += tables.symbol_addr.eq(table_address(sym, table_set))
        entry = tables.symbol
        f, c, k = entry.freq, entry.cum, entry.k
        r = Signal(P + 2)                            # q - cum, two's complement
        m.d.comb += r.eq(q - c)
        below = Signal()
        beyond = Signal()
        m.d.comb += [below.eq(r[P + 1]), beyond.eq(~r[P + 1] & (r[:P + 1] >= f))]

        word_at = Array(words)
        stalls = []

        def pop(xv, used, tag):
            """The state after a conditional pop of word ``used`` of the buffer."""
            want = xv < lo
            have = used < n_buf
            do = Signal(name=f"pop_{tag}")
            m.d.comb += do.eq(want & have)
            stalls.append(want & ~have & ~self.ended)
            xn = Signal(S, name=f"x_{tag}")
            m.d.comb += xn.eq(Mux(do, Cat(words[0] if D == 1 else word_at[used], xv), xv))
            u = Signal(range(D + 1), name=f"used_{tag}")
            m.d.comb += u.eq(used + do)
            return xn, u

        m.submodules.multiply_add = mul = self.multiply_add(sh)
        m.d.comb += [mul.a.eq(x[P:]), mul.f.eq(f), mul.addend.eq(r[:P + 1])]
        x1 = mul.out
        xv, used = pop(x1, Const(0, bits_for(D)), "sym")
        extra = Const(0, max(1, sh.K))
        single = C == 1 and sh.K <= P
        if single:
            # One chunk of w = k bits: q's top w bits come out and the bits above them move w
            # places down. Bits below P - K never move, so only the bits from P - K up go through
            # the (K + 1)-way shifter, and only the K bits of [P - K, P) choose between staying
            # and moving.
            w = k
            K = sh.K
            moved = two_level_shift(m, xv[P - K:], w, S - P + K, "chunk_moved", left=False)
            bits = Signal(K, name="chunk_bits")
            m.d.comb += bits.eq(xv[P - K:P] >> (K - w).as_unsigned())
            mid = [Mux(P - K + i < P - w, xv[P - K + i], moved[i]) for i in range(K)]
            xc = Signal(S, name="x_chunk")
            m.d.comb += xc.eq(Cat(xv[:P - K], *mid, moved[K:]))
            extra = bits
            xv, used = pop(xc, used, "chunk")
        for j, (active, width) in enumerate(chunk_plan(m, sh, k) if not single else []):
            # A chunk of w bits takes q's top w bits and deletes them from x: bits below P - w stay,
            # the others come from w places up (a right shift by w <= K). An inactive chunk is w = 0.
            w = Signal(range(P + 1), name=f"chunk{j}_w")
            m.d.comb += w.eq(Mux(active, width, 0))
            keep = Signal(range(P + 1), name=f"chunk{j}_keep")
            m.d.comb += keep.eq(P - w)
            low = Signal(P, name=f"chunk{j}_low")          # mask of the bits that stay
            m.d.comb += low.eq((Const(1, P + 1) << keep) - 1)
            bits = Signal(max(1, sh.K), name=f"chunk{j}_bits")
            m.d.comb += bits.eq(xv[:P] >> keep)
            xc = Signal(S, name=f"x_chunk{j}")
            m.d.comb += xc.eq(((xv >> w) & ~Cat(low, Const(0, S - P))) | (xv & low))
            e_next = Signal(max(1, sh.K), name=f"extra{j}")
            m.d.comb += e_next.eq((extra << w) | bits)
            extra = e_next
            xv, used = pop(xc, used, f"chunk{j}")
        stall = Signal()
        m.d.comb += stall.eq(Cat(*stalls).any())

        # -- one step per clock ---------------------------------------------------------------------
        found = Signal()
        m.d.comb += found.eq(~below & ~beyond)
        advance = Signal()       # a pair is decoded
        o_free = ~o_valid | self.o.ready
        m.d.comb += [advance.eq(~stall & run & found & o_free), self.step.eq(advance)]
        with m.If(self.o.ready):
            m.d.sync += o_valid.eq(0)
        with m.If(self.step):
            m.d.sync += [o_valid.eq(1), o_pair.symbol.eq(sym), o_pair.extra.eq(extra), walking.eq(0)]
        with m.Elif(run & ~found):
            # A bucket that meets more than ten symbols: step towards the right one.
            m.d.sync += [walking.eq(1), walk_sym.eq(Mux(below, sym - 1, sym + 1))]

        # -- word buffer: drop the popped words, append an accepted one --------------------------------
        consume = Signal(range(D + 1))
        take = Signal()
        m.d.comb += [consume.eq(Mux(advance, used, 0)), self.i.ready.eq((n_buf < D) | (consume != 0)),
                     take.eq(self.i.valid & self.i.ready)]
        if D == 1:
            with m.If(take):                        # the buffer is empty or being emptied
                m.d.sync += words[0].eq(self.i.p)
        for j in range(D if D > 1 else 0):
            src = j + consume
            with m.If(src < n_buf):
                m.d.sync += words[j].eq(word_at[src])
            with m.Elif(take & (j == n_buf - consume)):
                m.d.sync += words[j].eq(self.i.p)
        m.d.sync += n_buf.eq(n_buf - consume + take)
        with m.If(advance):
            m.d.sync += x.eq(xv)
        with m.If(self.load):
            m.d.sync += [x.eq(self.load_state), n_buf.eq(0), walking.eq(0)]
        self.probe = RansDecoderCoderProbe(words=words, n_buf=n_buf, sym=sym, x_symbol=x1)
        return m
