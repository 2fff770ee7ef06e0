"""The command shells of the interleaved rANS coders: :class:`RansDecoderShellXN` (stream heads
read ahead, tags, drain, end checks, status, CRC-32) and :class:`RansEncoderShellXN` (a command's
entries, ghosts, ``last`` and ``done``).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..common import BlockCrc, DecodeStatus, connect_block_crc, decoder_ports, encoder_ports
from .link import decoder_xn_link, encoder_xn_link
from .shape import RansShape
from .decoder_xn import RansDecoderCoderXN, TAG_BITS, XN_RING


@dataclass(frozen=True)
class RansDecoderShellXNProbe:
    """What the formal counts lemma (``decoder_counts`` of the interleaved decoder) reads of
    :class:`RansDecoderShellXN` (its ``probe`` once elaborated; not ports): the running stream's record
    (``cur_valid``, ``cur_tag``, ``cur_rem``, ``rem_zero``, ``rem_one``, ``cur_inj``, ``cur_s``), the next
    one's (``nxt_valid``, ``nxt_skip``, ``nxt_count``, ``nxt_tag``), the next tag (``next_tag``) and the
    words part's command (``in_idle``: none; ``in_head``: its head is being read; ``in_drain``: its words are drained;
    ``w_tag``, ``w_count``, ``w_hc``, ``w_left``, ``w_odd``, ``w_zero``, ``w_one``, ``w_skip``), and the state
    FIFO's ``states_level`` and ``drop`` (a cut stream's state leaves it), the body FIFO's write
    (``body_write``) and the written entry's tag (``body_tag``)."""

    cur_valid: Signal
    cur_tag: Signal
    cur_rem: Signal
    rem_zero: Signal
    rem_one: Signal
    cur_inj: Signal
    cur_s: Signal
    nxt_valid: Signal
    nxt_skip: Signal
    nxt_count: Signal
    nxt_tag: Signal
    next_tag: Signal
    in_idle: Value
    in_head: Value
    in_drain: Value
    w_tag: Signal
    w_count: Signal
    w_hc: Signal
    w_left: Signal
    w_odd: Signal
    w_zero: Signal
    w_one: Signal
    w_skip: Signal
    states_level: Signal
    drop: Signal
    body_write: Signal
    body_tag: Value


