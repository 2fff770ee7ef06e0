"""Honest speed figures of the software path against its peers (BENCHMARKS.md's ``software`` section).

Rules every figure here follows: CPU time is the process's (``time.process_time`` in-process,
``RUSAGE_CHILDREN`` for whole processes) and is labelled so, wall time is labelled wall; the methods
compared run on the same data, interleaved (round robin, ``reps`` rounds), and each is reported by
its minimum and median over those rounds, so a ratio compares like with like; each peer is named
with its version; nothing is extrapolated.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

__all__ = ["package_version", "interleaved", "kernel_section", "model_section", "threads_section", "cli_section",
           "fuzz_section", "software_section"]


def _zstd_version(zstd: str) -> str:
    """``zstd CLI v1.5.4`` from the banner ``*** Zstandard CLI (64-bit) v1.5.4, by Yann Collet ***``."""
    out = subprocess.run([zstd, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"v\d+(?:\.\d+)+", out)
    return f"zstd CLI {m.group(0)}" if m else out.strip().split(",")[0]


def package_version(pkg: str) -> str | None:
    """The installed version of distribution ``pkg``, or ``None`` when it is not installed."""
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def interleaved(fns: dict[str, Callable[[], object]], reps: int) -> dict[str, list[float]]:
    """Process CPU seconds of each function over ``reps`` round-robin rounds (same order every round)."""
    out: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            t = time.process_time()
            fn()
            out[k].append(time.process_time() - t)
    return out


def _mm(xs: list[float]) -> tuple[float, float]:
    return min(xs), statistics.median(xs)


def _huffman_rows(ck, bits: np.ndarray, n: int, fns: dict, per: dict, checks: list) -> str:
    """Add the DFloat11-style Huffman rows (model/coding/huffman.py, compiled) to ``fns``: per tensor on
    the benchmark tensor, and per layer (one code shared by layer 0's matrices, against each matrix with
    its own code) on those matrices. Returns the sentence the table's legend needs."""
    from ..model.coding import huffman
    from ..model.dtypes.pairs import convert
    if not huffman.native_available():
        return ("DFloat11-style Huffman: no speed rows, the native extension is not built here "
                "(its sizes are rows of `ansforge tables`). ")
    h = huffman.encode_bf16_native(bits)
    out = np.empty(n, dtype=np.uint16)
    label = "Huffman per tensor (DFloat11-style; this project's C)"
    # as the ANS rows, the code is built before the clock starts (the tables are too)
    fns[f"{label}: encode"] = lambda: huffman.encode_bf16_native(bits, h.lengths)
    fns[f"{label}: decode to bf16 values"] = lambda: huffman.decode_bf16_native(h, out)
    checks.append(lambda: np.array_equal(huffman.decode_bf16_native(h, out), bits.ravel()))
    layer = re.compile(r"(?:^|\.)(?:layers?|h|blocks?)\.0\.")
    names = [i.name for i in ck.infos() if len(i.shape) == 2 and layer.search(i.name)]
    legend = (f"Huffman = DFloat11's layout (exponents Huffman-coded, at most 32 bits a code, MSB first; sign and "
              f"mantissa one raw byte per weight) in this project's C, one thread (DFloat11's own decoder is a CUDA "
              f"kernel and does not run here): per tensor {h.nbits / n:.4f} exponent bits per weight on this tensor; "
              "a 2^12-entry first-level table, one load per two codes. ")
    if not names:
        return legend
    tensors = [convert(ck.tensor(k).array, "F32", "bf16")[0].ravel() for k in names]
    m = int(sum(t.size for t in tensors))
    shared = huffman.code_lengths(sum(np.bincount((t >> 7) & 0xFF, minlength=256) for t in tensors))
    own = [huffman.encode_bf16_native(t) for t in tensors]
    one = [huffman.encode_bf16_native(t, shared) for t in tensors]
    outs = [np.empty(t.size, dtype=np.uint16) for t in tensors]
    for tag, hs in (("own code per matrix", own), ("one code for the layer", one)):
        k = f"Huffman per layer (layer 0's {len(names)} matrices, {tag}): decode to bf16 values"
        fns[k] = lambda hs=hs: [huffman.decode_bf16_native(x, o) for x, o in zip(hs, outs)]
        per[k] = m
        checks.append(lambda hs=hs: all(np.array_equal(huffman.decode_bf16_native(x, o), t)
                                         for x, o, t in zip(hs, outs, tensors)))
    k = f"Huffman per layer (layer 0's {len(names)} matrices, one code for the layer): encode"
    fns[k] = lambda: [huffman.encode_bf16_native(t, shared) for t in tensors]
    per[k] = m
    bits_own = sum(x.nbits for x in own) / m
    bits_one = sum(x.nbits for x in one) / m
    return legend + (f"Layer 0 ({m:,} weights): {bits_own:.4f} exponent bits per weight with a code per matrix, "
                     f"{bits_one:.4f} with one code for the layer. ")


