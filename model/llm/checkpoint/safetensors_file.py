"""safetensors files, read through the ``safetensors`` package (header validation, names, dtypes,
shapes) and mapped tensor by tensor, and written (:func:`write_safetensors`) a tensor at a time.
"""

from __future__ import annotations

import json
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from ...errors import CheckpointError
from .base import Checkpoint, ITEMSIZE, SUPPORTED_DTYPES, TensorInfo, checked_size, one_line


class SafetensorsCheckpoint(Checkpoint):
    """safetensors file, F32/F16/BF16 tensors.

    The ``safetensors`` package validates the header (offsets, overlaps, file length) and reports names,
    dtypes and shapes; the data of each tensor is then memory-mapped from the byte range the header
    gives, because the package's NumPy path cannot represent BF16.
    """

    format = "safetensors"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        from safetensors import safe_open

        size = checked_size(self.path)
        with open(self.path, "rb") as fh:
            head = fh.read(9)
        if len(head) < 8:
            raise CheckpointError(f"{self.path}: truncated safetensors file: {size} bytes, less than its 8-byte "
                                  "header length")
        (declared,) = struct.unpack_from("<Q", head)
        if 8 + declared > size:
            raise CheckpointError(f"{self.path}: truncated safetensors header: it declares {declared} bytes of "
                                  f"JSON, the file has {size - 8} after the length")
        end = _safetensors_data_end(self.path, declared)
        if end is not None and 8 + declared + end > size:
            raise CheckpointError(f"{self.path}: truncated safetensors file: its header describes {end:,} bytes of "
                                  f"tensor data, the file has {size - 8 - declared:,} after the header")
        try:
            with safe_open(str(self.path), framework="numpy") as f:
                meta = {name: (f.get_slice(name).get_dtype(), tuple(f.get_slice(name).get_shape()))
                        for name in f.keys()}
        except Exception as exc:  # the package raises SafetensorError, OSError or ValueError
            raise CheckpointError(f"{self.path}: not a valid safetensors file: {one_line(exc)}") from None
        with open(self.path, "rb") as fh:
            (header_len,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(header_len))
        base = 8 + header_len
        entries = []
        for name, (dtype, shape) in meta.items():
            begin, end = header[name]["data_offsets"]
            entries.append(TensorInfo(name, shape, dtype, base + begin, end - begin))
        self._infos = sorted(entries, key=lambda i: (i.offset, i.name))
        self.metadata: dict[str, str] = header.get("__metadata__", {}) or {}

    def _view(self, info: TensorInfo) -> np.ndarray:
        return self._memmap(info)


def _safetensors_data_end(path: Path, header_len: int) -> int | None:
    """The largest data end offset a safetensors header gives, or ``None`` when the header is not one the
    ``safetensors`` package would take (it then says why)."""
    if header_len > 100_000_000:  # the package's own limit
        return None
    with open(path, "rb") as fh:
        fh.seek(8)
        try:
            header = json.loads(fh.read(header_len))
        except (ValueError, RecursionError):
            return None
    if not isinstance(header, dict):
        return None
    ends = [e["data_offsets"][1] for k, e in header.items() if k != "__metadata__" and isinstance(e, dict)
            and isinstance(e.get("data_offsets"), list) and len(e["data_offsets"]) == 2]
    return max(ends) if ends and all(isinstance(v, int) and not isinstance(v, bool) for v in ends) else None


class _ChunkWriter:
    """Writes buffers back to back into an open binary file: in order through ``f`` with one thread, or
    at their offsets (``os.pwrite``) on a pool of ``threads`` threads, at most ``2 * threads`` buffers
    in flight; the first error is raised by the next :meth:`write` or on leaving the ``with``."""

    def __init__(self, f, threads: int):
        self.f, self.threads, self.offset = f, max(1, int(threads)), 0
        self.pending: deque = deque()
        self.pool = None
        if self.threads > 1 and hasattr(os, "pwrite"):  # os.pwrite: POSIX only; elsewhere in order
            from concurrent.futures import ThreadPoolExecutor
            self.pool = ThreadPoolExecutor(max_workers=self.threads)

    def __enter__(self) -> "_ChunkWriter":
        return self

    def write(self, buf) -> None:
        mv = memoryview(buf)
        if not mv.nbytes:
            return
        mv = mv.cast("B")
        if self.pool is None:
            self.f.write(mv)
            return
        while len(self.pending) >= 2 * self.threads:
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(_pwrite_all, self.f.fileno(), mv, self.offset))
        self.offset += mv.nbytes

    def __exit__(self, *exc) -> None:
        if self.pool is None:
            return
        try:
            while self.pending:
                self.pending.popleft().result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _pwrite_all(fd: int, mv: memoryview, offset: int) -> None:
    while mv.nbytes:
        n = os.pwrite(fd, mv, offset)
        mv, offset = mv[n:], offset + n


def write_safetensors(
    path: str | os.PathLike[str],
    tensors: Sequence[tuple[str, str, tuple[int, ...]]],
    fill: Callable[[int, str], Iterable[np.ndarray]],
    metadata: dict[str, str] | None = None,
    threads: int = 1,
) -> None:
    """Write a safetensors file one tensor at a time, never holding more than one chunk in memory
    (with ``threads`` > 1: at most ``2 * threads`` chunks, written at their offsets by a pool of
    ``threads`` threads while ``fill`` makes the next: copying a decoded model into the page cache is
    kernel time that one thread would spend alone).

    ``safetensors.numpy.save_file`` needs every tensor in memory at once, which a 13 GB checkpoint
    does not allow; this writer lays out the same header (8-byte little-endian length, JSON padded with
    spaces to a multiple of 8) and streams the data.

    Parameters
    ----------
    tensors
        ``(name, dtype, shape)`` in the order to write, dtype a key of :data:`ITEMSIZE`.
    fill
        ``fill(index, name)`` yields arrays of the storage dtype whose sizes add up to the tensor's
        (for a dtype outside :data:`SUPPORTED_DTYPES`: ``uint8`` arrays of its raw bytes).
    """
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, dtype, shape in tensors:
        nbytes = ITEMSIZE[dtype] * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    path = Path(path)
    if path.is_dir():  # checked first: os.replace would fail only after the whole file was written
        raise CheckpointError(f"{path}: is a directory")
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "wb") as f, _ChunkWriter(f, threads) as out:
            out.write(struct.pack("<Q", len(blob)) + blob)
            for index, (name, dtype, shape) in enumerate(tensors):
                expected = int(np.prod(shape, dtype=np.int64))
                raw = dtype not in SUPPORTED_DTYPES
                if raw:
                    expected *= ITEMSIZE[dtype]
                written = 0
                for chunk in fill(index, name):
                    chunk = np.ascontiguousarray(chunk, dtype=np.uint8 if raw else SUPPORTED_DTYPES[dtype])
                    out.write(chunk)  # the array's own buffer: no copy
                    written += chunk.size
                if written != expected:
                    raise ValueError(f"tensor {name!r}: fill produced {written} values, shape needs {expected}")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed or interrupted write leaves no OUT.partial behind
        raise
