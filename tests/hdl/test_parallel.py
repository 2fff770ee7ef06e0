"""Fig. 12 (parallel decoder lanes over one memory port) and Fig. 13 (the token-factory broadcaster)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from ansforge.hdl.broadcast import WeightBroadcaster
from ansforge.hdl.parallel import ParallelDecoder, SkidBuffer
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.container import compress_checkpoint, open_container
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.factory import PortSpec, TokenFactory, run_factory
from ansforge.sim.jobs import build_core
from ansforge.sim.lanes import LaneSystem, decode_container_lanes, run_lanes
from ansforge.sim.memory import SharedMemory
from ansforge.sim.streams import stream_get, stream_put
from ansforge.sim.verilator import VerilatorEngine


@pytest.fixture(scope="module")
def stories_container(stories, tmp_path_factory):
    out = tmp_path_factory.mktemp("lanes") / "stories.ansf"
    compress_checkpoint(stories, out, "tans8", pairs="bf16", group="tensor")
    return open_container(out)


def _tensor(container, largest=True):
    streams = [s for s in container.streams if s.n_pairs]
    st = max(streams, key=lambda s: s.n_pairs) if largest else streams[0]
    s, e = container.decode_stream(st)
    return st, s, e


def test_skid_buffer_is_a_registered_fifo_at_one_word_a_clock():
    """A lane's feed (``SkidBuffer``): under random valid and ready every word comes out once, in order;
    ``i.ready``, ``o.valid`` and ``o``'s payload do not move with either side's handshake within a clock
    (they are flip-flops); with both sides always willing, one word a clock."""
    dut = SkidBuffer(16)
    rng = random.Random(5)
    sent, got, steady = [], [], []

    async def bench(ctx):
        nxt = 0
        for clock in range(2_300):
            free = clock >= 2_000            # the last 300 clocks: both sides always willing
            in_valid, out_ready = free or rng.random() < 0.7, free or rng.random() < 0.6
            ctx.set(dut.i.valid, 0)
            ctx.set(dut.o.ready, 0)
            before = (ctx.get(dut.i.ready), ctx.get(dut.o.valid), ctx.get(dut.o.p))
            ctx.set(dut.i.valid, in_valid)
            ctx.set(dut.i.p, nxt)
            ctx.set(dut.o.ready, out_ready)
            after = (ctx.get(dut.i.ready), ctx.get(dut.o.valid), ctx.get(dut.o.p))
            assert before == after, f"clock {clock}: a handshake reached the other side in the same clock"
            if in_valid and after[0]:
                sent.append(nxt)
                nxt += 1
            if out_ready and after[1]:
                got.append(after[2])
                steady.append(free)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == sent[:len(got)] and len(sent) - len(got) <= 2
    assert sum(steady) >= 298


@pytest.mark.parametrize("lanes", [1, 4])
def test_lanes_decode_the_whole_container_bit_exactly(lanes, stories_container):
    """Every tensor of stories260K (bf16 pairs, tans8), its pairs dealt over K lanes in the golden
    interleaved mode, decoded by K cores sharing one 64-bit memory port of latency 8. One lane and
    several (one generator for every power of two: 2 and 4 lanes take back-pressure in the Amaranth
    simulator below; more lanes than the port has words, and the port's bound, are
    test_a_narrow_port_limits_the_lanes)."""
    runs = decode_container_lanes(stories_container, VerilatorEngine(), lanes=lanes, beat_words=4, latency=8)
    assert sum(r.pairs for _, r in runs) == 264_128
    per_clock = sum(r.pairs for _, r in runs) / sum(r.cycles for _, r in runs)
    assert per_clock > 0.5 * lanes


def test_lanes_under_back_pressure_in_the_amaranth_simulator(stories_container):
    st, s, e = _tensor(stories_container, largest=False)
    k = int(st.tables[0].extra_bits.max())
    for lanes, beat, latency, interval in ((2, 1, 1, 1), (4, 2, 5, 2)):
        system = LaneSystem(st.spec, lanes=lanes, beat_words=beat, depth=4096, latency=latency, interval=interval,
                            fifo_beats=2, max_extra_bits=k)
        for seed in range(3):
            run = run_lanes(AmaranthEngine(), system, st.tables[0], s[:90], e[:90], stall_prob=0.3, seed=seed)
            assert run.pairs == 90


def test_a_narrow_port_limits_the_lanes(stories_container):
    """One 16-bit word per clock feeds about 1.5 pairs per clock (10.6 bits a pair), whatever K."""
    st, s, e = _tensor(stories_container)
    k = int(st.tables[0].extra_bits.max())
    rates = {}
    for beat in (1, 4):
        system = LaneSystem(st.spec, lanes=4, beat_words=beat, depth=1 << 15, latency=4, max_extra_bits=k)
        rates[beat] = run_lanes(VerilatorEngine(), system, st.tables[0], s, e).pairs_per_clock
    assert rates[1] <= s.size / st.n_words * 1.02          # one word per clock: the port's bound
    assert rates[1] < 1.7 and rates[4] > 2 * rates[1]


def _broadcast(ports: int, depth: int, items: list[int], rng: random.Random, skews: list[int] | None = None,
               jitter: list[float] | None = None):
    """Drive a WeightBroadcaster in the Amaranth simulator: a source with random gaps, and each port
    a processor with its own skew (clocks before its first read) and jitter (probability of not
    being ready); random unless given. Returns what every port received, the clocks the source
    stalled, and the skews."""
    dut = WeightBroadcaster(16, ports=ports, depth=depth)
    got = [[] for _ in range(ports)]
    skews = [rng.randrange(0, 40) for _ in range(ports)] if skews is None else skews
    jitter = [rng.uniform(0.0, 0.6) for _ in range(ports)] if jitter is None else jitter
    stalls = [0]

    async def source(ctx):
        r = random.Random(rng.random())
        for v in items:
            await stream_put(ctx, dut.i, v, rng=r, stall_prob=0.2)

    def sink(n):
        async def run(ctx):
            r = random.Random(rng.random())
            await ctx.tick().repeat(skews[n]) if skews[n] else None
            while len(got[n]) < len(items):
                got[n].append(await stream_get(ctx, dut.o[n], rng=r, stall_prob=jitter[n]))
        return run

    async def stall_counter(ctx):
        async for _, _, stall in ctx.tick().sample(dut.stall):
            stalls[0] += stall

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    for n in range(ports):
        sim.add_testbench(sink(n))
    sim.add_testbench(stall_counter, background=True)
    sim.run()
    return got, stalls[0], skews


@pytest.mark.parametrize("ports", range(1, 17))
def test_every_port_receives_the_identical_stream(ports):
    rng = random.Random(ports)
    items = [rng.randrange(1 << 16) for _ in range(120)]
    depth = rng.choice([1, 2, 4, 8])
    got, stalls, skews = _broadcast(ports, depth, items, rng)
    for n, stream in enumerate(got):
        assert stream == items, f"port {n} of {ports}"
    # The slowest port reads nothing for max(skews) clocks and its FIFO holds `depth` weights: the
    # source, offering a weight on ~80 % of clocks, must stall for about the rest of that time (the
    # slack covers its random gaps before the FIFO fills).
    assert stalls >= max(skews) - 2 * depth - 8, (stalls, skews, depth)


@pytest.mark.parametrize("depth,stalls", [(1, True), (2, False), (8, False)])
def test_broadcaster_stalls_only_when_a_fifo_is_full(depth, stalls):
    """Ports always ready, no skew: a FIFO of 2 or more streams one weight per clock and never stalls
    the source; a one-entry FIFO cannot be written in the clock it is read, so it must stall."""
    rng = random.Random(depth)
    items = [rng.randrange(1 << 16) for _ in range(200)]
    got, n, _ = _broadcast(4, depth, items, rng, skews=[0] * 4, jitter=[0.0] * 4)
    assert all(stream == items for stream in got)
    assert (n > 0) == stalls, n


def test_factory_ports_get_the_decoder_stream_in_verilator(stories_container):
    """N = 16 processors with random skew (0..63 clocks) and jitter on the largest tensor: every port's
    count and CRC-32 equal the golden pair stream's; deeper skew FIFOs stall the decoder less."""
    st, s, e = _tensor(stories_container)
    k = int(st.tables[0].extra_bits.max())
    rng = np.random.default_rng(16)
    ports = [PortSpec(int(rng.integers(0, 64)), int(rng.integers(200, 257)), int(rng.integers(1, 1 << 16)))
             for _ in range(16)]
    stalls = {}
    for depth in (2, 64):
        factory = TokenFactory(st.spec, ports=16, depth=depth, max_extra_bits=k)
        run = run_factory(VerilatorEngine(), factory, st.tables[0], s, e, ports)
        assert run.pairs == s.size
        stalls[depth] = run.stalls
    assert stalls[64] < stalls[2]
    small = TokenFactory(st.spec, ports=3, depth=2, max_extra_bits=k)
    run_factory(AmaranthEngine(), small, st.tables[0], s[:150], e[:150], ports[:3], stall_prob=0.2)


