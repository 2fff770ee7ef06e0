"""The interleaved rANS cores' round-trip lemma chains (``docs/formal.md``, *The sixteen-state rANS
encoder's chain* and *The interleaved rANS decoder's chain*): of ``rans-encoder-x16``, the ring's step
from every state (``encoder_step``), the coder's slots, flushes and port words (``encoder_pipeline``)
and its shell's entries (``encoder_counts``); of ``rans-decoder-x5``, the ring's step from every state
(``decoder_step``), its ring and word buffer (``decoder_pipeline``) and its shell's injections and pairs
(``decoder_counts``); their joints are ``composition``'s (:mod:`.lemmas_tans_pipeline`).
"""

from __future__ import annotations

from amaranth.hdl import Array, Assert, Assume, Cat, Mux, Signal, Value
from amaranth.hdl._ast import AnyConst, AnySeq

from ...hdl.rans.decoder_xn import XN_RING
from ...hdl.rans.shape import recip_split
from .benches import Bench, TablePlatform, bit_length_of, elaborated_block, transfer_of, unused_ok
from .lemmas_rans import rans_golden_step
from .params import SMALL_XN, SMALL_XN_DECODER, XN_DECODER_LEMMA_K, small_core


def _xn_coder(core: str, **kw):
    """The coder of a fresh small ``core`` (its registry build, programmable; ``kw``: :func:`small_core`'s
    options), the core and its other blocks silenced: only the coder goes into the harness. Returns
    ``(coder, N, entry)``: its states and its symbol table's entry layout (the table block's ``symbol``
    port); with ``buckets``, also the bucket table's ``(rows, layout)`` (the decoder's)."""
    buckets = kw.pop("buckets", False)
    built = small_core(core, **kw)
    blocks = built.blocks()
    unused_ok(built, *(other for name, other in blocks.items() if name != "coder"))
    tables = blocks["tables"]
    out = (blocks["coder"], built.codec.states, tables.symbol.shape())
    return out + ((1 << len(tables.bucket_addr), tables.bucket.shape()),) if buckets else out


def _xn_shell(b: Bench, core: str, bits: int):
    """The shell of a fresh small ``core`` built with ``bits``-bit command counts, elaborated into
    ``b`` alone (the core's other blocks silenced). Returns ``(shell, N)``."""
    built = small_core(core, count_bits=bits)
    blocks = built.blocks()
    unused_ok(built, *(v for k, v in blocks.items() if k != "shell"))
    shell = blocks["shell"]
    b.m.submodules.shell = elaborated_block(shell)
    return shell, built.codec.states


def _legal_rows(b: Bench, entry):
    """Every symbol row of the interleaved encoder's table arbitrary and legal (``AnyConst``, no
    writes): ``1 <= f <= 2**P``, ``c + f <= 2**P``, ``k <= K``, and the reciprocal fields those of
    ``f`` as the host writes them (:func:`~ansforge.model.coding.rans.freq_reciprocals`; ``entry``: the
    table's row layout): ``e = P + 1 - bit_length(f)``, ``F = f 2**e``, ``R = floor((2**(2P + 1) - 1) / F)`` as the one ``R`` with ``R F
    <= 2**(2P + 1) - 1 < (R + 1) F``, stored as ``R - 2**P`` and ``e = 4 a + b``
    (:func:`~ansforge.hdl.rans.shape.recip_entry`). Rows need not sum to ``2**P``: the step of one
    pair asks only that its own interval ``[c, c + f)`` lies below ``2**P``. Returns the rows (the
    memory's words) and ``(freq, cum, k)`` per symbol."""
    m = b.m
    loose, kw = SMALL_XN["rans"]
    P, K, n = loose["precision_bits"], kw["max_extra_bits"], kw["max_symbols"]
    amax, _ = recip_split(P)
    top = (1 << (2 * P + 1)) - 1
    rows, table = [], []
    for q in range(n):
        row = Signal(entry, name=f"row{q}")
        f, c, k = row.freq, row.cum, row.k
        R, e = Signal(P + 1, name=f"recip{q}"), Signal(range(P + 1), name=f"norm{q}")
        m.d.comb += [f.eq(AnyConst(P + 1)), c.eq(AnyConst(P + 1)), k.eq(AnyConst(len(k))), R.eq(AnyConst(P + 1)),
                     Assume((f >= 1) & (f <= 1 << P) & (c + f <= 1 << P) & (k <= K))]
        m.d.comb += e.eq(P + 1 - bit_length_of(m, f, f"f{q}"))
        F = Signal(P + 1, name=f"f_norm{q}")                  # in [2**P, 2**(P + 1))
        m.d.comb += [F.eq(f << e), Assume((R * F <= top) & (R * F + F > top))]
        a = Signal(len(row.sa), name=f"recip_a{q}")
        m.d.comb += [a.eq(Mux((e >> 2) > amax, amax, e >> 2)),
                     row.rcp.eq(R - (1 << P)), row.sa.eq(a), row.sb.eq(e - 4 * a)]
        table.append((f, c, k))
        rows.append(Value.cast(row))
    return rows, table


