"""``ansforge codecs``: every codec name, from the codec registry (``model/coding/registry.py``), joined
with the cores that take each, from the core registry (``hdl/cores.py``)."""

from __future__ import annotations

import argparse

from .common import UsageError, verb, write_json


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", metavar="CODEC", help="only these codec names, one row each")
    p.add_argument("--all", action="store_true", help="every name, one row each (464 rows), instead of the families")


def cores_of(codec) -> dict[str, list[str]]:
    """``{role: [base builds that take codec]}`` (``hdl/cores.py`` :func:`cores_for`)."""
    from ..hdl.cores import ROLES, cores_for

    return {role: [r.name for r in cores_for(codec, role)] for role in ROLES}


def _family_cores(family) -> str:
    """Which base builds take which names of ``family``: ``tans-decoder, tans-encoder`` when they take all
    of it, ``rans-decoder (N = 5..16)`` for part, ``-`` for none."""
    from ..hdl.cores import REGISTRY
    from ..model.coding.registry import ranges_text

    out = []
    for r in REGISTRY:
        if r.base != r.name or r.kind != family.kind:
            continue
        taken = [(b, n) for b in family.bits for n in family.states if r.takes(family.codec(b, n))]
        if not taken:
            continue
        if len(taken) == len(family.bits) * len(family.states):
            out.append(r.name)
            continue
        bits, states = sorted({b for b, _ in taken}), sorted({n for _, n in taken})
        letter = "R" if family.kind == "tans" else "P"
        part = ([f"{letter} = {ranges_text(bits)}"] if bits != list(family.bits) else []) + \
            ([f"N = {ranges_text(states)}"] if states != list(family.states) else [])
        if len(taken) != len(bits) * len(states):      # not a product of ranges: name them
            part = [", ".join(family.name(b, n) for b, n in taken)]
        out.append(f"{r.name} ({'; '.join(part)})")
    return ", ".join(out) or "-"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


@verb("codecs", _arguments, help="list every codec name: parameters, current or legacy, speed, cores",
      description="Every codec name --codec takes, from the codec registry (model/coding/registry.py): its "
                  "family and parameters, whether ansforge writes it (current) or only reads files of it "
                  "(legacy, a parameter set of its own name), its software speed class, and the cores that "
                  "take it (hdl/cores.py). The default format and the paper's configuration are marked.",
      json="also write every name (parameters, speed, cores) as JSON", force="replace an existing JSON file")
def codecs(args: argparse.Namespace) -> int:
    from ..model.coding.registry import (CONSTRICTION, DEFAULT_FORMAT, FAMILIES, PAPER, SPEEDS, entries, entry)
    from ..model.errors import ConfigError

    try:
        chosen = [entry(n) for n in args.names] if args.names else entries()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    print(f"default format: {DEFAULT_FORMAT}; the paper's (Table 1, Table 3; one state): {PAPER['tans']}, "
          f"{PAPER['rans']}; constriction's: {CONSTRICTION}")
    if args.names or args.all:
        rows = [["name", "kind", "parameters", "status", "speed", "decoder cores", "encoder cores", ""]]
        for e in chosen:
            c = e.codec()
            p = c.params
            par = (f"R = {p.table_log}, W = {p.word_bits}" if c.kind == "tans"
                   else f"S = {p.state_bits}, W = {p.word_bits}, P = {p.precision_bits}") + f", N = {c.states}"
            cores = cores_of(c)
            rows.append([e.name, e.kind, par, e.status, e.speed, ", ".join(cores["decoder"]) or "-",
                         ", ".join(cores["encoder"]) or "-", ", ".join(e.roles)])
    else:
        rows = [["names", "kind", "parameters", "N", "status", "speed", "cores"]]
        for f in FAMILIES:
            from ..model.coding.registry import ranges_text, speed_of

            speeds = sorted({speed_of(f.kind, n, f.params(f.bits[0], n)) for n in f.states}, key=list(SPEEDS).index)
            rows.append([f.pattern, f.kind, f.parameters_text(), "1" if f.states == (1,) else ranges_text(f.states),
                         f.status, ", ".join(speeds), _family_cores(f)])
    for line in _table(rows):
        print(line)
    print("speed: " + "; ".join(f"{k}: {v}" for k, v in SPEEDS.items()))
    if not (args.names or args.all):
        print("legacy: ansforge reads these files as written; a legacy name writes the old parameters "
              "(`ansforge codecs --all` lists every name)")
    if args.json:
        from ..hdl.cores import REGISTRY

        doc = {"verb": "codecs", "default": DEFAULT_FORMAT, "paper": PAPER, "constriction": CONSTRICTION,
               "speeds": SPEEDS,
               "families": [{"pattern": f.pattern, "kind": f.kind, "status": f.status, "preset": f.preset,
                             "parameters": f.parameters_text(), "states": list(f.states), "bits": list(f.bits),
                             "text": f.text, "cores": _family_cores(f)} for f in FAMILIES],
               "core_builds": [r.name for r in REGISTRY if r.base == r.name],
               "codecs": [{**e.to_json(), "cores": cores_of(e.codec())} for e in chosen]}
        write_json(args, args.json, doc)
    return 0
