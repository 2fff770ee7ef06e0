"""Checkpoint readers that stream a model tensor by tensor.

Three container formats are read through one interface, :class:`Checkpoint`:

* llama2.c ``.bin``: the legacy header (7 little-endian int32: dim, hidden_dim, n_layers, n_heads,
  n_kv_heads, vocab_size — negative when the classifier is not shared —, seq_len) and the versioned
  fp32 export (uint32 magic ``0x616b3432`` = "ak42", int32 version 1, the same 7 int32, a uint8
  shared-classifier flag, zero padding to 256 bytes);
* safetensors, through the ``safetensors`` package (header validation, names, dtypes, shapes);
* GGUF, through the ``gguf`` package's reader;
* a Hugging Face model folder of sharded safetensors (:class:`ShardedCheckpoint`): a
  ``model.safetensors.index.json`` whose ``weight_map`` names each tensor's shard, or, without an
  index, every ``*.safetensors`` file of the folder in name order; :func:`write_sharded` writes one.

A file is identified by its content, never by its name (:func:`identify`): text, an ``.ansf``
container, a zip or pickle (PyTorch), or a file too short to be a checkpoint is refused with a line
that says what it is and what was expected, before any reader takes it. A GGUF file's layout is
checked against the file (every offset, the alignment, truncation) before the ``gguf`` reader maps it,
and every shape against :func:`shape_problem`, the limit the container shares.

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
    "ShardedCheckpoint",
    "Shard",
    "GgufCheckpoint",
    "LlamaConfig",
    "llama_tensor_names",
    "open_checkpoint",
    "identify",
    "shape_problem",
    "MAX_DIMS",
    "MAX_SIZE",
    "select_tensors",
    "write_safetensors",
    "write_sharded",
    "layout_plan",
    "INDEX_NAME",
    "CONFIG_NAME",
    "shard_name",
    "hf_llama_config",
    "llama2c_config_of",
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


def hf_llama_config(config: LlamaConfig, dtype: str | None = "F32") -> dict:
    """Hugging Face's ``config.json`` of a llama (``LlamaForCausalLM``): the fields
    :func:`~.llama.read_layout` reads back into ``config`` (and transformers' loader needs), with
    ``torch_dtype`` from the storage type ``dtype`` (F32, F16 or BF16; left out for another)."""
    c = config
    out = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": c.dim,
           "intermediate_size": c.hidden_dim, "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads,
           "num_key_value_heads": c.n_kv_heads, "vocab_size": c.vocab_size, "max_position_embeddings": c.seq_len,
           "rms_norm_eps": c.norm_eps, "rope_theta": c.rope_theta, "hidden_act": "silu",
           "tie_word_embeddings": c.shared_classifier, "bos_token_id": 1, "eos_token_id": 2}
    torch_dtype = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}.get(dtype or "")
    if torch_dtype:
        out["torch_dtype"] = torch_dtype
    return out


def llama2c_config_of(tensors: Sequence[tuple[str, Sequence[int]]]) -> LlamaConfig | None:
    """The configuration of a legacy llama2.c checkpoint (export version 0) from its tensors alone
    (``(name, shape)`` in file order): the RoPE tables ``freq_cis_real`` (``seq_len × head_size/2``) give
    what the shapes of the others do not (``n_heads``, ``seq_len``). ``None`` unless the tensors are
    exactly those of such a checkpoint, in its order (an ak42 version-1 file, without the tables, does
    not say its ``n_heads``)."""
    shapes = {name: tuple(int(d) for d in shape) for name, shape in tensors}
    try:
        vocab, dim = shapes["tok_embeddings.weight"]
        seq_len, half = shapes["freq_cis_real"]
        hidden, _ = shapes["layers.0.feed_forward.w1.weight"]
        kv_dim, _ = shapes["layers.0.attention.wk.weight"]
        n_layers = sum(1 for n in shapes if n.startswith("layers.") and n.endswith(".attention_norm.weight"))
        hs = 2 * half
        if not hs or dim % hs or kv_dim % hs:
            return None
        config = LlamaConfig(dim, hidden, n_layers, dim // hs, kv_dim // hs, vocab, seq_len,
                             "output.weight" not in shapes)
    except (KeyError, ValueError, ConfigError):
        return None
    want = list(llama_tensor_names(config, 0).items())
    return config if [(n, tuple(int(d) for d in s)) for n, s in tensors] == want else None


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
                + (" (truncated?)" if file_size < offset else "")
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

        size = _file_size(self.path)
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
# Sharded Hugging Face folders

#: The index file of a sharded Hugging Face folder.
INDEX_NAME = "model.safetensors.index.json"
#: The configuration file beside the shards.
CONFIG_NAME = "config.json"


def _read_text(path: Path) -> str:
    """A text file as it is (UTF-8, line ends kept), so that a writer gives it back byte for byte."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def shard_name(k: int, n: int) -> str:
    """Hugging Face's name of shard ``k`` (1-based) of ``n``: ``model-00001-of-00003.safetensors``."""
    return f"model-{k:05d}-of-{n:05d}.safetensors"


@dataclass(frozen=True)
class Shard:
    """One file of a sharded folder: its name in the folder, its tensors in file order, its metadata."""

    file: str
    names: tuple[str, ...]
    metadata: dict[str, str]


class ShardedCheckpoint(SafetensorsCheckpoint):
    """A Hugging Face model folder: safetensors shards read as one checkpoint.

    With ``model.safetensors.index.json``, its ``weight_map`` names each tensor's shard and gives the
    tensor order; without one, every ``*.safetensors`` file of the folder is a shard, in name order, and
    the tensors come shard by shard in file order. Each shard is validated as a
    :class:`SafetensorsCheckpoint` and its tensors are memory-mapped from it, one at a time, so no more
    of the model is in memory than a caller holds. Refused in one line each: an empty folder, a folder
    without shards, an index that is not a weight map, a shard the index names that is missing or is
    not a safetensors file, a tensor the index places in a shard that does not hold it, a tensor in two
    shards, and a shard tensor the index does not name.

    What a writer needs to give the folder back (:func:`write_sharded`, ``layout=``):
    :attr:`shards` (files, tensor names, each file's metadata), :attr:`index_text` (the index as
    read, ``None`` without one), :attr:`config_text` (``config.json`` as read, ``None`` without one);
    :meth:`layout` gathers them as JSON values. :attr:`metadata` is the shards' metadata when they all
    carry the same (as Hugging Face's ``{"format": "pt"}``), else the first shard's.
    """

    format = "safetensors"
    sharded = True

    def __init__(self, path: str | os.PathLike[str]) -> None:  # noqa: C901 - one check per refusal
        Checkpoint.__init__(self, path)
        folder = self.path
        if not folder.is_dir():
            raise CheckpointError(f"{folder}: not a directory; a sharded checkpoint is a Hugging Face model folder")
        entries = sorted(p.name for p in folder.iterdir())
        if not entries:
            raise CheckpointError(f"{folder}: an empty directory; {EXPECTED} file, or a Hugging Face model "
                                  f"folder ({INDEX_NAME} and its *.safetensors shards)")
        index_path = folder / INDEX_NAME
        self.index_text: str | None = None
        self.index_metadata: dict = {}
        weight_map: dict[str, str] | None = None
        if index_path.exists():
            try:
                self.index_text = _read_text(index_path)
                index = json.loads(self.index_text)
            except (OSError, ValueError, RecursionError) as e:
                raise CheckpointError(f"{index_path}: not a readable JSON index ({_one_line(e)})") from None
            weight_map = index.get("weight_map") if isinstance(index, dict) else None
            if not isinstance(weight_map, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
                raise CheckpointError(f"{index_path}: not a safetensors index (it needs a \"weight_map\" object "
                                      "from tensor names to shard file names)")
            if not weight_map:
                raise CheckpointError(f"{index_path}: its weight_map names no tensor")
            meta = index.get("metadata")
            self.index_metadata = dict(meta) if isinstance(meta, dict) else {}
            files = sorted(set(weight_map.values()))
            for f in files:
                if Path(f).name != f or f in (".", ".."):
                    raise CheckpointError(f"{index_path}: shard name {f[:80]!r} is not a file name in the folder")
        else:
            files = [e for e in entries if e.endswith(".safetensors") and (folder / e).is_file()]
            if not files:
                raise CheckpointError(f"{folder}: not a checkpoint folder: no {INDEX_NAME} and no *.safetensors "
                                      f"file (it holds {', '.join(entries[:5])}{', ...' if len(entries) > 5 else ''}); "
                                      f"{EXPECTED} file, or a Hugging Face model folder")
        config = folder / CONFIG_NAME
        self.config_text: str | None = _read_text(config) if config.is_file() else None
        self.shards: list[Shard] = []
        by_name: dict[str, TensorInfo] = {}
        where: dict[str, str] = {}
        for f in files:
            p = folder / f
            if not p.exists():
                named = next(k for k, v in weight_map.items() if v == f) if weight_map else ""
                raise CheckpointError(f"{p}: missing shard (the index places {named!r} in it)")
            if p.is_dir():
                raise CheckpointError(f"{p}: a directory where the index names a shard")
            kind, what = identify(p)
            if kind != "safetensors":
                raise CheckpointError(f"{p}: shard is not a safetensors file ({what})")
            shard = SafetensorsCheckpoint(p)
            names = []
            for info in shard.infos():
                if info.name in where:
                    raise CheckpointError(f"{folder}: tensor {info.name!r} is in two shards, {where[info.name]} "
                                          f"and {f}")
                where[info.name] = f
                by_name[info.name] = TensorInfo(info.name, info.shape, info.dtype, info.offset, info.nbytes, p)
                names.append(info.name)
            self.shards.append(Shard(f, tuple(names), dict(shard.metadata)))
        if weight_map is not None:
            for name, f in weight_map.items():
                if where.get(name) != f:
                    also = f" (it is in {where[name]})" if name in where else ""
                    raise CheckpointError(f"{index_path}: tensor {name!r} is placed in {f}, which does not hold "
                                          f"it{also}")
            extra = [n for n in where if n not in weight_map]
            if extra:
                raise CheckpointError(f"{folder / where[extra[0]]}: tensor {extra[0]!r} is not in {INDEX_NAME} "
                                      f"({len(extra)} such tensors)")
            self._infos = [by_name[n] for n in weight_map]
        else:
            self._infos = [by_name[n] for s in self.shards for n in s.names]
        metas = [s.metadata for s in self.shards]
        self.metadata = dict(metas[0]) if metas else {}

    def layout(self) -> dict:
        """The folder's layout as JSON values, for :func:`write_sharded` (``layout=``) to give it back:
        ``{"index": INDEX TEXT or None, "config": CONFIG TEXT or None, "shards": [{"file", "tensors",
        "metadata"}, ...]}``."""
        return {"index": self.index_text, "config": self.config_text,
                "shards": [{"file": s.file, "tensors": list(s.names), "metadata": dict(s.metadata)}
                           for s in self.shards]}


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

        _check_gguf(self.path)  # the whole layout against the file, before the reader takes it
        try:
            self._reader = GGUFReader(str(self.path))
        except Exception as exc:  # pragma: no cover - _check_gguf refuses what the reader cannot read
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

    size = _file_size(path)
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


def _check_shape(path: Path, info: TensorInfo) -> None:
    problem = shape_problem(info.shape)
    if problem:
        raise CheckpointError(f"{path}: tensor {info.name!r} has shape {list(info.shape)}: {problem}, which "
                              "ansforge does not read")


# --------------------------------------------------------------------------------------------------
# What a file is, from its content


#: What the readers take, for the messages that refuse anything else.
EXPECTED = "expected a safetensors, GGUF or llama2.c checkpoint"
#: What a file's extension claims it is (a file is read by its content, whatever its name).
_CLAIMED = {".safetensors": "a safetensors file", ".gguf": "a GGUF file", ".bin": "a llama2.c checkpoint"}
_ANSF_MAGIC = b"ANSFORGE"


def _plausible_llama2c(head: bytes) -> bool:
    """The legacy llama2.c header's int32 fields present in ``head`` (up to 7) are all plausible sizes."""
    n = min(len(head) // 4, 7)
    if n == 0:
        return False
    fields = struct.unpack_from(f"<{n}i", head)
    return all(0 < (abs(v) if k == 5 else v) < 1 << 24 for k, v in enumerate(fields))


def _looks_like_text(head: bytes) -> bool:
    if not head or b"\0" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not only a character cut at the end of the sample
            return False
        text = head[:e.start].decode("utf-8")
    if not text:
        return False
    return sum(c.isprintable() or c in "\t\r\n\f" for c in text) >= 0.95 * len(text)


def identify(path: str | os.PathLike[str]) -> tuple[str | None, str]:
    """What a file is, from its first bytes, whatever its name: ``(kind, description)``.

    ``kind`` is ``"safetensors"`` (an 8-byte little-endian header length, then ``{``), ``"gguf"``
    (magic ``GGUF``), ``"llama2c"`` (the ak42 magic, or a legacy header whose fields are plausible
    sizes), ``"ansf"`` (an ansforge container) or ``None``; ``description`` says what it is in a few
    words (``"it looks like text"``, ``"it is too short to be a checkpoint (27 bytes)"``), for a message
    that refuses it."""
    path = Path(path)
    size = _file_size(path)
    with open(path, "rb") as f:
        head = f.read(4096)
    if size == 0:
        return None, "it is empty"
    if head[:4] == b"GGUF":
        return "gguf", "it is a GGUF checkpoint"
    if head[:8] == _ANSF_MAGIC or (4 <= size < 8 and _ANSF_MAGIC.startswith(head)):
        return "ansf", "it is an ansforge container"
    if len(head) >= 9 and head[8:9] == b"{" and struct.unpack_from("<Q", head)[0] < 1 << 32:
        return "safetensors", "it is a safetensors checkpoint"
    if (len(head) >= 4 and struct.unpack_from("<I", head)[0] == _AK42_MAGIC) or _plausible_llama2c(head[:28]):
        return "llama2c", "it is a llama2.c checkpoint"
    if head[:4] == b"PK\x03\x04":
        return None, "it is a zip archive, as PyTorch saves checkpoints: convert it to safetensors first"
    if head[:2] == b"\x1f\x8b":
        return None, "it is gzip-compressed: uncompress it first"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return None, "it looks like a Python pickle (a PyTorch checkpoint?): convert it to safetensors first"
    text = _looks_like_text(head)
    if size < _LEGACY_HEADER_BYTES:
        return None, f"it is too short to be a checkpoint: {size} bytes{' of text' if text else ''}"
    if text:
        return None, "it looks like JSON text" if head.lstrip()[:1] in (b"{", b"[") else "it looks like text"
    return None, f"its first bytes ({head[:8].hex(' ')}) match no format ansforge reads"


def _not_a_checkpoint(path: Path, description: str) -> CheckpointError:
    claimed = _CLAIMED.get(path.suffix.lower(), "a checkpoint")
    return CheckpointError(f"{path}: not {claimed} ({description}); {EXPECTED}")


# --------------------------------------------------------------------------------------------------


def _file_size(path: Path) -> int:
    if not path.exists():
        raise CheckpointError(f"{path}: no such file")
    if path.is_dir():
        raise CheckpointError(f"{path}: is a directory; {EXPECTED} file (of a Hugging Face model folder, its "
                              "model.safetensors)")
    if not path.is_file():
        raise CheckpointError(f"{path}: not a regular file; {EXPECTED} file")
    return path.stat().st_size


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def open_checkpoint(path: str | os.PathLike[str], format: str | None = None, quantized: bool = False) -> Checkpoint:
    """Open a checkpoint, detecting its format from its first bytes unless ``format`` is given.

    Parameters
    ----------
    path
        File to open, or a Hugging Face model folder of safetensors shards (:class:`ShardedCheckpoint`).
    format
        ``"llama2c"``, ``"safetensors"`` or ``"gguf"``; ``None`` identifies the file by its content
        (:func:`identify`), whatever its name, and refuses anything else (text, an ``.ansf``
        container, a file too short to be a checkpoint) with a message that says what it is.
    quantized
        Open a GGUF file that holds quantized tensors (:class:`GgufCheckpoint`); their bytes are then
        the caller's to read (``TensorInfo.offset``/``nbytes``).

    Raises
    ------
    CheckpointError
        Missing, truncated or inconsistent file, or an unsupported tensor type.
    """
    path = Path(path)
    if path.is_dir() and format in (None, "safetensors"):
        return ShardedCheckpoint(path)
    if format is None:
        format, what = identify(path)
        if format == "ansf":
            raise CheckpointError(f"{path}: an ansforge container, not a checkpoint; `ansforge decompress {path} "
                                  "-o OUT.safetensors` gives back the checkpoint it holds")
        if format is None:
            raise _not_a_checkpoint(path, what)
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



def layout_plan(layout: object, position: dict[str, int]) -> list[tuple[str, list[int], dict[str, str]]]:
    """The shards ``(file, tensor indices, metadata)`` of a layout (which may come from a crafted
    container): every field checked, file names plain ``*.safetensors`` names in the folder, each
    tensor of ``position`` in exactly one shard; anything else is a :class:`ConfigError`."""
    def bad(why: str) -> ConfigError:
        return ConfigError(f"shard layout: {why}")

    if not isinstance(layout, dict) or not isinstance(layout.get("shards"), list) or not layout["shards"]:
        raise bad("not an object with a non-empty list of shards")
    for key in ("index", "config"):
        if not isinstance(layout.get(key), (str, type(None))):
            raise bad(f"{key} is neither a text nor null")
    plan, files, seen = [], set(), set()
    for s in layout["shards"]:
        if not isinstance(s, dict) or not isinstance(s.get("file"), str) or not isinstance(s.get("tensors"), list):
            raise bad("a shard is not an object with a file name and a list of tensors")
        f, names, meta = s["file"], s["tensors"], s.get("metadata") or {}
        if Path(f).name != f or not f.endswith(".safetensors") or f in files or f in (INDEX_NAME, CONFIG_NAME):
            raise bad(f"shard file name {f[:80]!r} is not a new *.safetensors name in the folder")
        files.add(f)
        if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            raise bad(f"shard {f}: metadata is not an object of texts")
        for n in names:
            if not isinstance(n, str) or n not in position or n in seen:
                raise bad(f"shard {f}: tensor {str(n)[:80]!r} is not one of the tensors written, or is in two shards")
            seen.add(n)
        plan.append((f, [position[n] for n in names], dict(meta)))
    if len(seen) != len(position):
        missing = next(n for n in position if n not in seen)
        raise bad(f"tensor {missing[:80]!r} is in no shard")
    return plan


def _index_for(text: str, plan: list[tuple[str, list[int], dict[str, str]]],
               tensors: Sequence[tuple[str, str, tuple[int, ...]]]) -> str:
    """The index text of a layout, as read when its weight map names exactly the shards' tensors where
    the plan puts them; else (tensors added to a shard, e.g. an fp8 tensor's ``NAME_scale``) rebuilt
    with its other metadata, ``total_size`` recomputed and the weight map in ``tensors`` order."""
    file_of = {tensors[k][0]: f for f, ks, _ in plan for k in ks}
    try:
        index = json.loads(text)
        old = index["weight_map"]
        meta = dict(index.get("metadata") or {})
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ConfigError("shard layout: its index is not a safetensors index") from None
    if old == file_of:
        return text
    meta["total_size"] = sum(ITEMSIZE[d] * int(np.prod(s, dtype=np.int64)) for _, d, s in tensors)
    return json.dumps({"metadata": meta, "weight_map": {n: file_of[n] for n, _, _ in tensors}}, indent=2) + "\n"


def write_sharded(
    folder: str | os.PathLike[str],
    tensors: Sequence[tuple[str, str, tuple[int, ...]]],
    fill: Callable[[int, str], Iterable[np.ndarray]],
    *,
    max_shard_bytes: int = 5 * 10**9,
    config: str | dict | None = None,
    metadata: dict[str, str] | None = None,
    index_metadata: dict | None = None,
    layout: dict | None = None,
) -> list[str]:
    """Write tensors as a Hugging Face sharded folder, one tensor at a time; returns the shard names.

    ``tensors`` and ``fill`` are those of :func:`write_safetensors` (``fill(index, name)``, ``index`` into
    ``tensors``). The folder is created if need be; each shard is written atomically (``.partial``, then
    renamed), the index and ``config.json`` last.

    Without ``layout``: consecutive tensors fill shards of at most ``max_shard_bytes`` of data (a tensor
    larger than that gets a shard of its own), named ``model-0000k-of-0000n.safetensors``, each with
    ``metadata`` in its header; ``model.safetensors.index.json`` holds ``{"metadata": {"total_size": ...,
    **index_metadata}, "weight_map": ...}`` with the tensors in the order given, and ``config`` (a dict,
    or a text written as is) becomes ``config.json``.

    With ``layout`` (:meth:`ShardedCheckpoint.layout` of the folder read, as JSON values): the same
    shard files holding the same tensors in the same order with the same metadata, the index text and
    the config text as read (no index / no config when the folder had none); ``tensors`` must then hold
    exactly the layout's tensors (any order: each shard is written in its own order), and
    ``max_shard_bytes``, ``config``, ``metadata`` and ``index_metadata`` must not be given.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise CheckpointError(f"{folder}: is a file, not a directory")
    position = {name: k for k, (name, _, _) in enumerate(tensors)}
    if len(position) != len(tensors):
        raise ConfigError("write_sharded: a tensor name appears twice")
    if layout is not None:
        if config is not None or metadata is not None or index_metadata is not None:
            raise ConfigError("write_sharded: layout gives the config and the metadata; do not pass them too")
        plan = layout_plan(layout, position)
        index_text, config_text = layout.get("index"), layout.get("config")
        if index_text is not None:
            index_text = _index_for(index_text, plan, tensors)
    else:
        if isinstance(max_shard_bytes, bool) or not isinstance(max_shard_bytes, int) or max_shard_bytes < 1:
            raise ConfigError(f"max_shard_bytes must be a positive integer, not {max_shard_bytes!r}")
        groups: list[list[int]] = []
        size = 0
        for k, (name, dtype, shape) in enumerate(tensors):
            nbytes = ITEMSIZE[dtype] * int(np.prod(shape, dtype=np.int64))
            if not groups or (size + nbytes > max_shard_bytes and groups[-1]):
                groups.append([])
                size = 0
            groups[-1].append(k)
            size += nbytes
        n = len(groups)
        plan = [(shard_name(i + 1, n), ks, dict(metadata or {})) for i, ks in enumerate(groups)]
        total = sum(ITEMSIZE[d] * int(np.prod(s, dtype=np.int64)) for _, d, s in tensors)
        file_of = {tensors[k][0]: f for f, ks, _ in plan for k in ks}
        index_text = json.dumps({"metadata": {"total_size": total, **(index_metadata or {})},
                                 "weight_map": {name: file_of[name] for name, _, _ in tensors}}, indent=2) + "\n"
        config_text = config if isinstance(config, str) or config is None else json.dumps(config, indent=2) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    for file, ks, meta in plan:
        write_safetensors(folder / file, [tensors[k] for k in ks], lambda i, name, ks=ks: fill(ks[i], name),
                          metadata=meta or None)
    for name, text in ((INDEX_NAME, index_text), (CONFIG_NAME, config_text)):
        if text is not None:
            tmp = folder / (name + ".partial")
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            os.replace(tmp, folder / name)
    return [file for file, _, _ in plan]
