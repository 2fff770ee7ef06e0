"""The core registry: one :class:`CoreBuild` row per shipped build, and :func:`build_core` / :func:`table_writes`.

This is where a codec object (:class:`~ansforge.model.coding.codecs.TansCodec` or
:class:`~ansforge.model.coding.codecs.RansCodec`) meets its hardware. It lives in ``hdl/`` and not on
the codec classes because imports only run analysis → sim → hdl → model: ``model/`` never imports
``hdl/``.

:data:`REGISTRY` is the one list of the cores. Everything that names a core derives from it: the
command line's ``--core`` choices and help (``ansforge/cli/cores.py``), the simulation jobs
(``sim/jobs.py``), the formal harnesses' name tables and mutant catalogue
(``sim/formal/``), the bench's core lists (``analysis/bench.py``) and the README's table of cores
(``tests/hdl/test_core_registry.py`` checks it against :func:`markdown_table`).

A row names its classes as ``"module:Class"`` inside :mod:`ansforge.hdl` and resolves them only when
asked (:attr:`CoreBuild.core_class`, ...), so that importing this module (the command-line parser
does, for the core names) imports no Amaranth and no core.

Names. The four base builds (``tans-decoder``, ``tans-encoder``, ``rans-decoder``, ``rans-encoder``)
take every codec their row lists. ``<base>-x<N>`` (:func:`core_build`) is the base build for a codec
of ``N`` interleaved states, for every ``N > 1`` the base takes (``rans-decoder-x5`` is ``--core
rans-decoder --codec rans16x5``). The four interleaved builds that have their own row
(``tans-decoder-x2``, ``tans-encoder-x2``, ``rans-decoder-x5``, ``rans-encoder-x16``) are those with a
formal configuration of their own (their small build, ``ansforge prove``, and their mutants).
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..model.coding.registry import PAPER, default_for, family_of, ranges_text

if TYPE_CHECKING:                   # pragma: no cover
    from amaranth.lib import wiring

__all__ = ["ROLES", "KINDS", "CodecSet", "FormalConfig", "CoreBuild", "REGISTRY", "BASE_BUILDS", "core_build",
           "core_names", "base_names", "prove_names", "interleaved_names", "core_for", "cores_for", "takes_text",
           "refusal", "no_core", "NO_CORE_PRESETS", "build_core", "markdown_table", "table_writes", "paper_codec", "default_codec",
           # old names, derived from the registry
           "CORE_CLASSES", "PAPER_CODECS", "core_states"]

ROLES = ("decoder", "encoder")
KINDS = ("tans", "rans")
#: Codec presets (:class:`~ansforge.model.coding.registry.Family` ``preset``) that no core of a role takes,
#: whatever their ``R``/``P`` and ``N``: ``{(preset, role): what to call them}``. The legacy ``S = 48``
#: interleaved streams (``rans16xN-s48w32``) needed the one-pop rANS xN decoder datapath, retired
#: because the two-pop one dominates it in area and clock (issue 42): they decode in software.
NO_CORE_PRESETS = {("legacy-s48", "decoder"): "legacy S = 48 format"}


def no_core(codec, role: str = "decoder") -> str | None:
    """The one line that says no ``role`` core takes ``codec`` (a codec object) because of its format
    (:data:`NO_CORE_PRESETS`), or ``None``."""
    if getattr(codec, "kind", None) not in KINDS:
        return None
    entry = family_of(codec)
    what = None if entry is None else NO_CORE_PRESETS.get((entry.family.preset, role))
    if what is None:
        return None
    return f"no {role} core takes {entry.name} ({what}): decode it in software, or recompress"


@dataclass(frozen=True)
class CodecSet:
    """Codecs of one kind a build takes: every ``bits`` (``R`` of ``tansR``, ``P`` of ``ransP``) with every
    ``states`` (``N`` of the ``xN`` suffix; 1 is no suffix)."""

    bits: tuple[int, ...]
    states: tuple[int, ...]

    def takes(self, codec) -> bool:
        return codec.precision_bits in self.bits and codec.states in self.states

    def names(self, kind: str) -> list[str]:
        return [f"{kind}{b}" + (f"x{n}" if n > 1 else "") for b in self.bits for n in self.states]

    def text(self, kind: str) -> str:
        """``tans5..12, N = 1..16`` (ranges of three or more as ``a..b``)."""
        n = ranges_text(self.states)
        return f"{kind}{ranges_text(self.bits)}" + ("" if self.states == (1,) else f", N = {n}")


@dataclass(frozen=True)
class FormalConfig:
    """What ``sim/formal/`` needs to pick and size the harnesses of a build (``ansforge prove``).

    Attributes
    ----------
    harness : str
        ``"module:Class"`` of the core the harness builds at the small configuration (``SMALL``, or
        ``SMALL_XN`` when ``states > 1``): the shipped core class, whose netlist ``sim/formal/mutants.py``
        edits for ``--mutants``.
    states : int
        ``N`` of the small build (1: the one-state harnesses and lemmas; more: the port properties).
    progress_clocks : int
        Longest run of clocks without a transfer that ``progress`` allows.
    min_depth : int
        The least depth the port properties run at (0: ``--depth`` as given).
    baked : bool
        The port harnesses run on a baked table with ``cfg`` tied off.
    """

    harness: str
    states: int = 1
    progress_clocks: int = 6
    min_depth: int = 0
    baked: bool = False

    @property
    def harness_class(self):
        return _resolve(self.harness)


@dataclass(frozen=True)
class CoreBuild:
    """One shipped build of a core: a row of :data:`REGISTRY`.

    Attributes
    ----------
    name : str
        The name every hardware verb's ``--core`` takes.
    kind, role : str
        ``"tans"``/``"rans"``; ``"decoder"``/``"encoder"``.
    codecs : tuple of CodecSet
        The codecs (and interleaved state counts ``N``) it takes; every other is refused by
        :func:`build_core` in one line (:func:`refusal`).
    core : str
        ``"module:Class"`` (in :mod:`ansforge.hdl`) of the core (coder and command shell).
    coders, shells : tuple of str
        The coder and shell classes it is made of (for ``N = 1`` first, then ``N > 1`` where they differ).
    default_codec : str
        The codec it is built for when none is given: for the base builds the default container format's
        (``tans8x16``, ``rans16x16``: what ``ansforge compress`` writes, so that every hardware path
        decodes that container by default), for an interleaved row its own ``N``.
    paper : str
        The paper's configuration of its kind (``tans8``, ``rans16``: Table 3's one-state coders); a
        ``<base>-x<N>`` build defaults to it with ``xN`` (``tans-decoder-x4``: ``tans8x4``). Default: the
        base build's, ``default_codec`` without its ``xN``.
    formal : FormalConfig or None
        Its formal harnesses (``ansforge prove``), or ``None``: none of its own.
    base : str
        The base build it is a build of (its own name for a base build).
    """

    name: str
    kind: str
    role: str
    codecs: tuple[CodecSet, ...]
    core: str
    coders: tuple[str, ...]
    shells: tuple[str, ...]
    default_codec: str
    formal: FormalConfig | None = None
    base: str = ""
    paper: str = ""

    def __post_init__(self):
        if not self.base:
            object.__setattr__(self, "base", self.name)
        if not self.paper:
            object.__setattr__(self, "paper", PAPER[self.kind])

    @property
    def states(self) -> tuple[int, ...]:
        """Every ``N`` it takes, in order."""
        return tuple(sorted({n for s in self.codecs for n in s.states}))

    @property
    def interleaved(self) -> bool:
        """Whether it is an interleaved-state build (every codec it takes has ``N > 1``)."""
        return 1 not in self.states

    def takes(self, codec) -> bool:
        """Whether it takes ``codec`` (a codec object)."""
        return (getattr(codec, "kind", None) == self.kind and any(s.takes(codec) for s in self.codecs)
                and no_core(codec, self.role) is None)

    def codec_names(self) -> list[str]:
        """Every codec name (``parse_codec``'s) it takes."""
        return [n for s in self.codecs for n in s.names(self.kind)]

    def takes_text(self) -> str:
        """What it takes, in words: ``rans5..24; rans16, N = 5..16``."""
        return "; ".join(s.text(self.kind) for s in self.codecs)

    @property
    def core_class(self):
        return _resolve(self.core)

    @property
    def coder_classes(self) -> tuple:
        return tuple(_resolve(c) for c in self.coders)

    @property
    def shell_classes(self) -> tuple:
        return tuple(_resolve(c) for c in self.shells)

    def build(self, codec=None, table=None, **options) -> "wiring.Component":
        """This build for ``codec`` (default: :attr:`default_codec`), with ``table`` baked in (or as the
        reset contents of a programmable core); a codec it does not take is a ``ConfigError`` of one line
        (:func:`refusal`). ``options``: the core's hardware choices (``programmable``, ``max_symbols``,
        ``max_extra_bits``, ``table_sets``, ``shell``, ``block_crc`` (decoders), ``count_bits``)."""
        from ..model.coding.codecs import parse_codec
        from ..model.errors import ConfigError

        codec = parse_codec(self.default_codec) if codec is None else codec
        if not self.takes(codec):
            raise ConfigError(refusal(codec, self.role, self))
        return self.core_class(codec, table=table, **options)


def _resolve(ref: str):
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(f"ansforge.hdl.{module}"), name)


