"""Build of the optional native kernels (``ansforge.model.coding.nativeans``); metadata is in pyproject.toml.

The extension is optional: without a C compiler ``pip install`` still succeeds and ``fastans`` runs
the numba kernels instead. Portable flags only (no ``-march``): the wheel must run on other CPUs.
"""

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing when the compiler is missing or fails."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure leaves the numba fallback
            print(f"ansforge: native kernels not built ({exc}); the numba kernels will be used", file=sys.stderr)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            print(f"ansforge: native kernels not built ({exc}); the numba kernels will be used", file=sys.stderr)


extra = [] if sys.platform == "win32" else ["-O3", "-std=c99", "-fno-strict-aliasing", "-fno-tree-slp-vectorize", "-ffp-contract=off"]
setup(
    # nativeans_simd.c: the kernels for AVX2 and AVX-512; nativecrc.c: the block CRC (PCLMULQDQ where the CPU
    # has it) (function target attributes, chosen at run time by CPU features: the flags above stay portable);
    # nativetable.c: the code tables' normalization and escape search; nativeans.h is shared by all four
    ext_modules=[Extension("ansforge.model.coding.nativeans",
                           ["model/coding/nativeans.c", "model/coding/nativeans_simd.c",
                            "model/coding/nativecrc.c", "model/coding/nativetable.c"],
                           depends=["model/coding/nativeans.h"], extra_compile_args=extra, optional=True)],
    cmdclass={"build_ext": OptionalBuildExt},
)
