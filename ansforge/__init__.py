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

For researchers, ``ansforge.safe_open(path)`` opens an ``.ansf`` container as ``safetensors.safe_open``
opens a file and decodes each tensor (or rows of it) on first access
(:mod:`ansforge.model.coding.lazy`).
"""

__all__ = ["__version__", "safe_open"]

__version__ = "0.1.0"


def __getattr__(name: str):
    # Imported on first use: ``import ansforge`` (and the CLI's start) stays free of NumPy and the codecs.
    if name == "safe_open":
        from .model.coding.lazy import safe_open
        return safe_open
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
