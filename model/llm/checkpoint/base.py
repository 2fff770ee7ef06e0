"""What every checkpoint reader shares: the dtypes and shapes ansforge holds (:func:`shape_problem`,
which the container shares too), a tensor's description and record, the :class:`Checkpoint` interface,
and the default selection of weight matrices (:func:`select_tensors`).
"""

from __future__ import annotations

import fnmatch
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import CheckpointError


#: Floating-point storage types the readers accept, with their NumPy storage dtype.
SUPPORTED_DTYPES: dict[str, np.dtype] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
}
#: Byte width of every safetensors dtype, for tensors passed through as raw bytes.
ITEMSIZE: dict[str, int] = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
                            "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
_BITS_DTYPE = {"F32": np.dtype("<u4"), "F16": np.dtype("<u2"), "BF16": np.dtype("<u2")}

#: Name patterns that the default selection never counts as weight matrices: RoPE tables that
#: llama2.c stores, and index buffers (``position_ids``) that Hugging Face checkpoints carry.
DEFAULT_EXCLUDES: tuple[str, ...] = ("*freq_cis*", "*rotary_emb*", "*position_ids*")

#: The shapes ansforge reads and writes, in a checkpoint and in a container alike: at most
#: :data:`MAX_DIMS` dimensions, each below :data:`MAX_SIZE`, and the product of the non-zero ones below
#: :data:`MAX_SIZE` (so a zero dimension beside a huge one is refused too: NumPy cannot hold such an
#: array, empty or not).
MAX_DIMS = 32
MAX_SIZE = 1 << 48


def shape_problem(shape: Sequence[object]) -> str | None:
    """What makes ``shape`` one that ansforge cannot hold (``None`` when it can): the one check that the
    checkpoint readers, ``compress`` (the writer) and the container reader share, so that whatever
    ``compress`` writes, ``decompress`` reads."""
    if len(shape) > MAX_DIMS:
        return f"{len(shape)} dimensions, more than {MAX_DIMS}"
    nonzero = 1
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            return f"a dimension {str(d)[:40]} that is not a size"
        if d >= MAX_SIZE:
            return f"a dimension of {d}, 2^48 or more"
        nonzero *= max(int(d), 1)
    if nonzero >= MAX_SIZE:
        return f"dimensions whose product is {nonzero}, 2^48 or more"
    return None


@dataclass(frozen=True)
class TensorInfo:
    """What a checkpoint says about one tensor, without touching its data.

    Attributes
    ----------
    name : str
        Name as stored (llama2.c tensors get Meta's names, e.g. ``layers.0.attention.wq.weight``).
    shape : tuple of int
        NumPy (row-major) shape.
    dtype : str
        Storage type as the container names it (``"F32"``, ``"F16"``, ``"BF16"``, or an unsupported
        one such as ``"I32"`` or ``"Q4_0"``, which cannot be read).
    offset : int
        Byte offset of the data in the file; two names with the same offset and size share storage.
    nbytes : int
        Size of the data in bytes.
    file : Path or None
        The file that holds the data when it is not the checkpoint's own path (a shard of a sharded
        folder); :meth:`Checkpoint.file_of` gives the file in every case.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    offset: int
    nbytes: int
    file: Path | None = None

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def supported(self) -> bool:
        return self.dtype in SUPPORTED_DTYPES


@dataclass(frozen=True)
class TensorRecord:
    """One tensor: its description and a read-only view of its stored values (see module docstring)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    array: np.ndarray

    @property
    def size(self) -> int:
        return int(self.array.size)

    def bits(self) -> np.ndarray:
        """The stored bit patterns as an unsigned array (``uint32`` for F32, ``uint16`` otherwise)."""
        return self.array.view(_BITS_DTYPE[self.dtype])


