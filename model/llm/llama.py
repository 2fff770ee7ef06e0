"""A NumPy llama with llama2.c's ``run.c`` semantics, fed by any weight provider.

The forward pass is ``run.c``'s ``forward()``, one token at a time with a KV cache, in fp32:

* RMSNorm: ``w * x / sqrt(mean(x**2) + eps)``, eps 1e-5 (``config.norm_eps``);
* RoPE on interleaved pairs ``(x[2i], x[2i+1])`` of every head, frequency
  ``theta ** (-(2i) / head_size)``, theta 10000 (``config.rope_theta``), applied to q and k;
* grouped-query attention: query head ``h`` reads key/value head ``h // (n_heads // n_kv_heads)``,
  scores scaled by ``1 / sqrt(head_size)``, softmax over positions ``0 .. pos``;
* SwiGLU feed-forward: ``w2 @ (silu(w1 @ x) * (w3 @ x))``;
* the classifier is ``output.weight``, or the token embedding when shared.

Weights are named as llama2.c's exporter names them (``layers.{l}.attention.wq.weight``, …; see
:func:`llama_tensor_names`), whatever the checkpoint calls them: :func:`read_layout` maps a llama2.c
``.bin``, a Hugging Face Llama ``safetensors`` + ``config.json`` (undoing HF's q/k row permutation for
rotary embeddings) or a GGUF llama onto those names, and checks every tensor's shape against the
configuration. A :class:`WeightProvider` then supplies the stored tensors — as loaded, decompressed
by the golden codec, or decompressed by the cycle-simulated cores (:mod:`ansforge.sim.weights`) —
so that the same forward pass runs on each, and identical weights give identical logits.

Matrices may stay 16-bit in memory (:class:`StoredMatrix`): a bf16 matrix is held as its uint16 bit
patterns and widened to fp32 for each matrix-vector product, as the bf16 matmul of the seed documents
does, so a model needs half the memory of its fp32 form.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from .checkpoint import (Checkpoint, GgufCheckpoint, Llama2cCheckpoint, LlamaConfig, SafetensorsCheckpoint,
                         llama_tensor_names, open_checkpoint)
from ..errors import CheckpointError, ConfigError
from ..dtypes.pairs import convert

__all__ = ["LlamaConfig", "LlamaLayout", "TensorSource", "read_layout", "llama_tensor_names", "WeightProvider",
           "CheckpointWeights", "ContainerWeights", "StoredMatrix", "LlamaWeights", "Llama", "WEIGHT_DTYPES", "undo_hf_rope_permutation", "stored_from_bits",
           "hf_rope_permutation", "Generation", "generate", "hf_tensor_name", "gguf_tensor_name"]

#: Weight storage modes: the checkpoint's own storage (``None``), or every matrix in one dtype.
WEIGHT_DTYPES = ("fp32", "bf16", "fp16")
_STORED = {"fp32": "F32", "bf16": "BF16", "fp16": "F16"}


# --------------------------------------------------------------------------------------------------
# Layouts: where each llama tensor lives in a checkpoint


@dataclass(frozen=True)
class TensorSource:
    """Where a llama tensor is stored: the checkpoint's name for it, and how to read it.

    ``unpermute_heads`` > 0 undoes Hugging Face's rotary permutation of q/k rows for that many heads
    (:func:`undo_hf_rope_permutation`).
    """

    name: str
    unpermute_heads: int = 0


@dataclass
class LlamaLayout:
    """A checkpoint read as a llama: its configuration and, per llama2.c tensor name, its source."""

    path: Path
    format: str
    config: LlamaConfig
    sources: dict[str, TensorSource]
    stored_dtypes: dict[str, str] = field(default_factory=dict)   # checkpoint name → F32/F16/BF16

    def source_names(self) -> list[str]:
        """Checkpoint tensors the forward pass reads, each once (a shared classifier is the embedding)."""
        return list(dict.fromkeys(s.name for s in self.sources.values()))


def hf_rope_permutation(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Hugging Face's ``permute`` of q/k rows (``convert_llama_weights_to_hf.py``): within each head,
    rows ``(2i, 2i+1)`` — RoPE's interleaved pairs — move to ``(i, i + head_size/2)``."""
    rows, cols = w.shape
    hs = rows // n_heads
    return w.reshape(n_heads, hs // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def undo_hf_rope_permutation(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Inverse of :func:`hf_rope_permutation`: HF's half-split rows back to interleaved pairs."""
    rows, cols = w.shape
    hs = rows // n_heads
    return w.reshape(n_heads, 2, hs // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def _identity_sources(config: LlamaConfig) -> dict[str, TensorSource]:
    src = {n: TensorSource(n) for n in llama_tensor_names(config)}
    if config.shared_classifier:
        src["output.weight"] = TensorSource("tok_embeddings.weight")
    return src


def _hf_config(path: Path, config_path: Path | None) -> tuple[Path, LlamaConfig]:
    cfg_path = config_path or (path / "config.json" if path.is_dir() else path.with_name("config.json"))
    if not cfg_path.is_file():
        raise CheckpointError(f"{path}: a Hugging Face llama needs its config.json beside it ({cfg_path} is missing)")
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{cfg_path}: not readable JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{cfg_path}: not a JSON object")
    arch = cfg.get("model_type")
    if arch not in (None, "llama"):
        raise CheckpointError(f"{cfg_path}: model_type is {arch!r}; only llama checkpoints run")
    if cfg.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{cfg_path}: hidden_act is {cfg['hidden_act']!r}; the llama forward pass uses silu")
    if cfg.get("rope_scaling"):
        raise CheckpointError(f"{cfg_path}: rope_scaling {cfg['rope_scaling']!r} is not supported (plain RoPE only)")
    need = {"hidden_size": "dim", "intermediate_size": "hidden_dim", "num_hidden_layers": "n_layers",
            "num_attention_heads": "n_heads", "vocab_size": "vocab_size"}
    for key in need:
        if key not in cfg:
            raise CheckpointError(f"{cfg_path}: field {key} is missing")
    try:
        return cfg_path, LlamaConfig(
            dim=cfg["hidden_size"], hidden_dim=cfg["intermediate_size"], n_layers=cfg["num_hidden_layers"],
            n_heads=cfg["num_attention_heads"], n_kv_heads=cfg.get("num_key_value_heads") or cfg["num_attention_heads"],
            vocab_size=cfg["vocab_size"], seq_len=cfg.get("max_position_embeddings", 2048),
            shared_classifier=bool(cfg.get("tie_word_embeddings", False)),
            norm_eps=float(cfg.get("rms_norm_eps", 1e-5)), rope_theta=float(cfg.get("rope_theta", 10000.0)))
    except ConfigError as e:
        raise CheckpointError(f"{cfg_path}: {e}") from None


_HF_NAMES = {"attention_norm.weight": "input_layernorm.weight", "attention.wq.weight": "self_attn.q_proj.weight",
             "attention.wk.weight": "self_attn.k_proj.weight", "attention.wv.weight": "self_attn.v_proj.weight",
             "attention.wo.weight": "self_attn.o_proj.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
             "feed_forward.w1.weight": "mlp.gate_proj.weight", "feed_forward.w2.weight": "mlp.down_proj.weight",
             "feed_forward.w3.weight": "mlp.up_proj.weight"}


def _renamed(name: str, top: dict[str, str], layer_fmt: str, per_layer: dict[str, str]) -> str:
    if name in top:
        return top[name]
    _, layer, rest = name.split(".", 2)
    return layer_fmt.format(layer) + per_layer[rest]


def hf_tensor_name(name: str) -> str:
    """Hugging Face (``LlamaForCausalLM``) name of a llama2.c tensor name."""
    return _renamed(name, {"tok_embeddings.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight",
                           "output.weight": "lm_head.weight"}, "model.layers.{}.", _HF_NAMES)


def _hf_sources(config: LlamaConfig, names: set[str]) -> dict[str, TensorSource]:
    src = {}
    for name in llama_tensor_names(config):
        heads = config.n_heads if name.endswith("attention.wq.weight") else \
            config.n_kv_heads if name.endswith("attention.wk.weight") else 0
        src[name] = TensorSource(hf_tensor_name(name), heads)
    if config.shared_classifier or "lm_head.weight" not in names:
        src["output.weight"] = TensorSource("model.embed_tokens.weight")
    return src


_GGUF_NAMES = {"attention_norm.weight": "attn_norm.weight", "attention.wq.weight": "attn_q.weight",
               "attention.wk.weight": "attn_k.weight", "attention.wv.weight": "attn_v.weight",
               "attention.wo.weight": "attn_output.weight", "ffn_norm.weight": "ffn_norm.weight",
               "feed_forward.w1.weight": "ffn_gate.weight", "feed_forward.w2.weight": "ffn_down.weight",
               "feed_forward.w3.weight": "ffn_up.weight"}


def gguf_tensor_name(name: str) -> str:
    """GGUF (llama.cpp) name of a llama2.c tensor name."""
    return _renamed(name, {"tok_embeddings.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
                           "output.weight": "output.weight"}, "blk.{}.", _GGUF_NAMES)


def _gguf_config(ck: GgufCheckpoint) -> LlamaConfig:
    def get(key: str, default=None):
        v = ck.metadata(key)
        if v is None:
            if default is None:
                raise CheckpointError(f"{ck.path}: GGUF metadata {key} is missing")
            return default
        return v

    arch = get("general.architecture")
    if arch != "llama":
        raise CheckpointError(f"{ck.path}: GGUF general.architecture is {arch!r}; only llama checkpoints run")
    emb = next((i for i in ck.infos() if i.name == "token_embd.weight"), None)
    if emb is None:
        raise CheckpointError(f"{ck.path}: GGUF tensor token_embd.weight is missing")
    heads = int(get("llama.attention.head_count"))
    try:
        return LlamaConfig(
            dim=int(get("llama.embedding_length")), hidden_dim=int(get("llama.feed_forward_length")),
            n_layers=int(get("llama.block_count")), n_heads=heads,
            n_kv_heads=int(get("llama.attention.head_count_kv", heads)),
            vocab_size=int(get("llama.vocab_size", emb.shape[0])), seq_len=int(get("llama.context_length")),
            shared_classifier=not any(i.name == "output.weight" for i in ck.infos()),
            norm_eps=float(get("llama.attention.layer_norm_rms_epsilon", 1e-5)),
            rope_theta=float(get("llama.rope.freq_base", 10000.0)))
    except ConfigError as e:
        raise CheckpointError(f"{ck.path}: GGUF metadata: {e}") from None


def read_layout(path: str | Path, *, config: str | Path | None = None) -> LlamaLayout:
    """Read a checkpoint as a llama: configuration, tensor sources, and every shape checked.

    Parameters
    ----------
    path
        llama2.c ``.bin`` (legacy or ak42 version 1), Hugging Face Llama ``.safetensors`` (with
        ``config.json`` beside it, or ``config``) or sharded folder (its ``config.json``), or GGUF with
        ``general.architecture = llama``.

    Raises
    ------
    CheckpointError
        The file is not a llama, a tensor is missing, or a tensor's shape disagrees with the
        configuration (the message names the tensor, both shapes and the configuration fields).
    """
    path = Path(path)
    ck = open_checkpoint(path)
    infos = {i.name: i for i in ck.infos()}
    if isinstance(ck, Llama2cCheckpoint):
        cfg = ck.config
        sources = _identity_sources(cfg)
    elif isinstance(ck, SafetensorsCheckpoint):
        _, cfg = _hf_config(path, Path(config) if config else None)
        # llama2.c's own names (a decompressed llama2.c checkpoint keeps them, losslessly) or Hugging Face's
        sources = _identity_sources(cfg) if "tok_embeddings.weight" in infos else _hf_sources(cfg, set(infos))
    elif isinstance(ck, GgufCheckpoint):
        cfg = _gguf_config(ck)
        sources = {n: TensorSource(gguf_tensor_name(n)) for n in llama_tensor_names(cfg)}
        if cfg.shared_classifier:
            sources["output.weight"] = TensorSource("token_embd.weight")
    else:  # pragma: no cover - open_checkpoint knows three formats
        raise CheckpointError(f"{path}: not a llama checkpoint")
    layout = LlamaLayout(path, ck.format, cfg, sources)
    _check_shapes(ck, layout, infos)
    return layout


def _check_shapes(ck: Checkpoint, layout: LlamaLayout, infos: dict) -> None:
    c = layout.config
    dims = (f"dim={c.dim}, hidden_dim={c.hidden_dim}, n_layers={c.n_layers}, n_heads={c.n_heads}, "
            f"n_kv_heads={c.n_kv_heads}, vocab_size={c.vocab_size}")
    for name, shape in llama_tensor_names(c).items():
        src = layout.sources[name]
        info = infos.get(src.name)
        if info is None:
            raise CheckpointError(f"{ck.path}: tensor {src.name!r} ({name}) is missing")
        if tuple(info.shape) != shape:
            raise CheckpointError(f"{ck.path}: tensor {src.name!r} has shape {tuple(info.shape)}, but the "
                                  f"configuration ({dims}) implies {shape}")
        if info.dtype not in ("F32", "F16", "BF16"):
            raise CheckpointError(f"{ck.path}: tensor {src.name!r} has dtype {info.dtype}; the llama reads "
                                  "F32, F16 and BF16 weights")
        layout.stored_dtypes[src.name] = info.dtype


# --------------------------------------------------------------------------------------------------
# Weight providers


class WeightProvider(Protocol):
    """Supplies a checkpoint's tensors by their checkpoint names, as stored.

    ``tensor`` returns ``(array, dtype)``: float32 for ``F32``, float16 for ``F16`` and uint16 bit
    patterns for ``BF16`` (the :mod:`~ansforge.model.llm.checkpoint` storage convention).
    """

    name: str

    def tensor(self, name: str) -> tuple[np.ndarray, str]: ...


class CheckpointWeights:
    """The ``raw`` provider: tensors as the checkpoint stores them, or rounded to ``pairs``.

    ``pairs="bf16"`` gives each tensor rounded to bf16 (round to nearest even), which is what a
    container of bf16 coding pairs holds: the reference for the ``software`` and ``hardware`` paths
    with bf16 pairs. ``pairs="fp32"``/``None`` gives the stored tensor.
    """

    name = "raw"

    def __init__(self, path: str | Path, pairs: str | None = None) -> None:
        if pairs not in (None, "auto", "bf16", "fp16", "fp32"):
            raise ConfigError(f"pairs must be auto, bf16, fp16 or fp32, not {pairs!r}")
        self.checkpoint = open_checkpoint(path)
        self.pairs = None if pairs == "auto" else pairs

    def tensor(self, name: str) -> tuple[np.ndarray, str]:
        rec = self.checkpoint.tensor(name)
        if self.pairs is None or _STORED[self.pairs] == rec.dtype:
            return np.asarray(rec.array), rec.dtype
        bits, _ = convert(rec.array, rec.dtype, self.pairs)
        return stored_from_bits(bits, _STORED[self.pairs]), _STORED[self.pairs]


class ContainerWeights:
    """The ``software`` provider: tensors decompressed from an ansforge container by the golden codec.

    Every block's CRC-32 is checked as it is decoded (:class:`~ansforge.model.coding.container.Container`).
    """

    name = "software"

    def __init__(self, container) -> None:
        from ..coding.container import Container, open_container
        self.container = container if isinstance(container, Container) else open_container(container)

    def tensor(self, name: str) -> tuple[np.ndarray, str]:
        rec = self.container.record(name)
        if rec["coding"] != "pairs":
            raise CheckpointError(f"{self.container.path}: tensor {name!r} is stored raw ({rec['dtype']}), "
                                  "not as float coding pairs")
        return stored_from_bits(self.container.read(name), rec["dtype"]), rec["dtype"]


def stored_from_bits(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Stored form of bit patterns: float32/float16 views, bf16 kept as uint16."""
    if dtype == "F32":
        return bits.astype(np.uint32, copy=False).view(np.float32)
    if dtype == "F16":
        return bits.astype(np.uint16, copy=False).view(np.float16)
    return bits.astype(np.uint16, copy=False)


# --------------------------------------------------------------------------------------------------
# Weights in memory


class StoredMatrix:
    """A weight tensor held in its storage dtype and widened to fp32 where it is used.

    ``dtype`` is ``F32`` (float32), ``F16`` (float16) or ``BF16`` (uint16 bit patterns). A
    matrix-vector product widens the whole matrix for that product only: fp32 compute, 16-bit memory.
    """

    __slots__ = ("data", "dtype")

    def __init__(self, data: np.ndarray, dtype: str) -> None:
        if dtype not in ("F32", "F16", "BF16"):
            raise ConfigError(f"stored dtype must be F32, F16 or BF16, not {dtype!r}")
        self.data = np.ascontiguousarray(data)
        self.dtype = dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    def widen(self, rows: slice | int | None = None) -> np.ndarray:
        """fp32 values (of ``rows`` only, if given); exact for every storage dtype."""
        d = self.data if rows is None else self.data[rows]
        if self.dtype == "F32":
            return d
        if self.dtype == "F16":
            return d.astype(np.float32)
        return (d.astype(np.uint32) << np.uint32(16)).view(np.float32)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.widen() @ x

    def bits(self) -> np.ndarray:
        """The stored bit patterns (uint32 for F32, uint16 otherwise)."""
        return self.data.view(np.uint32 if self.dtype == "F32" else np.uint16)


class LlamaWeights:
    """Every tensor of a llama, by llama2.c name, from a provider (see :meth:`load`)."""

    def __init__(self, config: LlamaConfig, tensors: dict[str, StoredMatrix]) -> None:
        missing = [n for n in llama_tensor_names(config) if n not in tensors]
        if missing:
            raise ConfigError(f"llama weights lack tensor {missing[0]!r}")
        self.config = config
        self.tensors = tensors

    @classmethod
    def load(cls, layout: LlamaLayout, provider: WeightProvider, dtype: str | None = None) -> "LlamaWeights":
        """Fetch each source tensor once from ``provider``, un-permute HF q/k, store as ``dtype``.

        ``dtype`` ``None`` keeps what the provider gives; ``fp32`` widens, ``bf16`` and ``fp16``
        round to nearest even (a 16-bit provider's tensors stay as they are).
        """
        if dtype is not None and dtype not in WEIGHT_DTYPES:
            raise ConfigError(f"weight dtype must be one of {', '.join(WEIGHT_DTYPES)}, not {dtype!r}")
        fetched: dict[str, StoredMatrix] = {}
        for src_name in layout.source_names():
            arr, st = provider.tensor(src_name)
            if dtype is not None and _STORED[dtype] != st:
                bits, _ = convert(arr, st, dtype)
                arr, st = stored_from_bits(bits, _STORED[dtype]), _STORED[dtype]
            fetched[src_name] = StoredMatrix(np.asarray(arr), st)
        out: dict[str, StoredMatrix] = {}
        shapes = llama_tensor_names(layout.config)
        for name, src in layout.sources.items():
            m = fetched[src.name]
            data = m.data.reshape(shapes[name]) if m.data.size == int(np.prod(shapes[name])) else m.data
            if tuple(data.shape) != shapes[name]:
                raise CheckpointError(f"{layout.path}: provider {provider.name} gave tensor {src.name!r} with shape "
                                      f"{tuple(m.data.shape)}, expected {shapes[name]}")
            if src.unpermute_heads:
                data = undo_hf_rope_permutation(data, src.unpermute_heads)
            out[name] = m if data is m.data else StoredMatrix(data, m.dtype)
        return cls(layout.config, out)

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes for m in {id(m): m for m in self.tensors.values()}.values())

    def __getitem__(self, name: str) -> StoredMatrix:
        return self.tensors[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)


# --------------------------------------------------------------------------------------------------
# Forward pass


class Llama:
    """llama2.c's transformer, one position per :meth:`forward` call, fp32 compute.

    The KV cache holds ``seq_len`` positions per layer (``2 * n_layers * seq_len * kv_dim`` fp32);
    :meth:`forward` at ``pos`` overwrites that slot and attends over ``0 .. pos``, so a generation
    restarts by calling it from ``pos = 0`` again. Norm weights are widened once; matrices stay in
    their storage dtype (:class:`StoredMatrix`).
    """

    def __init__(self, weights: LlamaWeights) -> None:
        self.config = c = weights.config
        self.weights = weights
        f32 = np.float32
        self._norms = {n: weights[n].widen().astype(f32, copy=False) for n in weights if n.endswith("norm.weight")}
        hs = c.head_size
        # run.c: freq = 1 / powf(theta, head_dim / (float)head_size), val = pos * freq, all in float32.
        freq = f32(1.0) / np.power(f32(c.rope_theta), np.arange(0, hs, 2, dtype=f32) / f32(hs))
        ang = np.arange(c.seq_len, dtype=f32)[:, None] * freq[None, :]
        self._cos, self._sin = np.cos(ang).astype(f32), np.sin(ang).astype(f32)
        self._key_cache = np.zeros((c.n_layers, c.seq_len, c.n_kv_heads, hs), f32)
        self._value_cache = np.zeros_like(self._key_cache)
        self._scale = f32(1.0 / math.sqrt(hs))

    def _rmsnorm(self, x: np.ndarray, name: str) -> np.ndarray:
        ss = np.float32(np.dot(x, x)) / np.float32(x.size) + np.float32(self.config.norm_eps)
        return self._norms[name] * (x * (np.float32(1.0) / np.sqrt(ss)))

    def _rope(self, v: np.ndarray, pos: int) -> np.ndarray:
        hs = self.config.head_size
        pairs = v.reshape(-1, hs // 2, 2)
        c, s = self._cos[pos], self._sin[pos]
        v0, v1 = pairs[..., 0], pairs[..., 1]
        out = np.empty_like(pairs)
        out[..., 0] = v0 * c - v1 * s
        out[..., 1] = v0 * s + v1 * c
        return out.reshape(v.shape)

    def forward(self, token: int, pos: int) -> np.ndarray:
        """Logits (``vocab_size`` fp32) for ``token`` at position ``pos``."""
        c, w = self.config, self.weights
        if not 0 <= token < c.vocab_size:
            raise ConfigError(f"token id {token} is outside the vocabulary (0..{c.vocab_size - 1})")
        if not 0 <= pos < c.seq_len:
            raise ConfigError(f"position {pos} is outside the context (seq_len = {c.seq_len})")
        hs, group = c.head_size, c.n_heads // c.n_kv_heads
        x = w["tok_embeddings.weight"].widen(token).astype(np.float32, copy=True)
        for layer in range(c.n_layers):
            p = f"layers.{layer}."
            xb = self._rmsnorm(x, p + "attention_norm.weight")
            q = self._rope(w[p + "attention.wq.weight"].matvec(xb), pos)
            k = self._rope(w[p + "attention.wk.weight"].matvec(xb), pos)
            self._key_cache[layer, pos] = k.reshape(c.n_kv_heads, hs)
            self._value_cache[layer, pos] = w[p + "attention.wv.weight"].matvec(xb).reshape(c.n_kv_heads, hs)
            keys = self._key_cache[layer, :pos + 1]             # (t, kv_heads, hs)
            values = self._value_cache[layer, :pos + 1]
            qh = q.reshape(c.n_kv_heads, group, hs)
            scores = np.einsum("kgh,tkh->kgt", qh, keys) * self._scale
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            att = np.einsum("kgt,tkh->kgh", scores, values).reshape(c.dim)
            x = x + w[p + "attention.wo.weight"].matvec(att)
            xb = self._rmsnorm(x, p + "ffn_norm.weight")
            h1 = w[p + "feed_forward.w1.weight"].matvec(xb)
            h3 = w[p + "feed_forward.w3.weight"].matvec(xb)
            with np.errstate(over="ignore"):    # exp(-h) overflows to inf for h << 0: silu(h) = 0
                h = h1 * (np.float32(1.0) / (np.float32(1.0) + np.exp(-h1))) * h3
            x = x + w[p + "feed_forward.w2.weight"].matvec(h)
        x = self._rmsnorm(x, "norm.weight")
        return w["output.weight"].matvec(x)


# --------------------------------------------------------------------------------------------------
# Generation


@dataclass
class Generation:
    """What :func:`generate` produced.

    ``tokens`` are the sampled tokens (the prompt excluded); ``steps`` the forward passes run;
    ``seconds`` the wall time of the primary model's forward passes. With a reference model,
    ``mismatch`` is the first step whose logits differ (``None``: identical at every step) and
    ``max_abs_diff`` the largest logit difference seen.
    """

    prompt: list[int]
    tokens: list[int] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0
    compared: bool = False
    mismatch: int | None = None
    max_abs_diff: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0


def generate(model: Llama, prompt: list[int], steps: int, sampler, *, reference: Llama | None = None,
             on_token=None, stop_at_bos: bool = True) -> Generation:
    """``run.c``'s ``generate``: feed ``prompt`` (starting with BOS) token by token, then sample.

    ``steps`` tokens are generated after the prompt (fewer if the context ends, or, as ``run.c``,
    when the model samples BOS, which delimits sequences). ``reference``, if given, runs in lockstep
    on the same tokens and its logits are compared with ``np.array_equal`` at every step.
    ``on_token(prev, token)`` is called for each generated token.
    """
    import time

    c = model.config
    if not prompt:
        raise ConfigError("the prompt must hold at least one token (BOS)")
    if len(prompt) > c.seq_len:
        raise ConfigError(f"the prompt is {len(prompt)} tokens, longer than the model's context "
                          f"(seq_len = {c.seq_len})")
    if steps < 0:
        raise ConfigError(f"steps must be >= 0, not {steps}")
    out = Generation(list(prompt), compared=reference is not None)
    token, pos = prompt[0], 0
    end = min(c.seq_len, len(prompt) - 1 + steps)
    while pos < end:
        t0 = time.perf_counter()
        logits = model.forward(token, pos)
        out.seconds += time.perf_counter() - t0
        out.steps += 1
        if reference is not None:
            ref = reference.forward(token, pos)
            if not np.array_equal(logits, ref):
                out.max_abs_diff = max(out.max_abs_diff, float(np.nanmax(np.abs(logits - ref))))
                if out.mismatch is None:
                    out.mismatch = pos
        if pos + 1 < len(prompt):
            nxt = prompt[pos + 1]
        else:
            nxt = sampler.sample(logits)
            if nxt == 1 and stop_at_bos:
                break
            out.tokens.append(nxt)
            if on_token:
                on_token(token, nxt)
        token, pos = nxt, pos + 1
    return out