def kernel_section(path: str, reps: int = 5, golden_pairs: int = 1 << 18) -> list[str]:
    """One thread, bf16 pairs of MiniLM's largest matrix: compiled kernels, golden models, bulk lanes,
    constriction, zstd -3 and ZipNN on the same tensor, interleaved."""
    from ..model.coding import constriction_codec, fastans, kernels
    from ..model.llm.checkpoint import open_checkpoint
    from ..model.coding.codecs import parse_codec
    from ..model.coding.lanes import decode_lanes, encode_lanes
    from ..model.dtypes.pairs import BF16, convert
    from ..model.coding.stream import Run

    ck = open_checkpoint(path)
    name = max((i for i in ck.infos() if len(i.shape) == 2), key=lambda i: i.size).name
    bits = convert(ck.tensor(name).array, "F32", "bf16")[0]
    pairs = BF16.split(bits)
    counts = pairs.counts()
    n = int(pairs.codes.size)
    raw = bits.tobytes()
    fns: dict[str, Callable[[], object]] = {}
    checks: list[Callable[[], bool]] = []
    per: dict[str, int] = {}
    # The interleaved codecs (docs/bitstream.md §8) are compiled-only rows: their golden coder is the
    # same model with more states, and the bulk lanes take single-state codecs.
    native = kernels.backend() == "native"
    kind = "native" if native else "numba"

    def with_kernels(name, fn):
        """``fn`` run with the ``name`` kernels (the numba fallback rows beside the native ones)."""
        def run():
            old = kernels.set_backend(name)
            try:
                return fn()
            finally:
                kernels.set_backend(old)
        return run

    for codec in ("tans8", "tans8x4", "tans8x8", "tans8x16", "rans16", "rans16x2", "rans16x16", "rans24"):
        spec = parse_codec(codec)
        ct, table = spec.tables(counts, 8)
        s, e = ct.to_symbols(pairs.codes, pairs.extra, compact=True)
        runs = [Run(0, n)]
        st = fastans.encode(spec, [table], runs, s, e, 1 << 20)
        enc = lambda spec=spec, t=table, s=s, e=e, r=runs: fastans.encode(spec, [t], r, s, e, 1 << 20)
        dec = lambda spec=spec, t=table, st=st, r=runs: \
            fastans.decode_segments(spec, st.words, [t], r, st.checkpoints, 1, compact=True)
        fns[f"{spec.label()}: {kind} encode"] = enc
        fns[f"{spec.label()}: {kind} decode (pairs)"] = dec
        if native and (spec.kind == "tans" or codec == "rans16x16"):
            joins = [(ct, pairs.exponents, 0)]
            fns[f"{spec.label()}: native decode to bf16 values"] = \
                lambda spec=spec, t=table, st=st, r=runs, j=joins: fastans.decode_values(
                    spec, st.words, [t], r, st.checkpoints, j, BF16, 1)
            checks.append(lambda spec=spec, t=table, st=st, r=runs, j=joins: np.array_equal(
                fastans.decode_values(spec, st.words, [t], r, st.checkpoints, j, BF16, 1), bits.ravel()))
        if native and codec in ("tans8", "tans8x8", "rans16"):
            fns[f"{spec.label()}: numba encode (fallback)"] = with_kernels("numba", enc)
            fns[f"{spec.label()}: numba decode (pairs, fallback)"] = with_kernels("numba", dec)
            checks.append(lambda enc=enc, st=st: np.array_equal(with_kernels("numba", enc)().words, st.words))
        checks.append(lambda spec=spec, t=table, st=st, s=s, e=e, r=runs: all(
            np.array_equal(a, b) for a, b in zip(fastans.decode_segments(spec, st.words, [t], r, st.checkpoints, 1),
                                                 (s, e))))
        if spec.states > 1:
            continue
        s, e = s.astype(np.int64), e.astype(np.uint64)  # the golden models' and the bulk lanes' types
        gs, ge = s[:golden_pairs], e[:golden_pairs]
        gst = spec.coder().encode([table], [Run(0, gs.size)], gs, ge)
        lanes = encode_lanes(spec, table, s, e, 16384)
        fns[f"{spec.label()}: golden encode"] = lambda spec=spec, t=table, s=gs, e=ge: \
            spec.coder().encode([t], [Run(0, s.size)], s, e)
        fns[f"{spec.label()}: golden decode"] = lambda spec=spec, t=table, st=gst, k=gs.size: \
            spec.coder().decode(st.words, [t], [Run(0, k)])
        fns[f"{spec.label()}: bulk lanes decode"] = lambda spec=spec, t=table, lw=lanes: decode_lanes(spec, t, lw, n)
        for k in ("golden encode", "golden decode"):
            per[f"{spec.label()}: {k}"] = int(gs.size)
    words = constriction_codec.encode_codes(pairs.codes, counts)
    fns["constriction (codes only): encode"] = lambda: constriction_codec.encode_codes(pairs.codes, counts)
    fns["constriction (codes only): decode"] = lambda: constriction_codec.decode_codes(words, counts, n)
    import zstandard
    zc = zstandard.ZstdCompressor(level=3)
    zd = zstandard.ZstdDecompressor()
    zblob = zc.compress(raw)
    zv = package_version("zstandard")
    fns[f"zstd -3 (zstandard {zv}): compress"] = lambda: zc.compress(raw)
    fns[f"zstd -3 (zstandard {zv}): decompress"] = lambda: zd.decompress(zblob)
    zipnn_v = package_version("zipnn")
    if zipnn_v:
        from zipnn import ZipNN
        z = ZipNN(input_format="byte", bytearray_dtype="bfloat16", threads=1)
        # ZipNN 0.5.4 byte-groups its input in place (even a bytes object): every call gets its own copy.
        zz = z.compress(bytearray(raw))
        if bytes(z.decompress(zz)) != raw:
            raise AssertionError("ZipNN did not round-trip")
        fns[f"ZipNN {zipnn_v} (1 thread, input copy included): compress"] = lambda: z.compress(bytearray(raw))
        fns[f"ZipNN {zipnn_v} (1 thread): decompress"] = lambda: z.decompress(zz)
    huff_note = _huffman_rows(ck, bits, n, fns, per, checks)
    if not all(c() for c in checks):
        raise AssertionError("a compiled kernel did not round-trip")
    times = interleaved(fns, reps)
    kernels = ("native = the C extension `ansforge.model.coding.nativeans` (built by `pip install`; "
               "`__builtin_cpu_supports` picks its BMI2 and AVX-512 paths at run time), numba = the fallback kernels "
               f"(`numba_kernels.py`, numba {package_version('numba')})") if native else \
        "numba = `numba_kernels.py` (the native extension is not built here)"
    md = ["### Coders on one tensor, one thread", "",
          f"Tensor `{name}` ({n:,} bf16 values). Process CPU time, {reps} interleaved rounds (every method once "
          f"per round, same order), min and median; load average {os.getloadavg()[0]:.1f} at the end. Golden = "
          f"the pure-Python single-lane hardware model, on the first {golden_pairs:,} pairs; {kernels}: the same "
          "algorithm and bitstream as the golden model, whole tensor, checkpoints every 2^20 pairs, one thread. "
          "`xN`: N interleaved states in the one stream (docs/bitstream.md §8; `rans16xN` with S = 32, W = 16, the interleaved preset). "
          "\"decode (pairs)\" writes symbols and additional data; \"decode to bf16 values\" writes the bf16 bit "
          "patterns themselves (the join of the pairs included). bulk = NumPy, 16,384 lanes. constriction codes "
          "the exponent codes only (no additional data); zstd and ZipNN compress the tensor's bf16 bytes. " + huff_note, "",
          "| Method | M weights / CPU-s (min time) | M weights / CPU-s (median time) |", "|---|---:|---:|"]
    for k, ts in times.items():
        lo, med = _mm(ts)
        m = per.get(k, n)
        md.append(f"| {k} | {m / lo / 1e6:,.1f} | {m / med / 1e6:,.1f} |")
    if zipnn_v:
        md += ["", "Ratios from the same rounds (ansforge compiled / ZipNN, CPU time; > 1 means ansforge is slower):", ""]
        dec_rows = [f"{c}: native decode to bf16 values" for c in ("tANS 8 bits x16", "tANS 8 bits x8",
                                                                  "rANS 16 bits x16")] if native else []
        for row in dec_rows + [f"{c}: {kind} {op}" for c in ("tANS 8 bits", "tANS 8 bits x8", "tANS 8 bits x16",
                                                              "rANS 16 bits", "rANS 16 bits x16")
                               for op in ("decode (pairs)", "encode")]:
            codec, op = row.split(": ", 1)
            zop = "compress" if op.endswith("encode") else "decompress"
            if row in times:
                a = times[row]
                b = times[[k for k in times if k.startswith(f"ZipNN {zipnn_v}") and k.endswith(zop)][0]]
                md.append(f"- {codec} {op} / ZipNN {zop}: min {min(a) / min(b):.2f}×, "
                          f"median {statistics.median(a) / statistics.median(b):.2f}×")
    huff = "Huffman per tensor (DFloat11-style; this project's C)"
    pairs_h = [("tANS 8 bits x16: native decode to bf16 values", f"{huff}: decode to bf16 values"),
               ("tANS 8 bits x8: native decode to bf16 values", f"{huff}: decode to bf16 values"),
               ("tANS 8 bits: native decode to bf16 values", f"{huff}: decode to bf16 values"),
               ("tANS 8 bits: native encode", f"{huff}: encode"),
               ("tANS 8 bits x8: native encode", f"{huff}: encode")]
    if all(a in times and b in times for a, b in pairs_h):
        md += ["", "Ratios from the same rounds (ansforge compiled / DFloat11-style Huffman, CPU time; "
               "> 1 means ansforge is slower):", ""]
        for a, b in pairs_h:
            md.append(f"- {a.replace(': ', ' ')} / Huffman {b.split(': ')[1]}: min {min(times[a]) / min(times[b]):.2f}×, "
                      f"median {statistics.median(times[a]) / statistics.median(times[b]):.2f}×")
    md.append("")
    return md