def rans_xn_encoder_step_bench(core: str, mutant: str | None) -> Bench:
    """The sixteen-state rANS encoder's step from every state of its ring (``encoder_step`` of
    ``rans-encoder-x16``; ``docs/formal.md``, *The sixteen-state rANS encoder's chain*): a slot's trip
    round the ring is the golden step of its pair, whatever else the ring holds.

    :class:`~ansforge.hdl.rans.RansEncoderXnCoder` of the small sixteen-state encoder (``S = 16, W =
    P = 8``, ``K = 2``, 16-bit port words: the two-push datapath of ``rans16x16``) alone, as shipped
    (programmable), **every register of it starting in any state** (:attr:`Bench.free_start`: every
    reachable state is one of them), its symbol rows arbitrary legal ones (:func:`_legal_rows`: every
    ``f`` from 1 to ``2**P`` with its reciprocal), every input free (pairs, ``run``, ``ghost``,
    ``final``, ``o.ready``), reset low. The slot that enters stage 0 at the first clock is followed:
    with a legal pair (extra bits within its row's ``k``) its golden state is the step of
    ``docs/bitstream.md`` §4 from the state ``x`` arriving at stage 0 (the chunk's push and insertion,
    the symbol's push, then ``X // f`` and ``X mod f`` as free values with ``X = q f + r``, ``r < f``:
    one solution, the model's), forced (a ghost or a bubble) ``x`` itself. Asserted: when the ring has
    turned ``N`` times since (the slot is then in ``x_flush``, the ring's ``N``-th register), it holds
    that golden state; in every clock, stage 0's pushes (the chunk's, the symbol's, and the low word
    after the chunk that the symbol's push takes) are the golden step's for the pair offered. The ring
    is assumed to turn in every clock: no register of it (every stage's, ``x``, ``x_flush``) changes in
    a clock without a turn (``encoder_pipeline`` asserts it for every sequence), so a run with stalls
    is a run without them, each clock repeated, and the ``N + 2`` clocks (the landing's check is latched:
    seen a clock after it) settle every slot from every state (status ``proved``)."""
    b = Bench(free_reset=False)
    m = b.m
    loose, kw = SMALL_XN["rans"]
    S, W = loose["state_bits"], loose["word_bits"]
    coder, N, entry = _xn_coder(core)
    rows, table = _legal_rows(b, entry)
    b.platform = TablePlatform()
    b.platform.frozen.add("rans_symbol")
    b.platform.contents["rans_symbol"] = rows
    m.submodules.coder = elaborated_block(coder)
    b.free_start = "w:coder.*"
    pr = coder.probe
    m.d.comb += [coder.cfg.valid.eq(0), coder.cfg.p.eq(0)]
    for port in (coder.i.valid, coder.i.p, coder.o.ready, coder.run, coder.ghost, coder.final):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    sym, v = coder.i.p.symbol, coder.i.p.extra
    f, c, k = (Array(col)[sym] for col in zip(*table))
    legal = Signal(name="legal_pair")
    m.d.comb += legal.eq((v >> k) == 0)
    pc, _, ps, ws, X1 = rans_golden_step(m, pr.x, f, c, k, v, "golden", free=AnySeq)
    paired = ~pr.force & legal
    b.check(paired, pr.push_chunk == pc, "the chunk's push is not the golden step's")
    b.check(paired, pr.push_symbol == ps, "the symbol's push is not the golden step's")
    b.check(paired, pr.x_chunk[:W] == ws, "the state after the chunk is not the golden step's")
    # The ring turns in every clock: a run with stalls is this run with clocks repeated
    # (encoder_pipeline asserts that nothing in the ring moves without a turn).
    m.d.comb += Assume(pr.step)
    # The slot entering at the first clock, followed round the ring.
    turns = Signal(range(N + 1), name="tracked_turns")
    golden = Signal(S, name="tracked_golden")
    with m.If(~b.started & (pr.force | legal)):
        m.d.past += [turns.eq(1), golden.eq(Mux(pr.force, pr.x, X1))]
    with m.Elif(turns != 0):
        m.d.past += turns.eq(Mux(turns == N, 0, turns + 1))      # (landed: no longer followed)
    b.check(turns == N, pr.x_flush == golden, "a slot lands in another state than the golden step's")
    b.cover((turns == N) & (golden >> W != 0) & b.past(b.past(~pr.force, "paired"), "paired_before"),
            "a slot lands after a pair")
    return b


#: Bits of the command counts in the interleaved encoder's counts lemma: enough for counts below and
#: above ``N = 16`` (ghosts first, or none).
XN_COUNT_BITS = 5


class _CommandEntries:
    """The interleaved encoder shell's commands as the harness counts them: the running command's count
    ``C``, its ``E = max(C, N)`` entries (the first ``g0 = N - C`` ghosts where ``C < N``), the entries
    ``e`` taken since it was accepted, whether it is ``busy``, and ``last_entry`` (an entry that is its
    last). :meth:`follow` adds the updates once the harness has its ``accept``."""

    def __init__(self, b: Bench, N: int, bits: int, entered):
        m = b.m
        self.b, self.entered = b, entered
        self.busy = Signal(name="busy")
        self.C = Signal(bits, name="command_count")
        self.e = Signal(bits + 1, name="entries_taken")
        self.g0, self.E = Signal(range(N + 1), name="ghost_entries"), Signal(bits + 1, name="command_entries")
        m.d.comb += [self.g0.eq(Mux(self.C < N, N - self.C, 0)), self.E.eq(Mux(self.C < N, N, self.C))]
        self.last_entry = entered & (self.e == self.E - 1)

    def follow(self, accept, count) -> None:
        """A command of ``count`` pairs accepted where ``accept``; resets clear the count."""
        m = self.b.m
        with m.If(self.b.rst):
            m.d.past += [self.busy.eq(0), self.C.eq(0), self.e.eq(0)]
        with m.Elif(accept):
            m.d.past += [self.busy.eq(1), self.C.eq(count), self.e.eq(0)]
        with m.Else():
            with m.If(self.last_entry):
                m.d.past += self.busy.eq(0)
            with m.If(self.entered):
                m.d.past += self.e.eq(self.e + 1)


def rans_xn_encoder_counts_bench(core: str, mutant: str | None) -> Bench:
    """The interleaved rANS encoder shell's entries for every count (``encoder_counts`` of
    ``rans-encoder-x16``: the composition's condition 3, encoder side).

    :class:`~ansforge.hdl.rans.RansEncoderShellXN` of the small sixteen-state encoder (built with
    5-bit counts, :data:`XN_COUNT_BITS`, so that counts below, at and above ``N`` occur; the counters
    are width-generic code) alone, its coder's side free: ``step`` (an entry enters the ring) in any
    clock where the shell runs the coder (the coder takes entries only with ``run``), ``emit`` and
    ``last`` free, commands of any count offered in any clock, resets in any clock. A command of
    ``c`` pairs is ``E = max(c, N)`` entries: first ``N - c`` ghosts where ``c < N``, then its pairs.
    The harness keeps the command's count, the entries ``e`` taken since it was accepted and whether
    a command is busy. Asserted for every sequence: ``run`` exactly while the command has entries left
    (``e < E``); ``ghost`` exactly for its first ``N - c`` entries; ``final`` exactly for its last
    (``e = E - 1``); a command is accepted exactly when idle or with the running one's last entry
    (back to back); ``idle`` exactly when none runs or is offered; ``done`` exactly the clock after a
    port word marked ``last`` leaves. With the shell's counters tied to the harness's (its
    ``probe``) the k-induction closes."""
    b = Bench(free_reset=True)
    m = b.m
    bits = XN_COUNT_BITS
    shell, N = _xn_shell(b, core, bits)
    pr = shell.probe
    for port in (shell.cmd.valid, shell.cmd.p, shell.step, shell.emit, shell.last):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    m.d.comb += Assume(~shell.step | shell.run)
    accept = transfer_of(shell.cmd)
    cmds = _CommandEntries(b, N, bits, shell.step)
    cmds.follow(accept, shell.cmd.p.count)
    busy, C, e, g0, E, last_entry = cmds.busy, cmds.C, cmds.e, cmds.g0, cmds.E, cmds.last_entry
    left = busy & (e < E)
    m.d.comb += [Assert(shell.run == left, "run is not 'the command has entries left'"),
                 Assert(shell.cmd.ready == (~busy | last_entry), "a command is not accepted exactly when idle or "
                                                                   "with the running one's last entry"),
                 Assert(shell.idle == (~busy & ~shell.cmd.valid), "idle is not 'no command running or offered'"),
                 Assert(shell.done == b.past(shell.emit & shell.last & ~b.rst, "ended"),
                        "done is not the clock after the command's last port word")]
    with m.If(left):
        m.d.comb += [Assert(shell.ghost == (e < g0), "ghost is not 'one of the command's first N - count entries'"),
                     Assert(shell.final == (e == E - 1), "final is not 'the command's last entry'")]
    # Auxiliary invariants: the shell's counters against the harness's.
    m.d.comb += [Assert(pr.active == busy, "inv: active exactly while busy"), Assert(~busy | (e < E), "inv: e < E")]
    with m.If(busy):
        m.d.comb += [Assert(pr.ghosts == Mux(e < g0, g0 - e, 0), "inv: ghosts = N - count - e"),
                     Assert(pr.remaining == Mux(e < g0, C, C - (e - g0)), "inv: remaining = count - pairs taken")]
    b.cover(busy & (C == N + 1) & last_entry, "a command of N + 1 pairs, its last entry")
    b.cover(busy & (C == 1) & last_entry & accept & (shell.cmd.p.count == N + 1),
            "back to back: a command accepted with the last entry of a one-pair command (its fifteen ghosts first)")
    return b


