"""The Verilog generator: what ``ansforge verilog`` writes for any core of this package.

One function, so that the file a designer takes home, the Verilog that Verilator compiles, the netlist
that ``ansforge resources`` synthesizes and the take-home testbench's DUT are the same text.
"""

from __future__ import annotations

import re

from amaranth.back import verilog

from .dsp import VerilogExport

__all__ = ["core_verilog"]


def core_verilog(core, name: str = "top", *, prefix: str | None = None) -> str:
    """Verilog of ``core`` as a module ``name``, its ports named after its signature (``i__payload``,
    ``i__valid``, ...). Source locations are left out (``emit_src=False``), so the text depends on the
    design alone, not on where its Python lines sit.

    Blocks with a hand-written Verilog body (:class:`~ansforge.hdl.dsp.MulAdd`: a behavioural description,
    or a DSP48E2 primitive where ``ANSFORGE_DSP48E2`` is defined) are instances of modules appended to
    the text, each once. With ``prefix``, those modules are named ``<prefix>_<module>`` (Amaranth's own
    submodules already carry ``name``), so that two exported designs in one project define no module
    twice (:mod:`.export`)."""
    platform = VerilogExport()
    text = verilog.convert(core, name=name, platform=platform, emit_src=False)
    text += "".join(platform.modules[k] for k in sorted(platform.modules))
    if prefix:
        for k in sorted(platform.modules):
            text = re.sub(rf"\b{re.escape(k)}\b", f"{prefix}_{k}", text)
    return text
