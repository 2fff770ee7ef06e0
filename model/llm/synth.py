"""A synthetic Llama-2-7B-shaped checkpoint whose bf16 values follow measured real-model statistics.

``ansforge synth --like llama2-7b -o DIR`` writes a Hugging Face sharded folder (bf16 shards of at most
5 GB, ``model.safetensors.index.json``, ``config.json``) with Llama-2-7B's tensor names and shapes. Its
values are not Gaussian: every bf16 weight is drawn field by field,

* the exponent from a *measured per-matrix exponent histogram of the same role* (the histograms that
  ``ansforge demo`` ships: layer ``i`` of the 7B model takes the matching matrix of layer ``i mod L`` of
  the measured model; the embedding and the classifier take its token embedding; the norms take the
  measured norm vectors' histogram),
* the sign from the measured fraction of negative weights of that role,
* the 7-bit mantissa from the measured mantissa distribution of that role,

independently of one another (the measured joint structure between fields, and any structure between
neighbouring weights, is not reproduced). What it is for: speed, memory and scale (a 7B-size folder
without a download). What it is not: a model. Its Table 1 echoes the histograms it was drawn from, and
its context gains (which exploit structure between neighbours) mean nothing.

The statistics are passed in as documents (:func:`llama_statistics`), so that this module (layer
``model``) reads no package data of ``analysis``; :func:`measure_statistics` measures them on any
checkpoint. Generation is vectorized and streams tensor by tensor in chunks of ``CHUNK`` values, each
tensor drawn from its own ``PCG64`` stream seeded by ``seed`` and its name: the same seed gives the
same bytes, and a tensor the same values whatever ``layers``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .checkpoint import open_checkpoint, write_sharded

__all__ = ["LIKE", "ROLES", "RoleSampler", "llama_tensors", "llama_statistics", "measure_statistics",
           "role_of_llama2c", "role_of_bert", "write_synthetic", "hf_llama_config", "STATISTICS_FORMAT"]

STATISTICS_FORMAT = "ansforge-weight-statistics"

#: The roles of a llama's tensors.
ROLES = ("embed", "q", "k", "v", "o", "gate", "up", "down", "norm", "lm_head")

#: Shapes of the models ``--like`` names (Hugging Face config fields).
LIKE = {
    "llama2-7b": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                  "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
                  "max_position_embeddings": 4096, "rms_norm_eps": 1e-05},
}

#: Values drawn per chunk: bounded memory (about 20 bytes per value of temporaries).
CHUNK = 1 << 22

_EXP_BITS = 20   # exponent lookup table: 2^20 entries (probabilities quantized to 2^-20)
_MANT_BITS = 16  # mantissa lookup table: 2^16 entries
_SIGN_BITS = 24  # sign threshold resolution


def role_of_llama2c(name: str) -> str | None:
    """Role of a llama2.c tensor name (``layers.3.attention.wq.weight`` → ``q``)."""
    table = {"tok_embeddings.weight": "embed", "output.weight": "lm_head", "norm.weight": "norm"}
    if name in table:
        return table[name]
    m = re.fullmatch(r"layers\.\d+\.(.+)", name)
    return {"attention.wq.weight": "q", "attention.wk.weight": "k", "attention.wv.weight": "v",
            "attention.wo.weight": "o", "feed_forward.w1.weight": "gate", "feed_forward.w3.weight": "up",
            "feed_forward.w2.weight": "down", "attention_norm.weight": "norm",
            "ffn_norm.weight": "norm"}.get(m.group(1)) if m else None


def role_of_bert(name: str) -> str | None:
    """Role of a BERT (MiniLM) tensor name; BERT's one MLP input matrix counts as ``up``."""
    if name == "embeddings.word_embeddings.weight":
        return "embed"
    if name.endswith("LayerNorm.weight"):
        return "norm"
    m = re.fullmatch(r"encoder\.layer\.\d+\.(.+)", name)
    return {"attention.self.query.weight": "q", "attention.self.key.weight": "k",
            "attention.self.value.weight": "v", "attention.output.dense.weight": "o",
            "intermediate.dense.weight": "up", "output.dense.weight": "down"}.get(m.group(1)) if m else None


