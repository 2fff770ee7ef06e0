"""The Verilog generator: what ``ansforge verilog`` writes for any core of this package.

One function, so that the file a designer takes home, the Verilog that Verilator compiles, the netlist
that ``ansforge resources`` synthesizes and the take-home testbench's DUT are the same text.
"""

from __future__ import annotations

from amaranth.back import verilog

__all__ = ["core_verilog"]


def core_verilog(core, name: str = "top") -> str:
    """Verilog of ``core`` as a module ``name``, its ports named after its signature (``i__payload``,
    ``i__valid``, ...). Source locations are left out (``emit_src=False``), so the text depends on the
    design alone, not on where its Python lines sit."""
    return verilog.convert(core, name=name, emit_src=False)
