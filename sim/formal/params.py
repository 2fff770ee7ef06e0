"""The formal harnesses' parameters: the small core configurations, the pinned tables, the property
names, and the bounds (pairs, words, clocks) each harness's scenario is measured to finish within.

Every figure here is bound to ``hdl/cores.py``'s ``REGISTRY`` (its ``FormalConfig``: progress bound,
minimum depth, baked tables) or stated beside its constant; ``docs/formal.md`` says where each was measured.
"""

from __future__ import annotations

import functools

from ...hdl.cores import REGISTRY, core_build, prove_names
from ...model.coding.codecs import RansCodec, TansCodec
from ...model.coding.codetable import CodeTable
from ...model.coding.rans import RansParams, RansTable
from ...model.coding.tans import TansParams, TansTable

#: Every provable build (:func:`~ansforge.hdl.cores.prove_names`, the core registry's rows with a
#: :class:`~ansforge.hdl.cores.FormalConfig`), by the names ``ansforge prove --core`` takes.
CORES = tuple(prove_names())
#: The one-state (base) builds.
ONE_STATE_CORES = tuple(r.name for r in REGISTRY if r.formal is not None and r.formal.states == 1)
#: The interleaved-state builds with formal harnesses of their own (``docs/bitstream.md`` §8):
#: ``<core>-x<N>`` is the core built for a codec of ``N`` states.
INTERLEAVED_CORES = tuple(r.name for r in REGISTRY if r.formal is not None and r.formal.states > 1)

#: The small configurations the harnesses build (keyword arguments of the cores' constructors).
SMALL = {
    "tans": dict(table_log=5, word_bits=8, max_symbols=4, max_extra_bits=2),
    "rans": dict(state_bits=16, word_bits=8, precision_bits=8, max_symbols=4, max_extra_bits=2),
}
#: The interleaved-state builds (:data:`INTERLEAVED_CORES`): the codec's
#: parameters (the states come from the core's name) and the core's. tANS: ``SMALL["tans"]`` with two
#: states. rANS encoder: ``S = 16, W = 8, P = 8``, the shape of ``rans16x16`` (``S = 32, W = P = 16``)
#: scaled down: ``K = 2 > W - P`` so that a pair may push twice (the chunk's word and the symbol's)
#: and the port is two stream words, the two-push datapath the command line ships
#: (``RansEncoderXnCoder.two_words``; ``P >= 5``, ``S - P >= P``, ``S <= 2 W``: ``check_shape``).
#: The rANS decoder has its own, :data:`SMALL_XN_DECODER`.
SMALL_XN = {
    "tans": (dict(table_log=5, word_bits=8), dict(max_symbols=4, max_extra_bits=2)),
    "rans": (dict(state_bits=16, word_bits=8, precision_bits=8), dict(max_symbols=4, max_extra_bits=2)),
}
#: The rANS xN decoder's small shape: ``S = 2 W`` (``S = 16, W = 8, P = 5``, 16-bit port words), the
#: shape of ``rans16xN`` (``S = 32, W = 16``) scaled down, so that the harness builds the datapath the
#: command line ships (``RansDecoderCoderXN.check_shape``: ``K <= P``, ``S <= 2 W``, ``P <= S - W``;
#: a pair pops before its chunk and again after it, both of the 2 W-bit port word's halves).
SMALL_XN_DECODER = (dict(state_bits=16, word_bits=8, precision_bits=5), dict(max_symbols=4, max_extra_bits=2))
#: The rANS xN decoder's ``max_extra_bits`` in its round-trip lemmas (``decoder_step``,
#: ``decoder_pipeline``): ``K = 4 > W - P = 3``, so that a pair's two pops (the symbol's word, then the
#: chunk's) occur, as in ``rans16xN`` (``W - P = 0``, ``K = 8``); with the ``K = 2`` of the port
#: harnesses a legal stream never pops twice.
XN_DECODER_LEMMA_K = 4


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
#: this many arbitrary legal pairs (tANS: one free symbol of the local table per pair, :class:`LocalTansTable`).
#: 2 builds and runs, but neither family answered within 15 minutes on the shared 2-core machine
#: (``docs/formal.md``, round 5), so the shipped default stays at the measured 1.
ROUND_TRIP_PAIRS_ARBITRARY = {"tans": 1, "rans": 1}
#: Words the detection harness gives the decoder at most (``M``), and the harness's word stack.
DETECTION_WORDS = {"tans": 3, "rans": 3}
STACK_WORDS = 8
#: Whether ``stream_rules`` also asserts "no pair on ``o`` while ``cmd.ready``" (see :func:`stream_rules_bench`).
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
#: it: :func:`run_sat`) instead of SymbiYosys/z3, which does not finish them with a symbolic table.
#: tANS: the table is presented as the memories' contents (:class:`TablePlatform`) plus one arbitrary
#: row written through ``cfg``; rANS: written through ``cfg`` (4 clocks).
SAT_RUNS = {("tans", "round_trip"), ("rans", "round_trip"), ("rans", "detection")}
#: With ``table="arbitrary"`` the tANS detection too goes through the ``sat`` runner (on the local
#: table, :class:`LocalTansTable`); with the pinned table it stays on SymbiYosys/z3 (CI).
SAT_RUNS_ARBITRARY = SAT_RUNS | {("tans", "detection")}
#: Seconds the ``sat`` runner gives one problem (yosys writing the CNF, then CaDiCaL) by default: the
#: arbitrary-table round trips take minutes on a loaded two-core machine.
SAT_TIMEOUT = 3600
#: Default depth of the k-induction properties.
DEFAULT_DEPTH = 20
#: Properties per core, in the order ``--mutants`` tries them.
PROPERTIES = ("stream_rules", "out_of_reset", "progress", "commands", "round_trip", "detection")
#: Properties ``--properties representative`` (CI's run) leaves out: ``commands`` takes about nine minutes
#: over the eight builds here (the rANS ``x5`` decoder alone seven), and ``table_reset`` 28 to 230 s a build
#: with its cover, so CI proves each on one build in its own test and checks it in simulation on every
#: build, and ``ansforge bench --only prove`` proves them on every build.
NOT_REPRESENTATIVE = ("commands", "table_reset")
#: Runs ``--properties representative`` also leaves out, one build's property each: the sixteen-state rANS
#: round trip (one harness for the pair: 255 s and 306 s for its covers alone on the 2-core machine,
#: docs/formal.md); ``ansforge bench --only prove`` runs it; and the two-state tANS encoder's shell counts,
#: whose harness is the one-state encoder's to the netlist (one command layout for every ``N``; a test
#: compares them), which CI proves.
NOT_REPRESENTATIVE_RUNS = (("rans-decoder-x5", "round_trip"), ("rans-encoder-x16", "round_trip"),
                           ("tans-encoder-x2", "encoder_counts"))