def _model_items(ck, pairs: str):
    """Every tensor of ``ck`` that ``compress --pairs pairs`` codes, as ``(name, CodingPairs)``."""
    from ..model.dtypes.pairs import PAIR_FORMATS, convert

    fmt = PAIR_FORMATS[pairs]
    items = []
    for info in ck.infos():
        if info.dtype not in ("F32", "BF16", "F16") or info.size == 0:
            continue
        bits = convert(ck.tensor(info.name).array, info.dtype, pairs)[0]
        items.append((info.name, fmt.split(np.ascontiguousarray(bits).reshape(info.shape))))
    return items


def model_section(path: str, reps: int = 5) -> list[str]:
    """All of a model in one process, one thread (issue 43's measure): every tensor with its own tables,
    encoded into independent blocks (the default layout) and decoded to values from the written file
    with every block's CRC checked, for the default tANS format and the rANS cores' format, against
    ZipNN's compress and decompress of the same bf16 bytes in the same rounds."""
    from ..model.coding import kernels
    from ..model.coding.codecs import parse_codec
    from ..model.coding.container import BLOCK_PAIRS, compress_checkpoint, encode_tensors, open_container
    from ..model.llm.checkpoint import open_checkpoint

    native = kernels.backend() == "native"
    nat = kernels.nativeans if native else None
    ck = open_checkpoint(path)
    fns: dict[str, Callable[[], object]] = {}
    weights: dict[str, int] = {}
    checks: list[Callable[[], bool]] = []
    tmp = tempfile.TemporaryDirectory(prefix="ansforge-model-")
    t = Path(tmp.name)
    raw = {}
    for pairs in ("bf16", "fp32"):
        items = _model_items(ck, pairs)
        n = sum(int(cp.codes.size) for _, cp in items)
        codecs = ("tans8x16", "rans16x16") if pairs == "bf16" else ("tans8x16",)
        for codec in codecs:
            spec = parse_codec(codec)
            f = t / f"{codec}-{pairs}.ansf"
            compress_checkpoint(path, f, codec, pairs=pairs)
            opened = open_container(f)
            want = {nm: opened.read(nm) for nm in opened.names}

            def decode(f=f):
                for _ in open_container(f).arrays(threads=1):  # parse, tables and every CRC again
                    pass

            def same(f=f, want=want):
                c = open_container(f)
                return all(np.array_equal(c.read(nm), v) for nm, v in want.items())
            checks.append(same)
            fns[f"{codec}, {pairs} pairs: encode (tables, blocks, CRCs)"] = \
                lambda spec=spec, items=items: encode_tensors(spec, items, None, 1, block_pairs=BLOCK_PAIRS)
            fns[f"{codec}, {pairs} pairs: decode to values (file parsed, CRCs checked)"] = decode
            if native and codec == "tans8x16" and pairs == "bf16":
                def capped(decode=decode):
                    old = nat.simd_level(-1)
                    nat.simd_level(1)
                    try:
                        decode()
                    finally:
                        nat.simd_level(old)
                fns[f"{codec}, {pairs} pairs: decode to values, AVX-512 off (AVX2 at most)"] = capped
            for k in list(fns):
                weights.setdefault(k, n)
        if pairs == "bf16":  # the bf16 bytes the coded tensors decode to: ZipNN's input
            raw[pairs] = b"".join(v.tobytes() for nm, v in want.items() if opened.record(nm)["coding"] == "pairs")
    zipnn_v = package_version("zipnn")
    if zipnn_v:
        from zipnn import ZipNN
        z = ZipNN(input_format="byte", bytearray_dtype="bfloat16", threads=1)
        zz = z.compress(bytearray(raw["bf16"]))
        if bytes(z.decompress(zz)) != raw["bf16"]:
            raise AssertionError("ZipNN did not round-trip")
        nz = len(raw["bf16"]) // 2
        fns[f"ZipNN {zipnn_v} (1 thread, input copy included): compress"] = lambda: z.compress(bytearray(raw["bf16"]))
        fns[f"ZipNN {zipnn_v} (1 thread): decompress"] = lambda: z.decompress(zz)
        weights[f"ZipNN {zipnn_v} (1 thread, input copy included): compress"] = nz
        weights[f"ZipNN {zipnn_v} (1 thread): decompress"] = nz
    if not all(c() for c in checks):
        raise AssertionError("a container did not decode to the tensors it was written from")
    times = interleaved(fns, reps)
    tmp.cleanup()
    md = ["### All of a model, one thread", "",
          f"MiniLM-L6, every tensor with its own tables ({sum(1 for _ in ck.infos())} tensors), the default layout "
          f"(independent blocks of at most {BLOCK_PAIRS:,} pairs, each with its CRC). Encode = `encode_tensors` on the "
          "tensors' coding pairs (tables built, blocks coded, CRCs computed); decode = the written file opened "
          "(records parsed, tables built) and every tensor decoded to its values with every block's CRC checked "
          f"(`Container.arrays`: what `decompress` writes, without the file). Process CPU time, {reps} interleaved rounds, min and "
          f"median; load average {os.getloadavg()[0]:.1f} at the end. ZipNN compresses and decompresses the same "
          "bf16 bytes, concatenated (its best case: one call).", "",
          "| Method | M weights / CPU-s (min time) | M weights / CPU-s (median time) |", "|---|---:|---:|"]
    for k, ts in times.items():
        lo, med = _mm(ts)
        md.append(f"| {k} | {weights[k] / lo / 1e6:,.1f} | {weights[k] / med / 1e6:,.1f} |")
    if zipnn_v:
        zd = times[f"ZipNN {zipnn_v} (1 thread): decompress"]
        zc = times[f"ZipNN {zipnn_v} (1 thread, input copy included): compress"]
        nz = weights[f"ZipNN {zipnn_v} (1 thread): decompress"]
        md += ["", "Speed against ZipNN in the same rounds (ansforge M weights per CPU-s / ZipNN's; > 1: ansforge "
               "is faster):", ""]
        for k in times:
            if k.startswith("ZipNN"):
                continue
            ref = zd if "decode" in k else zc
            a = [weights[k] / x for x in times[k]]
            b = [nz / x for x in ref]
            md.append(f"- {k} / ZipNN {'decompress' if 'decode' in k else 'compress'}: min-time "
                      f"{max(a) / max(b):.2f}×, median {statistics.median(a) / statistics.median(b):.2f}×")
    md.append("")
    return md


