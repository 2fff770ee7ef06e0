"""The ANS codecs and their container (paper §2.1, §4.2, §4.4, Fig. 12).

``probability``
    Normalized ``N``-bit frequencies (Eq. 2) and ideal code costs.
``codetable``
    A tensor's alphabet: direct codes plus an optional escape code, and its frequencies.
``codecs``
    Codec names (``tans8``, ``rans16``, ``rans24`` …) and the codec objects that own a codec's validated
    parameters, build its tables and its cores' table writes.
``tans``, ``rans``
    The golden tANS and rANS coders: the bit-exact models of the cores (``docs/bitstream.md``).
``stream``
    What both coders share: runs of tables, checkpoints, encoded streams.
``lanes``
    Interleaved lanes (Fig. 12) and the NumPy bulk coder.
``context``
    Context tables: several tables per matrix, chosen by row/column group.
``container``
    The ``.ansf`` container: compress, decompress, random access, integrity checks.
``constriction_codec``
    The rANS reference through constriction's ``AnsCoder``.
``fastans``
    The compiled coders (the native C extension ``nativeans``, numba as the fallback), bit-exact with
    the golden ones.
``huffman``
    A DFloat11-style Huffman coder of bf16 exponents: the peer the benchmarks size and time.
"""

__all__: list[str] = []