def rans_xn_encoder_pipeline_bench(core: str, mutant: str | None) -> Bench:
    """The sixteen-state rANS encoder's coder runs each command's entries on its own consecutive slots
    and flushes them in order (``encoder_pipeline`` of ``rans-encoder-x16``).

    :class:`~ansforge.hdl.rans.RansEncoderXnCoder` of the small sixteen-state encoder alone, as shipped,
    its symbol rows arbitrary legal ones, resets in any clock, pairs (legal: extra bits within their
    row's ``k``) offered in any clock, ``o.ready`` free, and ``run``, ``ghost``, ``final`` as
    ``encoder_counts`` proves the shell gives them: commands of any count ``c`` accepted when none runs
    or with the running one's last entry, each ``E = max(c, N)`` entries, its first ``N - c`` ghosts.
    The harness follows the ring's positions (``j``: stage ``j``'s registers, ``N - 1``: ``x``'s): where
    the running command's latest entry is, how many entries it has made, and the flush steps left
    (``N`` after a command's last entry). Asserted for every sequence: an entry after a command's first
    goes in right after its latest (so its entries take consecutive slots, and entry ``e >= N`` meets
    the slot of entry ``e - N``); each of a command's first ``N`` entries meets ``x = 2**(S - W)``, each
    later one the state the ring computed for its slot (``x_flush``); a slot of the running command
    passes stage 0 without an entry only forced (the identity: ``encoder_step`` then gives its state
    back); no register of the ring changes in a clock without a turn (``encoder_step``'s premise);
    the ``N`` ring steps after a command's last entry are exactly its flush steps, the last of
    them the one whose slot took that entry; a pair that enters during a flush pushes nothing (the
    flush step makes its two words); and every port word out of ``o`` is the golden stream's next one,
    ``last`` included: the harness keeps the words not yet out (a pair's pushes in push order, a flush
    step's state low word first, the last flush step's second word ending the stream) and pairs them
    from each stream's first word, ``(q0, 0)`` where ``q0`` ends a stream of odd length. The coder's
    marks and output queue (:class:`~ansforge.hdl.rans.encoder_xn.RansEncoderXnCoderProbe`) are tied to
    the harness by auxiliary invariants, so that the induction closes. With ``encoder_step`` (each
    slot's trip is the golden step, its pushes the golden step's) these make each lane the golden
    encoder's lane and the words the golden stream, its final states flushed in the order of §8."""
    b = Bench(free_reset=True)
    m = b.m
    loose, kw = SMALL_XN["rans"]
    S, W = loose["state_bits"], loose["word_bits"]
    coder, N, entry = _xn_coder(core)
    init = 1 << (S - W)
    rows, table = _legal_rows(b, entry)
    b.platform = TablePlatform()
    b.platform.frozen.add("rans_symbol")
    b.platform.contents["rans_symbol"] = rows
    m.submodules.coder = elaborated_block(coder)
    pr = coder.probe
    m.d.comb += [coder.cfg.valid.eq(0), coder.cfg.p.eq(0)]
    for port in (coder.i.valid, coder.i.p, coder.o.ready):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    sym, v = coder.i.p.symbol, coder.i.p.extra
    k = Array(col[2] for col in table)[sym]
    m.d.comb += Assume((v >> k) == 0)
    # The shell, as encoder_counts proves it: a command's count C, its entries taken e.
    bits = XN_COUNT_BITS
    entered = coder.step
    cmds = _CommandEntries(b, N, bits, entered)
    busy, e, g0, E, boundary = cmds.busy, cmds.e, cmds.g0, cmds.E, cmds.last_entry
    offer, count = Signal(name="command_offered"), Signal(bits, name="command_offered_count")
    m.d.comb += [offer.eq(AnySeq(1)), count.eq(AnySeq(bits))]
    accept = offer & (~busy | boundary)
    cmds.follow(accept, count)
    m.d.comb += [coder.run.eq(busy & (e < E)), coder.ghost.eq(e < g0), coder.final.eq(e == E - 1)]
    # The ring's positions: the running command's latest entry (one-hot; none before its first) and
    # the flush steps left.
    lat = [Signal(name=f"latest{j}") for j in range(N)]
    fl = Signal(range(N + 1), name="flush_left")
    step = pr.step
    with m.If(b.rst):
        m.d.past += [fl.eq(0)] + [r.eq(0) for r in lat]
    with m.Else():
        with m.If(step):
            with m.If(boundary):
                m.d.past += [fl.eq(N)] + [r.eq(0) for r in lat]
            with m.Else():
                m.d.past += fl.eq(Mux(fl != 0, fl - 1, 0))
                with m.If(entered):
                    m.d.past += [lat[0].eq(1)] + [r.eq(0) for r in lat[1:]]
                with m.Else():
                    m.d.past += [lat[0].eq(lat[N - 1])] + [lat[j].eq(lat[j - 1]) for j in range(1, N)]
    started = Cat(*lat).any()
    # The running command's slots: its latest and the min(e, N) - 1 entered before it, behind it.
    used = Signal(range(N + 1), name="slots_used")
    m.d.comb += used.eq(Mux(e < N, e, N))
    own = []
    for j in range(N):
        o = Signal(name=f"own{j}")
        m.d.comb += o.eq(Cat(*(lat[p] & (((j - p) % N) < used) for p in range(N))).any())
        own.append(o)
    b.check(entered & (e != 0), lat[0], "an entry does not go in right after the command's latest")
    b.check(entered & (e < N), pr.x == init, "one of a command's first N entries does not start from 2**(S - W)")
    b.check(entered & (e >= N), own[N - 1] & (pr.x == pr.x_flush),
            "an entry does not go on from the state the ring computed for its slot")
    b.check(step & own[N - 1] & ~entered, pr.force, "a slot of the command passes stage 0 unforced without an entry")
    b.check(step, pr.flushing == (fl != 0), "a ring step is not a flush step exactly in the N after a command's last entry")
    b.check(step & (fl == 1), pr.fin[N - 1], "the flush does not end with the slot of the command's last entry")
    b.check(step & (fl != 0) & entered & ~coder.ghost, ~(pr.push_chunk | pr.push_symbol),
            "a pair that enters during a flush pushes")
    # The words: the golden stream's words not yet out of o, oldest first, each with its stream's end
    # mark. A pair pushes (stage 0's pushes: the chunk's, x's low word, then the symbol's, the low word
    # after the chunk; encoder_step makes them the golden step's), a flush step pushes the arriving
    # slot's state, low word first (the last flush step's second word ends the stream). Port words
    # pair them from a stream's first word: (q0, q1), or (q0, 0) where q0 ends a stream of an odd count.
    D = 6
    qw = [Signal(W, name=f"owed{j}_word") for j in range(D)]
    qe = [Signal(name=f"owed{j}_end") for j in range(D)]
    qn = Signal(range(D + 1), name="owed")
    paired = entered & ~coder.ghost
    flush_step = step & (fl != 0)
    pushes = [(~flush_step & paired & pr.push_chunk, pr.x[:W], 0), (~flush_step & paired & pr.push_symbol, pr.x_chunk[:W], 0),
              (flush_step, pr.x_flush[:W], 0), (flush_step, pr.x_flush[W:2 * W], fl == 1)]
    # The port words the owed words make: P0 (c0 words), P1 (c1 words after it), and a word left over.
    c0 = Signal(range(3), name="port0_words")
    c1 = Signal(range(3), name="port1_words")
    m.d.comb += [c0.eq(Mux(qe[0], 1, 2)), c1.eq(Mux(Mux(qe[0], qe[1], qe[2]), 1, 2))]
    q1 = [Mux(qe[0], qw[j + 1], qw[j + 2]) for j in range(2)]          # the words after P0
    p0 = Cat(qw[0], Mux(qe[0], 0, qw[1]))
    p0_last = qe[0] | qe[1]
    p1_end0 = Mux(qe[0], qe[1], qe[2])
    p1_end1 = Mux(qe[0], qe[2], qe[3])
    p1 = Cat(q1[0], Mux(p1_end0, 0, q1[1]))
    p1_last = p1_end0 | p1_end1
    k_ports = Signal(range(3), name="owed_port_words")
    m.d.comb += k_ports.eq(Mux(qn >= c0 + c1, 2, Mux(qn >= c0, 1, 0)))
    left = Signal(range(D + 1), name="owed_left_over")
    m.d.comb += left.eq(qn - Mux(k_ports == 2, c0 + c1, Mux(k_ports == 1, c0, 0)))
    out = transfer_of(coder.o)
    b.check(out, k_ports != 0, "a port word leaves o before the golden stream has its words")
    b.check(out, (coder.o.p == p0) & (coder.last == p0_last), "a port word is not the golden stream's next one")
    after = Signal(range(D + 1), name="owed_after_out")
    m.d.comb += after.eq(qn - Mux(out, c0, 0))
    kept = [Mux(out, Mux(c0 == 1, qw[j + 1] if j + 1 < D else 0, qw[j + 2] if j + 2 < D else 0), qw[j]) for j in range(D)]
    kept_e = [Mux(out, Mux(c0 == 1, qe[j + 1] if j + 1 < D else 0, qe[j + 2] if j + 2 < D else 0), qe[j]) for j in range(D)]
    nw, ne, pos = list(kept), list(kept_e), after
    for en, word, end in pushes:
        nw = [Mux(en & (pos == j), word, nw[j]) for j in range(D)]
        ne = [Mux(en & (pos == j), end, ne[j]) for j in range(D)]
        pos = pos + en
    with m.If(b.rst):
        m.d.past += qn.eq(0)
    with m.Else():
        m.d.past += [qn.eq(pos)] + [qw[j].eq(nw[j]) for j in range(D)] + [qe[j].eq(ne[j]) for j in range(D)]
    turned = b.past(step, "turned")
    held = Cat(*(r == b.past(r, f"ring{j}") for j, r in enumerate(pr.ring))).all()
    b.check(b.started & ~turned & ~b.p_rst, held, "a register of the ring changes without a turn")
    # Auxiliary invariants: the coder's marks against the harness's positions.
    inv = [pr.started == started, pr.flushing == (fl != 0), pr.at_next == (~started | pr.newest[0]),
           ~busy | (e < E), started == (busy & (e != 0)), fl <= N,
           sum(r.as_unsigned() for r in lat) <= 1, (fl == 0) | ~busy | (e + fl <= N)]
    for j in range(N):
        inv += [pr.tag[j] == Mux(own[j], pr.gen, ~pr.gen), pr.fin[j] == ((fl != 0) & (j == N - fl))]
        if j:
            inv.append(pr.newest[j] == lat[j])
    inv.append(~started | (pr.newest[0] == lat[0]))
    inv += [Mux(pr.tag[N - 1] == pr.gen, pr.x == pr.x_flush, pr.x == init)]
    # ... and the output queue against the owed words: o holds P0, the second register P1, the pending
    # word the one left over.
    inv += [qn <= 5, k_ports <= 2, left <= 1, pr.n_out == (k_ports != 0), pr.n_out2 == (k_ports == 2),
            pr.npend == (left == 1), ~pr.n_out | ((pr.out == p0) & (pr.out_last == p0_last)),
            ~pr.n_out2 | ((pr.out2 == p1) & (pr.out2_last == p1_last)),
            ~pr.npend | (pr.pend == Array(qw)[qn - 1]), (left == 0) | ~Array(qe)[qn - 1]]
    for j, cond in enumerate(inv):
        b.check(1, cond, f"inv: the ring's marks ({j})")
    b.cover(entered & (e == N) & ~coder.ghost, "a pair that goes on from the state its slot's lane left")
    b.cover(entered & (fl != 0), "the next command's entry in a step of the previous one's flush")
    b.cover(out & b.past(flush_step, "flushed") & (fl != 0), "a port word of a flush leaves o")
    return b


