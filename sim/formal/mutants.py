"""Deliberately broken variants of the cores, for ``ansforge prove --mutants``, applied to the netlist.

A proof counts only if a broken core makes it fail. Each :class:`Mutant` names one or two small edits
of one block's statements (a compare off by one, a ready ignored, a table bit flipped on its way in, a
register that survives reset). The cores carry no trace of them: a harness is built from the shipped
classes, elaborated, and :func:`mutate` rewrites the statements of the fragments that the mutant's
block elaborated to (found by :attr:`~amaranth.hdl.Fragment.origins`), whatever harness holds the
block: a core's port harness, or a lemma's harness of the block alone. An edit names what it
rewrites by the block's own ports (the instance's signals) or, for a block's internal signals, by
the name the block gives them; an edit that finds nothing to rewrite is an error
(:class:`StaleMutant`), so a mutant cannot silently stop applying when a block changes.

The catalogue (:data:`MUTANTS`) says, per mutant, which property of :mod:`ansforge.sim.formal` is
expected to catch it; ``--mutants`` checks that it does (and tries the core's other properties if it
does not). It has at least two mutants per datapath the core registry ships (family, role, and one
state or interleaved states).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from amaranth.hdl import Const, Fragment, Signal, Value
# Amaranth 0.5 exports no statement transformer; its own DomainRenamer and ResetInserter are built on
# these classes, and the statements they rewrite are these.
from amaranth.hdl._ast import Assign, Concat, Operator, Slice, Switch, SwitchValue
from amaranth.hdl._xfrm import StatementTransformer, ValueTransformer


__all__ = ["Mutant", "Edit", "MUTANTS", "MUTANT_SETS", "StaleMutant", "NotInHarness", "mutate", "mutated",
           "mutants_of", "check_mutant"]


class StaleMutant(RuntimeError):
    """A mutant's edit found nothing to rewrite in its block (the block changed: update the catalogue)."""


class NotInHarness(StaleMutant):
    """The harness holds no instance of the mutant's block (a lemma's harness of another block)."""


@dataclass(frozen=True)
class Edit:
    """One rewrite of a block's statements.

    ``match(block, value, names)`` picks an expression, ``replace(block, value, names)`` gives what
    stands in its place (of the same width: the expression may be a slice's operand) (``names``: the block's signals by name, for its internal ones). Only
    expressions that are read are rewritten, where ``reads`` says: ``"assignments"``, the right-hand
    side of an assignment (of an assignment to ``into`` only, where given: a signal name, a callable
    giving the block's port signal, or a tuple of them); ``"conditions"``, an ``If``/``Elif`` condition as a whole;
    ``"all"``, both (an expression a block uses in an assignment and in a condition, such as an output
    register's "may take a new value"). ``reset_less``: instead, the
    block's signal of that name becomes a reset-less twin wherever the block reads or writes it.
    ``optional``: the edit may find nothing (code that only some shapes of the block have).
    """

    match: Callable | None = None
    replace: Callable | None = None
    into: str | Callable | tuple | None = None
    reads: str = "assignments"
    reset_less: str | None = None
    optional: bool = False


@dataclass(frozen=True)
class Mutant:
    """One deliberately broken variant of a core.

    Attributes
    ----------
    name : str
        The mutant's name (``--mutants`` reports it).
    core : str
        The build (:data:`~.params.CORES`) whose harnesses it is run on.
    block : str
        ``"module:Class"`` (in :mod:`ansforge.hdl`) of the block whose statements it edits: every
        instance of that class in a harness (its subclasses included).
    where : str
        The edit, in words: file, block and what changes.
    breaks : str
        What goes wrong in hardware, in a designer's words.
    expected : str
        The property (``stream_rules``, ``progress``, ``round_trip``, ``detection``, ...) that should fail.
    edits : tuple of Edit
    """

    name: str
    core: str
    block: str
    where: str
    breaks: str
    expected: str
    edits: tuple[Edit, ...] = field(default=(), repr=False)

    @property
    def block_class(self) -> type:
        module, _, name = self.block.partition(":")
        return getattr(importlib.import_module(f"ansforge.hdl.{module}"), name)


# -- matching ------------------------------------------------------------------------------------------

