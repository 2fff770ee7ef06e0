"""Amaranth cores of the paper's §4 and their Verilog generator.

The tANS/rANS encoder and decoder cores (§4.2, Table 3) and the coding-pair interfaces (§4.3) are
built here as ``amaranth.lib.wiring.Component`` subclasses, checked bit for bit against the golden
models in :mod:`ansforge.model`.
"""

__all__: list[str] = []
