"""The project's structure, checked on its source (AST only, nothing is imported).

* Layering: ``model`` (golden models) imports nothing from ``hdl``, ``sim``, ``analysis`` or the CLI;
  ``hdl`` only ``model``; ``sim`` only ``hdl`` and ``model``; ``analysis`` only ``sim``, ``hdl`` and
  ``model``; the CLI package ``ansforge/`` may import anything. Relative imports are resolved, and
  imports inside functions count as well.
* Privacy: no module imports another module's underscore names (``from x import _y``), and no code
  reads an underscore attribute of anything but ``self``, ``cls`` or ``super()`` (dunders excepted).

A failure names ``file:line`` and the offending import or name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Source folder → the package it installs as (pyproject.toml's package-dir).
PACKAGES = {"ansforge": "ansforge", "model": "ansforge.model", "hdl": "ansforge.hdl", "sim": "ansforge.sim",
            "analysis": "ansforge.analysis"}

#: Layer → the layers it may import from (``cli`` may import anything).
ALLOWED = {"model": {"model"}, "hdl": {"hdl", "model"}, "sim": {"sim", "hdl", "model"},
           "analysis": {"analysis", "sim", "hdl", "model"}, "cli": {"cli", "analysis", "sim", "hdl", "model"}}

#: Narrow, justified exceptions to the privacy rule: (file, attribute) → why.
ALLOWED_PRIVATE = {
    # Amaranth has no public way to mark an Elaboratable that is built only to read its signature
    # (a prototype, never elaborated) as deliberately unused; its own code sets this flag for that.
    ("hdl/parallel.py", "_MustUse__silence"): "silences UnusedElaboratable for a layout prototype",
    ("hdl/subsystem.py", "_MustUse__silence"): "silences UnusedElaboratable for a layout prototype",
    # The composition lemmas elaborate a block themselves (its probe must hold its registers before the
    # invariants are written, and its submodules must still see the harness's platform, which
    # Fragment.get would not give them), or build a core only for its coder.
    ("sim/formal/benches.py", "_MustUse__silence"): "silences UnusedElaboratable for blocks a lemma harness elaborates itself",
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _sources(root: Path) -> list[tuple[Path, str]]:
    """Every project source file under ``root`` with its module name (``ansforge.sim.lanes``, …)."""
    out = []
    for folder, package in PACKAGES.items():
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out.append((path, ".".join([package, *parts])))
    return out


SOURCES = _sources(ROOT)
MODULES = {module for _, module in SOURCES}


def _layer(module: str) -> str | None:
    """The layer of a project module, ``None`` for anything outside the project."""
    parts = module.split(".")
    if parts[0] != "ansforge":
        return None
    if len(parts) > 1 and parts[1] in ("model", "hdl", "sim", "analysis"):
        return parts[1]
    return "cli"


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imported_modules(path: Path, module: str, node: ast.Import | ast.ImportFrom, modules: set[str]) -> list[str]:
    """The modules an import statement loads, relative imports resolved (``from pkg import mod``
    counts as ``pkg.mod`` when that is a project module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        package = module.split(".") if _is_package(path) else module.split(".")[:-1]
        base = package[:len(package) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    out = []
    for a in node.names:
        sub = f"{target}.{a.name}"
        out.append(sub if sub in modules else target)
    return out


def _violations(root: Path, sources: list[tuple[Path, str]], modules: set[str]) -> tuple[list[str], list[str]]:
    """(layering, privacy) violations, each ``file:line: what``."""
    layering, privacy = [], []
    for path, module in sources:
        rel = path.relative_to(root).as_posix()
        layer = _layer(module)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported_modules(path, module, node, modules):
                    other = _layer(target)
                    if other is not None and other not in ALLOWED[layer]:
                        layering.append(f"{rel}:{node.lineno}: {layer} imports {target} ({other})")
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if _is_private(a.name):
                        privacy.append(f"{rel}:{node.lineno}: imports private name {a.name} "
                                       f"from {'.' * node.level}{node.module or ''}")
            elif isinstance(node, ast.Attribute) and _is_private(node.attr):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                    continue
                if (rel, node.attr) in ALLOWED_PRIVATE:
                    continue
                privacy.append(f"{rel}:{node.lineno}: reads private attribute {node.attr} "
                               f"of {ast.unparse(owner)}")
    return layering, privacy


LAYERING, PRIVACY = _violations(ROOT, SOURCES, MODULES)


def test_the_sources_are_found():
    layers = {_layer(m) for m in MODULES}
    assert layers == {"model", "hdl", "sim", "analysis", "cli"} and len(SOURCES) > 50


def test_import_layering():
    assert not LAYERING, "imports across layers:\n" + "\n".join(LAYERING)


def test_no_private_names_cross_modules():
    assert not PRIVACY, "private names used outside their object:\n" + "\n".join(PRIVACY)


def test_the_allowlist_is_still_needed():
    """Every allowlisted private access still exists (a stale entry would hide a new one)."""
    used = set()
    for path, _ in SOURCES:
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and (rel, node.attr) in ALLOWED_PRIVATE:
                used.add((rel, node.attr))
    assert used == set(ALLOWED_PRIVATE), f"stale allowlist entries: {sorted(set(ALLOWED_PRIVATE) - used)}"


@pytest.mark.parametrize("source, expected", [
    ("from ...sim.lanes import x\n", "model imports ansforge.sim.lanes (sim)"),
    ("def f():\n    from ...analysis import bench\n", "model imports ansforge.analysis.bench (analysis)"),
    ("import ansforge.hdl.tans\n", "model imports ansforge.hdl.tans (hdl)"),
    ("from .tans import _check\n", "imports private name _check from .tans"),
    ("x = obj._field\n", "reads private attribute _field of obj"),
    ("x = self.a._field\n", "reads private attribute _field of self.a"),
])
def test_the_checker_catches(tmp_path, source, expected):
    """The checker itself: a planted violation is reported with its file and line."""
    (tmp_path / "model" / "coding").mkdir(parents=True)
    (tmp_path / "model" / "coding" / "bad.py").write_text("import numpy\n" + source)
    sources = _sources(tmp_path)
    modules = {m for _, m in sources} | {"ansforge.sim.lanes", "ansforge.analysis.bench", "ansforge.hdl.tans"}
    layering, privacy = _violations(tmp_path, sources, modules)
    found = layering + privacy
    assert len(found) == 1 and found[0].startswith(f"model/coding/bad.py:{source.count(chr(10)) + 1}: "), found
    assert expected in found[0], found


@pytest.mark.parametrize("old, new", [("tans", "coding.tans"), ("pairs", "dtypes.pairs"), ("checkpoint", "llm.checkpoint")])
def test_the_flat_model_paths_of_earlier_releases_still_import(old, new):
    """``ansforge.model.<module>`` (the layout before the three subpackages) is the moved module itself,
    imported with a DeprecationWarning that names the new path."""
    import importlib
    import sys

    sys.modules.pop(f"ansforge.model.{old}", None)
    with pytest.warns(DeprecationWarning, match=f"ansforge.model.{new}"):
        moved = importlib.import_module(f"ansforge.model.{old}")
    assert moved is importlib.import_module(f"ansforge.model.{new}")


def test_every_package_folder_is_installed():
    """A non-editable install (``pip install .``, a wheel) ships only pyproject.toml's ``packages``: every
    folder with an ``__init__.py`` under the source folders must be listed (``hdl/tans``, ``hdl/rans``
    and ``sim/formal`` were not, so a wheel would have lacked the cores and the proofs)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join([PACKAGES[src], *init.parent.relative_to(ROOT / src).parts])
             for src in PACKAGES for init in (ROOT / src).rglob("__init__.py")}
    assert found - listed == set(), sorted(found - listed)


def test_the_product_holds_no_mutant():
    """Issue 44 item 3: mutants are the verification code's netlist edits (``sim/formal/mutants.py``);
    no class in ``hdl/`` takes a ``mutant`` argument or branches on one."""
    import re

    hook = re.compile(r"\bmutant\s*(:|==|!=|=)|[._]mutant\b|valid_pulse")
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "hdl").rglob("*.py"))
                 for i, line in enumerate(p.read_text().splitlines(), 1) if hook.search(line)]
    assert not offenders, offenders


def test_no_test_module_imports_another():
    """Issue 44 item 5: a test module imports no other test module's names; what tests share lives in
    ``tests/support.py`` (helpers) and the ``conftest.py`` files (fixtures)."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if any(part.startswith("test_") for part in name.split(".")):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {name}")
    assert not offenders, "\n".join(offenders)
