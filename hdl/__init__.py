"""Amaranth cores of the paper's §4, each a ``wiring.Component`` that builds, simulates and synthesizes alone.

``tans``, ``rans``
    The tANS and rANS decoder and encoder cores (§4.2, Table 3): each a coder with an optional command
    shell (``shell``: counters, status, end checks, CRC), checked bit for bit against the golden models
    of :mod:`ansforge.model.coding`.
``cores``
    The core registry: one row per shipped build (name, codecs and ``N`` it takes, core, coder and shell
    classes, default codec, formal configuration), :func:`~.cores.build_core` and the names every
    hardware verb takes.
``tans_xn``
    The tANS cores for ``N = 1 .. 16`` interleaved states (``tansRxN``), what the registry builds for tANS.
``interfaces``
    Coding pairs to and from floats and fixed point (§4.3, Figs. 9–11).
``parallel``, ``broadcast``
    Decoder lanes on one memory port (§4.6, Fig. 12) and the token factory's weight broadcaster (§4.7).
``subsystem``, ``axis``
    What an FPGA design instantiates: the AXI decompression subsystem and AXI4-Stream adapters.
``board``
    The subsystem on a development board: UART host link, on-chip block memory, weight checker, the PLL
    and pins (``ansforge board build``), and the board registry.
``common``, ``shell``
    Shared layouts and ports, and the command shells.
``verilog``
    The Verilog generator (:func:`~.verilog.core_verilog`): the one text that ``ansforge verilog`` writes,
    Verilator compiles and yosys synthesizes.

Gateware that exists only to drive these cores in simulation (memories, processor models, an AXI
memory and register writer) is not here: it lives in :mod:`ansforge.sim` beside the runs that use it.
"""

__all__: list[str] = []
