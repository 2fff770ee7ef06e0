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

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .common import BlockCrc, DecodeStatus, TableSelect, check_bool, check_int, table_select_layout, word_layout

__all__ = ["DecoderShell", "EncoderShell"]


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
    coder, pairs are counted) → ``DRAIN`` (the command's unread words are discarded, the last pair
    leaves ``o``) → ``CHECK`` (the CRC of the last word has settled; ``done`` rises) → ``IDLE``.
    Latency from the last pair to ``done``: 2 clocks when no word is left to drain.
    """

    def __init__(self, command_layout: data.StructLayout, word_bits: int, *, block_crc: bool = True,
                 table_sets: int = 1, set_bits: int = 0, mutant: str | None = None):
        self._mutant = mutant     # hdl/mutants.py (validated by the core)
        self._block_crc = check_bool("block_crc", block_crc)
        self._sets = check_int("table_sets", table_sets, 1, 16)
        self._w = word_bits
        ports = {
            "cmd": In(stream.Signature(command_layout)),
            "i": In(stream.Signature(word_layout(word_bits))),
            "words": Out(stream.Signature(word_bits)),
            "start": Out(1), "run": Out(1), "ended": Out(1), "idle": Out(1),
            "fire": In(1), "decoding": In(1), "starved": In(1), "no_marker": In(1),
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
        check_end = Signal()
        take = Signal()
        select = None
        if self._sets > 1:
            select = TableSelect(m, self.sel, self.fire)
            m.d.comb += self.table_set.eq(select.set)
        sel_ready = 1 if select is None else select.ready

        m.d.comb += [self.words.p.eq(self.i.p.data), take.eq(self.i.valid & self.i.ready),
                     self.ended.eq(words_left == 0)]
        with m.If(take):
            m.d.sync += words_left.eq(words_left - 1)
        with m.If(self.fire):
            m.d.sync += remaining.eq(remaining - 1)
        block_crc = BlockCrc(m, self._w, self.cmd, self.i, present=self._block_crc)

        def finish(status):
            m.d.sync += self.status.eq(status)
            # Nothing left to drain: straight to CHECK (where the CRC of the last word has settled).
            with m.If((words_left == 0) | ((words_left == 1) & take)):
                m.next = "CHECK"
            with m.Else():
                m.next = "DRAIN"

        with m.FSM():
            with m.State("IDLE"):
                # The command's first word goes to the coder in the cycle the command is accepted.
                m.d.comb += [self.cmd.ready.eq(1), self.idle.eq(1), self.start.eq(self.cmd.valid),
                             self.words.valid.eq(self.i.valid & self.cmd.valid & (c.words != 0)),
                             self.i.ready.eq(self.words.ready & self.cmd.valid & (c.words != 0))]
                with m.If(self.cmd.valid):
                    m.d.sync += [remaining.eq(c.count), words_left.eq(c.words - take), check_end.eq(c.check_end),
                                 self.done.eq(0), self.status.eq(DecodeStatus.OK)]
                    m.next = "RUN"

            with m.State("RUN"):
                more = (words_left > 1) if self._mutant == "tans_dec_last_word" else (words_left != 0)
                m.d.comb += [self.words.valid.eq(self.i.valid & more), self.i.ready.eq(self.words.ready & more),
                             self.run.eq((remaining != 0) & sel_ready)]
                out_of_words = self.starved & (words_left == 0)
                with m.If(~self.decoding):
                    with m.If(self.no_marker):
                        finish(DecodeStatus.NO_MARKER)
                    with m.Elif(out_of_words):
                        finish(DecodeStatus.OUT_OF_WORDS)
                with m.Elif(remaining == 0):
                    with m.If(~check_end):
                        finish(DecodeStatus.OK)
                    with m.Elif(~self.final_state_zero):
                        finish(DecodeStatus.FINAL_STATE)
                    with m.Elif(~self.window_empty | (words_left != 0)):
                        finish(DecodeStatus.TRAILING_DATA)
                    with m.Else():
                        finish(DecodeStatus.OK)
                with m.Elif(out_of_words & sel_ready):
                    finish(DecodeStatus.OUT_OF_WORDS)

            with m.State("DRAIN"):
                # The rest of the command's words are discarded so that the next command starts clean.
                m.d.comb += self.i.ready.eq(words_left != 0)
                with m.If((words_left == 0) | ((words_left == 1) & take)):
                    m.next = "CHECK"

            with m.State("CHECK"):
                # The CRC of the last word has settled; the last pair must have left ``o``.
                with m.If(~self.out_valid):
                    block_crc.check(self.status, self.done)
                    m.next = "IDLE"
        return m


class EncoderShell(wiring.Component):
    """Commands and the pair counter around an encoder's coder.

    ``IDLE`` (``cmd`` and table writes accepted; ``idle`` high) → ``RUN``: ``take`` lets the command's
    ``count`` pairs through (``pair`` counts them), then ``flush`` is high until the coder reports
    ``flushed`` (its final word leaves ``o``) → ``IDLE`` with ``done`` high.
    """

    def __init__(self, command_layout: data.StructLayout, *, mutant: str | None = None):
        self._mutant = mutant     # hdl/mutants.py (validated by the core)
        super().__init__({"cmd": In(stream.Signature(command_layout)), "take": Out(1), "pair": In(1),
                          "flush": Out(1), "flushed": In(1), "idle": Out(1), "done": Out(1)})

    def elaborate(self, platform):
        m = Module()
        remaining = Signal.like(self.cmd.p.count)
        with m.If(self.pair):
            m.d.sync += remaining.eq(remaining - 1)
        with m.FSM():
            with m.State("IDLE"):
                # The command's first pair enters in the cycle the command is accepted.
                m.d.comb += [self.cmd.ready.eq(1), self.idle.eq(1),
                             self.take.eq(self.cmd.valid & (self.cmd.p.count != 0))]
                with m.If(self.cmd.valid):
                    m.d.sync += [remaining.eq(self.cmd.p.count - self.pair), self.done.eq(0)]
                    m.next = "RUN"
            with m.State("RUN"):
                # The flush is asked for in the cycle the count runs out: no state change in between.
                more = (remaining > 1) if self._mutant == "tans_enc_last_pair" else (remaining != 0)
                m.d.comb += [self.take.eq(more), self.flush.eq(remaining == 0)]
                with m.If(self.flushed):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
        return m
