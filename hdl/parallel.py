"""Parallel decompressors over one shared memory port (paper §4.6, Fig. 12).

:class:`ParallelDecoder` holds ``lanes`` decoder cores (tANS or rANS, programmable; by default the
registry's interleaved cores, ``tans8x16``). Each lane holds **its own tables** and reads **its own
region** of memory: a sequence of records (:class:`LaneFront`), each an independent block (a complete
``docs/bitstream.md`` §8 stream with its own flush and head, the blocks layout of container version 6,
``ansforge compress``'s default) with, in front of it, a header (:func:`record_header_layout`: the
block's pairs and words) and the table entries the block needs (:func:`table_entry_layout`; none where
the lane's previous block had the same tables). One command starts every lane on its region; the lanes
then decode blocks of different tensors at once, one decoder command per block (``resume`` = 0, the end
check on). A lane loads a block's tables once every pair of its previous block has left (:attr:`tables`
for the tables behind the decoder); a table of ``R = 8`` is about 400 one-unit entries, against some 2^18
pairs in a block of the default layout, so the load is not overlapped with decoding.

**Runs** (decoders with table sets, or ``shift_bits`` > 0): a tensor coded with several tables (its
row-shift widths, or a context plan's sets) gives each block a list of runs ``{count, set, shift}``
(:func:`run_entry_layout`): the next ``count`` pairs are decoded with table set ``set`` and leave with
their additional data shifted left by ``shift`` (a row shift's zero bits restored, as the golden
``Container.join`` does). Each lane reads the runs of its blocks, one block's after another, from memory
like its region: ``runs`` entries from beat ``runs_base``, ``entries_per_beat`` per beat (entry ``j`` of
a beat in its bits ``j * run_bits ..``), through a FIFO of ``fifo_beats`` beats of its own. A run longer
than ``count`` can hold is split into several. The runs feed the decoder's ``sel`` stream and, through a
FIFO of :data:`SHIFT_FIFO` runs, the lane's :class:`PairShift` on its output; each block's must cover its
pairs exactly.

Per lane: a :class:`BeatReader` of the region (an address counter, a FIFO of ``fifo_beats`` beats, units
of ``min(64, beat)`` bits out), the :class:`LaneFront` (headers, table entries, and the words one per
clock) and a :class:`SkidBuffer` in front of the decoder (its ``i.ready`` then ends at its registers). A
lane asks for a beat only when its FIFO has room for it and for every beat still in flight (credit flow
control), so the memory's responses never wait. A round-robin arbiter grants one request per clock to
the memory port. The decoders' pairs leave in **transfers**: slot ``l`` of a transfer is lane ``l``'s
next pair, where it has one (``valid``); a FIFO per lane keeps one lane's bubble from stalling the
others: up to ``lanes`` pairs per clock. A lane's pairs are its region's blocks in order, so a consumer
that knows which blocks it gave each lane (the driver does) reassembles them by slot.

Memory port (``mem_req`` / ``mem_rsp``): a request carries a beat address and its requester (``tag``:
lane ``l``'s region is ``l``, its runs ``lanes + l``); responses come back in any latency, in request
order or not, and must be accepted when valid (``mem_rsp.ready`` is always 1).
:class:`ansforge.sim.memory.SharedMemory` is the model used in simulation (configurable latency and
request interval).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import data, enum, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .common import COUNT_BITS, DecodeStatus, bits_for, check_int
from .cores import REGISTRY

__all__ = ["ParallelDecoder", "LaneFront", "parallel_command_layout", "decoder_classes", "BeatReader", "SkidBuffer",
           "PairShift", "PairTag", "run_entry_layout", "record_header_layout", "table_entry_layout", "Table",
           "TABLE_ADDR_BITS", "TAG_BITS", "SHIFT_FIFO", "TAG_FIFO"]

#: Runs a lane's :class:`PairShift` may lag behind its decoder's ``sel``: more than the pairs a decoder
#: holds between its table read and its output (its read-ahead and output registers, under 8), so the
#: FIFO never fills while the decoder waits for a run.
SHIFT_FIFO = 16

#: Blocks whose pairs a lane's :class:`PairTag` waits for: the one decoding and the next, whose command
#: the decoder takes while it ends the first (a third waits until the first block's last pair is out,
#: long before the decoder could start it).
TAG_FIFO = 2


def decoder_classes() -> tuple[type, ...]:
    """The decoder core classes of the core registry (``hdl/cores.py``: ``TansXnDecoder``, ``RansDecoder``)."""
    return tuple(dict.fromkeys(r.core_class for r in REGISTRY if r.role == "decoder"))


#: Address bits of a table entry (:func:`table_entry_layout`): the deepest table a lane holds.
TABLE_ADDR_BITS = 14


class Table(enum.IntEnum):
    """A table entry's ``kind`` (:func:`table_entry_layout`): which of a lane's tables it writes."""
    DECODER = 0         #: the decoder's ANS table (its ``cfg``; all table sets)
    SYMBOL = 1          #: symbol → {code, escape} (the subsystem's :class:`~.subsystem.SymbolToCode`)
    ESCAPE = 2          #: escape index → code
    FLOAT = 3           #: code → float entry of :class:`~.interfaces.PairToFloat`


#: Width of a record's ``tag`` (:func:`record_header_layout`): what each of its block's pairs carries out.
TAG_BITS = 16


def record_header_layout(count_bits: int, state_bits: int = 0, bit_bits: int = 0) -> data.StructLayout:
    """A record's header in a lane's region: its block's ``count`` pairs in ``words`` stream words, after
    ``entries`` table entries (0: the lane keeps the tables it holds); ``tag`` (:data:`TAG_BITS`) goes out
    with every pair of the block (the driver's number for it: ansforge's numbers a START's blocks in
    container order).

    With ``state_bits`` (lanes built ``resumable``) the record may be a part of a block, cut at a
    checkpoint: ``resume`` = 1 starts the decoder at the checkpoint (``state``, ``bit``: the decoder
    command's fields, :func:`~.common.decoder_command_layout`), and ``partial`` = 1 says the stream goes on
    past the record (no end check). Zero in both is a whole block, as without them."""
    fields = {"count": count_bits, "words": count_bits, "entries": 16, "tag": TAG_BITS}
    if state_bits:
        fields |= {"resume": 1, "partial": 1, "bit": bit_bits, "state": state_bits}
    return data.StructLayout(fields)


def table_entry_layout(data_bits: int) -> data.StructLayout:
    """A table entry in a lane's region: ``data`` (the table's entry, low bits first) written at ``addr`` of
    the lane's table ``kind`` (:class:`Table`)."""
    return data.StructLayout({"data": data_bits, "addr": TABLE_ADDR_BITS, "kind": 2})


