"""What the verb modules share: the registry, the shared options, and the output protection.

* :func:`verb` (and :func:`group`, for a verb with sub-verbs such as ``figure``) registers a verb: its
  name, help, description, a function that adds its own arguments, and the handler, in one place.
* The options several verbs take are defined here once and attached by a flag of the registration:
  ``force=`` (``--force``), ``json=`` (``--json F``), ``steps=True`` (``--steps N``),
  ``selection="pairs"`` or ``"values"`` (``--include``/``--exclude``, and ``--pairs`` for verbs that
  code pairs), ``parallel=True`` (``--threads``/``--dask``/``--workers``). They follow the verb's own
  arguments, in that order; every verb also takes ``--quiet``. A verb with a ``--threads`` of its own
  adds the Dask options with :func:`add_dask`, checks them with :func:`check_dask` and gets its client
  from :func:`dask_cluster`.
* One name per concept: ``--threads N`` for parallelism on this machine, ``--dask ADDRESS`` (a Dask
  scheduler, or ``local``) and ``--workers N`` (a local cluster's size) past it, ``--vcd DIR`` for waveforms,
  ``--json F`` for a machine-readable copy of what a verb reports or writes. An old spelling stays as a
  hidden alias (:func:`alias`, ``help=argparse.SUPPRESS``) for one release.
* Outputs are declared at registration (``outputs={"output": "file", "vcd": "vcd"}``, ``--json`` is
  added by ``json=``): ``main`` checks every one of them (:func:`check_outputs`) before the handler
  runs, so a mistake costs no work. They are written through :func:`write` or, for a file or folder
  another function creates, :func:`staged`: atomically, never over an input of the verb (``--model``,
  once or repeated, or the container), never over an existing file without ``--force``, never a file
  where a folder is expected or the reverse, only into a folder that exists and is writable. On any
  failure or interrupt nothing new is left behind and what the user had is intact.
* An option the verb does not use in the chosen mode is refused (:func:`refuse`), never ignored;
  :func:`given` tells which options the user typed (and how they spelled them).
* A user error is a :class:`UsageError`: ``main`` prints it as one line, ``ansforge: error: ...``, and
  exits with status 2; so do argparse's own errors (:class:`Parser`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..model.errors import AnsforgeError

__all__ = ["UsageError", "Parser", "Verb", "REGISTRY", "verb", "group", "attach_shared", "alias", "track_given",
           "given", "spelled", "refuse", "inputs", "refuse_existing", "check_output", "check_outputs", "staged",
           "write", "write_json", "write_image", "report", "threads", "number_list", "need_verilator", "ordered",
           "jsonable", "add_dask", "check_dask", "dask_cluster"]

#: ``--force``'s help when a registration says ``force=True``.
FORCE_HELP = "replace existing output files"
#: ``--json``'s help when a registration says ``json=True``.
JSON_HELP = "also write the figures as JSON"


class UsageError(AnsforgeError):
    """An impossible request on the command line (printed as one line, exit status 2)."""


class Parser(argparse.ArgumentParser):
    """argparse with its own errors (a bad choice, a missing option, an unknown one) as one line,
    ``ansforge: error: ...`` and status 2, like every other mistake (not the usage and then the error).
    Sub-verbs' parsers are of this class too (``add_subparsers`` makes them of the parent's class)."""

    def error(self, message: str):
        verb = self.prog.partition(" ")[2]
        where = f"{verb}: " if verb else ""
        if message.startswith("argument ") and message.endswith(": expected one argument"):
            option = message[len("argument "):].split(":")[0].split("/")[-1]
            message += f"; a value that starts with '-' is written {option}=VALUE"
        self.exit(2, f"ansforge: error: {where}{message} (see `{self.prog} --help`)\n")

    def add_argument(self, *args, **kwargs) -> argparse.Action:
        """argparse's ``add_argument``; the options are also kept in :attr:`options` (``--help`` and
        ``--version`` too), so that :func:`track_given` needs no private attribute of argparse."""
        action = super().add_argument(*args, **kwargs)
        self.__dict__.setdefault("options", []).append(action)
        return action

    def add_argument_group(self, *args, **kwargs):
        """argparse's ``add_argument_group``; its options are kept in :attr:`options` too."""
        return self._recording(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, **kwargs):
        """argparse's ``add_mutually_exclusive_group``; its options are kept in :attr:`options` too."""
        return self._recording(super().add_mutually_exclusive_group(**kwargs))

    def _recording(self, group):
        add = group.add_argument

        def add_argument(*args, **kwargs) -> argparse.Action:
            action = add(*args, **kwargs)
            self.__dict__.setdefault("options", []).append(action)
            return action
        group.add_argument = add_argument
        return group

    def add_subparsers(self, **kwargs):
        """argparse's ``add_subparsers``; the sub-verbs' parsers are reachable from :attr:`verbs`."""
        group = super().add_subparsers(**kwargs)
        self.__dict__.setdefault("verbs", []).append(group.choices)
        return group


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
    outputs: Mapping[str, str] = field(default_factory=dict)
    blas: bool = False


