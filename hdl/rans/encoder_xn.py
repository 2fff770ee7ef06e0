"""The interleaved rANS encoder's coder (:class:`RansEncoderXnCoder`, ``N`` in
:data:`ENCODER_XN_STATES`): a ring of ``N`` pipeline stages, one state per stage, one pair per clock;
the quotient from a reciprocal estimate and a pipelined divider.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...model.coding.rans import freq_reciprocals
from ..common import pair_layout
from .link import encoder_xn_link
from .shape import RansShape, recip_entry, recip_split
from .tables import RansTables, table_address


#: Interleaved states of the pipelined encoder coder (:class:`RansEncoderXnCoder`): ``rans16x16``.
#: One state per pipeline stage; see the class docstring for why 16.
ENCODER_XN_STATES = (16,)


#: Pipeline stages of :class:`RansEncoderXnCoder` ahead of its divider: the front (pushes and the
#: chunk), the dividend's shift and ``X_top - f``, the reciprocal multiply, the estimate's bits, the
#: back multiply ``q_e f``, the partial remainder.
_XN_HEAD = 6


def xn_plan(N: int, P: int, Q: int) -> dict:
    """The widths and the stage plan of :class:`RansEncoderXnCoder` for ``N`` states, ``P`` and ``Q = S - P``.

    ``t = P - 1`` top quotient bits come from the reciprocal estimate, ``D = Q - t`` from the divider;
    ``s`` is how many bits of the shifted dividend the multiply drops, ``yw`` the multiplier's width.
    ``steps[k]`` is the divider steps of stage ``k`` (0 in the head), the last stage's final add
    counted as one more step: ``D + 1`` units spread evenly over stages ``_XN_HEAD .. N - 1``."""
    amax, bmax = recip_split(P)
    t = P - 1
    s = P - 1 - bmax
    D = Q - t
    if s < 0 or D < 1:
        raise ValueError(f"the interleaved rANS encoder needs P >= 5 and S - P >= P, not P = {P}, S - P = {Q}")
    stages = N - _XN_HEAD
    if stages < 1:
        raise ValueError(f"the interleaved rANS encoder needs at least {_XN_HEAD + 1} states, not {N}")
    cuts = [round(k * (D + 1) / stages) for k in range(stages + 1)]
    steps = [0] * _XN_HEAD + [min(cuts[k + 1], D) - min(cuts[k], D) for k in range(stages)]
    return {"t": t, "s": s, "D": D, "amax": amax, "bmax": bmax, "yw": P + 1 + bmax, "steps": steps}


@dataclass(frozen=True)
class RansEncoderXnCoderProbe:
    """The ring's step and its data registers, which the formal ring lemma (``encoder_ring``) ties to
    the golden step: what the formal lemmas read of :class:`RansEncoderXnCoder` (its ``probe`` once
    elaborated; not ports). ``step``: the ring turns this clock; ``force``: stage 0 registers the
    identity (a ghost or a bubble); ``x``: the state arriving at stage 0; ``push_chunk``,
    ``push_symbol``, ``x_chunk``: stage 0's pushes of the pair offered and its state after the chunk
    (whose low word the symbol's push takes); ``x_flush``: the state the
    ring computed for the slot that landed last (``x`` before the set/reset of a slot that is no
    command's); ``ring``: every register that carries a slot's data round the ring (stages 0 to
    ``N - 2``, ``x`` and ``x_flush``); the slots' marks, ``N`` each, position ``j`` being stage ``j``'s
    (``N - 1``: ``x``'s): ``tag`` (the generation of the command that entered it), ``newest`` (the
    running command's latest entry), ``fin`` (the previous command's last entry, not yet flushed);
    and ``gen``, ``started``, ``flushing``, ``at_next``, ``push_init`` (whether the pair offered would push
    from ``2**(S - W)``), and the output queue: ``out`` / ``n_out`` / ``out_last``, ``out2`` / ``n_out2`` /
    ``out2_last``, ``pend`` / ``npend`` (``None`` with one stream word a port word)."""

    step: Value
    force: Value
    x: Signal
    push_chunk: Value
    push_symbol: Value
    x_chunk: Value
    x_flush: Signal
    ring: list[Signal]
    tag: list[Signal]
    newest: list[Signal]
    fin: list[Signal]
    gen: Signal
    started: Signal
    flushing: Signal
    at_next: Signal
    push_init: Signal
    out: Signal
    n_out: Signal
    out_last: Signal
    out2: Signal | None
    n_out2: Signal | None
    out2_last: Signal | None
    pend: Signal | None
    npend: Signal | None


class RansEncoderXnCoder(wiring.Component):
    """The rANS encoder coder for ``N > 1`` interleaved states (``docs/bitstream.md`` §8,
    ``rans16x16``): a ring of ``N`` pipeline stages, one state per stage, one pair per clock.

    Why: with one state, ``x // f`` is loop-carried (each pair's division needs the previous pair's
    state) and the 32-step divider is one clock of 212 logic levels (9.7 MHz on an ECP5). Pair ``j``
    of an ``N``-state stream uses state ``j mod N``, so a state is needed again only ``N`` pairs
    later: the division is cut into ``N`` stages and each state travels once round the ring per pair
    it codes. Pushes happen in stage 0, in pair order, so the words leave in push order.

    The division ``q = X // f``, ``X mod f`` (``X`` the state after the pushes, ``X < f 2**Q``, ``Q
    = S - P`` quotient bits; :func:`xn_plan`): its top ``t = P - 1`` bits come from a reciprocal
    estimate and two multiplies (two DSPs), the other ``D = Q - t`` from a non-restoring divider.

    * Stage 0 (the front): the symbol table read (LUT-RAM: ``freq``, ``cum``, ``k`` and the
      reciprocal fields), the chunk's push and insertion, the symbol's push test, ``c + f``.
    * Stage 1: ``Y = (X_top << 4 a) >> s`` with ``X_top = X >> D < f 2**t`` (a 4-way multiplexer
      per bit: ``a`` is ``min(e // 4, 3)``), and ``X_top``'s low ``P + 1`` bits.
    * Stage 2: ``Y R`` (one DSP, ``P + 1 + 4 = 21`` by ``P + 1 = 17`` bits).
    * Stage 3: ``q_e = (Y R) >> (2 P + 1 - s - b)`` (``b = e - 4 a``, a 5-way multiplexer), and
      ``q_e + 1``.
    * Stage 4: ``(q_e + 1) f`` (one DSP), its low ``P + 1`` bits.
    * Stage 5: ``r_0 = X_top - (q_e + 1) f`` (mod ``2**(P + 1)``).
    * Stages 6 to ``N - 1``: ``D`` non-restoring steps from ``r_0`` (two, one or none a stage: with
      ``S = 32``, ``D = 1`` and most of these stages only carry registers); stage 6 also
      forms the top bits ``q_e + (r_0 >= 0)``; the last adds ``c`` and the remainder's correction
      (``r + (c + f if r < 0 else c)``) and registers the finished state, which stage 0 reads ``N``
      clocks after the state left it.

    The reciprocal (host data, :func:`~ansforge.model.coding.rans.freq_reciprocals`, written
    through ``cfg`` with the symbol's entry): ``e = P + 1 - bit_length(f)`` normalises ``F = f
    2**e`` to ``[2**P, 2**(P + 1))`` and ``R = floor((2**(2P + 1) - 1) / F)``, so ``rho - 1 < R <=
    rho`` with ``rho = 2**(2P + 1) / F``; ``R``'s leading one is implied (``P`` bits stored).
    Bound (``P = 16``: ``t = 15``, ``s = 11``, ``b <= 4``): ``q_e`` is ``q_top = X_top // f`` or
    ``q_top - 1``. Above: ``Y 2**s <= X_top 2**(4a)`` and ``R <= rho``, so ``q_e <= X_top / f``.
    Below: with ``u = X_top 2**(4a) / 2**s``, ``Y > u - 1`` and ``R > rho - 1`` (``Y = 0`` only
    where ``u < 1``, and then ``X_top / f < 2**s / (f 2**(4a)) <= 1/2``: ``q_top = 0``), so
    ``X_top / f - Y R 2**(s + b - 2P - 1) < (u + rho) 2**(s + b - 2P - 1) = X_top 2**e / 2**(2P + 1)
    + 2**s / (f 2**(4a))``; the first term is below ``F 2**t / 2**(2P + 1) < 2**(t - P) = 1/2``, the
    second at most ``2**(s - P + b) <= 1/2`` (``f 2**(4a) = F / 2**b >= 2**(P - b)``). So ``q_e >
    X_top / f - 1``. Hence ``r_0`` is in ``[-f, f)``, the non-restoring divider's invariant, and
    ``r_0 >= 0`` exactly where ``q_top = q_e + 1``. ``tests/hdl/test_rans_xn_encoder.py`` checks the
    bound for every ``f`` in 1 .. 2**16 at the largest ``X_top`` (the first term's worst) and others.
    The bound uses only ``P``, ``t`` and ``X_top < f 2**t``, not ``S`` (``X < f 2**Q`` after the pushes
    whatever the shape): it holds for ``S = 32`` too (``Q = 16``, ``D = 1``). Where a push happened,
    ``X < 2**(S - W)``; where also ``S - W <= D`` (the paper preset: ``16 <= 17``), ``X_top = 0``, and
    stage 1's registers are cleared by the push (their flip-flops' reset) rather than every bit
    testing it. Elsewhere (``S = 32, W = 16``: ``D = 1``, ``X_top`` up to ``2**15 - 1`` after a push)
    every bit of ``X_top`` picks from the pushed or unpushed state (``dividend_bit``).

    Why this split: ``t`` is what one 17-bit reciprocal (the DSP48E2's unsigned B width) makes exact
    within one (``t = P`` would leave ``q_top - 2`` possible, a second correction); the dividend is
    normalised by ``4 a`` before the multiply (a 4-way multiplexer, 21 LUTs) and by ``b`` after it (a
    5-way one on 15 bits, 36 LUTs), where a 17-way shift of the dividend alone would need about
    twice the LUTs (estimated, not built: 17 bits of 17 inputs each).
    ``a`` stops at 3 (``b = 4`` only for ``f = 1``), which keeps the first multiplexer 4-way
    and still leaves the second term at 1/2.

    Commands and the flush (issue 19: no idle clock between commands). A command is ``max(count, N)``
    *entries* into the ring (:class:`RansEncoderShellXN` drives ``run``, ``ghost``, ``final``): for
    ``count < N`` first ``N - count`` ghosts, steps that take no pair and leave their slot at ``2**(S -
    W)`` (lanes ``N - 1 .. count``, unused), then its pairs, back to front. Its first ``N`` entries
    each start a lane from ``2**(S - W)`` on consecutive slots, so after its last entry (lane 0) the
    next ``N`` ring steps bring lanes ``N - 1`` down to 0 to stage 0: the order of §8 (``x_{N-1}``
    first, each in ``ceil(S / W)`` words, least significant first). Each of those steps emits the
    arriving state (kept in ``x_flush``; ``x_done`` lands as ``2**(S - W)`` for a slot that is not the
    running command's, by its flip-flops' set/reset) whatever enters with it: the next command's first
    entries, each starting its lane on the slot just flushed, or, where none may enter, a bubble. So
    the next command's first pair enters in the clock after the previous command's last, and the
    previous command's words (all of them) leave before any of the next one's: its pairs push nothing
    while a state still flushes. One that would (from ``2**(S - W)`` only where ``f <= 2**k`` with
    ``S = 32, W = P = 16``: rare symbols with additional bits) waits, and ``i.ready`` depends on its
    payload (the table's ``f`` and ``k``; unavoidable without a register in front of the table read:
    whether it pushes is known only from its symbol), while bubbles flush the rest; entries go in only
    right after the running command's latest slot (lane order), so the ring then turns once past its
    slots: ``N`` clocks before that pair, bounded. Bubbles also flush where no pair is offered (the
    previous command's ``done`` never waits for the next one's pairs), at the same price if the
    command had begun. A bubble or a ghost that passes a slot registers the identity symbol (``f =
    2**P``, ``c = 0``, no push, ``x`` itself) in stage 0, so that the ring gives ``x`` back. With two
    words a port word, a stream of an odd word count ends in a port word of its own (its last word, a
    zero high half), made by the step that flushes its last state together with that state's port
    word: the output is a queue of two port words, so the pad costs no clock either. The words
    and their order are those of the golden model for every timing; ``last`` marks each command's
    final port word.

    Ports: ``i``, ``o`` (:meth:`port_words` stream words wide), ``cfg`` and the control of
    :meth:`ports`. Latency: a pair's push word is in ``o`` the clock after it enters (with two words a
    port word: the clock after the step that completes its port word); the flush's port words leave
    one a clock with the ``N`` ring steps after the command's last entry, an odd count's last port
    word one clock more; without a next command the flush takes ``N`` clocks (``N + 1``), not ``2 N``
    as before. With one stream word a port word (the one-word shapes below) a state is ``ceil(S / W)``
    port words, one a clock: the step that flushes it waits for all but its last, so a boundary costs
    ``N (ceil(S / W) - 1)`` clocks spread over the next command's first pairs (``2 N`` before, at the
    boundary). Reset makes every slot no command's; the symbol table is LUT-RAM and survives it.

    Supported shapes: at most one chunk (``max_extra_bits <= P``) and what :func:`xn_plan` takes (``P
    >= 5``, ``S - P >= P``, ``N >= 7``). Where also ``max_extra_bits <= W - P`` (the paper's 8 with ``P =
    16``, ``W = 32``) a pair pushes at most one word and ``o`` is one register. Otherwise
    (:meth:`two_words`: ``S = 32, W = 16, P = 16, K = 8``, 16-bit renormalisation) a pair may push
    twice, the chunk's word (the incoming state's low ``W`` bits) and then the symbol's (the low ``W``
    bits after the chunk), and ``o`` is ``2 W`` bits (:meth:`port_words`): two stream words a port
    word, the first pushed in the low half; a word waits in ``pending_word`` for its partner, and a
    stream's odd last word leaves after the flush with a zero high half (the layout
    :class:`RansDecoderCoderXN` reads). A step makes at most one port word whatever it pushes (the
    step of an odd count's last state two, with the pad), and ``o`` is a queue of two registers
    (``out_word``, ``out_word2``): a step is taken where the queue keeps at most one port word after
    this clock's transfer (none for the pad's step). ``i.ready`` reads registers and ``o.ready`` (and
    the table's ``f`` and ``k`` only while a state flushes), and a double push costs no clock.
    Measurements: ``docs/design/rans.md``.

    Why ``N = 16``: 16 is the most the bitstream allows, and the head's six stages leave ten for the
    divider's steps and the final add. Commands back to back cost no clock for the flush (a lone
    command ``N + 2``, ``N + 3`` for an odd word count). Area, clock and the variants tried:
    ``docs/design/rans.md``.
    """

    def __init__(self, shape: RansShape):
        self.check_shape(shape)
        self._shape = shape
        #: The ring's registers, filled in by :meth:`elaborate`: the formal lemma ``encoder_ring``
        #: (``sim/formal/``) states its invariants over them. Not ports.
        self.probe: RansEncoderXnCoderProbe | None = None      # set by elaborate
        super().__init__(self.ports(shape))

    @staticmethod
    def check_shape(sh: RansShape) -> None:
        """``ValueError`` unless a pair of ``sh`` has at most one chunk (``max_extra_bits <= P``: at most
        two pushes, the chunk's and the symbol's) and :func:`xn_plan` takes ``N``, ``P``, ``S - P``."""
        if sh.chunks > 1:
            raise ValueError(f"the {sh.codec.states}-state rANS encoder codes at most one chunk per pair: "
                             f"max_extra_bits must be at most P = {sh.P}, not {sh.K}")
        xn_plan(sh.codec.states, sh.P, sh.S - sh.P)
        if not sh.one_word and -(-sh.S // sh.W) != 2:
            raise ValueError(f"the {sh.codec.states}-state rANS encoder with two words a port word flushes a "
                             f"state as one port word: S must be at most 2 W, not S = {sh.S}, W = {sh.W}")

    @staticmethod
    def two_words(sh: RansShape) -> bool:
        """Whether a pair of ``sh`` may push two words: after the chunk's push ``x < 2**(S - W)``, and
        after its ``k``-bit insertion ``x < 2**(S - W + k)``, which reaches the symbol's push threshold
        ``f 2**(S - P) >= 2**(S - P)`` only where ``k > W - P``."""
        return not sh.one_word

    @classmethod
    def port_words(cls, sh: RansShape) -> int:
        """Stream words per word of the output port: two where a pair may push twice (a ``2 W``-bit
        port: the first pushed in the low half), so that two pushes never wait on the port."""
        return 2 if cls.two_words(sh) else 1

    @classmethod
    def ports(cls, sh: RansShape) -> dict:
        """The coder's signature members for ``sh``: ``i``, ``o`` (:meth:`port_words` stream words),
        ``cfg``, and the control :class:`RansEncoderShellXN` drives: ``run`` (the running command has
        entries left), ``ghost`` (its next entry is a ghost, no pair), ``final`` (its next entry is its
        last); ``step`` (an entry, pair or ghost, was taken) and ``last`` (the port word in ``o`` ends a
        command's stream) go back."""
        ports = {"i": In(stream.Signature(pair_layout(sh.symbol_bits, sh.K, sh.set_bits))),
                 "o": Out(stream.Signature(sh.W * cls.port_words(sh))),
                 **encoder_xn_link(sh).flip().members}
        if sh.programmable:
            ports["cfg"] = sh.cfg_port()
        return ports

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, K, N = sh.S, sh.W, sh.P, sh.K, sh.codec.states
        two = self.two_words(sh)                 # a pair may push twice: a second output word
        Q, n = S - P, P + 1
        plan = xn_plan(N, P, Q)
        t, s_drop, D, amax, bmax, yw = (plan[k] for k in ("t", "s", "D", "amax", "bmax", "yw"))
        per = -(-S // W)                         # flush words per state
        init = 1 << (S - W)
        m = Module()
        m.submodules.entries = tables = RansTables(sh, buckets=False)
        if sh.programmable:
            wiring.connect(m, wiring.flipped(self.cfg), tables.cfg)

        def dividend_bit(xv, ps, j):
            """Bit ``j`` of the dividend ``X = ps ? xv >> W : xv`` (0 above ``S``)."""
            if j >= S:
                return Const(0, 1)
            return Mux(ps, xv[j + W], xv[j]) if j + W < S else xv[j] & ~ps

        # -- stage 0: the pair's pushes and the chunk ----------------------------------------------
        # (Each stage is a module of its own: the Amaranth simulator re-evaluates only what changed.)
        m.submodules.front = fm = Module()
        x = Signal(S, init=init, name="x_done")                     # the last stage: the arriving slot's state
        m.d.comb += tables.symbol_addr.eq(table_address(self.i.p.symbol, self.i.p.set if sh.sets > 1 else None))
        entry = tables.symbol
        f, c, k = entry.freq, entry.cum, entry.k

        xv = x
        push_c = Const(0, 1)
        if K:
            # Push when one of x's top w bits is set (x >= 2**(S - w)), then insert the w-bit chunk
            # below P (frequency 2**(P - w)) and move the bits above P - w up by w. The push's
            # ``x >> W`` and the move are one shifter: a first level by ``w mod 4`` on x itself, a
            # second by ``4 (w // 4)``, which also takes ``W`` off where the chunk pushed.
            # Every selection is written against ``w`` itself (no ``K - w``: a subtractor in front of
            # each shifter doubles its LUTs).
            push_c = Signal(name="push_chunk")
            fm.d.comb += push_c.eq(Cat(*(x[S - K + i] & (k >= K - i) for i in range(K))).any())
            a = Signal(S + 3, name="chunk_shift1")
            fm.d.comb += a.eq(Array([x << j for j in range(4)])[k[:2]])
            rest = k[2:]

            def by_rest(opts):
                # w // 4 never exceeds K // 4: the unused codes repeat the last option (fewer LUTs).
                if not len(rest):
                    return opts[0]
                return Array(opts + [opts[-1]] * ((1 << len(rest)) - len(opts)))[rest]

            hi = []
            for i in range(P, S):
                keep = by_rest([a[i - 4 * j] for j in range(K // 4 + 1)])
                if i - 4 * (K // 4) + W < S + 3:
                    pushed = by_rest([a[i - 4 * j + W] if i - 4 * j + W < S + 3 else Const(0, 1)
                                      for j in range(K // 4 + 1)])
                    hi.append(Mux(push_c, pushed, keep))
                else:
                    hi.append(keep & ~push_c)
            xp_low = Signal(P, name="x_after_push_chunk_low")
            fm.d.comb += xp_low.eq(Mux(push_c, x[W:W + P], x[:P]))
            # The chunk's w bits go to [P - w, P): bit P - K + j is the chunk's bit j + w - K.
            chunk = Signal(K, name="chunk_value")
            fm.d.comb += chunk.eq((Cat(Const(0, K), self.i.p.extra[:K]) >> k)[:K])
            xv = Signal(S, name="x_chunk")
            fm.d.comb += xv.eq(Cat(xp_low[:P - K], *[Mux(k < K - j, xp_low[P - K + j], chunk[j]) for j in range(K)],
                                  *hi))
        push_s = Signal(name="push_sym")
        fm.d.comb += push_s.eq((xv >> (S - P)) >= f)
        # ``force``: this ring step passes the arriving slot through unchanged (a ghost entry, or a
        # bubble on the way back to the running command's next slot): stage 0 registers the identity
        # symbol ``f = 2**P``, ``c = 0``, no push and ``x`` itself, so that the divider gives back ``x``.
        # The constants are the registers' synchronous set/reset (no LUT of their own); ``x`` is a
        # choice at the end of the chunk's path (not in front of its shifter, where a gated ``k`` was
        # one level more on the clock's path).
        force = Signal()
        # The pushes a pair would make from the initial state (``f`` and ``k`` only: yosys folds the
        # constant), for the rule that no pair of a command pushes while the previous one's states
        # still flush. From ``2**(S - W)`` no pair pushes unless ``f <= 2**k`` (``S = 32``, ``W = P = 16``).
        # Per extra width ``w``: the chunk's push from 2**(S - W), and ``x >> (S - P)`` after the chunk
        # (its bits sit below ``P <= S - P``), which the symbol's push compares with ``f``.
        init_pc, init_top = [], []
        for w in range(1 << len(k)):
            xi, pc0 = init, False
            if 0 < w <= K:
                fu = 1 << (P - w)
                pc0 = (xi >> (S - P)) >= fu
                xi = xi >> W if pc0 else xi
                xi = (xi // fu) << P
            init_pc.append(int(pc0))
            init_top.append(xi >> (S - P))
        push_init = Signal()
        fm.d.comb += push_init.eq(Array(Const(v, 1) for v in init_pc)[k]
                                  | (Array(Const(v, S - P + 1) for v in init_top)[k] >= f))
        cf = Signal(n, name="c_plus_f")
        fm.d.comb += cf.eq(c + f)

        # -- the ring's slots, the flush and the output word -----------------------------------------
        # A command's first N entries (ghosts for lanes a short command leaves unused, then its pairs)
        # take N consecutive ring slots, each starting from 2**(S - W); after its last entry the next N
        # ring steps bring its lanes N - 1 .. 0 to stage 0 in flush order (the last marked ``fin``). Each
        # of those steps emits the arriving state whatever enters: the next command's entries (each from
        # 2**(S - W), on the slot just flushed) or bubbles. An entry goes in only right after the
        # running command's latest (``newest``), so that its slots stay consecutive (lane order); where
        # a bubble went past that place, the ring turns once more (passing its slots unchanged) first.
        # Per slot, travelling with it (stage j's registers; j = N - 1: ``x_done``'s):
        tag = [Signal(name=f"tag{j}") for j in range(N)]     # the generation of the command that entered it
        newest = [Signal(name=f"newest{j}") for j in range(N)]  # it took the running command's latest entry
        fin = [Signal(name=f"fin{j}") for j in range(N)]     # it took the previous command's last entry
        gen = Signal(init=1, name="generation")          # the running command's generation
        started = Signal()                               # the running command has an entry in the ring
        flushing = Signal()                              # the arriving slot holds the previous command's state
        at_next = Signal(init=1)                         # an entry may go in here: ~started | newest[0]
        m.d.comb += force.eq(~at_next | (self.run & self.ghost))
        fx = Signal(S, name="x_flush")                   # the arriving slot's state as the ring computed it
        n_out = Signal()                                 # ``out_word`` holds a port word (``o.valid``)
        out_last = Signal()                              # ... the command's last
        room = Signal()
        can_step = Signal()
        step_ring = Signal()
        entered = Signal()
        fire = Signal()
        boundary = Signal()
        m.d.comb += room.eq(~n_out | self.o.ready)
        if two:
            # Two stream words a port word, the first pushed in the low half: a word waits in
            # ``pending_word`` for the next one, and a stream's odd last word leaves after the flush in
            # a port word of its own with a zero high half (the pad; so that the words stay 2W-bit
            # aligned from the stream's bottom, as RansDecoderCoderXN reads them). A ring step makes at
            # most one port word (a flushed state's two words, or a pair's pushes: none while a state
            # flushes, each with a pending word or not), but the step that flushes a stream's last
            # state after an odd count makes two, that one and the pad: the output is a queue of two
            # port words (``out_word``, then ``out_word2``), so that the pad costs the next command's
            # pairs no clock (where ``out_word`` alone made the ring wait one). Which register a step
            # writes is a matter of registers (entries left after this clock's transfer), never of
            # the push compares: only the valid bits wait on those.
            npend = Signal()
            pend = Signal(W, name="pending_word")
            n_out2 = Signal()                            # ``out_word2`` holds a port word
            kept = Signal(2)                             # port words the queue keeps after this clock
            double = Signal()                            # this step flushes the last state after an odd count
            m.d.comb += [kept.eq((n_out & ~self.o.ready) + n_out2),
                         double.eq(flushing & fin[N - 1] & npend)]
            m.d.comb += can_step.eq(Mux(double, kept == 0, kept != 2))
        else:
            part = Signal(range(per))                    # the arriving state's words already out
            m.d.comb += can_step.eq(room & (~flushing | (part == per - 1)))
        # Payload-independent: a pair that may not enter (it would push while the previous command's
        # states flush) makes the step a bubble instead.
        m.d.comb += step_ring.eq(can_step & (~at_next | flushing | (self.run & (self.ghost | self.i.valid))))
        m.d.comb += [self.i.ready.eq(self.run & ~self.ghost & at_next & can_step & ~(flushing & push_init)),
                     fire.eq(self.i.valid & self.i.ready),
                     entered.eq(fire | (self.run & self.ghost & at_next & can_step)),
                     boundary.eq(entered & self.final),
                     self.o.valid.eq(n_out), self.last.eq(out_last), self.step.eq(entered)]
        out = Signal(W * (2 if two else 1), name="out_word")
        m.d.comb += self.o.p.eq(out)
        fwords = [fx[j * W:(j + 1) * W] for j in range(per)]
        if not two:
            with m.If(flushing & room):
                m.d.sync += [out.eq(Array(fwords)[part]), n_out.eq(1),
                             out_last.eq(fin[N - 1] & (part == per - 1)),
                             part.eq(Mux(part == per - 1, 0, part + 1))]
            with m.Elif(step_ring):
                # The chunk's push pushes the incoming state's low word, the symbol's the low word after
                # the chunk; only one happens (one word per pair). The word register is written on every
                # step, so that its enables do not wait on the symbol's push compare; only the valid bit does.
                m.d.sync += [out.eq(Mux(push_c, x[:W], xv[:W])), n_out.eq(fire & (push_c | push_s)), out_last.eq(0)]
            with m.Elif(self.o.ready):
                m.d.sync += n_out.eq(0)
        else:
            # The step's words in push order: ``first`` (the flushed state's low word, else the chunk's
            # push, else the symbol's) and ``second`` (the flushed state's high word, or the symbol's
            # push where both pushes happen).
            first, second = Signal(W), Signal(W)
            pushes = Signal(2)
            m.d.comb += [first.eq(Mux(flushing, fwords[0], Mux(push_c, x[:W], xv[:W]))),
                         second.eq(Mux(flushing, fwords[1], xv[:W])),
                         pushes.eq(Mux(flushing, 2, Mux(fire, push_c + push_s, 0)))]
            ends = Signal()                              # this step flushes a stream's last state
            m.d.comb += ends.eq(flushing & fin[N - 1])
            out2 = Signal(2 * W, name="out_word2")
            out2_last = Signal()
            made = Signal(2 * W)                         # the step's port word (written on every step)
            made_valid, made_last = Signal(), Signal()
            m.d.comb += [made.eq(Mux(npend, Cat(pend, first), Cat(first, second))),
                         made_valid.eq(Mux(npend, pushes != 0, pushes == 2)), made_last.eq(ends & ~npend)]
            with m.If(n_out & self.o.ready & n_out2):    # the second moves up
                m.d.sync += [out.eq(out2), out_last.eq(out2_last), n_out2.eq(0)]
            with m.Elif(n_out & self.o.ready):
                m.d.sync += n_out.eq(0)
            with m.If(step_ring):
                # (The data registers' enables do not wait on the push compares.)
                with m.If(kept == 0):
                    m.d.sync += [out.eq(made), n_out.eq(made_valid), out_last.eq(made_last),
                                 out2.eq(Cat(second, Const(0, W))), n_out2.eq(double), out2_last.eq(1)]
                with m.Else():
                    m.d.sync += [out2.eq(made), n_out2.eq(made_valid), out2_last.eq(made_last)]
                m.d.sync += npend.eq(Mux(npend, (pushes != 1) & ~double, pushes == 1))
                with m.If(Mux(npend, pushes == 2, pushes == 1)):
                    m.d.sync += pend.eq(Mux(npend, second, first))

        with m.If(step_ring):
            m.d.sync += [tag[0].eq(Mux(entered, gen, tag[N - 1])), newest[0].eq(entered | newest[N - 1]),
                         # an entry goes in right after the latest one (which is then in stage 0): that
                         # one's mark goes; so does a finished command's (with the next one not started)
                         newest[1].eq(newest[0] & ~entered & started), fin[0].eq(boundary),
                         at_next.eq(entered | ~started | newest[N - 1])]
            m.d.sync += [tag[j].eq(tag[j - 1]) for j in range(1, N)]
            m.d.sync += [newest[j].eq(newest[j - 1]) for j in range(2, N)]
            m.d.sync += [fin[j].eq(fin[j - 1]) for j in range(1, N)]
            with m.If(entered):
                m.d.sync += started.eq(1)
            with m.If(fin[N - 1]):
                m.d.sync += flushing.eq(0)
        with m.If(boundary):
            # The command's lanes become the states to flush, in the order they arrive.
            m.d.sync += [gen.eq(~gen), started.eq(0), flushing.eq(1)]

        # -- the ring: stage k's results go to registers ``name{k}`` (all written on ``step_ring``, the
        # stages' logic outside the enable: a comb assignment under ``If`` would gate every bit). Bits
        # no later stage reads are left unread and yosys removes their flip-flops.
        ring = []                                # every stage register (the probe's)

        def register(k, values, zero=None, forced=None):
            """Stage ``k``'s registers for ``values`` (a dict); ``zero`` (names, condition): those
            registers are cleared instead where the condition holds, and ``forced`` (values by name,
            condition) take those values (a constant: through their flip-flops' own synchronous reset)."""
            regs = {}
            for name, v in values.items():
                r = regs[name] = Signal(len(v), name=f"{name}{k}")
                ring.append(r)
                if zero is not None and name in zero[0]:
                    with m.If(step_ring & zero[1]):
                        m.d.sync += r.eq(0)
                    with m.Elif(step_ring):
                        m.d.sync += r.eq(v)
                elif forced is not None and name in forced[0]:
                    with m.If(step_ring & forced[1]):
                        m.d.sync += r.eq(forced[0][name])
                    with m.Elif(step_ring):
                        m.d.sync += r.eq(v)
                else:
                    with m.If(step_ring):
                        m.d.sync += r.eq(v)
            return regs

        # The dividend is kept as the state before the symbol's push (``xv``) and the push bit: each
        # use picks its bit from ``xv`` in its own LUT, where a registered ``push ? xv >> W : xv``
        # would cost a LUT per bit.
        keep = {"xv": xv, "ps": push_s, "f": f, "c": c, "cf": cf}
        e1, r1 = (int(v) for v in freq_reciprocals([1 << P], P)[0])
        ident = {"xv": x, "ps": 0, "f": 1 << P, "c": 0, "cf": 1 << P, **recip_entry(P, e1, r1)}
        cur = register(0, {**keep, "rcp": entry.rcp, "sa": entry.sa, "sb": entry.sb}, forced=(ident, force))

        def carried(regs, *names):
            return {nm: regs[nm] for nm in ("xv", "ps", "f", "c", "cf") + names}

        # X_top = X >> (Q - t) < f 2**t: its quotient by f is the top t bits of q.
        def xtop_bit(regs, i, raw):
            j = Q - t + i
            if raw:
                return regs["xv"][j] if j < S else Const(0, 1)
            return dividend_bit(regs["xv"], regs["ps"], j)

        # -- stage 1: Y = (X_top << 4 a) >> s, the normalised dividend's top bits (a 4-way choice), and
        # X_top's low P + 1 bits for stage 5. Where a push leaves X < 2**(S - W) <= 2**(Q - t), X_top
        # is 0 (not so with S = 32, W = 16: zero_on_push is False and each bit picks from X itself):
        # their registers are cleared by the push instead of each bit testing it (where stage 5
        # tested it, its subtractor spent a second LUT per bit on the carry chain's generate input).
        zero_on_push = S - W <= Q - t
        m.submodules.stage1 = sm = Module()
        cands = []
        for av in range(amax + 1):
            bits = []
            for j in range(yw):
                i = j + s_drop - 4 * av
                bits.append(xtop_bit(cur, i, zero_on_push) if 0 <= i < S - (Q - t) else Const(0, 1))
            cands.append(Cat(*bits))
        cands += [cands[-1]] * ((1 << len(cur["sa"])) - len(cands))
        y = Signal(yw, name="y_norm")
        xt = Signal(n, name="xtop_low")
        sm.d.comb += [y.eq(Array(cands)[cur["sa"]]),
                      xt.eq(Cat(*[xtop_bit(cur, i, zero_on_push) for i in range(n)]))]
        cur = register(1, {**carried(cur, "rcp", "sb"), "y": y, "xt": xt},
                       zero=(("y", "xt"), cur["ps"]) if zero_on_push else None)

        # -- stage 2: the reciprocal multiply (one DSP: yw x (P + 1) bits, R's leading one implied)
        m.submodules.stage2 = sm = Module()
        prod = Signal(yw + P + 1, name="y_times_r")
        sm.d.comb += prod.eq(cur["y"] * Cat(cur["rcp"], Const(1, 1)))
        cur = register(2, {**carried(cur, "sb", "xt"), "prod": prod})

        # -- stage 3: the estimate q_e = prod >> (2 P + 1 - s - b), t bits (q_e <= q < 2**t), and q_e + 1
        # (its carry chain takes the choice's LUTs as they are: no LUT of its own)
        m.submodules.stage3 = sm = Module()
        picks = [cur["prod"][2 * P + 1 - s_drop - bv:][:t] for bv in range(bmax + 1)]
        picks += [picks[-1]] * ((1 << len(cur["sb"])) - len(picks))
        qe = Signal(t, name="q_estimate")
        qe1 = Signal(t + 1, name="q_estimate_plus_1")
        sm.d.comb += [qe.eq(Array(picks)[cur["sb"]]), qe1.eq(qe + 1)]
        cur = register(3, {**carried(cur, "xt"), "qe": qe, "qe1": qe1})

        # -- stage 4: the back multiply (q_e + 1) f, its low P + 1 bits (one DSP)
        m.submodules.stage4 = sm = Module()
        back = Signal(n, name="qe1_times_f")
        sm.d.comb += back.eq((cur["qe1"] * cur["f"])[:n])
        cur = register(4, {**carried(cur, "qe", "xt"), "back": back})

        # -- stage 5: r0 = X_top - (q_e + 1) f, in [-f, f) (q_e is q_top or q_top - 1), computed mod
        # 2**(P + 1): the divider's partial remainder, non-restoring form (r0 >= 0 iff q_top = q_e + 1)
        m.submodules.stage5 = sm = Module()
        r0 = Signal(n, name="r_head")
        sm.d.comb += r0.eq(cur["xt"] - cur["back"])
        cur = register(5, {**carried(cur, "qe"), "r": r0})

        # -- the divider: stages _XN_HEAD .. N - 1, D non-restoring steps of the low quotient bits (per
        # step r = 2 r + b - f if r >= 0 else 2 r + b + f, the bit r >= 0 after it: one P + 1-bit carry
        # chain, f or ~f chosen in its LUTs); stage _XN_HEAD also finishes the top bits, q_e + (r0 >= 0).
        # A stage's last quotient bit is not shifted into ``q`` there: it is ``~r[n - 1]`` of the
        # registered remainder, and the next stage shifts it in, so that the stage's longest path (two
        # carry chains) ends at the remainder's flip-flops, not at a LUT after the second chain.
        done = 0
        q = Const(0, D)
        pending = False
        for kst in range(_XN_HEAD, N):
            m.submodules[f"stage{kst}"] = sm = Module()
            r = cur["r"]
            if kst > _XN_HEAD:
                q = cur["q"]
            if pending:
                nq = Signal(D, name=f"s{kst}_q_in")
                sm.d.comb += nq.eq(Cat(~r[n - 1], q[:D - 1]))
                q, pending = nq, False
            count = plan["steps"][kst]
            for i in range(count):
                sub = ~r[n - 1]
                b = dividend_bit(cur["xv"], cur["ps"], D - 1 - done)
                total = Cat(Const(1, 1), b, r[:n - 1]) + Cat(sub, Mux(sub, ~cur["f"], cur["f"]))
                nr = Signal(n, name=f"s{kst}_r{i}")
                sm.d.comb += nr.eq(total[1:n + 1])
                if i == count - 1 and kst < N - 1:
                    pending = True
                else:
                    nq = Signal(D, name=f"s{kst}_q{i}")
                    sm.d.comb += nq.eq(Cat(~total[n], q[:D - 1]))
                    q = nq
                r = nr
                done += 1
            if kst == _XN_HEAD:
                qtop = Signal(t, name="q_top")
                sm.d.comb += qtop.eq(cur["qe"] + ~cur["r"][n - 1])
            else:
                qtop = cur["qtop"]
            if kst < N - 1:
                cur = register(kst, {**carried(cur), "qtop": qtop, "r": r, "q": q})
        assert done == D

        # -- the last stage: r + f corrects a negative remainder; c + (x mod f) < 2**P.
        low = Signal(n, name="remainder_plus_c")
        m.d.comb += low.eq(r + Mux(r[n - 1], cur["cf"], cur["c"]))
        # The slot that lands in ``x_done`` is the next to arrive at stage 0: where it will not hold a
        # state of the running command (generation, after this clock's boundary), an entry there starts
        # from 2**(S - W), so it lands as that, through the flip-flops' own synchronous set/reset; the
        # state it carried (a finished state to flush) is kept in ``x_flush``, which takes every landing.
        done_x = Signal(S, name="x_finished")
        m.d.comb += done_x.eq(Cat(low[:P], q, qtop))
        x_init = Signal()
        m.d.comb += x_init.eq(step_ring & (tag[N - 2] != (gen ^ boundary)))
        with m.If(x_init):
            m.d.sync += x.eq(init)
        with m.Elif(step_ring):
            m.d.sync += x.eq(done_x)
        with m.If(step_ring):
            m.d.sync += fx.eq(done_x)
        queue = {"out2": out2, "n_out2": n_out2, "out2_last": out2_last, "pend": pend, "npend": npend} if two else \
            dict.fromkeys(("out2", "n_out2", "out2_last", "pend", "npend"))
        self.probe = RansEncoderXnCoderProbe(step=step_ring, force=force, x=x, push_chunk=push_c, push_symbol=push_s,
                                             x_chunk=xv, x_flush=fx, ring=ring + [x, fx], tag=tag, newest=newest,
                                             fin=fin, gen=gen, started=started, flushing=flushing, at_next=at_next,
                                             push_init=push_init, out=out, n_out=n_out, out_last=out_last, **queue)
        return m
