"""The core of a codec: :func:`build_core` and :func:`table_writes`.

This is where a codec object (:class:`~ansforge.model.coding.codecs.TansCodec` or
:class:`~ansforge.model.coding.codecs.RansCodec`) meets its hardware. It lives in ``hdl/`` and not on
the codec classes because imports only run analysis → sim → hdl → model: ``model/`` never imports
``hdl/``. A mapping from ``(codec.kind, role)`` to the core class replaces any branching on the kind.
"""

from __future__ import annotations

from amaranth.lib import wiring

from .rans import RansDecoder, RansEncoder
from .tans import TansDecoder, TansEncoder

__all__ = ["ROLES", "CORE_CLASSES", "PAPER_CODECS", "build_core", "core_states", "paper_codec", "table_writes"]

ROLES = ("decoder", "encoder")

#: The core class of each codec kind and role.
CORE_CLASSES: dict[tuple[str, str], type[wiring.Component]] = {
    ("tans", "decoder"): TansDecoder, ("tans", "encoder"): TansEncoder,
    ("rans", "decoder"): RansDecoder, ("rans", "encoder"): RansEncoder,
}


#: The paper's codec of each kind (Table 3's configurations): what a core is built for when no codec is named.
PAPER_CODECS = {"tans": "tans8", "rans": "rans16"}


def paper_codec(core: str) -> str:
    """The paper's codec name for a core name: ``tans8`` for ``tans-decoder``/``tans-encoder``, ``rans16``
    for ``rans-decoder``/``rans-encoder``."""
    return PAPER_CODECS[core.split("-")[0]]


def build_core(codec, role: str, table=None, **options) -> wiring.Component:
    """The ``role`` (``"decoder"`` or ``"encoder"``) core of ``codec``, with ``table`` baked in (or as the
    reset contents of a programmable core). ``options`` are the core's hardware choices:
    ``programmable``, ``max_symbols`` (symbol slots, 2 to 256), ``max_extra_bits`` (0 to 32),
    ``table_sets``, ``shell``, ``block_crc`` (decoders), ``mutant`` …; the core checks them."""
    cls = CORE_CLASSES.get((getattr(codec, "kind", None), role))
    if cls is None:
        raise ValueError(f"no {role!r} core for codec {codec!r} (roles: {', '.join(ROLES)})")
    return cls(codec, table=table, **options)


def core_states(codec, role: str) -> tuple[int, ...]:
    """The interleaved state counts ``N`` whose streams the ``role`` core of ``codec``'s kind takes (its
    class's ``STATES``; ``(1,)`` when it declares none): what ``codec.hardware_check`` is given."""
    cls = CORE_CLASSES.get((getattr(codec, "kind", None), role))
    return getattr(cls, "STATES", (1,))


def table_writes(core, tables) -> dict[str, list[dict]]:
    """Per ``cfg`` port of ``core``, the unpacked writes (``{addr, data}``) that load ``tables[t]`` as
    table set ``t`` (a fixed-table core has the same method; only a programmable one has the ports)."""
    return core.table_writes(tables)