def parallel_command_layout(lanes: int, addr_bits: int, runs: bool = False,
                            count_bits: int = COUNT_BITS) -> data.StructLayout:
    """One region per lane: lane ``l``'s records are ``units`` units from beat address ``base``
    (:class:`LaneFront`); with ``runs``, also ``runs`` run entries from beat address ``runs_base`` (its
    blocks' runs, one after another). Counts are ``count_bits`` wide (the lane decoders' command)."""
    fields = {"base": addr_bits, "units": count_bits}
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
    the padding after the last item of the last beat is dropped. Latency: a beat's items are on ``o`` two
    clocks after ``fill`` (the FIFO's output is a register).

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
    more : Out(1)  items of the region are still to come on ``o`` (a register: low from the clock after
        the last item's transfer, and after a ``load`` of no items)
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
            "more": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        per_beat, W, D = self._p, self._w, self._d
        beats_left = Signal(self._c)
        in_flight = Signal(range(D + 1))
        # ``level`` counts exactly what it holds, so that the credits (``D`` beats) never overrun it. The
        # buffered FIFO's read data and ``r_rdy`` are registers: the consumer's handshake starts at
        # flip-flops rather than behind the storage's read multiplexer (its storage is ``D`` deep, a power
        # of two where ``D`` is, the output register one beat more).
        m.submodules.beats = beats = fifo.SyncFIFOBuffered(width=per_beat * W, depth=D + 1)
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
        has_items = self.more             # ``items_left != 0``, a register: ``o.valid`` starts at flip-flops
        # ``items_left == 1``, a register: the FIFO's read, behind the consumer's ``ready``, does not wait
        # on a compare of the count
        one_left = Signal()
        item = Signal(max(1, (per_beat - 1).bit_length()))
        m.d.comb += [self.o.valid.eq(beats.r_rdy & has_items),
                     self.o.p.eq(beats.r_data.word_select(item, W) if per_beat > 1 else beats.r_data)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [items_left.eq(items_left - 1), has_items.eq(~one_left), one_left.eq(items_left == 2)]
            with m.If((item == per_beat - 1) | one_left):
                m.d.comb += beats.r_en.eq(1)
                m.d.sync += item.eq(0)
            with m.Else():
                m.d.sync += item.eq(item + 1)
        with m.If(self.load):
            m.d.sync += [self.addr.eq(self.base), item.eq(0), items_left.eq(self.items), has_items.eq(self.items != 0),
                         one_left.eq(self.items == 1),
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


class PairTag(wiring.Component):
    """A lane's pairs, each with its block's tag: ``blocks`` gives ``{count, tag}`` per block, in the order
    the decoder takes the blocks' commands (``count`` >= 1); ``o`` is ``i`` with ``tag`` beside it, and a
    pair passes only while its block is known.

    Combinational from ``i`` to ``o`` (latency 0); ``i.ready`` and ``o.valid`` depend on ``blocks`` only
    through registers (``known``: a block's pairs are still to come), so the tag adds no logic between the
    decoder's output handshake and the FIFO behind it.
    """

    def __init__(self, pair: data.StructLayout, count_bits: int):
        self._pair = pair
        self._cb = check_int("count_bits", count_bits, 1, COUNT_BITS)
        block = data.StructLayout({"count": count_bits, "tag": TAG_BITS})
        super().__init__({"blocks": In(stream.Signature(block)), "i": In(stream.Signature(pair)),
                          "o": Out(stream.Signature(data.StructLayout({"pair": pair, "tag": TAG_BITS})))})

    def elaborate(self, platform):
        m = Module()
        left = Signal(self._cb)
        known, last = Signal(), Signal()     # ``left != 0``, ``left == 1``: registers
        tag = Signal(TAG_BITS)
        fire = self.i.valid & self.i.ready
        m.d.comb += [self.o.valid.eq(self.i.valid & known), self.i.ready.eq(self.o.ready & known),
                     self.o.p.pair.eq(self.i.p), self.o.p.tag.eq(tag),
                     self.blocks.ready.eq(~known | (last & fire))]
        with m.If(self.blocks.valid & self.blocks.ready):
            m.d.sync += [left.eq(self.blocks.p.count), known.eq(self.blocks.p.count != 0),
                         last.eq(self.blocks.p.count == 1), tag.eq(self.blocks.p.tag)]
        with m.Elif(fire):
            m.d.sync += [left.eq(left - 1), known.eq(~last), last.eq(left == 2)]
        return m


class LaneFront(wiring.Component):
    """One lane's region of records, unit by unit, turned into table writes, decoder commands and the
    decoder's words (:func:`record_header_layout`, :func:`table_entry_layout`).

    A region is a sequence of records, each from a unit boundary (a unit is ``unit_bits``, unit 0 of a beat
    in its low bits): a header of ``header_units`` units, ``entries`` table entries of ``entry_units`` units
    each, then the block's port words, ``unit_bits / word_bits`` a unit (word 0 in the low bits), the last
    unit padded. A record whose header names no entries keeps the tables the lane holds.

    Order: a record's table entries leave on ``entries`` before its command on ``cmd``, and its words after
    its command; the next record's header is read while its block decodes, so blocks without tables follow
    one another without a gap. A record of ``count`` 0 issues no command; its words are dropped.

    The region ends where a header would start and ``more`` is low: ``end`` rises. A region that ends inside
    a record (a header or entry cut short, fewer units than its words need) raises ``underrun`` and ends
    too; the words a command was promised are then given as zeros, so that the decoder ends its command
    (with an error status) instead of waiting.

    Ports
    -----
    load : In(1)  a new region (the unit stream must be empty): back to the first header
    units : In(stream) ``unit_bits``  the region's units (a :class:`BeatReader`'s ``o``)
    more : In(1)  units of the region are still to come (the reader's ``more``)
    words : Out(stream) ``word_bits``  the decoder's port words, from the unit on ``units`` (a word
        selected from it: put a register stage behind, as :class:`ParallelDecoder` does)
    cmd : Out(stream) ``{count, words, tag}``  the decoder's command (``words``: stream words) and the
        record's tag, from registers; with ``state_bits``, also ``{resume, check_end, bit, state}`` (a
        part of a block resumed at a checkpoint, :func:`record_header_layout`)
    entries : Out(stream) :func:`table_entry_layout`  an entry the clock its last unit is on ``units``
    end : Out(1)  the region is read to its end
    underrun : Out(1)  it ended inside a record (until ``load``)
    """

    HEAD, TABLE, WORDS, END = range(4)

    def __init__(self, *, unit_bits: int, word_bits: int, ratio: int, count_bits: int, entry: data.StructLayout,
                 state_bits: int = 0, bit_bits: int = 0):
        self._u = check_int("unit_bits", unit_bits, 8, 64)
        self._w = check_int("word_bits", word_bits, 1, unit_bits)
        if unit_bits % word_bits:
            raise ValueError(f"a {unit_bits}-bit unit does not hold whole {word_bits}-bit words")
        self._r = check_int("ratio", ratio, 1, 2)
        self._cb = check_int("count_bits", count_bits, 1, COUNT_BITS)
        self._hdr = record_header_layout(count_bits, state_bits, bit_bits)
        self._entry = entry
        cmd = {"count": count_bits, "words": count_bits, "tag": TAG_BITS}
        if state_bits:
            cmd |= {"resume": 1, "check_end": 1, "bit": bit_bits, "state": state_bits}
        self._resumable = bool(state_bits)
        super().__init__({
            "load": In(1),
            "units": In(stream.Signature(unit_bits)),
            "more": In(1),
            "words": Out(stream.Signature(word_bits)),
            "cmd": Out(stream.Signature(data.StructLayout(cmd))),
            "entries": Out(stream.Signature(entry)),
            "end": Out(1),
            "underrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        U, W, cb = self._u, self._w, self._cb
        per_unit = U // W
        hdr_units = -(-self._hdr.size // U)
        entry_units = -(-self._entry.size // U)
        # A group (a header or an entry) is used the clock its last unit is on ``units``; only its
        # earlier units are held (none for one-unit headers and entries: the default format's).
        hold = max(hdr_units, entry_units) - 1

        state = Signal(2, init=self.HEAD)
        acc = Signal(max(1, hold * U))        # a group's earlier units, shifted in from the top
        got = Signal(range(hold + 1))
        entries_left = Signal(self._hdr["entries"].width)
        words_left = Signal(cb)               # port words of the record still to hand on
        one_left = Signal()                   # ``words_left == 1``, a register
        drop = Signal()                       # a record of no pairs: its words go nowhere
        idx = Signal(range(per_unit))         # the next word of the unit on ``units``

        def group(n):
            """The group whose last unit is on ``units``, ``n`` units long."""
            return Cat(acc[(hold - n + 1) * U:], self.units.p) if n > 1 else self.units.p

        hdr = data.View(self._hdr, group(hdr_units)[:self._hdr.size])
        last_unit = got == Mux(state == self.HEAD, hdr_units - 1, entry_units - 1)
        m.d.comb += [self.entries.valid.eq((state == self.TABLE) & self.units.valid & last_unit),
                     self.entries.p.eq(group(entry_units)[:self._entry.size]),
                     self.end.eq(state == self.END)]
        # ``units.ready`` never depends on ``units.valid`` (the reader's FIFO level): it is the state's
        # and the consumers' alone, so that the reader's handshake is two levels deep
        collecting = ((state == self.HEAD) | (state == self.TABLE)) & ~last_unit
        with m.If(collecting):
            m.d.comb += self.units.ready.eq(1)
        with m.If(collecting & self.units.valid):
            m.d.sync += [acc.eq(Cat(acc[U:], self.units.p) if hold > 1 else self.units.p), got.eq(got + 1)]

        count_r, words_r, tag_r, cmd_valid = Signal(cb), Signal(cb), Signal(TAG_BITS), Signal()
        m.d.comb += [self.cmd.valid.eq(cmd_valid), self.cmd.p.count.eq(count_r), self.cmd.p.words.eq(words_r),
                     self.cmd.p.tag.eq(tag_r)]
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += cmd_valid.eq(0)
        if self._resumable:
            # {resume, check_end, bit, state} of the record's command, in that order
            resume_r = Signal(2 + len(self.cmd.p.bit) + len(self.cmd.p.state))
            m.d.comb += Cat(self.cmd.p.resume, self.cmd.p.check_end, self.cmd.p.bit, self.cmd.p.state).eq(resume_r)

        # the words: straight from the unit on ``units`` (the skid buffer behind registers them), zeros
        # once the region has run out under a command
        in_words = state == self.WORDS
        m.d.comb += [self.words.valid.eq(in_words & ~drop & (self.units.valid | self.underrun)),
                     self.words.p.eq(Mux(self.underrun, 0,
                                         self.units.p.word_select(idx, W) if per_unit > 1 else self.units.p))]
        step = Signal()                       # a word handed on (or dropped)
        m.d.comb += step.eq(in_words & Mux(drop, self.units.valid | self.underrun, self.words.valid & self.words.ready))
        unit_done = ((idx == per_unit - 1) if per_unit > 1 else Const(1)) | one_left
        with m.If(in_words & ~self.underrun & unit_done & (drop | self.words.ready)):
            m.d.comb += self.units.ready.eq(1)
        with m.If(step):
            m.d.sync += [idx.eq(Mux(unit_done, 0, idx + 1)), words_left.eq(words_left - 1),
                         one_left.eq(words_left == 2)]
            with m.If(one_left):
                m.d.sync += state.eq(Mux(self.underrun, self.END, self.HEAD))

        with m.Switch(state):
            with m.Case(self.HEAD):
                with m.If(last_unit & ~cmd_valid):
                    m.d.comb += self.units.ready.eq(1)
                with m.If(self.units.valid & last_unit & ~cmd_valid):
                    port_words = (hdr.words + self._r - 1) >> (self._r - 1)
                    if self._resumable:
                        m.d.sync += [resume_r.eq(Cat(hdr.resume, ~hdr.partial, hdr.bit, hdr.state))]
                    m.d.sync += [got.eq(0), count_r.eq(hdr.count), words_r.eq(hdr.words), tag_r.eq(hdr.tag),
                                 words_left.eq(port_words), one_left.eq(port_words == 1),
                                 entries_left.eq(hdr.entries), drop.eq(hdr.count == 0)]
                    with m.If(hdr.entries != 0):
                        m.d.sync += state.eq(self.TABLE)
                    with m.Else():
                        m.d.sync += [cmd_valid.eq(hdr.count != 0),
                                     state.eq(Mux(hdr.words != 0, self.WORDS, self.HEAD))]
                with m.Elif(~self.more):
                    # nothing more: the region ends here, or inside a header
                    m.d.sync += [state.eq(self.END), self.underrun.eq(got != 0)]
            with m.Case(self.TABLE):
                with m.If(last_unit):
                    m.d.comb += self.units.ready.eq(self.entries.ready)
                with m.If(self.entries.valid & self.entries.ready):
                    m.d.sync += [got.eq(0), entries_left.eq(entries_left - 1)]
                    with m.If(entries_left == 1):
                        m.d.sync += [cmd_valid.eq(count_r != 0),
                                     state.eq(Mux(words_left != 0, self.WORDS, self.HEAD))]
                with m.Elif(~self.more):
                    m.d.sync += [state.eq(self.END), self.underrun.eq(1)]
            with m.Case(self.WORDS):
                with m.If(~self.more & ~self.underrun):
                    m.d.sync += self.underrun.eq(1)
        with m.If(self.load):
            m.d.sync += [state.eq(self.HEAD), got.eq(0), cmd_valid.eq(0), idx.eq(0), self.underrun.eq(0)]
        return m


class ParallelDecoder(wiring.Component):
    """``lanes`` decoder lanes fed from one memory port, each through a region of records (Fig. 12).

    Parameters
    ----------
    decoder : callable
        Builds one lane's decoder: ``decoder()`` returns a programmable decoder core of the core
        registry (:func:`decoder_classes`; all lanes share its parameters, each holds its own tables).
        A decoder built with ``table_sets`` > 1 (it has a ``sel`` stream) takes its runs from memory.
    lanes : int
        ``lanes``: 1, 2, 4, 8 or 16.
    beat_words : int
        ``beat_words``: decoder port words per memory beat, a power of two up to 16 (the port is
        ``beat_words * W`` bits wide).
    addr_bits : int
        Width of a beat address, 1..32.
    fifo_beats : int
        Depth of each lane's beat FIFO, 2..1024 (cover the memory latency: a lane that consumes ``r``
        beats per clock needs about ``latency * r`` beats in flight).
    shift_bits : int
        Width of a run's ``shift`` (0..5; 0: the pairs leave as decoded). With table sets or a shift,
        each lane reads runs (:func:`run_entry_layout`, ``run_bits = min(32, beat)`` bits each).
    table_data_bits : int
        Data bits of a table entry (:func:`table_entry_layout`): at least the decoder's table entry; more
        where the lanes' ``tables`` carry wider entries (the subsystem's float table).
    resumable : bool
        Records may be parts of a block resumed at a checkpoint (:func:`record_header_layout` with the
        decoder command's ``state`` and ``bit``): larger headers; what a driver whose memory cannot hold a
        whole block needs.

    Ports
    -----
    cmd : In(stream)  :func:`parallel_command_layout`: each lane's region of records (and runs)
    mem_req : Out(stream)  ``{addr, tag}``
    mem_rsp : In(stream)   ``{data: beat_words * W bits, tag}``, always accepted
    tables : Out(stream).array(lanes)  lane ``l``'s table entries of other kinds than ``DECODER``, each
        while the lane holds no pair (every pair of its previous block has left on ``o``): a consumer
        that keeps per-lane tables behind ``o`` takes an entry only once those pairs have left it too
    o : Out(stream)  ``{pairs: lanes x {symbol, extra}, tags: lanes x TAG_BITS, valid: lanes, last}``: pair
        slot ``l`` holds lane ``l``'s next pair where ``valid[l]``, ``tags[l]`` its record's tag (the
        header's); ``last``: no pair follows (the command's last transfer). A
        transfer is held until the next one is formed (one transfer of look-ahead), so ``last`` is exact;
        ``o.valid`` comes from registers.
    done, status : Out  ``done`` once every lane has read its region and every pair is out; ``status``
        is the lowest failing lane's first :class:`~.common.DecodeStatus` (``OUT_OF_WORDS`` for a region
        that ends inside a record; ``OK`` if none). Both hold until the next command.
    """

    def __init__(self, decoder, *, lanes: int = 4, beat_words: int = 2, addr_bits: int = 16, fifo_beats: int = 8,
                 shift_bits: int = 0, table_data_bits: int | None = None, resumable: bool = False):
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
        cmd_shape = members["cmd"].signature.members["payload"].shape
        self._cb = cmd_shape["count"].width
        if not isinstance(resumable, bool):
            raise TypeError(f"resumable must be a bool, not {resumable!r}")
        self._resume = (cmd_shape["state"].width, cmd_shape["bit"].width) if resumable else (0, 0)
        self._s = members["sel"].signature.members["payload"].shape["set"].width if "sel" in members else 0
        self._runs = bool(self._s or self._z)
        beat = self._p * self._w
        self._rb = min(32, beat)
        self._run = run_entry_layout(self._rb, self._s, self._z) if self._runs else None
        self._cfg = members["cfg"].signature.members["payload"].shape
        data_bits = self._cfg["data"].width
        self._tdb = data_bits if table_data_bits is None else check_int("table_data_bits", table_data_bits, data_bits, 112)
        if self._cfg["addr"].width > TABLE_ADDR_BITS:
            raise ValueError(f"the decoder's table has {self._cfg['addr'].width} address bits; an entry holds "
                             f"{TABLE_ADDR_BITS}")
        self._entry = table_entry_layout(self._tdb)
        self._tagged = data.StructLayout({"pair": self._pair, "tag": TAG_BITS})
        self._unit = min(64, beat)
        requesters = self._k * (2 if self._runs else 1)
        super().__init__({
            "cmd": In(stream.Signature(parallel_command_layout(self._k, self._a, self._runs, self._cb))),
            "mem_req": Out(stream.Signature(data.StructLayout({"addr": self._a, "tag": bits_for(requesters - 1)}))),
            "mem_rsp": In(stream.Signature(data.StructLayout({"data": beat, "tag": bits_for(requesters - 1)}))),
            "tables": Out(stream.Signature(self._entry)).array(self._k),
            "o": Out(stream.Signature(data.StructLayout({"pairs": data.ArrayLayout(self._pair, self._k),
                                                         "tags": data.ArrayLayout(TAG_BITS, self._k),
                                                         "valid": self._k, "last": 1}))),
            "done": Out(1),
            "status": Out(DecodeStatus),
        })

    lanes = property(lambda self: self._k)
    count_bits = property(lambda self: self._cb)    # a block's pairs and words, a region's units and runs
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
    unit_bits = property(lambda self: self._unit)   # a region's unit: ``min(64, beat)`` bits
    entry_layout = property(lambda self: self._entry)   # :func:`table_entry_layout` of the lanes
    header_layout = property(lambda self: record_header_layout(self._cb, *self._resume))
    resumable = property(lambda self: bool(self._resume[0]))

    @property
    def header_units(self) -> int:
        """Units of a record's header."""
        return -(-self.header_layout.size // self._unit)

    @property
    def entry_units(self) -> int:
        """Units of a table entry."""
        return -(-self._entry.size // self._unit)

    @property
    def units_per_beat(self) -> int:
        return self._p * self._w // self._unit

    @property
    def runs_per_beat(self) -> int:
        return self._p * self._w // self._rb

    @property
    def decoder_prototype(self):
        """An (unelaborated) decoder with the lanes' parameters: for its ``cfg`` and command layouts."""
        return self._proto

    def elaborate(self, platform):
        m = Module()
        lanes, D, cb = self._k, self._d, self._cb
        ratio = self._w // self._sw
        requesters = lanes * (2 if self._runs else 1)

        busy = Signal()
        cmd_fire = self.cmd.valid & self.cmd.ready

        req_fire = self.mem_req.valid & self.mem_req.ready
        readers = []                          # requester r: lane r's region, lane r - lanes's runs
        lane_status, finished, fifos, table_wait = [], [], [], []
        run_readers = []
        held_valid, formed_valid = Signal(), Signal()
        held_mask, formed_mask = Signal(lanes), Signal(lanes)
        for lane in range(lanes):
            dec = self._make()
            m.submodules[f"decoder{lane}"] = dec
            spec = self.cmd.p.lanes[lane]

            # -- the lane's region: units to its front, words on through a skid buffer (the decoder's
            # ``i.ready`` then ends at registers: docs/design/subsystem.md, steps 7 and 8)
            m.submodules[f"region{lane}"] = region = BeatReader(item_bits=self._unit, per_beat=self.units_per_beat,
                                                                addr_bits=self._a, depth=D, count_bits=cb)
            readers.append(region)
            m.submodules[f"front{lane}"] = front = LaneFront(unit_bits=self._unit, word_bits=self._w, ratio=ratio,
                                                             count_bits=cb, entry=self._entry, state_bits=self._resume[0],
                                                             bit_bits=self._resume[1])
            m.submodules[f"feed{lane}"] = feed = SkidBuffer(self._w)
            wiring.connect(m, region.o, front.units)
            wiring.connect(m, front.words, feed.i)
            m.d.comb += [region.load.eq(cmd_fire), region.base.eq(spec.base), region.items.eq(spec.units),
                         front.load.eq(cmd_fire), front.more.eq(region.more),
                         dec.i.valid.eq(feed.o.valid), dec.i.p.data.eq(feed.o.p), feed.o.ready.eq(dec.i.ready)]

            # -- the lane's runs: to the decoder's ``sel`` and to the shifter on its pairs
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

            # -- the lane's decoder commands, one per record with pairs
            # commands taken and not yet done: a decoder may take the next command before the
            # previous one's ``done`` (one pulse per command)
            running = Signal(2, name=f"running{lane}")
            # a block's command waits for its last table entry to be written (it waits in a register)
            loading = Signal(name=f"loading{lane}")
            # each command's block (its pairs and tag) waits for its pairs in a FIFO
            m.submodules[f"blocks{lane}"] = blocks = fifo.SyncFIFO(width=cb + TAG_BITS, depth=TAG_FIFO)
            go = ~loading & blocks.w_rdy
            m.d.comb += [dec.cmd.valid.eq(front.cmd.valid & go), dec.cmd.p.count.eq(front.cmd.p.count),
                         dec.cmd.p.words.eq(front.cmd.p.words),
                         dec.cmd.p.check_end.eq(front.cmd.p.check_end if self.resumable else 1),
                         front.cmd.ready.eq(dec.cmd.ready & go),
                         blocks.w_en.eq(dec.cmd.valid & dec.cmd.ready),
                         blocks.w_data.eq(Cat(front.cmd.p.count, front.cmd.p.tag))]
            if self.resumable:
                m.d.comb += [dec.cmd.p.resume.eq(front.cmd.p.resume), dec.cmd.p.bit.eq(front.cmd.p.bit),
                             dec.cmd.p.state.eq(front.cmd.p.state)]
            m.d.sync += running.eq(running + (dec.cmd.valid & dec.cmd.ready) - dec.done)
            # the lane's first failure, kept until the next command (later blocks still decode: each is
            # a stream of its own)
            status = Signal(DecodeStatus, name=f"status{lane}")
            with m.If(cmd_fire):
                m.d.sync += status.eq(DecodeStatus.OK)
            with m.Elif(status == DecodeStatus.OK):
                with m.If(dec.done & (dec.status != DecodeStatus.OK)):
                    m.d.sync += status.eq(dec.status)
                with m.Elif(front.underrun):
                    m.d.sync += status.eq(DecodeStatus.OUT_OF_WORDS)
            lane_status.append(status)

            m.submodules[f"pairs{lane}"] = pairs = fifo.SyncFIFOBuffered(width=self._tagged.size, depth=4)
            m.submodules[f"tag{lane}"] = tagger = PairTag(self._pair, cb)
            wiring.connect(m, pairs_out, tagger.i)
            m.d.comb += [tagger.blocks.valid.eq(blocks.r_rdy), tagger.blocks.p.eq(blocks.r_data),
                         blocks.r_en.eq(tagger.blocks.ready),
                         pairs.w_data.eq(tagger.o.p), pairs.w_en.eq(tagger.o.valid), tagger.o.ready.eq(pairs.w_rdy)]
            fifos.append(pairs)

            # -- table writes, only while the lane holds no pair: its decoder idle, its pairs all out
            # no pair of the lane in its decoder or its FIFO, nor any command taken and not done
            emptied = (running == 0) & ~dec.o.valid & (pairs.level == 0)
            drained = Signal(name=f"drained{lane}")     # ... nor a command waiting: none before the merge
            m.d.comb += drained.eq(~front.cmd.valid & emptied)
            # ... nor in it, a clock late (a register). A command held back by the entry it waits for
            # brings no pair until that entry is written, so it does not keep the lane busy: without
            # this, a one-entry record behind a block would wait for an idle lane that never comes.
            idle = Signal(name=f"idle{lane}")
            m.d.sync += idle.eq((~front.cmd.valid | loading) & emptied
                                & ~(held_valid & held_mask[lane]) & ~formed_mask[lane])
            # ... and both table ports ready, another clock late: the write and the entry's ``ready``
            # then start at flip-flops. The lag is safe because while a lane loads tables it issues no
            # command, so once it can write it stays so until the record's command is issued, after
            # which the lag runs out before the next record's first entry (two header units) arrives.
            writable = Signal(name=f"writable{lane}")
            t = self.tables[lane]
            m.d.sync += writable.eq(idle & dec.cfg.ready & t.ready)
            # an entry waits in a register: the tables' write ports start at flip-flops
            entry = Signal(self._entry, name=f"entry{lane}")
            to_decoder = entry.kind == Table.DECODER
            written = loading & writable
            m.d.comb += [dec.cfg.valid.eq(written & to_decoder), dec.cfg.p.addr.eq(entry.addr),
                         dec.cfg.p.data.eq(entry.data), t.valid.eq(written & ~to_decoder), t.p.eq(entry),
                         front.entries.ready.eq(~loading | writable)]
            with m.If(front.entries.valid & front.entries.ready):
                m.d.sync += [entry.eq(front.entries.p), loading.eq(1)]
            with m.Elif(written):
                m.d.sync += loading.eq(0)
            table_wait.append(loading)
            finished.append(front.end & drained)
        readers += run_readers

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

        # -- merge: each transfer takes the next pair of every lane that has one (slot ``l`` is lane
        # ``l``'s) into ``formed``; the transfer before it is held on ``o`` so that ``last`` is known when
        # it leaves: it leaves once the next transfer is formed, or every lane has finished (then it is
        # the last), or a lane waits to load tables (which it may only do once its pairs have left).
        # ``o.valid`` is made of registers alone: the lanes' FIFOs (spread over the die, K of them) decide
        # only whether a transfer is formed, never whether one leaves, so that the consumer's ``ready``
        # and the K-wide OR of the FIFOs are side by side, not one behind the other, in front of the
        # FIFOs' reads (docs/design/subsystem.md, "Lanes that load their own tables").
        held = Signal(data.ArrayLayout(self._tagged, lanes))
        formed = Signal(data.ArrayLayout(self._tagged, lanes))
        avail = Cat(*[f.r_rdy for f in fifos])
        # both a clock late (registers: the lanes' state does not reach the transfer's handshake). A
        # lane that has finished stays so until the next command, and once every lane has, no pair is
        # left to come but the ones in ``formed`` and ``held``: the lag delays the last transfer by a
        # clock and changes no ``last``.
        all_finished = Signal()
        waiting = Signal()
        m.d.sync += [all_finished.eq(busy & Cat(*finished).all() & ~cmd_fire), waiting.eq(Cat(*table_wait).any())]
        o_fire = self.o.valid & self.o.ready
        m.d.comb += [self.o.valid.eq(held_valid & (formed_valid | all_finished | waiting)),
                     *[self.o.p.pairs[lane].eq(held[lane].pair) for lane in range(lanes)],
                     *[self.o.p.tags[lane].eq(held[lane].tag) for lane in range(lanes)],
                     self.o.p.valid.eq(held_mask),
                     self.o.p.last.eq(all_finished & ~formed_valid)]
        # Each slot of ``formed`` fills from its lane's FIFO on its own, whenever it is empty or the
        # transfer moves on: a FIFO's read then depends on its own ``r_rdy`` and on ``move`` (registers
        # and the consumer's ``ready``), never on the other lanes' FIFOs, whose OR only sets
        # ``formed_valid`` (a register, kept equal to ``formed_mask.any()``).
        move = Signal()
        load = Signal(lanes)
        m.d.comb += move.eq(formed_valid & (~held_valid | o_fire))
        with m.If(move):
            m.d.sync += [held.eq(formed), held_mask.eq(formed_mask), held_valid.eq(1)]
        with m.Elif(o_fire):
            m.d.sync += held_valid.eq(0)
        for lane, f in enumerate(fifos):
            m.d.comb += [load[lane].eq(busy & avail[lane] & (~formed_mask[lane] | move)), f.r_en.eq(load[lane])]
            # an empty slot keeps its lane's last pair and tag (never a FIFO entry not written)
            with m.If(load[lane]):
                m.d.sync += formed[lane].eq(f.r_data)
        kept = Signal(lanes)
        m.d.comb += kept.eq(load | Mux(move, 0, formed_mask))
        m.d.sync += [formed_mask.eq(kept), formed_valid.eq(kept.any())]

        m.d.comb += self.cmd.ready.eq(~busy)
        with m.If(cmd_fire):
            m.d.sync += [busy.eq(1), self.done.eq(0), self.status.eq(DecodeStatus.OK)]
        with m.Elif(busy & all_finished & ~held_valid & ~formed_valid):
            m.d.sync += [busy.eq(0), self.done.eq(1)]
            for st in reversed(lane_status):      # the lowest failing lane wins
                with m.If(st != DecodeStatus.OK):
                    m.d.sync += self.status.eq(st)
        return m
