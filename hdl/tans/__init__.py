"""tANS decoder and encoder cores (§4.2, Table 3 "tANS Decoder/Encoder"), one coding pair per clock.

Both cores follow ``docs/bitstream.md`` bit for bit; :class:`~ansforge.model.coding.tans.TansCoder` is their
golden model. Their tables come from one :class:`~ansforge.model.coding.tans.TansTable`: either baked into
``Memory(init=...)`` (``programmable=False``) or written at run time through the ``cfg`` streams, whose
write sequences :func:`tans_decoder_writes` / :func:`tans_encoder_writes` derive from the same object.

Tables are read with combinational ports (LUTRAM on an FPGA): the state drives the read address and
the entry is used in the same cycle, which is what makes one pair per clock possible; the critical
path is table read → field shifter → next state.

One module per block of the paper's diagram, following the data flow (each block a
``wiring.Component`` that builds, simulates and synthesizes alone):

``shape``
    :class:`TansShape` (the widths), the table entry layouts and the ``cfg`` write sequences.
``window``, ``update``
    The decoders' bit windows (:class:`BitWindow`, :class:`PairWindow`) and state updates
    (:class:`TansStateUpdate`, :class:`TansTailUpdate`).
``decoder_one``, ``decoder_xn``
    The decoder coders for one and ``N >= 2`` states.
``packer``
    The ``N``-state encoder's word packers (:class:`WordPacker`, :class:`WideWordPacker`).
``encoder_one``, ``encoder_xn``
    The encoder coders (and the ``N``-state ring) for one and ``N >= 2`` states.
``cores``, ``cores_xn``
    What the cores share (:class:`TansCoreBase`), and the cores, coder plus command shell:
    :class:`TansXnDecoder` / :class:`TansXnEncoder` (``N = 1 .. 16``; what the core registry ships).

This package re-exports every block (``from ansforge.hdl.tans import TansXnDecoder``).
Design history and measurements: ``docs/design/tans.md``.
"""

from __future__ import annotations

from .shape import (TansShape, decoder_entry_layout, symbol_entry, tans_decoder_writes, tans_encoder_writes,
                    thermometer, x2_field_bits, x2_last_bits, x2_symbol_entry, x2_symbol_rows, xn_field_bits,
                    xn_last_bits, xn_state_count, xn_symbol_entry, xn_symbol_rows)
from .window import BitWindow, PairWindow
from .update import TansStateUpdate, TansTailUpdate
from .decoder_one import TansDecoderCoder
from .decoder_xn import TansXnDecoderCoder
from .packer import WideWordPacker, WordPacker
from .encoder_one import TansEncoderCoder
from .encoder_xn import TansXnEncoderCoder, TansXnEncoderRing
from .cores import TansCoreBase, expose_coder
from .cores_xn import TansXnDecoder, TansXnEncoder, XN_STATES

__all__ = ["TansShape", "TansCoreBase", "thermometer", "expose_coder", "decoder_entry_layout", "BitWindow",
           "PairWindow", "TansDecoderCoder", "TansStateUpdate", "TansTailUpdate",
           "TansEncoderCoder", "tans_decoder_writes", "tans_encoder_writes",
           "symbol_entry", "x2_symbol_entry", "x2_field_bits", "x2_last_bits", "x2_symbol_rows", "xn_state_count",
           "xn_field_bits", "xn_last_bits", "xn_symbol_entry", "xn_symbol_rows", "TansXnDecoderCoder",
           "WordPacker", "WideWordPacker", "TansXnEncoderRing",
           "TansXnEncoderCoder", "XN_STATES", "TansXnDecoder", "TansXnEncoder"]
