"""Pieces the four ANS cores share: status codes, stream payload layouts, parameter checks.

Word streams carry words in *stack order as the core needs them*: an encoder emits words in push
order (``docs/bitstream.md``), a decoder takes them top of stack first, i.e. the encoder's words
reversed. Every core runs *commands*: one command codes ``count`` pairs, and for a decoder names how
many words its stream has, so that the core knows where the stream ends without a side band and can
drain a stream it rejects (the next command then starts on a word boundary).
"""

from __future__ import annotations

import functools
import numbers

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import crc, data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["DecodeStatus", "decoder_ports", "encoder_ports", "check_int", "word_layout", "encoder_command_layout", "decoder_command_layout",
           "pair_layout", "table_select_layout", "TableSelect", "bits_for", "check_bool", "COUNT_BITS", "BlockCrc", "CoreParameters", "WordCrc",
           "core_codec", "connect_block_crc", "crc_checked"]

COUNT_BITS = 32
"""Width of a command's pair and word counts: up to 2**32 - 1 pairs per command."""


class DecodeStatus(enum.Enum, shape=3):
    """Outcome of a decoder command, on the core's ``status`` output (valid while ``done`` is high).

    A corrupt stream ends in one of the error codes within a bounded number of cycles (at most
    ``count`` pairs plus the stream's ``words``); the core then drains what is left of the stream.
    """

    OK = 0
    NO_MARKER = 1       #: tANS: the top word holds no marker bit (it is zero)
    OUT_OF_WORDS = 2    #: the stream ended before ``count`` pairs were decoded
    FINAL_STATE = 3     #: after the last pair the state is not the encoder's initial state
    TRAILING_DATA = 4   #: after the last pair, bits or words of the stream are left unread
    ZERO_TOP_WORD = 5   #: rANS: the top word is zero (an encoder never pushes one)
    CRC = 6             #: a block's CRC-32 does not match its words


def check_int(name: str, value, lo: int, hi: int) -> int:
    """``value`` as an int in ``[lo, hi]``, or ``TypeError``/``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, not {value!r}")
    return int(value)


def check_bool(name: str, value) -> bool:
    """``value`` if it is a bool, else ``TypeError`` naming ``name``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {value!r}")
    return value


def check_core_table(table, table_type: type, field: str, core_value: int, *, table_sets, programmable,
                     max_symbols, max_extra_bits) -> tuple[int, int, int, int]:
    """A core's table parameters checked, each error naming its argument: ``(table sets, set-select bits,
    max_symbols, max_extra_bits)``. ``table`` (``None`` for a programmable core) must be a ``table_type``
    whose ``params.<field>`` equals the core's ``core_value`` and which fits the core's alphabet and
    additional-data width."""
    sets = check_int("table_sets", table_sets, 1, 16)
    if sets > 1 and not programmable:
        raise ValueError(f"table_sets={sets} needs programmable=True (the sets are written through cfg)")
    max_symbols = check_int("max_symbols", max_symbols, 2, 256)
    k = check_int("max_extra_bits", max_extra_bits, 0, 32)
    check_bool("programmable", programmable)
    if table is None and not programmable:
        raise ValueError("table is required unless programmable=True (a fixed-table core bakes it in)")
    if table is not None:
        if not isinstance(table, table_type):
            raise TypeError(f"table must be a model.{table_type.__module__.rsplit('.', 1)[-1]}.{table_type.__name__}, "
                            f"not {type(table).__name__}")
        if getattr(table.params, field) != core_value:
            raise ValueError(f"table has {field} {getattr(table.params, field)}, the core {core_value}")
        if table.freqs.size > max_symbols:
            raise ValueError(f"table has {table.freqs.size} symbols, more than max_symbols={max_symbols}")
        if int(table.extra_bits.max()) > k:
            raise ValueError(f"table needs {int(table.extra_bits.max())} extra bits, more than max_extra_bits={k}")
    return sets, bits_for(sets - 1) if sets > 1 else 0, max_symbols, k


def bits_for(n: int) -> int:
    """Bits of an unsigned field that holds ``0 .. n``."""
    return max(1, int(n).bit_length())


def word_layout(word_bits: int) -> data.StructLayout:
    """A stream word; ``last`` marks an encoder's final word of a command (decoders ignore it)."""
    return data.StructLayout({"data": word_bits, "last": 1})


def pair_layout(symbol_bits: int, extra_bits: int, set_bits: int = 0) -> data.StructLayout:
    """A coding pair as the golden models see it: symbol index and its additional data (LSB-aligned);
    with ``set_bits``, also the table set that codes it (an encoder's side-band select)."""
    fields = {"symbol": symbol_bits, "extra": max(1, extra_bits)}
    if set_bits:
        fields["set"] = set_bits
    return data.StructLayout(fields)


