"""``--json`` on the verbs whose report is text first: ``demo`` (its Table 1 rows and cores) and ``bench``
(BENCHMARKS.md's sections and tables, read from the very text it wrote)."""

from __future__ import annotations

import json
from pathlib import Path

from ansforge.analysis.report_tables import markdown_tables
from ansforge.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_demo_json_holds_the_table_rows_it_printed(tmp_path, capsys):
    out = tmp_path / "demo.json"
    assert main(["demo", "--no-cores", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["verb"] == "demo" and doc["cores"] == [] and doc["bit_exact"] is True
    assert len(doc["tables"]) == 2                       # stories260K and MiniLM's shipped histograms
    for table in doc["tables"]:
        assert table["model"] in text
    assert doc["paper_llama2_7b_bits_per_weight"]


def test_bench_json_is_the_markdown_it_wrote(tmp_path, monkeypatch, capsys):
    import ansforge.analysis.bench as bench

    report = "# ansforge benchmarks\n\n## A\n\n| x | y |\n|---|--:|\n| 1 | 2 |\n| 3 | 4 |\n\n### B\n\ntext\n"
    monkeypatch.setattr(bench, "run_bench", lambda **_: report)
    md, js = tmp_path / "B.md", tmp_path / "B.json"
    assert main(["bench", "--only", "prove", "-o", str(md), "--json", str(js)]) == 0
    assert md.read_text() == report
    doc = json.loads(js.read_text())
    assert doc["verb"] == "bench" and doc["only"] == ["prove"] and doc["output"] == str(md)
    assert doc["sections"] == [{"heading": "ansforge benchmarks", "level": 1, "tables": []},
                               {"heading": "A", "level": 2, "tables": [{"header": ["x", "y"],
                                                                        "rows": [["1", "2"], ["3", "4"]]}]},
                               {"heading": "B", "level": 3, "tables": []}]


def test_every_table_of_benchmarks_md_is_read():
    text = (ROOT / "BENCHMARKS.md").read_text()
    rules = sum(1 for line in text.splitlines() if line.startswith("|") and set(line) <= set("|-: "))
    sections = markdown_tables(text)
    tables = [t for s in sections for t in s["tables"]]
    assert len(tables) == rules
    assert all(len(row) == len(t["header"]) for t in tables for row in t["rows"])


def test_bench_only_replaces_its_sections_in_an_existing_report(tmp_path, monkeypatch, capsys):
    """``bench --only S -o F --force`` on an existing report replaces section S in it and keeps the
    others where they were; the header says which section was regenerated and by what command; without
    ``--force`` the report is left as it was."""
    import ansforge.analysis.bench as bench

    old = ("# ansforge benchmarks\n\nMachine: old\n\n## Table 1 on MiniLM\n\nT1\n\n"
           "## Formal proofs (`ansforge prove --all --mutants`)\n\nOLD PROOFS\n\n## NumPy llama: x\n\nLLAMA\n")
    fresh = "# ansforge benchmarks\n\nMachine: new\n\n## Formal proofs (`ansforge prove --all --mutants`)\n\nNEW PROOFS\n"
    monkeypatch.setattr(bench, "run_bench", lambda **_: fresh)
    md = tmp_path / "B.md"
    md.write_text(old)
    assert main(["bench", "--only", "prove", "-o", str(md)]) == 2
    assert md.read_text() == old
    capsys.readouterr()
    assert main(["bench", "--only", "prove", "-o", str(md), "--force"]) == 0
    assert "updated prove in" in capsys.readouterr().out
    text = md.read_text()
    assert text.index("T1") < text.index("NEW PROOFS") < text.index("LLAMA") and "OLD PROOFS" not in text
    assert "Machine: old" in text and "Machine: new" not in text
    assert sum(line.startswith("Section `prove` regenerated") for line in text.splitlines()) == 1
    assert main(["bench", "--only", "prove", "-o", str(md), "--force"]) == 0     # again: still one such line
    assert sum(line.startswith("Section `prove` regenerated") for line in md.read_text().splitlines()) == 1


def test_every_section_heading_is_one_the_merge_finds():
    """Each section's heading in the code begins with its :data:`SECTION_HEADINGS` prefix, and the
    prefixes tell the sections apart."""
    import ansforge.analysis.bench as bench

    assert set(bench.SECTION_HEADINGS) == set(bench.SECTIONS)
    prefixes = list(bench.SECTION_HEADINGS.values())
    assert not any(a != b and b.startswith(a) for a in prefixes for b in prefixes)
    source = "".join((ROOT / "analysis" / f).read_text() for f in ("bench.py", "board.py", "bench_7b.py", "speed.py"))
    for prefix in prefixes:
        assert f'"{prefix}' in source or f'f"{prefix}' in source, prefix
