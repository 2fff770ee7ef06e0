"""What the verb modules share: the registry, the shared options, and the output protection.

* :func:`verb` (and :func:`group`, for a verb with sub-verbs such as ``figure``) registers a verb: its
  name, help, description, a function that adds its own arguments, and the handler, in one place.
* The options several verbs take are defined here once and attached by a flag of the registration:
  ``force=`` (``--force``), ``json=`` (``--json F``), ``steps=True`` (``--steps N``),
  ``selection="pairs"`` or ``"values"`` (``--include``/``--exclude``, and ``--pairs`` for verbs that
  code pairs), ``parallel=True`` (``--jobs``/``--dask``/``--no-progress``). They follow the verb's own
  arguments, in that order.
* Every output goes through :func:`write` (or :func:`check_output`, for a file another function writes):
  atomic, never over an input of the verb (``--model``, once or repeated, or the container), never over
  an existing file without ``--force``, and only into a directory that exists.
* A user error is a :class:`UsageError`: ``main`` prints it as one line, ``ansforge: error: ...``, and
  exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model.errors import AnsforgeError

__all__ = ["UsageError", "Verb", "REGISTRY", "verb", "group", "attach_shared", "inputs", "refuse_existing",
           "check_output", "write", "write_json", "write_image", "report", "threads", "number_list",
           "need_verilator", "ordered"]

#: ``--force``'s help when a registration says ``force=True``.
FORCE_HELP = "replace existing output files"
#: ``--json``'s help when a registration says ``json=True``.
JSON_HELP = "also write the figures as JSON"


class UsageError(AnsforgeError):
    """An impossible request on the command line (printed as one line, exit status 2)."""


@dataclass(frozen=True)
class Verb:
    """One registered verb (or, with ``run`` None, a group of sub-verbs whose choice lands in ``dest``)."""

    name: str
    help: str
    description: str
    module: str
    run: Callable[[argparse.Namespace], int] | None = None
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    under: str | None = None
    force: str | None = None
    json: str | None = None
    steps: bool = False
    selection: str | None = None
    parallel: bool = False
    dest: str | None = None
    metavar: str | None = None


#: Every registered verb, in the order of registration (``build_parser`` orders them by module).
REGISTRY: list[Verb] = []


def _help(flag: bool | str | None, default: str) -> str | None:
    return default if flag is True else (flag or None)


def verb(name: str, arguments: Callable[[argparse.ArgumentParser], None] | None = None, *, help: str,
         description: str, under: str | None = None, force: bool | str = False, json: bool | str = False,
         steps: bool = False, selection: str | None = None, parallel: bool = False):
    """Register the decorated function as the handler of ``ansforge NAME`` (``ansforge UNDER NAME``).

    ``arguments(p)`` adds the verb's own arguments; ``force`` and ``json`` are True (the common help
    text) or the help text itself; ``selection`` is ``"pairs"`` or ``"values"``."""
    if selection not in (None, "pairs", "values"):
        raise ValueError(f"selection must be 'pairs' or 'values', not {selection!r}")

    def register(run: Callable[[argparse.Namespace], int]):
        REGISTRY.append(Verb(name, help, description, run.__module__, run, arguments, under,
                             _help(force, FORCE_HELP), _help(json, JSON_HELP), steps, selection, parallel))
        return run
    return register


def group(name: str, module: str, *, help: str, description: str, dest: str, metavar: str) -> None:
    """Register a verb whose sub-verbs (registered with ``under=name``) are chosen into ``args.<dest>``."""
    REGISTRY.append(Verb(name, help, description, module, dest=dest, metavar=metavar))


def attach_shared(p: argparse.ArgumentParser, v: Verb) -> None:
    """Add the shared options ``v``'s registration asks for, after its own arguments."""
    if v.steps:
        p.add_argument("--steps", type=int, default=None, metavar="N",
                       help="on a llama checkpoint, measure each row's effect on the model over N greedy positions "
                            "(mean next-token KL divergence, greedy agreement); 0 to skip (default: 32 on a llama of "
                            "at most 50 M parameters, none on a larger one)")
    if v.json:
        p.add_argument("--json", default=None, metavar="F", help=v.json)
    if v.force:
        p.add_argument("--force", action="store_true", help=v.force)
    if v.selection:
        p.add_argument("--include", action="append", default=[], metavar="PATTERN",
                       help="count exactly the tensors whose names match this shell pattern (repeatable); "
                            "default: every 2-D weight matrix")
        p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                       help="leave out tensors whose names match this shell pattern (repeatable)")
    if v.selection == "pairs":   # "values": the verb reads stored values itself (quantization, its own conversions)
        p.add_argument("--pairs", default="bf16", choices=["bf16", "fp16", "fp32"],
                       help="coding-pair format; other storage types are converted (RNE when narrowing, reported "
                            "as lossy). Default: bf16, as in the paper")
    if v.parallel:
        p.add_argument("--jobs", type=int, default=None, metavar="N",
                       help="local worker processes (default: one per CPU; 1 runs in-process)")
        p.add_argument("--dask", default=None, metavar="ADDRESS",
                       help="run the per-tensor tasks on this Dask scheduler instead (tcp://host:8786)")
        p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


