"""The tANS cores for ``N`` interleaved states, by their old path (``from ansforge.hdl.tans_xn import ...``).

The blocks now live in the :mod:`ansforge.hdl.tans` package, one module per block:
:mod:`~ansforge.hdl.tans.decoder_xn` (:class:`TansXnDecoderCoder`), :mod:`~ansforge.hdl.tans.encoder_xn`
(:class:`TansXnEncoderRing`, :class:`TansXnEncoderCoder`), :mod:`~ansforge.hdl.tans.cores_xn` (the cores,
:data:`XN_STATES`) and :mod:`~ansforge.hdl.tans.shape` (the symbol rows). This module only re-exports
them; measurements: ``docs/design/tans.md``.
"""

from __future__ import annotations

from .tans.cores_xn import XN_STATES, TansXnDecoder, TansXnEncoder
from .tans.decoder_xn import TansXnDecoderCoder
from .tans.encoder_xn import TansXnEncoderCoder, TansXnEncoderRing
from .tans.shape import xn_field_bits, xn_last_bits, xn_symbol_rows

__all__ = ["TansXnDecoderCoder", "TansXnEncoderCoder", "TansXnEncoderRing", "TansXnDecoder", "TansXnEncoder",
           "XN_STATES", "xn_field_bits", "xn_last_bits", "xn_symbol_rows"]