#: Every registered verb, in the order of registration (``build_parser`` orders them by module).
REGISTRY: list[Verb] = []


def _help(flag: bool | str | None, default: str) -> str | None:
    return default if flag is True else (flag or None)


def verb(name: str, arguments: Callable[[argparse.ArgumentParser], None] | None = None, *, help: str,
         description: str, under: str | None = None, force: bool | str = False, json: bool | str = False,
         steps: bool = False, selection: str | None = None, parallel: bool = False,
         outputs: Mapping[str, str] | None = None, blas: bool = False):
    """Register the decorated function as the handler of ``ansforge NAME`` (``ansforge UNDER NAME``).

    ``arguments(p)`` adds the verb's own arguments; ``force`` and ``json`` are True (the common help
    text) or the help text itself; ``selection`` is ``"pairs"`` or ``"values"``. ``outputs`` maps the
    ``dest`` of each output option to ``"file"``, ``"dir"`` (a folder the verb creates) or ``"vcd"``
    (an existing folder written into); ``--json`` is one (``"file"``) when ``json`` is given. ``blas``: the
    verb multiplies large matrices (a llama's; ``steps`` implies it), so NumPy's BLAS keeps its thread
    pool; every other verb runs BLAS on one thread (``ansforge.cli._run``)."""
    if selection not in (None, "pairs", "values"):
        raise ValueError(f"selection must be 'pairs' or 'values', not {selection!r}")
    outs = dict(outputs or {})
    if json:
        outs.setdefault("json", "file")
    if any(kind not in ("file", "dir", "vcd") for kind in outs.values()):
        raise ValueError(f"outputs are 'file', 'dir' or 'vcd', not {outs}")

    def register(run: Callable[[argparse.Namespace], int]):
        REGISTRY.append(Verb(name, help, description, run.__module__, run, arguments, under,
                             _help(force, FORCE_HELP), _help(json, JSON_HELP), steps, selection, parallel,
                             outputs=outs, blas=blas or steps))
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
        p.add_argument("--threads", type=int, default=None, metavar="N",
                       help="tasks at a time on this machine, each in a worker process (default: one per CPU; "
                            "1 runs in-process)")
        alias(p, "--jobs", "threads", type=int)
        add_dask(p)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress on standard error (errors are still printed)")
    alias(p, "--no-progress", "quiet", action="store_true")


def add_dask(p: argparse.ArgumentParser, tasks: str = "its tasks (per tensor, per codec row, per compressor)") -> None:
    """``--dask ADDRESS`` and ``--workers N`` (checked by :func:`check_dask`)."""
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help=f"run on a Dask cluster instead, {tasks}: `local` for a cluster of --workers processes "
                        "here, or its scheduler's address (tcp://host:8786, as `dask scheduler` prints it), whose "
                        "workers read the checkpoint by its absolute path (so they must share this file system); "
                        "needs the dask extra (pip install 'ansforge[dask]')")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="with --dask local: the local cluster's worker processes, one thread each (default: one "
                        "per CPU)")


def check_dask(args: argparse.Namespace) -> None:
    """``--workers`` only with ``--dask local`` (at least 1), ``--threads`` not with ``--dask``."""
    if args.dask is None:
        refuse(args, ["workers"], "needs --dask local (it is the size of a local Dask cluster)")
        return
    if args.dask.strip() == "":
        raise UsageError("--dask needs a scheduler's address (tcp://host:8786) or local")
    refuse(args, ["threads"], "does not apply with --dask (the Dask cluster sets its own workers)")
    if args.dask != "local":
        refuse(args, ["workers"], f"sets the size of a local cluster (--dask local); the scheduler at {args.dask} "
                                  "has its own workers")
    threads(args.workers, "--workers")


@contextmanager
def dask_cluster(args: argparse.Namespace) -> Iterator:
    """``None`` without ``--dask``; else a Dask client for the block, connected to the scheduler or to a
    local cluster of ``--workers`` (started here and closed after, Ctrl-C included). A scheduler that
    does not answer within a few seconds is one line naming the address."""
    if args.dask is None:
        yield None
        return
    from ..analysis.parallel import dask_client

    with dask_client(args.dask, args.workers) as client:
        yield client