#: The port properties, all that the interleaved builds have besides the two-state tANS pair's
#: ``round_trip`` on a baked table (:func:`round_trip_interleaved_bench`); their detection and the rANS xN
#: round trip are the simulation tests' (``tests/hdl/test_tans_xn.py``, ``tests/hdl/test_rans_xn_*.py``).
PORT_PROPERTIES = PROPERTIES[:4]
#: The step lemmas of the round trip (tANS, ``docs/formal.md`` *Round 6*; rANS, *Round 8*): one pair from an
#: arbitrary state, on an arbitrary legal table (tANS: always the local table, whatever ``table``; rANS:
#: the decoder on round 3's arbitrary legal table, the encoder on any legal row of its pair's symbol), so
#: they run with ``--table arbitrary`` only (minutes each). ``encoder_step``: from every idle encoder state,
#: the encoder core's step (and flush) is the golden step. ``decoder_step``: from every checkpoint the
#: decoder is resumed at (tANS: after one pair of its own), the decoder core inverts the golden encoder step.
#: Status ``proved``: each
#: quantifies over every starting state and its whole scenario ends within the depth.
STEP_PROPERTIES = {"tans-encoder": "encoder_step", "tans-decoder": "decoder_step",
                   "rans-encoder": "encoder_step", "rans-decoder": "decoder_step",
                   "tans-decoder-x2": "decoder_step", "tans-encoder-x2": "encoder_step",
                   "rans-encoder-x16": "encoder_step", "rans-decoder-x5": "decoder_step"}
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
                    "rans-encoder": ("encoder_pipeline", "encoder_counts", "composition"),
                    # the two-state pair's chains: the decoder's window, coder, shell and joints; the encoder's
                    # packer, coder, shell and joints (their step lemmas: STEP_PROPERTIES)
                    "tans-decoder-x2": ("window_queue", "decoder_pipeline", "decoder_counts", "composition"),
                    "tans-encoder-x2": ("packer_queue", "encoder_pipeline", "encoder_counts", "composition"),
                    # the sixteen-state rANS encoder's chain: its ring is the golden step
                    "rans-encoder-x16": ("encoder_pipeline", "encoder_counts", "composition"),
                    # the interleaved rANS decoder's chain: its ring and word buffer
                    "rans-decoder-x5": ("decoder_pipeline", "decoder_counts", "composition")}
