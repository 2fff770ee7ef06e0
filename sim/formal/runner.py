"""Running the proofs: :func:`run_property` (one property on one core, its cover, its
counterexample) and :func:`prove` (every property of the cores, and with ``mutants=True`` every mutant
against the property expected to catch it), in parallel threads, longest runs first.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Fragment

from .mutants import MUTANT_SETS, MUTANTS, NotInHarness, mutate
from .params import (CORES, INTERLEAVED_CORES, ALL_PROPERTIES, COMMANDS_COVER_DEPTH, LEMMA_COVER_DEPTH, LEMMA_DEPTH, MIN_DEPTH,
                     NOT_REPRESENTATIVE, NOT_REPRESENTATIVE_RUNS, SAT_TIMEOUT, STEP_LEMMAS, TABLES, TABLE_FIRST, XN_BAKED, properties_of, sat_run,
                     table_write_clocks)
from .report import MutantResult, PropertyResult, ProveReport
from .registry import build_bench, default_depth, engine_of, mode_of
from .solvers import (SAT_COVERS, assertion_text, check_tools, first_violation, induct_by_sat, run_sat, run_sby, sat_cover,
                      sat_induct, sby_cover)


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
    if depth is None or prop in ("round_trip", "detection", "table_reset", *STEP_LEMMAS, *(p for p in LEMMA_DEPTH if p != "composition")):
        depth = default_depth(core, prop, mutant, table)
    elif (prop, core) in TABLE_FIRST:
        depth += table_write_clocks(core)
    if prop not in STEP_LEMMAS:
        # (A step lemma's depth is its scenario's, from any state: not the port harnesses' head words.)
        depth = max(depth, MIN_DEPTH.get(core, 1))
    mode = mode_of(core, prop)
    lemma_bmc = mutant is not None and (prop in LEMMA_COVER_DEPTH or induct_by_sat(core, prop))
    if lemma_bmc:
        # A lemma whose induction closes below the clocks a bug needs to show from reset: its mutant
        # runs are bounded checks from reset at the cover depth, by yosys's own sat solver (z3 took
        # 148 s to find the encoder_pipeline mutant's counterexample at clock 3, MiniSat 1.5 s), which
        # also gives the clock and the assertion (yosys's induction gives neither).
        depth = max(LEMMA_COVER_DEPTH.get(prop, LEMMA_DEPTH[prop]), MIN_DEPTH.get(core, 1))
    b = build_bench(core, prop, mutant, table, depth)
    fragment = Fragment.get(b.m, b.platform)
    try:
        mutate(fragment, mutant)
    except NotInHarness as e:
        if prop == MUTANTS[mutant].expected:
            raise
        # A property whose harness does not hold the mutant's block (a lemma of another block) cannot
        # see it: nothing to run.
        return PropertyResult(core, prop, "skipped", depth, 0.0, mutant, detail=str(e))
    text = rtlil.convert(fragment, ports=[b.cd.clk], name="top", platform=b.platform)
    root = Path(tempfile.mkdtemp(prefix="prove-", dir=workdir))
    try:
        (root / "top.il").write_text(text)
        if prop in STEP_LEMMAS or lemma_bmc or sat_run(core.split("-")[0], prop, table, core):
            timeout = SAT_TIMEOUT if timeout is None else timeout
            result = PropertyResult(core, prop, "error", depth, 0.0, mutant, engine="sat")
            trace = None if vcd_dir is None else Path(vcd_dir) / f"{core}.{prop}{'.' + mutant if mutant else ''}.vcd"
            # Covers: :func:`cover_by_z3`.
            z3_cover = cover and cover_by_z3(core, prop, table)
            run_sat(root, b, depth, timeout, result, trace=trace, cover=cover and not z3_cover, mutant=mutant is not None,
                    cover_depth=max(depth, COMMANDS_COVER_DEPTH.get(core, 0)) if prop == "commands" else None)
            if z3_cover and result.status == "bounded":
                sby_cover(root, b, depth, timeout, result)
            if prop in STEP_LEMMAS and result.status == "bounded":
                # A step lemma: every starting state is in the harness and its scenario ends (an
                # asserted deadline) within the depth, so no longer trace can fail it.
                result.status = "proved"
                result.detail = ("step lemma, every starting state (docs/formal.md, "
                                 + ("Round 8" if core.startswith("rans") else "Round 6") + "); "
                                 "the composition to sequences is argued there, not checked here")
            return result
        timeout = 900 if timeout is None else timeout
        if induct_by_sat(core, prop):
            result = PropertyResult(core, prop, "error", depth, 0.0, mutant, engine="sat")
            sat_induct(root, depth, timeout, result)
            if result.status == "proved":
                result.detail = "lemma of the round trip's composition, k-induction (docs/formal.md, Round 7)"
                if cover:
                    sby_cover(root, b, max(depth, LEMMA_COVER_DEPTH.get(prop, 0)), timeout, result)
            return result
        verdict, log, seconds = run_sby(root, mode, depth, engine_of(core, prop), timeout)
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
            # (SymbiYosys leaves " step N" out of the line for a failure at step 0)
            hit = re.search(r"failed assertion (\S+) at (\S+?)(?: step (\d+))?$", log, re.MULTILINE)
            trace = root / f"job_{mode}" / "engine_0" / "trace.vcd"
            if hit:
                result.step = int(hit.group(3) or 0)
                result.assertion = assertion_text(hit.group(2)).replace("{name}", "/".join(b.checked) or "o")
            if b.latched and trace.exists():
                # The first latched check to fail names the property's clock of failure.
                first = first_violation(trace.read_text(), len(b.latched))
                if first is not None:
                    result.step, result.assertion = first[0], b.latched[first[1]]
            if vcd_dir is not None and trace.exists():
                dest = Path(vcd_dir) / f"{core}.{prop}{'.' + mutant if mutant else ''}.vcd"
                shutil.copyfile(trace, dest)
                result.trace = str(dest)
        else:
            result.detail = (log.strip().splitlines() or ["no output"])[-1][:300]
        if cover and result.status in ("proved", "bounded"):
            (sat_cover if (core, prop) in SAT_COVERS else sby_cover)(root, b, max(depth, LEMMA_COVER_DEPTH.get(prop, 0)),
                                                                    timeout, result)
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def cover_by_z3(core: str, prop: str, table: str) -> bool:
    """Whether a harness of the ``sat`` runner has its covers sought by SymbiYosys (z3) rather than
    CaDiCaL: with a pinned table z3 reaches them in 1-8 s where yosys ``sat`` + CaDiCaL takes 6-20 s a
    cover (writing the CNF of the whole run for each), measured on the CI run; not for ``commands``
    (z3 took 334 s for the rANS x5 decoder's covers, 549 s for the x16 encoder's, loaded), the step
    lemmas (a symbolic table), nor the interleaved round trips (the two-state tANS pair's two covers:
    z3 39 s, CaDiCaL 14 s; the 16-state rANS pair runs 92 clocks), nor ``table_reset`` (the one-state tANS
    decoder's cover: z3 142 s)."""
    return (table == "pinned" and prop not in STEP_LEMMAS and prop not in ("commands", "table_reset")
            and not (prop == "round_trip" and core in INTERLEAVED_CORES) and (core, prop) not in SAT_COVERS)


#: Rough seconds of one run with its cover (the CI run's JSON, ``--table pinned``, one worker, under
#: load: round trips 12-37 s, detections 18-37 s, the rest 2-5 s): only their order matters.
_COSTS = {"round_trip": 30, "detection": 25, "encoder_step": 40, "decoder_step": 40, "encoder_pipeline": 45,
          "table_reset": 60}


def _cost(core: str, prop: str, mutant: str | None, table: str) -> float:
    """A rough cost of running ``prop`` on ``core`` (with ``mutant``): the order :func:`prove` starts runs in."""
    cost = _COSTS.get(prop, 2)
    if table == "arbitrary" and prop in _COSTS:
        cost *= 10
    if core in XN_BAKED:
        cost += 8
    if core.startswith("tans") and prop == "round_trip":
        cost += 10
    if core.startswith("rans") and prop == "round_trip" and core in INTERLEAVED_CORES:
        cost = 560          # the sixteen-state pair: 255 s and 306 s of covers
    return cost / (2 if mutant else 1)     # a mutant's run stops at its counterexample, and checks no cover


def prove(cores: list[str] | tuple[str, ...] = CORES, *, depth: int | None = None, mutants: bool | str = False,
          vcd_dir: str | Path | None = None, jobs: int | None = None,
          progress=None, properties: list[str] | tuple[str, ...] | None = None, cover: bool = True,
          table: str = "arbitrary", representative: bool = False) -> ProveReport:
    """Prove every property of ``cores`` and, with ``mutants``, check each of their mutants is caught
    (``True`` or ``"all"``: the whole catalogue; a name of :data:`MUTANT_SETS`: that set).

    ``round_trip`` is one harness per coder family (encoder and decoder together): it runs once and is
    reported under both cores of the family when both are asked for. Runs go ``jobs`` at a time
    (default: one per CPU). ``progress`` is called with each finished :class:`PropertyResult`.
    ``properties`` keeps only those (and, with ``mutants``, only the mutants they are meant to catch);
    ``representative`` (CI's run) leaves out :data:`~.params.NOT_REPRESENTATIVE` where ``properties``
    names none.
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
    if mutants is True:
        mutants = "all"
    if mutants and mutants not in MUTANT_SETS:
        raise ValueError(f"mutants must be one of {', '.join(MUTANT_SETS)}, not {mutants!r}")
    t0 = time.perf_counter()
    jobs = jobs or os.cpu_count() or 1
    tasks = []
    seen_rt = {}
    keep = set(properties or ALL_PROPERTIES)
    bad = keep - set(ALL_PROPERTIES)
    if representative and not properties:
        keep -= set(NOT_REPRESENTATIVE)
    if bad:
        raise ValueError(f"property must be one of {', '.join(ALL_PROPERTIES)}, not {', '.join(sorted(bad))}")
    for c in cores:
        # A step lemma asked for by name runs whatever ``table`` (it always holds the arbitrary table).
        for p in properties_of(c, "arbitrary" if properties else table):
            if p not in keep or (representative and not properties and (c, p) in NOT_REPRESENTATIVE_RUNS):
                continue
            # (the family and its state count: tans-decoder-x2 and tans-encoder-x2 share theirs)
            # (the interleaved rANS pair runs at the encoder's 16 states whatever the decoder's build: one)
            key = (c.split("-")[0] + ("-xn" if c in INTERLEAVED_CORES else ""), p) if p == "round_trip" else (c, p)
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

    chosen = set(MUTANT_SETS[mutants]) if mutants else set()
    names = [n for n, mu in MUTANTS.items() if n in chosen and mu.core in cores and mu.expected in keep]

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
