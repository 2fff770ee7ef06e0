"""Issue 48, deliverable 4: Unix manners, in real child processes.

* A closed pipe (``ansforge inspect F | head``) ends quietly, exit status 0.
* Ctrl-C (SIGINT to the process, or to its whole process group as a terminal sends it) exits 130 with
  one line; SIGTERM exits 143 with one line; neither leaves a temporary file (in the working folder
  or in ``$TMPDIR``) or a partial output.
* ``--quiet`` (and the old ``--no-progress``) silences the progress a terminal would show; ansforge
  writes no colour, so ``NO_COLOR`` has nothing to turn off (checked: no SGR sequence on a terminal).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.errors.conftest import snapshot


@pytest.fixture
def folder(workdir, stories, tmp_path) -> Path:
    """The working folder with the model ``m.bin`` and its container ``s.ansf``."""
    from ansforge.model.coding.container import compress_checkpoint

    shutil.copy(stories, workdir / "m.bin")
    compress_checkpoint(workdir / "m.bin", workdir / "s.ansf", "tans8")
    return workdir


def _cli(*args) -> list[str]:
    return [sys.executable, "-m", "ansforge", *map(str, args)]


# --------------------------------------------------------------------------------------------------
# closed pipes


def test_a_pipe_to_head_ends_quietly(folder):
    r = subprocess.run(["bash", "-c", "set -o pipefail; " + " ".join(_cli("inspect", "s.ansf")) + " | head -1"],
                       capture_output=True, text=True, cwd=folder, timeout=120)
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    assert r.stdout.startswith("s.ansf: ansforge container") and len(r.stdout.splitlines()) == 1


@pytest.mark.parametrize("args", [("inspect", "s.ansf"), ("inspect", "s.ansf", "--tensor", "tok_embeddings.weight"),
                                  ("inspect", "--help"), ("--help",)],
                         ids=["listing", "values", "verb help", "help"])
def test_a_pipe_closed_before_the_output_ends_quietly(folder, args):
    """The reader is gone before ansforge writes anything: every write meets EPIPE."""
    before = snapshot(folder)
    with subprocess.Popen(_cli(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=folder) as p:
        p.stdout.close()
        err = p.stderr.read().decode()
        rc = p.wait(timeout=120)
    assert rc == 0 and err == "", (rc, err)
    assert snapshot(folder) == before


# --------------------------------------------------------------------------------------------------
# interrupts


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


@pytest.mark.parametrize("threads,group,sig,status,line", [
    (1, False, signal.SIGINT, 130, "ansforge: interrupted"),
    (2, True, signal.SIGINT, 130, "ansforge: interrupted"),
    (2, False, signal.SIGTERM, 143, "ansforge: terminated"),
], ids=["ctrl-c in-process", "ctrl-c to the process group with workers", "sigterm with workers"])
def test_an_interrupted_table_leaves_nothing(folder, minilm, tmp_path, threads, group, sig, status, line):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    before = snapshot(folder)
    # MiniLM's first layer (about 12 s of work on a fast machine): stories260K's Table 1 can finish within
    # the wait below there, and a signal that lands while the interpreter exits ends it by SIGINT itself.
    p = subprocess.Popen(_cli("tables", "--model", minilm, "--include", "encoder.layer.0.*",
                              "--exclude", "*LayerNorm*", "--json", "t.json", "--markdown", "t.md",
                              "--threads", threads),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder,
                         env={**os.environ, "TMPDIR": str(tmp)}, start_new_session=True)
    # Wait until the table is being computed (past the imports): its workers exist, or it has used
    # more CPU than starting up takes.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        if (threads > 1 and _children(p.pid)) or (threads == 1 and _cpu_seconds(p.pid) > 1.6):
            break
        time.sleep(0.05)
    time.sleep(0.3)
    assert p.poll() is None, "the table finished before it could be interrupted"
    if group:
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == status, (p.returncode, err)
    assert err.splitlines() == [line], err
    assert snapshot(folder) == before          # no partial t.json / t.md, no temporary file
    time.sleep(0.2)                            # (the workers' own exits)
    assert list(tmp.iterdir()) == []


# --------------------------------------------------------------------------------------------------
# --quiet, NO_COLOR

SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("quiet", [[], ["--quiet"], ["-q"], ["--no-progress"]],
                         ids=["progress", "--quiet", "-q", "--no-progress (old)"])
def test_quiet_silences_the_progress_on_a_terminal(folder, tmp_path, quiet, on_a_terminal):
    r = on_a_terminal("compress", "--model", folder / "m.bin", "-o", tmp_path / "c.ansf", *quiet)
    out, err, rc = r.stdout, r.stderr, r.status
    assert rc == 0 and out.startswith(f"wrote {tmp_path / 'c.ansf'}")
    if quiet:
        assert err == "", err
    else:
        assert "compress (tans8x16" in err and not SGR.search(err)     # progress (the default codec), and no colour


def test_generate_quiet_prints_only_the_tokens(folder, on_a_terminal):
    r = on_a_terminal("generate", "--model", folder / "m.bin", "--steps", "3", "--temperature", "0",
                      "--ids", "--quiet")
    out, err, rc = r.stdout, r.stderr, r.status
    assert rc == 0 and err == "" and len(out.split()) == 3


def test_no_color_is_honoured(folder, monkeypatch, tmp_path, on_a_terminal):
    monkeypatch.setenv("NO_COLOR", "1")
    r = on_a_terminal("compress", "--model", folder / "m.bin", "-o", tmp_path / "c.ansf")
    assert r.status == 0 and not SGR.search(r.stdout + r.stderr)
