"""The one-state rANS encoder's coder (:class:`RansEncoderCoder`): symbol lookup, pushes, chunks
and the division ``x // f`` of one state in one clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..common import bits_for, pair_layout
from .link import encoder_link
from .shape import RansShape
from .tables import RansTables, table_address
from .arithmetic import ArrayDivider, chunk_plan, two_level_shift


@dataclass(frozen=True)
class RansEncoderCoderProbe:
    """The output FIFO, its count and the divider's registers, which the formal pipeline lemma
    (``encoder_pipeline``) ties to the golden encoder: what the formal lemmas read of
    :class:`RansEncoderCoder` (its ``probe`` once elaborated; not ports)."""

    fifo: list[Signal]
    n_out: Value
    dividend: Value
    quotient: Value
    remainder: Value


class RansEncoderCoder(wiring.Component):
    """The rANS encoder's coder (``shell=False``): pairs in (back to front), words out in push order.

    Ports: ``i`` (pairs ``{symbol, extra[, set]}``), ``o`` (``W``-bit words, from a register), ``cfg``
    (programmable cores), and the control a shell drives: ``start`` (``x = 0``), ``run`` (take pairs),
    ``flush`` (push ``x``'s low word and shift it out, while ``x != 0``); ``state`` (``x``), ``held``
    (words waiting) and ``step`` (a pair taken) go back.

    Per clock: each chunk of the additional data (least significant first), then the symbol, each
    preceded by a conditional push; ``x // f`` and ``x % f`` come from one combinational non-restoring
    array divider of ``S - min(P, W)`` add/subtract stages of ``P + 1`` bits (after the push
    ``x < f 2**(S - P)`` bounds the quotient), no DSPs, as in the paper's encoder. Pushed words wait
    in a buffer of ``chunks + 1`` words (one where a pair pushes at most once); a pair is taken when
    that many slots are free or being freed in the same clock, so ``i.ready`` follows ``o.ready``
    combinationally and one word of buffer keeps one pair per clock.

    Why no reciprocal: ``x // f`` as a multiply-high by a per-symbol reciprocal is exact for
    ``x < 2**48`` only with a reciprocal of about 49 bits, a 48 x 49 multiply: six DSP48E2 (26 x 17
    unsigned each), three times the issue's budget of two, and a digit-by-digit estimate-and-correct
    division with 17-bit reciprocals needs four multiplies in series. With one state per pair the
    divider stays in LUTs. (Measured alternatives: ``docs/design/rans.md``.)
    """

    def __init__(self, shape: RansShape):
        self._shape = shape
        self._depth = self.depth(shape)
        #: The coder's output buffer and divider, filled in by :meth:`elaborate`: the formal lemma
        #: ``encoder_pipeline`` (``sim/formal/``) states its invariants over them. Not ports.
        self.probe: RansEncoderCoderProbe | None = None      # set by elaborate
        super().__init__(self.ports(shape))

    @staticmethod
    def depth(sh: RansShape) -> int:
        """Words the output buffer holds: one pair's pushes (a pair is taken while the words of the
        previous one leave, so the buffer never needs a second pair's)."""
        return 1 if sh.one_word else sh.chunks + 1

    @classmethod
    def ports(cls, sh: RansShape) -> dict:
        """The coder's signature members for ``sh``."""
        ports = {"i": In(stream.Signature(pair_layout(sh.symbol_bits, sh.K, sh.set_bits))),
                 "o": Out(stream.Signature(sh.W)),
                 **encoder_link(sh, cls.depth(sh)).flip().members}
        if sh.programmable:
            ports["cfg"] = sh.cfg_port()
        return ports

    @staticmethod
    def divider(sh: RansShape) -> ArrayDivider:
        """The coder's divider, ``x // f`` and ``x % f`` in the clock: ``S``-bit dividend, ``P + 1``-bit
        divisor, ``S - min(P, W)`` quotient bits (after a push ``x < f 2**(S - min(P, W))``)."""
        return ArrayDivider(sh.S, sh.P + 1, sh.S - min(sh.P, sh.W))

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, C = sh.S, sh.W, sh.P, sh.chunks
        per_pair = 1 if sh.one_word else C + 1
        D = self._depth
        m = Module()
        m.submodules.entries = tables = RansTables(sh, buckets=False)
        if sh.programmable:
            wiring.connect(m, wiring.flipped(self.cfg), tables.cfg)

        x = Signal(S)
        fifo = [Signal(W, name=f"out{j}") for j in range(D)]
        n_out = Signal(range(D + 1))
        m.d.comb += [self.state.eq(x), self.held.eq(n_out)]
        s = self.i.p.symbol
        m.d.comb += tables.symbol_addr.eq(table_address(s, self.i.p.set if sh.sets > 1 else None))
        entry = tables.symbol
        f, c, k = entry.freq, entry.cum, entry.k

        pushes = []   # (enable, word) in push order

        def push_if(xv, limit_log2=None, limit=None, tag="", when=None):
            """Push the low word when ``x >> (S - P) >= limit`` (or ``when``); returns the state after it."""
            do = Signal(name=f"push_{tag}")
            if when is not None:
                m.d.comb += do.eq(when)
            elif limit_log2 is not None:
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
        single = C == 1 and sh.K <= P
        if single:
            # One chunk of w = k bits, frequency 2**(P - w): push when x >> (S - P) >= 2**(P - w)
            # (never for w = 0, as x >> (S - P) < 2**P), then insert the chunk's bits below P and
            # move the bits above them w places up. Bits below P - K never move, so only the bits
            # from P - K up go through the (K + 1)-way shifter, and only the K bits of [P - K, P)
            # choose between staying and taking the chunk's (left-aligned) bits.
            K, w = sh.K, k
            # x >> (S - P) >= 2**(P - w): one of x's top w bits is set (an OR of at most K bits).
            xp = push_if(xv, tag="chunk", when=(xv[S - K:] >> (K - w).as_unsigned()) != 0)
            moved = two_level_shift(m, xp[P - K:], w, S - P + 2 * K, "chunk_moved", left=True)
            value = Signal(K, name="chunk_value")            # the chunk, left-aligned in K bits
            m.d.comb += value.eq(self.i.p.extra << (K - w).as_unsigned())
            mid = [Mux(i < K - w, xp[P - K + i], value[i]) for i in range(K)]
            xc = Signal(S, name="x_chunk")
            m.d.comb += xc.eq(Cat(xp[:P - K], *mid, moved[K:]))
            xv = xc
        plan = chunk_plan(m, sh, k) if not single else []
        for j in reversed(range(len(plan))):        # least significant chunk first
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
        m.submodules.divider = div = self.divider(sh)
        m.d.comb += [div.dividend.eq(xp), div.divisor.eq(f)]
        x_next = Signal(S)
        # Its own module: otherwise each stage of the divider's ripple would re-run the whole
        # encoder's combinational process in the Amaranth simulator.
        m.submodules.next_state = next_state = Module()
        next_state.d.comb += x_next.eq((div.quotient << P) | (c + div.remainder))

        # -- output buffer ------------------------------------------------------------------------
        emit = Signal()
        m.d.comb += [self.o.valid.eq(n_out != 0), self.o.p.eq(fifo[0]), emit.eq(self.o.valid & self.o.ready)]
        flush_src = x[:W]
        if sh.one_word and len(pushes) > 1:
            # At most one of the pair's pushes happens: one word and one write position.
            word = pushes[-1][1]
            for do, w in reversed(pushes[:-1]):
                word = Mux(do, w, word)
            any_push, pushed = Signal(name="push_any"), Signal(W, name="push_word")
            # A flush pushes x's low word, which is also the first push's word: one multiplexer.
            m.d.comb += [any_push.eq(Cat(*(do for do, _ in pushes)).any()),
                         pushed.eq(Mux(self.flush, x[:W], word))]
            pushes = [(any_push, pushed)]
            flush_src = pushed
        fire = Signal()
        m.d.comb += [self.i.ready.eq(self.run & (n_out - emit <= D - per_pair)), fire.eq(self.i.valid & self.i.ready),
                     self.step.eq(fire)]
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
        m.d.comb += flush_word.eq(self.flush & (x != 0)
                                  & (n_out - emit < D))
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
                m.d.sync += fifo[j].eq(flush_src)
        m.d.sync += n_out.eq(base + count + flush_word)
        with m.If(fire):
            m.d.sync += x.eq(x_next)
        with m.Elif(flush_word):
            m.d.sync += x.eq(x >> W)
        with m.If(self.start):
            m.d.sync += x.eq(0)
        self.probe = RansEncoderCoderProbe(fifo=fifo, n_out=n_out, dividend=div.dividend, quotient=div.quotient,
                                           remainder=div.remainder)
        return m
