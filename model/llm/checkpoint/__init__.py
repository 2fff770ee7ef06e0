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

The package, a module per format: ``llama2c``, ``safetensors_file``, ``sharded`` and ``gguf_file``
beside ``base`` (the interface and what the readers share), ``config`` (the llama configuration and
its tensor names), ``identify`` and ``reader`` (:func:`open_checkpoint`).

Storage convention
------------------
``TensorRecord.array`` holds the tensor *as stored*: ``float32`` for F32, ``float16`` for F16, and
``uint16`` bit patterns for BF16 (NumPy has no bfloat16). :meth:`TensorRecord.bits` always gives the
unsigned-integer view of the same bytes.
"""

from .base import (DEFAULT_EXCLUDES, ITEMSIZE, MAX_DIMS, MAX_SIZE, SUPPORTED_DTYPES, Checkpoint, TensorInfo,
                   TensorRecord, select_tensors, shape_problem)
from .config import LlamaConfig, hf_llama_config, llama2c_config_of, llama_tensor_names
from .gguf_file import GgufCheckpoint
from .identify import identify
from .llama2c import Llama2cCheckpoint
from .reader import open_checkpoint
from .safetensors_file import SafetensorsCheckpoint, write_safetensors
from .sharded import CONFIG_NAME, INDEX_NAME, Shard, ShardedCheckpoint, layout_plan, shard_name, write_sharded


__all__ = [
    "SUPPORTED_DTYPES",
    "ITEMSIZE",
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
