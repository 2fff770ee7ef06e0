"""README.md, command by command: what it tells a newcomer to run works as written.

* The two commands on top and the prerequisites are what CI (``.ci/run``) runs, line for line; the
  installs they ask for are satisfied here (every requirement of the named extras, ``pip check``), and
  the Debian tools they name are on PATH. ``ansforge demo`` itself runs in ``test_cli.py``.
* Every ``$ command`` example runs as written from the checkout, and its output shows what README shows
  (``...`` elides; speeds differ from run to run).
* Every option of every verb's synopsis in the table of verbs exists in that verb's parser.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from ansforge.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text().splitlines()


def _blocks() -> list[list[str]]:
    """README's fenced code blocks, as lists of lines (indentation of list items removed)."""
    blocks, cur = [], None
    for line in README.splitlines():
        if line.strip().startswith("```"):
            if cur is None:
                cur, indent = [], len(line) - len(line.lstrip())
            else:
                blocks.append(cur)
                cur = None
        elif cur is not None:
            cur.append(line[indent:] if line[:indent].isspace() else line)
    return blocks


def _examples() -> list[tuple[str, list[str]]]:
    """``$ command`` lines (with ``\\`` continuations) and the output README shows under each."""
    out = []
    for block in _blocks():
        i = 0
        while i < len(block):
            if not block[i].startswith("$ "):
                i += 1
                continue
            cmd = block[i][2:]
            while cmd.endswith("\\"):
                i += 1
                cmd = cmd[:-1].rstrip() + " " + block[i].strip()
            i += 1
            shown = []
            while i < len(block) and not block[i].startswith("$ "):
                shown.append(block[i])
                i += 1
            out.append((cmd, shown))
    return out


def _commands(block_start: str) -> list[str]:
    """The lines of the first ``sh`` block whose first line starts with ``block_start``."""
    for block in _blocks():
        if block and block[0].startswith(block_start):
            return block
    raise AssertionError(f"README has no code block starting {block_start!r}")


def test_ci_runs_the_readme_lines():
    top = _commands("pip install -e . && ansforge demo")
    assert top == ["pip install -e . && ansforge demo", "pip install -e '.[dev,test-data]' && python -m pytest"]
    assert top[1] in CI                                       # the test command, exactly
    prereq = _commands("sudo apt-get install")
    assert prereq[0].removeprefix("sudo ") in CI            # CI runs as root
    assert prereq[1] in CI                                    # the virtual environment


def _requirements(extras: list[str]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


@pytest.mark.parametrize("extras", [[], ["dev", "test-data"], ["synth"]], ids=["base", "dev,test-data", "synth"])
def test_the_installs_readme_asks_for_are_complete(extras):
    """Every requirement of ``pip install -e '.[EXTRAS]'`` is installed at an allowed version."""
    assert sys.version_info >= (3, 11)
    for req in _requirements(extras):
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{req.name} ({req}) is not installed: pip install -e '.[{','.join(extras)}]'")
        assert req.specifier.contains(version, prereleases=True), (str(req), version)
    assert metadata.distribution("ansforge").entry_points.select(group="console_scripts", name="ansforge")


def test_the_debian_tools_readme_names_are_installed():
    for tool, command in (("verilator", "verilator"), ("iverilog", "iverilog"), ("openfpgaloader", "openFPGALoader")):
        assert tool in _commands("sudo apt-get install")[0]
        assert shutil.which(command), f"{command} is not on PATH: sudo apt-get install {tool}"


def _normal(line: str) -> str:
    """Whitespace collapsed; a rate (``2,568.7 tokens/s``) is a measurement, not a figure README promises."""
    return re.sub(r"[\d,.]+ tokens/s", "N tokens/s", " ".join(line.split()))


EXAMPLES = _examples()


def test_readme_has_examples():
    assert len(EXAMPLES) >= 5 and any(c.startswith("ansforge generate") for c, _ in EXAMPLES)


@pytest.mark.parametrize("cmd,shown", EXAMPLES, ids=[c.split(" --")[0] for c, _ in EXAMPLES])
def test_every_readme_example_runs_as_written(cmd, shown):
    bindir = str(Path(sys.executable).parent)               # `ansforge` and `python` of this environment
    r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PATH": bindir + os.pathsep + os.environ["PATH"]})
    assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-2000:])
    got = [_normal(line) for line in (r.stdout + r.stderr).splitlines()]
    at = 0
    for want in (_normal(line) for line in shown if line.strip()):
        parts = [p.strip() for p in want.split("...") if p.strip()]
        for j in range(at, len(got)):
            pos = 0
            for part in parts:
                pos = got[j].find(part, pos)
                if pos < 0:
                    break
                pos += len(part)
            if pos >= 0:
                at = j + 1
                break
        else:
            pytest.fail(f"{cmd}: README shows {want!r}, not in the output (in order):\n" + "\n".join(got))


def _groups() -> set[str]:
    """Verbs with sub-verbs (``ansforge figure histogram``, ``ansforge board build``)."""
    from ansforge.cli.common import REGISTRY

    build_parser()                          # registers every verb
    return {v.name for v in REGISTRY if v.run is None}


GROUPS = _groups()


def _synopses() -> list[tuple[list[str], list[str]]]:
    """(verb words, options) of each ``ansforge VERB ...`` synopsis in README's table of verbs."""
    out = []
    for line in README.splitlines():
        m = re.match(r"\| `ansforge ([^`]*)` \|", line)
        if m:
            words = m.group(1).split()
            verb = [w for w in words[:2] if re.fullmatch(r"[a-z][a-z0-9-]*", w)]
            if len(verb) == 2 and verb[0] not in GROUPS:
                verb = verb[:1]
            out.append((verb, sorted(set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", m.group(1))))))
    return out


SYNOPSES = _synopses()


@pytest.mark.parametrize("verb,options", SYNOPSES, ids=[" ".join(v) for v, _ in SYNOPSES])
def test_every_synopsis_option_exists(verb, options):
    parser = build_parser()
    for word in verb:
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = sub.choices[word]
    known = {o for a in parser._actions for o in a.option_strings}
    assert set(options) <= known, (verb, set(options) - known)