class RansDecoderShellXN(wiring.Component):
    """The shell of :class:`RansDecoderCoderXN`: commands, the streams' heads and ends, status and
    CRC-32, so that back-to-back commands decode with no idle clock between them.

    Three parts run side by side, each on its own command:

    * *Words* (``i``): a command's words go through the CRC unit; the stream's head (its top ``N``
      states, ``2 N`` words, most significant first) into the *state FIFO* (``2 N`` states of ``S``
      bits, LUT-RAM), its body into the *body FIFO* of port words (:meth:`fifo_depth`), each with
      the stream's tag (:data:`TAG_BITS`), towards the coder, and an end marker after the body (when
      it leaves the FIFO, the stream's words have all reached the coder: ``ended``). The words part
      takes the next command as soon as the previous one's words are taken and its head is injected
      or in the FIFO. An odd stream's head ends in the high half of a port word whose low half is the
      body's first word: that port word goes to both (``skip``).
    * *Pairs*: the running stream's states enter the ring one a turn (``inject``: the state FIFO's
      front takes the place of the state leaving the ring), each one turn ahead of its first pair,
      so that pair ``j`` meets state ``j mod N``; a stream of ``c < N`` pairs injects its last
      ``N - c`` states on bubble turns. In the turn of a stream's last pair the next stream's first
      state goes in: no idle clock between commands, where the next head is in the FIFO by then.
    * *End* (two slots, in command order): the ``N`` turns after a stream's last pair (after its last
      injection where ``c < N``) each evict one of its final states (the coder's
      ``evicted_initial``): the end check. After the fifth its last pair has popped: words of it still
      buffered, in the FIFO or on ``i`` are ``TRAILING_DATA`` (the words part drains them, the coder
      drops them: ``purge``). Status, in order: ``ZERO_TOP_WORD`` (a head state below
      ``2**(S - W)``), ``OUT_OF_WORDS`` (a pop found none of its stream's words, or the stream ends
      inside its head), ``FINAL_STATE``, ``TRAILING_DATA`` (both with ``check_end``), ``CRC``.
      ``done`` is high one clock per command, in command order, once its last pair has left ``o``.

    Idle clocks between back-to-back commands (inputs offered, outputs taken): none where the
    previous command has at least ``N`` pairs and the next one's words arrive in time (one port word
    a clock: a stream of ``c`` pairs whose port words, ``N`` of head and about ``c / 2.5`` of body for
    weights, are more than ``c`` costs the difference and 2); a command of ``c < N`` pairs costs
    ``N - c + 2`` (its ghost injections).

    A ``resume = 1`` command (a checkpoint's ``N`` states do not fit the command's ``S``-bit
    ``state``) is not decoded: its words are drained and it reports ``FINAL_STATE``.

    Reset: every register here resets (running commands and waiting reports are dropped: no ``done``
    comes for them); the tables are memories and survive.
    """

    def __init__(self, shape: RansShape, block_crc: bool):
        #: The records and counters, filled in by :meth:`elaborate` (the formal counts lemma's). Not ports.
        self.probe: RansDecoderShellXNProbe | None = None      # set by elaborate
        sh = self._shape = shape
        self._block_crc = block_crc
        self._pw = pw = RansDecoderCoderXN.port_words(sh)
        ports = decoder_ports(sh.S, 1, sh.W * pw, sh.symbol_bits, sh.K, count_bits=sh.count_bits)
        del ports["o"]
        T = TAG_BITS
        ports.update({"word": Out(stream.Signature(RansDecoderCoderXN.word_layout(sh))),
                      **decoder_xn_link(sh, T, pw).members, "pair_taken": In(1), "idle": Out(1)})
        super().__init__(ports)

    @staticmethod
    def fifo_depth(states: int) -> int:
        """Port words the body FIFO holds: at least ``N + 4`` (the words the last ``N + 5`` pairs of a
        stream may pop, less the coder's two), so that the next head is read in time."""
        return 16 if states <= 8 else 32

    def elaborate(self, platform):
        sh = self._shape
        S, W, N, pw = sh.S, sh.W, sh.codec.states, self._pw
        L = S - W
        T = TAG_BITS
        m = Module()
        cm = self.cmd.p

        # -- per tag: the words part is done with the stream (its marker is in the FIFO), its CRC --------
        words_done = Signal(1 << T)
        crc_bad = Signal(1 << T)
        done_tag = Signal(T, init=(1 << T) - 1)     # the newest stream whose words all reached the coder

        # -- the body FIFO ---------------------------------------------------------------------------
        entry = data.StructLayout({"data": W * pw, "tag": T, "skip": 1, "marker": 1})
        m.submodules.body = body = SyncFIFO(width=entry.size, depth=self.fifo_depth(N))
        w_entry = Signal(entry)
        r_entry = Signal(entry)
        m.d.comb += [body.w_data.eq(w_entry), r_entry.eq(body.r_data),
                     self.word.valid.eq(body.r_rdy & ~r_entry.marker), self.word.p.data.eq(r_entry.data),
                     self.word.p.tag.eq(r_entry.tag),
                     body.r_en.eq(Mux(r_entry.marker, 1, self.word.ready))]
        m.d.comb += self.word.p.skip.eq(r_entry.skip)
        with m.If(body.r_rdy & r_entry.marker):
            m.d.sync += done_tag.eq(r_entry.tag)

        def settled(tag):
            """Every word of the stream ``tag`` (running or older) has reached the coder."""
            return ((done_tag - tag)[:T] != (1 << T) - 1)

        # -- records: the next stream (its head in the state FIFO), the running one ---------------------------
        cnt = len(cm.count)
        nxt_valid, nxt_skip, nxt_status = Signal(name="nxt_valid"), Signal(name="nxt_skip"), Signal(DecodeStatus)
        nxt_count, nxt_check_end = Signal(cnt, name="nxt_count"), Signal(name="nxt_check_end")
        nxt_tag, nxt_bad = Signal(T, name="nxt_tag"), Signal(name="nxt_bad")
        cur_valid, cur_tag, cur_rem = Signal(name="cur_valid"), Signal(T, name="cur_tag"), Signal(cnt, name="cur_rem")
        cur_check_end, cur_bad = Signal(name="cur_check_end"), Signal(name="cur_bad")
        rem_zero, rem_one = Signal(), Signal()       # cur_rem == 0, == 1 (registers: run and drain wait on them)
        cur_inj, cur_s = Signal(range(N + 1), name="cur_inj"), Signal(range(N + 1), name="cur_s")   # states injected, pairs stepped (to N)
        cur_starved, cur_out = Signal(), Signal()    # a pop starved; its last pair has left ``o``

        # -- the state FIFO: the running stream's states not yet injected and the next stream's head ------
        # (A FIFO of 2 N states in LUT-RAM: the next head is read while the running stream still injects.)
        m.submodules.states = states = SyncFIFO(width=S, depth=2 * N)
        push = Signal()
        pushed = Signal(S)
        drop = Signal()                              # a stream cut inside its head: its states go
        m.d.comb += [states.w_data.eq(pushed), states.w_en.eq(push), self.state.eq(states.r_data),
                     states.r_en.eq((self.turned & self.inject) | drop)]

        # -- the words part ----------------------------------------------------------------------------
        w_left = Signal(cnt)                         # port words of the command not yet taken
        # ``w_left == 0`` and ``== 1`` as registers: the take, the FIFO writes and the FSM wait on them,
        # not on a wide compare (the shelled core's longest ECP5 path otherwise).
        w_zero, w_one = Signal(init=1, name="w_zero"), Signal(name="w_one")
        w_tag, next_tag = Signal(T, name="w_tag"), Signal(T, name="next_tag")
        w_odd = Signal()
        heads = N + 1                                # port words of the head: N, N + 1 when odd
        w_hc = Signal(range(heads + 1))
        w_carry = Signal(W)                          # the previous port word's low half / the state's top word
        w_count, w_check_end = Signal(cnt, name="w_count"), Signal(name="w_check_end")
        w_bad, w_skip = Signal(name="w_bad"), Signal(name="w_skip")
        w_abort = Signal()                           # the ending stream has trailing words on ``i``
        take = Signal()
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        with m.If(take):
            m.d.sync += [w_left.eq(w_left - 1), w_zero.eq(w_one), w_one.eq(w_left == 2)]
        # The CRC of the stream's words in decoding order: a port word's high word first; an odd
        # count's first port word carries a zero high word above the stream, which the CRC's start
        # value absorbs.
        crc_mismatch = Const(0)
        if self._block_crc:
            m.submodules.block_crc = block_crc = BlockCrc(2 * W, zeros_first=W)
            connect_block_crc(m, block_crc, self.cmd, self.i, data=Cat(self.i.p.data[W:], self.i.p.data[:W]))
            m.d.comb += block_crc.zeros_first.eq(cm.words[0])
            crc_mismatch = block_crc.mismatch

        d = self.i.p.data
        top_bits = S - W                             # bits of a state's first (most significant) word
        with m.FSM(name="words") as words:
            def accept():
                """Take the next command (its record slot ``nxt`` is free)."""
                m.d.comb += self.cmd.ready.eq(~nxt_valid)
                with m.If(self.cmd.valid & ~nxt_valid):
                    port_words = (cm.words + 1)[1:]
                    m.d.sync += [w_left.eq(port_words), w_zero.eq(port_words == 0), w_one.eq(port_words == 1),
                                 w_odd.eq(cm.words[0]), w_tag.eq(next_tag),
                                 w_count.eq(cm.count), w_check_end.eq(cm.check_end), w_hc.eq(0), w_bad.eq(0),
                                 w_skip.eq(cm.resume), words_done.bit_select(next_tag, 1).eq(0),
                                 crc_bad.bit_select(next_tag, 1).eq(0)]
                    with m.If(cm.resume):
                        m.next = "DRAIN"
                    with m.Else():
                        m.next = "HEAD"

            with m.State("IDLE"):
                accept()

            with m.State("HEAD"):
                last_head = Signal()
                m.d.comb += last_head.eq(w_hc == Mux(w_odd, heads - 1, N - 1))
                # (An odd stream's last head port word also goes to the FIFO: its low half is the body's first word.)
                m.d.comb += self.i.ready.eq(states.w_rdy & ~w_zero & (~(w_odd & last_head) | body.w_rdy))
                # A head word that puts a state outside [2**L, 2**S): the state below 2**L, or bits above
                # ``S`` in a state's first (most significant) word.
                bad_now = Signal()
                with m.If(take):
                    m.d.sync += w_hc.eq(w_hc + 1)
                    m.d.comb += [pushed.eq(Mux(w_odd, Cat(d[W:], w_carry), d)), push.eq(~(w_odd & (w_hc == 0)))]
                    m.d.sync += w_carry.eq(d[:W])
                    first = Mux(w_odd, w_carry, d[W:])
                    above = push & (first[top_bits:] != 0) if top_bits < W else 0
                    with m.If(w_odd & last_head):
                        m.d.comb += [w_entry.data.eq(d), w_entry.tag.eq(w_tag), w_entry.skip.eq(1), body.w_en.eq(1)]
                    m.d.comb += bad_now.eq((push & (pushed[L:] == 0)) | above)
                    with m.If(bad_now):
                        m.d.sync += w_bad.eq(1)
                    with m.If(last_head):
                        # The head is in the state FIFO: the pairs part may start the stream.
                        m.d.sync += [nxt_valid.eq(1), nxt_skip.eq(0), nxt_count.eq(w_count), nxt_tag.eq(w_tag),
                                     nxt_check_end.eq(w_check_end), nxt_bad.eq(w_bad | bad_now),
                                     next_tag.eq(next_tag + 1)]
                        m.next = "BODY"
                        with m.If(w_one):
                            m.next = "MARK"
                with m.Elif(w_zero):
                    # The stream ends inside its head: nothing to decode; the states it pushed are
                    # dropped from the state FIFO before it reports (``drop``).
                    m.d.sync += [nxt_valid.eq(1), nxt_skip.eq(1), nxt_status.eq(DecodeStatus.OUT_OF_WORDS)]
                    m.next = "IDLE"

            with m.State("BODY"):
                # (A word taken while the ending stream turns out to have trailing words is its own:
                # the coder drops it with the rest, so ``w_abort`` need not hold ``i.ready`` back.)
                m.d.comb += [self.i.ready.eq(body.w_rdy & ~w_zero),
                             w_entry.data.eq(d), w_entry.tag.eq(w_tag), body.w_en.eq(take)]
                with m.If(w_abort):
                    m.next = "DRAIN"
                with m.Elif(w_zero | (take & w_one)):
                    m.next = "MARK"

            with m.State("MARK"):
                # The end marker (the CRC has settled: a clock after the last word); the next command
                # may be taken in the same clock (the CRC unit restarts after this clock's compare).
                m.d.comb += [w_entry.tag.eq(w_tag), w_entry.marker.eq(1), body.w_en.eq(1)]
                with m.If(body.w_rdy):
                    m.d.sync += [words_done.bit_select(w_tag, 1).eq(1), crc_bad.bit_select(w_tag, 1).eq(crc_mismatch)]
                    m.next = "IDLE"
                    accept()

            with m.State("DRAIN"):
                m.d.comb += self.i.ready.eq(~w_zero)
                with m.If(w_zero | (take & w_one)):
                    with m.If(w_skip):
                        m.d.sync += [nxt_valid.eq(1), nxt_skip.eq(1), nxt_status.eq(DecodeStatus.FINAL_STATE)]
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "MARK"

        # -- the pairs part ----------------------------------------------------------------------------
        nxt_dec = Signal()
        m.d.comb += nxt_dec.eq(nxt_valid & ~nxt_skip)
        step_pending = Signal()                      # the running stream's next pair has its state at stage 1
        m.d.comb += step_pending.eq(cur_valid & ~rem_zero & ((cur_inj == N) | (cur_inj != cur_s)))
        # Where the running stream would complete: after its last step with every state injected, or
        # (fewer than N pairs) after its last injection.
        done_if_step, done_if_bubble = Signal(name="done_if_step"), Signal(name="done_if_bubble")
        m.d.comb += [done_if_step.eq(rem_one & (cur_inj >= N - 1)),
                     done_if_bubble.eq(cur_valid & rem_zero & (cur_inj == N - 1))]
        inject_cur, inject_nxt = Signal(name="inject_cur"), Signal(name="inject_nxt")
        m.d.comb += [inject_cur.eq(cur_valid & (cur_inj != N)),
                     inject_nxt.eq(~inject_cur & nxt_dec & (~cur_valid | (step_pending & done_if_step)))]

        # -- the ending streams: two slots, ``old`` the older. A stream's N window turns (its final
        # states leave the ring) begin after its completion, never before the older one's have ended,
        # and its report waits for its last pair on ``o``, its words and the older one's report.
        old = Signal()
        ends = [{"v": Signal(name=f"end{k}_valid"), "tag": Signal(T, name=f"end{k}_tag"),
                 "w": Signal(range(N + 1), name=f"end{k}_turns"), "sample": Signal(name=f"end{k}_sample"),
                 "ok": Signal(name=f"end{k}_ok"), "check_end": Signal(name=f"end{k}_check_end"),
                 "bad": Signal(name=f"end{k}_bad"), "starved": Signal(name=f"end{k}_starved"),
                 "out": Signal(name=f"end{k}_out"), "checked": Signal(name=f"end{k}_checked"),
                 "trailing": Signal(name=f"end{k}_trailing")} for k in range(2)]

        def oldest(field):
            return Mux(old, ends[1][field], ends[0][field])

        in_window = [Signal(name=f"end{k}_in_window") for k in range(2)]
        for k, e in enumerate(ends):
            o_ = ends[1 - k]
            m.d.comb += in_window[k].eq(e["v"] & (e["w"] != N) & ((old == k) | ~(o_["v"] & (o_["w"] != N))))
        window = Signal()
        m.d.comb += window.eq(in_window[0] | in_window[1])

        report = Signal()
        m.d.comb += report.eq(oldest("v") & (oldest("w") == N) & ~oldest("sample") & oldest("checked") & oldest("out")
                              & words_done.bit_select(oldest("tag"), 1))
        both = Signal()
        m.d.comb += both.eq(ends[0]["v"] & ends[1]["v"])
        block = Signal()                             # it would complete with both slots still taken
        m.d.comb += block.eq(both & ~report & Mux(step_pending, done_if_step, done_if_bubble))
        m.d.comb += [self.run.eq(step_pending & ~block),
                     self.drain.eq(~step_pending & ~block & (inject_cur | inject_nxt | window)),
                     self.inject.eq(inject_cur | inject_nxt), self.tag.eq(cur_tag), self.last.eq(rem_one),
                     self.ended.eq(settled(self.pair_tag))]

        # The ``o`` and ``starved`` events of a stream while it runs or ends.
        out_ev = Signal()
        m.d.comb += out_ev.eq(self.pair_taken & self.o_last)
        out_to = [Signal(name=f"end{k}_out_event") for k in range(2)]
        for k, e in enumerate(ends):
            o_ = ends[1 - k]
            m.d.comb += out_to[k].eq(out_ev & e["v"] & ~e["out"] & ((old == k) | ~(o_["v"] & ~o_["out"])))
            with m.If(out_to[k]):
                m.d.sync += e["out"].eq(1)
            with m.If(self.starved & e["v"] & (self.starved_tag == e["tag"])):
                m.d.sync += e["starved"].eq(1)
            m.d.sync += e["sample"].eq(0)
            with m.If(e["sample"]):
                m.d.sync += e["ok"].eq(e["ok"] & self.evicted_initial)
            with m.If(self.turned & in_window[k]):
                m.d.sync += [e["w"].eq(e["w"] + 1), e["sample"].eq(1)]
        out_cur = Signal()
        m.d.comb += out_cur.eq(out_ev & ~out_to[0] & ~out_to[1])
        with m.If(out_cur):
            m.d.sync += cur_out.eq(1)
        starved_cur = Signal()
        m.d.comb += starved_cur.eq(self.starved & cur_valid & (self.starved_tag == cur_tag))
        with m.If(starved_cur):
            m.d.sync += cur_starved.eq(1)

        with m.If(self.turned):
            with m.If(self.step):
                m.d.sync += [cur_rem.eq(cur_rem - 1), rem_zero.eq(rem_one), rem_one.eq(cur_rem == 2)]
                with m.If(cur_s != N):
                    m.d.sync += cur_s.eq(cur_s + 1)
            with m.If(inject_cur):
                m.d.sync += cur_inj.eq(cur_inj + 1)
            complete = Signal()
            m.d.comb += complete.eq(cur_valid & Mux(self.step, done_if_step, done_if_bubble))
            with m.If(complete):
                counted = cur_inj == N               # its last step's turn is the window's first
                # The free slot: the older one where both are taken and it reports now.
                target = Mux(both, old, Mux(oldest("v"), ~old, old))
                for k, e in enumerate(ends):
                    with m.If(target == k):
                        m.d.sync += [e["v"].eq(1), e["tag"].eq(cur_tag), e["check_end"].eq(cur_check_end),
                                     e["bad"].eq(cur_bad), e["w"].eq(counted), e["sample"].eq(counted), e["ok"].eq(1),
                                     e["checked"].eq(0), e["trailing"].eq(0), e["starved"].eq(cur_starved | starved_cur),
                                     e["out"].eq(cur_out | out_cur)]
                m.d.sync += cur_valid.eq(0)
            with m.If(inject_nxt):
                m.d.sync += [cur_valid.eq(1), cur_tag.eq(nxt_tag), cur_rem.eq(nxt_count), rem_zero.eq(nxt_count == 0),
                             rem_one.eq(nxt_count == 1), cur_inj.eq(1), cur_s.eq(0),
                             cur_check_end.eq(nxt_check_end), cur_bad.eq(nxt_bad), cur_starved.eq(0),
                             cur_out.eq(nxt_count == 0), nxt_valid.eq(0)]

        # -- trailing words, after the fifth window turn (the stream's last pair has popped) -----------
        def holds(tag):
            """The coder's buffer holds a word of stream ``tag``."""
            return Cat(*(self.held[j] & (self.held_tags[T * j:T * (j + 1)] == tag) for j in range(pw))).any()

        # (A register: set by the fifth window turn, so that the purge it starts reads no compare.)
        check = [Signal(name=f"end{k}_check") for k in range(2)]
        for k, e in enumerate(ends):
            m.d.sync += check[k].eq(self.turned & in_window[k] & (e["w"] == XN_RING - 1))
        check_any, check_tag = Signal(), Signal(T)
        m.d.comb += [check_any.eq(check[0] | check[1]), check_tag.eq(Mux(check[1], ends[1]["tag"], ends[0]["tag"]))]
        trailing = Signal()
        w_on_end = Signal()
        m.d.comb += [w_on_end.eq(words.ongoing("BODY") & (w_tag == check_tag) & ~w_zero),
                     trailing.eq(holds(check_tag) | (body.r_rdy & ~r_entry.marker & (r_entry.tag == check_tag))
                                 | w_on_end)]
        purge_reg, purge_tag_reg = Signal(), Signal(T)
        # In the check's clock any buffered word of the ending stream is one it left unread: the coder
        # drops it whether or not the FIFO holds more (so that its turn does not wait on the FIFO's read).
        m.d.comb += [self.purge.eq(purge_reg | check_any),
                     self.purge_tag.eq(Mux(purge_reg, purge_tag_reg, check_tag)), w_abort.eq(check_any & w_on_end)]
        for k, e in enumerate(ends):
            with m.If(check[k]):
                m.d.sync += [e["checked"].eq(1), e["trailing"].eq(trailing)]
        with m.If(check_any & trailing):
            m.d.sync += [purge_reg.eq(1), purge_tag_reg.eq(check_tag)]
        with m.Elif(purge_reg & settled(purge_tag_reg) & ~holds(purge_tag_reg)):
            m.d.sync += purge_reg.eq(0)

        # -- reports, in command order ---------------------------------------------------------------
        m.d.sync += self.done.eq(0)
        with m.If(report):
            status = Signal(DecodeStatus)
            with m.If(oldest("bad")):
                m.d.comb += status.eq(DecodeStatus.ZERO_TOP_WORD)
            with m.Elif(oldest("starved")):
                m.d.comb += status.eq(DecodeStatus.OUT_OF_WORDS)
            with m.Elif(oldest("check_end") & ~oldest("ok")):
                m.d.comb += status.eq(DecodeStatus.FINAL_STATE)
            with m.Elif(oldest("check_end") & oldest("trailing")):
                m.d.comb += status.eq(DecodeStatus.TRAILING_DATA)
            with m.Elif(crc_bad.bit_select(oldest("tag"), 1)):
                m.d.comb += status.eq(DecodeStatus.CRC)
            with m.Else():
                m.d.comb += status.eq(DecodeStatus.OK)
            m.d.sync += [self.done.eq(1), self.status.eq(status), old.eq(~old)]
            for k, e in enumerate(ends):
                with m.If(old == k):
                    m.d.sync += e["v"].eq(0)
        with m.Elif(nxt_valid & nxt_skip & ~cur_valid & ~ends[0]["v"] & ~ends[1]["v"]):
            # (Only its own partial head can be in the state FIFO now: dropped first.)
            m.d.comb += drop.eq(states.r_rdy)
            with m.If(~states.r_rdy):
                m.d.sync += [self.done.eq(1), self.status.eq(nxt_status), nxt_valid.eq(0)]

        # Idle: nothing in flight since the last clock (a register, so that the table writes it gates do
        # not wait on this shell's state decode) and no command offered.
        quiet = Signal()
        m.d.sync += quiet.eq(words.ongoing("IDLE") & ~(self.cmd.valid & self.cmd.ready) & ~nxt_valid & ~cur_valid
                             & ~ends[0]["v"] & ~ends[1]["v"])
        m.d.comb += self.idle.eq(quiet & ~self.cmd.valid)
        self.probe = RansDecoderShellXNProbe(
            cur_valid=cur_valid, cur_tag=cur_tag, cur_rem=cur_rem, rem_zero=rem_zero, rem_one=rem_one, cur_inj=cur_inj,
            cur_s=cur_s, nxt_valid=nxt_valid, nxt_skip=nxt_skip, nxt_count=nxt_count, nxt_tag=nxt_tag, next_tag=next_tag,
            in_idle=words.ongoing("IDLE"), in_head=words.ongoing("HEAD"), in_drain=words.ongoing("DRAIN"), w_tag=w_tag, w_count=w_count, w_hc=w_hc,
            w_left=w_left, w_odd=w_odd, w_zero=w_zero, w_one=w_one, w_skip=w_skip, states_level=states.level, drop=drop,
            body_write=body.w_en, body_tag=w_entry.tag)
        return m


