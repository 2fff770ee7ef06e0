"""The rANS cores' round-trip lemma chain: the step lemmas (``encoder_step``, ``decoder_step``:
one pair from any state on any legal table, against the divider-free golden step), and the blocks'
counts and pipeline lemmas (``docs/formal.md``, Round 8).
"""

from __future__ import annotations

from amaranth.hdl import Array, Assert, Assume, Cat, Const, Module, Mux, Signal, Value
from amaranth.hdl._ast import AnyConst, AnySeq
from amaranth.utils import bits_for as _bits

from ...hdl.common import DecodeStatus
from ...hdl.rans import RansDecoder, RansEncoder, bucket_bits_for
from .params import RANS_DECODER_STEP_CLOCKS, RANS_ENCODER_STEP_CLOCKS, SMALL, pinned_rans_table, small_core
from .benches import (unused_ok, Bench, CommandLedger, LegalTable, TablePlatform, check_decoded_pair, elaborated_block,
                      load_tracker, transfer_of)


# -- the rANS step lemmas (docs/formal.md, Round 8) ------------------------------------------------


def rans_golden_step(m: Module, X, f, c, k, extra, name: str, free=AnyConst, shape: dict | None = None):
    """The rANS encoder's step of one pair as ``docs/bitstream.md`` §4 writes it (the golden step of the
    rANS step lemmas), from state ``X`` (``S`` bits) with the pair's symbol row ``(f, c, k)`` and its
    extra bits: first the chunk of ``w = k`` bits (``f_u = 2**(P - w)``: push ``X mod 2**W`` if ``X >>
    (S - P) >= f_u``, then ``x = (x div f_u) << P | (v f_u + x mod f_u)``, shifts only), then the
    symbol (push if ``x >> (S - P) >= f``, then ``X1 = (x div f) << P | (c + x mod f)``). The divide
    by the symbolic ``f`` is not built: ``x div f`` and ``x mod f`` are free values ``q``, ``r``
    (``AnyConst``) with ``x = q f + r`` and ``r < f`` assumed, which has exactly one solution for
    ``f >= 1``, so the step is a function of ``X`` as the model's is (``free``: ``AnySeq`` for a step
    in every clock, the assumption then holding in each; ``shape``: the codec's ``state_bits``,
    ``word_bits``, ``precision_bits``, by default ``SMALL["rans"]``'s). Returns ``(push_chunk,
    chunk_word, push_symbol, symbol_word, X1)``."""
    sh = SMALL["rans"] if shape is None else shape
    S, W, P = sh["state_bits"], sh["word_bits"], sh["precision_bits"]
    pc, ps = Signal(name=f"{name}_push_chunk"), Signal(name=f"{name}_push_symbol")
    xp, xc, xs = Signal(S, name=f"{name}_x_pushed"), Signal(S, name=f"{name}_x_chunk"), Signal(S, name=f"{name}_x_sym")
    keep = Signal(range(P + 1), name=f"{name}_chunk_keep")         # the chunk's frequency is 2**keep
    m.d.comb += [keep.eq(P - k), pc.eq((X >> (S - P)) >= (Const(1, P + 1) << keep)),
                 xp.eq(Mux(pc, X >> W, X)),
                 xc.eq(((xp >> keep) << P) | (extra << keep) | (xp & ((Const(1, P + 1) << keep) - 1))),
                 ps.eq((xc >> (S - P)) >= f), xs.eq(Mux(ps, xc >> W, xc))]
    # x < f 2**(S - P) after the symbol's push: the quotient has S - P bits.
    q, r = Signal(S - P, name=f"{name}_quotient"), Signal(P + 1, name=f"{name}_remainder")
    m.d.comb += [q.eq(free(S - P)), r.eq(free(P + 1)), Assume(q * f + r == xs), Assume(r < f)]
    X1 = Signal(S, name=f"{name}_x_next")
    m.d.comb += X1.eq((q << P) | (c + r))
    return pc, X[:W], ps, xc[:W], X1


def _rans_step_core(core: str, mutant: str | None):
    """The rANS step lemmas' common start: a bench and the small ``core``, elaborated here so that the harness reads its coder's ``state`` (and the decoder
    coder's word stream and ``buffered``) through the module's public ``submodules``; the core's
    netlist is the shipped one. Returns ``(bench, core, coder)``."""
    b = Bench(free_reset=False)
    dut = small_core(core)
    mod = elaborated_block(dut)
    setattr(b.m.submodules, "dec" if core.endswith("decoder") else "enc", mod)
    return b, dut, mod.submodules.coder


