"""``--dask``: ``compress`` and ``tables`` on a Dask cluster give what they give on this machine
(issue 47, 4; issue 48, 6: ``--workers`` is a local cluster's size, ``--threads`` this machine's).

One local cluster of 2 worker processes serves the module, named by its scheduler's address as a real
cluster would be (the tasks read the checkpoint by its absolute path); one test starts its own with
``--dask local --workers 2`` and checks that it leaves nothing behind."""

from __future__ import annotations

import glob
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from ansforge.analysis import parallel
from ansforge.cli import main
from ansforge.model.llm.checkpoint import SUPPORTED_DTYPES, write_safetensors


@pytest.fixture(scope="module")
def scheduler():
    with parallel.dask_client("local", 2) as client:
        yield client.scheduler.address


def run(capfd, *args) -> tuple[int, str, str]:
    capfd.readouterr()
    status = main([str(a) for a in args])
    out, err = capfd.readouterr()
    return status, out, err


def _stored(dtype: str, values: np.ndarray) -> np.ndarray:
    return values if dtype in SUPPORTED_DTYPES else np.ascontiguousarray(values).view(np.uint8).ravel()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """A small safetensors file of every kind compress codes: a bf16 matrix of two blocks (more than
    2^18 pairs), float32 and float16 ones, fp8, a norm, an int64 tensor stored raw, an empty one."""
    rng = np.random.default_rng(47)
    w = (rng.standard_normal((600, 500)) * 0.02).astype(np.float32)
    bf16 = (w.view(np.uint32) >> 16).astype(np.uint16)
    from ansforge.model.dtypes.quantized import to_fp8

    e4m3, _ = to_fp8(w[:64, :64], "F32", "e4m3")
    path = tmp_path_factory.mktemp("dask") / "mixed.safetensors"
    tensors = {"big.weight": ("BF16", bf16), "q.weight": ("F32", w[:100, :70]),
               "k.weight": ("F16", w[:40, :30].astype(np.float16)), "fp8.weight": ("F8_E4M3", e4m3),
               "norm.weight": ("F32", np.ones(70, np.float32)), "position_ids": ("I64", np.arange(12)),
               "empty.weight": ("F16", np.zeros((0, 8), np.float16))}
    write_safetensors(path, [(k, t, v.shape) for k, (t, v) in tensors.items()],
                      lambda i, name: [_stored(*tensors[name])],
                      metadata={"format": "pt"})
    return path


def test_compress_on_its_own_local_cluster_is_byte_identical_and_leaves_nothing(stories, tmp_path, capfd):
    here, there = tmp_path / "here.ansf", tmp_path / "there.ansf"
    assert run(capfd, "compress", "--model", stories, "-o", here, "--threads", "1")[0] == 0
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "ansforge-dask-*")))
    status, out, err = run(capfd, "compress", "--model", stories, "-o", there, "--dask", "local", "--workers", "2")
    assert status == 0, err
    assert "49 independent blocks" in out
    assert there.read_bytes() == here.read_bytes()
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "ansforge-dask-*"))) <= before  # scratch removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here.ansf", "there.ansf"]


@pytest.mark.parametrize("options", [[], ["--layout", "tensor"], ["--context"], ["--pairs", "e5m2"]],
                         ids=["blocks", "tensor", "context", "fp8"])
def test_compress_on_a_scheduler_is_byte_identical(options, scheduler, mixed, tmp_path, capfd):
    here, there = tmp_path / "here.ansf", tmp_path / "there.ansf"
    status, _, err = run(capfd, "compress", "--model", mixed, "-o", here, "--threads", "1", *options)
    assert status == 0, err
    status, _, err = run(capfd, "compress", "--model", mixed, "-o", there, "--dask", scheduler, *options)
    assert status == 0, err
    assert there.read_bytes() == here.read_bytes()


def test_compress_a_tensor_it_refuses_says_so_as_here(scheduler, tmp_path, capfd):
    w = np.ones((8, 8), np.float32)
    w[3, 4] = np.nan
    bad = tmp_path / "nan.safetensors"
    save_file({"a.weight": np.zeros((4, 4), np.float32), "b.weight": w}, str(bad))
    here = run(capfd, "compress", "--model", bad, "-o", tmp_path / "x.ansf")
    there = run(capfd, "compress", "--model", bad, "-o", tmp_path / "y.ansf", "--dask", scheduler)
    assert here[0] == there[0] == 2
    assert here[2] == there[2] and len(there[2].splitlines()) == 1 and "'b.weight'" in there[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nan.safetensors"]


def test_tables_on_a_scheduler_gives_the_same_figures(scheduler, stories, tmp_path, capfd):
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    common = ["tables", "--model", stories, "--general", "zstd", "--per-matrix"]
    a = run(capfd, *common, "--threads", "1", "--json", here)
    b = run(capfd, *common, "--dask", scheduler, "--json", there)
    assert a[0] == b[0] == 0, b[2]
    x, y = json.loads(here.read_text()), json.loads(there.read_text())
    assert y["rows"] == x["rows"] and y["per_matrix"] == x["per_matrix"] and y["normalizer"] == x["normalizer"]
    assert "rANS" in a[1] and b[1].splitlines()[:20] == a[1].splitlines()[:20]


@pytest.mark.parametrize("verb", ["compress", "tables"])
@pytest.mark.parametrize("options,names", [
    (["--workers", "2"], ["--workers", "--dask local"]),
    (["--dask", "local", "--threads", "2"], ["--threads", "--dask"]),
    (["--dask", "local", "--workers", "0"], ["--workers"]),
    (["--dask", "tcp://127.0.0.1:1", "--workers", "2"], ["--workers", "tcp://127.0.0.1:1"]),
    (["--dask", "tcp://127.0.0.1:1"], ["tcp://127.0.0.1:1", "no Dask scheduler answered"]),
    (["--dask", "not an address::"], ["not an address::"]),
], ids=["workers-alone", "threads", "workers-0", "workers-remote", "unreachable", "bad-address"])
def test_mistakes_are_one_line(verb, options, names, stories, tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(parallel, "CONNECT_TIMEOUT", 1.0)
    out = ["-o", tmp_path / "x.ansf"] if verb == "compress" else []
    status, _, err = run(capfd, verb, "--model", stories, *out, *options)
    assert status == 2
    assert len(err.splitlines()) == 1 and err.startswith("ansforge: error: "), err
    for name in names:
        assert name in err, (name, err)
    assert list(tmp_path.iterdir()) == []


def test_compress_refuses_the_model_layout_on_a_cluster(stories, tmp_path, capfd):
    for extra in (["--layout", "model"], ["--checkpoint-interval", "4096"]):
        status, _, err = run(capfd, "compress", "--model", stories, "-o", tmp_path / "x.ansf", "--dask", "local",
                             *extra)
        assert status == 2 and len(err.splitlines()) == 1 and "model layout" in err, err


def test_without_dask_installed_it_says_what_to_install(stories, tmp_path, capfd, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)       # `import distributed` fails as if absent
    for verb, out in (("compress", ["-o", tmp_path / "x.ansf"]), ("tables", [])):
        status, _, err = run(capfd, verb, "--model", stories, *out, "--dask", "local")
        assert status == 2 and len(err.splitlines()) == 1 and "pip install 'ansforge[dask]'" in err, err
    assert list(tmp_path.iterdir()) == []