def _bf16_bits(rec) -> np.ndarray:
    from ..dtypes.pairs import fp32_to_bf16_rne

    if rec.dtype == "BF16":
        return np.asarray(rec.array, dtype=np.uint16).ravel()
    return fp32_to_bf16_rne(np.asarray(rec.array, dtype=np.float32).ravel())


def measure_statistics(path: str | Path, role_of: Callable[[str], str | None]) -> dict[str, dict]:
    """Per role, over every tensor ``role_of`` names: the bf16 fields' counts (fp32 and fp16 tensors
    rounded to bf16 by round-to-nearest-even, as the shipped exponent histograms are): ``values``,
    ``negative`` (sign bit set), ``exponent_counts`` (biased exponent → count) and ``mantissa_counts``
    (128 counts, mantissa field 0..127)."""
    ck = open_checkpoint(path)
    out: dict[str, dict] = {}
    for info in ck.infos():
        role = role_of(info.name)
        if role is None or not info.supported:
            continue
        bits = _bf16_bits(ck.tensor(info.name))
        r = out.setdefault(role, {"values": 0, "negative": 0, "exponent_counts": np.zeros(256, np.int64),
                                  "mantissa_counts": np.zeros(128, np.int64), "tensors": 0})
        r["values"] += int(bits.size)
        r["tensors"] += 1
        r["negative"] += int(np.count_nonzero(bits >> 15))
        r["exponent_counts"] += np.bincount((bits >> 7) & 0xFF, minlength=256)
        r["mantissa_counts"] += np.bincount(bits & 0x7F, minlength=128)
    return {role: {"tensors": r["tensors"], "values": r["values"], "negative": r["negative"],
                   "exponent_counts": {str(e): int(c) for e, c in enumerate(r["exponent_counts"]) if c},
                   "mantissa_counts": [int(c) for c in r["mantissa_counts"]]}
            for role, r in sorted(out.items(), key=lambda kv: ROLES.index(kv[0]))}


def _quantize(counts: np.ndarray, total: int) -> np.ndarray:
    """Integer weights summing to ``total``, proportional to ``counts`` (largest remainder), every
    non-zero count keeping at least one."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.sum() <= 0:
        raise ConfigError("a histogram with no counts")
    exact = counts / counts.sum() * total
    q = np.floor(exact).astype(np.int64)
    q[(counts > 0) & (q == 0)] = 1
    while q.sum() > total:  # taken back from the largest bins
        q[np.argmax(q)] -= 1
    rest = total - int(q.sum())
    if rest:
        order = np.argsort(-(exact - q), kind="stable")
        q[order[:rest]] += 1
    return q


@dataclass
class RoleSampler:
    """Draws bf16 bit patterns: exponent, sign and mantissa independently from measured counts."""

    exponent_counts: Mapping[int, int]
    mantissa_counts: Sequence[int]
    negative_fraction: float

    def __post_init__(self) -> None:
        exps = np.zeros(256, np.float64)
        for e, c in self.exponent_counts.items():
            if not 0 <= int(e) < 255:
                raise ConfigError(f"exponent {e} of a histogram is not a finite bf16 exponent")
            exps[int(e)] = c
        self._exp_table = np.repeat((np.arange(256, dtype=np.uint16) << 7),
                                    _quantize(exps, 1 << _EXP_BITS))
        mant = np.asarray(self.mantissa_counts, dtype=np.float64)
        if mant.shape != (128,):
            raise ConfigError(f"a mantissa distribution needs 128 counts, not {mant.size}")
        self._mant_table = np.repeat(np.arange(128, dtype=np.uint16), _quantize(mant, 1 << _MANT_BITS))
        if not 0.0 <= self.negative_fraction <= 1.0:
            raise ConfigError(f"negative fraction {self.negative_fraction!r} is not in [0, 1]")
        self._neg = np.uint64(round(self.negative_fraction * (1 << _SIGN_BITS)))

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` bf16 bit patterns (uint16), from one 64-bit random word each."""
        r = rng.bit_generator.random_raw(n)
        out = self._exp_table[(r & np.uint64((1 << _EXP_BITS) - 1)).astype(np.intp)]
        out |= self._mant_table[((r >> np.uint64(_EXP_BITS)) & np.uint64((1 << _MANT_BITS) - 1)).astype(np.intp)]
        negative = (r >> np.uint64(64 - _SIGN_BITS)) < self._neg
        out |= negative.astype(np.uint16) << np.uint16(15)
        return out


