"""The port properties of every core: ``stream_rules``, ``out_of_reset``, ``progress``, and the
bounded ``round_trip`` (one-state and interleaved cores) and ``detection`` (decoders). Each builder
returns a :class:`~.benches.Bench`; what each asserts is in the package docstring and ``docs/formal.md``.
"""

from __future__ import annotations

from amaranth.hdl import Array, Assert, Assume, Cat, Const, Signal, Value
from amaranth.hdl._ast import AnyConst, AnySeq
from amaranth.utils import bits_for as _bits

from ...hdl.common import DecodeStatus
from .params import (DETECTION_BOUND, DETECTION_WORDS, IDLE_EMPTY, PROGRESS_CLOCKS, ROUND_TRIP_PAIRS, SMALL, SMALL_XN,
                     STACK_WORDS, TABLES, TABLE_FIRST, XN_BAKED, XN_DETECTION_BOUND, XN_DETECTION_PAIRS,
                     XN_DETECTION_CLOCKS, XN_DETECTION_WORDS, XN_ROUND_TRIP_CLOCKS, XN_ROUND_TRIP_PAIRS, XN_STACK_WORDS,
                     data_table_clocks, round_trip_clocks, round_trip_pairs, small_core,
                     uses_direct_table, uses_local_table, uses_pinned_table, xn_round_trip_cores,
                     RESET_PAIRS, RESET_WINDOW, reset_clocks, reset_table)
from ...hdl.cores import core_build
from .benches import Bench, LegalTable, LocalTansTable, free_core, streams_of, transfer_of
from .contract import CoreContract


def _contract(b: Bench, dut, core_name: str, clause: str, count_cap: int | None = None) -> CoreContract:
    """``clause`` of the core's role's contract (:class:`~.contract.CoreContract`, the one the simulations
    run), asserted in the harness (``commands`` through the bench's latched checks), its covers latched
    by the bench."""
    c = CoreContract(dut, role=core_build(core_name).role, clauses=(clause,), progress_clocks=PROGRESS_CLOCKS[core_name],
                     count_cap=count_cap, latch=b.check)
    c.build()
    b.m.submodules.contract = c
    for test, what in c.covers:
        b.cover(test, what)
    return c


def stream_rules_bench(core_name: str, mutant: str | None) -> Bench:
    b, dut, outs = free_core(core_name, mutant, pinned=core_name == "rans-encoder")
    m = b.m
    _contract(b, dut, core_name, "stream_rules")
    b.checked.extend(name for name, _ in outs)
    if IDLE_EMPTY[core_name]:
        # A core that accepts a command holds nothing on its output: the tANS decoder's coder empties
        # ``o`` when a stream starts, so the hold rule needs this invariant for k-induction to close.
        with m.If(dut.cmd.ready & ~b.rst):
            m.d.comb += Assert(~dut.o.valid, "o.valid while cmd.ready")
    return b


def out_of_reset_bench(core_name: str, mutant: str | None) -> Bench:
    # The clock after any reset (whatever came before it) holds no output valid and no done, and from
    # power-on nothing comes out until a command has been accepted (resets, table writes, words and
    # pairs offered meanwhile): a reset core is silent until commanded, as far as the registers behind
    # the outputs go (a register the reset forgets deeper inside is caught where it corrupts a later
    # command: round_trip, detection).
    b, dut, outs = free_core(core_name, mutant)
    _contract(b, dut, core_name, "out_of_reset")
    return b


def commands_bench(core_name: str, mutant: str | None, depth: int) -> Bench:
    # Commands of any count and words, back to back or not, resets in any clock: ``done`` once per
    # command, in order, after exactly its pairs (and, for a decoder, its words). The ledger's counts
    # are saturated above the run's ``depth`` clocks, which is exact for the run (contract.py,
    # "Saturated counts"): a ledger of a few bits, whatever the width of the core's counts.
    b, dut, outs = free_core(core_name, mutant, pinned=core_name == "rans-encoder")
    _contract(b, dut, core_name, "commands", count_cap=(1 << _bits(depth + 1)) - 1)
    return b


