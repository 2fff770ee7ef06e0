"""Cycle-simulation drivers: the Amaranth simulator and Verilator, behind one interface."""

__all__: list[str] = []
