"""AXI4-Stream ports for the cores (the FPGA integration kit): what a Vivado, Quartus or open-source
design connects to, instead of Amaranth's ``valid``/``ready``/``payload`` streams.

:class:`AxisCore` wraps any of the four cores (shelled or not) and gives every stream port an
AXI4-Stream twin. The mapping, one stream at a time (ARM IHI 0051, signals ``TDATA``, ``TVALID``,
``TREADY``, ``TLAST``; ``TKEEP`` is not generated because every byte of every transfer is valid):

======================  =====================  =================================================
core stream             AXI4-Stream port       ``TDATA`` (bit 0 = LSB)
======================  =====================  =================================================
``i`` of a decoder      ``s_axis_i``           the ``W``-bit word; ``TLAST`` → the word's ``last``
``i`` of an encoder     ``s_axis_i``           the pair: ``symbol`` at bit 0, ``extra`` above it
                                               (``set`` above both with table sets)
``o`` of a decoder      ``m_axis_o``           the pair, as above; ``TLAST`` = 0
``o`` of an encoder     ``m_axis_o``           the word; ``TLAST`` = the stream's final word
``cmd``                 ``s_axis_cmd``         the command (:mod:`.common` layouts, field order)
``cfg``, ``*_cfg``      ``s_axis_<name>``      ``{addr, data}`` table writes, ``addr`` at bit 0
``sel``                 ``s_axis_sel``         ``{set, count}`` table-set runs
======================  =====================  =================================================

``TDATA`` is the payload zero-extended to whole bytes (AXI4-Stream data is a multiple of 8 bits); the
padding bits of a slave port are ignored and those of a master port are 0. Field offsets are those of
the payload's :class:`~amaranth.lib.data.StructLayout`, which :func:`axis_fields` lists for a
designer's driver. Handshakes pass straight through (no register, no bubble): the cores' outputs are
already registered and their ``ready`` outputs come from registers. ``done`` and ``status`` keep their
names.
"""

from __future__ import annotations

from amaranth.hdl import Module, Shape, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxisCore", "axis_signature", "axis_fields"]


def axis_signature(data_bits: int, *, last: bool = True) -> wiring.Signature:
    """An AXI4-Stream master's signature: ``tdata`` (``data_bits`` rounded up to whole bytes),
    ``tvalid``, ``tready`` (in) and ``tlast``; flip it for a slave."""
    width = 8 * max(1, -(-data_bits // 8))
    members = {"tdata": Out(width), "tvalid": Out(1), "tready": In(1)}
    if last:
        members["tlast"] = Out(1)
    return wiring.Signature(members)


def _payload_shape(core, name: str):
    return core.signature.members[name].signature.members["payload"].shape


def _data_bits(shape) -> tuple[int, bool]:
    """(bits that go to ``TDATA``, whether the payload's top field ``last`` goes to ``TLAST``)."""
    width = Shape.cast(shape).width
    if isinstance(shape, data.Layout):
        fields = dict(shape)
        if "last" in fields and fields["last"].offset == width - 1:
            return width - 1, True
    return width, False


def axis_fields(core, name: str) -> dict[str, tuple[int, int]]:
    """``{field: (bit offset, width)}`` of stream ``name``'s ``TDATA``, nested fields joined by ``.``
    (a word's ``last`` is ``TLAST``, not a ``TDATA`` field)."""
    out = {}

    def walk(shape, prefix, base):
        if isinstance(shape, data.Layout):
            for fname, f in shape:
                walk(f.shape, f"{prefix}{fname}.", base + f.offset)
        else:
            out[prefix[:-1]] = (base, Shape.cast(shape).width)

    walk(_payload_shape(core, name), "", 0)
    if _data_bits(_payload_shape(core, name))[1]:
        del out["last"]
    return out


class AxisCore(wiring.Component):
    """A core with AXI4-Stream ports (see the module docstring for the mapping).

    Parameters
    ----------
    core : wiring.Component
        A :class:`~.tans.TansXnDecoder`, :class:`~.tans.TansXnEncoder`, :class:`~.rans.RansDecoder` or
        :class:`~.rans.RansEncoder` (any parameters, shelled or not), or one of the §4.3 interface
        cores (:class:`~.interfaces.PairToFloat`, ``PairToFixed``, ``FloatToPair``, ``FixedToPair``:
        their ``i``/``o`` payloads are pairs or plain words, their ``cfg`` a LUT entry).

    Ports
    -----
    s_axis_<name>
        One AXI4-Stream slave per input stream of ``core`` (``cmd``, ``i``, table writes, ``sel``).
    m_axis_o
        The core's output stream.
    other ports
        The core's non-stream ports, unchanged (``done``, ``status``; a coder's control signals).

    Latency: none added; the wrapper is wiring.
    """

    def __init__(self, core: wiring.Component):
        if not isinstance(core, wiring.Component):
            raise TypeError(f"core must be an Amaranth wiring.Component, not {type(core).__name__}")
        self._core = core
        ports = {}
        self._inputs, self._outputs, self._plain = [], [], []
        for name, member in core.signature.members.items():
            if member.is_signature and set(member.signature.members) >= {"valid", "ready", "payload"}:
                width, _ = _data_bits(_payload_shape(core, name))
                if member.flow == In:
                    ports[f"s_axis_{name}"] = In(axis_signature(width))
                    self._inputs.append(name)
                else:
                    ports[f"m_axis_{name}"] = Out(axis_signature(width))
                    self._outputs.append(name)
            elif not member.is_signature:
                ports[name] = member
                self._plain.append(name)
            else:
                raise TypeError(f"core port {name!r} is neither a stream nor a signal")
        super().__init__(ports)

    @property
    def core(self) -> wiring.Component:
        return self._core

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._core
        for name in self._inputs:
            s, axis = getattr(core, name), getattr(self, f"s_axis_{name}")
            bits, has_last = _data_bits(_payload_shape(core, name))
            m.d.comb += [s.valid.eq(axis.tvalid), axis.tready.eq(s.ready),
                         Value.cast(s.payload)[:bits].eq(axis.tdata[:bits])]
            if has_last:
                m.d.comb += s.payload.last.eq(axis.tlast)      # a word: TLAST is its ``last``
        for name in self._outputs:
            s, axis = getattr(core, name), getattr(self, f"m_axis_{name}")
            bits, has_last = _data_bits(_payload_shape(core, name))
            m.d.comb += [axis.tvalid.eq(s.valid), s.ready.eq(axis.tready), axis.tdata.eq(Value.cast(s.payload)[:bits])]
            if has_last:
                m.d.comb += axis.tlast.eq(s.payload.last)     # an encoder's word: its stream's final one
        for name in self._plain:
            a, b = getattr(self, name), getattr(core, name)
            if core.signature.members[name].flow == In:
                m.d.comb += b.eq(a)
            else:
                m.d.comb += a.eq(b)
        return m
