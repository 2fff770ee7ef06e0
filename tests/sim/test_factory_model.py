"""The token-factory bandwidth model (§4.7) and ``ansforge factory``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ansforge.analysis.factory import PAPER_EXAMPLE, FactoryModel, measured_ratio
from ansforge.model.errors import ConfigError


def test_the_papers_example_within_one_percent():
    m = PAPER_EXAMPLE
    assert abs(m.bandwidth(shared=True, compressed=True) / 92e9 - 1) < 0.01          # "~92 Gbytes/s"
    assert abs(m.bandwidth(shared=False, compressed=False) / 1.4e12 - 1) < 0.01      # "1.4 Tbytes/s"
    assert m.bandwidth(shared=True, compressed=False) == pytest.approx(140e9)        # "14*10 = 140 Gbytes/s"
    assert m.total_tokens_per_s == 100
    assert m.pairs_per_s == pytest.approx(7e10) and m.lanes == 140                  # 70 G pairs/s at 500 MHz


def test_cli_reproduces_the_example_and_writes_json(tmp_path):
    out = tmp_path / "f.json"
    r = subprocess.run([sys.executable, "-m", "ansforge", "factory", "--params", "7e9", "--bytes-per-weight", "2",
                        "--ratio", "0.66", "--processors", "10", "--tokens-per-s", "10", "--json", str(out),
                        "--plot", str(tmp_path / "f.png")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "1400.0 GB/s" in r.stdout and "92.4 GB/s" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["bandwidth_both"] == pytest.approx(92.4e9) and doc["bandwidth_neither"] == pytest.approx(1.4e12)
    assert (tmp_path / "f.png").stat().st_size > 10_000
    again = subprocess.run([sys.executable, "-m", "ansforge", "factory", "--json", str(out)], capture_output=True,
                           text=True)
    assert again.returncode == 2 and "file exists" in again.stderr


def test_measured_ratio_is_the_tables_bits_per_weight(stories):
    ratio, source = measured_ratio(stories, "tans8")
    assert 0.6 < ratio < 0.7 and "tANS 8 bits" in source
    from ansforge.analysis.table1 import compute_table1
    t = compute_table1(stories, general=[], constriction=False, codecs=["tans8"], progress=False)
    assert ratio == pytest.approx(t.row("tANS 8 bits").bits_per_weight / 16)


@pytest.mark.parametrize("kw,match", [
    ({"ratio": 1.5}, "--ratio is the compressed size over the raw size"),
    ({"ratio": 0.0}, "--ratio is the compressed size"),
    ({"processors": 0}, "--processors must be positive, not 0"),
    ({"processors": 2.5}, "--processors must be a whole number"),
    ({"params": float("nan")}, "--params must be positive"),
    ({"tokens_per_s": -1}, "--tokens-per-s must be positive, not -1"),
])
def test_invalid_parameters_name_the_option(kw, match):
    with pytest.raises(ConfigError, match=match):
        FactoryModel(**{"params": 7e9, **kw})
