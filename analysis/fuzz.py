"""Structured fuzzing of the ``.ansf`` container reader: edited records with valid CRCs, byte flips,
truncations and appended bytes.

A byte flip is caught by a CRC before the parser sees a value; what a CRC cannot catch is a record
that a buggy or hostile writer produced with its CRC right. :func:`mutate` therefore decodes a record,
edits one field (a number out of range, a wrong JSON type, a negative or huge count, a missing key, a
shape that disagrees with the stored size), re-encodes it and recomputes its CRC, so the reader's own
validation is what is tested. :func:`fuzz_container` runs many such cases and classifies each:

``ok``
    the reader raised :class:`~ansforge.model.errors.AnsforgeError` (the project's own error, one line
    for the CLI) or returned the tensors (an edit of a field that does not change them, such as
    ``ideal_bits``);
``crash``
    any other exception (a bug: the CLI would print a traceback);
``slow``
    a case over the time limit (a hang is stopped by ``SIGALRM``).

The peak memory of each case is measured with :mod:`tracemalloc` (NumPy reports its buffers to it).
"""

from __future__ import annotations

import json
import signal
import struct
import time
import tracemalloc
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model.coding.container import open_container
from ..model.errors import AnsforgeError

__all__ = ["Records", "split_records", "join_records", "edit_records", "mutate", "FuzzReport", "fuzz_container", "BAD_VALUES"]

#: Replacement values for a field: out of range, wrong types, negative and huge counts.
BAD_VALUES: tuple = (-1, 0, 1, 3, -2 ** 31, 2 ** 31, 2 ** 32 + 7, 2 ** 63, 10 ** 30, -10 ** 30, 1.5, 1e308,
                     True, None, "x", "", [], [1], [[1, 2]], {}, {"a": 1}, [-1, 2 ** 40], "tans8",
                     [0, 0, 0, 0])


class _Timeout(Exception):
    pass


@dataclass
class Records:
    """A container split into header fields, decoded records and payload bytes."""

    version: int
    n_tensors: int
    records: list
    payload: bytes


def split_records(blob: bytes) -> Records:
    """Decode a well-formed container (records as JSON values)."""
    _, version, n_t, n_s, _ = struct.unpack("<8sIIII", blob[:24])
    pos, records = 24, []
    for _ in range(n_t + n_s):
        (length,) = struct.unpack("<I", blob[pos:pos + 4])
        records.append(json.loads(blob[pos + 4:pos + 4 + length]))
        pos += 8 + length
    return Records(version, n_t, records, blob[pos:])


def join_records(r: Records, n_streams: int | None = None) -> bytes:
    """Encode records back into a container, every CRC recomputed (header counts from the records)."""
    n_s = len(r.records) - r.n_tensors if n_streams is None else n_streams
    head = struct.pack("<8sIII", b"ANSFORGE", r.version, r.n_tensors, n_s)
    out = [head, struct.pack("<I", zlib.crc32(head) & 0xFFFFFFFF)]
    for rec in r.records:
        js = json.dumps(rec, separators=(",", ":")).encode()
        out += [struct.pack("<I", len(js)), js, struct.pack("<I", zlib.crc32(js) & 0xFFFFFFFF)]
    return b"".join(out) + r.payload


def edit_records(src: Path, dst: Path, fn) -> Path:
    """Write container ``src`` to ``dst`` with ``fn(records)`` applied to its decoded records (in place)
    and every CRC recomputed: a crafted file that only the reader's field checks can refuse."""
    r = split_records(Path(src).read_bytes())
    fn(r)
    Path(dst).write_bytes(join_records(r))
    return Path(dst)

