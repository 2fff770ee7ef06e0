"""A shared memory port for simulation: latency, bandwidth and a request/response protocol (Fig. 12).

:class:`SharedMemory` models the memory a group of decompressors shares: a DRAM controller or an
on-chip buffer behind one port. It is an Amaranth component, so that it runs unchanged in both
simulation engines next to the cores it serves, and it is synthesizable (a block RAM with a delay
line), but it is a *model*: the numbers that matter are its parameters.

* ``beat_bits``: the port width; one request reads one beat.
* ``latency``: clocks from an accepted request to its response (``>= 1``).
* ``interval``: clocks between accepted requests (``1`` = a beat per clock; ``2`` halves the
  bandwidth).

Responses come in request order and are never held back (``rsp.ready`` is ignored): the
requester must reserve room before it asks, as :class:`ansforge.hdl.parallel.ParallelDecoder`
does. The contents are written through ``mem_cfg`` before the run (the simulation engines send
every ``*cfg`` stream first).
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Instance, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..hdl.common import bits_for, check_int
from ..hdl.dsp import VerilogExport

__all__ = ["SharedMemory", "SimulationRam"]


class SimulationRam(wiring.Component):
    """The contents of a simulated memory: ``depth`` words of ``width`` bits, one write port, one read
    port whose ``r_data`` is the word at ``r_addr`` one clock later (a registered read; a word written
    in the same clock reads as it was before).

    Elaborated for the Amaranth simulator, an :class:`amaranth.lib.memory.Memory`. In the Verilog text
    (:func:`~ansforge.hdl.verilog.core_verilog`) it is an instance of a behavioural module without an
    initial value: a memory model is written before it is read, and Amaranth would give each word an
    ``initial`` statement (a million lines of Verilog for a 2**19-beat image, minutes to write and to
    compile). Its words then start undefined in Icarus and as Verilator's ``--x-initial`` makes them.
    """

    def __init__(self, *, depth: int, width: int):
        self._depth = check_int("depth", depth, 1, 1 << 24)
        self._width = check_int("width", width, 1, 4096)
        a = bits_for(depth - 1)
        super().__init__({"w_en": In(1), "w_addr": In(a), "w_data": In(width), "r_addr": In(a), "r_data": Out(width)})

    @property
    def module_name(self) -> str:
        return f"ansforge_sim_ram_w{self._width}_d{self._depth}"

    def elaborate(self, platform):
        m = Module()
        if isinstance(platform, VerilogExport):
            platform.add_module(self.module_name, self._verilog())
            m.submodules.ram = Instance(self.module_name, i_clk=ClockSignal(), i_w_en=self.w_en, i_w_addr=self.w_addr,
                                        i_w_data=self.w_data, i_r_addr=self.r_addr, o_r_data=self.r_data)
            return m
        m.submodules.words = mem = Memory(shape=self._width, depth=self._depth, init=[])
        wr, rd = mem.write_port(), mem.read_port()
        m.d.comb += [wr.addr.eq(self.w_addr), wr.data.eq(self.w_data), wr.en.eq(self.w_en),
                     rd.addr.eq(self.r_addr), rd.en.eq(1), self.r_data.eq(rd.data)]
        return m

    def _verilog(self) -> str:
        a, w = len(self.r_addr), self._width
        return f"""
module {self.module_name} (clk, w_en, w_addr, w_data, r_addr, r_data);
  input clk;
  input w_en;
  input [{a - 1}:0] w_addr;
  input [{w - 1}:0] w_data;
  input [{a - 1}:0] r_addr;
  output reg [{w - 1}:0] r_data;
  reg [{w - 1}:0] words [0:{self._depth - 1}];
  always @(posedge clk) begin
    if (w_en)
      words[w_addr] <= w_data;
    r_data <= words[r_addr];
  end
endmodule
"""


class SharedMemory(wiring.Component):
    """``depth`` beats of ``beat_bits``; ``req {addr, tag}`` → ``rsp {data, tag}`` after ``latency`` clocks."""

    def __init__(self, *, depth: int, beat_bits: int, addr_bits: int, tag_bits: int, latency: int = 1,
                 interval: int = 1):
        self._depth = check_int("depth", depth, 1, 1 << 24)
        self._beat = check_int("beat_bits", beat_bits, 1, 1024)
        self._a = check_int("addr_bits", addr_bits, 1, 32)
        self._latency = check_int("latency", latency, 1, 1024)
        self._interval = check_int("interval", interval, 1, 1024)
        super().__init__({
            "mem_cfg": In(stream.Signature(data.StructLayout({"addr": self._a, "data": beat_bits}))),
            "req": In(stream.Signature(data.StructLayout({"addr": self._a, "tag": tag_bits}))),
            "rsp": Out(stream.Signature(data.StructLayout({"data": beat_bits, "tag": tag_bits}))),
        })

    latency = property(lambda self: self._latency)
    interval = property(lambda self: self._interval)
    depth = property(lambda self: self._depth)

    def elaborate(self, platform):
        m = Module()
        # the read is registered: the response's last clock of latency
        m.submodules.storage = ram = SimulationRam(depth=self._depth, width=self._beat)
        m.d.comb += [ram.w_addr.eq(self.mem_cfg.p.addr), ram.w_data.eq(self.mem_cfg.p.data),
                     ram.w_en.eq(self.mem_cfg.valid), self.mem_cfg.ready.eq(1)]

        cool = Signal(bits_for(self._interval - 1))
        fire = self.req.valid & self.req.ready
        m.d.comb += self.req.ready.eq(cool == 0)
        with m.If(fire):
            m.d.sync += cool.eq(self._interval - 1)
        with m.Elif(cool != 0):
            m.d.sync += cool.eq(cool - 1)

        # delay line of latency - 1 stages, then the registered read
        valid, addr, tag = fire, self.req.p.addr, self.req.p.tag
        for stage in range(self._latency - 1):
            v, a, t = Signal(name=f"v{stage}"), Signal(self._a, name=f"a{stage}"), Signal(len(tag), name=f"t{stage}")
            m.d.sync += [v.eq(valid), a.eq(addr), t.eq(tag)]
            valid, addr, tag = v, a, t
        m.d.comb += ram.r_addr.eq(addr)
        m.d.sync += [self.rsp.valid.eq(valid), self.rsp.p.tag.eq(tag)]
        m.d.comb += self.rsp.p.data.eq(ram.r_data)
        return m
