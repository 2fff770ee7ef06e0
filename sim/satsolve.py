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
    """The clauses of a DIMACS CNF file (comment and ``p`` lines skipped; yosys writes one clause a line)."""
    clauses = []
    with open(path) as f:
        for line in f:
            if line[:1] in ("c", "p", "\n", ""):
                continue
            lits = [int(t) for t in line.split()]
            if lits and lits[-1] == 0:
                lits.pop()
            clauses.append(lits)
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