_TANS_BITS = tuple(range(5, 13))        # parse_codec's tansR
_RANS_BITS = tuple(range(5, 25))        # parse_codec's ransP
_XN = tuple(range(1, 17))               # hdl/tans/cores_xn.py XN_STATES (model/coding/stream.py MAX_STATES)
_RANS_DEC_XN = tuple(range(5, 17))      # hdl/rans/decoder_xn.py XN_STATES
_RANS_ENC_XN = (16,)                    # hdl/rans/encoder_xn.py ENCODER_XN_STATES

#: The shipped builds. The base builds first (in the order the command line lists them), then the
#: interleaved builds with a formal configuration of their own.
REGISTRY: tuple[CoreBuild, ...] = (
    CoreBuild("tans-decoder", "tans", "decoder", (CodecSet(_TANS_BITS, _XN),), "tans.cores_xn:TansXnDecoder",
              ("tans.decoder_one:TansDecoderCoder", "tans.decoder_xn:TansXnDecoderCoder"), ("shell:DecoderShell",),
              default_for("tans"),
              FormalConfig("tans.cores_xn:TansXnDecoder", progress_clocks=6)),
    CoreBuild("tans-encoder", "tans", "encoder", (CodecSet(_TANS_BITS, _XN),), "tans.cores_xn:TansXnEncoder",
              ("tans.encoder_one:TansEncoderCoder", "tans.encoder_xn:TansXnEncoderCoder"), ("shell:EncoderShell",),
              default_for("tans"),
              FormalConfig("tans.cores_xn:TansXnEncoder", progress_clocks=6)),
    CoreBuild("rans-decoder", "rans", "decoder", (CodecSet(_RANS_BITS, (1,)), CodecSet((16,), _RANS_DEC_XN)),
              "rans.cores:RansDecoder", ("rans.decoder_one:RansDecoderCoder", "rans.decoder_xn:RansDecoderCoderXN"),
              ("rans.shell:RansDecoderShell", "rans.shell_xn:RansDecoderShellXN"), default_for("rans"),
              FormalConfig("rans.cores:RansDecoder", progress_clocks=8)),
    CoreBuild("rans-encoder", "rans", "encoder", (CodecSet(_RANS_BITS, (1,)),
                                                  CodecSet(tuple(range(8, 25)), _RANS_ENC_XN)),
              "rans.cores:RansEncoder", ("rans.encoder_one:RansEncoderCoder", "rans.encoder_xn:RansEncoderXnCoder"),
              ("rans.shell:RansEncoderShell", "rans.shell_xn:RansEncoderShellXN"), default_for("rans"),
              FormalConfig("rans.cores:RansEncoder", progress_clocks=6)),
    CoreBuild("tans-decoder-x2", "tans", "decoder", (CodecSet(_TANS_BITS, (2,)),), "tans.cores_xn:TansXnDecoder",
              ("tans.decoder_xn:TansXnDecoderCoder",), ("shell:DecoderShell",), "tans8x2",
              FormalConfig("tans.cores_xn:TansXnDecoder", states=2, progress_clocks=6), base="tans-decoder"),
    CoreBuild("tans-encoder-x2", "tans", "encoder", (CodecSet(_TANS_BITS, (2,)),), "tans.cores_xn:TansXnEncoder",
              ("tans.encoder_xn:TansXnEncoderCoder",), ("shell:EncoderShell",), "tans8x2",
              FormalConfig("tans.cores_xn:TansXnEncoder", states=2, progress_clocks=6), base="tans-encoder"),
    CoreBuild("rans-decoder-x5", "rans", "decoder", (CodecSet((16,), (5,)),), "rans.cores:RansDecoder",
              ("rans.decoder_xn:RansDecoderCoderXN",), ("rans.shell_xn:RansDecoderShellXN",), "rans16x5",
              FormalConfig("rans.cores:RansDecoder", states=5, progress_clocks=12, min_depth=20, baked=True),
              base="rans-decoder"),
    CoreBuild("rans-encoder-x16", "rans", "encoder", (CodecSet(tuple(range(8, 25)), (16,)),), "rans.cores:RansEncoder",
              ("rans.encoder_xn:RansEncoderXnCoder",), ("rans.shell_xn:RansEncoderShellXN",), "rans16x16",
              FormalConfig("rans.cores:RansEncoder", states=16, progress_clocks=16, min_depth=20), base="rans-encoder"),
)

