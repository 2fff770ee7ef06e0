"""Verilator engine: the Verilog that ``ansforge verilog`` ships, compiled and run on a job's vectors.

The core is converted by :func:`ansforge.hdl.verilog.core_verilog` (what ``ansforge verilog`` writes); a C++ harness is generated from the
component's signature (port names, payload widths), so nothing is written by hand per core. The
harness plays the same game as :class:`~.amaranth_sim.AmaranthEngine`: configuration writes, then
the commands back to back (``done`` is counted, one clock per command), input words/pairs with random valid gaps, outputs with
random ready gaps, and a cycle bound. Builds are cached under ``$ANSFORGE_CACHE`` (default
``~/.cache/ansforge``) by a hash of the Verilog and the harness: a core with the same Verilog is compiled
once, whichever command built it (the simulations build theirs with :func:`~.jobs.simulation_core`,
whose Verilog depends on neither the checkpoint nor its tables); Verilator's run-time library is compiled
once per Verilator version and build options and linked by every design, and ``verilated.h``, which
every generated C++ file includes, is precompiled beside it (half the g++ time of a large design). On a
terminal a compile shows its elapsed time and leaves a line with its duration; a build found in the
cache says so in one line.

Payloads cross as raw little-endian ``uint64`` files, ``ceil(width / 64)`` words per payload.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from amaranth.lib.wiring import In

from ..hdl.verilog import core_verilog
from ..model import progress
from ..model.cache import cache_root
from ..model.errors import ToolError
from .jobs import CoreJob, SimResult
from .streams import payload_bits

__all__ = ["VerilatorEngine", "verilator_available"]


def verilator_available() -> bool:
    return shutil.which("verilator") is not None


def _cxx(name: str) -> str:
    return name.replace("__", "___05F")  # Verilator's escape of a double underscore


def _streams(core):
    """(inputs, output) stream names: configuration streams first, then ``cmd`` (a core that runs
    commands) and ``i``; ``o``. A core without ``cmd`` is a dataflow stage: its run ends when it has
    given the job's expected number of outputs."""
    members = core.signature.members
    cfg = [n for n in members if n.endswith("cfg")]
    side = [n for n, m in members.items() if n not in cfg and n not in ("cmd", "i", "o")
            and m.is_signature and m.flow == In]
    return cfg + [n for n in ("cmd", "i") if n in members] + side, "o"


def _width(core, name: str) -> int:
    return payload_bits(core.signature.members[name].signature.members["payload"].shape)