def table_select_layout(set_bits: int) -> data.StructLayout:
    """A decoder's table-set run: the next ``count`` pairs are decoded with table set ``set``."""
    return data.StructLayout({"set": set_bits, "count": COUNT_BITS})


class TableSelect(wiring.Component):
    """The table-set select of a decoder with several table sets (context tables).

    Runs ``{set, count}`` arrive on ``sel`` (:func:`table_select_layout`), independent of commands:
    pairs are decoded with ``set`` while the current run lasts. ``fire`` says a pair is decoded this
    clock; the next run is taken in the clock that decodes the last pair of the current one, so a
    switch costs no clock when ``sel`` is valid. ``set`` (``set_bits``) is a register, so that it
    drives table addresses without adding to the critical path; ``ready`` says a pair may be decoded
    now (a run has pairs left).
    """

    def __init__(self, set_bits: int):
        super().__init__({"sel": In(stream.Signature(table_select_layout(set_bits))), "fire": In(1),
                          "set": Out(set_bits), "ready": Out(1)})

    def elaborate(self, platform):
        m = Module()
        left = Signal(COUNT_BITS, name="run_left")
        m.d.comb += [self.ready.eq(left != 0),
                     self.sel.ready.eq((left == 0) | ((left == 1) & self.fire))]
        with m.If(self.fire):
            m.d.sync += left.eq(left - 1)
        with m.If(self.sel.valid & self.sel.ready):
            m.d.sync += [self.set.eq(self.sel.p.set), left.eq(self.sel.p.count)]
        return m


def encoder_command_layout(count_bits: int = COUNT_BITS) -> data.StructLayout:
    """Encode ``count`` pairs (given back to front) into one stream, then flush the final state."""
    return data.StructLayout({"count": count_bits})


def decoder_command_layout(state_bits: int, bit_bits: int, count_bits: int = COUNT_BITS) -> data.StructLayout:
    """Decode ``count`` pairs from a stream of ``words`` words.

    ``resume`` = 0 starts at the top of a stream (tANS: marker, then the final state; rANS: pop the
    state). ``resume`` = 1 starts at a random-access checkpoint: ``state`` is its state and ``bit`` the
    number of low bits of the first word still unread (tANS; 0 means the first word is whole).
    ``check_end`` = 1 checks, after the last pair, the initial state and that every word was read.
    ``check_crc`` = 1 checks that the CRC-32 of the command's ``words`` words, in the order they
    arrive, is ``crc`` (a container block's CRC, :func:`~ansforge.model.coding.stream.block_crc`).
    ``count_bits`` is the width of ``count`` and ``words`` (default :data:`COUNT_BITS`).
    """
    return data.StructLayout({"count": count_bits, "words": count_bits, "resume": 1, "check_end": 1,
                              "state": state_bits, "bit": bit_bits, "check_crc": 1, "crc": 32})


def decoder_ports(state_bits: int, bit_bits: int, word_bits: int, symbol_bits: int, extra_bits: int,
                  count_bits: int = COUNT_BITS) -> dict:
    """Signature members every decoder has: ``cmd``, ``i`` (words), ``o`` (pairs), ``done``, ``status``."""
    return {"cmd": In(stream.Signature(decoder_command_layout(state_bits, bit_bits, count_bits))),
            "i": In(stream.Signature(word_layout(word_bits))),
            "o": Out(stream.Signature(pair_layout(symbol_bits, extra_bits))),
            "done": Out(1),
            "status": Out(DecodeStatus)}


def encoder_ports(word_bits: int, symbol_bits: int, extra_bits: int, set_bits: int = 0,
                  count_bits: int = COUNT_BITS) -> dict:
    """Signature members every encoder has: ``cmd``, ``i`` (pairs, back to front, with their table set
    when ``set_bits``), ``o`` (words), ``done``."""
    return {"cmd": In(stream.Signature(encoder_command_layout(count_bits))),
            "i": In(stream.Signature(pair_layout(symbol_bits, extra_bits, set_bits))),
            "o": Out(stream.Signature(word_layout(word_bits))),
            "done": Out(1)}


def core_codec(codec_cls, codec, states: tuple[int, ...] = (1,), **loose):
    """The codec a core is built for: ``codec`` (an instance of ``codec_cls``), or, when it is ``None``,
    one made from the ``loose`` keyword arguments that are not ``None`` (``codec_cls.of``: the codec's
    one validation, which names the bad parameter). Giving both is a ``TypeError``. A codec of
    interleaved states other than ``states`` (those the core decodes) is refused here, where every core
    takes its codec (``ConfigError``)."""
    given = {k: v for k, v in loose.items() if v is not None}
    if codec is None:
        return codec_cls.of(**given)
    if not isinstance(codec, codec_cls):
        raise TypeError(f"codec must be a {codec_cls.__name__}, not {codec!r}")
    if given:
        raise TypeError(f"give the codec or {', '.join(given)}, not both")
    codec.hardware_check(states)
    return codec


