"""Tables, figures, reports and benchmarks that reproduce the paper on real checkpoints.

``table1``
    The paper's Table 1 (§2.1) on any checkpoint; ``huffman_sizes`` its DFloat11-style rows.
``figures``
    Fig. 1 (value histogram) next to the exponent histogram.
``demo``
    ``ansforge demo``: Table-1-style estimates from the shipped exponent histograms.
``bench``
    ``ansforge bench``: speed, size and memory, written to BENCHMARKS.md.
``board``
    ``ansforge board build``: a board's bitstream through the open ECP5 flow, and the bench's board section.
"""

__all__: list[str] = []