def threads_section(path: str, reps: int = 3, copies: int = 4) -> list[str]:
    """``compress`` and ``decompress`` with ``--threads 2`` against ``--threads 1`` on a file ``copies``
    times the model (its tensors repeated under new names), whole processes, wall time, interleaved."""
    from ..model.llm.checkpoint import SUPPORTED_DTYPES, open_checkpoint, write_safetensors

    py = sys.executable
    ck = open_checkpoint(path)
    infos = list(ck.infos())
    with tempfile.TemporaryDirectory(prefix="ansforge-threads-") as tmp:
        t = Path(tmp)
        big = t / "big.safetensors"
        specs = [(f"copy{c}.{i.name}", i.dtype, tuple(i.shape)) for c in range(copies) for i in infos]
        by_name = {i.name: i for i in infos}

        def stored(index: int, name: str):
            info = by_name[name.split(".", 1)[1]]
            raw = np.fromfile(ck.file_of(info), np.uint8, info.nbytes, offset=info.offset)
            return [raw.view(SUPPORTED_DTYPES[info.dtype]) if info.dtype in SUPPORTED_DTYPES else raw]
        write_safetensors(big, specs, stored)
        cmds = {}
        for th in (1, 2):
            cmds[f"compress --threads {th}"] = [py, "-m", "ansforge", "compress", "--model", str(big), "-o",
                                                str(t / f"c{th}.ansf"), "--threads", str(th), "--force", "--quiet"]
        _measure(cmds["compress --threads 1"])
        for th in (1, 2):
            cmds[f"decompress --threads {th}"] = [py, "-m", "ansforge", "decompress", str(t / "c1.ansf"), "-o",
                                                  str(t / f"d{th}.safetensors"), "--threads", str(th), "--force",
                                                  "--quiet"]
        cpu, wall = _interleaved_processes(cmds, reps)
        same = (t / "c1.ansf").read_bytes() == (t / "c2.ansf").read_bytes()
        size = big.stat().st_size
    md = [f"### Threads: a file {copies} times MiniLM", "",
          f"MiniLM-L6's tensors {copies} times over under new names ({size:,} bytes, fp32), the default format; whole "
          f"processes, {reps} interleaved rounds after a warm-up run of each, wall and CPU (user + system) seconds, "
          f"min / median; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end. "
          f"The `--threads 2` file is byte-identical to the `--threads 1` file: {same}.", "",
          "| Command | wall s (min) | wall s (median) | CPU s (min) | CPU s (median) |", "|---|---:|---:|---:|---:|"]
    for k in cmds:
        md.append(f"| {k} | {min(wall[k]):.2f} | {statistics.median(wall[k]):.2f} | {min(cpu[k]):.2f} | "
                  f"{statistics.median(cpu[k]):.2f} |")
    md.append("")
    for verb in ("compress", "decompress"):
        a, b = wall[f"{verb} --threads 2"], wall[f"{verb} --threads 1"]
        md.append(f"- `{verb} --threads 2` / `--threads 1`, wall: min {min(a) / min(b):.2f}, median "
                  f"{statistics.median(a) / statistics.median(b):.2f} (target ≤ 0.6)")
    md.append("")
    return md


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


