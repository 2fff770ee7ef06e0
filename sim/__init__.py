"""Cycle simulation of the cores: engines, jobs, and the harness gateware around the cores.

Engines
    :class:`~.amaranth_sim.AmaranthEngine` (Amaranth's simulator, seconds) and
    :class:`~.verilator.VerilatorEngine` (the shipped Verilog, compiled; for whole models) run the same
    engine-neutral :class:`~.jobs.CoreJob`, whose expected outputs come from the golden models alone.
Jobs and runs
    ``jobs`` (one core, one command or checkpoint blocks), ``model_run`` (every matrix of a checkpoint),
    ``weights`` and ``llama_run`` (a llama on weights the simulated decoders output), ``context``,
    ``interfaces``, ``testbench`` (the take-home Verilog testbench), ``formal`` (``ansforge prove``) and
    ``container_plan`` (a whole container through the
    decompression subsystem: what its lanes need, its blocks, its STARTs), ``board`` (the host side of a board: its protocol, a container's blocks through it, and the same board
    top simulated behind a pseudo-terminal).
Harness gateware
    Amaranth components that only exist to surround the cores in simulation, kept here rather than in
    :mod:`ansforge.hdl` because no FPGA design instantiates them: :class:`~.memory.SharedMemory` and
    :class:`~.lanes.LaneSystem` (Fig. 12's shared word memory around the decoder lanes),
    :class:`~.factory.TokenFactory` and :class:`~.factory.ProcessorModel` (Fig. 13's processors with
    skew and stalls), and :class:`~.subsystem.SubsystemBench` with :class:`~.subsystem.AxiMemory` and
    :class:`~.subsystem.AxiLiteWriter` (a board around the AXI decompression subsystem).
"""

__all__: list[str] = []
