"""Parallel decompressors over one shared memory port (paper §4.6, Fig. 12).

:class:`ParallelDecoder` holds ``lanes`` decoder cores (tANS or rANS, programmable; by default the
registry's interleaved cores, ``tans8x16``). A command gives each lane one **independent block**: a
complete ``docs/bitstream.md`` §8 stream with its own flush and head (the blocks layout of container
version 6, ``ansforge compress``'s default), ``count`` pairs in ``words`` words from a beat address of
its own, stored in the order the decoder reads it (top of the stack first), ``beat_words`` words per
memory beat. The lanes decode their blocks side by side, one core command each (``resume`` = 0, the
end check on); a lane whose ``count`` is 0 sits the command out.

Per lane: an address counter, a FIFO of ``fifo_beats`` beats and a serializer that hands the
decoder one word per clock and drops the padding after the stream's last word. A lane asks for a
beat only when its FIFO has room for it and for every beat still in flight (credit flow control),
so the memory's responses never wait. A round-robin arbiter grants one request per clock to the
memory port. The decoders' pairs leave as **rows**: row ``j`` holds pair ``j`` of every lane whose block
has more than ``j`` pairs. The lanes' counts must not increase with the lane index (a tensor's blocks
are all ``block_pairs`` long but its last), so a row's pairs are always lanes ``0 .. n - 1``; a small
FIFO per lane keeps one lane's bubble from stalling the others at once: up to ``lanes`` pairs per clock.

Memory port (``mem_req`` / ``mem_rsp``): a request carries a beat address and the lane (``tag``);
responses come back in any latency, in request order or not, and must be accepted when valid
(``mem_rsp.ready`` is always 1). :class:`ansforge.sim.memory.SharedMemory` is the model used in
simulation (configurable latency and request interval).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Elaboratable, Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .common import COUNT_BITS, DecodeStatus, bits_for, check_int
from .cores import REGISTRY

__all__ = ["ParallelDecoder", "parallel_command_layout", "decoder_classes"]


def decoder_classes() -> tuple[type, ...]:
    """The decoder core classes of the core registry (``hdl/cores.py``: the interleaved ``TansXnDecoder``
    and ``RansDecoder``), and the one-state ``TansDecoder``."""
    from .tans import TansDecoder

    return tuple(dict.fromkeys([r.core_class for r in REGISTRY if r.role == "decoder"] + [TansDecoder]))


def parallel_command_layout(lanes: int, addr_bits: int) -> data.StructLayout:
    """Decode ``count`` pairs in all: lane ``l``'s block has ``count`` pairs in ``words`` words from beat
    address ``base`` (the lanes' counts add up to ``count`` and do not increase with ``l``)."""
    lane = data.StructLayout({"base": addr_bits, "words": COUNT_BITS, "count": COUNT_BITS})
    return data.StructLayout({"count": COUNT_BITS, "lanes": data.ArrayLayout(lane, lanes)})


class ParallelDecoder(wiring.Component):
    """``lanes`` decoder lanes fed from one memory port, merged into rows of ``lanes`` pairs (Fig. 12).

    Parameters
    ----------
    decoder : callable
        Builds one lane's decoder: ``decoder()`` returns a programmable decoder core of the core
        registry (:func:`decoder_classes`; all lanes share its parameters and its table).
    lanes : int
        ``lanes``: 1, 2, 4, 8 or 16.
    beat_words : int
        ``beat_words``: decoder words per memory beat, a power of two up to 16 (the port is ``beat_words * W`` bits wide).
    addr_bits : int
        Width of a beat address, 1..32.
    fifo_beats : int
        Depth of each lane's word FIFO in beats, 2..1024 (cover the memory latency: a lane that
        consumes ``r`` words per clock needs about ``latency * r / beat_words`` beats in flight).

    Ports
    -----
    cfg : In(stream)  the decoders' table writes, sent to every lane at once
    cmd : In(stream)  :func:`parallel_command_layout`: one block per lane
    mem_req : Out(stream)  ``{addr, tag}``
    mem_rsp : In(stream)   ``{data: beat_words * W bits, tag}``, always accepted
    o : Out(stream)  ``{pairs: lanes x {symbol, extra}, n}``: row ``j``, pair ``j`` of lanes ``0 .. n - 1``
        (the lanes whose block has more than ``j`` pairs)
    done, status : Out  ``done`` once every lane's decoder is done and every row is out; ``status``
        is the first failing lane's :class:`~.common.DecodeStatus` (``OK`` if none). Both hold until
        the next command.
    """

    def __init__(self, decoder, *, lanes: int = 4, beat_words: int = 2, addr_bits: int = 16, fifo_beats: int = 8):
        self._k = check_int("lanes", lanes, 1, 16)
        if self._k & (self._k - 1):
            raise ValueError(f"lanes must be a power of two, not {lanes!r}")
        self._p = check_int("beat_words", beat_words, 1, 16)
        if self._p & (self._p - 1):
            raise ValueError(f"beat_words must be a power of two, not {beat_words!r}")
        self._a = check_int("addr_bits", addr_bits, 1, 32)
        self._d = check_int("fifo_beats", fifo_beats, 2, 1024)
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
        super().__init__({
            "cfg": members["cfg"],
            "cmd": In(stream.Signature(parallel_command_layout(self._k, self._a))),
            "mem_req": Out(stream.Signature(data.StructLayout({"addr": self._a, "tag": bits_for(self._k - 1)}))),
            "mem_rsp": In(stream.Signature(data.StructLayout({"data": self._p * self._w,
                                                              "tag": bits_for(self._k - 1)}))),
            "o": Out(stream.Signature(data.StructLayout({"pairs": data.ArrayLayout(self._pair, self._k),
                                                         "n": bits_for(self._k)}))),
            "done": Out(1),
            "status": Out(DecodeStatus),
        })

    lanes = property(lambda self: self._k)
    beat_words = property(lambda self: self._p)
    addr_bits = property(lambda self: self._a)
    fifo_beats = property(lambda self: self._d)
    word_bits = property(lambda self: self._w)      # a memory word: the decoder's port word
    stream_word_bits = property(lambda self: self._sw)

    @property
    def decoder_prototype(self):
        """An (unelaborated) decoder with the lanes' parameters: for its ``cfg`` and command layouts."""
        return self._proto

    def elaborate(self, platform):
        m = Module()
        lanes, per_beat, W, D = self._k, self._p, self._w, self._d
        ratio = self._w // self._sw
        log_k = (lanes - 1).bit_length()

        busy = Signal()
        remaining = Signal(COUNT_BITS)        # pairs still to leave as rows
        cmd_fire = self.cmd.valid & self.cmd.ready

        cfg_ready = []
        requests = Signal(lanes)
        grant = Signal(max(1, log_k))
        req_fire = self.mem_req.valid & self.mem_req.ready
        lane_done, lane_status, lane_issued, counts = [], [], [], []
        out_fifos, addrs = [], []
        for lane in range(lanes):
            dec = self._make()
            m.submodules[f"decoder{lane}"] = dec
            m.d.comb += [dec.cfg.valid.eq(self.cfg.valid), dec.cfg.p.eq(self.cfg.p)]
            cfg_ready.append(dec.cfg.ready)

            # -- fetch: address, beats left, beats in flight (credits)
            addr = Signal(self._a, name=f"addr{lane}")
            addrs.append(addr)
            beats_left = Signal(COUNT_BITS, name=f"beats_left{lane}")
            in_flight = Signal(range(D + 1), name=f"in_flight{lane}")
            # SyncFIFO: ``level`` counts exactly what it holds, so that the credits never overrun it
            m.submodules[f"beats{lane}"] = beats = fifo.SyncFIFO(width=per_beat * W, depth=D)
            granted = req_fire & (grant == lane)
            returned = self.mem_rsp.valid & (self.mem_rsp.p.tag == lane)
            m.d.comb += [requests[lane].eq((beats_left != 0) & (beats.level + in_flight < D)),
                         beats.w_data.eq(self.mem_rsp.p.data), beats.w_en.eq(returned)]
            m.d.sync += in_flight.eq(in_flight + granted - returned)
            with m.If(granted):
                m.d.sync += [addr.eq(addr + 1), beats_left.eq(beats_left - 1)]

            # -- serializer: one word per clock to the decoder, the last beat's padding dropped
            words_left = Signal(COUNT_BITS, name=f"words_left{lane}")
            word = Signal(max(1, (per_beat - 1).bit_length()), name=f"word{lane}")
            word_fire = dec.i.valid & dec.i.ready
            m.d.comb += [dec.i.valid.eq(beats.r_rdy & (words_left != 0)),
                         dec.i.p.data.eq(beats.r_data.word_select(word, W))]
            with m.If(word_fire):
                m.d.sync += words_left.eq(words_left - 1)
                with m.If((word == per_beat - 1) | (words_left == 1)):
                    m.d.comb += beats.r_en.eq(1)
                    m.d.sync += word.eq(0)
                with m.Else():
                    m.d.sync += word.eq(word + 1)

            # -- the lane's decoder command: its block's pairs and words (none: the lane sits it out)
            spec = self.cmd.p.lanes[lane]
            issued = Signal(name=f"issued{lane}")
            cmd_pending = Signal(name=f"cmd_pending{lane}")
            count_r, words_r = Signal(COUNT_BITS, name=f"count{lane}"), Signal(COUNT_BITS, name=f"words{lane}")
            counts.append(count_r)
            # the command's words are the decoder's (stream words); the serializer hands it port words
            port_words = Signal(COUNT_BITS, name=f"port_words{lane}")
            m.d.comb += port_words.eq((spec.words + ratio - 1) >> (ratio - 1))
            with m.If(cmd_fire):
                m.d.sync += [addr.eq(spec.base), beats_left.eq((port_words + per_beat - 1) >> (per_beat - 1).bit_length()),
                             words_left.eq(port_words), word.eq(0), count_r.eq(spec.count), words_r.eq(spec.words),
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
            lane_issued.append(issued)

            m.submodules[f"pairs{lane}"] = pairs = fifo.SyncFIFOBuffered(width=len(dec.o.p.as_value()), depth=4)
            m.d.comb += [pairs.w_data.eq(dec.o.p), pairs.w_en.eq(dec.o.valid), dec.o.ready.eq(pairs.w_rdy)]
            out_fifos.append(pairs)

        m.d.comb += self.cfg.ready.eq(Cat(*cfg_ready).all())

        # -- round-robin arbiter: the first requesting lane at or after ``pointer``
        pointer = Signal(max(1, log_k))
        rotated = Signal(2 * lanes)
        m.d.comb += rotated.eq(Cat(requests, requests) >> pointer)
        offset = Signal(max(1, log_k))
        for j in reversed(range(lanes)):       # the last assignment wins: the lowest set bit
            with m.If(rotated[j]):
                m.d.comb += offset.eq(j)
        m.d.comb += [grant.eq(pointer + offset if lanes > 1 else 0),
                     self.mem_req.valid.eq(requests.any()), self.mem_req.p.tag.eq(grant), self.mem_rsp.ready.eq(1)]
        for lane in range(lanes):
            with m.If(grant == lane):
                m.d.comb += self.mem_req.p.addr.eq(addrs[lane])
        with m.If(req_fire):
            m.d.sync += pointer.eq(grant + 1 if lanes > 1 else 0)

        # -- merge: row j takes pair j of each lane whose block has more than j pairs (lanes 0 .. n - 1,
        # the counts not increasing with the lane)
        row = Signal(COUNT_BITS)
        n = Signal(bits_for(lanes))
        m.d.comb += n.eq(sum((row < c for c in counts), start=Const(0, bits_for(lanes))))
        ready_all = Signal()
        m.d.comb += ready_all.eq(Cat(*[(f.r_rdy | (lane >= n)) for lane, f in enumerate(out_fifos)]).all())
        m.d.comb += [self.o.valid.eq(busy & (remaining != 0) & ready_all), self.o.p.n.eq(n)]
        for lane, f in enumerate(out_fifos):
            m.d.comb += [self.o.p.pairs[lane].eq(f.r_data), f.r_en.eq(self.o.valid & self.o.ready & (lane < n))]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [remaining.eq(remaining - n), row.eq(row + 1)]

        # A lane that fails ends its command early: its pairs never complete the rows, so the command
        # ends when every lane is done; the pairs left in the lane FIFOs are dropped before the next.
        failed = Cat(*[st != DecodeStatus.OK for st in lane_status]).any()
        leftovers = Cat(*[f.r_rdy for f in out_fifos]).any()
        m.d.comb += self.cmd.ready.eq(~busy & ~leftovers)
        with m.If(~busy):
            for f in out_fifos:
                m.d.comb += f.r_en.eq(1)
        with m.If(cmd_fire):
            m.d.sync += [busy.eq(1), remaining.eq(self.cmd.p.count), row.eq(0), self.done.eq(0),
                         self.status.eq(DecodeStatus.OK)]
        with m.Elif(busy & ((remaining == 0) | failed) & Cat(*lane_done).all()):
            m.d.sync += [busy.eq(0), self.done.eq(1)]
            for st in reversed(lane_status):      # the lowest failing lane wins
                with m.If(st != DecodeStatus.OK):
                    m.d.sync += self.status.eq(st)
        return m