def _op(value: Value, operator: str) -> bool:
    return isinstance(value, Operator) and value.operator == operator


def _const(value: Value, number: int) -> bool:
    return isinstance(value, Const) and value.value == number


def _named(value: Value, name: str) -> bool:
    return isinstance(value, Signal) and value.name == name


def ignores(port: Callable) -> Edit:
    """``~valid | ready`` (an output register that may take a new value) becomes 1: the block
    overwrites its output whatever ``port(block)`` (its output stream's ``ready``) says."""
    return Edit(lambda b, v, n: _op(v, "|") and any(o is port(b) for o in v.operands),
                lambda b, v, n: Const(1, 1), reads="all")


def clears_every_clock(port: Callable) -> Edit:
    """An ``If(ready)`` that clears ``valid`` after a transfer becomes ``If(1)``: ``valid`` is retracted
    in the clock after it rose, taken or not."""
    return Edit(lambda b, v, n: v is port(b), lambda b, v, n: Const(1, 1), reads="conditions")


def compares_remaining(old: int, new: int, into: str) -> Edit:
    """``remaining == old`` (assigned to ``into``) becomes ``remaining == new``: a count's off-by-one."""
    return Edit(lambda b, v, n: _op(v, "==") and _named(v.operands[0], "remaining") and _const(v.operands[1], old),
                lambda b, v, n: v.operands[0] == new, into=into)


def flips_bit(stream: Callable, field: Callable) -> Edit:
    """The block passes ``stream(block)``'s payload on with bit 0 of ``field(payload)`` inverted."""
    def replace(b, v, n):
        bit = Value.cast(field(stream(b).p)).start
        return v ^ Const(1 << bit, len(v))
    return Edit(lambda b, v, n: v is Value.cast(stream(b).p), replace)


# -- the catalogue -------------------------------------------------------------------------------------

_DEC_XN = "tans.decoder_xn:TansXnDecoderCoder"
_OVERWRITES_PAIR = "a pair is decoded into o while o still holds an untaken one (payload changes under back-pressure)"
_RETRACTS_VALID = "valid retracted before the transfer: a word not taken in its first clock is lost"


def _o_ready(block):
    """The block's output stream's ``ready``."""
    return block.o.ready

_ENC_XN = "tans.encoder_xn:TansXnEncoderCoder"

MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    # tANS decoder, one state
    Mutant("tans_dec_overwrite", "tans-decoder", "tans.decoder_one:TansDecoderCoder",
           "hdl/tans/decoder_one.py TansDecoderCoder: out_free = ~o.valid | o.ready becomes 1",
           _OVERWRITES_PAIR,
           "stream_rules", (ignores(_o_ready),)),
    Mutant("tans_dec_table_bit", "tans-decoder", "tans.cores_xn:TansXnDecoder",
           "hdl/tans/cores_xn.py TansXnDecoder: the cfg write reaches the coder with bit 0 of base flipped",
           "a table bit flipped on its way into the state table", "round_trip",
           (flips_bit(lambda b: b.cfg, lambda p: p.data.base),)),
    Mutant("tans_dec_state_msb", "tans-decoder", "tans.cores_xn:TansXnDecoder",
           "hdl/tans/cores_xn.py TansXnDecoder: final_state_zero compares the state's low R - 1 bits",
           "the end check compares R - 1 of the R state bits", "detection",
           (Edit(lambda b, v, n: v is b.coder.state, lambda b, v, n: v & ((1 << (len(v) - 1)) - 1)),)),
    Mutant("tans_dec_window_clear", "tans-decoder", "tans.window:BitWindow",
           "hdl/tans/window.py BitWindow: into_empty ignores clear",
           "a word taken in the clock of a clear (the window's contract allows one; the shipped shell gives none) lands behind "
           "the words the clear drops, so a command that follows one with unread words reads stale bits",
           "window_queue", (Edit(lambda b, v, n: v is b.clear, lambda b, v, n: Const(0, 1), into="into_empty"),)),
    Mutant("tans_dec_last_word", "tans-decoder", "shell:DecoderShell",
           "hdl/shell.py DecoderShell: words pass only while more than one is left (no_words | one_word)",
           "a dropped ready: the command's last word is never taken, the decoder waits for it forever", "progress",
           (Edit(lambda b, v, n: v is n["no_words"], lambda b, v, n: v | n["one_word"],
                 into=(lambda b: b.i.ready, lambda b: b.words.valid)),)),
    # tANS encoder, one state
    Mutant("tans_enc_valid_pulse", "tans-encoder", "tans.encoder_one:TansEncoderCoder",
           "hdl/tans/encoder_one.py TansEncoderCoder: If(o.ready) clearing o.valid becomes If(1)",
           _RETRACTS_VALID, "stream_rules",
           (clears_every_clock(_o_ready),)),
    Mutant("tans_enc_table_bit", "tans-encoder", "tans.cores_xn:TansXnEncoder",
           "hdl/tans/cores_xn.py TansXnEncoder: the state_cfg write reaches the coder with bit 0 flipped",
           "a table bit flipped on its way into the encoder's state table", "round_trip",
           (flips_bit(lambda b: b.state_cfg, lambda p: p.data),)),
    Mutant("tans_enc_last_pair", "tans-encoder", "shell:EncoderShell",
           "hdl/shell.py EncoderShell: pairs taken only while remaining > 1 (not != 0)",
           "an off-by-one in the pair count: the last pair is never taken and the flush never starts", "progress",
           (Edit(lambda b, v, n: _op(v, "!=") and _named(v.operands[0], "remaining") and _const(v.operands[1], 0),
                 lambda b, v, n: v.operands[0] > 1, into=lambda b: b.take),)),
    # rANS decoder, one state
    Mutant("rans_dec_overwrite", "rans-decoder", "rans.decoder_one:RansDecoderCoder",
           "hdl/rans/decoder_one.py RansDecoderCoder: o_free = ~o_valid | o.ready becomes 1",
           _OVERWRITES_PAIR,
           "stream_rules", (ignores(_o_ready),)),
    Mutant("rans_dec_renorm", "rans-decoder", "rans.decoder_one:RansDecoderCoder",
           "hdl/rans/decoder_one.py RansDecoderCoder: pop while x <= 2**(S - W) (not <)",
           "an off-by-one in the renormalization: one word too many is popped when x = 2**(S - W)", "detection",
           (Edit(lambda b, v, n: _op(v, "<") and _const(v.operands[1], 1 << (len(b.state) - len(b.i.p))),
                 lambda b, v, n: v.operands[0] <= v.operands[1]),)),
    Mutant("rans_dec_last_word", "rans-decoder", "rans.shell:RansDecoderShell",
           "hdl/rans/shell.py RansDecoderShell: DECODE takes words only while words_left > 1",
           "a dropped ready: the command's last word is never taken, the coder waits for it forever", "decoder_counts",
           (Edit(lambda b, v, n: v is b.word.ready, lambda b, v, n: v & (n["words_left"] > 1),
                 into=lambda b: b.i.ready),)),
    Mutant("rans_dec_state_low", "rans-decoder", "rans.shell:RansDecoderShell",
           "hdl/rans/shell.py RansDecoderShell: the end check compares x's low W bits",
           "a stream that ends in a state with only high bits set is reported OK", "detection",
           (Edit(lambda b, v, n: v is b.state, lambda b, v, n: v & ((1 << len(b.word.p)) - 1), reads="conditions"),)),
    # rANS encoder, one state
    Mutant("rans_enc_reset_less", "rans-encoder", "rans.encoder_one:RansEncoderCoder",
           "hdl/rans/encoder_one.py RansEncoderCoder: the word count n_out is reset-less",
           "words of an aborted command come out of the core after a reset", "out_of_reset",
           (Edit(reset_less="n_out"),)),
    Mutant("rans_enc_flush", "rans-encoder", "rans.encoder_one:RansEncoderCoder",
           "hdl/rans/encoder_one.py RansEncoderCoder: flush while x >> W != 0 (not x != 0)",
           "an off-by-one in the final flush: the state's last word (x < 2**W) is never written", "round_trip",
           (Edit(lambda b, v, n: v is n["x"], lambda b, v, n: v >> len(b.o.p), into="flush_word"),)),
    Mutant("rans_enc_zero_count", "rans-encoder", "rans.shell:RansEncoderShell",
           "hdl/rans/shell.py RansEncoderShell: ENCODE goes to FLUSH only after a pair (remaining == 0 dropped)",
           "a command of zero pairs never flushes: the encoder hangs", "progress",
           (Edit(lambda b, v, n: _op(v, "|") and _op(v.operands[0], "==") and _named(v.operands[0].operands[0], "remaining")
                 and _const(v.operands[0].operands[1], 0), lambda b, v, n: v.operands[1], reads="conditions"),)),
    # tANS decoder, interleaved states (what tans8x16 ships), at N = 2
    Mutant("tans_xn_dec_overwrite", "tans-decoder-x2", _DEC_XN,
           "hdl/tans/decoder_xn.py TansXnDecoderCoder: out_free = ~o.valid | o.ready becomes 1",
           _OVERWRITES_PAIR,
           "stream_rules", (ignores(_o_ready),)),
    Mutant("tans_xn_dec_head_bit", "tans-decoder-x2", _DEC_XN,
           "hdl/tans/decoder_xn.py TansXnDecoderCoder: the marker's position is found one bit short (+ R - 1)",
           "an off-by-one at the stream head: every lane's first state is read one bit early, so the stream "
           "decodes from wrong states", "round_trip",
           (Edit(lambda b, v, n: _op(v, "+") and _const(v.operands[1], len(b.rstate)),
                 lambda b, v, n: v.operands[0] + (len(b.rstate) - 1), into="in_pos"),)),
    Mutant("tans_xn_dec_count_short", "tans-decoder-x2", "shell:DecoderShell",
           "hdl/shell.py DecoderShell: rem_zero is set as the pair before the last is counted (remaining == 2)",
           "an off-by-one in the pair count: a command of n > 1 pairs ends after n - 1 and reports done, one of "
           "1 pair runs on past its count", "commands",
           (compares_remaining(1, 2, "rem_zero"),)),
    Mutant("tans_xn_dec_one_lane_end", "tans-decoder-x2", _DEC_XN,
           "hdl/tans/decoder_xn.py TansXnDecoderCoder: state_zero is the tail's state alone (zc == N - 1 dropped)",
           "the end check looks at one lane's final state: a stream that leaves another lane in a wrong state "
           "is reported OK", "detection",
           (Edit(lambda b, v, n: _op(v, "==") and v.operands[0] is n["zc"], lambda b, v, n: Const(1, 1),
                 into=lambda b: b.state_zero),)),
    Mutant("tans_xn_dec_window_holds", "tans-decoder-x2", "tans.window:PairWindow",
           "hdl/tans/window.py PairWindow: holds compares pos < c W (not <=)",
           "an off-by-one in holds: a field that ends on a word's last bit waits for the next word, so a stream "
           "whose last field ends on its last word's last bit reads past its end", "window_queue",
           (Edit(lambda b, v, n: _op(v, "<=") and v.operands[0] is b.pos, lambda b, v, n: v.operands[0] < v.operands[1],
                 into=lambda b: b.holds),)),
    # tANS encoder, interleaved states, at N = 2
    Mutant("tans_xn_enc_valid_pulse", "tans-encoder-x2", "tans.packer:WordPacker",
           "hdl/tans/packer.py WordPacker: If(o.ready) clearing o.valid becomes If(1)",
           _RETRACTS_VALID, "stream_rules",
           (clears_every_clock(_o_ready),)),
    Mutant("tans_xn_enc_flush_lane", "tans-encoder-x2", _ENC_XN,
           "hdl/tans/encoder_xn.py TansXnEncoderCoder: the flush ends after N - 1 steps (fc == N - 2)",
           "the flush writes one lane's final state too few: the decoder starts a lane in the wrong state",
           "round_trip",
           (Edit(lambda b, v, n: _op(v, "==") and v.operands[0] is n["fc"] and isinstance(v.operands[1], Const),
                 lambda b, v, n: v.operands[0] == v.operands[1].value - 1, into="fc_last"),)),
    # rANS decoder, interleaved states (the two-pop datapath of rans16xN), at N = 5
    Mutant("rans_xn_dec_overwrite", "rans-decoder-x5", "rans.decoder_xn:RansDecoderCoderXN",
           "hdl/rans/decoder_xn.py RansDecoderCoderXN: o_free = ~o_valid | o.ready becomes 1",
           "the ring hands a pair to o while o still holds an untaken one (payload changes under back-pressure)",
           "stream_rules", (ignores(_o_ready),)),
    Mutant("rans_xn_dec_last_word", "rans-decoder-x5", "rans.shell_xn:RansDecoderShellXN",
           "hdl/rans/shell_xn.py RansDecoderShellXN: i.ready needs more than one port word left (w_zero | w_one)",
           "a dropped ready: the command's last port word is never taken, the decoder waits for it forever",
           "progress", (Edit(lambda b, v, n: v is n["w_zero"], lambda b, v, n: v | n["w_one"],
                             into=lambda b: b.i.ready),)),
    Mutant("rans_xn_dec_late_word", "rans-decoder-x5", "rans.decoder_xn:RansDecoderCoderXN",
           "hdl/rans/decoder_xn.py RansDecoderCoderXN: the pop after the chunk always takes word2 (late_word = "
           "word2, not word where the symbol's word was not popped)",
           "a pair whose only pop is its chunk's reads the word after its own: the state after it is wrong, and "
           "every later pair of that lane", "decoder_step",
           (Edit(lambda b, v, n: v is n["word"], lambda b, v, n: n["word2"], into="x_next"),)),
    Mutant("rans_xn_dec_purge_any", "rans-decoder-x5", "rans.decoder_xn:RansDecoderCoderXN",
           "hdl/rans/decoder_xn.py RansDecoderCoderXN: stale = purge & va, the tag compare (ta == purge_tag) dropped",
           "a purge of an ended stream's trailing words also drops the front words of the stream after it, "
           "which then decodes from the wrong words", "decoder_pipeline",
           (Edit(lambda b, v, n: _op(v, "==") and v.operands[0] is n["ta"], lambda b, v, n: Const(1, 1),
                 into="stale"),)),
    Mutant("rans_xn_dec_early_next", "rans-decoder-x5", "rans.shell_xn:RansDecoderShellXN",
           "hdl/rans/shell_xn.py RansDecoderShellXN: the next stream's first injection waits only for a pair "
           "pending, not for the running stream's last (done_if_step dropped from inject_nxt)",
           "back to back, the next stream's first state takes a lane of the running one before its last pairs: "
           "both streams decode wrong", "decoder_counts",
           (Edit(lambda b, v, n: v is n["done_if_step"], lambda b, v, n: Const(1, 1), into="inject_nxt"),)),
    # rANS encoder, interleaved states (rans16x16), at N = 16
    Mutant("rans_xn_enc_overwrite", "rans-encoder-x16", "rans.encoder_xn:RansEncoderXnCoder",
           "hdl/rans/encoder_xn.py RansEncoderXnCoder: room = ~n_out | o.ready becomes 1 (and, with two stream "
           "words a port word, kept, the port words its queue keeps, reads o.ready as 1)",
           "the ring writes a word into o while o still holds an untaken one (payload changes under back-pressure)",
           "stream_rules", (ignores(_o_ready),
                            Edit(lambda b, v, n: v is b.o.ready, lambda b, v, n: Const(1, 1), into="kept",
                                 optional=True))),
    Mutant("rans_xn_enc_reset_less", "rans-encoder-x16", "rans.encoder_xn:RansEncoderXnCoder",
           "hdl/rans/encoder_xn.py RansEncoderXnCoder: n_out (the output register holds a port word) is reset-less",
           "a word of an aborted command comes out of the core after a reset", "out_of_reset",
           (Edit(reset_less="n_out"),)),
    Mutant("rans_xn_enc_no_correction", "rans-encoder-x16", "rans.encoder_xn:RansEncoderXnCoder",
           "hdl/rans/encoder_xn.py RansEncoderXnCoder: the last stage adds c to the divider's remainder without "
           "its correction (r + c, not r + (c + f if r < 0 else c))",
           "a negative remainder of the non-restoring divider is not corrected: the state is coded wrong",
           "encoder_step",
           (Edit(lambda b, v, n: _op(v, "+") and isinstance(v.operands[1], SwitchValue),
                 lambda b, v, n: v.operands[0] + v.operands[1].cases[0][1], into="remainder_plus_c"),)),
    Mutant("rans_xn_enc_flush_high", "rans-encoder-x16", "rans.encoder_xn:RansEncoderXnCoder",
           "hdl/rans/encoder_xn.py RansEncoderXnCoder: a flush step's first word is the state's high word "
           "(x_flush[W:2W], not x_flush[:W])",
           "the flush writes each final state's high word twice and its low word never: the decoder starts "
           "every lane in a wrong state", "encoder_pipeline",
           (Edit(lambda b, v, n: isinstance(v, Slice) and v.value is n["x_flush"] and v.start == 0,
                 lambda b, v, n: n["x_flush"][v.stop:2 * v.stop]),)),
    Mutant("rans_xn_enc_final_late", "rans-encoder-x16", "rans.shell_xn:RansEncoderShellXN",
           "hdl/rans/shell_xn.py RansEncoderShellXN: final is set when one pair is left (remaining == 1, not 2)",
           "an off-by-one in the entry count: a command of more than N pairs marks its last entry one late, "
           "so the ring takes one entry more than the command has", "encoder_counts",
           (compares_remaining(2, 1, "final"),)),
)}