def progress_bench(core_name: str, mutant: str | None) -> Bench:
    b = Bench(free_reset=False)
    m = b.m
    m.submodules.dut = dut = small_core(core_name, baked=core_name in ("rans-decoder", *XN_BAKED))
    ins, outs = streams_of(dut)
    if core_name in XN_BAKED:
        m.d.comb += dut.cfg.valid.eq(0)
        ins = [(n, p) for n, p in ins if n != "cfg"]
    table = None
    if ("progress", core_name) in TABLE_FIRST:
        # The rANS symbol search ends only on a legal symbol table (bucket entries may be anything);
        # a tANS decoder with a constant table is what z3 checks to depth 20 in CI's time.
        table = LegalTable(b, core_name.split("-")[0], pinned=True)
        table.program(dut, role="dec")
    eager = Signal(name="eager")                 # from here on, inputs offered and outputs taken
    m.d.past += eager.eq(eager | AnySeq(1))
    for name, port in ins:
        if name == "cfg" and table is not None:
            continue
        b.source(port, name)
        is_cfg = name.endswith("cfg")
        with m.If(eager):
            m.d.comb += Assume(port.valid == (0 if is_cfg else 1))
    if table is not None:
        # After the table: writes to the bucket table only (any contents), as the environment likes.
        free_valid, free_payload = Signal(name="cfg_free_valid"), Signal(len(Value.cast(dut.cfg.p)), name="cfg_free_p")
        m.d.comb += [free_valid.eq(AnySeq(1) & ~eager), free_payload.eq(AnySeq(len(free_payload)))]
        ib = len(dut.cfg.p.addr) - 1
        with m.If(~table.prog):
            m.d.comb += [dut.cfg.valid.eq(free_valid if table.family == "rans" else 0), dut.cfg.p.eq(free_payload)]
            m.d.comb += Assume(free_payload[ib] == 1)     # the bucket bit of the address
        with m.If(table.prog):
            m.d.comb += Assume(~eager)
    for name, port in outs:
        m.d.comb += port.ready.eq(AnySeq(1))
        with m.If(eager):
            m.d.comb += Assume(port.ready)
    if table is not None:
        with m.If(table.prog):
            m.d.comb += Assume(~dut.cmd.valid)
    # The contract's clause counts the clocks without a transfer while every input is offered and every
    # output taken, whenever that happens; from ``eager`` on, the environment makes it happen always.
    _contract(b, dut, core_name, "progress")
    return b


# -- round trip and detection (an encoder and a decoder) -------------------------------------------


def _family_cores(family: str, mutant: str | None, *, baked: bool):
    enc = small_core(f"{family}-encoder", baked=baked)
    dec = small_core(f"{family}-decoder", baked=baked)
    return enc, dec


def _decoder_command(dec, count, words) -> list:
    c = dec.cmd.p
    return [c.count.eq(count), c.words.eq(words), c.resume.eq(0), c.check_end.eq(1), c.state.eq(0), c.bit.eq(0),
            c.check_crc.eq(0), c.crc.eq(0)]


def _pairs(table: LegalTable, n: int) -> list[tuple[Signal, Signal]]:
    """``n`` arbitrary pairs, each legal for ``table`` (pair ``j`` of the local tANS table: of its ``s*_j``)."""
    m = table.b.m
    K = SMALL[table.family]["max_extra_bits"]
    out = []
    for j in range(n):
        s, e = Signal(_bits(table.n_sym - 1), name=f"pair{j}_symbol"), Signal(K, name=f"pair{j}_extra")
        legal = table.legal_pair(s, e, j) if isinstance(table, LocalTansTable) else table.legal_pair(s, e)
        m.d.comb += [s.eq(AnyConst(len(s))), e.eq(AnyConst(len(e))), Assume(legal)]
        out.append((s, e))
    return out


