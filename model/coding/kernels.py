"""Which compiled kernels run the stream coders and the pair passes: the C extension or numba.

Two implementations, one interface (:mod:`.fastans` for streams, :mod:`.fastpairs` for the passes
between a tensor's values and its coding pairs):

native (preferred)
    The C extension :mod:`.nativeans` (``nativeans.c``), built by ``pip install`` where a compiler is
    present (``setup.py``; optional). Why C: it costs nothing at import (numba costs ~0.2 s to import
    and ~0.4 s to load its cached code in every process: most of a `decompress`), it reads the word
    stack as one little-endian bit string with unaligned 64-bit loads, keeps ``N`` interleaved states
    in registers (one specialization per ``N = 1 .. 16``), and :func:`.fastans.decode_values` writes a
    tensor's values without the intermediate pairs (BMI2 ``pdep``/``bzhi`` chosen at run time, never
    ``-march``: the wheel runs on any x86-64 and elsewhere).
    The SIMD kernels (``nativeans_simd.c``) are chosen at import by CPU features: AVX-512 (F, BW, DQ,
    VL) codes ``rans16x16`` with its 16 states in one register (decode and encode, pairs or values) and
    encodes ``tans8x16``-style streams the same way (tables of at most 64 symbols, pairs of at most 32 bits),
    AVX2 decodes ``tans8x16``-style streams to values where the CPU's gathers are fast, the AVX-512
    VBMI kernel of ``nativeans.c`` does where the CPU has it, and where AVX-512 lacks VBMI (Cascade
    Lake, whose gathers are slow) the permute kernel of ``nativeans_simd.c`` does (``N = 16``, ``L <=
    256``: table lookups by two-register permutes, no gathers). ``nativeans.simd_level(0 | 1 | 2)`` (or
    ``ANSFORGE_SIMD=scalar|avx2|avx512`` for a process) caps the level, ``nativeans.simd(0)`` forces the
    scalar kernels: the tests compare every path, bit for bit. The container's block CRC
    (``nativecrc.c``, :func:`.stream.block_crcs`) folds the words with PCLMULQDQ (VPCLMULQDQ where the
    CPU has it with AVX-512), reversed in registers; ``nativeans.crc32_path(0 | 1 | 2)`` caps it the same
    way.
numba (fallback)
    :mod:`.numba_kernels` (``@njit(nogil=True, cache=True)``), imported only when the extension is
    missing or ``ANSFORGE_KERNELS=numba`` / :func:`set_backend` asks for it.

Both release the GIL, so threads decode independent segments at once (:func:`default_threads`).
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["NATIVE_OUT", "nativeans", "backend", "set_backend", "native", "numba", "numba_importable", "default_threads"]

try:  # built by `pip install` where a C compiler is present (setup.py); optional
    from . import nativeans
except ImportError:  # pragma: no cover - exercised on machines without a compiler
    nativeans = None

#: Which kernels run: "native" (the C extension) where it is built, else "numba"; the environment
#: variable ANSFORGE_KERNELS=numba (or :func:`set_backend`) selects the numba kernels anyway.
_backend = "native" if nativeans is not None and os.environ.get("ANSFORGE_KERNELS", "") != "numba" else "numba"
_numba_module = None

#: Output arrays the native decoders and joins write: (symbols, additional data) dtypes.
NATIVE_OUT = {(np.dtype(np.uint8), np.dtype(np.uint32)), (np.dtype(np.int64), np.dtype(np.uint64))}


def backend() -> str:
    """The kernels in use: ``"native"`` (C extension ``nativeans``) or ``"numba"``."""
    return _backend


def set_backend(name: str) -> str:
    """Select the kernels (``"native"`` or ``"numba"``); returns the previous choice. For tests and
    benchmarks that compare the two; ``"native"`` needs the extension to be built."""
    global _backend
    if name not in ("native", "numba") or (name == "native" and nativeans is None):
        from ..errors import ConfigError
        raise ConfigError(f"kernels {name!r} are not available (native built: {nativeans is not None})")
    old, _backend = _backend, name
    return old


def native() -> bool:
    """Whether the C extension's kernels run (else numba's)."""
    return _backend == "native"


def numba():
    """The numba kernels (:mod:`.numba_kernels`), imported on first use (importing numba costs ~0.2 s)."""
    global _numba_module
    if _numba_module is None:
        from . import numba_kernels
        _numba_module = numba_kernels
    return _numba_module


def numba_importable() -> bool:
    """Whether numba is installed (the fallback kernels can run)."""
    import importlib.util
    return importlib.util.find_spec("numba") is not None


def default_threads() -> int:
    """Threads used when none are asked for: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        return max(1, os.cpu_count() or 1)
