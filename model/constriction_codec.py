"""Codes through constriction's ``AnsCoder`` (rANS, 64-bit state, 32-bit words, 24-bit probabilities).

This is the reference rANS implementation the paper's Table 1 rows are checked against. The code of
each coding pair is coded with a ``Categorical`` model built from the matrix's code counts
(``perfect=False``: constriction's fast "leaky" quantization to 24-bit probabilities, which keeps every
code at a probability of at least 2**-24); the additional data stays raw.
"""

from __future__ import annotations

import numpy as np

from .errors import ConfigError

__all__ = ["categorical_model", "encode_codes", "decode_codes"]


def categorical_model(counts: np.ndarray):
    """constriction ``Categorical`` over codes ``0 .. len(counts)-1`` with probabilities ∝ counts."""
    import constriction

    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or c.min() < 0 or c.sum() <= 0:
        raise ConfigError("code counts for constriction must be a non-empty, non-negative, non-zero 1-D array")
    return constriction.stream.model.Categorical(c / c.sum(), perfect=False)


def encode_codes(codes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Encode ``codes`` (read back in the same order) into constriction's ``uint32`` words."""
    import constriction

    coder = constriction.stream.stack.AnsCoder()
    if codes.size:
        coder.encode_reverse(np.ascontiguousarray(codes, dtype=np.int32).ravel(), categorical_model(counts))
    return np.asarray(coder.get_compressed(), dtype=np.uint32)


def decode_codes(words: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
    """Decode ``n`` codes from words produced by :func:`encode_codes` with the same ``counts``."""
    import constriction

    coder = constriction.stream.stack.AnsCoder(np.ascontiguousarray(words, dtype=np.uint32))
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    return np.asarray(coder.decode(categorical_model(counts), n), dtype=np.int32)
