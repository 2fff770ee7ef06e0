"""llama2.c ``.bin`` checkpoints: the legacy header (7 little-endian int32) and the versioned fp32
export ("ak42", version 1), every tensor a view of its byte range.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

import numpy as np

from ...errors import CheckpointError, ConfigError
from .base import Checkpoint, TensorInfo, checked_size
from .config import LlamaConfig, llama_tensor_names


#: The versioned export's magic ("ak42") and header; the legacy header's 7 int32.
AK42_MAGIC = 0x616B3432
_AK42_HEADER_BYTES = 256
LEGACY_HEADER_BYTES = 28


class Llama2cCheckpoint(Checkpoint):
    """llama2.c fp32 checkpoint, legacy (version 0) or ``ak42`` version 1.

    The header is validated field by field, and the file length must equal exactly what the header
    implies: a truncated file or a header from another model is an error, never a misread.
    """

    format = "llama2c"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        file_size = checked_size(self.path)
        with open(self.path, "rb") as f:
            head = f.read(_AK42_HEADER_BYTES)
        if len(head) >= 4 and struct.unpack_from("<I", head)[0] == AK42_MAGIC:
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
            if len(head) < LEGACY_HEADER_BYTES:
                raise CheckpointError(
                    f"{self.path}: truncated llama2.c header: {len(head)} bytes, the legacy header has 28"
                )
            version = 0
            fields = struct.unpack_from("<7i", head, 0)
            shared, data_offset = fields[5] > 0, LEGACY_HEADER_BYTES
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


def plausible_llama2c(head: bytes) -> bool:
    """The legacy llama2.c header's int32 fields present in ``head`` (up to 7) are all plausible sizes."""
    n = min(len(head) // 4, 7)
    if n == 0:
        return False
    fields = struct.unpack_from(f"<{n}i", head)
    return all(0 < (abs(v) if k == 5 else v) < 1 << 24 for k, v in enumerate(fields))
