"""rANS decoder and encoder cores (§4.2, Table 3 "rANS Decoder/Encoder"), one coding pair per clock.

Both follow ``docs/bitstream.md`` bit for bit; :class:`~ansforge.model.coding.rans.RansCoder` is their golden
model, and with the ``constriction`` preset (``S = 64, W = 32, P = 24``) their words are constriction's
``AnsCoder`` words. The paper preset is ``S = 48, W = 32, P = 16`` (the one-state coders, ``rans16``); the
interleaved codecs ``rans16xN`` take the ``interleaved`` preset, ``S = 32, W = 16, P = 16``, and both
interleaved cores carry two stream words a 32-bit port word (a pair may move two words).

Each core is a *coder* (what Table 3 measures: the table memories, the state, the multiply or the
divide, the word and pair streams and the table-programming port) and a *shell* (command counters,
the decoder's stream start, end-of-stream checks, status, drain and CRC-32), each a
:class:`~amaranth.lib.wiring.Component`. ``shell=False`` builds the coder alone.

Tables (one :class:`~ansforge.model.coding.rans.RansTable` configures all of them: ``Memory`` initial
contents in a fixed build, ``cfg`` writes in a programmable one, :func:`rans_writes`): the *symbol
table* ``{freq, cum, k}`` per symbol and the decoder's *bucket table* (per bucket of quantiles, the top
:func:`bucket_bits_for` bits of ``q``, a ``base`` symbol and :data:`BUCKET_SPLITS` or :data:`XN_SPLITS`
``split`` offsets), both LUT-RAM read combinationally. No register holds table contents, so a reset
leaves a programmed table intact and consistent (LUT-RAM is not reset).

A pair's additional data of ``k`` bits is coded as ``ceil(k / P)`` uniform chunks (most significant
first in the decoder), each of which, like the symbol, may move one word.

One module per block of the paper's diagram, following the data flow:

``shape``
    :class:`RansShape` (the widths), the bucket constants and the ``cfg`` write sequence :func:`rans_writes`.
``tables``
    :class:`RansTables`: the symbol and bucket table memories with their ``cfg`` write port.
``arithmetic``
    The multiply-add, the two-level shifter, the chunk plan and the encoder's array divider.
``decoder_one``, ``decoder_xn``
    The decoder coders for one state and for ``N`` in :data:`XN_STATES` interleaved states.
``encoder_one``, ``encoder_xn``
    The encoder coders for one state and for ``N`` in :data:`ENCODER_XN_STATES` interleaved states.
``shell``, ``shell_xn``
    The command shells of the one-state and the interleaved coders.
``link``
    The coder ↔ shell interface of each core, a declared ``wiring.Signature`` both sides take their
    ports from, joined by ``wiring.connect``.
``cores``
    The cores, coder plus shell: :class:`RansDecoder` and :class:`RansEncoder`.

This package re-exports every block, so ``from ansforge.hdl.rans import RansDecoder`` keeps working.
Design history and measurements: ``docs/design/rans.md``.
"""

from __future__ import annotations

from .shape import (BUCKET_SPLITS, MAX_BUCKET_BITS, XN_SPLITS, RansShape, bucket_bits_for, rans_writes, recip_entry,
                    recip_split)
from .tables import RansTables
from .arithmetic import ArrayDivider, DividerStages, MultiplyAdd, chunk_plan, two_level_shift
from .decoder_one import RansDecoderCoder
from .decoder_xn import TAG_BITS, XN_RING, XN_STATES, RansDecoderCoderXN
from .encoder_one import RansEncoderCoder
from .encoder_xn import ENCODER_XN_STATES, RansEncoderXnCoder, xn_plan
from .shell import RansDecoderShell, RansEncoderShell
from .shell_xn import RansDecoderShellXN, RansEncoderShellXN
from .link import connect_link, decoder_link, decoder_xn_link, encoder_link, encoder_xn_link
from .cores import RansDecoder, RansEncoder

#: The name ``tests/hdl/test_rans_xn_encoder.py`` imports :func:`xn_plan` by (private while this was one module).
_xn_plan = xn_plan

__all__ = ["RansDecoder", "RansEncoder", "RansDecoderCoder", "RansDecoderShell", "RansDecoderCoderXN",
           "RansDecoderShellXN", "XN_STATES", "XN_RING", "TAG_BITS", "RansEncoderCoder", "RansEncoderShell",
           "RansEncoderXnCoder", "RansEncoderShellXN", "ENCODER_XN_STATES", "rans_writes", "bucket_bits_for",
           "MAX_BUCKET_BITS", "BUCKET_SPLITS", "XN_SPLITS", "RansShape", "RansTables",
           "ArrayDivider", "DividerStages", "MultiplyAdd", "chunk_plan", "two_level_shift", "recip_entry",
           "recip_split", "xn_plan", "decoder_link", "decoder_xn_link", "encoder_link", "encoder_xn_link",
           "connect_link"]