_BY_NAME = {r.name: r for r in REGISTRY}
#: The base build of each (kind, role): what :func:`build_core` builds for a codec.
BASE_BUILDS: dict[tuple[str, str], CoreBuild] = {(r.kind, r.role): r for r in REGISTRY if r.base == r.name}


def base_names() -> list[str]:
    """The base builds' names: ``tans-decoder``, ``tans-encoder``, ``rans-decoder``, ``rans-encoder``."""
    return [r.name for r in REGISTRY if r.base == r.name]


def interleaved_names() -> list[str]:
    """The names of the interleaved builds a base takes, ``<base>-x<N>`` for each of its ``N > 1``."""
    return [f"{r.name}-x{n}" for r in REGISTRY if r.base == r.name for n in r.states if n > 1]


def core_names() -> list[str]:
    """Every name ``--core`` takes: the base builds, then their interleaved builds (:func:`core_build`)."""
    return base_names() + interleaved_names()


def prove_names() -> list[str]:
    """The builds with formal harnesses (``ansforge prove``), in :data:`REGISTRY`'s order."""
    return [r.name for r in REGISTRY if r.formal is not None]


def core_build(name: str) -> CoreBuild:
    """The build ``name``: a row of :data:`REGISTRY`, or ``<base>-x<N>``, the base build restricted to the
    codecs of ``N`` states (its default codec the base's with ``xN``; no formal configuration). Any other
    name is a ``ValueError`` naming the builds."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    base, _, n = str(name).rpartition("-x")
    row = _BY_NAME.get(base)
    if row is not None and row.base == base and n.isdigit() and int(n) > 1 and int(n) in row.states:
        N = int(n)
        codecs = tuple(CodecSet(s.bits, (N,)) for s in row.codecs if N in s.states)
        return dataclasses.replace(row, name=name, codecs=codecs, default_codec=f"{row.paper}x{N}",
                                   formal=None, coders=row.coders[-1:], shells=row.shells[-1:], base=base)
    raise ValueError(f"core must be one of {', '.join(base_names())} or <core>-x<N> ({names_text()}), "
                     f"not {name!r}")


def names_text() -> str:
    """The interleaved builds in a line: ``tans-decoder-x2..x16, ..., rans-encoder-x16``."""
    out = []
    for r in REGISTRY:
        if r.base == r.name:
            ns = [n for n in r.states if n > 1]
            if ns:
                out.append(f"{r.name}-x" + ranges_text(ns).replace("..", "..x").replace(", ", ", x"))
    return ", ".join(out)


def cores_for(codec, role: str | None = None) -> list[CoreBuild]:
    """The base builds that take ``codec`` (a codec object) in ``role`` (``None``: either role)."""
    return [r for r in REGISTRY if r.base == r.name and (role is None or r.role == role) and r.takes(codec)]


def takes_text(kind: str | None = None, role: str | None = None) -> str:
    """Which base builds take what, in one line: ``tans-decoder takes tans5..12, N = 1..16; ...``."""
    return "; ".join(f"{r.name} takes {r.takes_text()}" for r in REGISTRY if r.base == r.name
                     and (kind is None or r.kind == kind) and (role is None or r.role == role))


def refusal(codec, role: str, build: CoreBuild | None = None) -> str:
    """The one line that refuses ``codec`` for ``role`` (in ``build``, or in every core of its role)."""
    legacy = no_core(codec, role)
    if legacy is not None:
        return legacy
    name = getattr(codec, "name", codec)
    if build is not None and build.base != build.name:
        return f"codec {name}: the {build.name} build takes {build.takes_text()} (docs/bitstream.md §8)"
    where = takes_text(kind=getattr(codec, "kind", None), role=role)
    return f"codec {name}: no {role} core takes it ({where}; docs/bitstream.md §8)"


def core_for(codec, role: str) -> CoreBuild:
    """The base build of ``role`` that takes ``codec``; ``ConfigError`` (:func:`refusal`) if none does."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    found = cores_for(codec, role)
    if not found:
        from ..model.errors import ConfigError

        if getattr(codec, "kind", None) not in KINDS:
            raise ValueError(f"no {role!r} core for codec {codec!r} (roles: {', '.join(ROLES)})")
        raise ConfigError(refusal(codec, role))
    return found[0]