#: The mutants CI checks (``ansforge prove --mutants representative``): at least one per build of
#: :data:`~.params.CORES`, and together one caught by each kind of property CI's run proves (stream rules,
#: out of reset, progress, the round trip through the ``sat`` runner, detection, a composition lemma;
#: ``commands``'s mutant is caught in its own test), the cheapest of their kind; ``ansforge bench --only
#: prove`` checks the whole catalogue.
REPRESENTATIVE = ("tans_dec_table_bit", "tans_dec_state_msb", "tans_dec_window_clear", "tans_enc_valid_pulse",
                  "rans_dec_last_word",
                  "rans_enc_reset_less", "tans_xn_dec_head_bit", "tans_xn_dec_one_lane_end", "tans_xn_enc_flush_lane", "rans_xn_dec_last_word",
                  "rans_xn_enc_reset_less")

#: ``--mutants`` sets by name.
MUTANT_SETS: dict[str, tuple[str, ...]] = {"all": tuple(MUTANTS), "representative": REPRESENTATIVE}


def mutants_of(core: str) -> list[str]:
    """The names of ``core``'s mutants, in catalogue order."""
    return [name for name, m in MUTANTS.items() if m.core == core]


def check_mutant(core: str, mutant: str | None) -> str | None:
    """``mutant`` if it is ``None`` or one of ``core``'s mutants, else ``ValueError`` naming them."""
    if mutant is None:
        return None
    m = MUTANTS.get(mutant) if isinstance(mutant, str) else None
    if m is None or m.core != core:
        raise ValueError(f"mutant must be None or one of {', '.join(mutants_of(core))} (mutants of the {core}), "
                         f"not {mutant!r}")
    return mutant