def _paths(value, prefix=()):
    """Every key path into a JSON value (dict keys and list indices), shallow ones first."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list) and len(value) <= 64:
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    elif isinstance(value, list):
        for i in (0, len(value) // 2, len(value) - 1):
            out += _paths(value[i], prefix + (i,))
    return out


def _set(root, path, value, delete=False):
    node = root
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value


def _get(root, path):
    for k in path:
        root = root[k]
    return root


def mutate(blob: bytes, rng: np.random.Generator, focus: str | None = None) -> tuple[bytes, str]:
    """One fuzz case from a well-formed container ``blob``; returns the bytes and a description.

    ``focus`` (a record key, e.g. ``"context"``) makes every case a record edit inside that key of a
    record that has it (a context plan's kind, params, fold, set count, selects, table sets), so a
    rare record gets as many cases as the container's other fields."""
    kind = int(rng.integers(4, 10)) if focus else int(rng.integers(0, 10))
    if kind == 0:
        b = bytearray(blob)
        i = int(rng.integers(0, len(b)))
        b[i] ^= int(rng.integers(1, 256))
        return bytes(b), f"flip byte {i}"
    if kind == 1:
        n = int(rng.integers(0, len(blob)))
        return blob[:n], f"truncate to {n} bytes"
    if kind == 2:
        extra = bytes(rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8))
        return blob + extra, f"append {len(extra)} bytes"
    r = split_records(blob)
    if kind == 3:  # header counts that disagree with the records
        n_t = int(rng.choice([0, r.n_tensors - 1, r.n_tensors + 1, 2 ** 32 - 1]))
        n_s = int(rng.choice([0, len(r.records) - r.n_tensors + 1, 2 ** 31]))
        r.n_tensors = max(0, min(n_t, 2 ** 32 - 1))
        return join_records(r, n_s), f"header counts {r.n_tensors}, {n_s}"
    holders = [i for i, rec in enumerate(r.records) if focus is None or (isinstance(rec, dict) and focus in rec)]
    if not holders:
        raise ValueError(f"no record of the container has the field {focus!r}")
    ri = int(holders[int(rng.integers(0, len(holders)))])
    rec = r.records[ri]
    paths = _paths(rec) if focus is None else [(focus,)] + [(focus,) + p for p in _paths(rec[focus])]
    if kind == 5 and focus:
        kind = 6  # a shape edit is not inside the focus
    path = paths[int(rng.integers(0, len(paths)))]
    if kind == 4:  # a missing key (or list entry)
        _set(rec, path, None, delete=True)
        what = "delete"
    elif kind == 5 and "shape" in rec and isinstance(rec["shape"], list):  # a shape that disagrees with the size
        shape = rec["shape"]
        choice = int(rng.integers(0, 4))
        rec["shape"] = ([d + 1 for d in shape] or [1]) if choice == 0 else \
            shape + [2] if choice == 1 else [2 ** 40, 2 ** 40] if choice == 2 else [0] + shape
        path, what = ("shape",), f"= {rec['shape']}"
    elif kind == 6:  # a number nudged: off by one, sign, scaled
        old = _get(rec, path)
        if isinstance(old, int) and not isinstance(old, bool):
            new = int(rng.choice([old + 1, old - 1, -old, old * 2 + 1, old + 2 ** 31, -2 ** 31]))
        else:
            new = BAD_VALUES[int(rng.integers(0, len(BAD_VALUES)))]
        _set(rec, path, new)
        what = f"= {new!r}"
    else:  # any bad value of any type
        new = BAD_VALUES[int(rng.integers(0, len(BAD_VALUES)))]
        _set(rec, path, new)
        what = f"= {new!r}"
    return join_records(r), f"record {ri} {'/'.join(map(str, path))} {what}"


@dataclass
class FuzzReport:
    """Outcome of :func:`fuzz_container`."""

    cases: int = 0
    raised: int = 0
    decoded: int = 0
    crashes: list = field(default_factory=list)
    slow: list = field(default_factory=list)
    max_seconds: float = 0.0
    max_peak_bytes: int = 0
    kinds: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        return (f"{self.cases} cases: {self.raised} AnsforgeError, {self.decoded} decoded, "
                f"{len(self.crashes)} other exceptions, {len(self.slow)} over the time limit; "
                f"slowest {self.max_seconds:.3f} s, peak memory {self.max_peak_bytes / 2 ** 20:.1f} MiB")


def fuzz_container(good: bytes, workdir: Path, cases: int, seed: int = 0, time_limit: float = 5.0,
                   measure_memory: bool = True, check: Callable | None = None, focus: str | None = None
                   ) -> FuzzReport:
    """Run ``cases`` mutations of container ``good`` through :func:`open_container` and a full read.

    Parameters
    ----------
    good
        A well-formed container's bytes.
    workdir
        Directory for the mutated file.
    time_limit
        Seconds per case; a case still running then is stopped (``SIGALRM``) and reported as slow.
    check
        Called with the container of a case that decoded, and its tensors (e.g. to compare them).
    focus
        Edit only inside this record key (:func:`mutate`), e.g. ``"context"``.
    """
    rng = np.random.default_rng(seed)
    path = Path(workdir) / "fuzzed.ansf"
    path.write_bytes(good)
    reference = open_container(path)  # the unedited container must read (else every case "raises")
    for name in reference.names:
        reference.read(name)
    rep = FuzzReport()

    def alarm(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        for case in range(cases):
            blob, what = mutate(good, rng, focus)
            path.write_bytes(blob)
            rep.kinds[what.split()[0]] += 1
            if measure_memory:
                tracemalloc.start()
            t0 = time.process_time()
            signal.setitimer(signal.ITIMER_REAL, time_limit + 1.0)
            try:
                c = open_container(path)
                got = {n: c.read(n) for n in c.names}
                if check is not None:
                    check(c, got)
                rep.decoded += 1
            except _Timeout:
                rep.slow.append((case, what))
            except AnsforgeError:
                rep.raised += 1
            except Exception as e:  # noqa: BLE001 - the point is to find them
                rep.crashes.append((case, what, f"{type(e).__name__}: {e}"[:300]))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            dt = time.process_time() - t0
            if dt > time_limit:
                rep.slow.append((case, what))
            rep.max_seconds = max(rep.max_seconds, dt)
            if measure_memory:
                rep.max_peak_bytes = max(rep.max_peak_bytes, tracemalloc.get_traced_memory()[1])
                tracemalloc.stop()
            rep.cases += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    return rep
