"""What a lossy data type of §3 costs: honest sizes (tables charged, or held out) and its error.

Sizes. The paper's estimate, ``sum -log2 p(code)`` over a matrix's own code histogram plus the
additional data, assumes the decoder already knows the histogram. It does not: the tables travel
with the matrix. :func:`charged_bits` adds what a programmable core needs loaded (:func:`table_bits`):

* one frequency of :data:`TABLE_PRECISION_BITS` bits (the paper's rANS, P = 16) per code that occurs;
* which codes occur, as a bitmap over the type's alphabet or a list of ``ceil(log2 alphabet)``-bit
  indices, whichever is shorter (the code→value table of a float type, or the identity of the used
  magnitudes of an integer code);
* ``side_bits``: per-matrix parameters such as a quantization scale (32 bits).

:func:`heldout_bits` is the other honest measure: each half of the matrix (first and second half of
its weights in row-major order) is coded with the histogram of the *other* half, smoothed by adding
1/2 to every code of the alphabet (Krichevsky–Trofimov), so codes the other half never saw cost what
they would cost a decoder that has only seen the other half.

Errors (:class:`ErrorStats`), for weights ``w`` and the values ``ŵ`` a type decodes to, over the
weights of every matrix:

``rel_rmse``     ``sqrt(sum (ŵ - w)**2 / sum w**2)``: RMS error relative to the RMS weight.
``max_rel_err``  ``max |ŵ - w| / |w|`` over the non-zero weights.
``flushed``      share of non-zero weights that decode to 0.
``clamped``      share of non-zero weights below half the type's smallest non-zero magnitude ``min``
                 that decode to a non-zero value: nearest rounding would give 0, the type gives ±min
                 (posits never round to zero). Weights in ``[min/2, min)`` round to ±min by ordinary
                 nearest rounding and are not counted.
``saturated``    share of weights above the type's largest magnitude (clipped to it, or to Inf).

The effect on the model (:class:`EffectProbe`, llama checkpoints only): the unconverted model
generates ``steps`` tokens greedily from BOS; the converted model is run on the same tokens
(teacher-forced), and at each position ``KL(p_ref || p_conv)`` of the next-token distributions (nats)
is averaged, and ``greedy_agreement`` is the share of positions where both models' most likely next
token is the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..model.errors import AnsforgeError

__all__ = ["TABLE_PRECISION_BITS", "SCALE_BITS", "ideal_bits", "table_bits", "charged_bits", "heldout_bits",
           "ErrorStats", "error_stats", "EffectProbe", "ModelEffect", "kl_nats", "probe_or_none", "AUTO_MAX_PARAMS",
           "AUTO_STEPS"]

#: Bits of one code's frequency in a loaded table (the paper's rANS configuration, P = 16).
TABLE_PRECISION_BITS = 16
#: Bits of a per-matrix scale (fp32).
SCALE_BITS = 32


def ideal_bits(counts: np.ndarray) -> float:
    """``sum -log2 p(code)`` of a histogram, ``p`` its own frequencies (the paper's estimate)."""
    c = np.asarray(counts, dtype=np.float64)
    c = c[c > 0]
    return float(-(c * np.log2(c / c.sum())).sum()) if c.size else 0.0


def table_bits(counts: np.ndarray, alphabet: int, precision_bits: int = TABLE_PRECISION_BITS) -> int:
    """Bits of the table a decoder needs for this histogram (module docstring)."""
    used = int(np.count_nonzero(np.asarray(counts)))
    index = max(1, math.ceil(math.log2(alphabet))) if alphabet > 1 else 0
    return used * precision_bits + min(int(alphabet), used * index)


def charged_bits(pairs, alphabet: int | None = None, side_bits: int = 0) -> float:
    """Ideal code size + additional data + tables + ``side_bits`` of one matrix's pairs.

    ``pairs`` is any pair object with ``counts()``, ``extra_bits_total()`` and ``n_codes``;
    ``alphabet`` defaults to ``n_codes``.
    """
    counts = pairs.counts()
    return ideal_bits(counts) + pairs.extra_bits_total() + table_bits(counts, alphabet or pairs.n_codes) + side_bits


def heldout_bits(pairs, alphabet: int | None = None) -> float:
    """Each half of the pairs coded with the other half's smoothed histogram, plus the additional data."""
    codes = np.asarray(pairs.codes, dtype=np.int64).ravel()
    n_alpha = int(alphabet or pairs.n_codes)
    half = codes.size // 2
    a, b = codes[:half], codes[half:]
    total = 0.0
    for coded, seen in ((a, b), (b, a)):
        p = (np.bincount(seen, minlength=n_alpha) + 0.5) / (seen.size + 0.5 * n_alpha)
        total += float(-np.log2(p[coded]).sum())
    return total + pairs.extra_bits_total()


@dataclass
class ErrorStats:
    """Error of a lossy conversion, accumulated over matrices (module docstring)."""

    weights: int = 0
    nonzero: int = 0
    sq_err: float = 0.0
    sq_ref: float = 0.0
    max_rel: float = 0.0
    n_clamped: int = 0
    n_flushed: int = 0
    n_saturated: int = 0

    def __add__(self, o: "ErrorStats") -> "ErrorStats":
        return ErrorStats(self.weights + o.weights, self.nonzero + o.nonzero, self.sq_err + o.sq_err,
                          self.sq_ref + o.sq_ref, max(self.max_rel, o.max_rel), self.n_clamped + o.n_clamped,
                          self.n_flushed + o.n_flushed, self.n_saturated + o.n_saturated)

    @property
    def rel_rmse(self) -> float:
        return math.sqrt(self.sq_err / self.sq_ref) if self.sq_ref else 0.0

    @property
    def max_rel_err(self) -> float:
        return self.max_rel

    @property
    def clamped(self) -> float:
        return self.n_clamped / self.weights if self.weights else 0.0

    @property
    def flushed(self) -> float:
        return self.n_flushed / self.weights if self.weights else 0.0

    @property
    def saturated(self) -> float:
        return self.n_saturated / self.weights if self.weights else 0.0

    def to_json(self) -> dict:
        return {"rel_rmse": self.rel_rmse, "max_rel_err": self.max_rel_err, "clamped": self.clamped,
                "flushed": self.flushed, "saturated": self.saturated}

    def describe(self) -> str:
        """The note a table prints: what the conversion lost."""
        parts = []
        for label, n in (("flushed to 0", self.n_flushed), ("clamped to ±min", self.n_clamped),
                         ("saturated", self.n_saturated)):
            if n:
                parts.append(f"{n / self.weights:.3%} {label}" if n / self.weights >= 5e-6 else f"{n} {label}")
        return ", ".join(parts)


def error_stats(w: np.ndarray, w_hat: np.ndarray, *, min_mag: float | None = None,
                max_mag: float | None = None) -> ErrorStats:
    """:class:`ErrorStats` of one matrix: ``w`` converted to ``w_hat`` by a type whose smallest and
    largest non-zero magnitudes are ``min_mag`` and ``max_mag`` (``None``: no such limit)."""
    w = np.asarray(w, dtype=np.float64).ravel()
    w_hat = np.asarray(w_hat, dtype=np.float64).ravel()
    if w.shape != w_hat.shape:
        raise AnsforgeError(f"error statistics: {w.size} weights against {w_hat.size} converted values")
    a = np.abs(w)
    nz = a > 0
    with np.errstate(over="ignore", invalid="ignore"):
        err = w_hat - w
        rel = np.abs(err[nz]) / a[nz]
        sq = float(np.dot(err, err))
    flushed = nz & (w_hat == 0)
    clamped = nz & ~flushed & (a < 0.5 * min_mag) if min_mag is not None else np.zeros_like(nz)
    saturated = a > max_mag if max_mag is not None else np.zeros_like(nz)
    return ErrorStats(int(w.size), int(nz.sum()), sq, float(np.dot(w, w)), float(rel.max()) if rel.size else 0.0,
                      int(clamped.sum()), int(flushed.sum()), int(saturated.sum()))


# -- effect on the model ---------------------------------------------------------------------------

def kl_nats(ref_logits: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """``KL(softmax(ref) || softmax(logits))`` in nats along the last axis, in float64."""
    r = np.asarray(ref_logits, dtype=np.float64)
    q = np.asarray(logits, dtype=np.float64)
    lr = r - r.max(-1, keepdims=True)
    lr -= np.log(np.exp(lr).sum(-1, keepdims=True))
    lq = q - q.max(-1, keepdims=True)
    lq -= np.log(np.exp(lq).sum(-1, keepdims=True))
    return (np.exp(lr) * (lr - lq)).sum(-1)


@dataclass(frozen=True)
class ModelEffect:
    """Mean next-token KL divergence (nats) and greedy-token agreement over ``positions``."""

    kl_nats: float
    greedy_agreement: float
    positions: int


class _Provider:
    """The stored checkpoint, with some tensors replaced by converted fp32 values."""

    name = "converted"

    def __init__(self, base, replaced: Mapping[str, np.ndarray]):
        self.base, self.replaced = base, replaced

    def tensor(self, name: str):
        if name in self.replaced:
            shape = self.base.checkpoint.info(name).shape
            return np.asarray(self.replaced[name], dtype=np.float32).reshape(shape), "F32"
        return self.base.tensor(name)


class _InputNorms:
    """Weights whose ``matvec`` adds ``x**2`` to a per-source-tensor sum (calibration activations)."""

    def __init__(self, weights, sources: Mapping[str, str], sums: dict):
        self._w, self._sources, self._sums = weights, sources, sums

    def __getitem__(self, name):
        m = self._w[name]
        src, sums = self._sources.get(name, name), self._sums

        class _M:
            def matvec(self, x):
                sums[src] = sums.get(src, 0.0) + np.asarray(x, dtype=np.float64) ** 2
                return m.matvec(x)

            def __getattr__(self, attr):
                return getattr(m, attr)
        return _M()

    def __iter__(self):
        return iter(self._w)


class EffectProbe:
    """The reference run of a llama checkpoint against which converted weights are measured.

    Raises :class:`~ansforge.model.errors.AnsforgeError` when ``path`` is not a llama the
    :mod:`~ansforge.model.llm.llama` forward pass can run.
    """

    def __init__(self, path: str | Path, steps: int, bos: int = 1):
        from ..model.llm.llama import CheckpointWeights, Llama, LlamaWeights, read_layout

        if steps < 1:
            raise AnsforgeError(f"--steps must be at least 1, not {steps}")
        self.layout = read_layout(path)
        self._weights, self._llama = LlamaWeights, Llama
        self.base = CheckpointWeights(path)
        steps = min(steps, self.layout.config.seq_len - 1)
        ref = Llama(LlamaWeights.load(self.layout, self.base))
        sums: dict[str, np.ndarray] = {}
        sources = {n: s.name for n, s in self.layout.sources.items()}
        ref.weights = _InputNorms(ref.weights, sources, sums)
        tokens, logits = [bos], []
        for pos in range(steps):
            out = ref.forward(tokens[-1], pos)
            logits.append(np.asarray(out, dtype=np.float64))
            tokens.append(int(np.argmax(out)))
        self.tokens = tokens[:-1]
        self.ref_logits = np.stack(logits)
        #: per source matrix, ``‖x_j‖`` of each input column over the calibration positions
        self.input_norms = {k: np.sqrt(v) for k, v in sums.items()}

    @property
    def positions(self) -> int:
        return len(self.tokens)

    def measure(self, replaced: Mapping[str, np.ndarray]) -> ModelEffect:
        """Run the model with ``replaced`` tensors (checkpoint names → values) on the reference tokens."""
        model = self._llama(self._weights.load(self.layout, _Provider(self.base, replaced)))
        logits = np.stack([model.forward(t, pos) for pos, t in enumerate(self.tokens)]).astype(np.float64)
        if not np.isfinite(logits).all():
            return ModelEffect(math.inf, float(np.mean(logits.argmax(-1) == self.ref_logits.argmax(-1))),
                               self.positions)
        kl = kl_nats(self.ref_logits, logits)
        agree = logits.argmax(-1) == self.ref_logits.argmax(-1)
        return ModelEffect(float(kl.mean()), float(agree.mean()), self.positions)


#: ``steps=None`` (automatic) probes llamas up to this many parameters with :data:`AUTO_STEPS` positions:
#: the probe keeps every row's converted weights in memory and runs a NumPy forward pass per row.
AUTO_MAX_PARAMS = 50_000_000
AUTO_STEPS = 32


def probe_or_none(path: str | Path, steps: int | None) -> tuple["EffectProbe | None", str]:
    """An :class:`EffectProbe` for a llama checkpoint, or ``None`` and why not.

    ``steps`` ``None`` is automatic: :data:`AUTO_STEPS` positions on a llama of at most
    :data:`AUTO_MAX_PARAMS` parameters, none on a larger one (give ``steps`` to force it).
    """
    if steps is not None and steps <= 0:
        return None, "--steps 0"
    if steps is None:
        from ..model.llm.llama import read_layout
        try:
            n = read_layout(path).config.n_params
        except AnsforgeError as exc:
            return None, f"not a llama this forward pass runs ({exc})"
        if n > AUTO_MAX_PARAMS:
            return None, (f"a llama of {n:,} parameters is above {AUTO_MAX_PARAMS:,}, where the probe is off unless "
                          "--steps is given")
        steps = AUTO_STEPS
    try:
        return EffectProbe(path, steps), ""
    except AnsforgeError as exc:
        return None, f"not a llama this forward pass runs ({exc})"