def alias(p, old: str, dest: str, **kwargs) -> None:
    """``old``, a former spelling of the option stored in ``dest``: it still works, for one release,
    and is left out of ``--help``."""
    p.add_argument(old, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


# --- what the user typed ----------------------------------------------------------------------------------

_TRACKED: dict[type, type] = {}


def _tracked(cls: type) -> type:
    if cls not in _TRACKED:
        def __call__(self, parser, namespace, values, option_string=None):
            seen = dict(getattr(namespace, GIVEN, {}))
            seen.setdefault(self.dest, option_string or self.dest)
            setattr(namespace, GIVEN, seen)
            return cls.__call__(self, parser, namespace, values, option_string)
        _TRACKED[cls] = type(f"Tracked{cls.__name__}", (cls,), {"__call__": __call__})
    return _TRACKED[cls]


#: The namespace attribute where :func:`track_given` records the options given (dest -> spelling).
GIVEN = "given_options"


def track_given(parser: Parser) -> None:
    """Make every option of ``parser`` and its sub-verbs record, in ``args.given_options``, that the
    user gave it and how it was spelled (read with :func:`given`). ``--help`` and ``--version`` end
    the program and are left alone."""
    for verbs in getattr(parser, "verbs", []):
        for sub in verbs.values():
            track_given(sub)
    for action in getattr(parser, "options", []):
        if action.option_strings and action.dest not in ("help", "version"):
            action.__class__ = _tracked(type(action))


def given(args: argparse.Namespace, dest: str) -> str | None:
    """How the user spelled the option stored in ``dest`` (``--jobs`` or ``--threads``), or None when the
    command line does not have it."""
    return getattr(args, GIVEN, {}).get(dest)


def spelled(args: argparse.Namespace, dest: str) -> str:
    """The option of ``dest`` as the user typed it (``--top``, an old alias), else its usual spelling."""
    return given(args, dest) or "--" + dest.replace("_", "-")


def refuse(args: argparse.Namespace, dests: Sequence[str], why: str) -> None:
    """Refuse the first of ``dests`` the user gave: ``--OPTION WHY`` (an option the chosen mode does not
    use is an error, never silently ignored)."""
    for dest in dests:
        if given(args, dest):
            raise UsageError(f"{given(args, dest)} {why}")


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
        if path is not None:
            check_output(args, path)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _refuse_input(path: Path, args: argparse.Namespace) -> None:
    for q in inputs(args):
        if _same_file(path, Path(q)):
            raise UsageError(f"{path}: refusing to overwrite the input file")


def _check_parent(p: Path) -> None:
    parent = p.parent
    if not parent.exists():
        raise UsageError(f"{parent}: no such directory")
    if not parent.is_dir():
        raise UsageError(f"{parent}: not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{parent}: permission denied (cannot write there)")


def check_output(args: argparse.Namespace, path: str, *, directory: bool = True, kind: str = "file",
                 option: str | None = None) -> Path:
    """Check that ``path`` may be written as a ``kind`` (``"file"``; ``"dir"``, a folder the verb creates
    or, with ``--force``, writes into; ``"vcd"``, an existing folder written into): not an input, not a
    folder where a file is expected or the reverse, not an existing file (or a non-empty folder) without
    ``--force``, and in a folder that exists and is writable. ``option`` names the option in messages.
    (``directory`` is kept for old callers; the parent is always checked.)"""
    p = Path(path)
    what = f" (for {option})" if option else ""
    if str(path) == "":
        raise UsageError(f"{option or 'output'}: an empty path")
    force = getattr(args, "force", False)
    # What the path is comes first: a file where a folder is expected (or the reverse) is not
    # something --force could fix.
    if kind == "file" and p.is_dir():
        raise UsageError(f"{p}: is a directory{what}; give the name of a file to write")
    if kind in ("dir", "vcd") and p.exists() and not p.is_dir():
        raise UsageError(f"{p}: is a file, not a directory{what}")
    _refuse_input(p, args)
    if kind == "file":
        if p.exists() or p.is_symlink():
            if not p.is_file():
                raise UsageError(f"{p}: exists and is not a regular file{what}")
            if not force:
                raise UsageError(f"{p}: file exists{what} (use --force to replace it)")
        _check_parent(p)
    elif kind == "dir":
        if p.is_dir():
            if any(p.iterdir()) and not force:
                raise UsageError(f"{p}: exists and is not an empty directory{what} (use --force to write into it)")
            if not os.access(p, os.W_OK | os.X_OK):
                raise UsageError(f"{p}: permission denied (cannot write there)")
        _check_parent(p)
    elif kind == "vcd":
        if not p.is_dir():
            raise UsageError(f"{p}: no such directory{what}")
        if not os.access(p, os.W_OK | os.X_OK):
            raise UsageError(f"{p}: permission denied (cannot write there)")
    else:  # pragma: no cover - a registration error
        raise ValueError(kind)
    return p


def check_outputs(args: argparse.Namespace, outputs: Mapping[str, str]) -> None:
    """Check every declared output of the verb (:func:`check_output`) and that no two are the same
    path; ``main`` calls it before the handler, so that a mistake in an output costs no work."""
    seen: dict[Path, str] = {}
    for dest, kind in outputs.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        opt = spelled(args, dest) if dest != "output" else (given(args, "output") or "-o")
        if kind == "vcd" and str(value).endswith(".vcd") and not Path(value).is_dir():
            kind = "file"        # simulate's old --vcd F.vcd (one release)
        p = check_output(args, value, kind=kind, option=opt)
        key = Path(os.path.abspath(p))
        if key in seen:
            raise UsageError(f"{value}: given to both {seen[key]} and {opt}; give each its own path")
        seen[key] = opt


def _permissions(path: Path) -> None:
    """A folder made by :func:`tempfile.mkdtemp` (0700) gets the mode a plain ``mkdir`` would give."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o777 & ~umask)


def _install(new: Path, dest: Path) -> None:
    """Move ``new`` (a file or a folder) to ``dest``: a rename, or for a folder into an existing one,
    a rename of each of its entries (the folder's other files stay)."""
    if new.is_dir() and dest.is_dir():
        for entry in sorted(new.iterdir()):
            target = dest / entry.name
            if entry.is_dir() and target.is_dir():
                _install(entry, target)
            elif target.is_dir():
                raise UsageError(f"{target}: is a directory; cannot replace it with a file")
            else:
                os.replace(entry, target)
    else:
        os.replace(new, dest)


@contextmanager
def staged(args: argparse.Namespace, path: str | os.PathLike, *, kind: str = "file") -> Iterator[Path]:
    """For a writer that creates ``path`` itself (a container, a testbench folder, traces): yields a
    temporary path beside it (in a hidden sibling folder, same file system) to write instead. When the
    block ends normally the result is renamed into place (a folder: created, or its files renamed into
    the existing one); on an error or an interrupt the temporary one is removed, so nothing new is left
    and what the user had is untouched. ``kind``: ``"file"``, ``"dir"``, or ``"vcd"`` (``path`` is an
    existing folder; the block writes into the yielded folder, whose files then move into it)."""
    p = check_output(args, path, kind=kind)
    parent = p if kind == "vcd" else p.parent
    tmp = Path(tempfile.mkdtemp(prefix=f".{p.name}.", suffix=".ansforge-tmp", dir=parent))
    try:
        if kind == "file":
            target = tmp / p.name
        else:
            target = tmp / "out"
            target.mkdir()
            _permissions(target)
        yield target
        if kind == "file" and not target.exists():
            return
        _install(target, p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write(args: argparse.Namespace, path: str | None, data: str | bytes) -> None:
    """Write an output file atomically (nothing when ``path`` is None), after :func:`check_output`."""
    if path is None:
        return
    with staged(args, path) as tmp:
        tmp.write_bytes(data if isinstance(data, bytes) else data.encode())


def jsonable(value):
    """``value`` with NumPy scalars and arrays, tuples, paths and sets as plain JSON types."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "tolist"):           # NumPy scalars and arrays
        return jsonable(value.tolist())
    if isinstance(value, float) and value != value:
        return None
    return value


def write_json(args: argparse.Namespace, path: str | None, doc) -> None:
    """Write ``doc`` as indented JSON with :func:`write`."""
    if path is not None:
        write(args, path, json.dumps(jsonable(doc), indent=1) + "\n")


def write_image(args: argparse.Namespace, path: str, draw: Callable[[Path], object]):
    """Let ``draw(png)`` draw into a temporary file beside ``path`` and rename it into place; returns
    what ``draw`` returned."""
    with staged(args, path) as png:
        return draw(png)


def report(rep, args: argparse.Namespace) -> int:
    """Print an analysis report and write its JSON where ``--json`` asks."""
    print(rep.format_text())
    write_json(args, args.json, rep.to_json())
    return 0


# --- checks of values ------------------------------------------------------------------------------


def threads(n: int | None, option: str = "--threads") -> int | None:
    if n is not None and n < 1:
        raise UsageError(f"{option} must be at least 1, not {n}")
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