def llama_tensors(dims: Mapping[str, int]) -> list[tuple[str, str, int | None, tuple[int, ...]]]:
    """Every tensor of a Hugging Face llama, ``(name, role, layer, shape)``, in the forward pass's
    order (embedding, each layer's nine, final norm, classifier)."""
    d, h, v = dims["hidden_size"], dims["intermediate_size"], dims["vocab_size"]
    kv = d * dims["num_key_value_heads"] // dims["num_attention_heads"]
    out: list[tuple[str, str, int | None, tuple[int, ...]]] = [("model.embed_tokens.weight", "embed", None, (v, d))]
    for i in range(dims["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", "norm", i, (d,)),
                (p + "self_attn.q_proj.weight", "q", i, (d, d)),
                (p + "self_attn.k_proj.weight", "k", i, (kv, d)),
                (p + "self_attn.v_proj.weight", "v", i, (kv, d)),
                (p + "self_attn.o_proj.weight", "o", i, (d, d)),
                (p + "post_attention_layernorm.weight", "norm", i, (d,)),
                (p + "mlp.gate_proj.weight", "gate", i, (h, d)),
                (p + "mlp.up_proj.weight", "up", i, (h, d)),
                (p + "mlp.down_proj.weight", "down", i, (d, h))]
    out += [("model.norm.weight", "norm", None, (d,)), ("lm_head.weight", "lm_head", None, (v, d))]
    return out


#: The llama2.c name of the measured matrix each role of layer ``i`` takes (``{}``: the layer).
_LLAMA2C_MATRIX = {"q": "layers.{}.attention.wq.weight", "k": "layers.{}.attention.wk.weight",
                   "v": "layers.{}.attention.wv.weight", "o": "layers.{}.attention.wo.weight",
                   "gate": "layers.{}.feed_forward.w1.weight", "up": "layers.{}.feed_forward.w3.weight",
                   "down": "layers.{}.feed_forward.w2.weight", "embed": "tok_embeddings.weight",
                   "lm_head": "tok_embeddings.weight"}


@dataclass(frozen=True)
class LlamaStatistics:
    """What :func:`write_synthetic` draws from: per-matrix exponent histograms of a measured llama, and
    per-role sign and mantissa statistics (with the norms' exponent histogram)."""

    model: str
    matrices: Mapping[str, Mapping[int, int]]   # llama2.c name → exponent counts
    roles: Mapping[str, dict]                  # role → measure_statistics entry
    layers: int                                # layers of the measured model

    def source(self, role: str, layer: int | None) -> str:
        """Which measured histogram a tensor of ``role`` in ``layer`` draws its exponent from."""
        if role == "norm":
            return f"{self.model} norms (all norm vectors)"
        return _LLAMA2C_MATRIX[role].format(0 if layer is None else layer % self.layers)

    def sampler(self, role: str, layer: int | None) -> RoleSampler:
        stat = self.roles["embed" if role == "lm_head" and "lm_head" not in self.roles else role]
        exps = stat["exponent_counts"] if role == "norm" else self.matrices[self.source(role, layer)]
        return RoleSampler({int(e): c for e, c in exps.items()}, stat["mantissa_counts"],
                           stat["negative"] / stat["values"])


def llama_statistics(histograms: Sequence[Mapping], statistics: Mapping, model: str = "stories260K") -> LlamaStatistics:
    """The statistics of the measured llama ``model`` (its name's first word): its per-matrix exponent
    histograms from ``histograms`` (the ``models`` list of an exponent-histogram file) and its per-role
    sign, mantissa and norm statistics from ``statistics`` (a weight-statistics document)."""
    if not isinstance(statistics, Mapping) or statistics.get("format") != STATISTICS_FORMAT:
        raise ConfigError(f"not a weight-statistics document (format {STATISTICS_FORMAT!r})")
    hist = next((m for m in histograms if m["name"].split()[0] == model), None)
    stat = next((m for m in statistics["models"] if m["name"].split()[0] == model), None)
    if hist is None or stat is None:
        raise ConfigError(f"no measured statistics of a model named {model!r}")
    matrices = {m["name"]: {int(e): int(c) for e, c in m["exponent_counts"].items()} for m in hist["matrices"]}
    layers = 1 + max(int(n.split(".")[1]) for n in matrices if n.startswith("layers."))
    missing = [r for r in ("embed", "q", "k", "v", "o", "gate", "up", "down", "norm") if r not in stat["roles"]]
    if missing:
        raise ConfigError(f"the statistics of {model} lack the roles {', '.join(missing)}")
    return LlamaStatistics(model, matrices, stat["roles"], layers)


