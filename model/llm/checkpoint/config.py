"""The llama architecture's configuration (:class:`LlamaConfig`, llama2.c's ``Config``) and the tensor
names and shapes it implies, as llama2.c orders them and as Hugging Face names them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError


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