def build_core(codec, role: str, table=None, **options) -> "wiring.Component":
    """The ``role`` (``"decoder"`` or ``"encoder"``) core of ``codec`` (:func:`core_for`), with ``table``
    baked in (or as the reset contents of a programmable core). ``options`` are the core's hardware
    choices: ``programmable``, ``max_symbols`` (symbol slots, 2 to 256), ``max_extra_bits`` (0 to 32),
    ``table_sets``, ``shell``, ``block_crc`` (decoders), ``count_bits``; the core checks them."""
    if role not in ROLES or getattr(codec, "kind", None) not in KINDS:
        raise ValueError(f"no {role!r} core for codec {codec!r} (roles: {', '.join(ROLES)})")
    return core_for(codec, role).build(codec, table, **options)


def paper_codec(core: str) -> str:
    """The paper's codec of build ``core`` (:func:`core_build`), Table 3's configuration: ``tans8`` for
    ``tans-decoder``, ``rans16x5`` for ``rans-decoder-x5`` (an interleaved build's own ``N``). What a build
    is made for when no codec is given is :func:`default_codec`."""
    build = core_build(core)
    return build.paper if build.base == build.name else build.default_codec


def default_codec(core: str) -> str:
    """The codec build ``core`` is made for when none is given (:attr:`CoreBuild.default_codec`): the
    default container format's for a base build (``tans8x16`` for ``tans-decoder``, ``rans16x16`` for
    ``rans-decoder``), the build's own ``N`` for ``<base>-x<N>`` (``tans8x4`` for ``tans-decoder-x4``)."""
    return core_build(core).default_codec