def _pair_bench(family: str, prop: str, mutant: str | None, table: str):
    """An encoder and a decoder of ``family`` (``mutant`` in the one it belongs to), both given the
    harness's table (:func:`uses_pinned_table`, :func:`uses_direct_table`): ``(bench, encoder, decoder, table)``."""
    if table not in TABLES:
        raise ValueError(f"table must be one of {', '.join(TABLES)}, not {table!r}")
    b = Bench(free_reset=False)
    pinned = uses_pinned_table(family, prop, table)
    direct = uses_direct_table(family, prop, table)
    enc, dec = _family_cores(family, mutant, baked=family == "rans" and pinned)
    b.m.submodules.enc, b.m.submodules.dec = enc, dec
    if uses_local_table(family, prop, table):
        lt = LocalTansTable(b, prop, round_trip_pairs(family, table) if prop == "round_trip" else 1)
    else:
        lt = LegalTable(b, family, pinned=pinned, direct=direct)
    assert lt.clocks == data_table_clocks(family, prop, table)
    lt.program(enc, role="enc")
    lt.program(dec, role="dec")
    return b, enc, dec, lt


def _encode(b: Bench, enc, go, n, symbols: Array, extras: Array, name: str) -> Signal:
    """Drive ``enc`` from clock ``go`` on: one command of ``n`` pairs, given back to front (pair
    ``n - 1`` first, as an encoder takes them), outputs always taken. Returns "the command was sent"."""
    m = b.m
    sent = Signal(name=f"{name}_cmd_sent")
    k = Signal(range(len(symbols) + 1), name=f"{name}_pairs_in")
    m.d.comb += [enc.cmd.valid.eq(go & ~sent), enc.cmd.p.count.eq(n),
                 enc.i.valid.eq(go & (k < n)), enc.i.p.symbol.eq(symbols[n - 1 - k]),
                 enc.i.p.extra.eq(extras[n - 1 - k]), enc.o.ready.eq(1)]
    with m.If(transfer_of(enc.cmd)):
        m.d.past += sent.eq(1)
    with m.If(transfer_of(enc.i)):
        m.d.past += k.eq(k + 1)
    return sent


def _through_stack(b: Bench, enc, dec, go, n, nmax: int, ps: Array, pe: Array, word_bits: int, *,
                   stack_words: int = STACK_WORDS, stream_word_bits: int | None = None) -> Signal:
    """The round trip's scenario from clock ``go`` on: ``enc`` codes one command of the ``n`` pairs
    ``ps, pe`` (back to front), its port words (``word_bits`` wide) go onto a stack, ``dec`` decodes them
    top of stack first in one command; checked (latched): the pairs come back 0 .. ``n - 1`` exactly,
    then ``done`` with OK. With ``stream_word_bits`` half the port (two stream words a port word, the rANS
    xN shape) the command counts stream words: two a port word, less the top port word's zero high half
    (an odd stream's pad; a stream's top word is never zero). Returns "the decoder has finished"."""
    m = b.m
    dec_sent = Signal(name="dec_cmd_sent")
    stack = [Signal(word_bits, name=f"stack{j}") for j in range(stack_words)]
    depth = Signal(range(stack_words + 1), name="stack_depth")
    enc_done = Signal(name="enc_finished")
    enc_sent = _encode(b, enc, go, n, ps, pe, "enc")
    b.check(transfer_of(enc.o), depth < stack_words, "more words than the harness's stack holds")
    with m.If(transfer_of(enc.o)):
        m.d.past += [Array(stack)[depth].eq(enc.o.p.data), depth.eq(depth + 1)]
    with m.If(enc_sent & enc.done):
        m.d.past += enc_done.eq(1)

    # Decode: the words top of stack first; the pairs must come back 0 .. N-1.
    k_w = Signal(range(stack_words + 1), name="words_out")
    k_out = Signal(range(nmax + 2), name="pairs_out")
    finished = Signal(name="finished")
    words = depth
    if stream_word_bits is not None and 2 * stream_word_bits == word_bits:
        words = Signal(range(2 * stack_words + 1), name="stream_words")
        top = Array(stack)[depth - 1]
        m.d.comb += words.eq(2 * depth - (top[stream_word_bits:] == 0))
    m.d.comb += [dec.cmd.valid.eq(enc_done & ~dec_sent)] + _decoder_command(dec, n, words)
    m.d.comb += [dec.i.valid.eq(enc_done & (k_w < depth)), dec.i.p.data.eq(Array(stack)[depth - 1 - k_w]),
                 dec.i.p.last.eq(0), dec.o.ready.eq(1)]
    with m.If(transfer_of(dec.cmd)):
        m.d.past += dec_sent.eq(1)
    with m.If(transfer_of(dec.i)):
        m.d.past += k_w.eq(k_w + 1)
    b.check(transfer_of(dec.o), k_out < n, "the decoder returns more pairs than were encoded")
    b.check(transfer_of(dec.o), dec.o.p.symbol == ps[k_out], "a decoded symbol differs from the encoded one")
    b.check(transfer_of(dec.o), dec.o.p.extra == pe[k_out], "decoded extra bits differ from the encoded ones")
    with m.If(transfer_of(dec.o)):
        m.d.past += k_out.eq(k_out + 1)
    ending = dec_sent & dec.done & ~finished
    b.check(ending, dec.status == DecodeStatus.OK, "the decoder does not report OK on an encoder's stream")
    b.check(ending, k_out == n, "the decoder reports done before returning every pair")
    with m.If(ending):
        m.d.past += finished.eq(1)
    return finished


