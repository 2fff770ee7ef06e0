"""Opening a checkpoint: the reader its content calls for (:func:`open_checkpoint`).
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import CheckpointError
from .base import Checkpoint
from .llama2c import Llama2cCheckpoint
from .safetensors_file import SafetensorsCheckpoint
from .sharded import ShardedCheckpoint
from .gguf_file import GgufCheckpoint
from .identify import identify, not_a_checkpoint


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
            raise not_a_checkpoint(path, what)
    readers = {"llama2c": Llama2cCheckpoint, "safetensors": SafetensorsCheckpoint, "gguf": GgufCheckpoint}
    if format not in readers:
        raise CheckpointError(f"{path}: unknown checkpoint format {format!r} (expected one of {', '.join(readers)})")
    if format == "gguf":
        return GgufCheckpoint(path, quantized=quantized)
    return readers[format](path)