@dataclass(frozen=True)
class RansEncoderShellXNProbe:
    """The entry counts, over which the formal counts lemma (``encoder_counts`` of the interleaved
    encoder) states its invariant: what the formal lemmas read of :class:`RansEncoderShellXN` (its
    ``probe`` once elaborated; not ports). ``remaining``: pairs still to enter; ``ghosts``: ghost
    entries still to enter (before the pairs); ``active``: the command's entries are not all in."""

    remaining: Signal
    ghosts: Signal
    active: Signal


class RansEncoderShellXN(wiring.Component):
    """The shell of the interleaved rANS encoder (:class:`RansEncoderXnCoder`): a command's entries,
    ``last`` and ``done``.

    A command of ``count`` pairs is ``max(count, N)`` entries into the coder's ring: first ``N -
    count`` *ghosts* where ``count < N`` (the lanes ``N - 1 .. count`` it leaves unused, which stay at
    ``2**(S - W)`` and are flushed first, §8), then its pairs; ``final`` marks the last entry, after
    which the coder flushes the command's ``N`` states by itself while the next command's entries go
    in. Back to back: the next command is accepted in the clock of the previous one's last entry, and
    its first entry goes in the clock after (no idle clock). ``done`` is high for one clock after the
    port word that carries a command's last stream word (``last``) has left (one ``done`` per
    command, in command order). Tables may be written (``idle``) while no command is running or
    offered, the previous command's flush included: it reads no table.

    Reset: the counters reset (a running command is dropped, no ``done`` comes for it); the coder's
    ring resets to no command's slots, and its table (LUT-RAM) survives.
    """

    def __init__(self, shape: RansShape):
        sh = self._shape = shape
        ports = encoder_ports(sh.W, sh.symbol_bits, sh.K, sh.set_bits, count_bits=sh.count_bits)
        del ports["i"], ports["o"]
        ports.update({**encoder_xn_link(sh).members, "emit": In(1), "idle": Out(1)})
        #: The entry counts, filled in by :meth:`elaborate`: the formal lemma ``encoder_counts``
        #: (``sim/formal/``) states its invariant over them. Not ports.
        self.probe: RansEncoderShellXNProbe | None = None      # set by elaborate
        super().__init__(ports)

    def elaborate(self, platform):
        N = self._shape.codec.states
        m = Module()
        remaining = Signal.like(self.cmd.p.count)           # pairs still to enter
        ghosts = Signal(range(N + 1))                        # ghost entries still to enter (before the pairs)
        active = Signal()                                    # a command's entries are not all in
        # ``ghost`` (ghosts != 0) and ``final`` are registers: the coder's ring enable reads them.
        ghost, final = Signal(), Signal()
        m.d.comb += [self.run.eq(active), self.ghost.eq(ghost), self.final.eq(final),
                     self.cmd.ready.eq(~active | (self.step & final)),
                     self.idle.eq(~active & ~self.cmd.valid)]
        with m.If(self.step):
            with m.If(ghost):
                m.d.sync += [ghosts.eq(ghosts - 1), ghost.eq(ghosts != 1),
                             final.eq(((ghosts == 2) & (remaining == 0)) | ((ghosts == 1) & (remaining == 1)))]
            with m.Else():
                m.d.sync += [remaining.eq(remaining - 1), final.eq(remaining == 2)]
            with m.If(final):
                m.d.sync += active.eq(0)
        with m.If(self.cmd.valid & self.cmd.ready):
            # A command has at least N >= 2 entries: its first is never its last.
            count = self.cmd.p.count
            m.d.sync += [remaining.eq(count), ghosts.eq(Mux(count < N, N - count, 0)), ghost.eq(count < N),
                         final.eq(0), active.eq(1)]
        m.d.sync += self.done.eq(self.emit & self.last)
        self.probe = RansEncoderShellXNProbe(remaining=remaining, ghosts=ghosts, active=active)
        return m