def rans_decoder_step_bench(mutant: str | None) -> Bench:
    """The rANS decoder's step from an arbitrary state (``decoder_step``, rANS; ``docs/formal.md``,
    Round 8): the decoder core inverts the golden encoder step from *every* state.

    Free: an arbitrary legal table (round 3's :class:`LegalTable`: 1 to 4 used symbols, frequencies
    ``>= 1`` summing to ``2**P``, extra widths ``<= K``, written through ``cfg`` in 4 clocks), a
    state ``X0`` (any ``S`` bits), a legal pair ``q`` (a used symbol, extra bits that fit its width),
    whether the stream goes on below this pair's words (``more``: one more word, of any value; legal
    only with ``X0 >= 2**(S - W)``, as an encoder that has pushed a word never goes below that) and
    that word. The harness computes the encoder's step (:func:`rans_golden_step`): ``X1`` and the
    words it pushes (0, 1 or 2). The decoder is resumed through its command at the checkpoint ``(X1,
    those words [+ the one more])``: ``resume = 1``, ``state = X1``, one pair, ``check_end = 0``;
    the pushed words are offered from the command on, every clock; the one more only once the pair
    is decoded (so a pop it should not make shows as a stall); pairs always taken.
    Asserted: the decoder returns exactly ``q``; once it has decoded it, its coder has taken exactly
    the pushed words and holds none (it popped exactly those: the one more word is offered only from
    the next clock); it reports OK and at ``done`` its state is ``X0``; all by a fixed clock. The
    buckets the symbol search reads keep their reset contents (a free bucket was proved too, and a
    warm-up pair before ``q`` gave no answer in 34 minutes: ``docs/formal.md``, Round 8)."""
    b, dec, coder = _rans_step_core("rans-decoder", mutant)
    m = b.m
    sh = SMALL["rans"]
    S, W, K = sh["state_bits"], sh["word_bits"], sh["max_extra_bits"]
    table = LegalTable(b, "rans")
    table.program(dec, role="dec")
    sb = _bits(table.n_sym - 1)
    X0 = Signal(S, name="start_x")
    more = Signal(name="more_words")
    below = Signal(W, name="word_below")
    qs, qe = Signal(sb, name="pair_symbol"), Signal(K, name="pair_extra")
    m.d.comb += [X0.eq(AnyConst(S)), more.eq(AnyConst(1)), below.eq(AnyConst(W)), qs.eq(AnyConst(sb)),
                 qe.eq(AnyConst(K)), Assume(table.legal_pair(qs, qe)), Assume(~more | (X0 >= (1 << (S - W))))]
    pc, wc, ps, ws, X1 = rans_golden_step(m, X0, Array(table.freq)[qs], Array(table.cum)[qs],
                                           Array(table.k)[qs], qe, "pair")
    npush = Signal(range(3), name="words_pushed")
    m.d.comb += npush.eq(pc + ps)
    npairs = 1
    ours = Signal(range(5), name="words_of_the_pairs")
    m.d.comb += ours.eq(npush)
    nw = Signal(range(6), name="stream_words")
    m.d.comb += nw.eq(ours + more)

    table_clocks = table.clocks
    sent = Signal(name="dec_cmd_sent")
    k_w = Signal(range(6), name="words_out")
    into = Signal(range(6), name="words_into_coder")
    k_out = Signal(range(4), name="pairs_out")
    n_steps = Signal(range(4), name="steps")
    stepped = Signal(name="pair_decoded")
    finished = Signal(name="finished")
    go = ~table.prog
    word = Signal(W, name="word_offered")      # top of stack first: the symbol's push, the chunk's, then below
    m.d.comb += word.eq(Mux(k_w < npush, Mux((k_w == 0) & ps, ws, wc), below))
    c = dec.cmd.p
    m.d.comb += [dec.cmd.valid.eq(go & ~sent), c.count.eq(npairs), c.words.eq(nw), c.resume.eq(1), c.check_end.eq(0),
                 c.state.eq(X1), c.bit.eq(0), c.check_crc.eq(0), c.crc.eq(0)]
    m.d.comb += [dec.i.valid.eq(go & ((k_w < ours) | ((k_w < nw) & stepped))), dec.i.p.data.eq(word),
                 dec.i.p.last.eq(0), dec.o.ready.eq(1)]
    with m.If(transfer_of(dec.cmd)):
        m.d.past += sent.eq(1)
    with m.If(transfer_of(dec.i)):
        m.d.past += k_w.eq(k_w + 1)
    with m.If(transfer_of(coder.i)):
        m.d.past += into.eq(into + 1)
    last_step = coder.step & (n_steps == npairs - 1)
    with m.If(coder.step):
        m.d.past += n_steps.eq(n_steps + 1)
    with m.If(last_step):
        m.d.past += stepped.eq(1)
    first = npairs - 1          # the index of q among the decoded pairs
    check_decoded_pair(b, dec, k_out, first, qs, qe)
    with m.If(transfer_of(dec.o)):
        m.d.past += k_out.eq(k_out + 1)
    ending = sent & dec.done & ~finished
    b.check(ending, dec.status == DecodeStatus.OK, "the decoder does not report OK")
    b.check(ending, k_out == npairs, "the decoder reports done before returning the pair")
    b.check(ending, coder.state == X0, "the decoder's state after the pair is not the encoder's before it")
    # In the clock after the step the coder's buffer holds what the step left of the words taken before
    # it (the one more word is offered from this clock on, so none has come in since).
    b.check(b.past(last_step, "stepped_now"), (into == ours) & ~coder.buffered,
            "the decoder did not pop exactly the pair's words")
    with m.If(ending):
        m.d.past += finished.eq(1)
    b.check(b.cycle >= table_clocks + RANS_DECODER_STEP_CLOCKS, finished,
            "the step has not finished in time")
    b.cover(finished & pc & ps & more, "a pair of two pops decoded from a checkpoint, the stream going on")
    return b


