"""The ``ansforge`` command line.

Every verb has ``--help``. Errors in the user's input (a missing or corrupt file, an impossible
parameter) print one line, ``ansforge: error: ...``, naming the file, tensor or field, and exit with
status 2; no traceback. Output files are written atomically and never replace an existing file unless
``--force`` is given, and never the input checkpoint.

Each verb lives in one module of this package, its arguments and its handler together:

``demo``        ``ansforge demo``
``tables``      ``ansforge tables`` (Table 1)
``codecs``      ``ansforge codecs`` (every codec name, and the cores that take it)
``container``   ``compress``, ``decompress``, ``inspect`` (.ansf containers), ``quantize``
``cores``       ``simulate``, ``verilog``, ``testbench``, ``resources``, ``prove`` (the hardware cores)
``board``       ``board build``, ``board run`` (the subsystem on an FPGA board)
``factory``     ``ansforge factory`` (token-factory bandwidth)
``report``      ``figure``, ``quant-table``, ``types``, ``outliers``, ``context``, ``activations``, ``histograms``
``bench``       ``ansforge bench``
``llama``       ``ansforge generate``
``common``      the registry, the shared options (``--force``, ``--json``, ...) and the output protection

To add a verb, register it once, in the module of its family (or a new module named in
:data:`VERB_MODULES`)::

    def _arguments(p):
        p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")

    @verb("name", _arguments, help="one line for `ansforge --help`", description="what it does",
          json="also write the figures as JSON", force=True)
    def name(args) -> int:
        from ..analysis.something import compute     # heavy imports inside the handler
        return report(compute(args.model), args)

The flags of the registration attach the shared options after the verb's own (``force``, ``json``,
``steps``, ``selection``, ``parallel``; see :mod:`.common`); write outputs through
:func:`.common.write`, raise :class:`.common.UsageError` for the user's mistakes, and keep the
computation in ``analysis`` (or ``model``, ``sim``): a handler parses, checks, calls and prints.
Then add the verb to README's table of verbs. Module tops import nothing heavy: ``ansforge demo``
prints its title before numpy or amaranth load.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from importlib import import_module

from ..model import progress as _progress
from ..model.errors import AnsforgeError, ToolError
from .common import REGISTRY, Parser, attach_shared, check_outputs, ordered, track_given

__all__ = ["main", "build_parser", "VERB_MODULES"]

#: The verb modules, in the order ``ansforge --help`` lists their verbs.
VERB_MODULES = ("demo", "tables", "codecs", "container", "cores", "board", "factory", "report", "bench", "llama", "scale")


def build_parser() -> argparse.ArgumentParser:
    for name in VERB_MODULES:      # importing a module registers its verbs
        import_module(f"{__name__}.{name}")
    parser = Parser(
        prog="ansforge",
        description="Lossless LLM-weight compression with ANS coding pairs: tables, figures and hardware models "
                    "after V. Liguori's white paper.")
    from .. import __version__
    parser.add_argument("--version", action="version", version=f"ansforge {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    groups = {}
    for v in ordered(REGISTRY, VERB_MODULES):
        p = (groups[v.under] if v.under else verbs).add_parser(v.name, help=v.help, description=v.description)
        if v.run is None:
            groups[v.name] = p.add_subparsers(dest=v.dest, metavar=v.metavar)
            groups[v.name].required = True
            continue
        if v.arguments is not None:
            v.arguments(p)
        attach_shared(p, v)
        p.set_defaults(handler=v.run, outputs=v.outputs, blas=v.blas)
    track_given(parser)
    return parser


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every ``finally`` (temporary files) runs."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _child_after_fork() -> None:
    """In a worker process forked while a verb runs: Ctrl-C (sent to the whole process group) and the
    parent's terminate end the worker with a ``SystemExit`` (its ``finally`` blocks run, no traceback);
    the parent alone reports the interrupt."""
    if _running:
        leaving = []

        def leave(signum, frame):
            # Once leaving, a second signal (Ctrl-C to the group, then the parent's terminate) must not
            # raise again inside the finally blocks and finalizers that remove temporary files: that
            # printed a second traceback. (The handler stays a Python function: set to SIG_IGN here, a
            # signal already pending makes Python print "ignored due to race condition".)
            if leaving:
                return
            leaving.append(signum)
            raise SystemExit(128 + signum)
        signal.signal(signal.SIGINT, leave)
        signal.signal(signal.SIGTERM, leave)


_running = False
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_child_after_fork)


def _stdout_is_closed_pipe() -> bool:
    """Whether standard output is a pipe whose reader has gone (``ansforge inspect F | head``)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _quiet_stdout() -> None:
    """After a closed pipe: point standard output at /dev/null so that Python's final flush at exit
    does not fail again (the Python documentation's recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ansforge ARGV``; returns the exit status (argparse's own exits raise ``SystemExit``)."""
    global _running
    in_main_thread = _on_main_thread()
    old_term = signal.signal(signal.SIGTERM, _on_sigterm) if in_main_thread else None
    _running = True
    try:
        return _run(argv)
    except BrokenPipeError:
        if _stdout_is_closed_pipe():
            _quiet_stdout()
            return 0
        raise
    finally:
        _running = False
        if in_main_thread:
            signal.signal(signal.SIGTERM, old_term)


def _one_blas_thread() -> None:
    """Run NumPy's BLAS on one thread unless the user chose otherwise: only a verb that multiplies a
    llama's matrices (``generate``, ``activations``, the ``--steps`` of ``types`` and ``quant-table``)
    uses it. Set before NumPy loads, since OpenBLAS starts its pool then,
    a thread per core that spins while it waits: on 2 cores ``import numpy`` cost 0.15-0.20 CPU-s instead
    of 0.08-0.10, a third of a whole ``decompress`` of MiniLM. (Once NumPy is loaded, as when ``main``
    runs inside a notebook, this changes nothing.)"""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _on_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _run(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("ansforge: interrupted", file=sys.stderr)
        return 130
    # Progress bars (stderr, terminals only) stay out of the way of machine-read output.
    _progress.set_quiet(bool(getattr(args, "json", None)) or getattr(args, "quiet", False))
    if not args.blas:
        _one_blas_thread()
    try:
        check_outputs(args, args.outputs)     # every output path, before any work
        status = args.handler(args)
        sys.stdout.flush()                    # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:
        raise
    except AnsforgeError as exc:
        print(f"ansforge: error: {exc}", file=sys.stderr)
        return 2
    except ToolError as exc:
        print(f"ansforge: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"ansforge: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ansforge: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("ansforge: terminated", file=sys.stderr)
        return 143