@pytest.mark.parametrize("make,match", [
    (lambda: WeightBroadcaster(8, ports=0), "ports must be between 1 and 64, not 0"),
    (lambda: WeightBroadcaster(8, ports=4, depth=0), "depth must be between 1 and 65536, not 0"),
    (lambda: ParallelDecoder(lambda: build_core("tans-decoder", parse_codec("tans8"), None, programmable=True),
                             lanes=3), "lanes must be a power of two, not 3"),
    (lambda: ParallelDecoder(lambda: build_core("tans-decoder", parse_codec("tans8"), None, programmable=True),
                             fifo_beats=0), "fifo_beats must be between 2 and 1024, not 0"),
    (lambda: ParallelDecoder(lambda: build_core("tans-decoder", parse_codec("tans8"), None, programmable=True),
                             beat_words=3), "beat_words must be a power of two, not 3"),
    (lambda: SharedMemory(depth=16, beat_bits=32, addr_bits=4, tag_bits=1, latency=0), "latency must be between 1"),
    (lambda: PortSpec(skew=-1), "skew must be between 0 and 65535, not -1"),
    (lambda: PortSpec(accept=0), "accept must be between 1 and 256, not 0"),
])
def test_invalid_parameters_name_the_field(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def _run_front(front, units, clocks=400, seed=0):
    """``units`` through ``front`` with random ready on its outputs: what left on ``entries``, ``cmd`` and
    ``words``, and whether it ended (``end``) and ran short (``underrun``)."""
    rng = random.Random(seed)
    got = {"entries": [], "cmd": [], "words": [], "end": False, "underrun": False}

    async def bench(ctx):
        ctx.set(front.load, 1)
        await ctx.tick()
        ctx.set(front.load, 0)
        at = 0
        for _ in range(clocks):
            more = at < len(units)
            ctx.set(front.more, more)
            ctx.set(front.units.valid, more and rng.random() < 0.8)
            ctx.set(front.units.p, units[at] if more else 0)
            for name in ("entries", "cmd", "words"):
                ctx.set(getattr(front, name).ready, rng.random() < 0.7)
            for name in ("entries", "cmd", "words"):
                port = getattr(front, name)
                if ctx.get(port.valid) and ctx.get(port.ready):
                    v = ctx.get(port.p)
                    got[name].append(int(v.as_value().value) if hasattr(v, "as_value") else int(v))
            if ctx.get(front.units.valid) and ctx.get(front.units.ready):
                at += 1
            got["end"], got["underrun"] = bool(ctx.get(front.end)), bool(ctx.get(front.underrun))
            await ctx.tick()

    sim = Simulator(front)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


def _front_units(records, unit_bits, header, entry):
    """Records ``(count, words, entries)`` as a region's units (``unit_bits``, 16-bit words)."""
    from ansforge.sim.streams import pack
    out = []

    def units(value, layout):
        return [(value >> (unit_bits * j)) & ((1 << unit_bits) - 1) for j in range(-(-layout.size // unit_bits))]

    for count, words, entries in records:
        out += units(pack(header, {"count": count, "words": len(words), "entries": len(entries)}), header)
        for kind, addr, value in entries:
            out += units(pack(entry, {"data": value, "addr": addr, "kind": kind}), entry)
        per = unit_bits // 16
        for a in range(0, len(words), per):
            out.append(sum(w << (16 * j) for j, w in enumerate(words[a:a + per])))
    return out


@pytest.mark.parametrize("unit_bits", [32, 64])
def test_lane_front_reads_records_and_ends_a_short_region(unit_bits):
    """A lane's record reader (``LaneFront``) under random back-pressure: each record's table entries, then
    its command, then its words, in order; a record of no pairs issues no command and drops its words; a
    region that ends inside a record's words raises ``underrun`` and hands the command's remaining words
    as zeros (the decoder is never left waiting); one that ends inside a header ends with ``underrun``."""
    from ansforge.hdl.parallel import LaneFront, record_header_layout, table_entry_layout
    entry = table_entry_layout(40)
    header = record_header_layout(20)
    front = LaneFront(unit_bits=unit_bits, word_bits=16, ratio=1, count_bits=20, entry=entry)
    records = [(5, [1, 2, 3], [(0, 7, 0x12345), (3, 2, 0xABCDEF)]), (0, [9, 9], []), (4, [4, 5, 6, 7, 8], [])]
    units = _front_units(records, unit_bits, header, entry)
    got = _run_front(front, units)
    assert got["entries"] == [(0x12345 | 7 << 40), (0xABCDEF | 2 << 40 | 3 << 54)]
    assert got["cmd"] == [5 | 3 << 20, 4 | 5 << 20]
    assert got["words"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert got["end"] and not got["underrun"]

    cut = units[:-1]                                   # the last record's last unit missing
    got = _run_front(LaneFront(unit_bits=unit_bits, word_bits=16, ratio=1, count_bits=20, entry=entry), cut)
    per = unit_bits // 16
    kept = (5 // per) * per if 5 % per else 5 - per   # the words of the units that came
    assert got["words"] == [1, 2, 3] + [4, 5, 6, 7, 8][:kept] + [0] * (5 - kept)
    assert got["end"] and got["underrun"]

    head = _front_units(records[:1], unit_bits, header, entry)[:1] if unit_bits == 32 else []
    got = _run_front(LaneFront(unit_bits=unit_bits, word_bits=16, ratio=1, count_bits=20, entry=entry), head)
    assert got["end"] and got["underrun"] == (unit_bits == 32) and not got["cmd"]


def test_a_one_entry_record_behind_a_block_waits_for_the_lane_to_drain(stories_container):
    """A record of a single table entry right behind a block (a table touched up between two blocks): its
    command waits for the entry, the entry waits for the first block's pairs to leave, then the second
    block decodes; both blocks' pairs are exact. (The waiting command once counted as work in flight, so
    the lane never drained and the entry was never written.)"""
    from ansforge.sim.jobs import CoreJob
    from ansforge.sim.lanes import beat_ints, chunk_blocks, decoder_entries, region_image, unpack_lanes
    from ansforge.sim.streams import pack, payload_shape

    st, s, e = _tensor(stories_container, largest=False)
    system = LaneSystem(st.spec, lanes=1, beat_words=2, depth=4096, latency=3, interval=1, fifo_beats=2,
                        max_extra_bits=int(st.tables[0].extra_bits.max()))
    blocks = chunk_blocks(st.spec, st.tables[0], s[:300], e[:300], 2)
    load = decoder_entries(system.decoder, st.tables[0])
    image, lanes = region_image(system.decoder, [[(blocks[0][0], blocks[0][1], load),
                                                  (blocks[1][0], blocks[1][1], load[-1:])]])
    job = CoreJob("parallel-decoder", system)
    job.cfg = {"mem_cfg": [pack(payload_shape(system, "mem_cfg"), {"addr": a, "data": b})
                           for a, b in enumerate(beat_ints(image))]}
    job.commands = [pack(payload_shape(system, "cmd"), {"lanes": lanes})]
    job.pairs = 300
    res = AmaranthEngine().run(job)
    assert res.statuses == [0]
    (got_s, got_e), = unpack_lanes(system, res.outputs)
    assert np.array_equal(got_s, s[:300]) and np.array_equal(got_e, e[:300].astype(np.uint64))
