"""Amaranth-simulator engine: runs a :class:`~.jobs.CoreJob` cycle by cycle, optionally writing a VCD.

Slow (thousands of cycles per second) but it sees every signal: the engine for short vectors,
back-pressure tests and waveforms. :mod:`.verilator` runs the same jobs on the generated Verilog.
"""

from __future__ import annotations

import random

import numpy as np

from amaranth.hdl import Module, Value
from amaranth.sim import Simulator

from .jobs import CoreJob, SimResult
from .streams import stream_get, stream_put

__all__ = ["AmaranthEngine"]


def _with_contract(core):
    """``core`` and its role's contract in one top, or ``core`` alone if it is no registered core."""
    from .formal.contract import CoreContract, role_of

    role = role_of(core)
    if role is None:
        return core
    top = Module()
    top.submodules.core = core
    top.submodules.contract = CoreContract(core, role=role, sampled=True)
    return top


class AmaranthEngine:
    """Run jobs in Amaranth's Python simulator (10 ns clock)."""

    name = "amaranth"

    def run(self, job: CoreJob, *, stall_prob: float = 0.0, seed: int = 0, vcd: str | None = None,
            max_cycles: int | None = None, trace: dict[str, Value] | None = None, contract: bool = True) -> SimResult:
        """Feed ``job`` through its core with random valid/ready gaps of probability ``stall_prob``.

        ``max_cycles`` bounds the run (default: generous for the job's size); exceeding it raises
        ``TimeoutError``, so that a core that locks up fails instead of hanging. ``trace`` names
        signals of the core (for example ``{"o.valid": core.o.valid}``) to sample at every clock
        edge; :attr:`SimResult.trace` then holds one integer array per name, one entry per cycle.

        With ``contract`` (the default), a core of the registry runs beside its role's
        :class:`~ansforge.sim.formal.contract.CoreContract`, the clauses ``ansforge prove`` checks
        formally: a clause that fails raises ``AssertionError`` with its message in that clock.
        """
        if not 0 <= stall_prob < 1:
            raise ValueError(f"stall_prob must be in [0, 1), not {stall_prob!r}")
        core = job.core
        limit = max_cycles or (64 + 4 * (job.pairs + job.words + sum(map(len, job.cfg.values())))) * \
            (1 + int(8 * stall_prob / (1 - stall_prob)))
        outputs: list[int] = []
        statuses: list[int] = []
        cycles = [0, None]
        rng_in, rng_out, rng_cmd = (random.Random(seed * 3 + i) for i in range(3))

        configured = [False]
        span = [0]             # the clock the measured interval starts at (tables written)
        dataflow = "cmd" not in core.signature.members   # ends when every expected output is out

        async def commands(ctx):
            for name, writes in job.cfg.items():
                for w in writes:
                    await stream_put(ctx, getattr(core, name), w)
            configured[0] = True
            start = cycles[0]
            span[0] = start
            if dataflow:
                while len(outputs) < len(job.expected):
                    await ctx.tick()
                cycles[1] = cycles[0] - start
                return
            # Commands go in back to back, without waiting for ``done``: the core takes the next one
            # while the previous one ends (``done`` is high for one clock per command, in order).
            for n, c in enumerate(job.commands):
                await stream_put(ctx, core.cmd, c, rng=rng_cmd, stall_prob=stall_prob)
                accepted[0] += 1
                if n + 1 == job.timed_from:         # the cycles count from the next command on
                    while len(reports) < accepted[0]:
                        await ctx.tick()
                    start = cycles[0]
            while len(reports) < len(job.commands):
                await ctx.tick()
            cycles[1] = reports[-1] - start

        reports: list[int] = []        # the clock of each command's ``done``
        accepted = [0]                 # commands accepted: a ``done`` beyond them is one held high

        async def report(ctx):
            # A plain tick per clock (not ``until``), so that the simulation may end with it waiting.
            while True:
                await ctx.tick()
                # A core's ``done`` is one clock per command; a wrapper's may hold until the next
                # command (sim/factory.py, sim/lanes.py): count no more reports than commands.
                if ctx.get(core.done) and len(reports) < accepted[0]:
                    reports.append(cycles[0])
                    if job.is_decoder:
                        st = ctx.get(core.status)
                        statuses.append(int(getattr(st, "value", st)))

        async def inputs(ctx):
            while not configured[0]:
                await ctx.tick()
            for w in job.inputs.tolist():
                await stream_put(ctx, core.i, w, rng=rng_in, stall_prob=stall_prob)

        def side_feeder(name, values):
            async def feed(ctx):
                while not configured[0]:
                    await ctx.tick()
                for v in values:
                    await stream_put(ctx, getattr(core, name), v, rng=rng_in, stall_prob=stall_prob)
            return feed

        async def collect(ctx):
            while True:
                outputs.append(await stream_get(ctx, core.o, rng=rng_out, stall_prob=stall_prob))

        probes = [Value.cast(v) for v in (trace or {}).values()]     # plain values: samples are ints
        samples: list[tuple] = []

        ready_before = [0]     # ready_before[k]: clocks among the first k in which o was ready

        async def clock(ctx):
            while True:
                _, _, ready, *vals = await ctx.tick().sample(core.o.ready, *probes)
                if probes:
                    samples.append(tuple(vals))
                ready_before.append(ready_before[-1] + int(ready))
                cycles[0] += 1
                if cycles[0] > limit:
                    raise TimeoutError(f"{job.kind}: no result after {limit} cycles (core locked up?)")

        sim = Simulator(_with_contract(core) if contract else core)
        sim.add_clock(1e-8)
        sim.add_testbench(commands)
        sim.add_testbench(inputs, background=True)
        if not dataflow:
            sim.add_testbench(report, background=True)
        for name, values in job.side.items():
            sim.add_testbench(side_feeder(name, values), background=True)
        sim.add_testbench(collect, background=True)
        sim.add_testbench(clock, background=True)
        if vcd:
            with sim.write_vcd(vcd):
                sim.run()
        else:
            sim.run()
        wide = any(v >> 64 for v in outputs)       # payloads over 64 bits stay Python ints (as Verilator's)
        n = int(cycles[1] or 0)
        end = min(span[0] + n, len(ready_before) - 1)
        res = SimResult(outputs if wide else np.array(outputs, dtype=np.uint64), statuses, n,
                        ready_cycles=ready_before[end] - ready_before[span[0]])
        if trace:
            cols = np.array(samples, dtype=np.uint64).reshape(-1, len(probes))
            res.trace = {name: cols[:, j] for j, name in enumerate(trace)}
        return res