class _Rewriter(ValueTransformer, StatementTransformer):
    """One :class:`Edit` over one block's statements (``names``: the block's signals by name)."""

    def __init__(self, block, edit: Edit, names: dict[str, Signal]):
        self.block, self.edit, self.names = block, edit, names
        self.hits = 0
        self._reading = False
        self._twin = None
        if edit.reset_less is not None:
            old = names.get(edit.reset_less)
            if old is not None:
                self._twin = (old, Signal(old.shape(), name=f"{old.name}_reset_less", init=old.init, reset_less=True))

    def _target(self, lhs) -> bool:
        into = self.edit.into
        if into is None:
            return True
        return any(isinstance(lhs, Signal) and lhs.name == t if isinstance(t, str) else lhs is Value.cast(t(self.block))
                   for t in (into if isinstance(into, tuple) else (into,)))

    def on_value(self, value):
        if self._twin is not None and value is self._twin[0]:
            self.hits += 1
            return self._twin[1]
        if self._reading and self.edit.match is not None and self.edit.match(self.block, value, self.names):
            self.hits += 1
            return self.edit.replace(self.block, value, self.names)
        return super().on_value(value)

    def on_Assign(self, stmt):
        if self._twin is not None:
            return Assign(self.on_value(stmt.lhs), self.on_value(stmt.rhs))
        if self.edit.reads == "conditions" or not self._target(stmt.lhs):
            return stmt
        self._reading = True
        try:
            return Assign(stmt.lhs, self.on_value(stmt.rhs))
        finally:
            self._reading = False

    def on_Switch(self, stmt):
        test = stmt.test
        if self._twin is not None:
            test = self.on_value(test)
        elif self.edit.reads in ("conditions", "all"):
            # An If/Elif chain's test is the Cat of its conditions: each is matched as a whole.
            parts = list(test.parts) if isinstance(test, Concat) else [test]
            self._reading = True
            try:
                new = [self.on_value(p) for p in parts]
            finally:
                self._reading = False
            test = Concat(new) if isinstance(test, Concat) else new[0]
        return Switch(test, [(k, self.on_statement(s), loc) for k, s, loc in stmt.cases])