# -- the interleaved decoder ---------------------------------------------------------------------------


def _partition_rows(b: Bench, entry):
    """Every symbol row of the interleaved decoder's table arbitrary and legal (``AnyConst``, no writes),
    as the host writes a table (``RansTable.core_entries``): frequencies ``f >= 0`` summing to
    ``2**P``, each ``cum`` the sum of the frequencies before it (absent symbols have ``f = 0``),
    ``k <= K``. Returns the rows (the memory's words) and ``(freq, cum, k)`` per symbol."""
    m = b.m
    loose, kw = SMALL_XN_DECODER
    P, K, n = loose["precision_bits"], XN_DECODER_LEMMA_K, kw["max_symbols"]
    rows, table, total = [], [], 0
    for q in range(n):
        row = Signal(entry, name=f"row{q}")
        m.d.comb += [row.freq.eq(AnyConst(P + 1)), row.cum.eq(total), row.k.eq(AnyConst(len(row.k))),
                     Assume(row.k <= K)]
        total = total + row.freq                      # (unbounded: no wrap below the sum's assumption)
        table.append((row.freq, row.cum, row.k))
        rows.append(Value.cast(row))
    m.d.comb += Assume(total == 1 << P)
    return rows, table


def _decoder_tables(b: Bench, entry, buckets):
    """The interleaved decoder's tables as constant memories (:class:`TablePlatform`, frozen): an
    arbitrary legal symbol table (:func:`_partition_rows`) and arbitrary buckets (``buckets``: the
    bucket table's rows and layout; any contents: a bucket only chooses where the symbol search
    starts). Returns ``(freq, cum, k)`` per symbol."""
    rows, table = _partition_rows(b, entry)
    n_rows, layout = buckets
    size = layout.size
    bkts = [Signal(size, name=f"bucket_row{j}") for j in range(n_rows)]
    b.m.d.comb += [r.eq(AnyConst(size)) for r in bkts]
    b.platform = TablePlatform()
    b.platform.frozen |= {"rans_symbol", "rans_bucket"}
    b.platform.contents |= {"rans_symbol": rows, "rans_bucket": bkts}
    return table


