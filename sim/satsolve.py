"""Solve a DIMACS CNF with CaDiCaL (``python-sat``): the solver step of ``ansforge prove``'s ``sat`` runner.

yosys's ``sat -seq N -prove-asserts -set-assumes -dump_cnf F`` writes the whole bounded problem as
CNF: every clock 1..N of the design unrolled, the ``$assume`` cells and initial values as clauses,
and one unit clause saying "some ``$assert`` fails in some clock". So UNSAT means every assertion
holds for every trace of N clocks, SAT means a counterexample exists. yosys's own solver (MiniSat
2.2) takes minutes on the arbitrary-table round trip; CaDiCaL, from PyPI, is the one run here.

Run as ``python -m ansforge.sim.satsolve FILE [SOLVER]`` (a subprocess, so that a timeout can end
it); it prints ``SAT`` or ``UNSAT`` and exits 10 or 20 (the SAT-competition codes).
"""

from __future__ import annotations

import sys

__all__ = ["SOLVER", "read_dimacs", "solve", "main"]

#: The python-sat solver name (CaDiCaL 1.9.5).
SOLVER = "cadical195"


def read_dimacs(path: str) -> list[list[int]]:
    """The clauses of a DIMACS CNF file (comment and ``p`` lines skipped; yosys writes them first).

    Parsed with numpy (one C-level pass over the text): a Python loop over the 2.5 M clauses of the
    pinned tANS round trip took 5.5 s of its 12 s; this takes under 1 s."""
    import numpy as np

    with open(path, "rb") as f:
        text = f.read()
    body = text
    while body[:1] in (b"c", b"p"):                 # the header lines
        _, _, body = body.partition(b"\n")
    lits = np.fromstring(body, dtype=np.int64, sep=" ") if body.strip() else np.zeros(0, np.int64)
    ends = np.flatnonzero(lits == 0)
    starts = np.concatenate([[0], ends[:-1] + 1])
    lengths = ends - starts
    # Clauses of one length at a time, as one 2-D array each (``tolist`` in C): their order does not
    # matter to a solver.
    clauses = []
    for n in np.unique(lengths).tolist():
        at = starts[lengths == n]
        clauses += lits[at[:, None] + np.arange(n)].tolist()
    return clauses


def solve(path: str, solver: str = SOLVER) -> bool:
    """Whether the CNF in ``path`` is satisfiable."""
    from pysat.solvers import Solver

    with Solver(name=solver, bootstrap_with=read_dimacs(path)) as s:
        return bool(s.solve())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sat = solve(argv[0], *argv[1:2])
    print("SAT" if sat else "UNSAT", flush=True)
    return 10 if sat else 20


if __name__ == "__main__":
    sys.exit(main())