#: The k-induction depth of each lemma (``--depth`` does not change it: it is the depth that closes,
#: and for the fast ones at least CI's 10).
LEMMA_DEPTH = {"window_queue": 10, "packer_queue": 10, "encoder_counts": 10, "decoder_counts": 10, "encoder_pipeline": 4,
               "decoder_pipeline": 4, "composition": 20}
#: The depth a lemma's covers are sought at, where its k-induction depth is too shallow to reach them
#: from reset (``encoder_pipeline`` closes at 2; its covers need 5 clocks).
LEMMA_COVER_DEPTH = {"encoder_pipeline": 8, "decoder_pipeline": 8}
#: The depth ``commands``'s covers are sought at on a build whose second command cannot end within the
#: run (``done`` with the next command in flight): the 16-state rANS encoder's one-pair command flushes
#: sixteen states, two words each.
COMMANDS_COVER_DEPTH = {"rans-encoder-x16": 48}
#: Every property name ``--property`` takes.
#: Tables survive reset (:func:`~.properties.table_reset_bench`): every build.
RESET_PROPERTIES = ("table_reset",)
ALL_PROPERTIES = PROPERTIES + RESET_PROPERTIES + STEP_LEMMAS + tuple(LEMMA_DEPTH)
#: Clocks after the table's by which the two-state decoder's ``decoder_step`` has finished (measured).
XN_DECODER_STEP_CLOCKS = 15
#: Clocks after the table's by which the two-state encoder's ``encoder_step`` has finished (measured).
XN_ENCODER_STEP_CLOCKS = 16
#: The depth of each core's step lemma (the clock its latched "finished in time" check is seen, plus one).
STEP_DEPTH = {"tans-encoder": 22, "tans-decoder": 18, "rans-encoder": 15, "rans-decoder": 16,
              "tans-decoder-x2": XN_DECODER_STEP_CLOCKS + 4, "tans-encoder-x2": XN_ENCODER_STEP_CLOCKS + 4,
              # a slot's trip round the sixteen-state ring: it lands N = 16 turns after it entered (clock
              # 16), its latched check seen a clock later
              "rans-encoder-x16": 18,
              # a slot's trip round the five-state ring: N = 5 turns and at most three clocks of its symbol
              # search (clock 8), landed at 9, its latched check seen a clock later
              "rans-decoder-x5": 11}


def properties_of(core: str, table: str = "pinned") -> tuple[str, ...]:
    """The properties proved for ``core`` (encoders have no ``detection``: that is the decoder's end
    check; the interleaved builds the port properties, and the two-state tANS pair its round trip); with ``table="arbitrary"`` the tANS
    cores also have their step lemma (:data:`STEP_PROPERTIES`); the tANS cores have the composition's
    lemmas (:data:`LEMMA_PROPERTIES`) with either table."""
    if core in INTERLEAVED_CORES:
        family = core.split("-")[0]
        step = (STEP_PROPERTIES[core],) if table == "arbitrary" and core in STEP_PROPERTIES else ()
        return (PORT_PROPERTIES + (("round_trip",) if family in XN_ROUND_TRIP_PAIRS else ())
                + (("detection",) if "-decoder" in core and family in XN_DETECTION_PAIRS else ()) + RESET_PROPERTIES
                + step + LEMMA_PROPERTIES.get(core, ()))
    own = (PROPERTIES if core.endswith("decoder") else PROPERTIES[:-1]) + RESET_PROPERTIES
    if table == "arbitrary" and core in STEP_PROPERTIES:
        own += (STEP_PROPERTIES[core],)
    return own + LEMMA_PROPERTIES.get(core, ())


def pinned_rans_table(states: int = 1) -> RansTable:
    """:data:`PINNED_RANS_TABLE` as the golden model's table (``S = 16, W = 8, P = 8``; ``states``
    interleaved states: the rANS xN round trip's, :func:`xn_round_trip_cores`)."""
    freqs = tuple(f for f, _ in PINNED_RANS_TABLE)
    ct = CodeTable((0, 1, 2), (3, 4, 5, 6), 0, freqs, SMALL["rans"]["precision_bits"])
    assert ct.symbol_extra_bits == tuple(k for _, k in PINNED_RANS_TABLE)
    sh = SMALL["rans"]
    return RansTable(ct, RansParams(state_bits=sh["state_bits"], word_bits=sh["word_bits"],
                                    precision_bits=sh["precision_bits"], max_symbols=sh["max_symbols"], states=states))


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


