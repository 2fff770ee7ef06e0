"""The command shells of the one-state rANS coders: :class:`RansDecoderShell` (stream start,
end-of-stream checks, status, CRC-32) and :class:`RansEncoderShell` (counts, flush, ``last``, ``done``).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..common import BlockCrc, DecodeStatus, connect_block_crc, crc_checked, decoder_ports, encoder_ports
from .link import decoder_link, encoder_link
from .shape import RansShape


@dataclass(frozen=True)
class RansDecoderShellProbe:
    """The FSM states, counters and report, over which the formal counter lemma (``decoder_counts``) states its
    invariants: what the formal lemmas read of :class:`RansDecoderShell` (its ``probe`` once elaborated; not
    ports)."""

    idle: Value
    init: Value
    decode: Value
    drain: Value
    check: Value
    remaining: Value
    words_left: Value
    reporting: Value
    report: Value
    top: Value
    zero_top: Value


class RansDecoderShell(wiring.Component):
    """The rANS decoder's shell: commands, the stream's start and end, status, drain and CRC-32.

    It loads the coder's state (``resume``: the checkpoint's; else from the top words: ``x = x << W |
    word`` until ``x >= 2**(S - W)`` or the stream has no word left), forwards the command's other words
    from ``i`` to the coder's ``word`` stream (the CRC sees every word), runs it for ``count`` pairs and, once the last
    pair has left the coder, checks the end (``check_end``: ``x = 0`` and every word read), drains the
    stream's unread words and reports ``status``. A zero top word is ``ZERO_TOP_WORD``.

    Back to back: a command that ends with every word taken is checked in the clock its last pair
    has been counted, and the next command is accepted (and its state loaded) in that same clock.
    The status waits in one register until the last pair has left ``o``; then ``done`` is high for
    one clock (one per command, in command order) and ``status`` holds that command's outcome (it
    returns to ``OK`` when a command is accepted in a clock without a report). While a report
    waits, the next command pops its initial state but decodes no pair and cannot end.
    Overhead per command: the init pops (one clock each; none for a ``resume`` command).

    Reset: the counters, the report and the FSM reset (the running command and a waiting report
    are dropped: no ``done`` comes for them); the tables are memories and survive (see the module
    docstring).
    """

    def __init__(self, shape: RansShape, block_crc: bool):
        sh = self._shape = shape
        self._block_crc = block_crc
        #: The shell's registers and states, filled in by :meth:`elaborate`: the formal lemma
        #: ``decoder_counts`` (``sim/formal/``) states its invariants over them. Not ports.
        self.probe: RansDecoderShellProbe | None = None      # set by elaborate
        ports = decoder_ports(sh.S, 1, sh.W, sh.symbol_bits, sh.K, count_bits=sh.count_bits)
        del ports["o"]
        ports.update({"word": Out(stream.Signature(sh.W)), "pair_valid": In(1), **decoder_link(sh).members,
                      "idle": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        sh = self._shape
        S, W = sh.S, sh.W
        m = Module()
        remaining = Signal.like(self.cmd.p.count)
        words_left = Signal.like(self.cmd.p.words)   # words of the stream not yet taken
        check_end = Signal()
        top = Signal()                               # the next word is the stream's top word
        zero_top = Signal()                          # the top word, popped with the command, is zero
        ended = Signal()
        forward = Signal()
        take = Signal()
        reporting = Signal()       # a finished command's status waits for its last pair to leave ``o``
        report = Signal(DecodeStatus)
        held = Signal()            # the report cannot go out this clock (its last pair is still on ``o``)
        m.d.comb += held.eq(reporting & self.pair_valid)
        m.d.comb += [ended.eq(words_left == 0), self.ended.eq(ended),
                     self.word.valid.eq(self.i.valid & forward & ~ended), self.word.p.eq(self.i.p.data),
                     take.eq(self.i.valid & self.i.ready)]
        with m.If(take):
            m.d.sync += [words_left.eq(words_left - 1), top.eq(0)]
        with m.If(self.step):
            m.d.sync += remaining.eq(remaining - 1)
        block_crc = None
        if self._block_crc:
            m.submodules.block_crc = block_crc = BlockCrc(W)
            connect_block_crc(m, block_crc, self.cmd, self.i)

        # The report: one ``done`` clock per command once its last pair has left ``o``.
        m.d.sync += self.done.eq(0)
        with m.If(reporting & ~self.pair_valid):
            m.d.sync += [self.done.eq(1), self.status.eq(report), reporting.eq(0)]
        with m.Elif(self.cmd.valid & self.cmd.ready):
            m.d.sync += self.status.eq(DecodeStatus.OK)

        # Taking a command, as single signals (logic nested in the FSM's end conditions would repeat
        # them in every counter bit's load): ``accept`` in IDLE, or in the clock a command ends after
        # its last pair with every word taken.
        accept, taking = Signal(), Signal()
        m.d.comb += [self.cmd.ready.eq(accept), taking.eq(accept & self.cmd.valid)]

        def take_command():
            with m.If(taking):
                m.next = "INIT"
                with m.If(self.cmd.p.resume):
                    m.next = "DECODE"

        def finish(status):
            with m.If(ended):
                # Nothing to drain, and the CRC has settled: report (the next command is taken now).
                m.d.sync += [reporting.eq(1), report.eq(crc_checked(block_crc, status))]
                m.next = "IDLE"
            with m.Else():
                m.d.sync += report.eq(status)
                m.next = "DRAIN"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += [accept.eq(1), self.idle.eq(~self.cmd.valid)]
                take_command()

            with m.State("INIT"):
                # Pop the top word (never zero), then words until x >= 2**(S - W) or none is left.
                started = self.state[S - W:] != 0
                # (Not while a report waits: a zero top word would end this command before it.)
                m.d.comb += [self.i.ready.eq(~ended & ~started & ~held & ~zero_top), self.load.eq(take),
                             self.load_state.eq(Cat(self.i.p.data, self.state[:S - W]))]
                # Decide on the state being loaded, not a clock later.
                with m.If(started | ended | (take & ((self.load_state[S - W:] != 0) | (words_left == 1)))):
                    m.next = "DECODE"
                with m.If(take & top & (self.i.p.data == 0)):
                    # A word was taken: not ended before it; the drain sees to the rest.
                    m.d.sync += report.eq(DecodeStatus.ZERO_TOP_WORD)
                    m.next = "DRAIN"
                with m.If(zero_top & ~held):
                    finish(DecodeStatus.ZERO_TOP_WORD)

            with m.State("DECODE"):
                # While the previous command's report waits, no pair of this one is decoded (so that
                # ``pair_valid`` speaks of the previous command only) and this one cannot end.
                m.d.comb += [forward.eq(1), self.run.eq((remaining != 0) & ~held),
                             accept.eq((remaining == 0) & ~held & ended),
                             self.i.ready.eq(self.word.ready & ~ended)]
                with m.If((remaining == 0) & ~held):
                    with m.If(~check_end):
                        finish(DecodeStatus.OK)
                    with m.Elif(self.state != 0):
                        finish(DecodeStatus.FINAL_STATE)
                    with m.Elif(self.buffered | ~ended):
                        finish(DecodeStatus.TRAILING_DATA)
                    with m.Else():
                        finish(DecodeStatus.OK)
                take_command()

            with m.State("DRAIN"):
                m.d.comb += self.i.ready.eq(~ended)
                with m.If(ended | ((words_left == 1) & take)):
                    m.next = "CHECK"

            with m.State("CHECK"):
                # The CRC of the last word has settled.
                m.d.sync += [reporting.eq(1), report.eq(crc_checked(block_crc, report))]
                m.next = "IDLE"

        # A stream's top word is popped with its command (when it is offered): the state starts as
        # that word. No pair is decoded in this clock.
        with m.If(taking):
            cm = self.cmd.p
            m.d.comb += [self.load.eq(1), self.i.ready.eq(~cm.resume & (cm.words != 0)),
                         self.load_state.eq(Mux(cm.resume, cm.state, Mux(take, self.i.p.data, 0)))]
            m.d.sync += [remaining.eq(cm.count), words_left.eq(cm.words - take),
                         check_end.eq(cm.check_end), top.eq(~cm.resume & ~take),
                         zero_top.eq(take & (self.i.p.data == 0))]
        self.probe = RansDecoderShellProbe(
            **{name.lower(): fsm.ongoing(name) for name in ("IDLE", "INIT", "DECODE", "DRAIN", "CHECK")},
            remaining=remaining, words_left=words_left, reporting=reporting, report=report, top=top, zero_top=zero_top)
        return m


@dataclass(frozen=True)
class RansEncoderShellProbe:
    """The pair count and the FSM states, over which the formal counter lemma (``encoder_counts``) states its
    invariant: what the formal lemmas read of :class:`RansEncoderShell` (its ``probe`` once elaborated; not
    ports)."""

    remaining: Value
    encoding: Value
    flushing: Value


class RansEncoderShell(wiring.Component):
    """The rANS encoder's shell: a command's pair count, the final flush, ``last`` and ``done``.

    A command takes ``count`` pairs, then flushes the state's non-zero words (least significant
    first); the last word of the stream carries ``last``, and ``done`` is high for one clock after it
    has left (one ``done`` per command, in command order). Back to back: the next command is
    accepted in the clock the flush ends (the stream's last word leaves ``o``, or ``o`` is empty),
    and its first pair enters in that clock: the flush has left ``x = 0``, where a stream starts.

    Reset: the counter and the FSM reset (a running command is dropped, no ``done`` comes for it);
    the coder's tables are memories (LUT-RAM) and survive.
    """

    def __init__(self, shape: RansShape, depth: int):
        sh = self._shape = shape
        #: The shell's registers, filled in by :meth:`elaborate`: the formal lemma ``encoder_counts``
        #: (``sim/formal/``) states its invariants over them. Not ports.
        self.probe: RansEncoderShellProbe | None = None      # set by elaborate
        ports = encoder_ports(sh.W, sh.symbol_bits, sh.K, sh.set_bits, count_bits=sh.count_bits)
        del ports["i"], ports["o"]
        ports.update({**encoder_link(sh, depth).members, "last": Out(1), "emit": In(1), "idle": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        remaining = Signal.like(self.cmd.p.count)
        with m.If(self.step):
            m.d.sync += remaining.eq(remaining - 1)
        m.d.sync += self.done.eq(0)

        def take_command(flushed=False):
            m.d.comb += self.cmd.ready.eq(1)
            with m.If(self.cmd.valid):
                m.d.sync += remaining.eq(self.cmd.p.count - self.step)    # its first pair may enter now
                if flushed:
                    # The flush has left ``x = 0``, where a stream starts: no ``start``, and the
                    # command's first pair enters in this clock (the flush no longer picks the word).
                    m.d.comb += [self.run.eq(self.cmd.p.count != 0), self.flush.eq(0)]
                else:
                    m.d.comb += self.start.eq(1)
                m.next = "ENCODE"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += self.idle.eq(~self.cmd.valid)
                take_command()
            with m.State("ENCODE"):
                m.d.comb += self.run.eq(remaining != 0)
                with m.If((remaining == 0) | ((remaining == 1) & self.step)):
                    m.next = "FLUSH"
            with m.State("FLUSH"):
                # The state's non-zero words, least significant first.
                m.d.comb += [self.flush.eq(1), self.last.eq((self.state == 0) & (self.held == 1))]
                with m.If((self.state == 0) & ((self.held == 0) | ((self.held == 1) & self.emit))):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
                    take_command(flushed=True)     # back to back: the next command in this clock
        self.probe = RansEncoderShellProbe(remaining=remaining, encoding=fsm.ongoing("ENCODE"),
                                           flushing=fsm.ongoing("FLUSH"))
        return m
