"""Stream payloads as integers, and the Amaranth-simulator helpers that move them.

Both simulation engines exchange payloads as plain integers (the payload's bits, field 0 at the
LSB); :func:`pack` and :func:`unpack` convert to and from the nested dicts of a
:class:`amaranth.lib.data.StructLayout`, so that drivers speak in field names.
"""

from __future__ import annotations

import random

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data

__all__ = ["pack", "unpack", "payload_bits", "payload_shape", "field_bits", "pairs_to_payloads", "payloads_to_pairs",
           "stream_put", "stream_get"]


def payload_bits(shape) -> int:
    """Width of a payload shape in bits."""
    return Shape.cast(shape).width


def payload_shape(component, port: str):
    """The payload shape of ``component``'s stream port ``port`` (a ``StructLayout`` or a width)."""
    return component.signature.members[port].signature.members["payload"].shape


def field_bits(rows: np.ndarray, offset: int, width: int) -> np.ndarray:
    """Bits ``offset .. offset + width`` (``width <= 64``) of each payload, as ``uint64``: ``rows`` is a
    1-D array of payloads of at most 64 bits, or a 2-D array of payloads as little-endian 64-bit words."""
    rows = np.asarray(rows, dtype=np.uint64)
    if rows.ndim == 1:
        rows = rows.reshape(-1, 1)
    q, r = divmod(offset, 64)
    v = rows[:, q] >> np.uint64(r)
    if r and q + 1 < rows.shape[1]:
        v |= rows[:, q + 1] << np.uint64(64 - r)
    return v & np.uint64((1 << width) - 1) if width < 64 else v


def pairs_to_payloads(shape, symbols, extras, *, offset: int = 0) -> np.ndarray:
    """Coding pairs as the payload bits of a pair layout ``shape`` (fields ``symbol`` and ``extra``, at
    their layout offsets plus ``offset``), vectorized: ``uint64``, so the payload fits 64 bits."""
    return (np.asarray(symbols).astype(np.uint64) << np.uint64(offset + shape["symbol"].offset)) | \
        (np.asarray(extras).astype(np.uint64) << np.uint64(offset + shape["extra"].offset))


def payloads_to_pairs(shape, payloads, *, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(symbols, extras)`` (``int64``, ``uint64``) of pair payloads of layout ``shape`` placed at bit
    ``offset`` of each payload (``payloads``: as for :func:`field_bits`); the inverse of :func:`pairs_to_payloads`."""
    sym, ext = shape["symbol"], shape["extra"]
    return (field_bits(payloads, offset + sym.offset, Shape.cast(sym.shape).width).astype(np.int64),
            field_bits(payloads, offset + ext.offset, Shape.cast(ext.shape).width))


def pack(shape, value) -> int:
    """The bits of ``value`` (an int, or a dict of fields for a struct layout) as an integer."""
    if isinstance(shape, data.StructLayout):
        if not isinstance(value, dict):
            return int(value)
        out = 0
        for name, field in shape:
            if name in value:
                bits = pack(field.shape, value[name])
                if bits >> field.width:
                    raise ValueError(f"field {name!r}: {value[name]!r} does not fit {field.width} bits")
                out |= bits << field.offset
        unknown = set(value) - {name for name, _ in shape}
        if unknown:
            raise ValueError(f"unknown payload fields {sorted(unknown)}")
        return out
    if isinstance(shape, data.ArrayLayout) and not isinstance(value, int):
        out = 0
        if len(value) != shape.length:
            raise ValueError(f"{len(value)} elements for an array of {shape.length}")
        width = payload_bits(shape.elem_shape)
        for j, v in enumerate(value):
            out |= pack(shape.elem_shape, v) << (j * width)
        return out
    v = int(value)
    if hasattr(shape, "__members__"):  # an enum shape
        return v
    return v & ((1 << payload_bits(shape)) - 1)


def unpack(shape, bits: int):
    """Inverse of :func:`pack`: a dict of fields for a struct layout, else the integer."""
    if isinstance(shape, data.StructLayout):
        return {name: unpack(field.shape, (bits >> field.offset) & ((1 << field.width) - 1)) for name, field in shape}
    if isinstance(shape, data.ArrayLayout):
        width = payload_bits(shape.elem_shape)
        return [unpack(shape.elem_shape, (bits >> (j * width)) & ((1 << width) - 1)) for j in range(shape.length)]
    return int(bits)


def _bits(payload):
    """A payload as a plain value (a layout view's bits), so that engines exchange integers."""
    return payload.as_value() if hasattr(payload, "as_value") else payload


async def _gap(ctx, rng: random.Random | None, prob: float) -> None:
    while rng is not None and prob > 0 and rng.random() < prob:
        await ctx.tick()


async def stream_put(ctx, stream, bits: int, *, rng: random.Random | None = None, stall_prob: float = 0.0) -> None:
    """Offer ``bits`` on ``stream`` (after random idle cycles) and wait for the transfer."""
    await _gap(ctx, rng, stall_prob)
    ctx.set(stream.valid, 1)
    ctx.set(_bits(stream.payload), bits)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream, *, rng: random.Random | None = None, stall_prob: float = 0.0) -> int:
    """Accept one transfer from ``stream`` (after random not-ready cycles); returns its payload bits."""
    await _gap(ctx, rng, stall_prob)
    ctx.set(stream.ready, 1)
    payload = _bits(stream.payload)
    while True:
        # A plain tick per cycle (not ``until``) so that a background collector can be abandoned
        # mid-wait when the simulation ends.
        _, _, valid, bits = await ctx.tick().sample(stream.valid, payload)
        if valid:
            break
    ctx.set(stream.ready, 0)
    return int(bits)
