"""The coder ↔ shell interface of each rANS core: a declared :class:`~amaranth.lib.wiring.Signature`.

Each signature is written from the shell's side (``Out``: the shell drives, ``In``: the coder answers).
The shell's ports include its members as they are, the coder's their flip (so that a coder built alone,
``shell=False``, still shows them as ports of the core), and the core joins the two with
:func:`~ansforge.hdl.link.connect_link`. All members are one clock's control: no handshake, no latency of their own.
"""

from __future__ import annotations

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..link import connect_link
from .shape import RansShape

__all__ = ["decoder_link", "decoder_xn_link", "encoder_link", "encoder_xn_link", "connect_link"]


def decoder_link(sh: RansShape) -> wiring.Signature:
    """:class:`RansDecoderShell` ↔ :class:`RansDecoderCoder`: ``load`` with ``load_state`` (``S`` bits:
    set the state, empty the word buffer), ``run``, ``ended`` (no word will come); back ``state``
    (``S`` bits), ``buffered`` (a word waits in the buffer) and ``step`` (a pair was decoded)."""
    return wiring.Signature({"load": Out(1), "load_state": Out(sh.S), "run": Out(1), "ended": Out(1),
                             "state": In(sh.S), "buffered": In(1), "step": In(1)})


def decoder_xn_link(sh: RansShape, tag_bits: int, port_words: int) -> wiring.Signature:
    """:class:`RansDecoderShellXN` ↔ :class:`RansDecoderCoderXN`: the stream heads injected into the ring
    (``inject``, ``state``, ``tag``), ``run``, ``drain``, ``last``, ``ended`` and ``purge`` with
    ``purge_tag``; back the ring's ``step`` and ``turned``, the pair's ``pair_tag`` and ``o_last``,
    ``evicted_initial``, ``starved`` with ``starved_tag``, and the word buffer's ``held`` words
    (one bit per stream word of a port word, ``port_words``) with their ``held_tags`` (``tag_bits``
    each)."""
    T, pw = tag_bits, port_words
    return wiring.Signature({"run": Out(1), "drain": Out(1), "inject": Out(1), "state": Out(sh.S), "tag": Out(T),
                             "last": Out(1), "ended": Out(1), "purge": Out(1), "purge_tag": Out(T),
                             "step": In(1), "turned": In(1), "pair_tag": In(T), "o_last": In(1),
                             "evicted_initial": In(1), "starved": In(1), "starved_tag": In(T),
                             "held": In(pw), "held_tags": In(T * pw)})


def encoder_link(sh: RansShape, depth: int) -> wiring.Signature:
    """:class:`RansEncoderShell` ↔ :class:`RansEncoderCoder`: ``start`` (the state to ``2**(S - W)``),
    ``run``, ``flush``; back ``state`` (``S`` bits), ``held`` (words in the coder's buffer, 0 ..
    ``depth``) and ``step`` (a pair was encoded)."""
    return wiring.Signature({"start": Out(1), "run": Out(1), "flush": Out(1),
                             "state": In(sh.S), "held": In(range(depth + 1)), "step": In(1)})


def encoder_xn_link(sh: RansShape) -> wiring.Signature:
    """:class:`RansEncoderShellXN` ↔ :class:`RansEncoderXnCoder`: ``run``, ``ghost`` (the next entry is
    a ghost), ``final`` (the next entry is the command's last); back ``step`` (an entry was taken) and
    ``last`` (the port word on ``o`` ends the command's stream)."""
    return wiring.Signature({"run": Out(1), "ghost": Out(1), "final": Out(1), "step": In(1), "last": In(1)})