#: The measured processes' environment: Python may write its bytecode cache, as a pip-installed package
#: ships it (an environment with PYTHONDONTWRITEBYTECODE would otherwise compile an editable checkout's
#: modules from source in every run, ~0.07 s here, while the peers' site-packages have their caches).
_CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _measure(cmd: list[str]) -> tuple[float, float]:
    """Whole-process CPU seconds (user + system, children included) and wall seconds of a command."""
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_CHILD_ENV)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}")
    return _children_cpu() - c0, wall


def _interleaved_processes(cmds: dict[str, list[str]], reps: int) -> tuple[dict, dict]:
    """Whole-process CPU and wall seconds of each command over ``reps`` round-robin rounds, after one
    warm-up run of each (not counted: it fills the page cache and Python's bytecode cache)."""
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    for cmd in cmds.values():
        _measure(cmd)
    for _ in range(reps):
        for k, cmd in cmds.items():
            c, w = _measure(cmd)
            cpu[k].append(c)
            wall[k].append(w)
    return cpu, wall


_ZIPNN_SCRIPT = ("import sys; from zipnn import ZipNN; z = ZipNN(input_format='byte', bytearray_dtype='float32', "
                 "threads=1); d = open(sys.argv[2], 'rb').read(); "
                 "open(sys.argv[3], 'wb').write(z.compress(d) if sys.argv[1] == 'c' else z.decompress(d))")


