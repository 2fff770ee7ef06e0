"""Token sampling as llama2.c's ``run.c`` does it: greedy, temperature, top-p, seeded.

The random numbers are ``run.c``'s xorshift* generator (``random_u32``: state ^= state >> 12,
state ^= state << 25, state ^= state >> 27, output (state * 0x2545F4914F6CDD1D) >> 32;
``random_f32`` = (u32 >> 8) / 2**24), so a seed gives the same coin flips as ``run -s SEED``.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError

__all__ = ["Sampler", "softmax"]

_MASK64 = (1 << 64) - 1


def softmax(x: np.ndarray) -> np.ndarray:
    """fp32 softmax with the maximum subtracted first (``run.c``'s)."""
    e = np.exp(x - x.max())
    return e / e.sum()


class Sampler:
    """Chooses the next token from logits.

    Parameters
    ----------
    temperature
        0 is greedy (argmax, the first maximum on ties); otherwise logits are divided by it.
    topp
        Nucleus sampling when 0 < topp < 1: the smallest set of most likely tokens whose probability
        exceeds ``topp`` (tokens below ``(1 - topp) / (vocab - 1)`` pruned first, as ``run.c``);
        otherwise plain sampling from the distribution.
    seed
        Positive integer, the xorshift state (0 would stay 0 forever).
    """

    def __init__(self, temperature: float = 1.0, topp: float = 0.9, seed: int = 42) -> None:
        if not (temperature >= 0 and np.isfinite(temperature)):
            raise ConfigError(f"temperature must be a finite number >= 0, not {temperature!r}")
        if not (0 <= topp <= 1):
            raise ConfigError(f"topp must be in [0, 1], not {topp!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 < seed < 1 << 64:
            raise ConfigError(f"seed must be an integer in 1 .. 2**64 - 1, not {seed!r}")
        self.temperature = float(temperature)
        self.topp = float(topp)
        self.state = int(seed)

    def random_u32(self) -> int:
        s = self.state
        s ^= s >> 12
        s ^= (s << 25) & _MASK64
        s ^= s >> 27
        self.state = s
        return ((s * 0x2545F4914F6CDD1D) & _MASK64) >> 32

    def random_f32(self) -> np.float32:
        return np.float32(self.random_u32() >> 8) / np.float32(16777216.0)

    def sample(self, logits: np.ndarray) -> int:
        """The next token id."""
        logits = np.asarray(logits, dtype=np.float32)
        if self.temperature == 0:
            return int(np.argmax(logits))
        probs = softmax(logits / np.float32(self.temperature))
        coin = self.random_f32()
        if 0 < self.topp < 1:
            return self._topp(probs, coin)
        cdf = np.cumsum(probs, dtype=np.float32)
        i = int(np.searchsorted(cdf, coin, side="right"))
        return min(i, probs.size - 1)

    def _topp(self, probs: np.ndarray, coin: np.float32) -> int:
        cutoff = np.float32((1.0 - self.topp) / (probs.size - 1))
        idx = np.flatnonzero(probs >= cutoff)
        order = idx[np.argsort(-probs[idx], kind="stable")]
        cum = np.cumsum(probs[order], dtype=np.float32)
        over = np.flatnonzero(cum > np.float32(self.topp))
        last = int(over[0]) if over.size else order.size - 1
        r = coin * cum[last]
        i = int(np.searchsorted(cum[:last + 1], r, side="right"))
        return int(order[min(i, last)])