#: The interleaved decoder's step lemma: clocks by which a slot has landed (``N`` turns and at most
#: ``max_symbols - 1`` clocks of its own symbol search), for ``rans-decoder-x5``.
XN_DECODER_STEP_CLOCKS = 5 + SMALL_XN_DECODER[1]["max_symbols"] - 1


def rans_xn_decoder_step_bench(core: str, mutant: str | None) -> Bench:
    """The interleaved rANS decoder's ring inverts the golden encoder step from every state of its ring
    (``decoder_step`` of ``rans-decoder-x5``; ``docs/formal.md``, *The interleaved rANS decoder's chain*).

    :class:`~ansforge.hdl.rans.RansDecoderCoderXN` of the small decoder (``S = 16, W = 8, P = 5``,
    ``K = 4``, :data:`~.params.XN_DECODER_LEMMA_K`, 16-bit port words: the two-pop datapath of
    ``rans16xN``) alone, as shipped
    (programmable), **every register of it starting in any state** (:attr:`Bench.free_start`), its
    symbol table an arbitrary legal one (:func:`_partition_rows`) and its buckets arbitrary, every input
    free, reset low. Free: an encoder state ``X0`` (any normalized one, ``2**(S - W) <= X0 < 2**S``),
    a legal pair (a symbol of ``f >= 1``, extra bits within its ``k``) and two words below the pair's.
    The harness computes the golden encoder step (:func:`~.lemmas_rans.rans_golden_step`): ``X1`` and
    the words it pushes. The slot that enters stage 1 at the first clock holds ``X1`` and steps a
    pair; when it reaches stage 5 the word buffer's next two words are the stream's (the pushed words,
    last pushed first, then the two below). Asserted: stage 5 pops before the chunk exactly where the
    encoder pushed the symbol's word, after it exactly where the encoder pushed the chunk's; the pair
    it puts on ``o`` is the encoder's; the state it returns, which leaves the ring ``N`` turns after
    it entered (``evicted``), is ``X0``; and the slot has landed by :data:`XN_DECODER_STEP_CLOCKS`.
    Assumed in every clock: the ring turns, or the followed slot is at stage 2 and its search steps
    (``miss``). ``decoder_pipeline`` asserts that nothing in the ring but stage 2's search registers
    changes in a clock without a turn, so a run with stalls and other slots' searches is this run
    with clocks repeated; a slot's search ends within ``max_symbols - 1`` steps (the table's
    cumulatives only grow), so the depth settles every slot from every state (status ``proved``)."""
    b = Bench(free_reset=False)
    m = b.m
    loose, _ = SMALL_XN_DECODER
    S, W, K = loose["state_bits"], loose["word_bits"], XN_DECODER_LEMMA_K
    L = S - W
    coder, N, entry, buckets = _xn_coder(core, extra_bits=K, buckets=True)
    table = _decoder_tables(b, entry, buckets)
    m.submodules.coder = elaborated_block(coder)
    b.free_start = "w:coder.*"
    pr = coder.probe
    m.d.comb += [coder.cfg.valid.eq(0), coder.cfg.p.eq(0)]
    for port in (coder.i.valid, coder.i.p, coder.o.ready, coder.run, coder.drain, coder.inject, coder.state,
                 coder.tag, coder.last, coder.ended, coder.purge, coder.purge_tag):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    X0 = Signal(S, name="start_x")
    qs, qe = Signal(len(coder.o.p.symbol), name="pair_symbol"), Signal(K, name="pair_extra")
    below = [Signal(W, name=f"word_below{j}") for j in range(2)]
    m.d.comb += [X0.eq(AnyConst(S)), qs.eq(AnyConst(len(qs))), qe.eq(AnyConst(K))] + [w.eq(AnyConst(W)) for w in below]
    f, c, k = (Array(col)[qs] for col in zip(*table))
    m.d.comb += Assume((X0 >= 1 << L) & (f >= 1) & ((qe >> k) == 0))
    pc, wc, ps, ws, X1 = rans_golden_step(m, X0, f, c, k, qe, "golden", shape=loose)
    # The stream below X1: the pushed words, the symbol's (pushed last) first, then the words below.
    first, second = Signal(W, name="stream_word0"), Signal(W, name="stream_word1")
    m.d.comb += [first.eq(Mux(ps, ws, Mux(pc, wc, below[0]))),
                 second.eq(Mux(ps, Mux(pc, wc, below[0]), Mux(pc, below[0], below[1])))]
    # The followed slot: its turns since it entered stage 1 (0: not yet entered, the first clock).
    turns = Signal(range(N + 1), name="tracked_turns")
    with m.If(~b.started):
        m.d.comb += Assume(coder.step & (pr.x == X1))
        m.d.past += turns.eq(1)
    with m.Elif((turns != 0) & (turns != N) & pr.turn):
        m.d.past += turns.eq(turns + 1)
    m.d.comb += Assume(pr.turn | (pr.miss & (turns == 2)))
    at_pop = b.started & (turns == XN_RING - 1) & pr.turn        # the slot's turn out of stage 5
    with m.If(at_pop):
        m.d.comb += Assume((pr.word == first) & (pr.word2 == second))
    b.check(at_pop, pr.pop_early == ps, "stage 5 pops before the chunk where the encoder pushed no symbol word, "
                                          "or not where it did")
    b.check(at_pop, pr.pop_late == pc, "stage 5 pops after the chunk where the encoder pushed no chunk word, "
                                         "or not where it did")
    popped = b.past(at_pop, "popped")
    b.check(popped, coder.o.valid & (coder.o.p.symbol == qs) & (coder.o.p.extra == qe),
            "the pair on o is not the encoder's")
    landed = b.past(b.started & (turns == N - 1) & pr.turn, "landed")
    b.check(landed, pr.evicted == X0, "the slot leaves the ring in another state than the encoder's before the pair")
    done, searched = Signal(name="tracked_done"), Signal(name="tracked_searched")
    with m.If(landed):
        m.d.past += done.eq(1)
    with m.If(pr.miss & (turns == 2)):
        m.d.past += searched.eq(1)
    b.check(b.cycle >= XN_DECODER_STEP_CLOCKS + 1, done, "the slot has not landed in time")
    b.cover(landed & ps & pc & searched, "a two-pop pair decoded after a symbol search")
    return b


