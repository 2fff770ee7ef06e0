"""Parallel decompressors over one shared memory port (paper §4.6, Fig. 12).

:class:`ParallelDecoder` holds ``lanes`` decoder cores (tANS or rANS, programmable; by default the
registry's interleaved cores, ``tans8x16``). A command gives each lane one **independent block**: a
complete ``docs/bitstream.md`` §8 stream with its own flush and head (the blocks layout of container
version 6, ``ansforge compress``'s default), ``count`` pairs in ``words`` words from a beat address of
its own, stored in the order the decoder reads it (top of the stack first), ``beat_words`` words per
memory beat. The lanes decode their blocks side by side, one core command each (``resume`` = 0, the
end check on); a lane whose ``count`` is 0 sits the command out.

**Runs** (decoders with table sets, or ``shift_bits`` > 0): a tensor coded with several tables (its
row-shift widths, or a context plan's sets) gives each block a list of runs ``{count, set, shift}``
(:func:`run_entry_layout`): the next ``count`` pairs are decoded with table set ``set`` and leave with
their additional data shifted left by ``shift`` (a row shift's zero bits restored, as the golden
``Container.join`` does). Each lane reads its block's runs from memory like its words: ``runs`` entries
from beat ``runs_base``, ``entries_per_beat`` per beat (entry ``j`` of a beat in its bits
``j * run_bits ..``), through a FIFO of ``fifo_beats`` beats of its own. A run longer than ``count``
can hold is split into several. The runs feed the
decoder's ``sel`` stream and, through a FIFO of :data:`SHIFT_FIFO` runs, the lane's
:class:`PairShift` on its output; they must cover the block's pairs exactly.

Per lane: an address counter, a FIFO of ``fifo_beats`` beats and a serializer that hands the
decoder one word per clock and drops the padding after the stream's last word, through a
:class:`SkidBuffer` (the decoder's ``i.ready`` then ends at its registers). A lane asks for a beat
only when its FIFO has room for it and for every beat still in flight (credit flow control), so the
memory's responses never wait. A round-robin arbiter grants one request per clock to the
memory port. The decoders' pairs leave as **rows**: row ``j`` holds pair ``j`` of every lane whose block
has more than ``j`` pairs. The lanes' counts must not increase with the lane index (a tensor's blocks
are all ``block_pairs`` long but its last), so a row's pairs are always lanes ``0 .. n - 1``; a small
FIFO per lane keeps one lane's bubble from stalling the others at once: up to ``lanes`` pairs per clock.

Memory port (``mem_req`` / ``mem_rsp``): a request carries a beat address and its requester (``tag``:
lane ``l``'s words are ``l``, its runs ``lanes + l``);
responses come back in any latency, in request order or not, and must be accepted when valid
(``mem_rsp.ready`` is always 1). :class:`ansforge.sim.memory.SharedMemory` is the model used in
simulation (configurable latency and request interval).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .common import COUNT_BITS, DecodeStatus, bits_for, check_int
from .cores import REGISTRY

__all__ = ["ParallelDecoder", "parallel_command_layout", "decoder_classes", "BeatReader", "SkidBuffer", "PairShift",
           "run_entry_layout", "SHIFT_FIFO"]

#: Runs a lane's :class:`PairShift` may lag behind its decoder's ``sel``: more than the pairs a decoder
#: holds between its table read and its output (its read-ahead and output registers, under 8), so the
#: FIFO never fills while the decoder waits for a run.
SHIFT_FIFO = 16


def decoder_classes() -> tuple[type, ...]:
    """The decoder core classes of the core registry (``hdl/cores.py``: ``TansXnDecoder``, ``RansDecoder``)."""
    return tuple(dict.fromkeys(r.core_class for r in REGISTRY if r.role == "decoder"))


def parallel_command_layout(lanes: int, addr_bits: int, runs: bool = False,
                            count_bits: int = COUNT_BITS) -> data.StructLayout:
    """One block per lane: lane ``l``'s block has ``count`` pairs in ``words`` words from beat address
    ``base`` (the counts do not increase with ``l``); with ``runs``, also ``runs`` run entries from beat
    address ``runs_base``. Counts are ``count_bits`` wide (the lane decoders' command)."""
    fields = {"base": addr_bits, "words": count_bits, "count": count_bits}
    if runs:
        fields.update({"runs_base": addr_bits, "runs": count_bits})
    return data.StructLayout({"lanes": data.ArrayLayout(data.StructLayout(fields), lanes)})


def run_entry_layout(run_bits: int, set_bits: int, shift_bits: int) -> data.StructLayout:
    """A run in memory, ``run_bits`` wide: ``count`` pairs (the low ``run_bits - set_bits - shift_bits``
    bits, at most 32) decoded with table set ``set``, their additional data shifted left by ``shift``."""
    count = min(COUNT_BITS, run_bits - set_bits - shift_bits)
    if count < 1:
        raise ValueError(f"a {run_bits}-bit run entry has no room for a count beside {set_bits} set bits and "
                         f"{shift_bits} shift bits")
    fields = {"count": count}
    if set_bits:
        fields["set"] = set_bits
    if shift_bits:
        fields["shift"] = shift_bits
    return data.StructLayout(fields)


def _one_hot_or(values):
    """The OR of ``values``, of which at most one is not zero (a one-hot multiplexer)."""
    out = values[0]
    for v in values[1:]:
        out = out | v
    return out


class BeatReader(wiring.Component):
    """One lane's reads of one memory region: ``items`` items of ``item_bits`` from beat ``base``,
    ``per_beat`` items a beat (item 0 in the low bits), handed out one per clock on ``o``.

    A beat is requested (``request``, at ``addr``) only when the FIFO of ``depth`` beats has room for it
    and for every beat still in flight (credits), so a response is always taken the clock it arrives;
    the padding after the last item of the last beat is dropped. Latency: a beat's items are on ``o`` the
    clock after ``fill``.

    ``request`` is a register, so that the credit check (an add and a compare) is not in front of the
    memory port's arbiter; it drops for the clock after a grant, so a reader is granted at most every
    other clock: all a decoder can use when a beat holds two or more of its port words (``per_beat``
    = 1 halves a lone lane's feed; several lanes still fill the port).

    Ports
    -----
    load : In(1)  start a region: ``base`` and ``items`` are taken (the FIFO must be empty)
    base : In(addr_bits), items : In(count_bits)
    request : Out(1), addr : Out(addr_bits)  a beat wanted; ``grant`` says the port took it
    grant : In(1)
    fill : In(1), data : In(per_beat * item_bits)  a response of this reader's
    o : Out(stream) ``item_bits``
    """

    def __init__(self, *, item_bits: int, per_beat: int, addr_bits: int, depth: int, count_bits: int = COUNT_BITS):
        self._w = check_int("item_bits", item_bits, 1, 1024)
        self._p = check_int("per_beat", per_beat, 1, 64)
        if self._p & (self._p - 1):
            raise ValueError(f"per_beat must be a power of two, not {per_beat!r}")
        self._a = check_int("addr_bits", addr_bits, 1, 32)
        self._d = check_int("depth", depth, 2, 1024)
        self._c = check_int("count_bits", count_bits, 1, COUNT_BITS)
        super().__init__({
            "load": In(1), "base": In(addr_bits), "items": In(count_bits),
            "request": Out(1), "addr": Out(addr_bits), "grant": In(1),
            "fill": In(1), "data": In(per_beat * item_bits),
            "o": Out(stream.Signature(item_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        per_beat, W, D = self._p, self._w, self._d
        beats_left = Signal(self._c)
        in_flight = Signal(range(D + 1))
        # SyncFIFO: ``level`` counts exactly what it holds, so that the credits never overrun it
        m.submodules.beats = beats = fifo.SyncFIFO(width=per_beat * W, depth=D)
        # Registered one clock late, and dropped for the clock after a grant: while it is up, no grant
        # has been counted since it was set, and the credits used can only have fallen.
        with m.If(self.grant | self.load):
            m.d.sync += self.request.eq(0)
        with m.Else():
            m.d.sync += self.request.eq((beats_left != 0) & (beats.level + in_flight < D))
        m.d.comb += [beats.w_data.eq(self.data), beats.w_en.eq(self.fill)]
        m.d.sync += in_flight.eq(in_flight + self.grant - self.fill)
        with m.If(self.grant):
            m.d.sync += [self.addr.eq(self.addr + 1), beats_left.eq(beats_left - 1)]

        items_left = Signal(self._c)
        has_items = Signal()              # ``items_left != 0``, a register: ``o.valid`` starts at flip-flops
        item = Signal(max(1, (per_beat - 1).bit_length()))
        m.d.comb += [self.o.valid.eq(beats.r_rdy & has_items),
                     self.o.p.eq(beats.r_data.word_select(item, W) if per_beat > 1 else beats.r_data)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [items_left.eq(items_left - 1), has_items.eq(items_left != 1)]
            with m.If((item == per_beat - 1) | (items_left == 1)):
                m.d.comb += beats.r_en.eq(1)
                m.d.sync += item.eq(0)
            with m.Else():
                m.d.sync += item.eq(item + 1)
        with m.If(self.load):
            m.d.sync += [self.addr.eq(self.base), item.eq(0), items_left.eq(self.items), has_items.eq(self.items != 0),
                         beats_left.eq((self.items + per_beat - 1) >> (per_beat - 1).bit_length())]
        return m


class SkidBuffer(wiring.Component):
    """A stream register of two entries: ``o`` (``valid`` and payload) and ``i.ready`` come from
    flip-flops, so neither side's handshake reaches the other's logic in the same clock, at one
    transfer a clock.

    ``o.ready`` only enables registers (one level of logic): the entry on ``o`` is replaced by the
    held one (the *skid*) or by ``i``'s; a transfer on ``i`` while ``o`` is held goes to the skid, and
    ``i.ready`` is low while the skid is full. Latency: 1 clock from ``i`` to ``o``. Order: first in,
    first out; nothing is dropped or duplicated. Reset empties it.

    Ports
    -----
    i : In(stream) ``width`` bits
    o : Out(stream) ``width`` bits
    """

    def __init__(self, width: int):
        self._w = check_int("width", width, 1, 4096)
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        skid_valid = Signal()
        skid = Signal(self._w)
        m.d.comb += self.i.ready.eq(~skid_valid)
        with m.If(self.o.ready | ~self.o.valid):
            # the entry on ``o`` moves on (or there is none): the skid's entry first, else ``i``'s
            m.d.sync += [self.o.valid.eq(skid_valid | self.i.valid), self.o.p.eq(Mux(skid_valid, skid, self.i.p)),
                         skid_valid.eq(0)]
        with m.Elif(self.i.valid & ~skid_valid):
            m.d.sync += [skid.eq(self.i.p), skid_valid.eq(1)]
        return m


class PairShift(wiring.Component):
    """A lane's pairs with their additional data shifted left by their run's ``shift`` (a row shift's
    zero bits restored: the escape index moves back above the full width with them).

    ``runs`` gives ``{count, shift}`` (at least the fields of :func:`run_entry_layout`; others ignored);
    a pair passes only while its run is known. Combinational (latency 0): ``o`` is ``i`` shifted.
    """

    def __init__(self, pair: data.StructLayout, run: data.StructLayout):
        self._pair, self._run = pair, run
        super().__init__({"runs": In(stream.Signature(run)), "i": In(stream.Signature(pair)),
                          "o": Out(stream.Signature(pair))})

    def elaborate(self, platform):
        m = Module()
        left = Signal(COUNT_BITS)
        shift = Signal.like(self.runs.p.shift)
        fire = self.i.valid & self.i.ready
        m.d.comb += [self.runs.ready.eq((left == 0) | ((left == 1) & fire)),
                     self.o.valid.eq(self.i.valid & (left != 0)), self.i.ready.eq(self.o.ready & (left != 0)),
                     self.o.p.symbol.eq(self.i.p.symbol), self.o.p.extra.eq(self.i.p.extra << shift)]
        with m.If(fire):
            m.d.sync += left.eq(left - 1)
        with m.If(self.runs.valid & self.runs.ready):
            m.d.sync += [left.eq(self.runs.p.count), shift.eq(self.runs.p.shift)]
        return m


class ParallelDecoder(wiring.Component):
    """``lanes`` decoder lanes fed from one memory port, merged into rows of ``lanes`` pairs (Fig. 12).

    Parameters
    ----------
    decoder : callable
        Builds one lane's decoder: ``decoder()`` returns a programmable decoder core of the core
        registry (:func:`decoder_classes`; all lanes share its parameters and its table). A decoder
        built with ``table_sets`` > 1 (it has a ``sel`` stream) takes its runs from memory.
    lanes : int
        ``lanes``: 1, 2, 4, 8 or 16.
    beat_words : int
        ``beat_words``: decoder words per memory beat, a power of two up to 16 (the port is ``beat_words * W`` bits wide).
    addr_bits : int
        Width of a beat address, 1..32.
    fifo_beats : int
        Depth of each lane's word FIFO in beats, 2..1024 (cover the memory latency: a lane that
        consumes ``r`` words per clock needs about ``latency * r / beat_words`` beats in flight).
    shift_bits : int
        Width of a run's ``shift`` (0..5; 0: the pairs leave as decoded). With table sets or a shift,
        each lane reads runs (:func:`run_entry_layout`, ``run_bits = min(32, beat)`` bits each).

    Ports
    -----
    cfg : In(stream)  the decoders' table writes, sent to every lane at once
    cmd : In(stream)  :func:`parallel_command_layout`: one block per lane
    mem_req : Out(stream)  ``{addr, tag}``
    mem_rsp : In(stream)   ``{data: beat_words * W bits, tag}``, always accepted
    o : Out(stream)  ``{pairs: lanes x {symbol, extra}, n, last}``: row ``j``, pair ``j`` of lanes
        ``0 .. n - 1`` (the lanes whose block has more than ``j`` pairs); ``last``: no lane has a pair
        after this row (the command's last row)
    done, status : Out  ``done`` once every lane's decoder is done and every row is out; ``status``
        is the first failing lane's :class:`~.common.DecodeStatus` (``OK`` if none). Both hold until
        the next command.
    """

    def __init__(self, decoder, *, lanes: int = 4, beat_words: int = 2, addr_bits: int = 16, fifo_beats: int = 8,
                 shift_bits: int = 0):
        self._k = check_int("lanes", lanes, 1, 16)
        if self._k & (self._k - 1):
            raise ValueError(f"lanes must be a power of two, not {lanes!r}")
        self._p = check_int("beat_words", beat_words, 1, 16)
        if self._p & (self._p - 1):
            raise ValueError(f"beat_words must be a power of two, not {beat_words!r}")
        self._a = check_int("addr_bits", addr_bits, 1, 32)
        self._d = check_int("fifo_beats", fifo_beats, 2, 1024)
        self._z = check_int("shift_bits", shift_bits, 0, 5)
        self._make = decoder
        proto = decoder()
        classes = decoder_classes()
        if not isinstance(proto, classes) or not proto.programmable:
            raise TypeError(f"decoder must build a programmable {' or '.join(c.__name__ for c in classes)}, "
                            f"not {proto!r}")
        self._proto = proto
        # A prototype for layouts, never elaborated: neither it nor the sub-components its constructor
        # builds (the tANS decoder's coder) is meant to be used.
        for part in (proto, *vars(proto).values()):
            if isinstance(part, Elaboratable):
                part._MustUse__silence = True
        members = proto.signature.members
        # A lane's memory words are the decoder's port words: one stream word, or two where the decoder's
        # port is two words wide (an rANS xN decoder whose pairs may pop twice), packed as the encoder's
        # port gives them (``sim/jobs.py`` ``port_inputs``).
        self._sw = proto.word_bits
        self._w = members["i"].signature.members["payload"].shape["data"].width
        if self._w % self._sw or self._w // self._sw not in (1, 2):
            raise ValueError(f"the decoder's port words are {self._w} bits, its stream's {self._sw}")
        self._pair = members["o"].signature.members["payload"].shape
        # a block's pairs and words: as wide as the decoders' command takes them
        self._cb = members["cmd"].signature.members["payload"].shape["count"].width
        self._s = members["sel"].signature.members["payload"].shape["set"].width if "sel" in members else 0
        self._runs = bool(self._s or self._z)
        beat = self._p * self._w
        self._rb = min(32, beat)
        self._run = run_entry_layout(self._rb, self._s, self._z) if self._runs else None
        requesters = self._k * (2 if self._runs else 1)
        super().__init__({
            "cfg": members["cfg"],
            "cmd": In(stream.Signature(parallel_command_layout(self._k, self._a, self._runs, self._cb))),
            "mem_req": Out(stream.Signature(data.StructLayout({"addr": self._a, "tag": bits_for(requesters - 1)}))),
            "mem_rsp": In(stream.Signature(data.StructLayout({"data": beat, "tag": bits_for(requesters - 1)}))),
            "o": Out(stream.Signature(data.StructLayout({"pairs": data.ArrayLayout(self._pair, self._k),
                                                         "n": bits_for(self._k), "last": 1}))),
            "done": Out(1),
            "status": Out(DecodeStatus),
        })

    lanes = property(lambda self: self._k)
    count_bits = property(lambda self: self._cb)    # a block's pairs, words and runs: fewer than 2**count_bits
    beat_words = property(lambda self: self._p)
    addr_bits = property(lambda self: self._a)
    fifo_beats = property(lambda self: self._d)
    word_bits = property(lambda self: self._w)      # a memory word: the decoder's port word
    stream_word_bits = property(lambda self: self._sw)
    set_bits = property(lambda self: self._s)       # 0: one table, no ``sel``
    shift_bits = property(lambda self: self._z)
    has_runs = property(lambda self: self._runs)    # each lane reads runs (:func:`run_entry_layout`)
    run_bits = property(lambda self: self._rb)      # a run entry's bits in memory
    run_layout = property(lambda self: self._run)   # :func:`run_entry_layout` of the lanes, or None

    @property
    def runs_per_beat(self) -> int:
        return self._p * self._w // self._rb

    @property
    def decoder_prototype(self):
        """An (unelaborated) decoder with the lanes' parameters: for its ``cfg`` and command layouts."""
        return self._proto

    def elaborate(self, platform):
        m = Module()
        lanes, per_beat, W, D, cb = self._k, self._p, self._w, self._d, self._cb
        ratio = self._w // self._sw
        requesters = lanes * (2 if self._runs else 1)

        busy = Signal()
        cmd_fire = self.cmd.valid & self.cmd.ready

        cfg_ready = []
        req_fire = self.mem_req.valid & self.mem_req.ready
        readers = []                          # requester r: lane r's words, lane r - lanes's runs
        lane_done, lane_status, counts = [], [], []
        out_fifos = []
        run_readers = []
        for lane in range(lanes):
            dec = self._make()
            m.submodules[f"decoder{lane}"] = dec
            m.d.comb += [dec.cfg.valid.eq(self.cfg.valid), dec.cfg.p.eq(self.cfg.p)]
            cfg_ready.append(dec.cfg.ready)
            spec = self.cmd.p.lanes[lane]

            # -- the block's words, one port word per clock to the decoder
            m.submodules[f"words{lane}"] = words = BeatReader(item_bits=W, per_beat=per_beat, addr_bits=self._a,
                                                               depth=D, count_bits=cb)
            readers.append(words)
            # the command's words are the decoder's (stream words); the reader hands it port words
            # through a skid buffer, so that the decoder's ``i.ready`` (its bit window's room) does not
            # reach the reader's counters in the same clock (docs/design/subsystem.md, steps 7 and 8)
            m.submodules[f"feed{lane}"] = feed = SkidBuffer(W)
            wiring.connect(m, words.o, feed.i)
            m.d.comb += [words.load.eq(cmd_fire), words.base.eq(spec.base),
                         words.items.eq((spec.words + ratio - 1) >> (ratio - 1)),
                         dec.i.valid.eq(feed.o.valid), dec.i.p.data.eq(feed.o.p), feed.o.ready.eq(dec.i.ready)]

            # -- the block's runs: to the decoder's ``sel`` and to the shifter on its pairs
            pairs_out = dec.o
            if self._runs:
                m.submodules[f"runs{lane}"] = runs = BeatReader(item_bits=self._rb, per_beat=self.runs_per_beat,
                                                                 addr_bits=self._a, depth=D, count_bits=cb)
                run_readers.append(runs)
                m.d.comb += [runs.load.eq(cmd_fire), runs.base.eq(spec.runs_base), runs.items.eq(spec.runs)]
                entry = data.View(self._run, runs.o.p)
                if self._z:
                    m.submodules[f"shift{lane}"] = shift = PairShift(self._pair, self._run)
                    wiring.connect(m, dec.o, shift.i)
                    pairs_out = shift.o
                if self._s and self._z:
                    # one run to both: the shifter's copy waits in a FIFO, as its pairs come later
                    m.submodules[f"shift_runs{lane}"] = lag = fifo.SyncFIFOBuffered(width=self._rb, depth=SHIFT_FIFO)
                    m.d.comb += [dec.sel.valid.eq(runs.o.valid & lag.w_rdy), dec.sel.p.set.eq(entry.set),
                                 dec.sel.p.count.eq(entry.count), lag.w_en.eq(runs.o.valid & dec.sel.ready),
                                 lag.w_data.eq(runs.o.p), runs.o.ready.eq(dec.sel.ready & lag.w_rdy),
                                 shift.runs.valid.eq(lag.r_rdy), shift.runs.p.eq(lag.r_data),
                                 lag.r_en.eq(shift.runs.ready)]
                elif self._s:
                    m.d.comb += [dec.sel.valid.eq(runs.o.valid), dec.sel.p.set.eq(entry.set),
                                 dec.sel.p.count.eq(entry.count), runs.o.ready.eq(dec.sel.ready)]
                else:
                    m.d.comb += [shift.runs.valid.eq(runs.o.valid), shift.runs.p.eq(runs.o.p),
                                 runs.o.ready.eq(shift.runs.ready)]

            # -- the lane's decoder command: its block's pairs and words (none: the lane sits it out)
            issued = Signal(name=f"issued{lane}")
            cmd_pending = Signal(name=f"cmd_pending{lane}")
            count_r, words_r = Signal(cb, name=f"count{lane}"), Signal(cb, name=f"words{lane}")
            counts.append(count_r)
            with m.If(cmd_fire):
                m.d.sync += [count_r.eq(spec.count), words_r.eq(spec.words),
                             cmd_pending.eq(spec.count != 0), issued.eq(0)]
            m.d.comb += [dec.cmd.valid.eq(cmd_pending), dec.cmd.p.count.eq(count_r), dec.cmd.p.words.eq(words_r),
                         dec.cmd.p.check_end.eq(1)]
            with m.If(dec.cmd.valid & dec.cmd.ready):
                m.d.sync += [cmd_pending.eq(0), issued.eq(1)]
            # ``done`` is high for one clock per command: remember it until the next command.
            finished = Signal(name=f"finished{lane}")
            with m.If(issued & dec.done):
                m.d.sync += finished.eq(1)
            with m.If(cmd_fire):
                m.d.sync += finished.eq(spec.count == 0)
            lane_done.append(finished)
            lane_status.append(dec.status)

            m.submodules[f"pairs{lane}"] = pairs = fifo.SyncFIFOBuffered(width=len(dec.o.p.as_value()), depth=4)
            m.d.comb += [pairs.w_data.eq(pairs_out.p), pairs.w_en.eq(pairs_out.valid), pairs_out.ready.eq(pairs.w_rdy)]
            out_fifos.append(pairs)
        readers += run_readers

        m.d.comb += self.cfg.ready.eq(Cat(*cfg_ready).all())

        # -- round-robin arbiter in two registered stages, so that neither the pick's carry chain nor the
        # address multiplexer is behind the other (docs/design/subsystem.md, steps 9 and 11). ``pick`` (one-hot)
        # is the first requesting reader above the last one picked, else the first; it waits in
        # ``queued`` and moves into ``chosen``, with its beat address, when the port is free or takes
        # the request there; the reader is granted then. Readers in ``queued`` or ``chosen`` take no part
        # in the pick, so none is picked twice for one request; the port still takes a request a clock.
        # ``above`` follows the registered pick into ``chosen`` rather than ``pick`` itself: the priority
        # lags one stage (still round robin) and the carry chain no longer feeds a register (step 13).
        requests = Cat(*[r.request for r in readers])
        chosen = Signal(requesters)                   # one-hot: the reader whose request is on ``mem_req``
        queued = Signal(requesters)                   # one-hot: the next pick, behind ``chosen``
        above = Signal(requesters)                    # readers after the last one picked
        candidates = Signal(requesters)
        m.d.comb += candidates.eq(requests & ~chosen & ~queued)
        masked = Signal(requesters)
        m.d.comb += masked.eq(candidates & above)
        pool = Signal(requesters)
        m.d.comb += pool.eq(Mux(masked.any(), masked, candidates))
        pick = Signal(requesters)
        m.d.comb += pick.eq(pool & (~pool + 1))       # its lowest set bit (a carry chain)
        advance = Signal()
        m.d.comb += advance.eq(~chosen.any() | req_fire)
        with m.If(advance):
            m.d.sync += [chosen.eq(queued),
                         self.mem_req.p.addr.eq(_one_hot_or([Mux(queued[r], reader.addr, 0)
                                                             for r, reader in enumerate(readers)])),
                         self.mem_req.p.tag.eq(_one_hot_or([Mux(queued[r], r, 0) for r in range(requesters)]))]
            with m.If(queued.any()):
                m.d.sync += above.eq(~((queued << 1) - 1))
        with m.If(advance | ~queued.any()):
            m.d.sync += queued.eq(pick)
        m.d.comb += [self.mem_req.valid.eq(chosen.any()), self.mem_rsp.ready.eq(1)]
        for r, reader in enumerate(readers):
            m.d.comb += [reader.grant.eq(req_fire & chosen[r]),
                         reader.fill.eq(self.mem_rsp.valid & (self.mem_rsp.p.tag == r)),
                         reader.data.eq(self.mem_rsp.p.data)]

        # -- merge: row j takes pair j of each lane whose block has more than j pairs (lanes 0 .. n - 1,
        # the counts not increasing with the lane). Which lanes take part is a register (``active``),
        # updated from ``row`` (rows out so far, plus one) and each lane's count: the row's handshake
        # depends on no count compare, so the merge's clock does not fall with the lanes
        # (docs/design/subsystem.md).
        active = Signal(lanes)
        row = Signal(cb)
        ending = Cat(*[row == c for c in counts])            # lanes whose last pair is in this row
        m.d.comb += [self.o.p.n.eq(sum((a for a in active), start=Const(0, bits_for(lanes)))),
                     self.o.p.last.eq(~(active & ~ending).any())]
        ready_all = Signal()
        m.d.comb += ready_all.eq(Cat(*[(f.r_rdy | ~active[lane]) for lane, f in enumerate(out_fifos)]).all())
        m.d.comb += self.o.valid.eq(busy & active.any() & ready_all)
        for lane, f in enumerate(out_fifos):
            m.d.comb += [self.o.p.pairs[lane].eq(f.r_data), f.r_en.eq(self.o.valid & self.o.ready & active[lane])]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [active.eq(active & ~ending), row.eq(row + 1)]

        # A lane that fails ends its command early: its pairs never complete the rows, so the command
        # ends when every lane is done; the pairs left in the lane FIFOs are dropped before the next.
        failed = Cat(*[st != DecodeStatus.OK for st in lane_status]).any()
        leftovers = Cat(*[f.r_rdy for f in out_fifos]).any()
        m.d.comb += self.cmd.ready.eq(~busy & ~leftovers)
        with m.If(~busy):
            for f in out_fifos:
                m.d.comb += f.r_en.eq(1)
        with m.If(cmd_fire):
            m.d.sync += [busy.eq(1), active.eq(Cat(*[self.cmd.p.lanes[lane].count != 0 for lane in range(lanes)])),
                         row.eq(1), self.done.eq(0), self.status.eq(DecodeStatus.OK)]
        with m.Elif(busy & (~active.any() | failed) & Cat(*lane_done).all()):
            m.d.sync += [busy.eq(0), self.done.eq(1)]
            for st in reversed(lane_status):      # the lowest failing lane wins
                with m.If(st != DecodeStatus.OK):
                    m.d.sync += self.status.eq(st)
        return m