def cli_section(path: str, reps: int = 5, codec: str = "tans8x16", fast_codec: str | None = "tans8") -> list[str]:
    """Whole processes on the whole MiniLM file: ``ansforge compress``/``decompress`` against ``zstd -3``
    and ZipNN, interleaved; then ``decompress --threads``. ``codec`` is the default format; ``fast_codec``
    (here the paper's one-state ``tans8``, whose file size the default format is held to) adds its own
    compress and decompress rows."""
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="ansforge-speed-") as tmp:
        t = Path(tmp)
        cmds: dict[str, list[str]] = {
            f"ansforge compress ({codec})": [py, "-m", "ansforge", "compress", "--model", path, "-o", str(t / "m.ansf"),
                                             "--codec", codec, "--force"],
            "ansforge decompress": [py, "-m", "ansforge", "decompress", str(t / "m.ansf"), "-o", str(t / "m.st"),
                                    "--force"],
        }
        if fast_codec:
            cmds[f"ansforge compress ({fast_codec})"] = [py, "-m", "ansforge", "compress", "--model", path, "-o",
                                                         str(t / "f.ansf"), "--codec", fast_codec, "--force"]
            cmds[f"ansforge decompress ({fast_codec} file)"] = [py, "-m", "ansforge", "decompress", str(t / "f.ansf"),
                                                               "-o", str(t / "f.st"), "--force"]
        zstd = shutil.which("zstd")
        zstd_v = _zstd_version(zstd) if zstd else None
        if zstd:
            cmds[f"zstd -3 compress ({zstd_v})"] = [zstd, "-3", "-q", "-f", "-T1", path, "-o", str(t / "m.zst")]
            cmds["zstd -3 decompress"] = [zstd, "-d", "-q", "-f", str(t / "m.zst"), "-o", str(t / "m.raw")]
        zipnn_v = package_version("zipnn")
        if zipnn_v:
            cmds[f"ZipNN {zipnn_v} compress (1 thread, whole process)"] = [py, "-c", _ZIPNN_SCRIPT, "c", path,
                                                                           str(t / "m.znn")]
            cmds["ZipNN decompress (1 thread, whole process)"] = [py, "-c", _ZIPNN_SCRIPT, "d", str(t / "m.znn"),
                                                                 str(t / "m.zraw")]
        cpu, wall = _interleaved_processes(cmds, reps)
        original = Path(path).read_bytes()
        from safetensors.numpy import load_file
        a, b = load_file(path), load_file(str(t / "m.st"))
        exact = a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a)
        sizes = {f"ansforge ({codec})": (t / "m.ansf").stat().st_size}
        if fast_codec:
            c = load_file(str(t / "f.st"))
            exact = exact and a.keys() == c.keys() and all(a[k].tobytes() == c[k].tobytes() for k in a)
            sizes[f"ansforge ({fast_codec})"] = (t / "f.ansf").stat().st_size
        if zstd:
            sizes["zstd -3"] = (t / "m.zst").stat().st_size
        if zipnn_v:
            sizes[f"ZipNN {zipnn_v}"] = (t / "m.znn").stat().st_size
            exact_z = (t / "m.zraw").read_bytes() == original
        from ..model.coding.container import open_container
        threads_wall: dict[int, list[float]] = {1: [], 2: []}
        # The same decompress inside one process: what --threads can split (decode, CRCs, the write)
        # without the interpreter start and imports that every whole process pays once.
        in_process: dict[int, list[float]] = {1: [], 2: []}
        opened = open_container(t / "m.ansf")
        for _ in range(reps):
            for th in (1, 2):
                _, w = _measure(cmds["ansforge decompress"] + ["--threads", str(th)])
                threads_wall[th].append(w)
                t0 = time.perf_counter()
                opened.decompress(t / f"threads{th}.safetensors", threads=th)
                in_process[th].append(time.perf_counter() - t0)
    md = ["### Whole files, whole processes", "",
          f"MiniLM-L6 safetensors ({len(original):,} bytes, fp32), {reps} interleaved rounds after one warm-up run "
          "of each command (not counted; it fills the page cache and Python's bytecode cache, as an installed "
          "package has it); CPU = user + system seconds of the whole process (imports included), wall = "
          "elapsed; min / median.", "",
          "| Command | CPU s (min) | CPU s (median) | wall s (min) | wall s (median) |", "|---|---:|---:|---:|---:|"]
    for k in cmds:
        md.append(f"| {k} | {min(cpu[k]):.2f} | {statistics.median(cpu[k]):.2f} | {min(wall[k]):.2f} | "
                  f"{statistics.median(wall[k]):.2f} |")
    md += ["", "| File | Bytes | vs original |", "|---|---:|---:|"]
    for k, v in sizes.items():
        md.append(f"| {k} | {v:,} | {100 * v / len(original):.2f} % |")
    md += ["", f"ansforge decompress output bit-exact: {exact}" + (f"; ZipNN round trip exact: {exact_z}" if zipnn_v else "")]
    if fast_codec:
        a, b = sizes[f"ansforge ({codec})"], sizes[f"ansforge ({fast_codec})"]
        md.append(f"- ansforge ({codec}) file / ansforge ({fast_codec}) file: {a / b - 1:+.4%} in bytes")
    if zstd:
        dk = [k for k in cmds if k.startswith("zstd -3 decompress")][0]
        for ak in [k for k in cmds if k.startswith("ansforge decompress")]:
            md.append(f"- {ak} / zstd -3 decompress, CPU: min {min(cpu[ak]) / min(cpu[dk]):.2f}×, "
                      f"median {statistics.median(cpu[ak]) / statistics.median(cpu[dk]):.2f}× (target ≤ 2.5×)")
    if zipnn_v:
        zk = f"ZipNN {zipnn_v} compress (1 thread, whole process)"
        for ck in [k for k in cmds if k.startswith("ansforge compress")]:
            md.append(f"- {ck} / ZipNN compress, CPU: min {min(cpu[ck]) / min(cpu[zk]):.2f}×, "
                      f"median {statistics.median(cpu[ck]) / statistics.median(cpu[zk]):.2f}× (target ≤ 1×)")
    md.append(f"- `decompress --threads 2` / `--threads 1`, wall: min {min(threads_wall[2]) / min(threads_wall[1]):.2f}, "
              f"median {statistics.median(threads_wall[2]) / statistics.median(threads_wall[1]):.2f} "
              f"({os.cpu_count()} CPUs, shared with other jobs)")
    md.append(f"- `Container.decompress(threads=2)` / `threads=1` inside one process ({codec} file: decode, CRCs and "
              f"the file write, no interpreter start or imports), wall: min {min(in_process[2]) / min(in_process[1]):.2f}, "
              f"median {statistics.median(in_process[2]) / statistics.median(in_process[1]):.2f}; "
              f"threads=1 took {min(in_process[1]):.3f} s (min)")
    md.append("")
    return md