def round_trip_bench(family: str, mutant: str | None, tables: str) -> Bench:
    b, enc, dec, table = _pair_bench(family, "round_trip", mutant, tables)
    m = b.m
    nmax = round_trip_pairs(family, tables)
    n = Signal(range(nmax + 1), name="n_pairs")
    m.d.comb += [n.eq(AnyConst(len(n))), Assume(n <= nmax)]
    pairs = _pairs(table, nmax)
    ps, pe = Array([s for s, _ in pairs]), Array([e for _, e in pairs])
    finished = _through_stack(b, enc, dec, ~table.prog, n, nmax, ps, pe, 8)
    b.check(b.cycle >= table.clocks + round_trip_clocks(family, tables), finished, "the round trip has not finished in time")
    b.cover(finished & (n == nmax), f"a round trip of {nmax} pair(s) finishes")
    return b


def round_trip_interleaved_bench(core: str, mutant: str | None) -> Bench:
    """The round trip of an interleaved pair (:func:`~.params.xn_round_trip_cores`: ``tans5x2``; ``rans8x16``
    at sixteen states, the encoder's only ``N``): encoder and decoder with the pinned table baked in
    (``cfg`` tied off), one command of ``N <= XN_ROUND_TRIP_PAIRS`` arbitrary legal pairs, the port words
    through a stack; the decoder returns exactly the pairs, in order, reports OK, and is done by a fixed
    clock. Bounded (the whole scenario): every sequence of up to that many pairs."""
    family = core.split("-")[0]
    b = Bench(free_reset=False)
    m = b.m
    enc, dec, table = xn_round_trip_cores(family)
    m.submodules.enc, m.submodules.dec = enc, dec
    _tie_off_tables(b, enc, dec)
    k_of = table.code_table.symbol_extra_bits
    nmax = XN_ROUND_TRIP_PAIRS[family]
    n = Signal(range(nmax + 1), name="n_pairs")
    m.d.comb += [n.eq(AnyConst(len(n))), Assume(n <= nmax)]
    K = SMALL_XN[family][1]["max_extra_bits"]
    ps, pe = [], []
    for j in range(nmax):
        s, e = Signal(2, name=f"pair{j}_symbol"), Signal(K, name=f"pair{j}_extra")
        m.d.comb += [s.eq(AnyConst(2)), e.eq(AnyConst(K)),
                     Assume(e < Array([Const(1 << k_of[q], K + 1) for q in range(len(k_of))])[s])]
        ps.append(s)
        pe.append(e)
    ps, pe = Array(ps), Array(pe)
    W = SMALL_XN[family][0]["word_bits"]
    finished = _through_stack(b, enc, dec, Const(1), n, nmax, ps, pe, len(dec.i.p.data),
                              stack_words=XN_STACK_WORDS[family], stream_word_bits=W)
    b.check(b.cycle >= XN_ROUND_TRIP_CLOCKS[family], finished, "the round trip has not finished in time")
    b.cover(finished & (n == nmax), f"a round trip of {nmax} pairs finishes")
    b.cover(finished & (n == 1), "a round trip of one pair finishes")
    return b


