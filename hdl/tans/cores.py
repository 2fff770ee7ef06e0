"""What every tANS core shares: :class:`TansCoreBase`, its read-only parameters, and :func:`expose_coder`,
which wires a coder built without its shell to the core's ports. The cores are :mod:`.cores_xn`'s.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ..common import CoreParameters
from .shape import TansShape

__all__ = ["expose_coder", "TansCoreBase"]


def expose_coder(m: Module, outer: wiring.Component, inner: wiring.Component) -> None:
    """Wire ``inner``'s ports to the same-named ports of ``outer`` (a core built without its shell)."""
    for name, member in outer.signature.members.items():
        a, b = getattr(outer, name), getattr(inner, name)
        if member.is_signature:
            wiring.connect(m, wiring.flipped(a), b)
        elif member.flow == In:
            m.d.comb += b.eq(a)
        else:
            m.d.comb += a.eq(b)

class TansCoreBase(CoreParameters):
    """Read-only parameters shared by the tANS cores."""

    @property
    def table_log(self) -> int:
        return self._shape.R

    @property
    def shape(self) -> TansShape:
        """The widths derived from the codec and the hardware options (what the coder blocks are built
        from; read-only: build another core to change them)."""
        return self._shape

    @property
    def shell(self) -> bool:
        """Whether the command shell is built around the coder (``False``: the coder alone)."""
        return self._shell

    @property
    def count_bits(self) -> int:
        """Width of a command's pair and word counts (the shell's counters)."""
        return self._count_bits

    @property
    def coder(self) -> wiring.Component:
        """The coder this core holds (the paper's core; with the shell, its ports are internal: a
        formal harness or a test bench reads them, e.g. the decoder coder's word input ``i``)."""
        return self._coder