_HARNESS = r"""
#include "Vtop.h"
#include "verilated.h"
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <string>

static uint64_t rng_state;
static inline uint64_t rnd() { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return rng_state; }
static double stall_p;
static inline bool stall() { return stall_p > 0 && (double)(rnd() >> 11) / 9007199254740992.0 < stall_p; }

struct In { std::vector<uint64_t> d; size_t n = 0, words = 1, pos = 0; bool valid = false; };

static void load(const std::string& path, In& s, size_t words) {
    s.words = words;
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) { perror(path.c_str()); exit(2); }
    fseek(f, 0, SEEK_END); long bytes = ftell(f); fseek(f, 0, SEEK_SET);
    s.d.resize(bytes / 8);
    if (bytes && fread(s.d.data(), 8, s.d.size(), f) != s.d.size()) { perror(path.c_str()); exit(2); }
    fclose(f);
    s.n = s.d.size() / words;
}

template <typename T> static void set_narrow(T& port, const uint64_t* v) { port = (T)v[0]; }
template <std::size_t N> static void set_wide(VlWide<N>& port, const uint64_t* v) {
    for (std::size_t i = 0; i < N; i++) port[i] = (uint32_t)(v[i / 2] >> (32 * (i % 2)));
}
template <typename T> static void get_narrow(const T& port, uint64_t* v) { v[0] = (uint64_t)port; }
template <std::size_t N> static void get_wide(const VlWide<N>& port, uint64_t* v) {
    for (std::size_t i = 0; i < (N + 1) / 2; i++) v[i] = 0;
    for (std::size_t i = 0; i < N; i++) v[i / 2] |= (uint64_t)port[i] << (32 * (i % 2));
}

int main(int argc, char** argv) {
    if (argc != 8) { fprintf(stderr, "usage: %s DIR STALL SEED MAX_CYCLES STATUS OUTPUTS TIMED_FROM\n", argv[0]); return 2; }
    std::string dir = argv[1];
    stall_p = atof(argv[2]);
    rng_state = strtoull(argv[3], 0, 10) * 2654435761ULL + 88172645463325252ULL;
    uint64_t max_cycles = strtoull(argv[4], 0, 10);
    bool has_status = atoi(argv[5]) != 0;
    uint64_t expect_outputs = strtoull(argv[6], 0, 10), o_count = 0;
    uint64_t timed_from = strtoull(argv[7], 0, 10);     // the first command the cycles count from
    Verilated::commandArgs(1, argv);
    Vtop* top = new Vtop;
@@DECLS@@
    FILE* out = fopen((dir + "/o.bin").c_str(), "wb");
    FILE* st = fopen((dir + "/status.txt").c_str(), "w");
    top->clk = 0; top->rst = 1; top->eval(); top->clk = 1; top->eval(); top->clk = 0; top->rst = 0; top->eval();
    uint64_t cycle = 0, first = 0, last = 0;
    // clocks in which o was ready: all of them (ready_n), before the first command's clock, and up to
    // the last output or done, so that back-pressure can be told apart from the core's own idling
    uint64_t ready_n = 0, ready_first = 0, ready_last = 0;
    bool ready_now = false;
    size_t cmd_sent = 0, cmd_done = 0;
    bool started = false;
    std::vector<uint64_t> obuf(@@OWORDS@@);
    while (@@RUNNING@@) {
        bool cfg_busy = false;
@@DRIVE@@
        top->o___05Fready = !stall();
        ready_now = top->o___05Fready; ready_n += ready_now;
        top->eval();
        bool o_fire = top->o___05Fvalid && top->o___05Fready;
        if (o_fire) { @@GETO@@ fwrite(obuf.data(), 8, obuf.size(), out); o_count++; last = cycle + 1; ready_last = ready_n; }
@@FIRES@@
        // The rising edge; the falling one needs no eval of its own (the design has no negedge logic):
        // the next clock's eval after the inputs are driven settles it, a third fewer evals per clock
        top->clk = 1; top->eval(); top->clk = 0;
        cycle++;
@@ADVANCE@@
        // done: one clock per command, in order (a wrapper's done held high is counted once: no
        // more reports than commands sent)
        if (cmd_done < cmd_sent && @@DONE@@) {
            cmd_done++; last = cycle; ready_last = ready_n;
            if (has_status) fprintf(st, "%d\n", @@STATUS@@);
        }
        if (cycle > max_cycles) { fprintf(stderr, "no result after %llu cycles\n", (unsigned long long)max_cycles); fclose(out); fclose(st); return 3; }
    }
    fclose(out); fclose(st);
    FILE* cy = fopen((dir + "/cycles.txt").c_str(), "w"); fprintf(cy, "%llu %llu\n", (unsigned long long)(last - first), (unsigned long long)(ready_last - ready_first)); fclose(cy);
    top->final(); delete top;
    return 0;
}
"""