class CoreParameters(wiring.Component):
    """Read-only elaboration parameters every ANS core has (its validated ``_shape`` holds them).

    A core whose constructor refuses its parameters (``ValueError``, ``ConfigError``, ...) raises that
    error alone: the half-built object is not reported later as an unused elaboratable."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def refusing(self, *args, **kw):
            try:
                init(self, *args, **kw)
            except Exception:
                self._MustUse__silence = True
                raise
        cls.__init__ = refusing

    @property
    def codec(self):
        """The codec object the core implements (:class:`~ansforge.model.coding.codecs.TansCodec` or
        :class:`~ansforge.model.coding.codecs.RansCodec`)."""
        return self._shape.codec

    @property
    def symbol_bits(self) -> int:
        """Width of a pair's symbol field: ``bits_for(max_symbols - 1)``."""
        return self._shape.symbol_bits

    @property
    def word_bits(self) -> int:
        return self._shape.W

    @property
    def max_symbols(self) -> int:
        return self._shape.max_symbols

    @property
    def max_extra_bits(self) -> int:
        return self._shape.K

    @property
    def programmable(self) -> bool:
        return self._shape.programmable

    @property
    def table_sets(self) -> int:
        """Table sets held at once (context tables); more than 1 adds the decoder's ``sel`` port
        and the encoder's pair ``set`` field."""
        return self._shape.sets

    @property
    def block_crc(self) -> bool:
        """Whether a decoder has the CRC-32 unit (encoders: ``False``)."""
        return getattr(self, "_block_crc", False)


class WordCrc(wiring.Component):
    """A CRC over ``W``-bit words, one word per clock: the algorithm of :mod:`amaranth.lib.crc`.

    The register update is linear over GF(2), ``r' = F r ^ G d``; the columns of ``F`` and ``G``
    are taken from the library's own software model (:meth:`amaranth.lib.crc.Parameters.compute`
    of unit vectors, with the output reflection and XOR left off), and each register bit is the
    parity of two masked vectors. The logic is the library processor's; written as masked
    reductions it simulates about three times faster in Verilator than the library's bit-by-bit
    XOR chains.

    Ports: ``start`` (re-initialise; a word ``valid`` in the same cycle is the first of the new CRC),
    ``valid`` + ``data`` (add a word), ``crc`` (the algorithm's output value for the words added so
    far, one cycle after the last ``valid``). With ``zeros_first = z``, ``alt`` at ``start`` starts from
    the register value that ``z`` zero data bits lead to the initial value instead: the CRC of words
    whose first ``z`` bits are zeros that do not count (the rANS decoder's pad half).
    """

    def __init__(self, algorithm: crc.Algorithm, data_width: int, *, zeros_first: int = 0):
        self._alg, self._w, self._z = algorithm, data_width, zeros_first
        ports = {"start": In(1), "valid": In(1), "data": In(data_width), "crc": Out(algorithm.crc_width)}
        if zeros_first:
            ports["alt"] = In(1)
        super().__init__(ports)

    def _init_before_zeros(self) -> int:
        """The register value from which ``zeros_first`` zero bits lead to the algorithm's initial
        value (the update with zero data is invertible): a start with ``alt`` then gives the CRC of
        the words after those zero bits, whatever they are."""
        n, a, z = self._alg.crc_width, self._alg, self._z
        raw = crc.Algorithm(crc_width=n, polynomial=a.polynomial, initial_crc=0, reflect_input=a.reflect_input,
                            reflect_output=False, xor_output=0)(data_width=z)
        cols = []
        for j in range(n):
            raw_j = crc.Algorithm(crc_width=n, polynomial=a.polynomial, initial_crc=1 << j,
                                  reflect_input=a.reflect_input, reflect_output=False, xor_output=0)(data_width=z)
            cols.append(raw_j.compute([0]) ^ raw.compute([0]))
        # Solve sum(x_j cols[j]) = initial over GF(2): Gaussian elimination on (column, selector) pairs.
        rows, target = [(c, 1 << j) for j, c in enumerate(cols)], a.initial_crc
        basis = {}
        for c, sel in rows:
            for bit in reversed(range(n)):
                if not c >> bit & 1:
                    continue
                if bit in basis:
                    c, sel = c ^ basis[bit][0], sel ^ basis[bit][1]
                else:
                    basis[bit] = (c, sel)
                    break
        x = 0
        for bit in reversed(range(n)):
            if target >> bit & 1:
                target, x = target ^ basis[bit][0], x ^ basis[bit][1]
        assert target == 0
        return x

    def _raw(self, init: int, word: int) -> int:
        a = self._alg
        raw = crc.Algorithm(crc_width=a.crc_width, polynomial=a.polynomial, initial_crc=init,
                            reflect_input=a.reflect_input, reflect_output=False, xor_output=0)
        return raw(data_width=self._w).compute([word])

    def elaborate(self, platform):
        m = Module()
        n, a = self._alg.crc_width, self._alg
        f_cols = [self._raw(1 << j, 0) for j in range(n)]
        g_cols = [self._raw(0, 1 << j) for j in range(self._w)]
        reg = Signal(n, init=a.initial_crc)
        alt_init = self._init_before_zeros() if self._z else None
        with m.If(self.valid):
            # A word given with ``start`` is the first word of the new CRC.
            for i in range(n):
                f_row = sum(1 << j for j, col in enumerate(f_cols) if col >> i & 1)
                g_row = sum(1 << j for j, col in enumerate(g_cols) if col >> i & 1)
                from_init = bin(a.initial_crc & f_row).count("1") & 1
                if alt_init is not None:
                    from_init = Mux(self.alt, bin(alt_init & f_row).count("1") & 1, from_init)
                m.d.sync += reg[i].eq(Mux(self.start, from_init, (reg & f_row).xor()) ^ (self.data & g_row).xor())
        with m.Elif(self.start):
            m.d.sync += reg.eq(a.initial_crc if alt_init is None else Mux(self.alt, alt_init, a.initial_crc))
        m.d.comb += self.crc.eq((reg[::-1] if a.reflect_output else reg) ^ a.xor_output)
        return m