def small_core(core: str, *, baked: bool = False, count_bits: int | None = None, extra_bits: int | None = None):
    """``core`` (one of :data:`CORES`) in its small, programmable configuration: the registry's shipped
    class (:class:`~ansforge.hdl.cores.FormalConfig` ``harness``); ``baked`` (rANS, and the interleaved
    tANS builds): with the pinned table as the memories' initial contents. An interleaved build
    (``<core>-x<N>``) is the same class for a codec of ``N`` states, :data:`SMALL_XN`. ``count_bits``: the
    width of the rANS xN cores' command counts (a counts lemma's small counters; default the core's);
    ``extra_bits``: an interleaved build's ``max_extra_bits`` (default :data:`SMALL_XN`'s, and the rANS
    decoder's :data:`SMALL_XN_DECODER`'s; its lemmas take :data:`XN_DECODER_LEMMA_K`)."""
    if core not in CORES:
        raise ValueError(f"core must be one of {', '.join(CORES)}, not {core!r}")
    cls = core_build(core).formal.harness_class
    family = core.split("-")[0]
    decoder = core.split("-")[1] == "decoder"
    extra = {"block_crc": False} if decoder else {}
    if core in INTERLEAVED_CORES:
        states = int(core.rsplit("-x", 1)[1])
        loose, kw = _small_xn(core)
        if extra_bits is not None:
            kw = dict(kw, max_extra_bits=extra_bits)
        codec = (TansCodec if family == "tans" else RansCodec).of(**loose, states=states)
        extra |= {"count_bits": 3} if family == "tans" else {} if count_bits is None else {"count_bits": count_bits}
        if baked:
            extra["table"] = pinned_xn_table() if family == "rans" else pinned_tans_x2_table()
        return cls(codec, **kw, programmable=True, **extra)
    if family == "rans":
        if baked:
            extra["table"] = pinned_rans_table()
        return cls(**SMALL["rans"], programmable=True, **extra)
    return cls(**SMALL["tans"], programmable=True, count_bits=3, **extra)


#: Clocks after the table's (:func:`data_table_clocks`) by which a round trip of up to
#: ROUND_TRIP_PAIRS pairs, and a detection run, have finished (measured; the assertion that the round
#: trip has is part of ``round_trip``; the harness's depth is one or two clocks more).
ROUND_TRIP_CLOCKS = {"tans": 22, "rans": 26}
#: Clocks each pair beyond the first adds to the round trip's bound (2 pairs on the pinned tables: bounded
#: with 0 for tANS and 2 for rANS; a margin on top for tables that code to more words).
ROUND_TRIP_CLOCKS_PER_PAIR = {"tans": 2, "rans": 4}
DETECTION_CLOCKS = {"tans": 24, "rans": 30}
#: Detection: ``done`` within ``N * c + M + C`` clocks of the command (``c``: clocks per pair; tANS: the
#: command's first word goes to the coder a clock after the command).
DETECTION_BOUND = {"tans": (1, 7), "rans": (4, 6)}


def round_trip_pairs(family: str, table: str) -> int:
    """Most pairs the round trip of ``family`` codes on ``table``."""
    return (ROUND_TRIP_PAIRS_ARBITRARY if table == "arbitrary" else ROUND_TRIP_PAIRS)[family]


def round_trip_clocks(family: str, table: str) -> int:
    """Clocks after the table's by which every round trip of ``family`` on ``table`` has finished."""
    return ROUND_TRIP_CLOCKS[family] + (round_trip_pairs(family, table) - 1) * ROUND_TRIP_CLOCKS_PER_PAIR[family]


def uses_direct_table(family: str, prop: str, table: str = "pinned") -> bool:
    """Whether the harness presents its table as the memories' contents (tANS round trip, and tANS
    detection on an arbitrary table: one row is written through ``cfg``; the others would take 32
    clocks that no solver needs)."""
    return family == "tans" and (prop == "round_trip" or uses_local_table(family, prop, table))


def uses_local_table(family: str, prop: str, table: str) -> bool:
    """Whether the harness holds the local tANS table (:class:`LocalTansTable`)."""
    return family == "tans" and table == "arbitrary"


