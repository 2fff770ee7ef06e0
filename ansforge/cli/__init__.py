"""The ``ansforge`` command line.

Every verb has ``--help``. Errors in the user's input (a missing or corrupt file, an impossible
parameter) print one line, ``ansforge: error: ...``, naming the file, tensor or field, and exit with
status 2; no traceback. Output files are written atomically and never replace an existing file unless
``--force`` is given, and never the input checkpoint.

Each verb lives in one module of this package, its arguments and its handler together:

``demo``        ``ansforge demo``
``tables``      ``ansforge tables`` (Table 1)
``container``   ``compress``, ``decompress``, ``inspect`` (.ansf containers), ``quantize``
``cores``       ``simulate``, ``verilog``, ``testbench``, ``resources``, ``prove`` (the hardware cores)
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
import sys
from collections.abc import Sequence
from importlib import import_module

from ..model import progress as _progress
from ..model.errors import AnsforgeError, ToolError
from .common import REGISTRY, attach_shared, ordered

__all__ = ["main", "build_parser", "VERB_MODULES"]

#: The verb modules, in the order ``ansforge --help`` lists their verbs.
VERB_MODULES = ("demo", "tables", "container", "cores", "factory", "report", "bench", "llama")


def build_parser() -> argparse.ArgumentParser:
    for name in VERB_MODULES:      # importing a module registers its verbs
        import_module(f"{__name__}.{name}")
    parser = argparse.ArgumentParser(
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
        p.set_defaults(handler=v.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Progress bars (stderr, terminals only) stay out of the way of machine-read output.
    _progress.set_quiet(bool(getattr(args, "json", None)) or getattr(args, "no_progress", False))
    try:
        return args.handler(args)
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