def detection_bench(family: str, mutant: str | None, tables: str) -> Bench:
    b, enc, dec, table = _pair_bench(family, "detection", mutant, tables)
    if isinstance(table, LocalTansTable):
        table.restrict_decoded(dec)
    _detect(b, enc, dec, ~table.prog, table.n_sym, SMALL[family]["max_extra_bits"], SMALL[family]["word_bits"],
            ROUND_TRIP_PAIRS[family], DETECTION_WORDS[family], DETECTION_BOUND[family])
    return b


def detection_interleaved_bench(core: str, mutant: str | None) -> Bench:
    """The detection of an interleaved build (``tans5x2``): decoder and encoder of ``N`` states with the
    pinned table baked in (``cfg`` tied off); the decoder takes one command of ``n <= XN_DETECTION_PAIRS``
    pairs over an arbitrary stream of up to ``XN_DETECTION_WORDS`` words (every head state, every marker,
    every bit free), reports within its bound, and reports OK only on a stream that the encoder, given the
    decoded pairs, codes to exactly those words. Bounded (the whole scenario)."""
    family = core.split("-")[0]
    states = int(core.rsplit("-x", 1)[1])
    b = Bench(free_reset=False)
    enc = small_core(f"{family}-encoder-x{states}", baked=True)
    dec = small_core(f"{family}-decoder-x{states}", baked=True)
    b.m.submodules.enc, b.m.submodules.dec = enc, dec
    _tie_off_tables(b, enc, dec)
    loose, kw = SMALL_XN[family]
    _detect(b, enc, dec, Const(1), kw["max_symbols"], kw["max_extra_bits"], loose["word_bits"],
            XN_DETECTION_PAIRS[family], XN_DETECTION_WORDS[family], XN_DETECTION_BOUND[family],
            finish_by=XN_DETECTION_CLOCKS[family])
    return b


def _tie_off_tables(b: Bench, *cores) -> None:
    """No table writes: the cores hold their baked tables."""
    for c in cores:
        for port in ("cfg", "sym_cfg", "state_cfg"):
            if port in c.signature.members:
                b.m.d.comb += getattr(c, port).valid.eq(0)


