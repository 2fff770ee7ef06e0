"""The contract of a mistake on the command line, checked the same way for every case.

A case runs ``ansforge ARGS`` in a working folder of its own (the test's files are made there first)
and asserts:

* the documented exit status (2 for a mistake, 0 for a closed pipe, 130 for an interrupt);
* exactly one line on standard error, ``ansforge: ...``, naming each of the given words (the file,
  option or value at fault);
* nothing the user had changed: every file of the working folder has the checksum it had before;
* nothing left behind: no new file or folder in the working folder (temporary files included).

``mistake(...)`` runs the command in this process (``ansforge.cli.main``, output captured at the file
descriptors) unless ``process=True`` asks for a child process: signals, pipes and what only a fresh
interpreter shows need one.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Outcome:
    """What one run printed and returned."""

    status: int
    stdout: str
    stderr: str

    @property
    def line(self) -> str:
        """The single line on standard error."""
        return self.stderr.strip()


def snapshot(folder: Path) -> dict[str, str]:
    """Every file and folder under ``folder``: its relative path and the SHA-256 of its bytes
    (``"dir"`` for a folder)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        out[rel] = "dir" if p.is_dir() and not p.is_symlink() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run_in_process(args, capfd) -> Outcome:
    from ansforge.cli import main

    capfd.readouterr()
    try:
        status = main([str(a) for a in args])
    except SystemExit as exc:      # argparse's own exits (--help, a parse error)
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    out, err = capfd.readouterr()
    return Outcome(status, out, err)


def run_in_child(args, cwd: Path, stdin: str | None = None, env: dict | None = None) -> Outcome:
    r = subprocess.run([sys.executable, "-m", "ansforge", *map(str, args)], capture_output=True, text=True,
                       cwd=cwd, timeout=600, input=stdin, env={**os.environ, **(env or {})})
    return Outcome(r.returncode, r.stdout, r.stderr)


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """The case's working folder (the current directory while it runs)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def mistake(workdir, capfd):
    """``mistake(*args, status=2, names=(), process=False)``: run ``ansforge ARGS`` in :func:`workdir`
    and assert the contract above; returns the :class:`Outcome`."""

    def run(*args, status: int = 2, names=(), process: bool = False, env: dict | None = None) -> Outcome:
        before = snapshot(workdir)
        outcome = run_in_child(args, workdir, env=env) if process else run_in_process(args, capfd)
        assert outcome.status == status, (args, outcome)
        if status != 0:
            lines = outcome.stderr.splitlines()
            assert len(lines) == 1, (args, outcome.stderr)
            assert lines[0].startswith("ansforge: "), lines
            for word in names:
                assert str(word) in lines[0], (word, lines[0])
        after = snapshot(workdir)
        changed = {k for k in before.keys() & after.keys() if before[k] != after[k]}
        assert not changed, ("input changed", args, changed)
        assert after.keys() == before.keys(), ("left behind or removed", args,
                                               sorted(after.keys() ^ before.keys()))
        return outcome

    return run