class BlockCrc(wiring.Component):
    """The CRC-32 check a decoder runs on its word input (``DecodeStatus.CRC``).

    A :class:`WordCrc` of the ISO-HDLC algorithm (zlib's CRC-32, ``word_bits``-bit words least
    significant byte first) sees every word the decoder accepts during a command, drained words
    included, so it covers exactly the command's ``words`` words.  The ANS final-state check cannot
    see a flipped bit of the raw additional data; this check can.

    Ports: ``start`` (a command is accepted this clock), with its ``check`` (``check_crc``) and
    ``expected`` (``crc``, 32 bits), both held from then on; ``word_valid`` and ``word``
    (``word_bits``) for each word accepted; with ``zeros_first`` bits, ``zeros_first`` (In, 1: the
    command's first word begins with that many zero bits that are not the command's, which the CRC's
    start value absorbs). ``mismatch`` (Out, 1): the check is enabled and the CRC of the words so far
    differs from ``expected``; read it in a clock after the last word's (the register has settled):
    the clock a command ends when its words were all taken before, else the shell's ``CHECK`` state
    after the drain.
    """

    def __init__(self, word_bits: int, *, zeros_first: int = 0):
        self._zeros_first = zeros_first
        members = {"start": In(1), "check": In(1), "expected": In(32), "word_valid": In(1), "word": In(word_bits),
                   "mismatch": Out(1)}
        if zeros_first:
            members["zeros_first"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.processor = proc = WordCrc(crc.catalog.CRC32_ISO_HDLC, len(self.word),
                                                zeros_first=self._zeros_first)
        expected, enabled = Signal(32), Signal()
        m.d.comb += [proc.start.eq(self.start), proc.valid.eq(self.word_valid), proc.data.eq(self.word)]
        if self._zeros_first:
            m.d.comb += proc.alt.eq(self.zeros_first)
        with m.If(self.start):
            m.d.sync += [expected.eq(self.expected), enabled.eq(self.check)]
        m.d.comb += self.mismatch.eq(enabled & (proc.crc != expected))
        return m


def connect_block_crc(m: Module, unit: BlockCrc, cmd, word_in, data=None) -> None:
    """Join ``unit`` to a decoder's command stream ``cmd`` (its ``check_crc`` and ``crc``) and word
    stream ``word_in`` (what it takes of each word: ``data``, default ``word_in.p.data``), in ``m``."""
    m.d.comb += [unit.start.eq(cmd.valid & cmd.ready), unit.check.eq(cmd.p.check_crc), unit.expected.eq(cmd.p.crc),
                 unit.word_valid.eq(word_in.valid & word_in.ready),
                 unit.word.eq(word_in.p.data if data is None else data)]


def crc_checked(block_crc: BlockCrc | None, status):
    """``status``, or ``CRC`` where it is OK and ``block_crc`` (when there is one) sees a mismatch."""
    if block_crc is None:
        return status
    return Mux(block_crc.mismatch & (status == DecodeStatus.OK), DecodeStatus.CRC, status)