def table_writes(core, tables) -> dict[str, list[dict]]:
    """Per ``cfg`` port of ``core``, the unpacked writes (``{addr, data}``) that load ``tables[t]`` as
    table set ``t`` (a fixed-table core has the same method; only a programmable one has the ports)."""
    return core.table_writes(tables)


def _doc_class(ref: str) -> str:
    module, _, name = ref.partition(":")
    return f"`{name}` (`hdl/{module.replace('.', '/')}.py`)"


def markdown_table() -> list[str]:
    """The README's table of cores (``tests/hdl/test_core_registry.py`` checks that the README holds it)."""
    lines = ["| `--core` | role | codecs and `N` | core | coder | shell | formal (`ansforge prove`) |",
             "|---|---|---|---|---|---|---|"]
    for r in REGISTRY:
        name = f"`{r.name}`" + (f", `{r.name}-x<N>`" if r.base == r.name and max(r.states) > 1 else "")
        formal = "—" if r.formal is None else (f"{_doc_class(r.formal.harness)}, N = {r.formal.states}")
        lines.append(f"| {name} | {r.kind} {r.role} | {r.takes_text()} (default `{r.default_codec}`"
                     f"{f', paper `{r.paper}`' if r.base == r.name else ''}) | "
                     f"{_doc_class(r.core)} | {', '.join(_doc_class(c) for c in r.coders)} | "
                     f"{', '.join(_doc_class(c) for c in r.shells)} | {formal} |")
    return lines


# --- old names, derived from the registry ------------------------------------------------------------------


class _LazyClasses(dict):
    """``{(kind, role): core class}`` of the base builds, resolved when read (the old ``CORE_CLASSES``)."""

    def __init__(self):
        super().__init__({k: None for k in BASE_BUILDS})

    def __getitem__(self, key):
        return BASE_BUILDS[key].core_class

    def get(self, key, default=None):
        return self[key] if key in BASE_BUILDS else default

    def values(self):
        return [self[k] for k in self]

    def items(self):
        return [(k, self[k]) for k in self]


#: The core class of each codec kind and role (the base builds' :attr:`CoreBuild.core_class`).
CORE_CLASSES = _LazyClasses()
#: The paper's codec of each kind's base builds (Table 3's configurations; :attr:`CoreBuild.paper`).
PAPER_CODECS = {r.kind: r.paper for r in REGISTRY if r.base == r.name}


def core_states(codec, role: str) -> tuple[int, ...]:
    """The ``N`` the ``role`` base build of ``codec``'s kind takes (old name: use :func:`core_for`, which
    also checks the codec's parameters)."""
    row = BASE_BUILDS.get((getattr(codec, "kind", None), role))
    return row.states if row is not None else (1,)
