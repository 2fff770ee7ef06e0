"""Checkpoint readers that stream a model tensor by tensor.

Three container formats are read through one interface, :class:`Checkpoint`:

* llama2.c ``.bin``: the legacy header (7 little-endian int32: dim, hidden_dim, n_layers, n_heads,
  n_kv_heads, vocab_size — negative when the classifier is not shared —, seq_len) and the versioned
  fp32 export (uint32 magic ``0x616b3432`` = "ak42", int32 version 1, the same 7 int32, a uint8
  shared-classifier flag, zero padding to 256 bytes);
* safetensors, through the ``safetensors`` package (header validation, names, dtypes, shapes);
* GGUF, through the ``gguf`` package's reader.

No file is ever read whole: every tensor is a read-only ``numpy.memmap`` view of its byte range, so
memory use is bounded by the tensors a caller holds at once, not by the file.

Storage convention
------------------
``TensorRecord.array`` holds the tensor *as stored*: ``float32`` for F32, ``float16`` for F16, and
``uint16`` bit patterns for BF16 (NumPy has no bfloat16). :meth:`TensorRecord.bits` always gives the
unsigned-integer view of the same bytes.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CheckpointError, ConfigError

__all__ = [
    "SUPPORTED_DTYPES",
    "DEFAULT_EXCLUDES",
    "TensorInfo",
    "TensorRecord",
    "Checkpoint",
    "Llama2cCheckpoint",
    "SafetensorsCheckpoint",
    "GgufCheckpoint",
    "LlamaConfig",
    "llama_tensor_names",
    "open_checkpoint",
    "select_tensors",
    "write_safetensors",
]

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
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    offset: int
    nbytes: int

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
        return TensorRecord(info.name, info.shape, info.dtype, self._view(info))

    def __iter__(self) -> Iterator[TensorRecord]:
        for info in self._infos:
            yield self.tensor(info.name)

    def _memmap(self, info: TensorInfo) -> np.ndarray:
        dtype = SUPPORTED_DTYPES[info.dtype]
        if info.size == 0:
            return np.zeros(info.shape, dtype)
        return np.memmap(self.path, dtype=dtype, mode="r", offset=info.offset, shape=info.shape)

    @abstractmethod
    def _view(self, info: TensorInfo) -> np.ndarray: ...

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {str(self.path)!r}: {len(self._infos)} tensors>"


# --------------------------------------------------------------------------------------------------
# llama2.c


@dataclass(frozen=True)
class LlamaConfig:
    """Shape and constants of a llama (llama2.c's ``Config``, plus the two constants it hard-codes).

    A llama2.c header gives the first eight fields (:attr:`Llama2cCheckpoint.config`); a Hugging Face
    ``config.json`` or GGUF metadata give all ten (:func:`~.llama.read_layout`). The fields are checked
    here, once: a bad value raises :class:`~ansforge.model.errors.ConfigError`.
    """

    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    seq_len: int
    shared_classifier: bool
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        for name in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError(f"llama config field {name} must be a positive integer, not {v!r}")
        if self.dim % self.n_heads:
            raise ConfigError(f"llama config field dim = {self.dim} is not a multiple of n_heads = {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(f"llama config field n_heads = {self.n_heads} is not a multiple of "
                              f"n_kv_heads = {self.n_kv_heads}")
        if self.head_size % 2:
            raise ConfigError(f"llama config: head_size = dim / n_heads = {self.head_size} must be even for RoPE")
        if not (self.norm_eps > 0 and math.isfinite(self.norm_eps)):
            raise ConfigError(f"llama config field norm_eps must be positive, not {self.norm_eps!r}")
        if not (self.rope_theta > 0 and math.isfinite(self.rope_theta)):
            raise ConfigError(f"llama config field rope_theta must be positive, not {self.rope_theta!r}")

    @property
    def head_size(self) -> int:
        return self.dim // self.n_heads

    @property
    def kv_dim(self) -> int:
        return self.dim * self.n_kv_heads // self.n_heads

    @property
    def n_params(self) -> int:
        shapes = llama_tensor_names(self)
        return sum(int(np.prod(s)) for n, s in shapes.items() if not (n == "output.weight" and self.shared_classifier))


#: The nine tensors of every llama layer, in the forward pass's order, with their shapes.
_LAYER_TENSORS: dict[str, Callable[[LlamaConfig], tuple[int, ...]]] = {
    "attention_norm.weight": lambda c: (c.dim,),
    "attention.wq.weight": lambda c: (c.dim, c.dim),
    "attention.wk.weight": lambda c: (c.kv_dim, c.dim),
    "attention.wv.weight": lambda c: (c.kv_dim, c.dim),
    "attention.wo.weight": lambda c: (c.dim, c.dim),
    "ffn_norm.weight": lambda c: (c.dim,),
    "feed_forward.w1.weight": lambda c: (c.hidden_dim, c.dim),
    "feed_forward.w2.weight": lambda c: (c.dim, c.hidden_dim),
    "feed_forward.w3.weight": lambda c: (c.hidden_dim, c.dim),
}


def llama_tensor_names(config: LlamaConfig, export_version: int | None = None) -> dict[str, tuple[int, ...]]:
    """Every tensor of a llama, by its llama2.c name, with its shape (rows, columns), in order.

    ``export_version`` ``None``: the tensors the forward pass reads, layer by layer (embedding, each
    layer's nine, final norm, classifier); ``output.weight`` is listed even when the classifier is
    shared, and then maps onto the embedding.

    ``export_version`` 0 or 1: the tensors of a llama2.c ``.bin`` in the order llama2.c's exporter
    writes them, each kind for all layers at once: the legacy version 0 (with its RoPE tables
    ``freq_cis_real`` and ``freq_cis_imag``) or the ak42 version 1; ``output.weight`` only when the
    classifier is not shared.
    """
    c = config
    emb = {"tok_embeddings.weight": (c.vocab_size, c.dim)}
    norm = {"norm.weight": (c.dim,)}
    out = {"output.weight": (c.vocab_size, c.dim)}
    if export_version is None:
        names = dict(emb)
        for layer in range(c.n_layers):
            names.update({f"layers.{layer}.{k}": shape(c) for k, shape in _LAYER_TENSORS.items()})
        return names | norm | out

    def across_layers(*kinds: str) -> dict[str, tuple[int, ...]]:
        return {f"layers.{layer}.{k}": _LAYER_TENSORS[k](c) for k in kinds for layer in range(c.n_layers)}

    classifier = {} if c.shared_classifier else out
    matrices = ("attention.wq.weight", "attention.wk.weight", "attention.wv.weight", "attention.wo.weight")
    ffn = ("feed_forward.w1.weight", "feed_forward.w2.weight", "feed_forward.w3.weight")
    if export_version == 0:
        rope = {"freq_cis_real": (c.seq_len, c.head_size // 2), "freq_cis_imag": (c.seq_len, c.head_size // 2)}
        return (emb | across_layers("attention_norm.weight", *matrices, "ffn_norm.weight", *ffn) | norm | rope
                | classifier)
    if export_version == 1:
        return (across_layers("attention_norm.weight", "ffn_norm.weight") | norm | emb | across_layers(*matrices, *ffn)
                | classifier)
    raise ConfigError(f"llama2.c export version must be 0 or 1, not {export_version!r}")


_AK42_MAGIC = 0x616B3432
_AK42_HEADER_BYTES = 256
_LEGACY_HEADER_BYTES = 28


class Llama2cCheckpoint(Checkpoint):
    """llama2.c fp32 checkpoint, legacy (version 0) or ``ak42`` version 1.

    The header is validated field by field, and the file length must equal exactly what the header
    implies: a truncated file or a header from another model is an error, never a misread.
    """

    format = "llama2c"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        file_size = _file_size(self.path)
        with open(self.path, "rb") as f:
            head = f.read(_AK42_HEADER_BYTES)
        if len(head) >= 4 and struct.unpack_from("<I", head)[0] == _AK42_MAGIC:
            if len(head) < _AK42_HEADER_BYTES:
                raise CheckpointError(
                    f"{self.path}: truncated llama2.c header: {len(head)} bytes, the ak42 header has 256"
                )
            version = struct.unpack_from("<i", head, 4)[0]
            if version != 1:
                raise CheckpointError(
                    f"{self.path}: llama2.c ak42 version {version} is not supported (only version 1, "
                    "fp32; versions 2 and 3 are int8/int4-quantized)"
                )
            fields = struct.unpack_from("<7i", head, 8)
            flag = head[36]
            if flag not in (0, 1):
                raise CheckpointError(f"{self.path}: header field shared_classifier is {flag}, not 0 or 1")
            shared, data_offset = bool(flag), _AK42_HEADER_BYTES
        else:
            if len(head) < _LEGACY_HEADER_BYTES:
                raise CheckpointError(
                    f"{self.path}: truncated llama2.c header: {len(head)} bytes, the legacy header has 28"
                )
            version = 0
            fields = struct.unpack_from("<7i", head, 0)
            shared, data_offset = fields[5] > 0, _LEGACY_HEADER_BYTES
            fields = (*fields[:5], abs(fields[5]), fields[6])
        self.version = version
        self.config = self._validate(fields, shared)
        offset = data_offset
        for name, shape in llama_tensor_names(self.config, version).items():
            nbytes = 4 * int(np.prod(shape, dtype=np.int64))
            self._infos.append(TensorInfo(name, shape, "F32", offset, nbytes))
            offset += nbytes
        if offset != file_size:
            c = self.config
            raise CheckpointError(
                f"{self.path}: llama2.c header (dim={c.dim}, hidden_dim={c.hidden_dim}, "
                f"n_layers={c.n_layers}, n_heads={c.n_heads}, n_kv_heads={c.n_kv_heads}, "
                f"vocab_size={c.vocab_size}, seq_len={c.seq_len}, shared_classifier={c.shared_classifier}) "
                f"implies {offset} bytes, but the file has {file_size}"
            )

    def _validate(self, fields: Sequence[int], shared: bool) -> LlamaConfig:
        names = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")
        for field, value in zip(names, fields):
            if not 0 < value < 1 << 24:
                raise CheckpointError(f"{self.path}: llama2.c header field {field} = {value} is not plausible")
        dim, _, _, n_heads, n_kv_heads, _, _ = fields
        if dim % n_heads:
            raise CheckpointError(f"{self.path}: header field dim = {dim} is not a multiple of n_heads = {n_heads}")
        if n_heads % n_kv_heads:
            raise CheckpointError(
                f"{self.path}: header field n_heads = {n_heads} is not a multiple of n_kv_heads = {n_kv_heads}"
            )
        try:
            return LlamaConfig(*fields, shared_classifier=shared)
        except ConfigError as e:
            raise CheckpointError(f"{self.path}: llama2.c header: {e}") from None

    def _view(self, info: TensorInfo) -> np.ndarray:
        return self._memmap(info)


# --------------------------------------------------------------------------------------------------
# safetensors


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

        _file_size(self.path)
        try:
            with safe_open(str(self.path), framework="numpy") as f:
                meta = {name: (f.get_slice(name).get_dtype(), tuple(f.get_slice(name).get_shape()))
                        for name in f.keys()}
        except Exception as exc:  # the package raises SafetensorError, OSError or ValueError
            raise CheckpointError(f"{self.path}: not a valid safetensors file: {_one_line(exc)}") from None
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


# --------------------------------------------------------------------------------------------------
# GGUF


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

        _file_size(self.path)
        try:
            self._reader = GGUFReader(str(self.path))
        except Exception as exc:
            raise CheckpointError(f"{self.path}: not a readable GGUF file: {_one_line(exc)}") from None
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


# --------------------------------------------------------------------------------------------------


def _file_size(path: Path) -> int:
    if not path.exists():
        raise CheckpointError(f"{path}: no such file")
    if not path.is_file():
        raise CheckpointError(f"{path}: not a regular file")
    return path.stat().st_size


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def open_checkpoint(path: str | os.PathLike[str], format: str | None = None, quantized: bool = False) -> Checkpoint:
    """Open a checkpoint, detecting its format from its first bytes unless ``format`` is given.

    Parameters
    ----------
    path
        File to open.
    format
        ``"llama2c"``, ``"safetensors"`` or ``"gguf"``; ``None`` detects: ``GGUF`` magic → GGUF;
        an 8-byte length followed by ``{`` → safetensors; anything else → llama2.c.
    quantized
        Open a GGUF file that holds quantized tensors (:class:`GgufCheckpoint`); their bytes are then
        the caller's to read (``TensorInfo.offset``/``nbytes``).

    Raises
    ------
    CheckpointError
        Missing, truncated or inconsistent file, or an unsupported tensor type.
    """
    path = Path(path)
    if format is None:
        _file_size(path)
        with open(path, "rb") as f:
            head = f.read(9)
        if head[:4] == b"GGUF":
            format = "gguf"
        elif len(head) == 9 and head[8:9] == b"{":
            format = "safetensors"
        else:
            format = "llama2c"
    readers = {"llama2c": Llama2cCheckpoint, "safetensors": SafetensorsCheckpoint, "gguf": GgufCheckpoint}
    if format not in readers:
        raise CheckpointError(f"{path}: unknown checkpoint format {format!r} (expected one of {', '.join(readers)})")
    if format == "gguf":
        return GgufCheckpoint(path, quantized=quantized)
    return readers[format](path)


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
    seen: set[tuple[int, int]] = set()
    unique = []
    for info in chosen:
        key = (info.offset, info.nbytes)
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
    if not unique:
        raise CheckpointError(f"{checkpoint.path}: the selection matches no tensor")
    return unique


def write_safetensors(
    path: str | os.PathLike[str],
    tensors: Sequence[tuple[str, str, tuple[int, ...]]],
    fill: Callable[[int, str], Iterable[np.ndarray]],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write a safetensors file one tensor at a time, never holding more than one chunk in memory.

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
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(blob)))
            f.write(blob)
            for index, (name, dtype, shape) in enumerate(tensors):
                expected = int(np.prod(shape, dtype=np.int64))
                raw = dtype not in SUPPORTED_DTYPES
                if raw:
                    expected *= ITEMSIZE[dtype]
                written = 0
                for chunk in fill(index, name):
                    chunk = np.ascontiguousarray(chunk, dtype=np.uint8 if raw else SUPPORTED_DTYPES[dtype])
                    f.write(chunk.data if chunk.size else b"")  # the array's own buffer: no copy
                    written += chunk.size
                if written != expected:
                    raise ValueError(f"tensor {name!r}: fill produced {written} values, shape needs {expected}")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed or interrupted write leaves no OUT.partial behind
        raise