def hf_llama_config(dims: Mapping[str, int], note: str) -> dict:
    """A Hugging Face ``config.json`` for a llama of these dimensions, in bf16."""
    return {"architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
            **dims, "initializer_range": 0.02, "model_type": "llama", "pretraining_tp": 1, "rope_scaling": None,
            "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
            "ansforge_synthetic": note}


def write_synthetic(folder: str | Path, stats: LlamaStatistics, *, like: str = "llama2-7b", layers: int | None = None,
                    seed: int = 0, scale: int = 1, max_shard_bytes: int = 5 * 10**9,
                    progress: Callable[[int], None] | None = None) -> dict:
    """Write the synthetic folder; returns what was written (``tensors``, ``weights``, ``bytes``,
    ``shards``, ``config``, the ``sources`` each tensor drew its exponent from).

    ``layers`` keeps the first layers only (the config says so); ``scale`` divides the hidden size, the
    MLP size and the vocabulary (a power of two up to 64: a quick look at the same structure).
    ``progress(n)`` is called with the values written after each chunk."""
    if like not in LIKE:
        raise ConfigError(f"--like must be one of {', '.join(LIKE)}, not {like!r}")
    dims = dict(LIKE[like])
    if layers is not None:
        if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= dims["num_hidden_layers"]:
            raise ConfigError(f"layers must be from 1 to {dims['num_hidden_layers']}, not {layers!r}")
        dims["num_hidden_layers"] = layers
    if isinstance(scale, bool) or not isinstance(scale, int) or scale not in (1, 2, 4, 8, 16, 32, 64):
        raise ConfigError(f"scale must be a power of two from 1 to 64, not {scale!r}")
    for key in ("hidden_size", "intermediate_size", "vocab_size"):
        dims[key] //= scale
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, not {seed!r}")
    tensors = llama_tensors(dims)
    note = (f"synthetic {like} shape (ansforge synth, seed {seed}, scale 1/{scale}): bf16 values drawn from "
            f"{stats.model}'s measured exponent histograms, sign balance and mantissa distribution per role; "
            "not a trained model")
    config = hf_llama_config(dims, note)

    def fill(k: int, name: str) -> Iterator[np.ndarray]:
        _, role, layer, shape = tensors[k]
        sampler = stats.sampler(role, layer)
        key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, key])))
        n = int(np.prod(shape))
        for start in range(0, n, CHUNK):
            m = min(CHUNK, n - start)
            yield sampler.draw(rng, m)
            if progress is not None:
                progress(m)

    shards = write_sharded(folder, [(name, "BF16", shape) for name, _, _, shape in tensors], fill,
                           max_shard_bytes=max_shard_bytes, config=config, metadata={"format": "pt"})
    weights = sum(int(np.prod(s)) for _, _, _, s in tensors)
    return {"tensors": len(tensors), "weights": weights, "bytes": 2 * weights, "shards": shards, "config": config,
            "sources": {name: stats.source(role, layer) for name, role, layer, _ in tensors}}


def statistics_document(models: Sequence[tuple[str, str, Mapping[str, dict]]], note: str) -> dict:
    """A weight-statistics document (``format``, ``version``, ``note``, ``models``: name, source, roles)."""
    return {"format": STATISTICS_FORMAT, "version": 1, "note": note,
            "models": [{"name": n, "source": s, "roles": dict(r)} for n, s, r in models]}


def dumps(doc: Mapping) -> str:
    """A statistics document as compact, diff-friendly JSON (one role per line)."""
    return json.dumps(doc, indent=1) + "\n"
