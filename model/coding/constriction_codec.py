"""Codes through constriction's ``AnsCoder`` (rANS, 64-bit state, 32-bit words, 24-bit probabilities).

This is the reference rANS implementation the paper's Table 1 rows are checked against. The code of
each coding pair is coded with a ``Categorical`` model built from the matrix's code counts
(``perfect=False``: constriction's fast "leaky" quantization to 24-bit probabilities, which keeps every
code at a probability of at least 2**-24); the additional data stays raw.

Long tensors are coded in chunks. ANS is a stack, so ``encode_reverse`` applied to the chunks from the
last to the first pushes exactly the symbols one ``encode_reverse`` of the whole array would: the words
are those of the whole tensor, and the decoder reads the chunks forward.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from ..errors import ConfigError

__all__ = ["categorical_model", "encode_chunks", "decode_chunks", "encode_codes", "decode_codes", "encode_pairs"]


def categorical_model(counts: np.ndarray):
    """constriction ``Categorical`` over codes ``0 .. len(counts)-1`` with probabilities ∝ counts."""
    import constriction

    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or c.min() < 0 or c.sum() <= 0:
        raise ConfigError("code counts for constriction must be a non-empty, non-negative, non-zero 1-D array")
    if c.size == 1:  # one exponent in the whole matrix: constriction needs two symbols (as in codetable)
        c = np.array([1.0, 0.0])
    return constriction.stream.model.Categorical(c / c.sum(), perfect=False)


def encode_chunks(chunks: Sequence[np.ndarray], counts: np.ndarray) -> np.ndarray:
    """Encode the concatenation of ``chunks`` (in forward order) into ``uint32`` words."""
    import constriction

    model = categorical_model(counts)
    coder = constriction.stream.stack.AnsCoder()
    for codes in reversed(chunks):
        if codes.size:
            coder.encode_reverse(np.ascontiguousarray(codes, dtype=np.int32).ravel(), model)
    return np.asarray(coder.get_compressed(), dtype=np.uint32)


def decode_chunks(words: np.ndarray, counts: np.ndarray, sizes: Iterable[int]) -> Iterator[np.ndarray]:
    """Decode chunks of the given sizes, in forward order, from words of :func:`encode_chunks`.

    After the last chunk, a stream that held exactly these codes is empty; a ``ConfigError`` says so
    otherwise (the words were not produced from these counts and sizes).
    """
    import constriction

    model = categorical_model(counts)
    coder = constriction.stream.stack.AnsCoder(np.ascontiguousarray(words, dtype=np.uint32))
    for n in sizes:
        yield np.asarray(coder.decode(model, n), dtype=np.int32) if n else np.zeros(0, dtype=np.int32)
    if not coder.is_empty():
        raise ConfigError("constriction stream holds more data than the codes decoded from it")


def encode_codes(codes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Encode ``codes`` (read back in the same order) into constriction's ``uint32`` words."""
    return encode_chunks([codes], counts)


def decode_codes(words: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
    """Decode ``n`` codes from words produced by :func:`encode_codes` with the same ``counts``."""
    return next(decode_chunks(words, counts, [n]))


def encode_pairs(probabilities: np.ndarray, extra_bits: np.ndarray, symbols: np.ndarray, extras: np.ndarray):
    """constriction's words for coding pairs: per pair (decoder order) the symbol with a
    ``Categorical(probabilities, perfect=False)`` model, then its ``extra_bits[symbol]`` bits of
    additional data with ``Uniform(2**k)`` (nothing for ``k = 0``); returns ``(words, categorical)``.

    This is the reference the ``constriction`` rANS preset (golden model and cores) must equal."""
    import constriction

    cat = constriction.stream.model.Categorical(np.asarray(probabilities, dtype=np.float64), perfect=False)
    coder = constriction.stream.stack.AnsCoder()
    symbols = np.asarray(symbols, dtype=np.int64)
    if not np.any(extra_bits):
        if symbols.size:
            coder.encode_reverse(symbols.astype(np.int32), cat)
        return np.asarray(coder.get_compressed(), dtype=np.uint32), cat
    uniform = {}
    for i in range(symbols.size - 1, -1, -1):
        k = int(extra_bits[symbols[i]])
        if k:
            u = uniform.setdefault(k, constriction.stream.model.Uniform(1 << k))
            coder.encode_reverse(np.array([extras[i]], dtype=np.int32), u)
        coder.encode_reverse(np.array([symbols[i]], dtype=np.int32), cat)
    return np.asarray(coder.get_compressed(), dtype=np.uint32), cat