def holds_offered_stream(coder) -> Value:
    """Whether the interleaved decoder's word buffer holds a word of the stream of the port word on
    ``i`` (read on the coder's ``held`` and ``held_tags`` ports): ``decoder_pipeline`` assumes none
    where that word is a ``skip`` word, and ``composition`` asserts it of the shell."""
    T = len(coder.i.p.tag)
    return Cat(*(coder.held[j] & (coder.held_tags[T * j:T * (j + 1)] == coder.i.p.tag)
                 for j in range(len(coder.held)))).any()


def rans_xn_decoder_pipeline_bench(core: str, mutant: str | None) -> Bench:
    """The interleaved rANS decoder's ring and word buffer, for any history and timing
    (``decoder_pipeline`` of ``rans-decoder-x5``): each pop takes its own stream's next words, in the
    order the port brought them; nothing in the ring moves without a turn.

    :class:`~ansforge.hdl.rans.RansDecoderCoderXN` of the small decoder (``K = 4``,
    :data:`~.params.XN_DECODER_LEMMA_K`) alone, as shipped, its symbol table an arbitrary legal one and
    its buckets arbitrary (constant), resets in any clock, every input free: port words of any stream
    tag (``skip`` or not) in any clock, ``run``, ``drain``, ``inject``, ``state``, ``tag``, ``last``,
    ``purge`` and ``purge_tag``, ``o.ready``; ``ended`` as the shell gives it, never in the clock
    after a word of stage 5's stream was taken (the shell's end marker follows a stream's last word
    through its FIFO, and ``ended`` is registered after it); a ``skip`` port word (a stream's first
    body port word, whose high half closed its head) only while no word of its stream is buffered. The harness keeps the queue of words
    taken and not yet popped or dropped, in the order they came (a port word's high word first, none
    for a ``skip`` port word's high half), each with its stream's tag and its port word's parity.
    Asserted for every sequence: a turn with a pair at stage 5 waits until the queue's first two words
    are that pair's stream's, or ``ended``, and not while a purge of the front's stream is on; a pop
    takes the queue's first word, a second pop the one after it, exactly where they are the pair's
    stream's (``starved`` in the next clock exactly where a pop found none); a purge drops only the
    rest of the front port word, of the purged stream; a turn puts at stage 1 the injected state
    where ``inject``, else the state stage 5 returned (``N = 5``: no delay line), and ``evicted`` is the
    state stage 5 returned; a pair at stage 5 is on ``o`` after its turn, its ``last`` with it; and no
    register of the ring (:attr:`RansDecoderCoderXNProbe.ring`) changes in a clock without a turn,
    stage 2's search registers aside (``decoder_step``'s premise). The buffer's registers are tied to
    the queue by auxiliary invariants, so that the k-induction closes."""
    b = Bench(free_reset=True)
    m = b.m
    loose, _ = SMALL_XN_DECODER
    W = loose["word_bits"]
    coder, N, entry, buckets = _xn_coder(core, extra_bits=XN_DECODER_LEMMA_K, buckets=True)
    _decoder_tables(b, entry, buckets)
    m.submodules.coder = elaborated_block(coder)
    pr = coder.probe
    m.d.comb += [coder.cfg.valid.eq(0), coder.cfg.p.eq(0)]
    for port in (coder.i.valid, coder.i.p, coder.o.ready, coder.run, coder.drain, coder.inject, coder.state,
                 coder.tag, coder.last, coder.ended, coder.purge, coder.purge_tag):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    T = len(coder.pair_tag)
    take = transfer_of(coder.i)
    took_own = b.past(take & ~b.rst, "took")
    took_tag = b.past(coder.i.p.tag, "took_tag")
    m.d.comb += Assume(~(coder.ended & took_own & (took_tag == coder.pair_tag) & ~b.p_rst))
    # A skip port word is its stream's first in the coder (its high half closed the head): none of its
    # stream's words is buffered when it comes.
    m.d.comb += Assume(~(take & coder.i.p.skip & holds_offered_stream(coder)))
    # The queue: the words taken and not yet popped or dropped, oldest first.
    D = 4
    qw = [Signal(W, name=f"queue{j}_word") for j in range(D)]
    qt = [Signal(T, name=f"queue{j}_tag") for j in range(D)]
    qp = [Signal(name=f"queue{j}_port") for j in range(D)]       # the port word's parity
    qn = Signal(range(D + 1), name="queued")
    parity = Signal(name="port_parity")                             # the next port word's
    bub, tag5, last5 = pr.bubble[3], pr.tag[3], pr.last[3]
    own1 = Signal(name="front_own")
    own2 = Signal(name="front_two_own")
    m.d.comb += [own1.eq((qn >= 1) & (qt[0] == tag5)), own2.eq(own1 & (qn >= 2) & (qt[1] == tag5))]
    pair_turn = pr.turn & ~bub
    pop1 = pair_turn & (pr.pop_early | pr.pop_late)
    pop2 = pair_turn & pr.pop_early & pr.pop_late
    stale = Signal(name="front_purged")
    m.d.comb += stale.eq(coder.purge & pr.va & (qn >= 1) & (qt[0] == coder.purge_tag))
    b.check(pair_turn, ~stale & (own2 | coder.ended),
            "a pair leaves stage 5 before two of its stream's words are first in the queue, without ended, "
            "or during a purge of the front's stream")
    b.check(pop1 & own1, pr.word == qw[0], "a pop does not take the queue's first word")
    b.check(pop2 & own2, pr.word2 == qw[1], "a second pop does not take the queue's second word")
    b.check(1, coder.starved == b.past(~b.rst & (pop1 & ~own1 | pop2 & ~own2), "starving"),
            "starved is not 'a pop found none of its stream's words'")
    # The words leaving: the pops that found their words, or the rest of the front port word where purged.
    rest = Signal(range(3), name="front_port_words")
    m.d.comb += rest.eq(Mux((qn >= 2) & (qp[1] == qp[0]), 2, 1))
    gone = Signal(range(3), name="words_leaving")
    m.d.comb += gone.eq(Mux(stale, rest, (pop1 & own1).as_unsigned() + (pop2 & own2).as_unsigned()))
    b.check(stale, ~pair_turn, "a purge drops words while a pair pops")
    left = Signal(range(D + 1), name="queue_left")
    m.d.comb += left.eq(qn - gone)
    kept = [Array(qw + [0] * 2)[j + gone] for j in range(D)]
    kept_t = [Array(qt + [0] * 2)[j + gone] for j in range(D)]
    kept_p = [Array(qp + [0] * 2)[j + gone] for j in range(D)]
    hi, lo = coder.i.p.data[W:], coder.i.p.data[:W]
    nw, nt, npar, pos = list(kept), list(kept_t), list(kept_p), left
    for en, word in ((take & ~coder.i.p.skip, hi), (take, lo)):
        nw = [Mux(en & (pos == j), word, nw[j]) for j in range(D)]
        nt = [Mux(en & (pos == j), coder.i.p.tag, nt[j]) for j in range(D)]
        npar = [Mux(en & (pos == j), parity, npar[j]) for j in range(D)]
        pos = pos + en
    with m.If(b.rst):
        m.d.past += [qn.eq(0), parity.eq(0)]
    with m.Else():
        m.d.past += [qn.eq(pos)] + [qw[j].eq(nw[j]) for j in range(D)] + [qt[j].eq(nt[j]) for j in range(D)] + \
                    [qp[j].eq(npar[j]) for j in range(D)]
        with m.If(take):
            m.d.past += parity.eq(~parity)
    # The ring: stage 1 after a turn, the state evicted, the pair on o; nothing moves without a turn.
    turned = b.past(pr.turn & ~b.rst, "turned")
    inj, st, xn = b.past(coder.inject, "inject"), b.past(coder.state, "state"), b.past(pr.x_next, "x_next")
    b.check(turned & ~b.p_rst, (pr.x == Mux(inj, st, xn)) & (pr.evicted == xn),
            "a turn does not put the injected state, or the state stage 5 returned, at stage 1")
    paired = b.past(pair_turn & ~b.rst, "paired")
    b.check(paired & ~b.p_rst, coder.o.valid & (coder.o.p.symbol == b.past(pr.symbol, "symbol5"))
            & (coder.o_last == b.past(last5, "last5")), "a pair at stage 5 is not on o after its turn")
    held = Cat(*(Value.cast(r) == b.past(r, f"ring{j}") for j, r in enumerate(pr.ring))).all()
    b.check(b.started & ~turned & ~b.p_rst, held, "a register of the ring changes without a turn")
    # Auxiliary invariants: the word buffer is the queue.
    pa, pb = pr.port_a, pr.port_b
    na = Mux(pr.va, Mux(pr.half, 1, 2), 0)
    inv = [qn <= D, qn == na + Mux(pr.vb, Mux(pr.skip_b, 1, 2), 0), (qn == 0) | (parity != Array(qp)[qn - 1]),
           ~pr.va | (qt[0] == pr.ta) & (qw[0] == Mux(pr.half, pa[:W], pa[W:])),
           ~pr.va | pr.half | (qt[1] == pr.ta) & (qw[1] == pa[:W]) & (qp[1] == qp[0])]
    for j in range(1, D):
        inv.append(~(pr.va & (j == na) & (j < qn)) | (qp[j] != qp[0]))
    for off in range(3):             # port_b's words after port_a's na (0 to 2)
        j_hi, j_lo = off, off + 1
        cond = pr.vb & (na == off)
        inv += [~cond | pr.skip_b | ((qw[j_hi] == pb[W:]) & (qt[j_hi] == pr.tb)),
                ~cond | Mux(pr.skip_b, (qw[j_hi] == pb[:W]) & (qt[j_hi] == pr.tb),
                            (qw[min(j_lo, D - 1)] == pb[:W]) & (qt[min(j_lo, D - 1)] == pr.tb)
                            & (qp[min(j_lo, D - 1)] == qp[j_hi]))]
    # ... and a skip port word is never behind a word of its own stream.
    inv += [~(pr.vb & pr.skip_b & pr.va) | (pr.ta != pr.tb)]
    for j, cond in enumerate(inv):
        b.check(1, cond, f"inv: the word buffer is the queue ({j})")
    b.cover(pop2 & own2 & b.past(take, "took_before"), "a pair pops twice, its words just taken")
    b.cover(stale & (rest == 2), "a purge drops a whole port word")
    return b