# --- output protection --------------------------------------------------------------------------------


def inputs(args: argparse.Namespace) -> list[str]:
    """The files the verb reads, which no output may replace: ``--model`` (one, or several when the verb
    takes it repeatedly) and a container argument."""
    out: list[str] = []
    for name in ("model", "container"):
        value = getattr(args, name, None)
        if value is None:
            continue
        out += [value] if isinstance(value, (str, os.PathLike)) else list(value)
    return out


def refuse_existing(args: argparse.Namespace, *paths: str | None) -> None:
    """Refuse to replace a file the user has, unless ``--force`` (checked before the work, not after)."""
    for path in paths:
        if path is not None and Path(path).exists() and not args.force:
            raise UsageError(f"{path}: file exists (use --force to replace it)")


def _refuse_input(path: Path, args: argparse.Namespace) -> None:
    for q in inputs(args):
        if path.exists() and Path(q).exists() and path.resolve() == Path(q).resolve():
            raise UsageError(f"{path}: refusing to overwrite the input file")


def check_output(args: argparse.Namespace, path: str, *, directory: bool = True) -> Path:
    """Check that ``path`` may be written: not an input, not an existing file without ``--force``, and
    (unless ``directory`` is False) in a directory that exists."""
    p = Path(path)
    _refuse_input(p, args)
    refuse_existing(args, path)
    if directory and not p.parent.exists():
        raise UsageError(f"{p.parent}: no such directory")
    return p


def write(args: argparse.Namespace, path: str | None, data: str | bytes) -> None:
    """Write an output file atomically (nothing when ``path`` is None), after :func:`check_output`."""
    if path is None:
        return
    p = check_output(args, path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data if isinstance(data, bytes) else data.encode())
    os.replace(tmp, p)


def write_json(args: argparse.Namespace, path: str | None, doc) -> None:
    """Write ``doc`` as indented JSON with :func:`write`."""
    write(args, path, json.dumps(doc, indent=1) + "\n")


def write_image(args: argparse.Namespace, path: str, draw: Callable[[Path], object]):
    """Let ``draw(png)`` draw into a temporary file, then :func:`write` it to ``path``; returns what
    ``draw`` returned."""
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / "figure.png"
        result = draw(png)
        write(args, path, png.read_bytes())
    return result


def report(rep, args: argparse.Namespace) -> int:
    """Print an analysis report and write its JSON where ``--json`` asks."""
    print(rep.format_text())
    write_json(args, args.json, rep.to_json())
    return 0


# --- checks of values ------------------------------------------------------------------------------


def threads(n: int) -> int:
    if n < 1:
        raise UsageError(f"--threads must be at least 1, not {n}")
    return n


def number_list(flag: str, text: str, kind=int) -> tuple:
    """A comma-separated list of numbers from the command line (empty: none)."""
    try:
        return tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise UsageError(f"{flag} must be comma-separated numbers, not {text!r}") from None


def need_verilator(engine: str) -> None:
    """The Verilator engine needs Debian's verilator; say so in one line instead of a traceback."""
    from ..sim.verilator import verilator_available

    if engine == "verilator" and not verilator_available():
        raise UsageError("--engine verilator needs verilator on PATH (Debian: sudo apt-get install verilator), "
                         "or use --engine amaranth")


def ordered(registry: Sequence[Verb], modules: Sequence[str]) -> list[Verb]:
    """The registry in the order of ``modules`` (then of registration)."""
    rank = {m: i for i, m in enumerate(modules)}
    return sorted(registry, key=lambda v: rank.get(v.module.rsplit(".", 1)[-1], len(rank)))


def one_pass_memory() -> None:
    """Keep transparent huge pages out of this process (Linux ``prctl(PR_SET_THP_DISABLE)``).

    ``compress`` and ``decompress`` touch each large array once, front to back. NumPy asks the kernel
    for huge pages on every array of 4 MiB or more (``madvise``); where the kernel's ``defrag``
    setting is ``madvise`` (the common default), each such fault may compact memory synchronously.
    Measured on the MiniLM file (2-core Xeon, ``compress_checkpoint(..., "tans8")``, 3 runs each):
    system time 0.44-0.95 s with huge pages, 0.16-0.21 s without, user time unchanged. Elsewhere, or
    where the call fails, nothing changes.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE (Linux 3.15+)
    except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
        pass