#: The interleaved builds' bounded properties that go through the ``sat`` runner whatever the table:
#: measured alone on the 2-core machine (z3 through SymbiYosys, then yosys ``sat`` + CaDiCaL, seconds,
#: CI's depth): ``rans-decoder-x5`` ``progress`` 59 / 17 and ``out_of_reset`` 27 / 13, ``rans-encoder-x16``
#: ``progress`` 23 / 12, ``tans-decoder-x2`` ``detection`` 39 / 13 (docs/formal.md).
SAT_INTERLEAVED = ("out_of_reset", "progress", "round_trip", "detection")


def sat_run(family: str, prop: str, table: str, core: str | None = None) -> bool:
    """Whether ``(family, prop)`` on ``table`` goes through the ``sat`` runner (:data:`SAT_RUNS`; and
    ``commands`` on every build: yosys ``sat`` and CaDiCaL bound the tANS decoder's in 10 s where z3 took
    150 s, docs/formal.md; ``table_reset`` on every build: the one-state tANS decoder's 18 s where z3 took
    259 s; on an interleaved ``core`` the properties of :data:`SAT_INTERLEAVED`; and the rANS xN decoder's
    ``composition``, bounded: 21 s where z3 took 368 s, both at depth 20)."""
    if core in INTERLEAVED_CORES and prop in SAT_INTERLEAVED or (core in XN_BAKED and prop == "composition"):
        return True
    return prop in ("commands", "table_reset") or (family, prop) in (SAT_RUNS_ARBITRARY if table == "arbitrary" else SAT_RUNS)


def uses_pinned_table(family: str, prop: str, table: str) -> bool:
    """Whether the harness holds the family's pinned table (with ``table == "pinned"``; an arbitrary
    tANS table is always the local one, :func:`uses_local_table`)."""
    return table == "pinned"


def data_table_clocks(family: str, prop: str, table: str) -> int:
    """Clocks the round trip / detection harness spends writing its table through ``cfg`` first."""
    if uses_direct_table(family, prop, table):
        return 1
    if family == "tans":
        return 1 << SMALL["tans"]["table_log"]
    return 0 if uses_pinned_table(family, prop, table) else SMALL["rans"]["max_symbols"]     # pinned rANS: baked


#: The interleaved builds' round trip (``round_trip`` of ``tans-decoder-x2`` / ``tans-encoder-x2``): the
#: pinned tANS table baked into both cores (:func:`pinned_tans_x2_table`), sequences of up to this many
#: arbitrary legal pairs (both lanes, and each lane twice), and the clock by which every one has finished
#: (measured: see ``docs/formal.md``, *Round 8*).
XN_ROUND_TRIP_PAIRS = {"tans": 4, "rans": 2}
XN_ROUND_TRIP_CLOCKS = {"tans": 24, "rans": 90}
#: Port words the round trip's stack holds: the 16-state rANS encoder's flush alone is 32 stream words
#: in 16 port words.
XN_STACK_WORDS = {"tans": STACK_WORDS, "rans": 24}
#: The interleaved decoders' detection (``detection`` of ``tans-decoder-x2``): the pinned table baked in
#: as for the round trip, commands of up to this many pairs (both lanes) over arbitrary streams of up
#: to :data:`XN_DETECTION_WORDS` words, ``done`` within ``n * c + nw + C`` clocks (``(c, C)``,
#: :data:`XN_DETECTION_BOUND`), every run finished by :data:`XN_DETECTION_CLOCKS` (measured: see
#: ``docs/formal.md``).
XN_DETECTION_PAIRS = {"tans": 2}
XN_DETECTION_WORDS = {"tans": 4}
XN_DETECTION_BOUND = {"tans": (1, 6)}
XN_DETECTION_CLOCKS = {"tans": 20}


def xn_round_trip_cores(family: str):
    """The interleaved round trip's encoder, decoder and their baked table: ``(encoder, decoder, table)``
    (``cfg`` is the harness's to tie off). tANS: the two-state builds. rANS: both at the encoder build's
    states (16, ``ENCODER_XN_STATES``, the only ``N`` it builds), the decoder at the encoder's
    ``S = 16, W = P = 8`` (:data:`SMALL_XN`; its ``check_shape`` takes ``P <= S - W``), with
    :data:`PINNED_RANS_TABLE` baked into both."""
    if family == "tans":
        return (small_core("tans-encoder-x2", baked=True), small_core("tans-decoder-x2", baked=True),
                pinned_tans_x2_table())
    states = core_build("rans-encoder-x16").formal.states
    table = pinned_rans_table(states)
    loose, kw = SMALL_XN["rans"]
    codec = RansCodec.of(**loose, states=states)
    enc = core_build("rans-encoder-x16").formal.harness_class(codec, **kw, programmable=True, table=table)
    dec = core_build("rans-decoder-x5").formal.harness_class(codec, **kw, programmable=True, table=table,
                                                             block_crc=False)
    return enc, dec, table