#: Bits of the command counts in the interleaved decoder's counts lemma: counts below, at and above ``N = 5``.
XN_DECODER_COUNT_BITS = 4


def rans_xn_decoder_counts_bench(core: str, mutant: str | None) -> Bench:
    """The interleaved rANS decoder shell's schedule of injections and pairs for every command
    (``decoder_counts`` of ``rans-decoder-x5``: the composition's condition 3, decoder side).

    :class:`~ansforge.hdl.rans.RansDecoderShellXN` of the small five-state decoder (4-bit counts,
    :data:`XN_DECODER_COUNT_BITS`, so that counts below, at and above ``N`` occur) alone, its coder's side
    free as the coder gives it: a turn only where the shell runs or drains the coder, a pair stepped
    exactly in a turn that runs it; commands of any count, word count, ``resume`` and ``check_end``
    offered in any clock (held until taken), port words in any clock, resets in any clock. A command is
    a stream the shell decodes where it is not ``resume`` and has at least its head's ``2 N`` words;
    the harness queues those in command order, each with its count ``c`` and its tag (their position
    mod 4), and follows the stream whose states are being injected or whose pairs stepped (``A``): its
    turns ``t`` since its first injection, its injections and its pairs. Asserted for every sequence:
    a stream's ``N`` injections are its turns ``0 .. N - 1`` (every turn in between injects it), so its
    states enter in the order the state FIFO has them; its ``c`` pairs step in its turns ``1 .. c``
    (every turn in between steps it, none after), each with its tag, ``last`` exactly on its ``c``-th;
    so pair ``j`` meets state ``j mod N`` (``decoder_pipeline``: a turn puts the injected state at
    stage 1, else the state stage 5 returned ``N`` turns after it entered); the next stream's first
    injection comes only once the running one has injected all its states and in or after the turn of
    its last pair, and only for a stream of the queue."""
    b = Bench(free_reset=True)
    m = b.m
    bits = XN_DECODER_COUNT_BITS
    shell, N = _xn_shell(b, core, bits)
    b.source(shell.cmd, "cmd")
    for port in (shell.i.valid, shell.i.p, shell.pair_taken, shell.step, shell.turned, shell.pair_tag, shell.o_last,
                 shell.evicted_initial, shell.starved, shell.starved_tag, shell.held, shell.held_tags):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    m.d.comb += [Assume(~shell.turned | shell.run | shell.drain), Assume(shell.step == (shell.turned & shell.run))]
    T = len(shell.tag)
    # The queue of streams to decode, in command order: count and tag.
    D = 3
    qc = [Signal(bits, name=f"stream{j}_count") for j in range(D)]
    qt = [Signal(T, name=f"stream{j}_tag") for j in range(D)]
    qn = Signal(range(D + 1), name="streams_queued")
    tags = Signal(T, name="streams_accepted")                # the next stream's tag
    cm = shell.cmd.p
    accept = transfer_of(shell.cmd)
    decoded = accept & ~cm.resume & (cm.words >= 2 * N)
    # The followed stream A.
    a_valid = Signal(name="a_valid")
    a_c, a_tag = Signal(bits, name="a_count"), Signal(T, name="a_tag")
    a_t = Signal(range(N + (1 << bits) + 2), name="a_turns")
    a_inj, a_steps = Signal(range(N + 1), name="a_injected"), Signal(bits + 1, name="a_steps")
    # (a reset clock drops what runs: its turn counts for no stream)
    turned, inject, step = shell.turned & ~b.rst, shell.inject, shell.step & ~b.rst
    a_injecting = a_valid & (a_inj != N)
    starts = turned & inject & ~a_injecting                   # the next stream's first injection
    a_pairs_left = a_valid & (a_steps != a_c)
    b.check(turned & inject & a_injecting, a_t == a_inj, "a stream's injections are not its consecutive first turns")
    b.check(turned & a_injecting, inject, "a turn between a stream's first and N-th injection does not inject it")
    b.check(starts, qn != 0, "an injection starts a stream that is not queued")
    b.check(starts & a_valid, (a_steps + step == a_c), "the next stream starts before the running one's last pair")
    b.check(step, a_pairs_left & (a_t >= 1) & (a_t == a_steps + 1), "a pair steps outside its stream's turns 1 .. c")
    b.check(turned & a_pairs_left & (a_t >= 1), step, "a turn between a stream's first and last pair does not step it")
    b.check(step, (shell.tag == a_tag) & (shell.last == (a_steps == a_c - 1)),
            "a pair steps without its stream's tag, or last is not its stream's c-th pair")
    with m.If(b.rst):
        m.d.past += [qn.eq(0), tags.eq(0), a_valid.eq(0)]
    with m.Else():
        # (the queue: the front leaves where its stream starts, a decoded command joins behind)
        rest_c = [Mux(starts, (qc + [0])[j + 1], qc[j]) for j in range(D)]
        rest_t = [Mux(starts, (qt + [0])[j + 1], qt[j]) for j in range(D)]
        left = qn - starts
        m.d.past += [qc[j].eq(Mux(decoded & (left == j), cm.count, rest_c[j])) for j in range(D)]
        m.d.past += [qt[j].eq(Mux(decoded & (left == j), tags, rest_t[j])) for j in range(D)]
        m.d.past += qn.eq(left + decoded)
        with m.If(decoded):
            m.d.past += tags.eq(tags + 1)
        with m.If(starts):
            m.d.past += [a_valid.eq(1), a_c.eq(qc[0]), a_tag.eq(qt[0]), a_t.eq(1), a_inj.eq(1), a_steps.eq(0)]
        with m.Elif(turned & a_valid):
            m.d.past += [a_t.eq(Mux(a_t == (1 << len(a_t)) - 1, a_t, a_t + 1)),
                         a_inj.eq(a_inj + (inject & a_injecting)), a_steps.eq(a_steps + step)]
    # Auxiliary invariants: the shell's records against the queue and A.
    pr = shell.probe
    a_done = a_valid & (a_inj == N) & (a_steps == a_c)
    rem = Signal(bits + 1, name="a_remaining")
    m.d.comb += rem.eq(a_c - a_steps)
    nxt_dec = pr.nxt_valid & ~pr.nxt_skip
    head_dec = Signal(name="head_decoded")          # the words part reads the head of a stream it will decode
    m.d.comb += head_dec.eq(pr.in_head & (pr.w_hc + pr.w_left >= N + pr.w_odd))
    inv = [pr.cur_valid == (a_valid & ~a_done), a_steps <= a_c, a_inj <= N, (a_inj >= 1) | ~a_valid,
           ~a_injecting | (a_t == a_inj), ~a_pairs_left | (a_t == a_steps + 1),
           qn == nxt_dec.as_unsigned() + head_dec.as_unsigned(), tags == (pr.next_tag + head_dec)[:T],
           ~nxt_dec | (qc[0] == pr.nxt_count) & (qt[0] == pr.nxt_tag) & (pr.next_tag == (pr.nxt_tag + 1)[:T]),
           ~head_dec | (Array(qc)[qn - 1] == pr.w_count) & (Array(qt)[qn - 1] == pr.w_tag) & (pr.w_tag == pr.next_tag),
           ~(a_valid & nxt_dec) | (pr.nxt_tag == (a_tag + 1)[:T]), ~a_valid | (tags == (a_tag + 1 + qn)[:T]),
           ~(pr.in_head & pr.nxt_valid), ~(pr.in_drain & pr.w_skip & pr.nxt_valid),
           ~pr.w_skip | pr.in_drain | pr.in_idle, pr.w_zero == (pr.w_left == 0), pr.w_one == (pr.w_left == 1),
           ~pr.in_head | (pr.w_hc <= N - 1 + pr.w_odd)]
    inv += [~pr.cur_valid | cond for cond in (pr.cur_tag == a_tag, pr.cur_inj == a_inj, pr.cur_rem == rem,
                                              pr.rem_zero == (rem == 0), pr.rem_one == (rem == 1),
                                              pr.cur_s == Mux(a_steps >= N, N, a_steps))]
    # The state FIFO: the running stream's states not yet injected, then the next stream's head (or the
    # head being read, or a cut stream's states not yet dropped). At an injection the FIFO's front is
    # therefore the running stream's next state (or, where it starts, the next stream's first).
    pushed = Signal(range(N + 2), name="head_states_pushed")
    m.d.comb += pushed.eq(pr.w_hc - (pr.w_odd & (pr.w_hc != 0)))
    cut = Signal(range(N + 1), name="cut_states_left")
    took = transfer_of(shell.i)
    with m.If(b.rst | accept):
        m.d.past += cut.eq(0)
    with m.Elif(pr.in_head & pr.w_zero & ~took):
        m.d.past += cut.eq(pushed)
    with m.Elif(pr.drop):
        m.d.past += cut.eq(cut - 1)
    a_rem = Mux(a_injecting, N - a_inj, 0)
    level = Signal(range(3 * N + 2), name="states_expected")
    m.d.comb += level.eq(a_rem + Mux(nxt_dec, N, 0) + Mux(pr.in_head, pushed, 0) + Mux(pr.nxt_valid & pr.nxt_skip, cut, 0))
    b.check(1, pr.states_level == level, "the state FIFO does not hold the running stream's states not yet injected, "
                                         "then the next stream's head")
    inv += [cut <= N, (pr.nxt_valid & pr.nxt_skip) | (cut == 0)]
    # The body FIFO: each entry written (a port word, or the end marker) carries the tag of the command
    # whose words the words part takes, the tag its pairs step with.
    w_cmd_tag = Signal(T, name="words_command_tag")
    with m.If(accept):
        m.d.past += w_cmd_tag.eq(tags)
    b.check(pr.body_write & ~b.rst, pr.body_tag == w_cmd_tag,
            "a body word or end marker does not carry its command's tag")
    inv += [~(pr.in_head | nxt_dec & ~pr.in_idle) | (w_cmd_tag == Mux(pr.in_head, pr.w_tag, pr.nxt_tag)),
            (pr.w_tag == w_cmd_tag) | pr.in_idle | pr.w_skip]
    for j, cond in enumerate(inv):
        b.check(1, cond, f"inv: the shell's records ({j})")
    b.cover(starts & a_valid & step & (a_c >= N), "a stream starts in the turn of the previous one's last pair")
    b.cover(starts & a_valid & (a_c < N) & (a_c != 0), "a stream starts after a stream of fewer pairs than states")
    return b
