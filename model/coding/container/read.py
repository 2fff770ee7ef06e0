"""Decoding an open container: :class:`Container` reads tensors whole, by range, or all of them
(``decompress``), on any number of threads, every block's CRC checked before its words are used.
"""

from __future__ import annotations

import json
import mmap
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...llm.checkpoint import ITEMSIZE, SUPPORTED_DTYPES, write_safetensors, write_sharded
from .. import fastans, fastpairs, kernels
from ...errors import ConfigError
from ...dtypes.pairs import CodingPairs
from ...dtypes.quantized import FP8_FORMATS, Q4_0_BLOCK, Q4_0_BLOCK_BYTES, q4_0_join
from ..stream import Run, StreamError, block_crc, block_crcs, clip_runs
from .pools import thread_map
from .records import ContainerStream, FP8_SCALE_SUFFIX, RAW_NUMPY, record_crc

from .parse import ContainerRecords


#: At most this many pairs of a version-6 stream are decoded to values in one native call (with their
#: blocks side by side): 2^24 bf16 values are 32 MiB held at once.
VALUES_GROUP_PAIRS = 1 << 24
#: The least pairs a group of :meth:`Container._block_values_source` holds when it decodes on several threads.
MIN_GROUP_PAIRS = 1 << 20


class Container(ContainerRecords):
    """A read-only view of an ``.ansf`` container (see :func:`open_container`): its records
    (:class:`~.parse.ContainerRecords`) and its tensors decoded."""

    def __init__(self, path: str | os.PathLike[str]):
        #: Statistics: independent blocks (version 6) decoded so far, a block counted each time it is
        #: decoded (random access and :mod:`.lazy` decode only the blocks a range touches).
        self.blocks_decoded = 0
        self._count_lock = threading.Lock()
        super().__init__(path)

    # -- streams -----------------------------------------------------------------------------------
    def stream_words(self, stream: ContainerStream) -> np.ndarray:
        """The coded words of ``stream`` (one of :attr:`streams`), in file order: a read-only view of the
        file, ``uint8`` … ``uint64`` as the stream's word width (its CRCs are not checked here)."""
        return self._words(stream)

    def decode_stream(self, stream: ContainerStream, start: int = 0,
                      count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``start .. start+count-1`` of ``stream`` (all from ``start`` when ``count`` is ``None``),
        decoded from the nearest checkpoint at or before ``start`` by the golden decoder.

        Returns ``(symbols, extras)`` as coded: the additional data of a tensor with row shifts lacks its
        rows' zero bits, which :meth:`join` restores. The CRCs of the blocks read are checked; a corrupt
        stream raises :class:`ContainerError` naming the tensor and block.
        """
        count = stream.n_pairs - start if count is None else count
        if start < 0 or count < 0 or start + count > stream.n_pairs:
            raise ConfigError(f"{self.path}: range {start}..{start + count} is outside stream {stream.index} "
                              f"of {stream.n_pairs} pairs")
        return self._decode(stream, start, count)

    def join(self, record: dict, symbols: np.ndarray, extras: np.ndarray, start: int = 0) -> np.ndarray:
        """Decoded pairs of a tensor → its values' bit patterns (flat, the dtype's unsigned integers).

        ``record`` is the tensor's :meth:`record`; ``symbols`` and ``extras`` are its pairs ``start ..``
        (counted from the tensor's first pair) as :meth:`decode_stream` or a decoder core gives them.
        The tensor's row shifts are restored and its code table maps each symbol back to its code.
        """
        return self._join(record, symbols, _unshift(record, extras, start))

    def _words(self, st: ContainerStream) -> np.ndarray:
        lo = self._payload + st.offset
        dt = np.dtype({1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}[st.word_bytes])
        hi = lo + st.n_words * st.word_bytes
        if hi > len(self._data):
            self._bytes(lo, hi, f"stream {st.index}")  # raises: truncated
        return np.asarray(self._data[lo:hi]).view(dt) if hi > lo else np.zeros(0, dt)  # a view of the mapping

    def _tensor_at(self, st: ContainerStream, pair: int) -> str:
        for ti in st.tensors:
            first, count = int(self.tensors[ti]["first_pair"]), int(self.tensors[ti]["n_pairs"])
            if first <= pair < first + count or (count == 0 and first == pair):
                return self.tensors[ti]["name"]
        return self.tensors[st.tensors[-1]]["name"] if st.tensors else "?"

    # -- independent blocks (version 6) ------------------------------------------------------------
    def _block_where(self, st: ContainerStream, b: int) -> str:
        blk = st.spans[b]
        first = int(self.tensors[blk.tensor]["first_pair"])
        return (f"tensor {self.tensors[blk.tensor]['name']!r} block {b} (stream {st.index}, its pairs "
                f"{blk.pair - first}..{blk.pair - first + blk.count}, words {blk.word}..{blk.word + blk.n_words})")

    def _verify_block(self, st: ContainerStream, b: int) -> None:
        """Independent block ``b``'s CRC (once per container)."""
        self._verify_independent(st, [b])

    def _verify_independent(self, st: ContainerStream, bs: Sequence[int]) -> None:
        """Independent blocks ``bs``' CRCs (each once per container), in one pass of the CRC kernel."""
        todo = [b for b in bs if b not in st.verified]
        if not todo:
            return
        got = block_crcs(self._words(st), [st.blocks[b][:2] for b in todo])
        for b, crc in zip(todo, got):
            if crc != st.blocks[b][2]:
                raise self._fail(self._block_where(st, b), "CRC32 mismatch")
        st.verified.update(todo)

    def _block_tables(self, st: ContainerStream, b: int) -> tuple[list, list[Run], int, int]:
        """Block ``b``'s tables (its tensor's), its runs over them, and the tensor's tables' index range."""
        blk = st.spans[b]
        t_lo, t_hi = st.tensor_tables[blk.tensor]
        r_lo, r_hi = st.tensor_runs[blk.tensor]
        first = int(self.tensors[blk.tensor]["first_pair"])
        return st.tables[t_lo:t_hi], clip_runs(st.runs[r_lo:r_hi], blk.pair - first, blk.count, t_lo), t_lo, t_hi

    def block_tables(self, stream: ContainerStream, b: int) -> tuple[list, list[Run]]:
        """The coder tables of independent block ``b`` of a version-6 ``stream`` (its tensor's: one, its
        row shifts' variants or its context plan's sets) and the block's runs over them: with
        :meth:`block_words`, everything a decoder needs for that block."""
        if not stream.block_pairs:
            raise ConfigError(f"{self.path}: stream {stream.index} has no independent blocks (container version "
                              f"{self.version}); its blocks are CRC ranges between checkpoints")
        tables, runs, _, _ = self._block_tables(stream, b)
        return tables, runs

    def _release_blocks(self, st: ContainerStream, blocks: Sequence[int]) -> None:
        """Tell the kernel that the mapped pages of these decoded blocks' words are not needed again
        soon: a whole-model decode would otherwise keep every page of the container it has read resident
        (8.96 GB of 9 GB for a 7B model). The pages are file-backed and read-only, so a later read just
        maps them in again; where ``madvise`` is missing (not Linux or BSD), nothing is done."""
        mm = self._map
        if not blocks or mm is None or not hasattr(mm, "madvise"):
            return
        lo = self._payload + st.offset + min(st.blocks[b][0] for b in blocks) * st.word_bytes
        hi = self._payload + st.offset + max(st.blocks[b][1] for b in blocks) * st.word_bytes
        start = -(-lo // mmap.PAGESIZE) * mmap.PAGESIZE     # only pages wholly inside the blocks
        end = hi // mmap.PAGESIZE * mmap.PAGESIZE
        if end > start:
            try:
                mm.madvise(mmap.MADV_DONTNEED, start, end - start)
            except (OSError, ValueError):
                pass

    def block_words(self, stream: ContainerStream, b: int) -> np.ndarray:
        """The words of independent block ``b`` of a version-6 ``stream`` (its own address 0 first, as
        the encoder pushed them): a complete stream that a decoder (a core: one command, ``resume = 0``,
        ``count`` = the block's pairs, its CRC) decodes alone with its tensor's tables."""
        lo, hi, _ = stream.blocks[b]
        return self._words(stream)[lo:hi]

    def _decode_block(self, st: ContainerStream, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Every pair of independent block ``b`` (symbols and additional data as coded), its end check
        and CRC checked; a failure names the tensor and the block (its CRC first, when that fails)."""
        blk = st.spans[b]
        tables, runs, t_lo, _ = self._block_tables(st, b)
        words = self.block_words(st, b)
        try:
            if fastans.supported(st.spec):
                if not isinstance(st.prepared, dict):
                    st.prepared = {}
                prepared = st.prepared.get(t_lo)
                if prepared is None:
                    prepared = st.prepared[t_lo] = fastans.PreparedTables(st.spec, tables)
                s, e, _ = fastans.decode(st.spec, words, tables, runs, 0, blk.count, None, prepared)
            else:
                s, e, _ = st.spec.coder().decode(words.tolist(), tables, runs, 0, blk.count, None)
        except StreamError as exc:
            self._verify_block(st, b)
            raise self._fail(self._block_where(st, b), str(exc)) from None
        self._verify_block(st, b)
        self._count_block()
        return s, e

    def _count_block(self, n: int = 1) -> None:
        with self._count_lock:
            self.blocks_decoded += n

    def _joins(self, st: ContainerStream, t_lo: int, t_hi: int) -> list[tuple]:
        """The values decoder's join per table ``t_lo .. t_hi - 1`` of ``st`` (:func:`fastans.decode_values`):
        its owner tensor's code table and exponents, and its row shift."""
        return [(self.tensors[i]["_code_table"], self.tensors[i]["exponents"], z) for i, z in st.table_owner[t_lo:t_hi]]

    def _block_value_bits(self, st: ContainerStream, b: int) -> np.ndarray:
        """Independent block ``b`` decoded to its tensor's value bit patterns: the native values decoder
        where it applies, else its pairs joined (which names any error)."""
        blk = st.spans[b]
        rec = self.tensors[blk.tensor]
        if rec["pair_format"] != "q4_0" and fastans.supported(st.spec):
            tables, runs, t_lo, t_hi = self._block_tables(st, b)
            joins = self._joins(st, t_lo, t_hi)
            vals = fastans.decode_values(st.spec, self.block_words(st, b), tables, runs, [], joins, rec["_fmt"], 1)
            if vals is not None:
                self._verify_block(st, b)
                self._count_block()
                return vals
        s, e = self._decode_block(st, b)
        start = blk.pair - int(rec["first_pair"])
        e = _unshift(rec, e, start)
        bits = fastpairs.join_values(rec["_code_table"], rec["exponents"], rec["_fmt"], s, e) \
            if fastans.supported(st.spec) and rec["pair_format"] != "q4_0" else None
        return bits if bits is not None else self._join(rec, s.astype(np.int64), e.astype(np.uint64))

    def _group_values(self, st: ContainerStream, group: list[int], blocks_of: dict[int, list[int]],
                      threads: int) -> dict[int, np.ndarray] | None:
        """Tensors ``group`` (consecutive in ``st``, at least one pair each) as value bit patterns, every
        block of theirs in one native call (:func:`fastans.decode_values` with ``blocks``: their tables
        prepared once, the blocks side by side in the kernel), the blocks' CRCs checked; ``None`` where
        that path does not apply or a block fails (the caller then decodes block by block, which names
        the error)."""
        recs = [self.tensors[ti] for ti in group]
        fmt = recs[0]["_fmt"]
        if not fastans.supported(st.spec) or any(r["pair_format"] == "q4_0" or r["_fmt"] != fmt for r in recs):
            return None
        t_lo, t_hi = st.tensor_tables[group[0]][0], st.tensor_tables[group[-1]][1]
        r_lo, r_hi = st.tensor_runs[group[0]][0], st.tensor_runs[group[-1]][1]
        bs = [b for ti in group for b in blocks_of.get(ti, ())]  # ``blocks_of``: each tensor's blocks, in order
        if not bs or bs != list(range(bs[0], bs[0] + len(bs))):
            return None
        first = st.spans[bs[0]].pair
        w_lo = st.blocks[bs[0]][0]
        blocks = [(st.blocks[b][0] - w_lo, st.blocks[b][1] - w_lo, st.spans[b].pair - first,
                   st.spans[b].pair - first + st.spans[b].count) for b in bs]
        runs = [Run(r.table - t_lo, r.count) for r in st.runs[r_lo:r_hi]]
        joins = self._joins(st, t_lo, t_hi)
        words = self._words(st)[w_lo:st.blocks[bs[-1]][1]]
        vals = fastans.decode_values(st.spec, words, st.tables[t_lo:t_hi], runs, [], joins, fmt, threads, blocks)
        if vals is None:
            return None
        self._verify_independent(st, bs)
        self._count_block(len(bs))
        out, a = {}, 0
        for ti, r in zip(group, recs):
            n = int(r["n_pairs"])
            out[ti] = vals[a:a + n]
            a += n
        return out

    def _block_values_source(self, st: ContainerStream, threads: int | None, pools: list) -> Callable[[int], np.ndarray]:
        """A version-6 stream's tensors as value bit patterns: ``get(tensor index)`` → its flat array.

        Consecutive tensors of one pair format are decoded together, up to :data:`VALUES_GROUP_PAIRS`
        pairs a group (one native call, the blocks side by side), so that a model's blocks cost one call
        per group, not one each. With one thread a group is decoded when its first tensor is asked for,
        and the memory held is one group's values. With ``n`` threads the groups are smaller (about four
        per thread, at least :data:`MIN_GROUP_PAIRS` pairs) and decoded ahead, in stream order, on a pool
        of ``n`` threads (appended to ``pools``, for the caller to shut down), one group per thread (a
        tensor larger than a group on all of them) and at most ``n + 1`` groups' values held: the caller
        writes a tensor while the later ones decode, and the threads stay busy to the end of the stream.
        Where the grouped path does not apply (or a block fails, to name the error) each tensor's blocks
        are decoded one by one (:meth:`_per_block_source`)."""
        n = kernels.default_threads() if threads is None else max(1, int(threads))
        sizes = {ti: int(self.tensors[ti]["n_pairs"]) for ti in st.tensors}
        limit = VALUES_GROUP_PAIRS if n == 1 else \
            max(MIN_GROUP_PAIRS, min(VALUES_GROUP_PAIRS, sum(sizes.values()) // (4 * n)))
        groups: list[list[int]] = [[]]
        held = 0
        for ti in st.tensors:
            if sizes[ti] == 0:
                continue
            if groups[-1] and held + sizes[ti] > limit:
                groups.append([])
                held = 0
            groups[-1].append(ti)
            held += sizes[ti]
        if not groups[-1]:
            groups.pop()
        group_index = {ti: k for k, g in enumerate(groups) for ti in g}
        blocks_of: dict[int, list[int]] = {}
        for b, blk in enumerate(st.spans):
            blocks_of.setdefault(blk.tensor, []).append(b)
        ready: dict[int, np.ndarray] = {}
        tried: set[int] = set()
        per_block = self._per_block_source(st, n, pools)

        def decode_group(k: int) -> dict[int, np.ndarray] | None:
            g = groups[k]
            # A group is one thread's, unless it is one tensor above the groups' size: its blocks then go
            # to every thread (a model of one large matrix would otherwise decode on one thread).
            got = self._group_values(st, g, blocks_of, n if sum(sizes[t] for t in g) > limit else 1)
            if got is not None:
                self._release_blocks(st, [b for t in g for b in blocks_of.get(t, ())])
            return got

        ahead: dict[int, object] = {}  # group index -> its Future (n > 1)
        pool: list[ThreadPoolExecutor] = []

        def submit_through(last: int) -> None:
            if not pool:
                pool.append(ThreadPoolExecutor(max_workers=n))
                pools.append(pool[0])
            for k in range(min(last, len(groups) - 1) + 1):
                if k not in ahead and k not in tried:
                    ahead[k] = pool[0].submit(decode_group, k)

        def get(ti: int) -> np.ndarray:
            if ti in ready:
                return ready.pop(ti)
            k = group_index.get(ti)
            if k is not None and k not in tried:
                if n > 1:
                    submit_through(k + n)
                    got = ahead.pop(k).result()
                else:
                    got = decode_group(k)
                tried.add(k)
                if got is not None:
                    ready.update(got)
                    return ready.pop(ti)
            return per_block(ti)
        return get

    def _per_block_source(self, st: ContainerStream, n: int, pools: list) -> Callable[[int], np.ndarray]:
        """:meth:`_block_values_source`'s block-by-block path (the pool starts on the first call)."""
        by_tensor: dict[int, list[int]] = {}
        for b, blk in enumerate(st.spans):
            by_tensor.setdefault(blk.tensor, []).append(b)
        out: dict[int, np.ndarray] = {}

        def alloc(ti: int) -> None:
            if len(by_tensor.get(ti, ())) != 1:
                out[ti] = np.empty(int(self.tensors[ti]["n_pairs"]), np.dtype(self.tensors[ti]["_fmt"].bits_dtype))

        def job(b: int) -> None:
            blk = st.spans[b]
            vals = self._block_value_bits(st, b)
            if len(by_tensor[blk.tensor]) == 1:
                out[blk.tensor] = vals  # a tensor of one block: its array as decoded, no copy
            else:
                a = blk.pair - int(self.tensors[blk.tensor]["first_pair"])
                out[blk.tensor][a:a + blk.count] = vals

        if n == 1:
            def get(ti: int) -> np.ndarray:
                alloc(ti)
                for b in by_tensor.get(ti, ()):
                    job(b)
                return out.pop(ti)
            return get
        started: list[ThreadPoolExecutor] = []

        def get_async(ti: int) -> np.ndarray:
            # Only the tensors the grouped path left come here (unusual formats, or an error to name):
            # their blocks go to the pool one tensor at a time.
            if not started:
                started.append(ThreadPoolExecutor(max_workers=n))
                pools.append(started[0])
            alloc(ti)
            for f in [started[0].submit(job, b) for b in by_tensor.get(ti, ())]:
                f.result()
            return out.pop(ti)
        return get_async

    def _decode_span(self, st: ContainerStream, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``start .. start+count-1`` of a version-6 stream: each block they touch decoded whole."""
        ss, es = [], []
        b = int(np.searchsorted([blk.pair for blk in st.spans], start, side="right")) - 1 if st.spans else 0
        end = start + count
        while count and b < len(st.spans) and st.spans[b].pair < end:
            blk = st.spans[b]
            s, e = self._decode_block(st, b)
            a, z = max(start, blk.pair) - blk.pair, min(end, blk.pair + blk.count) - blk.pair
            ss.append(s[a:z])
            es.append(e[a:z])
            b += 1
        if not ss:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        return np.concatenate(ss), np.concatenate(es)

    def _verify_blocks(self, st: ContainerStream, words: np.ndarray, lo_addr: int, hi_addr: int) -> None:
        raw = None
        for b, (lo, hi, crc) in enumerate(st.blocks):
            if b in st.verified or not (lo < hi_addr and hi > lo_addr):
                continue
            if self.version == 1:
                raw = words.tobytes() if raw is None else raw
                ok = record_crc(raw[lo * st.word_bytes:hi * st.word_bytes]) == crc
            else:
                ok = block_crc(words, lo, hi) == crc
            if not ok:
                pair = st.checkpoints[b - 1].pair if b else 0
                raise self._fail(f"tensor {self._tensor_at(st, pair)!r} block {b} (stream {st.index}, words {lo}..{hi})",
                                 "CRC32 mismatch")
            st.verified.add(b)

    def _decode(self, st: ContainerStream, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        if st.block_pairs:
            return self._decode_span(st, start, count)
        words = self._words(st)
        cp = None
        for c in st.checkpoints:
            if c.pair <= start:
                cp = c
        top = cp.word + (1 if cp and cp.bit else 0) if cp else st.n_words
        try:
            if fastans.supported(st.spec):
                if st.prepared is None:
                    st.prepared = fastans.PreparedTables(st.spec, st.tables)
                s, e, after = fastans.decode(st.spec, words, st.tables, st.runs, start, count, cp, st.prepared)
            else:
                if st.word_list is None:
                    st.word_list = words.tolist()
                s, e, after = st.spec.coder().decode(st.word_list, st.tables, st.runs, start, count, cp)
        except StreamError as exc:
            self._verify_blocks(st, words, 0, top)
            raise self._fail(f"tensor {self._tensor_at(st, start)!r} (stream {st.index})", str(exc)) from None
        self._verify_blocks(st, words, after.word, top)
        return s, e

    def read(self, name: str) -> np.ndarray:
        """The tensor's stored bit patterns (or raw values), shaped, in the container's dtype: ``uint8``
        patterns for fp8, the 4-bit values ``q`` (``uint8``, 0..15, weight order) for a Q4_0 tensor,
        whose ``NAME:scales`` record reads as the blocks' fp16 patterns (``uint16``)."""
        rec = self.record(name)
        return self.read_range(name, 0, None).reshape(rec["shape"])

    def read_range(self, name: str, start: int, count: int | None) -> np.ndarray:
        """Values ``start .. start+count-1`` of the flattened tensor (bit patterns for float tensors)."""
        rec = self.record(name)
        n = int(np.prod(rec["shape"], dtype=np.int64))
        count = n - start if count is None else count
        if start < 0 or count < 0 or start + count > n:
            raise ConfigError(f"{self.path}: range {start}..{start + count} is outside tensor {name!r} of {n} values")
        if rec["coding"] == "raw":
            item = ITEMSIZE[rec["dtype"]]
            lo = self._payload + int(rec["payload_offset"])
            data = self._bytes(lo, lo + int(rec["nbytes"]), f"tensor {name!r}")
            for b, (o, hi, crc) in enumerate(rec["blocks"]):
                if record_crc(data[o:hi]) != crc:
                    raise self._fail(f"tensor {name!r} block {b}", "CRC32 mismatch")
            return np.frombuffer(data[start * item:(start + count) * item], dtype=RAW_NUMPY.get(rec["dtype"], f"V{item}"))
        st = self.streams[int(rec["stream"])]
        if st.block_pairs and count:  # version 6: the blocks the range lies in, each decoded to values
            return self._block_range(st, int(rec["first_pair"]) + start, count)
        s, e = self._decode(st, int(rec["first_pair"]) + start, count)
        return self._join(rec, s, _unshift(rec, e, start))

    def _block_range(self, st: ContainerStream, start: int, count: int) -> np.ndarray:
        """Values of stream pairs ``start .. start+count-1`` (one tensor's) of a version-6 stream: each
        block they touch decoded whole to values (:meth:`_block_value_bits`), then cut to the range."""
        b = int(np.searchsorted([blk.pair for blk in st.spans], start, side="right")) - 1
        end, parts = start + count, []
        while b < len(st.spans) and st.spans[b].pair < end:
            blk = st.spans[b]
            if blk.count:
                vals = self._block_value_bits(st, b)
                parts.append(vals[max(start, blk.pair) - blk.pair:min(end, blk.pair + blk.count) - blk.pair])
            b += 1
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _join(self, rec: dict, symbols: np.ndarray, extras: np.ndarray) -> np.ndarray:
        """Decoded symbols of a tensor → its values' bit patterns (flat), through its code table."""
        codes, extra = rec["_code_table"].from_symbols(symbols, extras)
        exps = np.asarray(rec["exponents"], dtype=np.uint16)
        if codes.size and int(codes.max()) >= exps.size:
            raise self._fail(f"tensor {rec['name']!r}", "decoded code outside the tensor's exponent table")
        fmt = rec["_fmt"]
        pairs = CodingPairs(codes.astype(np.uint16), extra.astype(np.uint32),
                            np.full(exps.size, fmt.extra_bits, np.uint8), exps, (codes.size,))
        return fmt.join(pairs).ravel()

    def decode_range(self, name: str, start: int, count: int) -> np.ndarray:
        """Random access: values ``start .. start+count-1`` of tensor ``name``, decoded from the nearest
        checkpoint at or before ``start`` (bit patterns of the tensor's dtype)."""
        return self.read_range(name, start, count)

    def _decode_all(self, st: ContainerStream, threads: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Every pair of a stream, its segments between checkpoints decoded on ``threads`` threads; all
        of its blocks' CRCs checked (a failed decode reports the corrupt block when there is one)."""
        if st.block_pairs:
            parts = thread_map(lambda b: self._decode_block(st, b), range(len(st.spans)),
                         kernels.default_threads() if threads is None else max(1, int(threads)))
            if not parts:
                return np.zeros(0, np.int64), np.zeros(0, np.uint64)
            return np.concatenate([s for s, _ in parts]), np.concatenate([e for _, e in parts])
        if not fastans.supported(st.spec):
            return self._decode(st, 0, st.n_pairs)
        words = self._words(st)
        try:
            s, e = fastans.decode_segments(st.spec, words, st.tables, st.runs, st.checkpoints, threads, compact=True)
        except StreamError as exc:
            self._verify_blocks(st, words, 0, st.n_words)
            raise self._fail(f"tensor {self._tensor_at(st, 0)!r} (stream {st.index})", str(exc)) from None
        self._verify_blocks(st, words, 0, st.n_words)
        return s, e

    def _decode_values(self, st: ContainerStream, threads: int | None) -> np.ndarray | None:
        """Every value of a stream's tensors (their bit patterns, in stream order) in one native pass
        (:func:`fastans.decode_values`), its blocks' CRCs checked; ``None`` where that path does not
        apply (then the pairs are decoded and joined per tensor, which also names any error)."""
        if len(st.table_owner) != len(st.tables) or not st.tables or not fastans.supported(st.spec):
            return None
        recs = [self.tensors[i] for i, _ in st.table_owner]
        fmts = {(r["_fmt"].extra_bits, r["_fmt"].mantissa_bits, r["_fmt"].total_bits, np.dtype(r["_fmt"].bits_dtype))
                for r in recs}
        if len(fmts) != 1 or any(r["pair_format"] == "q4_0" for r in recs):
            return None
        joins = self._joins(st, 0, len(st.tables))
        words = self._words(st)
        vals = fastans.decode_values(st.spec, words, st.tables, st.runs, st.checkpoints, joins, recs[0]["_fmt"],
                                     threads)
        if vals is not None:
            self._verify_blocks(st, words, 0, st.n_words)
        return vals

    def arrays(self, threads: int | None = 1) -> Iterator[tuple[str, np.ndarray]]:
        """Every tensor as :meth:`decompress` writes it, in record order: ``(name, flat array)`` (its
        safetensors dtype; ``uint8`` bytes for a raw tensor and for a Q4_0 tensor's blocks; bf16 as its
        ``uint16`` bit patterns), decoded as ``decompress``
        decodes them (a version-6 stream's tensors grouped into native calls on ``threads`` threads,
        every block's CRC checked) without writing a file."""
        pools: list[ThreadPoolExecutor] = []
        try:
            outputs, _ = self._outputs(threads, pools)
            for (name, _, _), fill in outputs:
                chunks = [np.asarray(c).ravel() for c in fill()]
                yield name, chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
        finally:
            for pool in pools:
                pool.shutdown(wait=True, cancel_futures=True)

    def decompress(self, out: str | os.PathLike[str], threads: int | None = 1) -> int:
        """Write every tensor to a safetensors file (atomically), bit-exact; ``threads`` threads decode
        each stream's checkpoint segments or blocks and write the decoded tensors (``None``: one per CPU).

        fp8 tensors are written as ``F8_E4M3``/``F8_E5M2``; one converted with a per-tensor scale also
        gets a float32 scalar ``NAME_scale`` (dequantized weight = fp8 × scale; vLLM's convention), so
        the file is the fp8 checkpoint that was coded, not a re-widened approximation. A GGUF Q4_0
        tensor is written as its exact GGUF bytes, ``U8`` of shape ``(blocks, 18)`` (safetensors has no
        Q4_0 type); the metadata key ``ansforge.q4_0`` maps each such name to its weights' shape.
        Returns the number of tensors written."""
        pools: list[ThreadPoolExecutor] = []
        try:
            outputs, meta = self._outputs(threads, pools)
            write_safetensors(out, [spec for spec, _ in outputs], lambda index, name: outputs[index][1](), metadata=meta,
                              threads=kernels.default_threads() if threads is None else max(1, int(threads)))
        finally:
            for pool in pools:
                pool.shutdown(wait=True, cancel_futures=True)
        return len(outputs)

    def decompress_folder(self, folder: str | os.PathLike[str], threads: int | None = 1) -> list[str]:
        """Write a container of a sharded folder (:attr:`sharded`) back as that folder: the same shard files
        holding the same tensors in the same order, each with its own metadata, the index and
        ``config.json`` as they were read (:func:`~.checkpoint.write_sharded` with the recorded layout; an
        fp8 tensor's ``NAME_scale`` joins its tensor's shard, and the index is then rebuilt). Each file is
        written atomically; returns the shard files' names."""
        if not self.sharded:
            raise ConfigError(f"{self.path}: not the container of a sharded folder (it has no shard layout); "
                              "decompress it to one .safetensors file")
        pools: list[ThreadPoolExecutor] = []
        try:
            outputs, _ = self._outputs(threads, pools)
            layout = json.loads(json.dumps(self.file_layout))
            shard_of = {n: s for s in layout["shards"] for n in s["tensors"]}
            for (name, _, _), _ in outputs:
                if name not in shard_of and name.endswith(FP8_SCALE_SUFFIX):
                    owner = shard_of[name[:-len(FP8_SCALE_SUFFIX)]]
                    owner["tensors"].insert(owner["tensors"].index(name[:-len(FP8_SCALE_SUFFIX)]) + 1, name)
            return write_sharded(folder, [spec for spec, _ in outputs], lambda index, name: outputs[index][1](),
                                 layout=layout)
        finally:
            for pool in pools:
                pool.shutdown(wait=True, cancel_futures=True)

    def _outputs(self, threads: int | None, pools: list) -> tuple[list, dict]:
        """What :meth:`decompress` writes: ``[((name, dtype, shape), fill), ...]`` in record order (``fill()``
        yields the tensor's arrays) and the file's metadata; a pool of decoding threads is appended to
        ``pools`` for the caller to shut down."""
        decoded: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        as_values: dict[int, object] = {}

        def stream_pairs(st: ContainerStream):
            if st.index not in decoded:
                decoded[st.index] = self._decode_all(st, threads)
            return decoded[st.index]

        def values(rec: dict) -> np.ndarray:
            st = self.streams[int(rec["stream"])]
            a, n = int(rec["first_pair"]), int(rec["n_pairs"])
            if st.block_pairs:  # version 6: the blocks on the threads, while the tensors before are written
                if st.index not in as_values:
                    as_values[st.index] = self._block_values_source(st, threads, pools)
                return as_values[st.index](self._by_name[rec["name"]])
            if st.index not in as_values:
                as_values[st.index] = self._decode_values(st, threads)
            if as_values[st.index] is not None:
                return as_values[st.index][a:a + n]
            s_all, e_all = stream_pairs(st)
            s, e = s_all[a:a + n], _unshift(rec, e_all[a:a + n], 0)
            bits = fastpairs.join_values(rec["_code_table"], rec["exponents"], rec["_fmt"], s, e) \
                if fastans.supported(st.spec) and rec["pair_format"] != "q4_0" else None
            if bits is None:  # the golden path (it also names a code outside the tables)
                bits = self._join(rec, s.astype(np.int64), e.astype(np.uint64))
            return bits

        def fill_record(rec: dict):
            if rec["coding"] == "raw":
                yield np.frombuffer(self.read_range(rec["name"], 0, None).tobytes(), np.uint8)
            elif rec["pair_format"] == "q4_0":
                yield q4_0_join(values(rec), values(self.record(rec["scales"])))
            elif rec["pair_format"] in FP8_FORMATS:
                yield values(rec).astype(np.uint8)
            else:
                bits = values(rec)
                yield bits.view(SUPPORTED_DTYPES[rec["dtype"]]) if rec["dtype"] != "BF16" else bits

        outputs: list[tuple[tuple[str, str, tuple], Callable]] = []
        q4 = {}
        for r in self.tensors:
            if "scales_of" in r:
                continue  # written inside its Q4_0 tensor's blocks
            if r["coding"] == "pairs" and r["pair_format"] == "q4_0":
                q4[r["name"]] = r["shape"]
                n_blocks = int(r["n_pairs"]) // Q4_0_BLOCK
                outputs.append(((r["name"], "U8", (n_blocks, Q4_0_BLOCK_BYTES)), lambda r=r: fill_record(r)))
                continue
            outputs.append(((r["name"], r["dtype"], tuple(r["shape"])), lambda r=r: fill_record(r)))
            if "scale" in r:
                outputs.append(((r["name"] + FP8_SCALE_SUFFIX, "F32", ()),
                                lambda r=r: iter([np.asarray([r["scale"]], np.float32)])))
        names = [spec[0] for spec, _ in outputs]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise self._fail(f"tensor {dup!r}", "is also the name of another tensor's scale in the output")
        # the source file's metadata as it was; a file without any (GGUF, llama2.c) gets a provenance note
        meta = dict(self.file_metadata) if self.file_metadata is not None else \
            {"ansforge": "decompressed from " + self.path.name}
        if q4:
            meta["ansforge.q4_0"] = json.dumps(q4, separators=(",", ":"))
        return outputs, meta


def _unshift(rec: dict, extras: np.ndarray, start: int) -> np.ndarray:
    """Additional data of pairs ``start ..`` of a tensor with their rows' zero mantissa bits restored."""
    if not rec.get("_shifts"):
        return extras
    z_row, per_row = rec["_shifts"]
    z = z_row[np.arange(start, start + extras.size, dtype=np.int64) // per_row].astype(extras.dtype)
    return extras << z


def open_container(path: str | os.PathLike[str]) -> Container:
    """Open and validate a container's header and records (payload blocks are checked when decoded)."""
    return Container(path)