def rans_encoder_step_bench(mutant: str | None) -> Bench:
    """The rANS encoder's step from an arbitrary idle state (``encoder_step``, rANS; ``docs/formal.md``,
    Round 8): the encoder core's step and flush are the golden step's.

    Free: a state ``X0`` (any ``S`` bits), a legal pair ``q`` of symbol ``s*`` and the table, written
    through ``cfg`` in 4 clocks, one row per symbol: ``s*``'s row any legal row (``f >= 1``, ``c + f
    <= 2**P``, ``k <= K``: every legal table's row of a used symbol is one), the others legal-shaped
    rows. Two *warm-up* pairs of symbols ``a != b``, both other than ``s*``, with rows ``(f, c, k) =
    (1, X0 >> P, 0)`` and ``(1, X0 mod 2**P, 0)``, bring the encoder from its command's ``x = 0`` to
    ``X0`` without a push (``0 -> c_a -> (c_a << P) | c_b``: every ``S``-bit state, every idle state
    of the encoder, whose buffer has emptied with ``o`` always taken); ``q`` follows back to back,
    then the flush (the command is of 3 pairs). The harness computes the golden stream
    (:func:`rans_golden_step`: the chunk's and the symbol's pushes from ``X0``, then ``X1``'s non-zero
    words, least significant first) and asserts the encoder's words are exactly that stream, the
    last one marked ``last``, its state ``X0`` after the warm-ups and ``X1`` after ``q``, and the
    command done by a fixed clock."""
    b, enc, coder = _rans_step_core("rans-encoder", mutant)
    m = b.m
    sh = SMALL["rans"]
    S, W, P, K, n = sh["state_bits"], sh["word_bits"], sh["precision_bits"], sh["max_extra_bits"], sh["max_symbols"]
    sb = _bits(n - 1)
    f = [Signal(P + 1, name=f"f{s}") for s in range(n)]
    cum = [Signal(P + 1, name=f"cum{s}") for s in range(n)]
    k = [Signal(_bits(K), name=f"k{s}") for s in range(n)]
    for s in range(n):
        m.d.comb += [f[s].eq(AnyConst(P + 1)), cum[s].eq(AnyConst(P + 1)), k[s].eq(AnyConst(len(k[s]))),
                     Assume((f[s] >= 1) & (cum[s] + f[s] <= (1 << P)) & (k[s] <= K))]
    prog, t = Signal(name="programming"), Signal(range(n + 1), name="prog_t")
    m.d.comb += prog.eq(t < n)
    m.d.past += t.eq(Mux(prog, t + 1, t))
    at = t[:sb]
    m.d.comb += [enc.cfg.valid.eq(prog), enc.cfg.p.addr.eq(at),
                 enc.cfg.p.data.eq(Array(f)[at] | (Array(cum)[at] << (P + 1)) | (Array(k)[at] << (2 * P + 2)))]
    X0 = Signal(S, name="start_x")
    qs, qe = Signal(sb, name="pair_symbol"), Signal(K, name="pair_extra")
    wa, wb = Signal(sb, name="warm_symbol_a"), Signal(sb, name="warm_symbol_b")
    m.d.comb += [v.eq(AnyConst(len(v))) for v in (X0, qs, qe, wa, wb)]
    m.d.comb += [Assume((qe >> Array(k)[qs]) == 0), Assume((wa != wb) & (wa != qs) & (wb != qs)),
                 Assume((Array(f)[wa] == 1) & (Array(k)[wa] == 0) & (Array(cum)[wa] == X0[P:])),
                 Assume((Array(f)[wb] == 1) & (Array(k)[wb] == 0) & (Array(cum)[wb] == X0[:P]))]
    pc, wc, ps, ws, X1 = rans_golden_step(m, X0, Array(f)[qs], Array(cum)[qs], Array(k)[qs], qe, "pair")
    # The golden stream, in push order: the chunk's word, the symbol's, then X1's non-zero words.
    items = [(pc, wc), (ps, ws)] + [(X1 >> (W * j) != 0, X1[W * j:W * (j + 1)]) for j in range(-(-S // W))]
    NG = len(items)
    golden = [Signal(W, name=f"golden_word{j}") for j in range(NG)]
    count = Const(0, _bits(NG))
    for j, (en, w) in enumerate(items):
        for g in range(j + 1):
            with m.If(en & (count == g)):
                m.d.comb += golden[g].eq(w)
        nc = Signal(range(NG + 1), name=f"golden_len{j}")
        m.d.comb += nc.eq(count + en)
        count = nc
    glen = count

    sent = Signal(name="enc_cmd_sent")
    n_in = Signal(range(4), name="enc_pairs_in")
    k_o = Signal(range(NG + 2), name="words_out")
    finished = Signal(name="finished")
    go = ~prog
    m.d.comb += [enc.cmd.valid.eq(go & ~sent), enc.cmd.p.count.eq(3),
                 enc.i.valid.eq(go & (n_in < 3)), enc.i.p.symbol.eq(Array([wa, wb, qs])[n_in]),
                 enc.i.p.extra.eq(Mux(n_in == 2, qe, 0)), enc.o.ready.eq(1)]
    with m.If(transfer_of(enc.cmd)):
        m.d.past += sent.eq(1)
    with m.If(transfer_of(enc.i)):
        m.d.past += n_in.eq(n_in + 1)
    took = b.past(transfer_of(enc.i), "pair_taken")
    b.check(took & (n_in == 2), coder.state == X0, "the warm-ups do not bring the encoder to X0")
    b.check(took & (n_in == 3), coder.state == X1, "the encoder's state after the pair is not the golden step's")
    b.check(transfer_of(enc.o), k_o < glen, "the encoder pushes more words than the golden stream has")
    b.check(transfer_of(enc.o), enc.o.p.data == Array(golden)[k_o], "a word differs from the golden stream's")
    b.check(transfer_of(enc.o), enc.o.p.last == (k_o + 1 == glen), "a word's last flag differs from the golden stream's")
    with m.If(transfer_of(enc.o)):
        m.d.past += k_o.eq(k_o + 1)
    b.check(sent & enc.done, k_o == glen, "the encoder is done before the golden stream's last word")
    with m.If(sent & enc.done):
        m.d.past += finished.eq(1)
    b.check(b.cycle >= n + RANS_ENCODER_STEP_CLOCKS, finished, "the step has not finished in time")
    b.cover(finished & pc & ps & (X1 >> W != 0), "a step of two pushes from the warm-up state, flushed in two words")
    return b


def rans_encoder_counts_bench(core: str, mutant: str | None) -> Bench:
    """The rANS encoder shell's counts for every ``N`` (``encoder_counts`` of the rANS encoder: the
    composition's condition 3 for rANS, encoder side).

    :class:`~ansforge.hdl.rans.RansEncoderShell` of the small rANS encoder (built with 3-bit counts,
    the counters being width-generic code) alone, its coder's side free: ``step`` (a pair enters the
    coder) in any clock where the shell runs the coder (the coder takes pairs only with ``run``),
    ``emit`` (a word leaves ``o``) in any clock where the coder holds one, the coder's ``state`` and
    ``held`` free in every clock, commands of any count offered in any clock, resets in any clock. The
    flush *ends* in a clock of the shell's flush state where the state is 0 and the last held word
    leaves (or none is held). The harness keeps the command's count ``N``, the pairs ``k`` taken since it was
    accepted and whether a command is busy; asserted for every sequence: pairs pass only while
    ``k < N`` and always then (no early stop), the flush is asked for only once ``k = N`` and from the
    clock after that on until it ends, a command is accepted exactly when idle or when the flush ends
    (back to back: the next stream then starts at the flush's ``x = 0``; from idle the shell raises
    ``start``), and ``done`` is high exactly in the clock after a flush ends. With the invariant
    ``remaining = N - k`` (the shell's registers, its ``probe``) the k-induction closes."""
    b = Bench(free_reset=True)
    m = b.m
    bits = 3
    shell = _rans_block(core, mutant, "shell", count_bits=bits)
    m.submodules.shell = elaborated_block(shell)
    pr = shell.probe
    for port in (shell.cmd.valid, shell.cmd.p, shell.emit, shell.state, shell.held, shell.step):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    m.d.comb += [Assume(~shell.step | shell.run), Assume(~shell.emit | (shell.held != 0))]
    accept = transfer_of(shell.cmd)
    ends = Signal(name="flush_ends")
    # (In that clock ``flush`` may already be low: a command waiting is accepted and its first pair runs.)
    m.d.comb += ends.eq(pr.flushing & (shell.state == 0) & ((shell.held == 0) | ((shell.held == 1) & shell.emit)))
    busy = Signal(name="busy")
    N, k = Signal(bits, name="command_count"), Signal(bits, name="pairs_taken")
    with m.If(b.rst):
        m.d.past += [busy.eq(0), N.eq(0), k.eq(0)]
    with m.Elif(accept):
        m.d.past += [busy.eq(1), N.eq(shell.cmd.p.count), k.eq(shell.step)]
    with m.Else():
        with m.If(ends):
            m.d.past += busy.eq(0)
        with m.If(shell.step):
            m.d.past += k.eq(k + 1)
    own = busy & ~ends                                  # the clock belongs to the busy command
    with m.If(shell.run & ~accept):
        m.d.comb += Assert(own & (k != N), "pairs pass while the command has none left")
    with m.If(own):
        m.d.comb += Assert(shell.run == (k != N), "pairs do not pass while the command has some left")
    with m.If(shell.flush):
        m.d.comb += Assert(busy & (k == N), "the flush is asked for before the N-th pair")
    with m.If(own & (k == N) & b.past(busy & (k == N) & ~accept & ~b.rst, "counted")):
        m.d.comb += Assert(shell.flush, "the flush is not asked for after the N-th pair")
    m.d.comb += [Assert(shell.cmd.ready == (~busy | ends), "a command is not accepted exactly when idle or at the flush's end"),
                 Assert(shell.start == (accept & ~busy), "start is not exactly a command accepted from idle"),
                 Assert(shell.done == b.past(ends & busy & ~b.rst, "ended"), "done is not the clock after the flush ends")]
    with m.If(accept & busy):
        m.d.comb += Assert(ends, "a command is accepted before the previous one's flush ends")
    # Auxiliary invariants: the shell's registers against the harness's.
    m.d.comb += [Assert(busy == (pr.encoding | pr.flushing), "inv: busy exactly in ENCODE and FLUSH"),
                 Assert(~pr.flushing | (k == N), "inv: flushing after the N-th pair")]
    with m.If(busy):
        m.d.comb += [Assert(pr.remaining == N - k, "inv: remaining = N - k"), Assert(k <= N, "inv: k <= N")]
    b.cover(busy & (N == (1 << bits) - 1) & ends, "a command of the largest count flushed")
    b.cover(busy & ends & accept & (shell.cmd.p.count != 0) & shell.step,
            "back to back: the next command and its first pair in the clock the flush ends")
    return b


def rans_decoder_counts_bench(core: str, mutant: str | None) -> Bench:
    """The rANS decoder shell's counts for every ``N`` (``decoder_counts`` of the rANS decoder: the
    composition's condition 3 for rANS, decoder side).

    :class:`~ansforge.hdl.rans.RansDecoderShell` of the small rANS decoder (built with 3-bit counts, no
    CRC) alone, its coder's side free: ``step`` in any clock where the shell runs the coder, the
    coder's ``state``, ``buffered``, ``pair_valid`` and ``word.ready`` free in every clock, commands and
    words offered in any clock, resets in any clock. The harness keeps, per command, its counts ``N``
    and ``Nw``, the pairs ``k`` decoded and the words ``t`` taken since it was accepted, the commands
    not yet reported, and whether the command whose report is decided decoded its ``N`` pairs.
    Asserted for every sequence: ``run`` only in the decode state while ``k < N``, and then always
    unless a previous report waits for its last pair (no early stop); every word of the command goes
    into the coder, into its state while the stream's top is loaded and on its word stream while it
    decodes, and none beyond ``Nw`` (``ended`` exactly when ``t = Nw``); no word reaches the coder
    outside those; one ``done`` per command accepted, and ``done`` with status ``OK`` only for a
    command that decoded exactly ``N`` pairs. With the shell's registers tied to the harness's counts
    (its ``probe``) the k-induction closes."""
    b = Bench(free_reset=True)
    m = b.m
    bits = 3
    W = SMALL["rans"]["word_bits"]
    shell = _rans_block(core, mutant, "shell", count_bits=bits)
    m.submodules.shell = elaborated_block(shell)
    pr = shell.probe
    for port in (shell.cmd.valid, shell.cmd.p, shell.i.valid, shell.i.p, shell.word.ready, shell.pair_valid,
                 shell.state, shell.buffered, shell.step):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    m.d.comb += Assume(~shell.step | shell.run)
    accept, take, fed = transfer_of(shell.cmd), transfer_of(shell.i), transfer_of(shell.word)
    held = pr.reporting & shell.pair_valid
    due = pr.reporting & ~shell.pair_valid           # the shell's done comes in the next clock
    # The clock the running command's report is decided (``finish`` in the shell, or a zero top word).
    fin = ((pr.decode & (pr.remaining == 0) & ~held)
           | (pr.init & ((pr.zero_top & ~held) | (take & pr.top & (shell.i.p.data == 0)))))
    led = CommandLedger(b, bits, shell.cmd, take, shell.step, shell.done, fin, due)
    N, Nw, k, t, pend_full = led.N, led.Nw, led.k, led.t, led.pend_full
    with m.If(shell.run):
        m.d.comb += Assert(pr.decode & (k != N), "run is high while the command has no pairs left")
    with m.If(pr.decode & ~accept & (k != N) & ~held):
        m.d.comb += Assert(shell.run, "run is low while the command has pairs left")
    with m.If(~pr.idle & ~accept):
        m.d.comb += Assert(shell.ended == (t == Nw), "ended is not 'every word of the command taken'")
    with m.If(take & ~accept):
        m.d.comb += Assert(~pr.idle & (t != Nw), "a word beyond the command's is taken")
    with m.If(pr.decode & ~accept):
        m.d.comb += [Assert(fed == take, "a word of the command does not go to the coder"),
                     Assert(shell.i.ready == (shell.word.ready & (t != Nw)), "a word the coder takes is not taken")]
    S = SMALL["rans"]["state_bits"]
    with m.If(take & pr.init & ~accept):
        m.d.comb += Assert(shell.load & (shell.load_state == Cat(shell.i.p.data, shell.state[:S - W])),
                           "a word of the stream's top does not go into the coder's state (x << W | word)")
    with m.If(take & accept):
        m.d.comb += Assert(shell.load & (shell.load_state == shell.i.p.data),
                           "the stream's top word, taken with its command, is not the coder's state")
    with m.If(~pr.decode):
        m.d.comb += Assert(~shell.word.valid, "a word goes to the coder outside a command's decoding")
    led.check_reports(shell.done, shell.status, pr.idle, pr.reporting, pr.drain | pr.check)
    # Auxiliary invariants: the shell's registers against the harness's counts.
    m.d.comb += Assert(~pr.init | (k == 0), "inv: no pair while the top is loaded")
    with m.If(~pr.idle):
        m.d.comb += Assert(pr.words_left == Nw - t, "inv: words_left")
    with m.If(pr.decode | pr.init):
        m.d.comb += Assert(pr.remaining == N - k, "inv: remaining")
    with m.If((pr.reporting | pr.drain | pr.check) & (pr.report == DecodeStatus.OK)):
        m.d.comb += Assert(pend_full, "inv: a waiting OK report is of a command that decoded its pairs")
    b.cover(shell.done & (shell.status == DecodeStatus.OK) & (N == (1 << bits) - 1),
            "a command of the largest count reported OK")
    b.cover(pr.decode & accept & (led.owed == 2), "back to back: a command accepted while the previous one's report waits")
    return b


def rans_encoder_pipeline_bench(core: str, mutant: str | None) -> Bench:
    """The rANS encoder's coder is the golden encoder for any history and timing (``encoder_pipeline`` of
    the rANS encoder: the composition's condition 1 for rANS).

    :class:`~ansforge.hdl.rans.RansEncoderCoder` of the small rANS encoder (``S = 16, W = 8, P = 8``, 4
    symbols, ``K = 2``: one chunk, a two-word output buffer) alone, as shipped (programmable), on an
    arbitrary legal symbol table (:class:`LegalTable`, the memory's constant contents, no writes),
    legal pairs offered in any clock (a symbol of the table and extra bits within its width: the golden
    model's contract), ``o.ready`` free, resets in any clock, and ``start``, ``run`` and ``flush`` as
    the shell gives them (one at a time). The harness runs the golden encoder of ``model/coding/rans.py``
    beside it: per pair taken, a push if the state's top bits reach the chunk's frequency ``2**(P - k)``,
    the chunk ``((x >> (P - k)) << P) | v << (P - k) | x mod 2**(P - k)``, a push if the top bits reach
    the symbol's ``f``, then ``x = (x // f) << P | (cum + x mod f)``; per flush word, the state's low
    word and ``x >>= W``; the queue of words pushed and not yet taken from ``o``. Asserted for every
    sequence: every word taken from ``o`` is the golden queue's next word, the coder's state is the
    golden state, and the divider divides the golden state after its pushes. The quotient and
    remainder are the coder's own divider's: with one more divider in the harness the induction does
    not finish (as the decoder's multiply); the step lemma ``encoder_step`` checks them against the
    golden step from every state. k-induction."""
    b = Bench(free_reset=True)
    m = b.m
    sh = SMALL["rans"]
    S, W, P = sh["state_bits"], sh["word_bits"], sh["precision_bits"]
    coder = _rans_block(core, mutant, "coder")
    table = _rans_symbol_table(b)
    m.submodules.coder = elaborated_block(coder)
    pr = coder.probe
    m.d.comb += [coder.cfg.valid.eq(0), coder.cfg.p.eq(0)]
    for port in (coder.i.valid, coder.i.p, coder.o.ready, coder.start, coder.run, coder.flush):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    take, out = transfer_of(coder.i), transfer_of(coder.o)
    sym, v = coder.i.p.symbol, coder.i.p.extra
    m.d.comb += [Assume((coder.start + coder.run + coder.flush) <= 1), Assume(~take | table.legal_pair(sym, v))]
    # The golden encoder's step for the pair offered.
    xs = Signal(S, name="golden_x")
    f, c, k = Array(table.freq)[sym], Array(table.cum)[sym], Array(table.k)[sym]
    keep = Signal(range(P + 1), name="golden_chunk_keep")      # the chunk's frequency is 2**keep
    m.d.comb += keep.eq(P - k)
    push_c = Signal(name="golden_push_chunk")
    m.d.comb += push_c.eq((xs >> (S - P)) >= (Const(1, P + 1) << keep))
    xa = Signal(S, name="golden_x_chunk_pushed")
    m.d.comb += xa.eq(Mux(push_c, xs >> W, xs))
    xc = Signal(S, name="golden_x_chunk")
    m.d.comb += xc.eq((((xa >> keep) << P) | (v << keep) | (xa & ((Const(1, P + 1) << keep) - 1)))[:S])
    push_s = Signal(name="golden_push_symbol")
    m.d.comb += push_s.eq((xc >> (S - P)) >= f)
    xp = Signal(S, name="golden_x_divided")
    m.d.comb += xp.eq(Mux(push_s, xc >> W, xc))
    x_next = Signal(S, name="golden_x_next")
    m.d.comb += x_next.eq((pr.quotient << P) | (c + pr.remainder))
    flush_word = Signal(name="golden_flush_word")       # a flush word leaves x this clock
    # The golden queue: g0 the next word out, g1 and g2 behind it.
    g = [Signal(W, name=f"golden_word{j}") for j in range(3)]
    gn = Signal(range(4), name="golden_words")
    left = Signal(range(4), name="golden_left")
    m.d.comb += left.eq(gn - out)
    kept = [Mux(out, g[j + 1], g[j]) if j < 2 else Mux(out, 0, g[j]) for j in range(3)]
    pushes = [(take & push_c, xs[:W]), (take & push_s, xc[:W]), (flush_word, xs[:W])]
    nxt_q = list(kept)
    pos = left
    for en, word in pushes:
        nxt_q = [Mux(en & (pos == j), word, nxt_q[j]) for j in range(3)]
        pos = pos + en
    with m.If(b.rst):
        m.d.past += [xs.eq(0), gn.eq(0)]
    with m.Else():
        m.d.past += [gn.eq(pos)] + [g[j].eq(nxt_q[j]) for j in range(3)]
        with m.If(coder.start):
            m.d.past += xs.eq(0)
        with m.Elif(take):
            m.d.past += xs.eq(x_next)
        with m.Elif(flush_word):
            m.d.past += xs.eq(xs >> W)
    # A flush word: while the flush is asked for, x is not 0 and the buffer has room.
    m.d.comb += flush_word.eq(coder.flush & (xs != 0) & (left < 2))
    m.d.comb += Assert(coder.state == xs, "the coder's state is not the golden encoder's")
    with m.If(take):
        m.d.comb += Assert(pr.dividend == xp, "the divider does not divide the golden state after its pushes")
    with m.If(out):
        m.d.comb += [Assert(gn != 0, "a word the golden encoder did not push"),
                     Assert(coder.o.p == g[0], "a word is not the golden encoder's next word")]
    fifo, n_out = pr.fifo, pr.n_out
    m.d.comb += [Assert(n_out == gn, "inv: the buffer holds the golden words"),
                 Assert((gn == 0) | (fifo[0] == g[0]), "inv: the first buffered word is the golden one"),
                 Assert((gn < 2) | (fifo[1] == g[1]), "inv: the second buffered word is the golden one"),
                 Assert(gn <= 2, "inv: at most two words held")]
    b.cover(take & push_c & push_s, "a pair pushing two words")
    b.cover(take & b.past(take, "took") & out, "back to back while a word is taken")
    b.cover(out & coder.flush & b.past(out & coder.flush, "flushing"), "two flush words in a row")
    return b


def _rans_block(core: str, mutant: str | None, block: str, **kw):
    """Block ``block`` (``"coder"`` or ``"shell"``) of a fresh small rANS ``core`` (programmable, the
    pinned table as its memories' initial contents), the core and
    its other block silenced: only that block goes into the harness."""
    cls = RansDecoder if core == "rans-decoder" else RansEncoder
    extra = {"block_crc": False} if core == "rans-decoder" else {}
    built = cls(**SMALL["rans"], programmable=True, table=pinned_rans_table(), **extra, **kw)
    blocks = built.blocks()
    unused_ok(built, *(other for name, other in blocks.items() if name != block))
    return blocks[block]


def _rans_symbol_table(b: Bench) -> "LegalTable":
    """An arbitrary legal rANS symbol table (:class:`LegalTable`) as the constant contents of the
    harness's rANS symbol memory (:class:`TablePlatform`, frozen: no write reaches it)."""
    P, n = SMALL["rans"]["precision_bits"], SMALL["rans"]["max_symbols"]
    table = LegalTable(b, "rans")
    b.platform = TablePlatform()
    b.platform.frozen.add("rans_symbol")
    b.platform.contents["rans_symbol"] = [Cat(table.freq[q], Mux(q < table.used, table.cum[q], 1 << P)[:P + 1],
                                              table.k[q]) for q in range(n)]
    return table


def rans_decoder_pipeline_bench(core: str, mutant: str | None) -> Bench:
    """The rANS decoder's coder is the golden decoder over its word queue, for any history and timing
    (``decoder_pipeline`` of the rANS decoder: the composition's condition 2 for rANS).

    :class:`~ansforge.hdl.rans.RansDecoderCoder` of the small rANS decoder (``S = 16, W = 8, P = 8``, 4
    symbols, ``K = 2``) alone, as shipped (programmable), its symbol table an arbitrary legal one
    (:class:`LegalTable`: 1 to 4 used symbols, frequencies summing to ``2**P``, extra widths up to
    ``K``; the memory's constant contents) and its bucket table arbitrary (any contents, and writes of
    any bucket row in any clock: the buckets only choose where the symbol search starts); loads of any
    state in any clock, words offered in any clock, ``run``, ``ended`` and ``o.ready`` free, resets in
    any clock. The environment is the shell's and a legal stream's: no word and no pair in a load's
    clock, no word once ``ended`` (which holds until the next load), pairs only after a load, and the
    first pair after a load only from a normalized state (``x >= 2**(S - W)``) unless the stream has no
    word left (``ended``, none held): a stream's top is loaded until it is normalized or its words run
    out (``composition`` checks these on the core); that the pairs keep the state so is asserted (the
    golden decoder's own invariant). The
    harness keeps the queue of words taken and not yet popped, the abstract state, and the pair owed
    on ``o``; at each pair it runs the golden decode step (``model/coding/rans.py``): the symbol whose
    ``[cum, cum + f)`` holds ``q = x mod 2**P``, ``x = (x >> P) f + q - cum``, a pop if ``x < 2**(S - W)``
    and a word is queued, the extra's ``k`` bits from the top of ``x mod 2**P``, removed, and a pop
    again. Asserted for every sequence: the coder's state is the abstract state, its buffer is the
    queue, every pair taken from ``o`` is the golden pair of its step (none lost, none twice), a pair
    never waits for a word that the golden decoder would not pop. k-induction."""
    b = Bench(free_reset=True)
    m = b.m
    sh = SMALL["rans"]
    S, W, P, K, n = sh["state_bits"], sh["word_bits"], sh["precision_bits"], sh["max_extra_bits"], sh["max_symbols"]
    lo = 1 << (S - W)
    coder = _rans_block(core, mutant, "coder")
    table = _rans_symbol_table(b)
    bucket_size = len(coder.cfg.p.data)                 # (wide enough for a bucket row: any bits)
    bkts = [Signal(bucket_size, name=f"bucket_row{j}") for j in range(1 << bucket_bits_for(P))]
    m.d.comb += [r.eq(AnyConst(bucket_size)) for r in bkts]
    b.platform.contents["rans_bucket"] = bkts
    m.submodules.coder = elaborated_block(coder)
    pr = coder.probe
    cfg = coder.cfg
    ib = max(_bits(n - 1), bucket_bits_for(P))
    m.d.comb += [cfg.valid.eq(AnySeq(1)), Value.cast(cfg.p).eq(AnySeq(len(Value.cast(cfg.p)))),
                 Assume(~cfg.valid | cfg.p.addr[ib])]      # bucket rows only
    for port in (coder.load, coder.load_state, coder.i.valid, coder.i.payload, coder.run, coder.ended, coder.o.ready):
        m.d.comb += port.eq(AnySeq(len(Value.cast(port))))
    # The shadow: the word queue (q0 the next word, q1 the one after), the abstract state, the pair owed.
    q0, q1 = Signal(W, name="queue0"), Signal(W, name="queue1")
    qn = Signal(range(3), name="queue_count")
    xs = Signal(S, name="abstract_state")
    m.d.comb += [Assume(~(coder.load & (coder.i.valid | coder.run))), Assume(~(coder.ended & coder.i.valid))]
    # ``ended`` holds until a load (the shell's word count of a stream only runs down). Decoding starts
    # from a normalized state, or from a stream with no word left (the shell's INIT ends so:
    # ``composition`` checks both on the core); the steps keep it so (asserted below).
    loaded, fresh, kept = load_tracker(b, coder)
    m.d.comb += Assume(~kept | coder.ended)
    normal = Signal(name="normalized_or_drained")
    m.d.comb += normal.eq((xs >= lo) | (coder.ended & (qn == 0)))
    m.d.comb += [Assume(~coder.run | loaded), Assume(~(coder.run & fresh) | normal)]
    # The golden decode step from xs.
    q = xs[:P]
    s = Signal(range(n), name="golden_symbol")
    m.d.comb += s.eq(sum((((j < table.used) & (q >= table.cum[j])).as_unsigned() for j in range(1, n)),
                         Const(0, len(s))))
    k = Array(table.k)[s]
    # The symbol step's product: the coder's own multiply-add (``(x >> P) f + q - cum`` with the entry it
    # read), once its symbol is asserted to be the golden one (below). Its arithmetic is the step
    # lemma's: ``decoder_step`` checks it against the golden step from every state (an independent
    # multiply by the solver: two multipliers side by side over a k-induction ran out of time).
    x1 = Signal(S, name="golden_x_symbol")
    m.d.comb += x1.eq(pr.x_symbol)
    pop1 = Signal(name="golden_pop1")
    m.d.comb += pop1.eq((x1 < lo) & (qn != 0))
    xv = Signal(S, name="golden_x_popped")
    m.d.comb += xv.eq(Mux(pop1, Cat(q0, x1)[:S], x1))
    keep = Signal(range(P + 1), name="golden_chunk_keep")     # P - k: the bits of q the chunk leaves
    m.d.comb += keep.eq(P - k)
    extra = Signal(K, name="golden_extra")
    m.d.comb += extra.eq(xv[:P] >> keep)
    xc = Signal(S, name="golden_x_chunk")
    m.d.comb += xc.eq((((xv >> P) << keep) | (xv & ((Const(1, P + 1) << keep) - 1)))[:S])
    pop2 = Signal(name="golden_pop2")
    m.d.comb += pop2.eq((xc < lo) & (qn > pop1))
    xn = Signal(S, name="golden_x_next")
    m.d.comb += xn.eq(Mux(pop2, Cat(Mux(pop1, q1, q0), xc)[:S], xc))
    popped = Signal(range(3), name="golden_popped")
    m.d.comb += popped.eq(pop1 + pop2)
    step, take, pop = coder.step, transfer_of(coder.i), transfer_of(coder.o)
    # The queue: a step pops its words, a taken word joins behind what is left.
    left = Signal(range(3), name="queue_left")
    m.d.comb += left.eq(qn - Mux(step, popped, 0))
    with m.If(b.rst):
        m.d.past += [qn.eq(0), xs.eq(0)]
    with m.Elif(coder.load):
        m.d.past += [qn.eq(0), xs.eq(coder.load_state)]
    with m.Else():
        m.d.past += qn.eq(left + take)
        with m.If(step):
            m.d.past += xs.eq(xn)
        rest0 = Mux(step & (popped == 1), q1, q0)
        with m.If(step & (popped != 0) | take & (left == 0)):
            m.d.past += q0.eq(Mux(left == 0, coder.i.payload, rest0))
        with m.If(take & (left == 1)):
            m.d.past += q1.eq(coder.i.payload)
    # The pair owed on o.
    owed = Signal(name="owed")
    e_sym, e_ext = Signal(range(n), name="owed_symbol"), Signal(K, name="owed_extra")
    with m.If(b.rst):
        m.d.past += owed.eq(0)
    with m.Else():
        m.d.past += owed.eq(step | (owed & ~pop))
        with m.If(step):
            m.d.past += [e_sym.eq(s), e_ext.eq(extra)]
    m.d.comb += Assert(coder.state == xs, "the coder's state is not the golden decoder's")
    # The golden decoder's own invariant, in the clocks a pair may be asked for: normalized, or the
    # stream has no word left (so that a pop never waits for a word below a state it should not pop from).
    with m.If(loaded & ~fresh & ~coder.load):
        m.d.comb += Assert(normal, "a pair leaves the state below 2**(S - W) while words remain")
    with m.If(step):
        m.d.comb += [Assert(~owed | pop, "a pair is decoded over one still owed"),
                     Assert(pr.sym == s, "a pair is decoded as another symbol than the golden one")]
    with m.If(pop):
        m.d.comb += [Assert(owed, "a pair on o that was not decoded"),
                     Assert((coder.o.p.symbol == e_sym) & (coder.o.p.extra == e_ext),
                            "a pair on o is not the golden decoder's")]
    # Auxiliary invariants: the buffer is the queue, o holds the owed pair.
    words, n_buf = pr.words, pr.n_buf
    m.d.comb += [Assert(qn <= 2, "inv: at most two words queued"),
                 Assert(n_buf == qn, "inv: the buffer holds the queue's words"),
                 Assert((qn == 0) | (words[0] == q0), "inv: the first buffered word is the queue's"),
                 Assert((qn != 2) | (words[1] == q1), "inv: the second buffered word is the queue's"),
                 Assert(coder.o.valid == owed, "inv: o holds the owed pair"),
                 Assert(~owed | (coder.o.p.symbol == e_sym) & (coder.o.p.extra == e_ext), "inv: o's pair")]
    fired = b.past(step, "stepped")
    held = b.past(coder.o.valid & ~coder.o.ready, "o_held")
    b.cover(step & fired & (popped != 0), "back to back, the second pair popping a word")
    b.cover(step & (popped == 2), "a pair popping two words (its symbol's and its extra's)")
    b.cover(pop & held & (e_ext != 0), "a pair with extra bits held under back-pressure, then taken")
    return b
