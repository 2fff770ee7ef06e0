"""The tANS cores' shapes and table entries: widths, entry layouts and the ``cfg`` write sequences.

:class:`TansShape` holds the widths a core derives from its codec (``R``: table log, ``L = 2**R``
states; ``W``: word bits; ``K``: widest extra; ``F = R + K``: widest field) and its checked hardware
options; every block below is built from one. The entry layouts are what the tables hold per row
(decoder rows :func:`decoder_entry_layout`; encoder symbol rows :func:`symbol_entry`,
:func:`x2_symbol_entry`, :func:`xn_symbol_entry`), and :func:`tans_decoder_writes` /
:func:`tans_encoder_writes` / :func:`x2_symbol_rows` / :func:`xn_symbol_rows` derive their contents from a
:class:`~ansforge.model.coding.tans.TansTable`, the golden model's table. Nothing here is hardware but
:func:`thermometer` (combinational).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const
from amaranth.lib import data

from ...model.coding.tans import TansTable
from ..common import bits_for, check_core_table, check_int

__all__ = ["thermometer", "TansShape", "decoder_entry_layout", "symbol_entry", "x2_symbol_entry", "x2_field_bits",
           "x2_last_bits", "x2_symbol_rows", "xn_state_count", "xn_field_bits", "xn_last_bits", "xn_symbol_entry",
           "xn_symbol_rows", "tans_decoder_writes", "tans_encoder_writes"]


def thermometer(n, width: int):
    """``(1 << n) - 1`` as ``width`` bits: bit ``i`` set when ``i < n`` (a mask without a shifter)."""
    return Cat(*(n > i for i in range(width))) if width else Const(0, 1)

class TansShape:
    """The widths a tANS core derives from its codec, and its checked hardware options.

    ``R`` and ``W`` come from ``codec.tans`` (validated once, by :class:`~ansforge.model.coding.tans.TansParams`);
    only the hardware choices are checked here: ``max_symbols`` (2 to 256 symbol slots),
    ``max_extra_bits`` (0 to 32), ``table_sets`` (1 to 16), ``programmable`` and whether ``table`` fits.
    """

    def __init__(self, codec, max_symbols, max_extra_bits, table, programmable, table_sets=1):
        self.codec = codec
        self.R = codec.tans.table_log
        self.W = codec.tans.word_bits
        self.sets, self.set_bits, self.max_symbols, self.K = check_core_table(
            table, TansTable, "table_log", self.R, table_sets=table_sets, programmable=programmable,
            max_symbols=max_symbols, max_extra_bits=max_extra_bits)
        self.table = table
        self.programmable = programmable
        self.L = 1 << self.R
        self.symbol_bits = bits_for(self.max_symbols - 1)
        self.need_max = self.R + self.K  # widest field a pair reads or writes

def decoder_entry_layout(sh) -> data.StructLayout:
    """A decoder table row: the state's symbol, its next-state bit count ``nb``, the next-state base
    and ``need = nb + k``, the whole field the pair reads (stored, so that no adder sits between the
    table and the bit window)."""
    return data.StructLayout({"symbol": sh.symbol_bits, "nb": bits_for(sh.R), "base": sh.R,
                              "need": bits_for(sh.need_max)})

def symbol_entry(sh) -> data.StructLayout:
    """An encoder symbol-table row (:meth:`~ansforge.model.coding.tans.TansTable.encoder_entries`)."""
    R = sh.R
    return data.StructLayout({"freq": R + 1, "cum": R, "nb_high": bits_for(R), "threshold": R + 2,
                              "k": bits_for(sh.K)})

def x2_symbol_entry(shape) -> data.StructLayout:
    """The two-state encoder's symbol-table row (24 bits in the paper configuration, 35 in the
    single-state coder's): ``base = (cum - freq) mod L`` (the slot is ``base + (X >> n)``, no
    subtractor per pair), ``thr = (threshold - L) / 2`` (``R - 1`` bits: ``threshold = freq << nb_high``
    is in ``[L, 2L)`` and even, as ``nb_high >= 1`` unless ``freq = L``, where it is ``L``; compared
    with the state *index* as ``x >> 1 < thr``), ``sh = R - nb_high`` (where the pair's state
    bits are moved up to, and the shift that gives ``X >> n``) and ``last = nb_high + k - 1``
    modulo ``2**``:func:`x2_last_bits` (all ones: no bit), the pair's field length less one before
    ``lt``: the packer's fill count is then one adder with ``lt`` as its carry-in,
    ``tot = cnt + last + (1 - lt)`` (measured: 3 LUT-equivalents less than ``k`` with
    ``tot = cnt + R + k - sh - lt``, a three-operand adder, for one LUT-RAM bit more)."""
    R = shape.R
    return data.StructLayout({"base": R, "thr": R - 1, "sh": bits_for(R), "last": x2_last_bits(shape)})

def x2_field_bits(shape) -> int:
    """Widest field the two-state encoder's packer takes: ``max(R + K, 2R)`` (a pair's state and
    extra bits; the flush's two states)."""
    return max(shape.R + shape.K, 2 * shape.R)

