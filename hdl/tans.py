"""tANS decoder and encoder cores (§4.2, Table 3 "tANS Decoder/Encoder"), one coding pair per clock.

Both cores follow ``docs/bitstream.md`` bit for bit; :class:`~ansforge.model.tans.TansCoder` is their
golden model. Their tables come from one :class:`~ansforge.model.tans.TansTable`: either baked into
``Memory(init=...)`` (``programmable=False``) or written at run time through the ``cfg`` streams, whose
write sequences :func:`tans_decoder_writes` / :func:`tans_encoder_writes` derive from the same object.

Tables are read with combinational ports (LUTRAM on an FPGA): the state drives the read address and
the entry is used in the same cycle, which is what makes one pair per clock possible; the critical
path is table read → field shifter → next state.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from ..model.tans import TansTable
from .common import (BlockCrc, CoreParameters, DecodeStatus, TableSelect, bits_for, check_bool, check_int,
                     decoder_ports, encoder_ports, table_select_layout)

__all__ = ["TansDecoder", "TansEncoder", "tans_decoder_writes", "tans_encoder_writes"]


def _thermometer(n, width: int):
    """``(1 << n) - 1`` as ``width`` bits: bit ``i`` set when ``i < n`` (a mask without a shifter)."""
    return Cat(*(n > i for i in range(width))) if width else Const(0, 1)


class _TansShape:
    """Validated parameters of a tANS core and the widths derived from them."""

    def __init__(self, table_log, word_bits, max_symbols, max_extra_bits, table, programmable, table_sets=1):
        self.R = check_int("table_log", table_log, 5, 12)
        self.sets = check_int("table_sets", table_sets, 1, 16)
        if self.sets > 1 and not programmable:
            raise ValueError(f"table_sets={self.sets} needs programmable=True (the sets are written through cfg)")
        self.set_bits = bits_for(self.sets - 1) if self.sets > 1 else 0
        self.W = check_int("word_bits", word_bits, 8, 32)
        self.max_symbols = check_int("max_symbols", max_symbols, 2, 256)
        self.K = check_int("max_extra_bits", max_extra_bits, 0, 32)
        check_bool("programmable", programmable)
        if table is None and not programmable:
            raise ValueError("table is required unless programmable=True (a fixed-table core bakes it in)")
        if table is not None:
            if not isinstance(table, TansTable):
                raise TypeError(f"table must be a model.tans.TansTable, not {type(table).__name__}")
            if table.params.table_log != self.R:
                raise ValueError(f"table has table_log {table.params.table_log}, the core {self.R}")
            if table.freqs.size > self.max_symbols:
                raise ValueError(f"table has {table.freqs.size} symbols, more than max_symbols={self.max_symbols}")
            if int(table.extra_bits.max()) > self.K:
                raise ValueError(f"table needs {int(table.extra_bits.max())} extra bits, "
                                 f"more than max_extra_bits={self.K}")
        self.table = table
        self.programmable = programmable
        self.L = 1 << self.R
        self.symbol_bits = bits_for(self.max_symbols - 1)
        self.need_max = self.R + self.K  # widest field a pair reads or writes


def tans_decoder_writes(table: TansTable, table_set: int = 0) -> list[dict]:
    """The ``cfg`` write sequence that loads ``table`` into a programmable :class:`TansDecoder`, as
    table set ``table_set`` (its entries live at ``table_set << R | state``)."""
    base = table_set << table.params.table_log
    return [{"addr": base | x, "data": {"symbol": int(r[0]), "nb": int(r[1]), "base": int(r[2]), "k": int(r[3])}}
            for x, r in enumerate(table.decoder_entries())]


def tans_encoder_writes(table: TansTable, table_set: int = 0, max_symbols: int | None = None
                        ) -> tuple[list[dict], list[dict]]:
    """The ``sym_cfg`` and ``state_cfg`` write sequences that load ``table`` into a :class:`TansEncoder`
    as table set ``table_set`` (symbol entries at ``table_set * max_symbols + symbol``, with
    ``max_symbols`` the core's power-of-two symbol slots; state entries at ``table_set << R | slot``)."""
    sym_base = table_set * (max_symbols or 0)
    state_base = table_set << table.params.table_log
    sym = [{"addr": sym_base + s, "data": {"freq": int(r[0]), "cum": int(r[1]), "nb_high": int(r[2]),
                                           "threshold": int(r[3]), "k": int(r[4])}}
           for s, r in enumerate(table.encoder_entries())]
    state = [{"addr": state_base | i, "data": int(v)} for i, v in enumerate(table.encode_state)]
    return sym, state


class _TansCore(CoreParameters):
    """Read-only parameters shared by the tANS cores."""

    @property
    def table_log(self) -> int:
        return self._shape.R


class TansDecoder(_TansCore):
    """tANS decoder: words (top of stack first) in, coding pairs out, one pair per clock.

    Parameters
    ----------
    table_log : int
        ``R``, 5..12; ``2**R`` states (the paper: 8).
    word_bits : int
        ``W``, 8..32 (the paper: 16).
    max_symbols : int
        Alphabet size the core is built for, 2..256 (the paper: 64).
    max_extra_bits : int
        Widest additional data of a symbol, 0..32 (the paper: 8; an escape symbol adds its index).
    table : TansTable or None
        The table to bake in, or the default of a programmable core (``None``: all zero).
    programmable : bool
        Add the ``cfg`` write stream for the state table.
    block_crc : bool
        Build the :class:`~.common.BlockCrc` unit that checks a command's ``crc`` (default). Without
        it (the paper's core has none) ``check_crc`` is ignored.
    table_sets : int
        Table sets held at once, 1..16 (context tables; more than 1 needs ``programmable``). The
        state table grows to ``table_sets · 2**R`` entries, addressed ``set << R | state``.

    Ports
    -----
    cmd : In(stream)
        :func:`~.common.decoder_command_layout` with ``state`` of ``R`` bits (the state *index*).
    i : In(stream)
        ``W``-bit words, top of stack first; ``last`` is ignored (the command counts words).
    o : Out(stream)
        ``{symbol, extra}``: the golden decoder's symbols and additional data.
    done, status : Out
        ``done`` rises one cycle after a command has finished and its stream is drained (the
        cycle in which :class:`~.common.BlockCrc` compares the words' CRC-32 with the command's
        ``crc``); ``status`` (:class:`~.common.DecodeStatus`) is then valid. Both hold until the next
        command. Every command ends: after at most ``count`` pairs plus ``words`` accepted words
        plus a constant, whatever the words hold.
    cfg : In(stream), programmable cores only
        ``{addr: R (+ set) bits, data: {symbol, nb, base, k}}`` writes to the state table (accepted
        when idle).
    sel : In(stream), cores with ``table_sets > 1``
        :func:`~.common.table_select_layout` runs: the next ``count`` pairs use table set ``set``
        (:class:`~.common.TableSelect`; a switch costs no cycle).

    The bit buffer holds ``2 (R + K) + W - 1`` bits and takes a word whenever ``W`` bits are free, so
    that at least ``R + K`` bits are buffered before every pair: no bubbles while words arrive at
    the average rate. Latency: a pair is on ``o`` in the cycle after its bits are buffered.
    """

    def __init__(self, *, table_log: int = 8, word_bits: int = 16, max_symbols: int = 64,
                 max_extra_bits: int = 8, table: TansTable | None = None, programmable: bool = False,
                 block_crc: bool = True, table_sets: int = 1):
        sh = _TansShape(table_log, word_bits, max_symbols, max_extra_bits, table, programmable, table_sets)
        self._shape = sh
        self._block_crc = check_bool("block_crc", block_crc)
        self._entry = data.StructLayout({"symbol": sh.symbol_bits, "nb": bits_for(sh.R), "base": sh.R,
                                         "k": bits_for(sh.K)})
        self._buffer_bits = 2 * sh.need_max + sh.W - 1
        ports = decoder_ports(sh.R, bits_for(sh.W - 1), sh.W, sh.symbol_bits, sh.K)
        if programmable:
            ports["cfg"] = In(stream.Signature(data.StructLayout({"addr": sh.R + sh.set_bits, "data": self._entry})))
        if sh.sets > 1:
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        super().__init__(ports)

    @property
    def buffer_bits(self) -> int:
        """Width of the bit buffer."""
        return self._buffer_bits

    def elaborate(self, platform):
        sh = self._shape
        R, W, B = sh.R, sh.W, self._buffer_bits
        m = Module()

        init = [] if sh.table is None else [r["data"] for r in tans_decoder_writes(sh.table)]
        m.submodules.states = states = Memory(shape=self._entry, depth=sh.L * sh.sets, init=init)
        entry_port = states.read_port(domain="comb")
        entry = entry_port.data
        select = None
        if sh.sets > 1:
            pair_fire = Signal()
            m.d.comb += pair_fire.eq(self.o.valid & self.o.ready)
            select = TableSelect(m, self.sel, pair_fire)

        x = Signal(R)                       # state index
        buf = Signal(B)                     # the next bit to read is buf[cnt - 1]
        cnt = Signal(range(B + 1))
        remaining = Signal.like(self.cmd.p.count)
        words_left = Signal.like(self.cmd.p.words)
        check_end = Signal()
        m.d.comb += entry_port.addr.eq(x if select is None else Cat(x, select.set))

        # The field of ``need`` bits below ``cnt``: extra bits high, next-state bits low.
        need = Signal(range(sh.need_max + 1))
        field = Signal(sh.need_max)
        m.d.comb += field.eq((buf >> (cnt - need)[:len(cnt)]) & _thermometer(need, sh.need_max))

        take_word = Signal()
        consumed = Signal(range(sh.need_max + 1))
        m.d.comb += take_word.eq(self.i.valid & self.i.ready)
        with m.If(take_word):
            m.d.sync += words_left.eq(words_left - 1)

        def refill(allowed):
            """Take a word into the buffer below the buffered bits when ``W`` bits are free."""
            m.d.comb += self.i.ready.eq(allowed & (words_left != 0) & (cnt <= B - W))
            with m.If(take_word):
                m.d.sync += buf.eq(Cat(self.i.p.data, buf))
            m.d.sync += cnt.eq(cnt - consumed + Mux(take_word, W, 0))

        def finish(status):
            m.d.sync += self.status.eq(status)
            m.next = "DRAIN"

        if sh.programmable:
            wr = states.write_port()
            m.d.comb += [wr.addr.eq(self.cfg.p.addr), wr.data.eq(self.cfg.p.data)]
        block_crc = BlockCrc(m, W, self.cmd, self.i, present=self._block_crc)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                if sh.programmable:
                    m.d.comb += [self.cfg.ready.eq(1), wr.en.eq(self.cfg.valid)]
                with m.If(self.cmd.valid):
                    c = self.cmd.p
                    m.d.sync += [remaining.eq(c.count), words_left.eq(c.words), check_end.eq(c.check_end),
                                 cnt.eq(0), x.eq(c.state), self.done.eq(0), self.status.eq(DecodeStatus.OK)]
                    with m.If(~c.resume):
                        m.next = "MARKER"
                    with m.Elif(c.bit != 0):
                        m.d.sync += cnt.eq(c.bit)
                        m.next = "PARTIAL"
                    with m.Else():
                        m.next = "DECODE"

            with m.State("MARKER"):
                # The top word: its highest set bit is the marker, the bits below it are stream bits.
                m.d.comb += self.i.ready.eq(words_left != 0)
                top = Signal(range(W))
                for b in range(W):
                    with m.If(self.i.p.data[b]):
                        m.d.comb += top.eq(b)
                with m.If(words_left == 0):
                    finish(DecodeStatus.OUT_OF_WORDS)
                with m.Elif(take_word):
                    m.d.sync += [buf.eq(self.i.p.data), cnt.eq(top)]
                    with m.If(self.i.p.data == 0):
                        finish(DecodeStatus.NO_MARKER)
                    with m.Else():
                        m.next = "STATE"

            with m.State("PARTIAL"):
                # A checkpoint's first word: only its low ``bit`` bits (already in ``cnt``) are unread.
                m.d.comb += self.i.ready.eq(words_left != 0)
                with m.If(words_left == 0):
                    finish(DecodeStatus.OUT_OF_WORDS)
                with m.Elif(take_word):
                    m.d.sync += buf.eq(self.i.p.data)
                    m.next = "DECODE"

            with m.State("STATE"):
                m.d.comb += need.eq(R)
                with m.If(cnt >= R):
                    m.d.comb += consumed.eq(R)
                    m.d.sync += x.eq(field[:R])
                    m.next = "DECODE"
                with m.Elif(words_left == 0):
                    finish(DecodeStatus.OUT_OF_WORDS)
                refill(1)

            with m.State("DECODE"):
                m.d.comb += need.eq(entry.nb + entry.k)
                can_decode = (remaining != 0) & (cnt >= need)
                m.d.comb += [
                    self.o.valid.eq(can_decode if select is None else can_decode & select.ready),
                    self.o.p.symbol.eq(entry.symbol),
                    self.o.p.extra.eq(field >> entry.nb),
                ]
                with m.If(self.o.valid & self.o.ready):
                    m.d.comb += consumed.eq(need)
                    m.d.sync += [x.eq(entry.base + (field & _thermometer(entry.nb, R))),
                                 remaining.eq(remaining - 1)]
                with m.If(remaining == 0):
                    with m.If(~check_end):
                        finish(DecodeStatus.OK)
                    with m.Elif(x != 0):
                        finish(DecodeStatus.FINAL_STATE)
                    with m.Elif((cnt != 0) | (words_left != 0)):
                        finish(DecodeStatus.TRAILING_DATA)
                    with m.Else():
                        finish(DecodeStatus.OK)
                starved = (cnt < need) & (words_left == 0)
                with m.Elif(starved if select is None else starved & select.ready):
                    finish(DecodeStatus.OUT_OF_WORDS)
                refill(remaining != 0)

            with m.State("DRAIN"):
                # Discard the rest of the command's words so that the next command starts clean.
                m.d.comb += self.i.ready.eq(words_left != 0)
                with m.If((words_left == 0) | ((words_left == 1) & take_word)):
                    m.d.sync += cnt.eq(0)
                    m.next = "CHECK"

            with m.State("CHECK"):
                block_crc.check(self.status, self.done)
                m.next = "IDLE"
        return m


class TansEncoder(_TansCore):
    """tANS encoder: coding pairs in (back to front), words out in push order, one pair per clock.

    Parameters are those of :class:`TansDecoder` (no ``block_crc``).

    Ports
    -----
    cmd : In(stream)
        :func:`~.common.encoder_command_layout`: encode ``count`` pairs from state ``L``, then write
        the final state index and the marker bit and flush (``docs/bitstream.md``).
    i : In(stream)
        ``{symbol, extra}``, the command's pairs from the last to the first; with ``table_sets > 1``
        also ``set``, the table set that codes the pair (switches cost no cycle).
    o : Out(stream)
        ``W``-bit words in push order; ``last`` marks the command's final (partial) word.
    done : Out
        Rises after the final word; holds until the next command.
    sym_cfg, state_cfg : In(stream), programmable cores only
        Writes ``{addr, data}`` to the symbol table (``freq, cum, nb_high, threshold, k``; address
        ``set · 2**symbol_bits + symbol``) and to the encode-state table (``set << R | slot``);
        accepted when idle.

    Both tables are read combinationally: symbol → its entry → next-state slot → encode-state table,
    all in the pair's cycle. The bit accumulator holds ``W + 2 (R + K) - 1`` bits, enough that a pair
    is taken every cycle while ``o`` is ready.
    """

    def __init__(self, *, table_log: int = 8, word_bits: int = 16, max_symbols: int = 64,
                 max_extra_bits: int = 8, table: TansTable | None = None, programmable: bool = False,
                 table_sets: int = 1):
        sh = _TansShape(table_log, word_bits, max_symbols, max_extra_bits, table, programmable, table_sets)
        self._shape = sh
        R = sh.R
        self._sym_entry = data.StructLayout({"freq": R + 1, "cum": R, "nb_high": bits_for(R),
                                             "threshold": R + 2, "k": bits_for(sh.K)})
        self._buffer_bits = sh.W + 2 * sh.need_max - 1
        ports = encoder_ports(sh.W, sh.symbol_bits, sh.K, sh.set_bits)
        if programmable:
            ports["sym_cfg"] = In(stream.Signature(data.StructLayout(
                {"addr": sh.symbol_bits + sh.set_bits, "data": self._sym_entry})))
            ports["state_cfg"] = In(stream.Signature(data.StructLayout({"addr": R + sh.set_bits, "data": R})))
        super().__init__(ports)

    def elaborate(self, platform):
        sh = self._shape
        R, W, L, B = sh.R, sh.W, sh.L, self._buffer_bits
        m = Module()

        if sh.table is None:
            sym_init, state_init = [], []
        else:
            sym_w, state_w = tans_encoder_writes(sh.table)
            sym_init, state_init = [r["data"] for r in sym_w], [r["data"] for r in state_w]
        m.submodules.symbols = symbols = Memory(shape=self._sym_entry, depth=sh.sets << sh.symbol_bits,
                                                init=sym_init)
        m.submodules.states = states = Memory(shape=R, depth=L * sh.sets, init=state_init)
        sym_port = symbols.read_port(domain="comb")
        state_port = states.read_port(domain="comb")
        e = sym_port.data

        X = Signal(R + 1, init=L)            # encoder state in [L, 2L)
        acc = Signal(B)                      # bits not yet in a word, oldest at bit 0
        cnt = Signal(range(B + 1))
        remaining = Signal.like(self.cmd.p.count)

        n_out = Signal(range(R + 1))
        m.d.comb += n_out.eq(e.nb_high - (X < e.threshold))
        if sh.sets > 1:
            slot = Signal(R)
            m.d.comb += [slot.eq(e.cum + (X >> n_out) - e.freq),
                         sym_port.addr.eq(Cat(self.i.p.symbol, self.i.p.set)),
                         state_port.addr.eq(Cat(slot, self.i.p.set))]
        else:
            m.d.comb += [sym_port.addr.eq(self.i.p.symbol),
                         state_port.addr.eq(e.cum + (X >> n_out) - e.freq)]
        # The pair's bits: n_out low bits of X, then its additional data above them.
        pair_bits = Signal(sh.need_max)
        pair_len = Signal(range(sh.need_max + 1))
        m.d.comb += [
            pair_bits.eq((X & _thermometer(n_out, R + 1)) | ((self.i.p.extra & _thermometer(e.k, sh.K)) << n_out)),
            pair_len.eq(n_out + e.k),
        ]

        add_bits = Signal(sh.need_max)
        add_len = Signal(range(sh.need_max + 1))
        emit = Signal()
        flushing = Signal()
        m.d.comb += [
            self.o.valid.eq((cnt >= W) | (flushing & (cnt != 0))),
            self.o.p.data.eq(acc[:W]),
            self.o.p.last.eq(flushing & (cnt <= W)),
            emit.eq(self.o.valid & self.o.ready),
        ]
        merged = Signal(B)
        m.d.comb += merged.eq(acc | (add_bits << cnt))
        with m.If(emit):
            m.d.sync += acc.eq(merged >> W)
            with m.If(cnt >= W):
                m.d.sync += cnt.eq(cnt + add_len - W)
            with m.Else():
                m.d.sync += cnt.eq(add_len)
        with m.Else():
            m.d.sync += [acc.eq(merged), cnt.eq(cnt + add_len)]

        if sh.programmable:
            sym_wr, state_wr = symbols.write_port(), states.write_port()
            m.d.comb += [sym_wr.addr.eq(self.sym_cfg.p.addr), sym_wr.data.eq(self.sym_cfg.p.data),
                         state_wr.addr.eq(self.state_cfg.p.addr), state_wr.data.eq(self.state_cfg.p.data)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                if sh.programmable:
                    m.d.comb += [self.sym_cfg.ready.eq(1), sym_wr.en.eq(self.sym_cfg.valid),
                                 self.state_cfg.ready.eq(1), state_wr.en.eq(self.state_cfg.valid)]
                with m.If(self.cmd.valid):
                    m.d.sync += [remaining.eq(self.cmd.p.count), X.eq(L), self.done.eq(0)]
                    m.next = "ENCODE"
            with m.State("ENCODE"):
                m.d.comb += self.i.ready.eq((remaining != 0) & (cnt <= B - sh.need_max))
                with m.If(self.i.valid & self.i.ready):
                    m.d.comb += [add_bits.eq(pair_bits), add_len.eq(pair_len)]
                    m.d.sync += [X.eq(L | state_port.data), remaining.eq(remaining - 1)]
                with m.If(remaining == 0):
                    m.next = "FINAL"
            with m.State("FINAL"):
                # Final state index and the marker bit above it: X itself, R + 1 bits.
                with m.If(cnt <= B - (R + 1)):
                    m.d.comb += [add_bits.eq(X), add_len.eq(R + 1)]
                    m.next = "FLUSH"
            with m.State("FLUSH"):
                m.d.comb += flushing.eq(1)
                with m.If((cnt == 0) | (emit & (cnt <= W))):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
        return m