def _detect(b: Bench, enc, dec, go, n_sym: int, K: int, W: int, nmax: int, mmax: int, bound: tuple[int, int],
            finish_by: int | None = None) -> None:
    """The detection scenario from clock ``go`` on: ``dec`` decodes one command of ``n <= nmax`` pairs over an
    arbitrary stream of ``nw <= mmax`` words (top word first), ``done`` within ``n * c + nw + C`` clocks
    (``bound = (c, C)``); when it reports OK, ``enc`` given the decoded pairs pushes exactly the stream's
    words (checked, latched); with ``finish_by``, the whole scenario (the re-encoding included) has
    ended by that clock, so that no run hides a late word beyond the depth."""
    m = b.m
    n = Signal(range(nmax + 1), name="n_pairs")
    nw = Signal(range(mmax + 1), name="n_words")
    m.d.comb += [n.eq(AnyConst(len(n))), Assume(n <= nmax), nw.eq(AnyConst(len(nw))), Assume(nw <= mmax)]
    words = [Signal(W, name=f"word{j}") for j in range(mmax)]
    for w in words:
        m.d.comb += w.eq(AnyConst(W))
    wa = Array(words)

    # Decode an arbitrary stream (top word first), keeping the pairs.
    dec_sent = Signal(name="dec_cmd_sent")
    k_w = Signal(range(mmax + 1), name="words_in")
    got_s = [Signal(_bits(n_sym - 1), name=f"got{j}_symbol") for j in range(nmax)]
    got_e = [Signal(K, name=f"got{j}_extra") for j in range(nmax)]
    k_out = Signal(range(nmax + 2), name="pairs_out")
    since = Signal(8, name="clocks_since_command")
    judged = Signal(name="judged")
    ok = Signal(name="reported_ok")
    m.d.comb += [dec.cmd.valid.eq(go & ~dec_sent)] + _decoder_command(dec, n, nw)
    m.d.comb += [dec.i.valid.eq(go & (k_w < nw)), dec.i.p.data.eq(wa[k_w]), dec.i.p.last.eq(0),
                 dec.o.ready.eq(1)]
    with m.If(transfer_of(dec.cmd)):
        m.d.past += dec_sent.eq(1)
    with m.If(transfer_of(dec.i)):
        m.d.past += k_w.eq(k_w + 1)
    b.check(transfer_of(dec.o), k_out < n, "the decoder returns more pairs than the command asks for")
    with m.If(transfer_of(dec.o)):
        m.d.past += [Array(got_s)[k_out].eq(dec.o.p.symbol), Array(got_e)[k_out].eq(dec.o.p.extra),
                     k_out.eq(k_out + 1)]
    with m.If(dec_sent & ~judged):
        m.d.past += since.eq(since + 1)
    per_pair, const = bound
    b.check(dec_sent & ~judged, since < n * per_pair + nw + const, "the decoder has not reported within its bound")
    with m.If(dec_sent & dec.done & ~judged):
        m.d.past += [judged.eq(1), ok.eq(dec.status == DecodeStatus.OK)]

    # Reported OK: the encoder, given the decoded pairs, must push exactly the stream's words.
    pushed = Signal(range(STACK_WORDS + 1), name="words_pushed")
    enc_sent = _encode(b, enc, judged & ok, n, Array(got_s), Array(got_e), "reenc")
    b.check(transfer_of(enc.o), pushed < nw, "OK on a stream that re-encodes to more words")
    b.check(transfer_of(enc.o), enc.o.p.data == wa[nw - 1 - pushed], "OK on a stream that re-encodes differently")
    with m.If(transfer_of(enc.o)):
        m.d.past += pushed.eq(pushed + 1)
    b.check(enc_sent & enc.done, pushed == nw, "OK on a stream that re-encodes to fewer words")
    if finish_by is not None:
        reencoded = Signal(name="reencoded")
        with m.If(enc_sent & enc.done):
            m.d.past += reencoded.eq(1)
        b.check(b.cycle >= finish_by, judged & (~ok | reencoded), "the detection scenario has not finished in time")
    b.cover(judged & ~ok, "the decoder reports an error status")
    b.cover(enc_sent & enc.done & (n == nmax), f"a stream of {nmax} pair(s) reported OK and re-encoded")


# -- tables survive reset ---------------------------------------------------------------------------


