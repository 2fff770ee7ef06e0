"""ansforge: lossless LLM-weight compression with ANS coding pairs, modelled for hardware.

The package maps V. Liguori's white paper ("Lossless ~1.5:1 compression of Llama2-7B bf16 weights")
onto four subpackages:

``ansforge.model``
    Software models: checkpoint readers, coding-pair formats (§2, §3), probability tables (Eq. 2).
``ansforge.analysis``
    Tables, figures, reports and benchmarks: Table 1, Fig. 1, ``ansforge bench``.
``ansforge.hdl``
    Amaranth cores (§4.2) and their Verilog generator.
``ansforge.sim``
    Cycle-simulation drivers for the cores.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
