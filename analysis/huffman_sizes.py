"""The DFloat11-style rows of Table 1: the exponents under a Huffman code per tensor or per
transformer layer, code tables charged (:data:`HUFFMAN_ROWS`).

The code is :mod:`ansforge.model.coding.huffman`'s (at most 32 bits a code, as DFloat11), so these
sizes are what that coder's streams measure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..model.coding.huffman import code_lengths

if TYPE_CHECKING:
    from .table1 import MatrixStats

__all__ = ["HUFFMAN_ROWS", "huffman_lengths", "huffman_bits"]

HUFFMAN_ROWS = ("Huffman per tensor (DFloat11-style)", "Huffman per layer (DFloat11-style)")
#: A transformer layer's index in a tensor name (``model.layers.3.``, ``h.3.``, ``blocks.3.``).
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers?|h|blocks?)\.(\d+)\.")


def huffman_lengths(counts: np.ndarray) -> np.ndarray:
    """Huffman code lengths (bits) of symbols with ``counts`` (a lone symbol gets 1 bit, as a decoder
    needs a code to read); zero counts get length 0. The code ``model.coding.huffman`` writes: at most
    32 bits a code, as DFloat11, so the size rows are what that coder's streams measure."""
    return code_lengths(counts)


def huffman_bits(matrices: Sequence["MatrixStats"], per: str) -> float:
    """Exponent bits of a Huffman code per tensor (``per="tensor"``) or per transformer layer
    (``per="layer"``: matrices named ``...layers.N.`` share one code; others keep their own), code
    tables included at 8 bits per coded exponent."""
    groups: dict[str, dict[int, int]] = {}
    for m in matrices:
        key = m.name
        if per == "layer":
            hit = _LAYER_RE.search(m.name)
            key = f"layer {hit.group(1)}" if hit else m.name
        g = groups.setdefault(key, {})
        for e, c in m.exponent_counts.items():
            g[int(e)] = g.get(int(e), 0) + int(c)
    bits = 0.0
    for g in groups.values():
        counts = np.asarray([c for c in g.values() if c], dtype=np.int64)
        if counts.size:
            bits += float(huffman_lengths(counts) @ counts) + 8 * counts.size
    return bits
