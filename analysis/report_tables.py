"""A Markdown report's figures as data: its sections and their pipe tables, for ``--json``.

``ansforge bench`` writes BENCHMARKS.md; its ``--json`` copy is this module's reading of the same text,
so the two never disagree. A section is a ``#``/``##``/``###`` heading with the tables under it; a
table is its header cells and one list of cells per row (text as written, Markdown included).
"""

from __future__ import annotations

__all__ = ["markdown_tables"]


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [c.strip() for c in inner.split("|")]


def _is_rule(cells: list[str]) -> bool:
    return bool(cells) and all(c and set(c) <= set(":-") for c in cells)


def markdown_tables(text: str) -> list[dict]:
    """``[{"heading", "level", "tables": [{"header": [...], "rows": [[...], ...]}]}]`` for every heading
    of ``text`` (a table before the first heading goes under a heading ``""`` of level 0)."""
    sections: list[dict] = [{"heading": "", "level": 0, "tables": []}]
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            sections.append({"heading": line[level:].strip(), "level": level, "tables": []})
            i += 1
            continue
        if line.lstrip().startswith("|") and i + 1 < len(lines) and _is_rule(_cells(lines[i + 1])):
            header, rows = _cells(line), []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            sections[-1]["tables"].append({"header": header, "rows": rows})
            continue
        i += 1
    return [s for s in sections if s["level"] or s["tables"]]