def table_reset_bench(core_name: str, mutant: str | None) -> Bench:
    """Tables survive reset: ``core_name`` (programmable, its memories empty at power-on) has a whole legal
    table (:func:`~.params.reset_table`) written through its ``cfg`` ports, one entry a clock; then in the
    :data:`RESET_WINDOW` clocks after the last write the reset is free (any clocks, none or all); then one
    command codes :data:`RESET_PAIRS` and every output transfer is checked against the golden model's
    (decoder: the pairs, then ``done`` with OK; encoder: the port words, then ``done``), all by a fixed
    clock. Bounded (the whole scenario): every pattern of resets in the window. A table held in anything
    a reset clears (a register, a write in flight) fails it."""
    from ..jobs import make_job
    from ..streams import pack, payload_shape, unpack

    b = Bench(free_reset=False)
    m = b.m
    dut = small_core(core_name)
    m.submodules.dut = dut
    build = core_build(core_name)
    table = reset_table(core_name)
    symbols, extras = RESET_PAIRS
    job = make_job(f"{build.kind}-{build.role}", dut.codec, table, symbols, extras, core=dut)
    decoder = build.role == "decoder"
    if decoder:     # (the small builds have no CRC unit)
        shape = payload_shape(dut, "cmd")
        job.commands = [pack(shape, {**unpack(shape, job.commands[0]), "check_crc": 0, "crc": 0})]

    pending = []
    for port_name, writes in job.cfg.items():
        port = getattr(dut, port_name)
        k = Signal(range(len(writes) + 1), name=f"{port_name}_writes")
        m.d.comb += [port.valid.eq(k < len(writes)),
                     Value.cast(port.payload).eq(Array([Const(w, len(Value.cast(port.payload))) for w in writes])[k])]
        with m.If(transfer_of(port)):
            m.d.past += k.eq(k + 1)
        pending.append(k < len(writes))
    for name in ("cfg", "sym_cfg", "state_cfg"):
        if name in dut.signature.members and name not in job.cfg:
            m.d.comb += getattr(dut, name).valid.eq(0)
    all_written = ~Cat(*pending).any() if pending else Const(1)
    since = Signal(range(RESET_WINDOW + 1), name="clocks_since_written")
    with m.If(all_written & (since < RESET_WINDOW)):
        m.d.past += since.eq(since + 1)
    window = all_written & (since < RESET_WINDOW)
    m.d.comb += b.rst.eq(window & AnySeq(1))
    go = all_written & (since == RESET_WINDOW)
    resets = Signal(name="reset_seen")
    with m.If(b.rst):
        m.d.past += resets.eq(1)

    # The command, its inputs, its outputs against the golden model's.
    sent = Signal(name="cmd_sent")
    k_in = Signal(range(len(job.inputs) + 1), name="inputs_in")
    k_out = Signal(range(len(job.expected) + 1), name="outputs_out")
    finished = Signal(name="finished")
    cmd_bits, in_bits, out_bits = (len(Value.cast(p.payload)) for p in (dut.cmd, dut.i, dut.o))
    m.d.comb += [dut.cmd.valid.eq(go & ~sent), Value.cast(dut.cmd.payload).eq(Const(int(job.commands[0]), cmd_bits)),
                 dut.i.valid.eq(go & (k_in < len(job.inputs))), dut.o.ready.eq(1),
                 Value.cast(dut.i.payload).eq(Array([Const(int(v), in_bits) for v in job.inputs])[k_in])]
    with m.If(transfer_of(dut.cmd)):
        m.d.past += sent.eq(1)
    with m.If(transfer_of(dut.i)):
        m.d.past += k_in.eq(k_in + 1)
    expected = Array([Const(int(v), out_bits) for v in job.expected])
    b.check(transfer_of(dut.o), k_out < len(job.expected), "more outputs than the golden model's")
    b.check(transfer_of(dut.o), Value.cast(dut.o.payload) == expected[k_out],
            "an output differs from the golden model's after a reset")
    with m.If(transfer_of(dut.o)):
        m.d.past += k_out.eq(k_out + 1)
    ending = sent & dut.done & ~finished
    if decoder:
        b.check(ending, dut.status == DecodeStatus.OK, "the decoder does not report OK after a reset")
    b.check(ending, k_out == len(job.expected), "done before every output")
    with m.If(ending):
        m.d.past += finished.eq(1)
    b.check(b.cycle >= reset_clocks(core_name), finished, "the command has not finished in time")
    b.cover(finished & resets, "the command codes after a reset that followed the table")
    return b