class Checkpoint(ABC):
    """A model file whose tensors are read one at a time.

    Subclasses fill ``self._infos`` (in file order) in ``__init__`` and implement :meth:`_view`.
    Instances are cheap to re-open in worker processes: pass ``(path)`` and call :func:`open_checkpoint`.
    """

    format: str = ""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._infos: list[TensorInfo] = []

    def infos(self) -> list[TensorInfo]:
        """Every tensor in file order."""
        return list(self._infos)

    def names(self) -> list[str]:
        return [info.name for info in self._infos]

    def info(self, name: str) -> TensorInfo:
        for info in self._infos:
            if info.name == name:
                return info
        raise CheckpointError(f"{self.path}: no tensor named {name!r}")

    def tensor(self, name: str) -> TensorRecord:
        """Map one tensor; raise :class:`CheckpointError` if its type cannot be read."""
        info = self.info(name)
        if not info.supported:
            raise CheckpointError(
                f"{self.path}: tensor {info.name!r} has dtype {info.dtype}; ansforge reads only "
                f"{', '.join(SUPPORTED_DTYPES)} tensors (use --exclude to skip it)"
            )
        _check_shape(self.path, info)
        return TensorRecord(info.name, info.shape, info.dtype, self._view(info))

    def __iter__(self) -> Iterator[TensorRecord]:
        for info in self._infos:
            yield self.tensor(info.name)

    def file_of(self, info: TensorInfo) -> Path:
        """The file that holds ``info``'s bytes at ``info.offset`` (the checkpoint's path, or one shard of a
        sharded folder): what a reader of raw bytes maps."""
        return info.file if info.file is not None else self.path

    def _memmap(self, info: TensorInfo) -> np.ndarray:
        dtype = SUPPORTED_DTYPES[info.dtype]
        if info.size == 0:
            return np.zeros(info.shape, dtype)
        return np.memmap(self.file_of(info), dtype=dtype, mode="r", offset=info.offset, shape=info.shape)

    @abstractmethod
    def _view(self, info: TensorInfo) -> np.ndarray: ...

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {str(self.path)!r}: {len(self._infos)} tensors>"


def _check_shape(path: Path, info: TensorInfo) -> None:
    problem = shape_problem(info.shape)
    if problem:
        raise CheckpointError(f"{path}: tensor {info.name!r} has shape {list(info.shape)}: {problem}, which "
                              "ansforge does not read")


#: What the readers take, for the messages that refuse anything else.
EXPECTED = "expected a safetensors, GGUF or llama2.c checkpoint"


def checked_size(path: Path) -> int:
    """``path``'s size in bytes, once it is known to be a regular file (else one line saying what it is)."""
    if not path.exists():
        raise CheckpointError(f"{path}: no such file")
    if path.is_dir():
        raise CheckpointError(f"{path}: is a directory; {EXPECTED} file (of a Hugging Face model folder, its "
                              "model.safetensors)")
    if not path.is_file():
        raise CheckpointError(f"{path}: not a regular file; {EXPECTED} file")
    return path.stat().st_size


def one_line(exc: BaseException) -> str:
    """The first line of a library's error, for a message of one line."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def select_tensors(
    checkpoint: Checkpoint,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> list[TensorInfo]:
    """The tensors a table counts, in file order: by default, "the matrices the paper counts".

    The default is every 2-D tensor whose name matches none of :data:`DEFAULT_EXCLUDES`. ``include``
    patterns (shell-style, matched against the whole name) replace that default with exactly the
    tensors they match, of any rank; ``exclude`` patterns then remove tensors. Tensors sharing the same
    bytes (a tied classifier) are counted once. A selected tensor of a type that cannot be read is an
    error rather than a silent omission.
    """
    include, exclude = tuple(include), tuple(exclude)
    infos = checkpoint.infos()
    if include:
        chosen = [i for i in infos if any(fnmatch.fnmatchcase(i.name, p) for p in include)]
    else:
        chosen = [i for i in infos if len(i.shape) == 2
                  and not any(fnmatch.fnmatchcase(i.name, p) for p in DEFAULT_EXCLUDES)]
    chosen = [i for i in chosen if not any(fnmatch.fnmatchcase(i.name, p) for p in exclude)]
    seen: set[tuple[Path | None, int, int]] = set()
    unique = []
    for info in chosen:
        key = (info.file, info.offset, info.nbytes)
        if info.nbytes and key in seen:
            continue
        seen.add(key)
        unique.append(info)
    for info in unique:
        if not info.supported:
            raise CheckpointError(
                f"{checkpoint.path}: tensor {info.name!r} has dtype {info.dtype}; ansforge reads only "
                f"{', '.join(SUPPORTED_DTYPES)} tensors (use --exclude {info.name!r} to skip it)"
            )
        _check_shape(checkpoint.path, info)
    if not unique:
        raise CheckpointError(f"{checkpoint.path}: the selection matches no tensor")
    return unique
