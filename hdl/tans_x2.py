"""The two-state tANS encoder's blocks, by their old path (``from ansforge.hdl.tans_x2 import ...``).

The blocks now live in the :mod:`ansforge.hdl.tans` package, one module per block:
:mod:`~ansforge.hdl.tans.encoder_x2` (:class:`TansEncoderStateRing`, :class:`TansEncoderX2Coder`),
:mod:`~ansforge.hdl.tans.packer` (:class:`WordPacker`, :class:`WideWordPacker`) and
:mod:`~ansforge.hdl.tans.shape` (the symbol rows). This module only re-exports them.
"""

from __future__ import annotations

from .tans.encoder_x2 import TansEncoderStateRing, TansEncoderX2Coder
from .tans.packer import WideWordPacker, WordPacker
from .tans.shape import x2_field_bits, x2_last_bits, x2_symbol_entry, x2_symbol_rows

__all__ = ["TansEncoderStateRing", "WordPacker", "WideWordPacker", "TansEncoderX2Coder", "x2_symbol_entry", "x2_symbol_rows",
           "x2_field_bits", "x2_last_bits"]
