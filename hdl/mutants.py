"""Deliberately broken variants of the cores, for ``ansforge prove --mutants``.

A proof counts only if a broken core makes it fail. Each entry below names a *mutant*: a one- or
two-line change that the core's own constructor switches on with ``mutant=<name>`` (kept as
``self._mutant``; the coders see it as ``shape.mutant``). The cores are otherwise built by the same
code, so a mutant differs from the shipped core by exactly the hook it names. The catalog says which
property of :mod:`ansforge.sim.formal` is expected to catch each mutant; ``--mutants`` checks that it
does (and tries the core's other properties if it does not).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CORES", "ONE_STATE_CORES", "INTERLEAVED_CORES", "Mutant", "MUTANTS", "build_name", "check_mutant"]

from .cores import REGISTRY, prove_names

#: The one-state (base) builds, by the names the command line uses (:data:`~.cores.REGISTRY`).
ONE_STATE_CORES = tuple(r.name for r in REGISTRY if r.formal is not None and r.formal.states == 1)
#: The interleaved-state builds with formal harnesses of their own (``docs/bitstream.md`` §8):
#: ``<core>-x<N>`` is the core built for a codec of ``N`` states (:data:`~.cores.REGISTRY`'s rows whose
#: :class:`~.cores.FormalConfig` has ``states > 1``).
INTERLEAVED_CORES = tuple(r.name for r in REGISTRY if r.formal is not None and r.formal.states > 1)
#: Every provable core (:func:`~.cores.prove_names`).
CORES = tuple(prove_names())


def build_name(core: str, states: int = 1) -> str:
    """The :data:`CORES` name of ``core`` (one of :data:`ONE_STATE_CORES`) built for ``states`` states."""
    return core if states == 1 else f"{core}-x{states}"


@dataclass(frozen=True)
class Mutant:
    """One deliberately broken variant of a core.

    Attributes
    ----------
    name : str
        The ``mutant=`` value.
    core : str
        One of :data:`CORES`.
    where : str
        The hook: file, class and what the line changes.
    breaks : str
        What goes wrong in hardware, in a designer's words.
    expected : str
        The property (``stream_rules``, ``progress``, ``round_trip``, ``detection``) that should fail.
    """

    name: str
    core: str
    where: str
    breaks: str
    expected: str


MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    Mutant("tans_dec_overwrite", "tans-decoder", "hdl/tans/decoder_one.py TansDecoderCoder: out_free = 1",
           "a pair is decoded into o while o still holds an untaken one (payload changes under back-pressure)",
           "stream_rules"),
    Mutant("tans_dec_table_bit", "tans-decoder", "hdl/tans/cores.py TansDecoder: cfg write flips bit 0 of base",
           "a table bit flipped on its way into the state table", "round_trip"),
    Mutant("tans_dec_state_msb", "tans-decoder", "hdl/tans/cores.py TansDecoder: final_state_zero ignores the state's MSB",
           "the end check compares R - 1 of the R state bits", "detection"),
    Mutant("tans_dec_window_clear", "tans-decoder", "hdl/tans/window.py BitWindow: into_empty ignores clear",
           "a word taken in the clock of a clear (a command's first word, given with the command) lands behind "
           "the words the clear drops, so a command that follows one with unread words reads stale bits",
           "window_queue"),
    Mutant("tans_dec_last_word", "tans-decoder", "hdl/shell.py DecoderShell: words pass only while words_left > 1",
           "a dropped ready: the command's last word is never taken, the decoder waits for it forever", "progress"),
    Mutant("tans_enc_valid_pulse", "tans-encoder", "hdl/tans/encoder_one.py TansEncoderCoder: o.valid cleared every clock",
           "valid retracted before the transfer: a word not taken in its first clock is lost", "stream_rules"),
    Mutant("tans_enc_table_bit", "tans-encoder", "hdl/tans/cores.py TansEncoder: state_cfg write flips bit 0",
           "a table bit flipped on its way into the encoder's state table", "round_trip"),
    Mutant("tans_enc_last_pair", "tans-encoder", "hdl/shell.py EncoderShell: pairs taken only while remaining > 1",
           "an off-by-one in the pair count: the last pair is never taken and the flush never starts", "progress"),
    Mutant("rans_dec_overwrite", "rans-decoder", "hdl/rans/decoder_one.py RansDecoderCoder: a pair advances whatever o.ready",
           "a pair is decoded into o while o still holds an untaken one (payload changes under back-pressure)",
           "stream_rules"),
    Mutant("rans_dec_renorm", "rans-decoder", "hdl/rans/decoder_one.py RansDecoderCoder: pop while x <= 2**(S - W)",
           "an off-by-one in the renormalization: one word too many is popped when x = 2**(S - W)", "detection"),
    Mutant("rans_dec_last_word", "rans-decoder", "hdl/rans/shell.py RansDecoderShell: DECODE takes words only while "
           "words_left > 1", "a dropped ready: the command's last word is never taken, the coder waits for it forever",
           "progress"),
    Mutant("rans_dec_state_low", "rans-decoder", "hdl/rans/shell.py RansDecoderShell: end check compares x's low W bits",
           "a stream that ends in a state with only high bits set is reported OK", "detection"),
    Mutant("rans_enc_reset_less", "rans-encoder", "hdl/rans/encoder_one.py RansEncoderCoder: the word count survives reset",
           "words of an aborted command come out of the core after a reset", "out_of_reset"),
    Mutant("rans_enc_flush", "rans-encoder", "hdl/rans/encoder_one.py RansEncoderCoder: flush while x >> W != 0",
           "an off-by-one in the final flush: the state's last word (x < 2**W) is never written", "round_trip"),
    Mutant("rans_enc_zero_count", "rans-encoder", "hdl/rans/shell.py RansEncoderShell: flush only after a pair",
           "a command of zero pairs never flushes: the encoder hangs", "progress"),
    Mutant("tans_x2_dec_overwrite", "tans-decoder-x2", "hdl/tans/decoder_x2.py TansX2DecoderCoder: out_free = 1",
           "a pair is decoded into o while o still holds an untaken one (payload changes under back-pressure)",
           "stream_rules"),
    Mutant("tans_x2_enc_valid_pulse", "tans-encoder-x2", "hdl/tans/packer.py WideWordPacker/WordPacker: o.valid "
           "cleared every clock", "valid retracted before the transfer: a word not taken in its first clock is lost",
           "stream_rules"),
    Mutant("tans_x2_dec_head_read", "tans-decoder-x2", "hdl/tans/decoder_x2.py TansX2DecoderCoder: the stream head's first "
           "state read advances R - 1 bits", "an off-by-one at the stream head: the second lane's state is read "
           "one bit early, so every pair of that lane decodes from a wrong state", "round_trip"),
    Mutant("tans_x2_enc_flush_lane", "tans-encoder-x2", "hdl/tans/encoder_x2.py TansEncoderX2Coder: the flush field holds "
           "X_1 twice", "the flush writes one lane's final state for both: the decoder starts the other lane in "
           "the wrong state", "round_trip"),
    Mutant("rans_xn_dec_overwrite", "rans-decoder-x5", "hdl/rans/decoder_xn.py RansDecoderCoderXN: o_free = 1",
           "the ring hands a pair to o while o still holds an untaken one (payload changes under back-pressure)",
           "stream_rules"),
    Mutant("rans_xn_enc_overwrite", "rans-encoder-x16", "hdl/rans/encoder_xn.py RansEncoderXnCoder: room = 1",
           "the ring writes a word into o while o still holds an untaken one (payload changes under back-pressure)",
           "stream_rules"),
)}


def check_mutant(core: str, mutant: str | None, states: int = 1) -> str | None:
    """``mutant`` if it is ``None`` or a mutant of ``core`` built for ``states`` states
    (:func:`build_name`) in :data:`MUTANTS`, else ``ValueError``."""
    if mutant is None:
        return None
    core = build_name(core, states)
    m = MUTANTS.get(mutant) if isinstance(mutant, str) else None
    if m is None or m.core != core:
        names = ", ".join(n for n, v in MUTANTS.items() if v.core == core)
        raise ValueError(f"mutant must be None or one of {names} (mutants of the {core}), not {mutant!r}")
    return mutant