def _signals(fragment: Fragment) -> dict[str, Signal]:
    """The signals a fragment's statements read or write, by name (a name given twice: the first)."""
    found: dict[str, Signal] = {}

    def value(v):
        if isinstance(v, Signal):
            found.setdefault(v.name, v)
        elif isinstance(v, Operator):
            for o in v.operands:
                value(o)
        elif isinstance(v, Slice):
            value(v.value)
        elif isinstance(v, Concat):
            for p in v.parts:
                value(p)

    def statement(s):
        if isinstance(s, Assign):
            value(s.lhs)
            value(s.rhs)
        elif isinstance(s, Switch):
            value(s.test)
            for _, body, _ in s.cases:
                for t in body:
                    statement(t)

    for stmts in fragment.statements.values():
        for s in stmts:
            statement(s)
    return found


def mutate(fragment: Fragment, mutant: str | None) -> Fragment:
    """``fragment`` (an elaborated harness, edited in place and returned) with ``mutant``'s edits made
    in the statements of every fragment its block elaborated to; :class:`StaleMutant` if an edit
    finds nothing to rewrite there, :class:`NotInHarness` if the harness holds no such block."""
    if mutant is None:
        return fragment
    m = MUTANTS[mutant]
    cls = m.block_class
    hits = [0] * len(m.edits)
    blocks = 0

    def walk(f: Fragment) -> None:
        nonlocal blocks
        # (a lemma's harness may hold a block it elaborated itself: ``benches.elaborated_block``)
        origins = [getattr(o, "elaborated_from", o) for o in (getattr(f, "origins", None) or ())]
        block = next((o for o in origins if isinstance(o, cls)), None)
        if block is not None:
            blocks += 1
            names = _signals(f)
            for j, edit in enumerate(m.edits):
                r = _Rewriter(block, edit, names)
                statements = {domain: [r.on_statement(s) for s in stmts] for domain, stmts in f.statements.items()}
                f.statements = {}
                for domain, stmts in statements.items():
                    f.add_statements(domain, stmts)
                hits[j] += r.hits
        for sub, *_ in f.subfragments:
            walk(sub)

    walk(fragment)
    if blocks == 0:
        raise NotInHarness(f"mutant {mutant}: the harness holds no {m.block}")
    for edit, n in zip(m.edits, hits):
        if n == 0 and not edit.optional:
            raise StaleMutant(f"mutant {mutant}: an edit of {m.block} found nothing to rewrite ({m.where})")
    return fragment


def mutated(core, mutant: str):
    """``core`` (a built core, any configuration) with ``mutant``'s edits: an object of a subclass of its
    class, sharing its ports, whose ``elaborate`` gives the edited fragment, so that whatever runs a core
    (a simulation job, :class:`~ansforge.sim.amaranth_sim.AmaranthEngine`) runs the mutant.
    :class:`NotInHarness` (on elaboration) where the core holds no instance of the mutant's block."""
    import copy

    MUTANTS[mutant]                                  # KeyError for an unknown name, before anything runs
    cls = type(core)
    plain = copy.copy(core)

    def elaborate(self, platform):
        return mutate(Fragment.get(plain, platform), mutant)

    twin = copy.copy(core)
    twin.__class__ = type(f"{mutant}_{cls.__name__}", (cls,), {"elaborate": elaborate, "__module__": __name__})
    return twin