def pinned_tans_x2_table(states: int = 2) -> TansTable:
    """The interleaved tANS harnesses' table: frequencies 13/9/7/3 of ``R = 5`` (next-state bit counts
    1 to 4 all occur), three direct symbols without extra bits and an escape symbol of four codes
    (2 extra bits), the ``fse`` spread; two states (``tans5x2``), or ``states`` (``table_reset`` of the
    one-state builds: 1)."""
    loose, kw = SMALL_XN["tans"]
    ct = CodeTable((0, 1, 2), (3, 4, 5, 6), 0, (13, 9, 7, 3), loose["table_log"])
    return TansTable(ct, TansParams(**loose, max_symbols=kw["max_symbols"], states=states), "fse")


#: Clocks after the table's by which ``encoder_step``'s scenario has finished (measured).
ENCODER_STEP_CLOCKS = 20
#: Clocks after the table's by which ``decoder_step``'s scenario has finished (measured).
DECODER_STEP_CLOCKS = 14
#: Clocks after the table's by which the rANS step lemmas' scenarios have finished (measured).
RANS_DECODER_STEP_CLOCKS = 10
RANS_ENCODER_STEP_CLOCKS = 9


#: Harnesses that write a pinned table in their first clocks (the depth counts from after it).
TABLE_FIRST = (("progress", "rans-decoder"), ("stream_rules", "rans-encoder"), ("progress", "tans-decoder"))


def table_write_clocks(core: str) -> int:
    """Clocks a harness takes to write a whole table into ``core``: one entry per clock."""
    return 1 << SMALL["tans"]["table_log"] if core.startswith("tans") else 0      # rANS: baked


#: ``table_reset`` (tables survive reset, every build): the pairs its command codes (symbol, extra bits of
#: the pinned tables' code table: three direct symbols and an escape symbol of 2 extra bits; five pairs,
#: so both lanes of a two-state build run twice or more), the clocks after the last table write in which
#: the reset is free, and the clocks each build's command takes after that, at most (measured).
RESET_PAIRS = ((3, 0, 2, 1, 3), (1, 0, 0, 0, 3))
RESET_WINDOW = 3
RESET_SCENARIO_CLOCKS = {"tans-decoder": 20, "tans-encoder": 20, "rans-decoder": 30, "rans-encoder": 30,
                         "tans-decoder-x2": 24, "tans-encoder-x2": 24, "rans-decoder-x5": 36, "rans-encoder-x16": 50}


def reset_table(core: str):
    """The legal table ``table_reset`` writes into ``core`` (the golden model's, for the core's shape)."""
    family = core.split("-")[0]
    states = core_build(core).formal.states
    if family == "tans":
        return pinned_tans_x2_table(states)
    return pinned_xn_table() if core in XN_BAKED else pinned_rans_table(states)


def reset_clocks(core: str) -> int:
    """The clock by which every run of ``table_reset`` on ``core`` has finished: the table's writes (one
    entry a clock on each ``cfg`` port at once), the reset window, the command."""
    return _reset_writes(core) + RESET_WINDOW + RESET_SCENARIO_CLOCKS[core]


@functools.cache
def _reset_writes(core: str) -> int:
    """Clocks ``table_reset`` writes its table in: the most entries one ``cfg`` port of ``core`` takes."""
    from amaranth.hdl import Fragment
    from ..jobs import cfg_writes
    built = small_core(core)
    writes = cfg_writes(built, [reset_table(core)])
    Fragment.get(built, None)           # (elaborated: the core and its blocks are used, not dropped)
    return max(map(len, writes.values()))


def representative_properties(core: str, table: str = "pinned") -> tuple[str, ...]:
    """The properties of ``core`` that CI's ``--properties representative`` run proves."""
    return tuple(p for p in properties_of(core, table)
                 if p not in NOT_REPRESENTATIVE and (core, p) not in NOT_REPRESENTATIVE_RUNS)
