"""The interleaved rANS decoder's coder (:class:`RansDecoderCoderXN`): ``N`` in :data:`XN_STATES`
states round a ring of :data:`XN_RING` pipeline stages and ``N - 5`` delay registers, one pair per clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...model.errors import ConfigError
from ..dsp import MulAdd
from ..common import TableSelect, bits_for, pair_layout, table_select_layout
from .link import decoder_xn_link
from .shape import RansShape
from .tables import RansTables, table_address


#: Pipeline stages of the interleaved decoder's ring (one state in each; the class docstring of
#: :class:`RansDecoderCoderXN` says what each does).
XN_RING = 5

#: Interleaved state counts ``N`` the decoder takes (``docs/bitstream.md`` §8): ``N >= XN_RING``, the
#: states beyond the ring's five waiting in a delay line; 16 is what the encoder writes (``rans16x16``).
XN_STATES = tuple(range(XN_RING, 17))

#: Bits of a stream's tag in the interleaved decoder (its position among decoded streams, mod 4): the
#: words of at most three streams meet in the coder's word buffer (an older one's unread words, the
#: running one's, the next one's), and the tag tells them apart and in order.
TAG_BITS = 2


@dataclass(frozen=True)
class RansDecoderCoderXNProbe:
    """What the formal lemmas of the interleaved rANS decoder read of :class:`RansDecoderCoderXN` (its
    ``probe`` once elaborated; not ports). ``turn``: the ring turns this clock; ``miss``: stage 2's
    candidate was wrong and the table is read again (the ring holds); ``x``: the state at stage 1
    (the one a pair stepped now decodes from); ``word``, ``word2``: the next two buffered words (the
    first popped, then the one after it); ``pop_early``, ``pop_late``: stage 5's pops (before the
    chunk, after it) of the pair there; ``x_next``: the state stage 5 returns to the ring; ``evicted``:
    the state that left the ring at the last turn; ``symbol``: stage 5's symbol. Per stage ``j`` (1 to 4, the ring's order):
    ``bubble``, ``tag``, ``last``; ``ring``: every register that carries a state's data round the ring
    outside stage 2's search (stage 1 to 5's states and pairs, the delay line); the word buffer:
    ``port_a``, ``port_b``, their valid bits ``va``, ``vb``, tags ``ta``, ``tb``, ``half`` and
    ``skip_b``; and ``found`` (stage 2's range test)."""

    turn: Value
    miss: Value
    x: Signal
    word: Signal
    word2: Signal
    pop_early: Signal
    pop_late: Signal
    x_next: Signal
    evicted: Signal
    symbol: Signal
    bubble: list[Signal]
    tag: list[Signal]
    last: list[Signal]
    ring: list[Signal]
    port_a: Signal
    port_b: Signal
    va: Signal
    vb: Signal
    ta: Signal
    tb: Signal
    half: Signal
    skip_b: Signal
    found: Signal


class RansDecoderCoderXN(wiring.Component):
    """The rANS decoder's coder for ``N`` in :data:`XN_STATES` (5 to 16) interleaved states
    (``rans16x5`` .. ``rans16x16``, ``docs/bitstream.md`` §8): words in, pairs out (registered), one
    pair per clock, each state with ``N`` clocks of its own.

    The ``N`` states travel round a ring of ``N`` registers, one state in each: five pipeline stages
    (:data:`XN_RING`) and, for ``N > 5``, a delay line of ``N - 5`` ``S``-bit registers from stage 5
    back to stage 1 (flip-flops with the turn as enable and no reset, so that a Xilinx synthesis may
    map the line to SRLs; no logic). Pair ``j`` uses state ``j mod N`` because the ring turns once per
    pair (a turn moves every register at once; nothing moves while the ring waits). Per stage (paper
    configuration):

    1. *bucket*: from ``x`` (``S`` bits) with ``q = x mod 2**P``, the bucket table at ``q``'s top 6
       bits, five split compares (:data:`XN_SPLITS`) and their count (a constant table of the five
       results) added to the bucket's base give the candidate symbol;
    2. *symbol*: the symbol table gives ``freq, cum, k``; one subtract gives ``q - cum`` and, in its
       borrow, ``q < cum``, one compare ``q - cum >= freq``: the range test and ``q - cum`` are
       registered; a wrong candidate (a bucket that meets more than six symbols) holds the ring and
       reads the table again at the stepped candidate, one symbol per clock;
    3. *operands*: ``x >> P``, ``freq`` and the addend ``q - cum`` into the multiply-add's registers
       (the whole product is the DSP's: ``S - P <= 26``);
    4. *multiply*: ``x' = (x >> P) * freq + (q - cum)``, in one DSP48E2 with the add in its post-adder
       and stage 3's operands and ``x'`` in its own A/B/C and P registers (:class:`~ansforge.hdl.dsp.MulAdd`);
    5. *pop*: the pair's pops (one before the chunk when ``x' < 2**(S - W)``, one after it when the
       state is then below ``2**(S - W)``: at most two, below) and the ``k``-bit chunk of additional
       data; the pair is registered on ``o`` and the state returns to stage 1.

    A *bubble* (no pair) passes a state round the ring unchanged (``freq = 2**P``, ``cum = 0``, ``k = 0``:
    ``x' = x``). States enter from the shell (``inject``, ``state``): in the turn that injects, the
    shell's state takes stage 1's place instead of the state coming round (``evicted``, which the end
    check reads), one turn before that state's first pair. So a stream's first pair follows the
    previous stream's last one in the next turn: after a stream's last pair its ``N`` final states
    each leave the ring once in the next ``N`` turns, the next stream's states taking their places.

    Ports: ``i`` (``W``-bit words, or ``2 W``-bit port words, top of stack first, each with its
    stream's ``tag``, :meth:`word_layout`), ``o`` (pairs ``{symbol, extra}``, a register), ``cfg``
    (programmable cores), ``sel`` (table sets), and the control a shell drives: ``run`` (step a pair,
    of stream ``tag``; ``last``: its stream's last), ``drain`` (turn with a bubble), ``inject`` and
    ``state``, ``ended`` (no more words of stage 5's stream, ``pair_tag``, will come), ``purge`` and
    ``purge_tag`` (drop the buffered words of that stream: it ended with words unread); back go
    ``step`` (a pair entered the ring), ``turned``, ``o_last`` (the pair on ``o`` is its stream's
    last), ``evicted_initial`` (the state evicted at the last turn is ``2**(S - W)``), ``starved`` (a
    registered pulse: a pop of stream ``starved_tag`` found none of its words) and the word buffer's
    ``held`` bits and ``held_tags``.

    A pop takes only its own stream's words, so the next stream's words may wait in the buffer behind
    the running one's. A turn waits until two of stage 5's stream's words are
    buffered, or ``ended``, whether or not the pair pops: those tests are registers, not the pop test,
    and the buffer refills in the clock it is emptied. Latency: a pair is on ``o`` after the fourth
    turn that follows its step (stages 2 to 5, the last one writing the output register).

    Supported shapes: ``P <= S - W``, ``K <= P <= 16``, ``S <= 2 W`` and ``S - P <= 26`` (the whole
    product in the DSP), where a pair may pop twice, once before the chunk and once after it (``S =
    32, W = 16``: after a pop ``x >= 2**W >= 2**(S - W)``, so each of the two steps pops at most
    once). The legacy ``S = 48, W = 32`` streams (``rans16xN-s48w32``) have no core: they decode in
    software. The port is ``2 W`` bits (:meth:`port_words`): two stream words a port word, the first
    popped in the high half, an
    odd count's first port word with a zero high half above the stream, so that the words stay
    ``2 W``-bit aligned from the stream's bottom up, as the host stored them (the shell takes the
    head; an odd stream's first body port word comes with ``skip``: its high half was the head's).
    Two port-word registers hold the next words (``half`` says whether the first one's high word is
    gone; a port word is written once into each register and never shifted), a turn waits until two
    words are buffered (or ``ended``), and the chunk's pop takes the second word where the symbol's
    took the first. Two words a clock in, at most two a pair out: the port never holds a turn back
    once the buffer is full. The product is ``16 x 17`` bits, all in the DSP. Measurements and the
    variants tried: ``docs/design/rans.md``.
    """

    def __init__(self, shape: RansShape):
        self._shape = shape
        #: The ring's and the word buffer's registers, filled in by :meth:`elaborate`: the formal lemmas
        #: of the interleaved decoder (``sim/formal/``) read them. Not ports.
        self.probe: RansDecoderCoderXNProbe | None = None      # set by elaborate
        super().__init__(self.ports(shape))

    @staticmethod
    def check_shape(sh: RansShape) -> None:
        """``ConfigError`` unless the pipelined coder can decode ``sh`` (see the class docstring)."""
        # At most two pops per pair, and the whole product in the DSP (no upper product in LUTs).
        if not (sh.chunks <= 1 and sh.S <= 2 * sh.W and sh.S - sh.P <= 26 and sh.P <= 16 and sh.P <= sh.S - sh.W):
            raise ConfigError(f"codec {sh.codec.name}: the interleaved rANS decoder needs at most two pops per "
                              f"pair with the whole product in one DSP (K <= P <= 16, S <= 2 W, S - P <= 26) and "
                              f"P <= S - W; S={sh.S}, W={sh.W}, P={sh.P}, max_extra_bits={sh.K}")

    @staticmethod
    def port_words(sh: RansShape) -> int:
        """Stream words per word of the input port: 2 (a ``2 W``-bit port: two pops per pair never
        wait on the port)."""
        return 2

    @staticmethod
    def word_layout(sh: RansShape) -> data.StructLayout:
        """A word of the coder's ``i``: ``data`` (a ``2 W``-bit port word), the stream's ``tag`` (its
        position among streams, mod 4) and ``skip`` (the high half is not the stream's: an odd stream's
        first body port word, whose high half closed the head)."""
        pw = RansDecoderCoderXN.port_words(sh)
        return data.StructLayout({"data": sh.W * pw, "tag": TAG_BITS, "skip": 1})

    @staticmethod
    def ports(sh: RansShape) -> dict:
        """The coder's signature members for ``sh``."""
        pw = RansDecoderCoderXN.port_words(sh)
        ports = {"i": In(stream.Signature(RansDecoderCoderXN.word_layout(sh))),
                 "o": Out(stream.Signature(pair_layout(sh.symbol_bits, sh.K))),
                 **decoder_xn_link(sh, TAG_BITS, pw).flip().members}
        if sh.programmable:
            ports["cfg"] = sh.cfg_port()
        if sh.sets > 1:
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        return ports

    @staticmethod
    def multiply_add(sh: RansShape) -> MulAdd:
        """Stages 3 and 4's multiply-add, ``(x >> P) * f + (x mod 2**P - cum)``: ``S - P`` by ``P + 1``
        bits plus an ``S``-bit addend, ``S`` bits out (one DSP48E2)."""
        return MulAdd(sh.S - sh.P, sh.P + 1, sh.S, sh.S)

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, K, N = sh.S, sh.W, sh.P, sh.K, sh.codec.states
        L = S - W                                   # a state is normalized at x >= 2**L
        A = S - P                                   # bits of x >> P, all multiplied in the DSP (check_shape)
        m = Module()
        m.submodules.entries = tables = RansTables(sh, buckets=True)
        if sh.programmable:
            wiring.connect(m, wiring.flipped(self.cfg), tables.cfg)
        sb = sh.symbol_bits

        # -- the ring: stage registers (bubble = no pair; all bubbles after reset) ---------------------
        x0 = Signal(S)                               # stage 1's state
        # The states beyond the pipeline's: stage 5's result enters ``delay[0]``, ``delay[-1]`` feeds
        # stage 1. No reset (a state's value before the head is never used), so that it may be an SRL.
        delay = [Signal(S, name=f"x_wait{j}", reset_less=True) for j in range(N - XN_RING)]
        r1_x, r1_cand, r1_bub = Signal(S), Signal(sb), Signal(init=1)
        r2_x, r2_cand, r2_bub = Signal(S), Signal(sb), Signal(init=1)
        r2_next = Signal(sb)                         # the stepped candidate: r2_cand -+ 1 towards the symbol
        r2_f, r2_lo, r2_k = Signal(P + 1), Signal(P), Signal(bits_for(K))
        r2_found = Signal(init=1)
        # Stage 3's operands and stage 4's result are the registers of the multiply-add (one DSP48E2).
        m.submodules.mul_add = mac = self.multiply_add(sh)
        r3_k, r3_sym, r3_bub = Signal(bits_for(K)), Signal(sb), Signal(init=1)
        r4_x, r4_k, r4_sym, r4_bub = mac.p, Signal(bits_for(K)), Signal(sb), Signal(init=1)
        T = TAG_BITS
        # Each pair carries its stream's tag and whether it is the stream's last pair down the pipeline.
        r1_tag, r2_tag, r3_tag, r4_tag = (Signal(T, name=f"r{j}_tag") for j in range(1, 5))
        r1_last, r2_last, r3_last, r4_last = (Signal(name=f"r{j}_last") for j in range(1, 5))
        word = Signal(W)                             # the next word to pop
        word2 = Signal(W)                            # the one after it (a second pop)
        own1, own2 = Signal(), Signal()              # one / two words of stage 5's stream are buffered
        stale = Signal()                             # the oldest buffered word is one the shell purges
        # Two port words: ``port_a`` holds the next words, ``port_b`` the two after; ``half`` says
        # whether ``port_a``'s high word (popped first) is gone. Words never move within a
        # register: a port word is written once into ``port_b`` and once into ``port_a``. Each has
        # its stream's tag, so that the next stream's words may wait behind the running one's.
        port_a, port_b = Signal(2 * W, name="port_a"), Signal(2 * W, name="port_b")
        ta, tb = Signal(T, name="ta"), Signal(T, name="tb")
        va, vb, half, skip_b = Signal(name="va"), Signal(name="vb"), Signal(name="half"), Signal(name="skip_b")
        m.d.comb += [word.eq(Mux(half, port_a[:W], port_a[W:])), word2.eq(Mux(half, port_b[W:], port_a[:W])),
                     own1.eq(va & (ta == r4_tag)), own2.eq(own1 & (~half | (vb & (tb == r4_tag)))),
                     stale.eq(self.purge & va & (ta == self.purge_tag)),
                     self.held.eq(Cat(va, vb)), self.held_tags.eq(Cat(ta, tb))]
        o_valid, o_pair, o_last = Signal(), Signal(self.o.p.shape()), Signal()
        starved, starved_tag = Signal(), Signal(T)
        # The state that left the ring at the last turn (what the end check reads: an injection puts the
        # next stream's state in its place).
        evicted = Signal(S, reset_less=True)
        m.d.comb += [self.o.valid.eq(o_valid), self.o.p.eq(o_pair), self.o_last.eq(o_last),
                     self.starved.eq(starved), self.starved_tag.eq(starved_tag), self.pair_tag.eq(r4_tag),
                     self.evicted_initial.eq(evicted == (1 << L))]

        table_set = r1_set = r2_set = None
        run = Signal()
        if sh.sets > 1:
            m.submodules.table_select = select = TableSelect(sh.set_bits)
            wiring.connect(m, wiring.flipped(self.sel), select.sel)
            m.d.comb += select.fire.eq(self.step)
            table_set = select.set
            r1_set, r2_set = Signal.like(table_set), Signal.like(table_set)
            m.d.comb += run.eq(self.run & select.ready)
        else:
            m.d.comb += run.eq(self.run)

        # -- stage 1: the bucket table at q's top bits, the split compares, the candidate ----------
        # (The compares sit between the table and the register: a table read straight into a register
        # becomes a block RAM with a slow clock-to-output on an ECP5.)
        m.d.comb += tables.bucket_addr.eq(table_address(x0[:P][sh.off_bits:], table_set))
        bkt = tables.bucket
        gt = Signal(sh.splits)
        low = x0[:sh.off_bits] if sh.off_bits else Const(0, 1)
        m.d.comb += gt.eq(Cat(*((low > bkt[f"split{j}"]) for j in range(sh.splits))) if sh.off_bits else 0)
        # The count of splits passed is a constant table of ``gt`` (one LUT6 per bit), not a chain of adds.
        count = Signal(range(sh.splits + 1))
        m.d.comb += count.eq(Array([Const(bin(v).count("1"), len(count)) for v in range(1 << sh.splits)])[gt])
        cand = Signal(sb)
        m.d.comb += cand.eq(bkt.base + count)

        # -- stage 2: the candidate's symbol entry and range test -----------------------------------
        # The range test is registered (``r2_found``), so that a turn of the ring waits on registers
        # only. A wrong candidate (a bucket that meets more than six symbols) holds the ring, and the
        # table is read again at the stepped candidate, one symbol per clock.
        miss = ~r2_found
        # The stepped candidate is registered (``r2_next``: one add after the range subtract's borrow), so
        # that no add is in series with the table read on a step (that add, the read, ``q - cum`` and the
        # range compare were the ECP5's longest path: 95.6 MHz).
        stepped = r2_next
        sym = Signal(sb)
        qs = Signal(P)
        bub = Signal()
        m.d.comb += [sym.eq(Mux(miss, stepped, r1_cand)), qs.eq(Mux(miss, r2_x[:P], r1_x[:P])), bub.eq(~miss & r1_bub)]
        m.d.comb += tables.symbol_addr.eq(table_address(sym, None if r1_set is None else Mux(miss, r2_set, r1_set)))
        entry = tables.symbol
        # One subtract gives ``q - cum`` and, in its borrow, ``q < cum``; one compare then tests ``q - cum
        # < freq`` (no ``end`` column in the table: two RAM64M8 fewer).
        # A bubble subtracts 0 (the mask sits in the subtract's LUTs), so that ``q - cum`` is also its ``q``.
        diff = Signal(P + 2)                         # q - cum, two's complement
        below, found = Signal(), Signal()
        m.d.comb += [diff.eq(qs - (entry.cum & ~bub.replicate(P + 1))), below.eq(diff[P + 1]),
                     found.eq(bub | ~(below | (diff[:P + 1] >= entry.freq)))]
        f_eff, lo_eff, k_eff = Signal(P + 1), Signal(P), Signal(bits_for(K))
        m.d.comb += [f_eff.eq(Mux(bub, 1 << P, entry.freq)), lo_eff.eq(diff[:P]), k_eff.eq(Mux(bub, 0, entry.k))]

        # -- stage 3: the addend (q - cum); the DSP takes the whole product ---------------------------
        add = Signal(S)
        m.d.comb += add.eq(r2_lo)

        # -- stage 4: the multiply and its add (one DSP48E2, its registers and post-adder) -----------
        m.d.comb += [mac.a.eq(r2_x[P:P + A]), mac.b.eq(r2_f), mac.c.eq(add)]     # (mac.en: the turn)

        # -- stage 5: the pops and the chunk --------------------------------------------------------
        w = r4_k
        early = Signal()                             # x' < 2**L: pop before the chunk
        late = Signal()                              # 2**L <= x' < 2**(L + w): pop after it
        v = Signal(S)
        m.d.comb += [early.eq(r4_x[L:] == 0), v.eq(Mux(early, Cat(word, r4_x[:S - W]), r4_x))]
        m.d.comb += late.eq((v[L:] >> w) == 0 if K else 0)
        if K:
            moved = Signal(S - P + K, name="chunk_moved")
            m.d.comb += moved.eq(v[P - K:] >> w)
            bits = Signal(K, name="chunk_bits")
            m.d.comb += bits.eq(Array([v[P - j:P] for j in range(K + 1)])[w])    # the top w bits of v[:P]
            mid = [Mux(P - K + i < P - w, v[P - K + i], moved[i]) for i in range(K)]
            chunked = Signal(S, name="x_chunk")
            m.d.comb += chunked.eq(Cat(v[:P - K], *mid, moved[K:]))
        else:
            bits, chunked = Const(0, 1), v
        x_next = Signal(S)
        late_word = Mux(early, word2, word)
        m.d.comb += x_next.eq(Mux(late, Cat(late_word, chunked[:S - W]), chunked))
        pop = Signal()
        m.d.comb += pop.eq((early | late) & ~r4_bub)

        # -- the turn of the ring -------------------------------------------------------------------
        o_free = ~o_valid | self.o.ready
        # A turn waits until two of stage 5's stream's words are buffered or the shell says none will
        # come (``ended``), whether or not the pair pops: those are registers, not the pop test. A
        # purged word at the front holds every turn with a pair at stage 5.
        ready = Signal()
        m.d.comb += ready.eq(r2_found & o_free & (r4_bub | (~stale & (own2 | self.ended))))
        step, turn = Signal(), Signal()
        m.d.comb += [step.eq(run & ready), self.step.eq(step), self.turned.eq(turn),
                     turn.eq(step | (self.drain & ready)), mac.en.eq(turn)]
        with m.If(turn):
            m.d.sync += [r1_x.eq(x0), r1_cand.eq(cand), r1_bub.eq(~step), r1_tag.eq(self.tag), r1_last.eq(self.last),
                         r2_x.eq(r1_x), r2_bub.eq(r1_bub), r2_tag.eq(r1_tag), r2_last.eq(r1_last),
                         r3_k.eq(r2_k), r3_sym.eq(r2_cand), r3_bub.eq(r2_bub), r3_tag.eq(r2_tag), r3_last.eq(r2_last),
                         r4_k.eq(r3_k), r4_sym.eq(r3_sym), r4_bub.eq(r3_bub), r4_tag.eq(r3_tag), r4_last.eq(r3_last)]
            ring_in = x_next
            for d in delay:
                m.d.sync += d.eq(ring_in)
                ring_in = d
            # The shell's next state takes the place of the one leaving, which the end check then reads.
            m.d.sync += [x0.eq(Mux(self.inject, self.state, ring_in)), evicted.eq(ring_in)]
            if r1_set is not None:
                m.d.sync += [r1_set.eq(table_set), r2_set.eq(r1_set)]
            with m.If(~r4_bub):
                m.d.sync += [o_valid.eq(1), o_pair.symbol.eq(r4_sym), o_pair.extra.eq(bits), o_last.eq(r4_last)]
        m.d.sync += starved.eq(0)
        with m.If(turn & ~r4_bub & (((early | late) & ~own1) | (early & late & ~own2))):
            m.d.sync += [starved.eq(1), starved_tag.eq(r4_tag)]
        with m.If(turn | miss):                      # (a miss reads the table at sym = stepped)
            m.d.sync += [r2_f.eq(f_eff), r2_lo.eq(lo_eff), r2_k.eq(k_eff), r2_found.eq(found),
                         r2_cand.eq(sym), r2_next.eq(sym + Mux(below, Const((1 << sb) - 1, sb), 1))]
        with m.If(self.o.ready & ~(turn & ~r4_bub)):
            m.d.sync += o_valid.eq(0)

        # -- the word buffer: refilled in the clock it is popped ---------------------------------------
        # A pop takes only its own stream's words; a purged word (an older stream's unread word) is
        # dropped, one buffer register a clock, while it holds the turns.
        take = Signal()
        # Words taken this clock: a turn's pops of its own stream (none of another's: the turn then
        # reports ``starved``).
        taken = Signal(2)
        m.d.comb += taken.eq((turn & pop & own1) + (turn & early & late & ~r4_bub & own2))
        t = Signal(2)                            # words of port_a gone after this clock
        used = Signal()                          # port_a is used up (or dropped)
        m.d.comb += [t.eq(half + taken), used.eq((t >= 2) | stale)]
        move = Signal()                          # port_b becomes port_a: port_a is empty or used up
        m.d.comb += [move.eq(vb & (~va | used)),
                     self.i.ready.eq(~vb | move), take.eq(self.i.valid & self.i.ready)]
        # (A port_b taken in part by a second pop is its stream's, never a first body word: no skip.)
        with m.If(va & used):
            m.d.sync += [va.eq(vb), half.eq(Mux(stale, 0, t[0]) | skip_b)]
        with m.Elif(va):
            m.d.sync += half.eq(t[0])
        with m.Elif(vb):
            m.d.sync += [va.eq(1), half.eq(skip_b)]
        with m.If(move):
            m.d.sync += [port_a.eq(port_b), ta.eq(tb)]
        with m.If(take):
            m.d.sync += [port_b.eq(self.i.p.data), tb.eq(self.i.p.tag), skip_b.eq(self.i.p.skip), vb.eq(1)]
        with m.Elif(move):
            m.d.sync += vb.eq(0)
        self.probe = RansDecoderCoderXNProbe(
            turn=turn, miss=miss, x=x0, word=word, word2=word2, pop_early=early & ~r4_bub, pop_late=late & ~r4_bub,
            x_next=x_next, evicted=evicted, symbol=r4_sym, bubble=[r1_bub, r2_bub, r3_bub, r4_bub], tag=[r1_tag, r2_tag, r3_tag, r4_tag],
            last=[r1_last, r2_last, r3_last, r4_last],
            ring=[x0, r1_x, r1_cand, r1_bub, r1_tag, r1_last, r2_x, r2_bub, r2_tag, r2_last, r3_k, r3_sym, r3_bub,
                  r3_tag, r3_last, r4_x, r4_k, r4_sym, r4_bub, r4_tag, r4_last, o_pair, o_last, evicted, *delay],
            port_a=port_a, port_b=port_b, va=va, vb=vb, ta=ta, tb=tb, half=half, skip_b=skip_b, found=r2_found)
        return m
