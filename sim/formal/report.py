"""The results of the proofs: one :class:`PropertyResult` per run (verdict, depth, seconds, cover,
counterexample), :class:`MutantResult` per mutant, and :class:`ProveReport` (text table and JSON).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field




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