def x2_last_bits(shape) -> int:
    """Width of a field's ``last`` (its length minus one, modulo ``2**width``): that of the packer's
    fill count sum, ``bits_for(2W - 1)`` for :class:`WordPacker` (fields of at most ``W`` bits), else
    ``bits_for(F)``."""
    F = x2_field_bits(shape)
    return bits_for(2 * shape.W - 1) if F <= shape.W else bits_for(F)

def x2_symbol_rows(table, last_bits: int) -> list[dict]:
    """The rows of :func:`x2_symbol_entry` for a :class:`~ansforge.model.coding.tans.TansTable`, per
    symbol."""
    R = table.params.table_log
    L = 1 << R
    mask = (1 << last_bits) - 1
    return [{"base": int(r[1] - r[0]) % L, "thr": (int(r[3]) - L) >> 1, "sh": R - int(r[2]),
             "last": (int(r[2]) + int(r[4]) - 1) & mask}
            for r in table.encoder_entries()]

def xn_state_count(states) -> int:
    return check_int("states", states, 2, 32)

def xn_field_bits(shape) -> int:
    """Widest field the ``N``-state encoder's packer takes: ``max(R + K, R)`` (a pair's state and extra
    bits; one state of the flush)."""
    return max(shape.R + shape.K, shape.R)

def xn_last_bits(shape) -> int:
    """Width of a field's ``last`` (length minus one, modulo ``2**width``), as
    :func:`~.shape.x2_last_bits` for the fields of :func:`xn_field_bits`."""
    F = xn_field_bits(shape)
    return bits_for(2 * shape.W - 1) if F <= shape.W else bits_for(F)

def xn_symbol_entry(shape) -> data.StructLayout:
    R = shape.R
    return data.StructLayout({"base": R, "thr": R - 1, "sh": bits_for(R), "last": xn_last_bits(shape)})

def xn_symbol_rows(table: TansTable, shape) -> list[dict]:
    """The symbol rows (:func:`~.shape.x2_symbol_entry`, with ``last`` :func:`xn_last_bits` wide) of
    ``table``, per symbol."""
    return x2_symbol_rows(table, xn_last_bits(shape))

def tans_decoder_writes(table: TansTable, table_set: int = 0) -> list[dict]:
    """The ``cfg`` write sequence that loads ``table`` into a programmable :class:`~.cores_xn.TansXnDecoder`, as
    table set ``table_set`` (its entries live at ``table_set << R | state``)."""
    base = table_set << table.params.table_log
    return [{"addr": base | x, "data": {"symbol": int(r[0]), "nb": int(r[1]), "base": int(r[2]),
                                        "need": int(r[1] + r[3])}}
            for x, r in enumerate(table.decoder_entries())]

def tans_encoder_writes(table: TansTable, table_set: int = 0, max_symbols: int | None = None
                        ) -> tuple[list[dict], list[dict]]:
    """The ``sym_cfg`` and ``state_cfg`` write sequences that load ``table`` into a :class:`~.cores_xn.TansXnEncoder`
    as table set ``table_set`` (symbol entries at ``table_set * max_symbols + symbol``, with
    ``max_symbols`` the core's power-of-two symbol slots; state entries at ``table_set << R | slot``)."""
    sym_base = table_set * (max_symbols or 0)
    state_base = table_set << table.params.table_log
    sym = [{"addr": sym_base + s, "data": {"freq": int(r[0]), "cum": int(r[1]), "nb_high": int(r[2]),
                                           "threshold": int(r[3]), "k": int(r[4])}}
           for s, r in enumerate(table.encoder_entries())]
    state = [{"addr": state_base | i, "data": int(v)} for i, v in enumerate(table.encode_state)]
    return sym, state
