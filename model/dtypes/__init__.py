"""Coding pairs as data types (paper §2, §3, §4.3).

``pairs``
    IEEE floats as coding pairs (Fig. 2): bf16, fp16, fp32 and conversions between them.
``custom_float``, ``posit``, ``integers``, ``saliency``, ``ternary``
    The §3 types: E8M2/E8M3/fp8 (§3.1), posits (§3.2), integers and NZ-MSB (§3.3, Table 2), saliency
    (§3.5), binary and ternary weights (§3.6).
``layout``
    What each type declares: its code sets and their additional-data widths, checked against a core.
``interfaces``
    Pairs to and from the numbers a processor computes with (§4.3, Figs. 9–11): the golden model of the
    interface cores.
"""

__all__: list[str] = []
