"""Lazy loading of a container for researchers: ``safe_open`` as the ``safetensors`` package shapes it.

::

    import ansforge

    with ansforge.safe_open("model.ansf", framework="numpy") as f:
        names = f.keys()
        w = f.get_tensor("encoder.layer.0.attention.self.query.weight")   # decodes this tensor's blocks only
        rows = f.get_slice("embeddings.word_embeddings.weight")[100:164]   # the blocks rows 100..163 lie in
        meta = f.metadata()

Each tensor is decoded on first access, from the container's independent blocks (container version
6; the default ``compress`` layout) that hold it, each block's CRC checked; nothing is cached beyond the
coder tables the reader keeps, so a tensor asked for twice is decoded twice. ``get_slice(name)[a:b]``
decodes only the blocks that rows ``a .. b-1`` lie in (older layouts: from the nearest checkpoint).
:attr:`LazyContainer.blocks_decoded` counts the blocks decoded so far.

The arrays are what ``decompress`` writes, tensor for tensor (the names of :meth:`LazyContainer.keys`
are its output's): ``float32`` and ``float16`` arrays for F32 and F16 tensors; **bf16 tensors as their
``uint16`` bit patterns** (NumPy has no bfloat16), fp8 tensors as ``uint8`` patterns with a float32
scalar ``NAME_scale`` beside a scaled one, a GGUF Q4_0 tensor as its ``uint8`` blocks ``(blocks, 18)``,
other tensors in their own dtype. For PyTorch, without a copy::

    t = torch.from_numpy(w)                                  # F32, F16, integer tensors
    t = torch.from_numpy(bits).view(torch.bfloat16)          # BF16 (the uint16 bit patterns)
    t = torch.from_numpy(bits).view(torch.float8_e4m3fn)     # F8_E4M3 (F8_E5M2: torch.float8_e5m2)

(ansforge does not import torch.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from ..errors import ConfigError
from ..llm.checkpoint import SUPPORTED_DTYPES
from .container import FP8_SCALE_SUFFIX, Container, open_container

__all__ = ["safe_open", "LazyContainer", "TensorSlice", "FRAMEWORKS"]

#: The ``framework`` values :func:`safe_open` takes (NumPy's names in ``safetensors``).
FRAMEWORKS = ("numpy", "np")


class TensorSlice:
    """One tensor of a :class:`LazyContainer`, not decoded: its shape and dtype, and ``[a:b, ...]``,
    which decodes only the rows ``a .. b-1`` (the blocks they lie in) and then applies the rest of the
    index. ``get_shape()`` and ``get_dtype()`` follow ``safetensors``' slices (``dtype`` as its names:
    ``F32``, ``BF16``, …)."""

    def __init__(self, owner: "LazyContainer", name: str):
        self._owner, self._name = owner, name
        self._shape, self._dtype = owner.spec(name)

    def get_shape(self) -> list[int]:
        return list(self._shape)

    def get_dtype(self) -> str:
        return self._dtype

    def __getitem__(self, key) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        if not self._shape or not key or key[0] is Ellipsis:
            return self._owner.get_tensor(self._name)[key]
        first, rest = key[0], key[1:]
        rows = self._shape[0]
        if isinstance(first, slice):
            r = range(*first.indices(rows))
            if not r:
                return self._owner.rows(self._name, 0, 0)[(slice(None), *rest)]
            lo, hi = min(r[0], r[-1]), max(r[0], r[-1]) + 1
            stop = r.stop - lo
            return self._owner.rows(self._name, lo, hi)[(slice(r.start - lo, stop if stop >= 0 else None, r.step), *rest)]
        if isinstance(first, (int, np.integer)) and not isinstance(first, bool):
            i = int(first) + rows if int(first) < 0 else int(first)
            if not 0 <= i < rows:
                raise IndexError(f"index {int(first)} is out of bounds for axis 0 with size {rows}")
            return self._owner.rows(self._name, i, i + 1)[(0, *rest)]
        return self._owner.get_tensor(self._name)[key]  # fancy indices: the whole tensor


class LazyContainer:
    """An open container whose tensors are decoded on demand (see the module and :func:`safe_open`)."""

    def __init__(self, path: str | os.PathLike[str]):
        self._c: Container = open_container(path)
        outputs: dict[str, tuple[tuple[int, ...], str, str, str]] = {}  # name → (shape, dtype, kind, record)
        for r in self._c.tensors:
            if "scales_of" in r:
                continue
            if r["coding"] == "pairs" and r["pair_format"] == "q4_0":
                outputs[r["name"]] = ((int(r["n_pairs"]) // 32, 18), "U8", "q4_0", r["name"])
                continue
            outputs[r["name"]] = (tuple(r["shape"]), r["dtype"], "tensor", r["name"])
            if "scale" in r:
                outputs[r["name"] + FP8_SCALE_SUFFIX] = ((), "F32", "scale", r["name"])
        self._outputs = outputs

    # -- safetensors' safe_open ------------------------------------------------------------------------
    def __enter__(self) -> "LazyContainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release but the file mapping, which goes with the object."""

    def keys(self) -> list[str]:
        """The tensors' names, in the order ``decompress`` writes them."""
        return list(self._outputs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._outputs)

    def __contains__(self, name: object) -> bool:
        return name in self._outputs

    def metadata(self) -> dict[str, str]:
        """The source file's safetensors metadata (``__metadata__``) as ``decompress`` writes it back."""
        c = self._c
        return dict(c.file_metadata) if c.file_metadata is not None else {"ansforge": "decompressed from " + c.path.name}

    def get_tensor(self, name: str) -> np.ndarray:
        """Tensor ``name`` decoded (every block that holds it), shaped, in its storage dtype."""
        shape, dtype, kind, rec = self._spec(name)
        if kind == "scale":
            return np.asarray(self._c.record(rec)["scale"], np.float32)
        if kind == "q4_0":  # its exact GGUF blocks, as decompress writes them
            from ..dtypes.quantized import q4_0_join
            r = self._c.record(rec)
            return q4_0_join(self._c.read(rec).ravel(), self._c.read(r["scales"]).ravel()).reshape(shape)
        return self._typed(self._c.read(rec), dtype).reshape(shape)

    def get_slice(self, name: str) -> TensorSlice:
        """Tensor ``name`` not yet decoded: ``get_slice(name)[a:b]`` decodes rows ``a .. b-1`` only."""
        self._spec(name)
        return TensorSlice(self, name)

    # -- beyond safetensors ----------------------------------------------------------------------------
    @property
    def container(self) -> Container:
        """The underlying :class:`~.container.Container` (records, streams, ``inspect``)."""
        return self._c

    @property
    def blocks_decoded(self) -> int:
        """Independent blocks decoded since the container was opened (:attr:`.Container.blocks_decoded`)."""
        return self._c.blocks_decoded

    def spec(self, name: str) -> tuple[tuple[int, ...], str]:
        """``(shape, dtype)`` of tensor ``name`` (safetensors' dtype names), without decoding it."""
        shape, dtype, _, _ = self._spec(name)
        return shape, dtype

    def rows(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo .. hi-1`` of tensor ``name`` (its first axis), decoded from the blocks they lie in."""
        shape, dtype, kind, rec = self._spec(name)
        if kind != "tensor" or not shape:
            return self.get_tensor(name)[lo:hi]
        per_row = int(np.prod(shape[1:], dtype=np.int64))
        lo = min(max(0, lo), shape[0])
        hi = min(shape[0], max(lo, hi))
        flat = self._c.read_range(rec, lo * per_row, (hi - lo) * per_row)
        return self._typed(flat, dtype).reshape(hi - lo, *shape[1:])

    def _spec(self, name: str):
        if name not in self._outputs:
            raise ConfigError(f"{self._c.path}: no tensor named {name!r}")
        return self._outputs[name]

    @staticmethod
    def _typed(values: np.ndarray, dtype: str) -> np.ndarray:
        """Decoded values (bit patterns for the float types) in the storage dtype ``decompress`` writes."""
        if dtype in SUPPORTED_DTYPES:
            return values.astype(SUPPORTED_DTYPES[dtype].str.replace("f", "u"), copy=False).view(SUPPORTED_DTYPES[dtype])
        if dtype in ("F8_E4M3", "F8_E5M2"):
            return values.astype(np.uint8, copy=False)
        return values


def safe_open(path: str | os.PathLike[str], framework: str = "numpy", device: str = "cpu") -> LazyContainer:
    """Open an ``.ansf`` container lazily, as ``safetensors.safe_open`` opens a file: use it in a ``with``
    block; ``keys()``, ``get_tensor(name)``, ``get_slice(name)[a:b]``, ``metadata()``. ``framework`` is
    ``"numpy"`` (PyTorch: ``torch.from_numpy`` on the arrays, see the module); ``device`` ``"cpu"``."""
    if framework not in FRAMEWORKS:
        raise ConfigError(f"framework {framework!r} is not supported: ansforge hands out NumPy arrays "
                          "(framework=\"numpy\"); for PyTorch, torch.from_numpy(array)")
    if device != "cpu":
        raise ConfigError(f"device {device!r} is not supported: the arrays are NumPy arrays in memory (\"cpu\")")
    return LazyContainer(path)
