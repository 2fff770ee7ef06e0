"""Converting a llama between llama2.c, Hugging Face safetensors and GGUF layouts.

``export_hf_llama`` writes ``model.safetensors`` and ``config.json`` as Hugging Face's
``convert_llama_weights_to_hf.py`` lays them out, including its q/k row permutation for rotary
embeddings (:func:`~ansforge.model.llm.llama.hf_rope_permutation`), which
:func:`~ansforge.model.llm.llama.read_layout` undoes. ``export_gguf_llama`` writes a GGUF llama with the
``gguf`` package's writer, tensors in llama.cpp's names and in the original (interleaved-RoPE) row
order, as llama.cpp's converter stores them. Tensors keep their stored type (F32, F16 or BF16) and
bit patterns; nothing is rounded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .checkpoint import write_safetensors
from ..errors import ConfigError
from .llama import (CheckpointWeights, gguf_tensor_name, hf_rope_permutation, hf_tensor_name, llama_tensor_names,
                    read_layout)

__all__ = ["export_hf_llama", "export_gguf_llama"]

def _tensors(model):
    layout = read_layout(model)
    provider = CheckpointWeights(model)
    names = [n for n in llama_tensor_names(layout.config)
             if not (n == "output.weight" and layout.config.shared_classifier)]
    return layout, provider, names


def export_hf_llama(model: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Write ``model`` as a Hugging Face llama: ``out_dir/model.safetensors`` and ``config.json``."""
    layout, provider, names = _tensors(model)
    c = layout.config
    out = Path(out_dir)
    if not out.is_dir():
        raise ConfigError(f"{out}: no such directory")
    tensors = []
    for n in names:
        _, dtype = provider.tensor(layout.sources[n].name)
        tensors.append((hf_tensor_name(n), dtype, llama_tensor_names(c)[n]))

    def fill(i: int, hf_name: str):
        n = names[i]
        arr, _ = provider.tensor(layout.sources[n].name)
        arr = np.asarray(arr).reshape(llama_tensor_names(c)[n])
        if n.endswith("attention.wq.weight"):
            arr = hf_rope_permutation(arr, c.n_heads)
        elif n.endswith("attention.wk.weight"):
            arr = hf_rope_permutation(arr, c.n_kv_heads)
        yield np.ascontiguousarray(arr)

    write_safetensors(out / "model.safetensors", tensors, fill, metadata={"format": "pt"})
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": c.dim,
              "intermediate_size": c.hidden_dim, "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads,
              "num_key_value_heads": c.n_kv_heads, "vocab_size": c.vocab_size, "max_position_embeddings": c.seq_len,
              "rms_norm_eps": c.norm_eps, "rope_theta": c.rope_theta, "hidden_act": "silu",
              "tie_word_embeddings": c.shared_classifier, "bos_token_id": 1, "eos_token_id": 2,
              "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[tensors[0][1]]}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out / "model.safetensors"


def export_gguf_llama(model: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Write ``model`` as a GGUF llama (``general.architecture = llama``) with ``gguf.GGUFWriter``."""
    import gguf

    layout, provider, names = _tensors(model)
    c = layout.config
    out = Path(out)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(Path(model).stem)
    w.add_context_length(c.seq_len)
    w.add_embedding_length(c.dim)
    w.add_block_count(c.n_layers)
    w.add_feed_forward_length(c.hidden_dim)
    w.add_head_count(c.n_heads)
    w.add_head_count_kv(c.n_kv_heads)
    w.add_layer_norm_rms_eps(c.norm_eps)
    w.add_rope_freq_base(c.rope_theta)
    w.add_rope_dimension_count(c.head_size)
    w.add_vocab_size(c.vocab_size)
    for n in names:
        arr, dtype = provider.tensor(layout.sources[n].name)
        arr = np.ascontiguousarray(np.asarray(arr).reshape(llama_tensor_names(c)[n]))
        if dtype == "BF16":
            w.add_tensor(gguf_tensor_name(n), arr.view(np.uint8).reshape(*arr.shape[:-1], arr.shape[-1] * 2),
                         raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(gguf_tensor_name(n), arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