def _harness(core) -> str:
    ins, _ = _streams(core)
    decls, drive, fires, advance = [], [], [], []
    for name in ins:
        w = _width(core, name)
        words = -(-w // 64)
        p = _cxx(f"{name}__payload")
        setter = f"set_wide(top->{p}, &{name}_s.d[{name}_s.pos * {name}_s.words])" if w > 64 else \
            f"set_narrow(top->{p}, &{name}_s.d[{name}_s.pos * {name}_s.words])"
        decls.append(f"    In {name}_s; load(dir + \"/{name}.bin\", {name}_s, {words});")
        if name.endswith("cfg"):
            drive.append(f"""        top->{_cxx(name + '__valid')} = 0;
        if ({name}_s.pos < {name}_s.n) {{ cfg_busy = true; top->{_cxx(name + '__valid')} = 1; {setter}; }}""")
        elif name == "cmd":
            drive.append(f"""        top->{_cxx('cmd__valid')} = 0;
        if (!cfg_busy && cmd_sent < cmd_s.n) {{     // back to back: no wait for done
            if (!cmd_s.valid) cmd_s.valid = !stall();
            if (cmd_s.valid) {{ top->{_cxx('cmd__valid')} = 1; {setter}; }}
        }}""")
        else:
            drive.append(f"""        top->{_cxx(name + '__valid')} = 0;
        if (!cfg_busy && {name}_s.pos < {name}_s.n) {{
            if (!{name}_s.valid) {name}_s.valid = !stall();
            if ({name}_s.valid) {{ top->{_cxx(name + '__valid')} = 1; {setter}; }}
        }}""")
        fires.append(f"        bool {name}_fire = top->{_cxx(name + '__valid')} && top->{_cxx(name + '__ready')};")
        if name == "cmd":
            advance.append("""        if (cmd_fire) { cmd_s.pos++; cmd_s.valid = false; cmd_sent++;
            if (cmd_sent == timed_from + 1) { started = true; first = cycle - 1; ready_first = ready_n - ready_now; } }""")
        else:
            advance.append(f"        if ({name}_fire) {{ {name}_s.pos++; {name}_s.valid = false; }}")
    if "cmd" not in ins:     # a dataflow stage: time from the first input to the last output
        advance.append("        if (i_fire && !started) { started = true; first = cycle - 1; ready_first = ready_n - ready_now; }")
    ow = _width(core, "o")
    getter = f"get_wide(top->{_cxx('o__payload')}, obuf.data());" if ow > 64 else \
        f"get_narrow(top->{_cxx('o__payload')}, obuf.data());"
    return (_HARNESS.replace("@@DECLS@@", "\n".join(decls)).replace("@@DRIVE@@", "\n".join(drive))
            .replace("@@FIRES@@", "\n".join(fires)).replace("@@ADVANCE@@", "\n".join(advance))
            .replace("@@GETO@@", getter).replace("@@DONE@@", "top->done" if "done" in core.signature.members else "false")
            .replace("@@RUNNING@@", "cmd_done < cmd_s.n" if "cmd" in ins else "o_count < expect_outputs")
            .replace("@@STATUS@@", "(int)top->status" if "status" in core.signature.members else "0").replace("@@OWORDS@@", str(-(-ow // 64))))


def _cache_root() -> Path:
    return cache_root() / "verilator"


def _runtime_objects(obj: Path) -> list[Path]:
    """The run-time library's objects the generated makefile builds (its ``VM_GLOBAL_*`` lists)."""
    text = (obj / "Vtop_classes.mk").read_text()
    names = []
    for block in re.findall(r"^VM_GLOBAL_(?:FAST|SLOW) \+= \\\n((?:\t.*\\\n)*)", text, re.M):
        names += [line.strip(" \t\\") for line in block.splitlines() if line.strip(" \t\\")]
    return [obj / f"{n}.o" for n in names]


def _runtime_key(obj: Path) -> str:
    """What the run-time objects depend on: Verilator's version, the generated makefile (user
    flags, paths), the build's options (``VM_*`` settings, not the design's class lists or whether
    its own code compiles in parallel) and the compiler's environment."""
    version = subprocess.run(["verilator", "--version"], capture_output=True, text=True).stdout
    classes = "".join(line for line in (obj / "Vtop_classes.mk").read_text().splitlines(keepends=True)
                      if re.match(r"VM_(?!CLASSES|SUPPORT|PARALLEL_BUILDS)\w+ = ", line))
    env = "".join(f"{k}={os.environ.get(k, '')}\n" for k in ("CXX", "CXXFLAGS", "CPPFLAGS", "OBJCACHE"))
    try:
        compiler = subprocess.run([os.environ.get("CXX") or "g++", "--version"], capture_output=True,
                                  text=True).stdout
    except OSError:
        compiler = ""                            # make will say what is missing
    text = version + compiler + (obj / "Vtop.mk").read_text() + classes + env
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _keep_runtime(obj: Path, runtime: Path) -> None:
    """Keep a finished build's run-time objects for the next builds (renamed into place whole, so
    that a concurrent build sees all of them or none)."""
    part = Path(tempfile.mkdtemp(prefix=f"{runtime.name}.", dir=runtime.parent))
    try:
        for o in _runtime_objects(obj):
            shutil.copyfile(o, part / o.name)
        os.rename(part, runtime)
    except OSError:
        pass                                     # another build kept them first
    finally:
        shutil.rmtree(part, ignore_errors=True)


_PCH = "verilated_pch.h"


def _precompiled_header(obj: Path, make: list[str], pch: Path) -> Path | None:
    """``verilated.h`` precompiled under ``pch`` for each set of flags this build compiles its own
    files with (one per optimisation level), and the header to force-include so that g++ uses it;
    ``None`` if it cannot be built (the build goes on without it).

    Every C++ file of a design includes ``verilated.h``, and parsing it costs about 0.9 CPU-seconds a
    file: half the g++ time of a 4-lane subsystem, most of a small core's. g++ takes the first valid
    file of the ``.gch`` directory and silently parses the header where none is valid (another
    compiler version or other flags). Kept beside the run-time objects (same key), renamed into
    place whole."""
    header = pch / _PCH
    if (pch / (_PCH + ".gch")).is_dir():
        return header
    dry = subprocess.run(make + ["-n", "-B"], capture_output=True, text=True)
    flag_sets = []
    for line in dry.stdout.splitlines():
        try:
            words = shlex.split(line) if " -c " in line else []
        except ValueError:                       # not a compile line
            continue
        # the design's own files (sources in obj_dir: the run-time objects are kept ones)
        if "-c" in words and words[-1].endswith(".cpp") and not os.path.isabs(words[-1]) \
                and (obj / words[-1]).exists():
            flags = [w for w in words[:words.index("-c")] if w not in ("-MMD", "-MP")]
            if flags not in flag_sets:
                flag_sets.append(flags)
    if dry.returncode or not flag_sets:
        return None
    pch.parent.mkdir(parents=True, exist_ok=True)
    part = Path(tempfile.mkdtemp(prefix=f"{pch.name}.", dir=pch.parent))
    try:
        (part / _PCH).write_text('#include "verilated.h"\n')
        (part / (_PCH + ".gch")).mkdir()
        for i, flags in enumerate(flag_sets):
            r = subprocess.run(flags + ["-x", "c++-header", "-o", str(part / (_PCH + ".gch") / f"{i}.gch"),
                                        str(part / _PCH)], cwd=obj, capture_output=True, text=True)
            if r.returncode:
                return None
        try:
            os.rename(part, pch)
        except OSError:                          # another build kept its own first: the same header
            pass
        return header if (pch / (_PCH + ".gch")).is_dir() else None
    except OSError:
        return None
    finally:
        shutil.rmtree(part, ignore_errors=True)


class VerilatorEngine:
    """Run jobs on the core's Verilog, compiled by Verilator (cached per design)."""

    name = "verilator"

    def __init__(self, cache_dir: str | os.PathLike | None = None, jobs: int | None = None):
        if not verilator_available():
            raise ToolError("verilator is not on PATH (Debian: apt-get install verilator)")
        self.cache = Path(cache_dir) if cache_dir else _cache_root()
        self.jobs = jobs or os.cpu_count() or 1
        self._built: dict[int, tuple[object, Path]] = {}

    def build(self, core) -> Path:
        """Compile ``core`` (once per distinct Verilog) and return the simulator binary."""
        key = id(core)
        if key in self._built:
            return self._built[key][1]
        v = core_verilog(core)
        cpp = _harness(core)
        digest = hashlib.sha256((v + cpp).encode()).hexdigest()[:20]
        d = self.cache / digest
        exe = d / "obj_dir" / "Vtop"
        if exe.exists():
            progress.step(f"verilator: {type(core).__name__} as built before (cache {d})")
        else:
            self._compile(core, d, v, cpp)
        # the core is kept alive with its binary: an id may not be reused by a later, different core
        self._built[key] = (core, exe)
        return exe

    def _compile(self, core, d: Path, v: str, cpp: str) -> None:
        """Build into a private directory beside ``d`` and rename it into place: parallel test workers
        (pytest-xdist) and concurrent runs building the same design never see a half-built
        ``obj_dir``; the loser of a race keeps the winner's identical build.

        Verilator's run-time library (``verilated.o``, ``verilated_threads.o``: about 6 CPU-seconds of
        g++, more than a small design's own code) is compiled once per Verilator and build options
        (:func:`_runtime_key`) and kept under ``runtime-<key>`` in the cache; each design links it."""
        self.cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{d.name}.build-", dir=self.cache))
        try:
            (tmp / "top.v").write_text(v)
            (tmp / "harness.cpp").write_text(cpp)
            cmd = ["verilator", "--cc", "top.v", "--exe", "harness.cpp", "--top-module", "top",
                   "-Wno-WIDTH", "-Wno-UNUSED", "-Wno-DECLFILENAME", "-Wno-CASEINCOMPLETE",
                   # Amaranth gives a one-entry memory (a depth-2 buffered FIFO) a zero-width address: [-1:0]
                   "-Wno-LITENDIAN", "-O3", "--x-assign", "fast",
                   "--x-initial", "fast", "--noassert",
                   # g++'s time grows faster than a function's length: Verilator's evaluation functions of
                   # a subsystem run to thousands of lines, and cut at 1,000 statements they compile in a
                   # fifth less g++ time (measured on a 4-lane subsystem and the board)
                   "--output-split-cfuncs", "1000"]
            with progress.activity(f"verilator: compiling {type(core).__name__} (once; cached in {self.cache})",
                                   report=True):
                r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
                obj = tmp / "obj_dir"
                if not r.returncode:
                    key = _runtime_key(obj)
                    runtime = self.cache / f"runtime-{key}"
                    shared = [runtime / o.name for o in _runtime_objects(obj)]
                    reused = bool(shared) and all(f.exists() for f in shared)

                    def build_own():                 # make compiles the run-time objects itself
                        for f in shared:
                            (obj / f.name).unlink(missing_ok=True)
                    try:
                        for f in shared if reused else ():
                            shutil.copyfile(f, obj / f.name)
                            # newer than the generated makefile they depend on: make keeps them
                            os.utime(obj / f.name)
                    except OSError:                  # replaced by another build meanwhile
                        reused = False
                        build_own()
                    # OPT_SLOW: the code Verilator runs once (constructors, initial and settle blocks)
                    # unoptimised, a quarter less g++ time on a large design. OPT_FAST: the clocked
                    # code at -O1 rather than verilated.mk's -Os: a fifth to a third less g++ time,
                    # and simulations as fast or faster (measured on whole-model runs)
                    make = ["make", "-C", str(obj), "-f", "Vtop.mk", "-j", str(self.jobs), "OPT_SLOW=-O0",
                            "OPT_FAST=-O1"]
                    # (only with kept run-time objects: their sources must not see verilated.h first)
                    header = _precompiled_header(obj, make, self.cache / f"pch-{key}") \
                        if reused else None
                    pch = [f"USER_CPPFLAGS=-include {shlex.quote(str(header))}"] if header else []
                    r = subprocess.run(make + pch, cwd=tmp, capture_output=True, text=True)
                    if r.returncode and reused:
                        # kept objects (or a kept header) that do not build here (a damaged cache):
                        # build afresh, and keep those instead
                        build_own()
                        r = subprocess.run(make, cwd=tmp, capture_output=True, text=True)
                        if not r.returncode:
                            shutil.rmtree(runtime, ignore_errors=True)
                            if header:
                                # (after the build: objects it compiled name the header as a dependency)
                                shutil.rmtree(header.parent, ignore_errors=True)
                    if not r.returncode and shared and not runtime.exists():
                        _keep_runtime(obj, runtime)
            if r.returncode:
                raise RuntimeError(f"verilator build of {type(core).__name__} failed:\n{r.stderr[-4000:]}")
            if d.exists() and not (d / "obj_dir" / "Vtop").exists():
                shutil.rmtree(d, ignore_errors=True)   # left by an interrupted build of an older ansforge
            try:
                os.rename(tmp, d)
            except OSError:
                if not (d / "obj_dir" / "Vtop").exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def run(self, job: CoreJob, *, stall_prob: float = 0.0, seed: int = 0, vcd: str | None = None,
            max_cycles: int | None = None, raw_outputs: bool = False) -> SimResult:
        """Run ``job`` (see :meth:`AmaranthEngine.run`); ``vcd`` is not supported by this engine.
        ``raw_outputs``: the outputs as they come, rows of ``ceil(width / 64)`` little-endian ``uint64``
        words (no conversion to Python integers: millions of wide payloads). Inputs may be given the same
        way, as 2-D ``uint64`` arrays."""
        if vcd:
            raise ValueError("the verilator engine writes no VCD; use the amaranth engine for waveforms")
        if not 0 <= stall_prob < 1:
            raise ValueError(f"stall_prob must be in [0, 1), not {stall_prob!r}")
        core = job.core
        exe = self.build(core)
        limit = max_cycles or (64 + 4 * (job.pairs + job.words + sum(map(len, job.cfg.values())))) * \
            (1 + int(8 * stall_prob / (1 - stall_prob)))
        ins, _ = _streams(core)
        with tempfile.TemporaryDirectory(prefix="ansforge-vl-") as tmp:
            for name in ins:
                values = job.cfg.get(name, []) if name.endswith("cfg") else \
                    job.commands if name == "cmd" else job.inputs if name == "i" else job.side.get(name, [])
                _write_payloads(Path(tmp) / f"{name}.bin", values, _width(core, name))
            r = subprocess.run([str(exe), tmp, repr(float(stall_prob)), str(int(seed)), str(limit),
                                "1" if job.is_decoder else "0", str(len(job.expected)), str(job.timed_from)],
                               capture_output=True, text=True)
            if r.returncode == 3:
                raise TimeoutError(f"{job.kind}: no result after {limit} cycles (core locked up?)")
            if r.returncode:
                raise RuntimeError(f"{job.kind} simulation failed ({r.returncode}): {r.stderr[-2000:]}")
            ow = -(-_width(core, "o") // 64)
            raw = np.fromfile(Path(tmp) / "o.bin", dtype="<u8").reshape(-1, ow)
            statuses = [int(s) for s in (Path(tmp) / "status.txt").read_text().split()]
            cycles, ready = (int(x) for x in (Path(tmp) / "cycles.txt").read_text().split())
            if raw_outputs:
                return SimResult(raw, statuses, cycles, ready_cycles=ready)
            outputs = raw[:, 0] if ow == 1 else raw
        return SimResult(_as_ints(outputs, ow), statuses, cycles, ready_cycles=ready)


def _write_payloads(path: Path, values, width: int) -> None:
    words = -(-width // 64)
    if isinstance(values, np.ndarray) and (words == 1 and values.ndim == 1 or values.ndim == 2 and values.shape[1] == words):
        values.astype("<u8").tofile(path)
        return
    arr = np.zeros((len(values), words), dtype="<u8")
    for i, v in enumerate(values):
        v = int(v)
        for j in range(words):
            arr[i, j] = (v >> (64 * j)) & 0xFFFFFFFFFFFFFFFF
    arr.tofile(path)


def _as_ints(outputs: np.ndarray, words: int):
    if words == 1:
        return outputs.astype(np.uint64)
    return [sum(int(w) << (64 * j) for j, w in enumerate(row)) for row in outputs]
