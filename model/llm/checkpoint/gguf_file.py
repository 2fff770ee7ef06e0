"""GGUF files, read through the ``gguf`` package once their layout (every offset, the alignment,
truncation) and every shape are checked against the file.
"""

from __future__ import annotations

import math
import os
import struct
from pathlib import Path

import numpy as np

from ...errors import CheckpointError
from .base import Checkpoint, SUPPORTED_DTYPES, TensorInfo, checked_size, one_line, shape_problem


class GgufCheckpoint(Checkpoint):
    """GGUF file read with the ``gguf`` package; F32, F16 and BF16 tensors.

    A file holding any quantized tensor (Q4_0, Q8_0, K-quants, …) is rejected at open time: its values
    are not floats that a coding pair could carry losslessly. ``quantized=True`` opens it anyway, for
    a reader that takes such tensors' bytes itself (the container codes Q4_0 blocks, see
    :mod:`~ansforge.model.dtypes.quantized`); :meth:`tensor` still refuses them.
    """

    format = "gguf"

    def __init__(self, path: str | os.PathLike[str], quantized: bool = False) -> None:
        super().__init__(path)
        from gguf import GGUFReader

        _check_gguf(self.path)  # the whole layout against the file, before the reader takes it
        try:
            self._reader = GGUFReader(str(self.path))
        except Exception as exc:  # pragma: no cover - _check_gguf refuses what the reader cannot read
            raise CheckpointError(f"{self.path}: not a readable GGUF file: {one_line(exc)}") from None
        allow_quantized, quantized = quantized, []
        for t in self._reader.tensors:
            dtype = t.tensor_type.name
            shape = tuple(int(d) for d in reversed(t.shape.tolist()))
            self._infos.append(TensorInfo(t.name, shape, dtype, int(t.data_offset), int(t.n_bytes)))
            if dtype not in SUPPORTED_DTYPES:
                quantized.append((t.name, dtype))
        if quantized and not allow_quantized:
            name, dtype = quantized[0]
            raise CheckpointError(
                f"{self.path}: tensor {name!r} has GGML type {dtype} ({len(quantized)} of "
                f"{len(self._infos)} tensors are not F32/F16/BF16); quantized GGUF files cannot be coded "
                "losslessly as float coding pairs"
            )
        self._by_name = {t.name: t for t in self._reader.tensors}

    def metadata(self, key: str) -> object | None:
        """The value of the GGUF metadata field ``key`` (``general.architecture``, ``llama.block_count``, …),
        or ``None`` when the file has no such field."""
        f = self._reader.fields.get(key)
        return None if f is None else f.contents()

    def _view(self, info: TensorInfo) -> np.ndarray:
        data = self._by_name[info.name].data
        if info.dtype == "BF16":  # the reader exposes BF16 as raw bytes
            data = data.view(np.uint16)
        return data.reshape(info.shape)


#: Byte width of each GGUF metadata value type that has a fixed width (8 is a string, 9 an array).
_GGUF_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_VERSIONS = (2, 3)
#: GGML's limit on a tensor's dimensions (``GGML_MAX_DIMS``).
_GGUF_MAX_DIMS = 4