def fuzz_section(cases: int = 10_000) -> list[str]:
    """The structured container fuzzer (:mod:`.fuzz`), ``cases`` per codec, on a small model."""
    from ..model.llm.checkpoint import write_safetensors
    from ..model.coding.container import compress_checkpoint
    from .fuzz import fuzz_container

    rng = np.random.default_rng(1)
    a = (rng.standard_normal((40, 30)) * 0.02).astype(np.float32)
    rows = (rng.standard_normal((24, 32)) * 0.05).astype(np.float32)
    rows[1::3] = rows[1::3].astype(np.float16).astype(np.float32)
    c = ((rng.standard_normal(300) * 0.1).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    d = np.arange(10, dtype=np.int32)
    data = {"a": a, "rows": rows, "c": c, "ids": d.view(np.uint8)}
    md = ["### Container fuzzing", "",
          f"`analysis/fuzz.py`: {cases:,} cases per codec on a 4-tensor model (fp32, fp32 with row shifts, bf16, "
          "raw int32): records edited with their CRC recomputed, header counts, byte flips, truncations, appended "
          "bytes; each case opens the container and reads every tensor (5 s limit; peak memory by tracemalloc).", ""]
    with tempfile.TemporaryDirectory(prefix="ansforge-fuzz-") as tmp:
        t = Path(tmp)
        write_safetensors(t / "m.safetensors", [("a", "F32", a.shape), ("rows", "F32", rows.shape),
                                               ("c", "BF16", c.shape), ("ids", "I32", d.shape)],
                          lambda i, nm: [data[nm]])
        for codec in ("tans8", "rans16", "rans24"):
            compress_checkpoint(t / "m.safetensors", t / f"{codec}.ansf", codec, checkpoint_interval=256)
            rep = fuzz_container((t / f"{codec}.ansf").read_bytes(), t, cases, seed=7)
            md.append(f"- {codec}: {rep.summary()}")
    md.append("")
    return md


def software_section(path: str, cli_reps: int = 5, fuzz_cases: int = 10_000) -> list[str]:
    """BENCHMARKS.md's software-path section (the one-tensor coder speeds are the ``coders`` section)."""
    from ..model.coding import kernels
    in_use = "native (C extension nativeans)" if kernels.backend() == "native" else \
        f"numba {package_version('numba')} (the native extension is not built here)"
    md = ["## Software path: whole files against peers, fuzzing", "",
          f"Compiled kernels: {in_use}; ZipNN: {package_version('zipnn') or 'not installed (pip install ansforge[peers])'}. "
          f"Measured on a machine shared with other jobs (load average {os.getloadavg()[0]:.1f}): CPU times are "
          "the processes' own, wall times include waiting.", ""]
    md += model_section(path, cli_reps)
    md += cli_section(path, cli_reps)
    md += threads_section(path)
    md += fuzz_section(fuzz_cases)
    return md