def _check_gguf(path: Path) -> None:
    """Walk a GGUF file's header (version, metadata, tensor infos) and every tensor's data range against
    the file itself, so that what the ``gguf`` reader then maps is exactly what the header describes:
    a truncated or malformed header, a tensor whose data offset breaks the file's alignment or whose
    data runs past the end is one :class:`CheckpointError` naming the file and the entry."""
    import mmap

    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    size = checked_size(path)
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    try:
        pos = 0
        order = "<"

        def fail(msg: str) -> CheckpointError:
            return CheckpointError(f"{path}: GGUF {msg}")

        def take(n: int, what: str) -> bytes:
            nonlocal pos
            if n < 0 or pos + n > size:
                raise fail(f"header truncated in {what} (needs bytes {pos}..{pos + n}, the file has {size})")
            b = mm[pos:pos + n]
            pos += n
            return bytes(b)

        def u32(what: str) -> int:
            return struct.unpack(order + "I", take(4, what))[0]

        def u64(what: str) -> int:
            return struct.unpack(order + "Q", take(8, what))[0]

        def string(what: str) -> str:
            n = u64(what)
            raw = take(n, what)
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                raise fail(f"{what} is not UTF-8 text") from None

        def value(vtype: int, what: str, depth: int = 0):
            if vtype in _GGUF_SCALARS:
                return take(_GGUF_SCALARS[vtype], what)
            if vtype == 8:
                return string(what)
            if vtype == 9:
                itype, count = u32(what), u64(what)
                if depth > 4:
                    raise fail(f"{what} nests arrays more than 4 deep")
                least = _GGUF_SCALARS.get(itype, 8 if itype == 8 else 12 if itype == 9 else None)
                if least is None:
                    raise fail(f"{what} is an array of unknown value type {itype}")
                if count * least > size - pos:
                    raise fail(f"header truncated in {what} (an array of {count} values needs at least "
                               f"{count * least} bytes from byte {pos}, the file has {size})")
                if itype in _GGUF_SCALARS:
                    take(count * least, what)
                else:
                    for _ in range(count):
                        value(itype, what, depth + 1)
                return None
            raise fail(f"{what} has unknown value type {vtype}")

        if take(4, "its magic") != b"GGUF":
            raise fail("magic missing")
        version = struct.unpack("<I", take(4, "its version"))[0]
        if version & 0xFFFF == 0:  # a big-endian file, as the gguf reader detects one
            order, version = ">", struct.unpack(">I", struct.pack("<I", version))[0]
        if version not in _GGUF_VERSIONS:
            raise fail(f"version {version} is not supported (ansforge reads GGUF versions "
                       f"{', '.join(map(str, _GGUF_VERSIONS))})")
        n_tensors, n_kv = u64("its tensor count"), u64("its metadata count")
        if 12 * n_kv + 24 * n_tensors > size - pos:  # every entry takes at least that many bytes
            raise fail(f"header declares {n_kv} metadata entries and {n_tensors} tensors, more than its "
                       f"{size} bytes can hold (truncated or corrupt)")
        alignment = 32
        keys: set[str] = set()
        for k in range(n_kv):
            key = string(f"metadata entry {k} of {n_kv}")
            what = f"metadata entry {k} of {n_kv} ({key[:60]!r})"
            if key in keys:
                raise fail(f"{what} appears twice")
            keys.add(key)
            vtype = u32(what)
            raw = value(vtype, what)
            if key == "general.alignment":
                if vtype != 4:
                    raise fail(f"{what} must be a UINT32, not value type {vtype}")
                alignment = struct.unpack(order + "I", raw)[0]
                if alignment == 0 or alignment & (alignment - 1):
                    raise fail(f"alignment {alignment} is not a power of two")
        infos = []
        names: set[str] = set()
        for t in range(n_tensors):
            name = string(f"tensor info {t} of {n_tensors}")
            what = f"tensor {name[:80]!r}"
            if name in names:
                raise fail(f"{what} appears twice")
            names.add(name)
            n_dims = u32(what)
            if n_dims > _GGUF_MAX_DIMS:
                raise fail(f"{what} has {n_dims} dimensions, more than GGML's {_GGUF_MAX_DIMS}")
            dims = [u64(what) for _ in range(n_dims)]
            raw_type = u32(what)
            offset = u64(what)
            try:
                ggml_type = GGMLQuantizationType(raw_type)
                block, type_size = GGML_QUANT_SIZES[ggml_type]
            except (ValueError, KeyError):
                raise fail(f"{what} has unknown GGML type {raw_type}") from None
            problem = shape_problem(dims[::-1])
            if problem:
                raise fail(f"{what} has shape {dims[::-1]}: {problem}")
            if dims and dims[0] % block:
                raise fail(f"{what} of type {ggml_type.name} has rows of {dims[0]} values, not whole "
                           f"{block}-value blocks")
            infos.append((what, offset, math.prod(dims) * type_size // block))
        data_start = pos + -pos % alignment
        for what, offset, nbytes in infos:
            if offset % alignment:
                raise fail(f"{what} data offset {offset} is not a multiple of the file's alignment ({alignment})")
            if data_start + offset + nbytes > size:
                raise fail(f"{what} data (bytes {data_start + offset}..{data_start + offset + nbytes}) runs past "
                           f"the end of the file ({size} bytes; truncated?)")
    finally:
        if size:
            mm.close()
