"""Opening a container: the header and every record read and checked (:class:`ContainerRecords`),
before any stream is decoded (:mod:`.read`).
"""

from __future__ import annotations

import binascii
import json
import math
import mmap
import os
import re
import struct
from pathlib import Path

import numpy as np

from ...llm.checkpoint import ITEMSIZE, identify, layout_plan, llama2c_config_of, shape_problem
from ..codecs import Codec, parse_codec
from ..codetable import CodeTable
from ..context import ContextPlan, folded_format, plan_from_record, side_bits
from ...errors import AnsforgeError, ConfigError
from ...dtypes.pairs import PAIR_FORMATS
from ...dtypes.quantized import FP8_FORMATS, Q4_0_BLOCK
from ..stream import Block, Checkpoint, Run, block_ranges, block_spans, word_dtype
from .encode import shifted_tables
from .records import (ContainerError, ContainerStream, FORMATS, HEADER, LEGACY_CODECS, MAGIC, MAX_PAIRS, MAX_PAYLOAD,
                      RAW_BLOCK_BYTES, READ_VERSIONS, STORAGE, VERSION_BLOCKS, VERSION_SPREADS, VERSION_STATES,
                      format_lines, format_sizes, hf_config_text, is_int, record_crc, record_field)


#: A record's name field, found in a record whose JSON does not parse (the error names the tensor).
_NAME_RE = re.compile(rb'"name":"((?:[^"\\]|\\.)*)"')


class ContainerRecords:
    """An open ``.ansf`` file's header and records, every field checked against the format and the
    file (a flipped or missing byte raises :class:`ContainerError` naming the tensor and field), and
    the views of them that need no decoding (names, records, sizes, ``inspect``). Fields a version
    does not have are refused in files of that version. :class:`~.read.Container` decodes."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if self.path.is_dir():
            raise ContainerError(f"{self.path}: is a directory; expected an .ansf file written by `ansforge compress`")
        # The file mapped read-only: records and streams are views of it, and decoded blocks' pages
        # are given back with madvise (:meth:`_release_blocks`).
        self._map: mmap.mmap | None = None
        try:
            if self.path.stat().st_size:
                with open(self.path, "rb") as f:
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self._data = np.frombuffer(self._map, dtype=np.uint8) if self._map is not None else b""
        except OSError as e:
            raise ContainerError(f"{self.path}: cannot read: {e.strerror or e}") from None
        self._parse()

    # -- parsing -----------------------------------------------------------------------------------
    def _fail(self, where: str, msg: str) -> ContainerError:
        return ContainerError(f"{self.path}: {where}: {msg}")

    def _bytes(self, lo: int, hi: int, where: str) -> bytes:
        if lo < 0 or hi > len(self._data) or lo > hi:
            raise self._fail(where, f"truncated (needs bytes {lo}..{hi}, file has {len(self._data)})")
        return bytes(self._data[lo:hi])

    def _truncated(self, needs: str) -> ContainerError:
        """A file cut short: the bytes it has and what needs more (``needs``)."""
        return ContainerError(f"{self.path}: truncated: the file has {len(self._data):,} bytes, {needs}")

    def _parse(self) -> None:
        start = bytes(self._data[:8])
        if start != MAGIC:
            if len(self._data) < 8 and MAGIC.startswith(start):
                raise self._truncated("its header needs 24")
            kind, what = identify(self.path)
            if kind in ("safetensors", "gguf", "llama2c"):
                what += ": `ansforge compress --model` makes a container of it"
            elif kind is None and what.startswith("it is too short"):
                what = f"it has only {len(self._data)} bytes"
            raise self._fail("header", f"not an ansforge container ({what}; bad magic); expected an .ansf file "
                                       "written by `ansforge compress`")
        if len(self._data) < 24:
            raise self._truncated("its header needs 24")
        head = bytes(self._data[:24])
        magic, version, n_t, n_s, crc = HEADER.unpack(head)
        if crc != record_crc(head[:20]):
            raise self._fail("header", "CRC32 mismatch")
        if version not in READ_VERSIONS:
            newer = version > max(READ_VERSIONS)
            raise self._fail("header", f"container version {version} is not supported: this ansforge reads versions "
                                       f"{min(READ_VERSIONS)} to {max(READ_VERSIONS)}"
                                       + (" (a newer ansforge wrote it)" if newer else ""))
        self.version = version
        if 24 + 8 * (n_t + n_s) > len(self._data):  # every record takes at least its length and CRC
            raise self._truncated(f"its {n_t} tensor and {n_s} stream records need at least {24 + 8 * (n_t + n_s):,}")
        pos = 24
        raw_records = []
        record_bytes: list[int] = []  # each record's bytes in the file (length, JSON, CRC)
        for i in range(n_t + n_s):
            # numbered from 0, as `ansforge inspect` numbers streams
            what = f"tensor {i} record" if i < n_t else f"stream {i - n_t} record"
            of = f"the {what} (of {n_t if i < n_t else n_s}, from 0)"
            if pos + 4 > len(self._data):
                raise self._truncated(f"{of} needs {pos + 4:,}")
            (length,) = struct.unpack("<I", self._bytes(pos, pos + 4, what))
            if pos + 8 + length > len(self._data):
                raise self._truncated(f"{of} needs {pos + 8 + length:,}")
            js = self._bytes(pos + 4, pos + 4 + length, what)
            (crc,) = struct.unpack("<I", self._bytes(pos + 4 + length, pos + 8 + length, what))
            if crc != record_crc(js):
                if i < n_t:
                    m = _NAME_RE.search(js)
                    name = f"tensor {m.group(1).decode(errors='replace')!r} " if m else ""
                else:
                    held = [r.get("name") for r in raw_records[:n_t]
                            if isinstance(r, dict) and r.get("stream") == i - n_t]
                    name = f"tensor {held[0]!r}{f' (and {len(held) - 1} more)' if len(held) > 1 else ''} " \
                        if held else ""
                raise self._fail(f"{name}({what}), metadata block", "CRC32 mismatch")
            try:
                rec = json.loads(js)
            except (ValueError, RecursionError) as e:  # RecursionError: absurdly nested JSON
                raise self._fail(what, f"malformed JSON: {str(e)[:200]}") from None
            if not isinstance(rec, dict):
                raise self._fail(what, f"must be a JSON object, not {type(rec).__name__}")
            raw_records.append(rec)
            record_bytes.append(8 + length)
            pos += 8 + length
        self._payload = pos
        self.tensors: list[dict] = raw_records[:n_t]
        self._record_bytes = record_bytes
        self.streams: list[ContainerStream] = [self._parse_stream(si, rec) for si, rec in enumerate(raw_records[n_t:])]
        self._by_name = {}
        regions: list[tuple[int, int, str]] = [(st.offset, st.offset + st.n_words * st.word_bytes, f"stream {st.index}")
                                               for st in self.streams]
        self.file_metadata: dict[str, str] | None = None
        for i, rec in enumerate(self.tensors):
            where = f"tensor {i} record"
            name = record_field(rec, "name", str, self._fail, where)
            where = f"tensor {name!r}"
            if "file_metadata" in rec:
                meta = rec["file_metadata"]
                if i:
                    raise self._fail(where, "file_metadata belongs in the first tensor record only")
                if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
                    raise self._fail(where, "file_metadata must map strings to strings")
                self.file_metadata = meta
            if "file_layout" in rec and i:
                raise self._fail(where, "file_layout belongs in the first tensor record only")
            if name in self._by_name:
                raise self._fail(where, "appears twice")
            self._by_name[name] = i
            coding = record_field(rec, "coding", str, self._fail, where)
            shape = record_field(rec, "shape", list, self._fail, where)
            problem = shape_problem(shape)  # the writer's own check (compress_checkpoint)
            if problem:
                raise self._fail(where, f"shape {str(shape)[:80]} has {problem}")
            size = 1
            for d in shape:
                size *= d
            if coding == "raw":
                regions.append(self._parse_raw(rec, where, size))
            elif coding == "pairs":
                self._parse_pairs(i, rec, where, size)
            else:
                raise self._fail(where, f"coding must be 'pairs' or 'raw', not {coding!r}")
        self._check_q4_0()
        self.file_layout: dict | None = None
        if self.tensors and "file_layout" in self.tensors[0]:
            self.file_layout = self._parse_file_layout(self.tensors[0]["file_layout"])
        # The payload is exactly the streams and raw tensors, back to back: every byte is accounted for,
        # bytes appended to a container are an error rather than silently ignored; a file cut short is
        # "truncated", before any field is judged against the bytes that are missing.
        expect = 0
        for lo, hi, what in sorted(regions):
            if lo != expect:
                raise self._fail(what, f"starts at payload offset {lo}, expected {expect} "
                                       f"({'overlap' if lo < expect else 'a gap'} in the payload)")
            expect = hi
        size = len(self._data) - self._payload
        if expect > size:
            raise self._truncated(f"its records describe {self._payload + expect:,}")
        if expect < size:
            raise self._fail("payload", f"{size - expect} bytes follow the last stream or tensor (appended data?)")
        for st in self.streams:
            if sum(r.count for r in st.runs) != st.n_pairs:
                raise self._fail(f"stream {st.index}", f"tensor pair counts add up to {sum(r.count for r in st.runs)}, "
                                                       f"not the stream's {st.n_pairs}")
            if st.block_pairs:
                self._parse_spans(st)
            # tANS: every pair's additional data is in the words, so a stream cannot hold more pairs than
            # its bits allow: this bounds the memory a decoder allocates by the file's size. Not so for
            # rANS, whose encoder starts from x = 0: pairs whose code and additional data are all zero
            # cost nothing there (an all-zero bias is a stream of 0 words), so only the shape bounds them.
            if not st.spec.extra_data_in_words:
                continue
            least = min((self.tensors[ti]["_code_table"].extra_bits - (int(self.tensors[ti]["_shifts"][0].max())
                                                                        if self.tensors[ti]["_shifts"] else 0)
                         for ti in st.tensors if self.tensors[ti]["n_pairs"]), default=0)
            if least * st.n_pairs > st.n_words * st.spec.word_bits:
                raise self._fail(f"stream {st.index}", f"{st.n_pairs} pairs of at least {least} bits each cannot "
                                                       f"fit in {st.n_words} {st.spec.word_bits}-bit words")

    def _parse_file_layout(self, layout: object) -> dict:
        """The first tensor record's ``file_layout``: ``index`` and ``config`` texts or null, ``shards`` null
        or the files (plain ``*.safetensors`` names) that hold every tensor exactly once."""
        where = f"tensor {self.tensors[0]['name']!r} file_layout"
        if not isinstance(layout, dict) or set(layout) != {"index", "config", "shards"}:
            raise self._fail(where, "must be an object of index, config and shards")
        for key in ("index", "config"):
            if not isinstance(layout[key], (str, type(None))):
                raise self._fail(where, f"{key} must be a text or null, not {type(layout[key]).__name__}")
        if layout["shards"] is None:
            if layout["index"] is not None:
                raise self._fail(where, "an index needs shards")
            return layout
        position = {r["name"]: k for k, r in enumerate(r for r in self.tensors if "scales_of" not in r)}
        try:
            layout_plan(layout, position)
        except ConfigError as e:
            raise self._fail(where, str(e)) from None
        return layout

    @property
    def sharded(self) -> bool:
        """Whether the container came from a sharded folder (its ``file_layout`` names the shards), which
        :meth:`decompress_folder` gives back."""
        return bool(self.file_layout and self.file_layout["shards"])

    def config_text(self) -> str | None:
        """The ``config.json`` that goes with the tensors: the source folder's as read, a llama2.c
        header's (:func:`~.checkpoint.hf_llama_config`; recorded, or implied by a legacy llama2.c
        file's tensors), or ``None``."""
        if self.file_layout is not None:
            return self.file_layout["config"]
        config = llama2c_config_of([(r["name"], r["shape"]) for r in self.tensors])
        if config is None:
            return None
        return hf_config_text(config, self.tensors[0]["dtype"])

    def _check_q4_0(self) -> None:
        """Each Q4_0 tensor and its scales' record name each other, and there is one scale per block."""
        for rec in self.tensors:
            if "scales" in rec:
                where = f"tensor {rec['name']!r}"
                size = int(rec["n_pairs"])
                other = self._by_name.get(rec["scales"])
                sc = self.tensors[other] if other is not None else None
                if sc is None or sc.get("scales_of") != rec["name"]:
                    raise self._fail(where, f"its scales' record {rec['scales']!r} is missing or names another tensor")
                if size % Q4_0_BLOCK or sc["shape"] != [size // Q4_0_BLOCK]:
                    raise self._fail(where, f"{size} Q4_0 weights need {size / Q4_0_BLOCK:g} scales in whole blocks, "
                                            f"its scales' record has shape {sc['shape']}")
            if "scales_of" in rec:
                owner = self._by_name.get(rec["scales_of"])
                if owner is None or self.tensors[owner].get("scales") != rec["name"]:
                    raise self._fail(f"tensor {rec['name']!r}", f"holds the scales of {rec['scales_of']!r}, "
                                                                "which does not name it")

    def _parse_stream(self, si: int, rec: dict) -> ContainerStream:
        where = f"stream {si} record"
        codec = record_field(rec, "codec", dict, self._fail, where)
        try:
            spec = Codec.from_json(codec)
        except AnsforgeError as e:
            raise self._fail(where, str(e)) from None
        try:
            canonical = parse_codec(spec.name)
        except ConfigError:
            canonical = None
        if canonical != spec and spec not in LEGACY_CODECS:
            raise self._fail(where, f"codec {str(codec)[:200]} is not one that ansforge writes")
        if spec.states > 1 and self.version < VERSION_STATES:
            raise self._fail(where, f"codec {spec.name} interleaves {spec.states} states, which needs container "
                                    f"version {VERSION_STATES}, not {self.version}")
        # Bounded by what a file could hold, not by this file: a file cut short is reported as truncated
        # once every record is read (Container._parse), not as a field out of range.
        limit = MAX_PAYLOAD
        n_words = record_field(rec, "n_words", int, self._fail, where, 0, limit)
        word_bytes = record_field(rec, "word_bytes", int, self._fail, where)
        if word_bytes != word_dtype(spec.word_bits).itemsize:
            raise self._fail(where, f"word_bytes = {word_bytes} does not hold {spec.word_bits}-bit words")
        n_pairs = record_field(rec, "n_pairs", int, self._fail, where, 0, 1 << 48)
        offset = record_field(rec, "payload_offset", int, self._fail, where, 0, limit)
        # Version 6 holds only block streams; from version 7 (which a model- or tensor-layout file with an
        # implied spread has too) a stream record is a block stream when it gives block_pairs.
        if self.version == VERSION_BLOCKS or (self.version >= VERSION_SPREADS and "block_pairs" in rec):
            return self._parse_block_stream(si, rec, where, spec, n_pairs, n_words, word_bytes, offset)
        if "block_pairs" in rec:
            raise self._fail(where, f"field 'block_pairs' needs container version {VERSION_BLOCKS}, not {self.version}")
        interval = record_field(rec, "checkpoint_interval", int, self._fail, where, 0, MAX_PAIRS)
        cps = record_field(rec, "checkpoints", list, self._fail, where)
        if len(cps) > n_pairs:
            raise self._fail(where, f"{len(cps)} checkpoints for {n_pairs} pairs")
        state_limit, N = 1 << spec.state_bits, spec.states
        checkpoints, last = [], 0
        for c in cps:
            # One state: [pair, word, bit, state]; N > 1 states: [pair, word, bit, [s0, ..., s_{N-1}]].
            if not (isinstance(c, list) and len(c) == 4 and all(is_int(v) for v in c[:3])
                    and (is_int(c[3]) if N == 1 else isinstance(c[3], list) and all(is_int(v) for v in c[3]))):
                raise self._fail(where, f"checkpoint {str(c)[:80]} is not [pair, word, bit, "
                                        + ("state]" if N == 1 else f"[{N} states]]"))
            pair, word, bit, state = c
            if N > 1 and len(state) != N:
                raise self._fail(where, f"checkpoint {str(c)[:80]} holds {len(state)} states, codec {spec.name} "
                                        f"has {N}")
            # Checkpoints lie strictly inside the stream, in increasing order, and fit the coder; a
            # decoder started from one is then bounded by the pair counts (pair = -2**31 once ran forever).
            if not (last < pair < n_pairs and 0 <= word <= n_words and 0 <= bit < spec.word_bits
                    and (bit == 0 or (spec.checkpoint_mid_word and word < n_words))
                    and all(0 <= v < state_limit for v in (state if N > 1 else [state]))):
                raise self._fail(where, f"checkpoint {str(c)[:120]} does not fit a stream of {n_pairs} pairs and "
                                        f"{n_words} words" + (" (checkpoints must increase)" if pair <= last else ""))
            last = pair
            checkpoints.append(Checkpoint(pair, word, bit, tuple(state) if N > 1 else state))
        if interval and (len(checkpoints) != (n_pairs - 1) // interval if n_pairs else checkpoints) \
                or any(c.pair != (k + 1) * interval for k, c in enumerate(checkpoints)):
            raise self._fail(where, f"checkpoints are not every checkpoint_interval = {interval} pairs")
        blocks = record_field(rec, "blocks", list, self._fail, where)
        ranges = block_ranges(n_words, checkpoints)
        if len(blocks) != len(ranges) or not all(
                isinstance(b, list) and len(b) == 3 and all(is_int(v) for v in b) and tuple(b[:2]) == r
                and 0 <= b[2] <= 0xFFFFFFFF for b, r in zip(blocks, ranges)):
            if self.version != 1:
                raise self._fail(where, "CRC blocks do not match the checkpoints' word ranges")
            if not all(isinstance(b, list) and len(b) == 3 and all(is_int(v) for v in b)
                       and 0 <= b[0] <= b[1] <= n_words and 0 <= b[2] <= 0xFFFFFFFF for b in blocks) \
                    or len(blocks) != len(ranges):
                raise self._fail(where, "CRC blocks are malformed")
        return ContainerStream(si, spec, n_pairs, n_words, word_bytes, offset, checkpoints, [tuple(b) for b in blocks])

    def _parse_block_stream(self, si: int, rec: dict, where: str, spec: Codec, n_pairs: int, n_words: int,
                            word_bytes: int, offset: int) -> ContainerStream:
        """A version-6 stream record: ``block_pairs`` and ``blocks`` ``[n_words, crc]``, the blocks' words
        back to back from address 0; their pairs are checked once the tensors are read (:meth:`_parse_spans`)."""
        for key in ("checkpoints", "checkpoint_interval"):
            if key in rec:
                raise self._fail(where, f"field {key!r} has no place in a version-{self.version} stream (its "
                                        "independent blocks are the random-access points)")
        block_pairs = record_field(rec, "block_pairs", int, self._fail, where, 1, MAX_PAIRS)
        blocks = record_field(rec, "blocks", list, self._fail, where)
        if len(blocks) > n_pairs:
            raise self._fail(where, f"{len(blocks)} blocks for {n_pairs} pairs")
        ranges, word = [], 0
        for b, blk in enumerate(blocks):
            if not (isinstance(blk, list) and len(blk) == 2 and all(is_int(v) for v in blk)
                    and 0 <= blk[0] <= n_words and 0 <= blk[1] <= 0xFFFFFFFF):
                raise self._fail(where, f"block {b} {str(blk)[:60]} is not [n_words, crc32]")
            ranges.append((word, word + blk[0], blk[1]))
            word += blk[0]
        if word != n_words:
            raise self._fail(where, f"blocks hold {word} words, the stream {n_words}")
        return ContainerStream(si, spec, n_pairs, n_words, word_bytes, offset, [], ranges, block_pairs=block_pairs)

    def _parse_spans(self, st: ContainerStream) -> None:
        """A version-6 stream's blocks against its tensors' pairs (:func:`~.stream.block_spans`)."""
        counts = [int(self.tensors[ti]["n_pairs"]) for ti in st.tensors]
        want = sum(-(-n // st.block_pairs) for n in counts)
        if want != len(st.blocks):
            raise self._fail(f"stream {st.index}", f"{len(st.blocks)} blocks, but its tensors' {sum(counts)} pairs "
                                                   f"make {want} blocks of at most {st.block_pairs} pairs")
        st.spans = [Block(lo, n, w_lo, w_hi - w_lo, crc, st.tensors[t])
                    for (t, lo, n), (w_lo, w_hi, crc) in zip(block_spans(counts, st.block_pairs), st.blocks)]

    def _parse_raw(self, rec: dict, where: str, size: int) -> tuple[int, int, str]:
        dtype = record_field(rec, "dtype", str, self._fail, where)
        if dtype not in ITEMSIZE:
            raise self._fail(where, f"dtype {dtype!r} is not one of {', '.join(ITEMSIZE)}")
        limit = MAX_PAYLOAD
        offset = record_field(rec, "payload_offset", int, self._fail, where, 0, limit)
        nbytes = record_field(rec, "nbytes", int, self._fail, where, 0, limit)
        if nbytes != size * ITEMSIZE[dtype]:
            raise self._fail(where, f"nbytes = {nbytes}, but shape {rec['shape']} of {dtype} needs {size * ITEMSIZE[dtype]}")
        blocks = record_field(rec, "blocks", list, self._fail, where)
        want = [(o, min(nbytes, o + RAW_BLOCK_BYTES)) for o in range(0, nbytes, RAW_BLOCK_BYTES)]
        if len(blocks) != len(want) or not all(
                isinstance(b, list) and len(b) == 3 and all(is_int(v) for v in b) and tuple(b[:2]) == w
                and 0 <= b[2] <= 0xFFFFFFFF for b, w in zip(blocks, want)):
            raise self._fail(where, "CRC blocks do not cover the tensor's bytes")
        return offset, offset + nbytes, where

    def _parse_pairs(self, i: int, rec: dict, where: str, size: int) -> None:
        fmt_name = record_field(rec, "pair_format", str, self._fail, where)
        if fmt_name not in FORMATS:
            raise self._fail(where, f"pair_format {fmt_name!r} is not one of {', '.join(FORMATS)}")
        fmt = FORMATS[fmt_name]
        if "scale" in rec:  # an fp8 tensor converted with a per-tensor scale
            sc = rec["scale"]
            if fmt_name not in FP8_FORMATS or isinstance(sc, bool) or not isinstance(sc, (int, float)) \
                    or not (0 < sc < float("inf")) or float(np.float32(sc)) != sc:
                raise self._fail(where, f"scale {str(sc)[:40]} must be a positive finite float32 of an fp8 tensor")
        if (fmt_name == "q4_0") != ("scales" in rec) or ("scales" in rec and not isinstance(rec["scales"], str)):
            raise self._fail(where, "a q4_0 tensor, and only one, names the record of its scales ('scales')")
        if (fmt_name == "q4_0_scale") != ("scales_of" in rec) or ("scales_of" in rec and not isinstance(rec["scales_of"], str)):
            raise self._fail(where, "a q4_0_scale tensor, and only one, names the Q4_0 tensor it scales ('scales_of')")
        if record_field(rec, "dtype", str, self._fail, where) != STORAGE[fmt_name]:
            raise self._fail(where, f"dtype {rec['dtype']!r} is not the storage of pair format {fmt_name}")
        plan = None
        if "context" in rec:
            # A context plan (version 4): the pairs are in the plan's folded format, so the exponent
            # table and the code table's extra width below are checked against that format.
            if self.version < 4:
                raise self._fail(where, f"field 'context' needs container version 4, not {self.version}")
            if fmt_name not in PAIR_FORMATS:  # plans fold mantissa bits: IEEE float pairs only
                raise self._fail(where, f"a context plan needs a {', '.join(PAIR_FORMATS)} tensor, not {fmt_name}")
            try:
                plan, fold = plan_from_record(rec["context"], rec["shape"],
                                              # codes index a 16-bit exponent table (CodingPairs.exponents)
                                              min(fmt.mantissa_bits, 16 - fmt.exponent_bits))
            except ConfigError as e:
                raise self._fail(where, str(e)) from None
            fmt = folded_format(fmt, fold)
        rec["_fmt"] = fmt
        for key in ("conversion",):
            record_field(rec, key, str, self._fail, where)
        if not isinstance(rec.get("ideal_bits", 0.0), (int, float)) or isinstance(rec.get("ideal_bits"), bool):
            raise self._fail(where, f"ideal_bits must be a number, not {rec['ideal_bits']!r}")
        exps = record_field(rec, "exponents", list, self._fail, where)
        if len(exps) > 1 << fmt.exponent_bits or not all(type(e) is int for e in exps) \
                or (exps and not 0 <= exps[0] <= exps[-1] < 1 << fmt.exponent_bits) or sorted(set(exps)) != exps:
            raise self._fail(where, f"exponents must be strictly increasing {fmt.exponent_bits}-bit fields")
        si = record_field(rec, "stream", int, self._fail, where, 0, len(self.streams) - 1)
        st = self.streams[si]
        n_pairs = record_field(rec, "n_pairs", int, self._fail, where, 0, 1 << 48)
        if n_pairs != size:
            raise self._fail(where, f"n_pairs = {n_pairs}, but shape {rec['shape']} holds {size} values")
        first = record_field(rec, "first_pair", int, self._fail, where, 0, 1 << 48)
        if first != st.coded_pairs:
            raise self._fail(where, "tensor pairs are not contiguous in their stream")
        try:
            ct = CodeTable.from_json(record_field(rec, "code_table", dict, self._fail, where))
        except AnsforgeError as e:
            raise self._fail(where, str(e)) from None
        if ct.precision_bits != st.spec.precision_bits or ct.extra_bits != (fmt.extra_bits if size else 0) \
                or (size and max(ct.direct_codes + ct.escape_codes) >= len(exps)):
            raise self._fail(where, f"code table (precision {ct.precision_bits}, extra {ct.extra_bits} bits) does "
                                    f"not fit codec {st.spec.name}, pair format {fmt_name} and {len(exps)} exponents")
        rec["_code_table"] = ct
        rec["_shifts"] = None
        rec["_plan"] = plan
        t_lo, r_lo = len(st.tables), len(st.runs)
        self._parse_tables(i, rec, where, st, ct, plan, fmt, size, n_pairs)
        st.coded_pairs += n_pairs  # its runs cover its pairs (a running sum: no pass over the runs per tensor)
        st.tensor_tables[i] = (t_lo, len(st.tables))
        st.tensor_runs[i] = (r_lo, len(st.runs))

    def _parse_tables(self, i: int, rec: dict, where: str, st: ContainerStream, ct: CodeTable, plan, fmt, size: int,
                      n_pairs: int) -> None:
        """A coded tensor's tables and runs (its one table, its row shifts' variants or its context
        plan's sets), appended to its stream's."""
        if plan is not None:
            if "row_shifts" in rec:
                raise self._fail(where, "a tensor with a context plan cannot have row_shifts")
            self._parse_context(rec, where, st, ct, plan, i)
            st.tensors.append(i)
            return
        try:
            table = st.spec.table_from_record(ct, lambda key: record_field(rec, key, str, self._fail, where))
        except (ValueError, binascii.Error) as e:  # ConfigError is a ValueError too
            raise self._fail(where, f"coder table is inconsistent: {e}") from None
        st.tensors.append(i)
        if "row_shifts" not in rec:
            st.runs.append(Run(len(st.tables), n_pairs))
            st.tables.append(table)
            st.table_owner.append((i, 0))
            return
        shifts = record_field(rec, "row_shifts", list, self._fail, where)
        rows = int(rec["shape"][0]) if len(rec["shape"]) >= 2 else 1
        if self.version < 3 or not size or not shifts or len(shifts) > rows or not all(
                isinstance(r, list) and len(r) == 2 and all(is_int(v) for v in r) and r[0] >= 1
                and 0 <= r[1] <= fmt.mantissa_bits for r in shifts) or sum(r[0] for r in shifts) != rows:
            raise self._fail(where, f"row_shifts must be [rows, z] runs covering its {rows} rows with z from 0 to "
                                    f"{fmt.mantissa_bits} (version 3 and later)")
        per_row = size // rows
        try:
            variants = shifted_tables(st.spec, ct, table, [z for _, z in shifts])
        except ValueError as e:
            raise self._fail(where, f"row_shifts do not fit the code table: {e}") from None
        index = {}
        for z, t in variants.items():
            index[z] = len(st.tables)
            st.tables.append(t)
            st.table_owner.append((i, z))
        st.runs.extend(Run(index[z], r * per_row) for r, z in shifts)
        rec["_shifts"] = (np.repeat(np.asarray([z for _, z in shifts], np.int64), [r for r, _ in shifts]), per_row)

    def _parse_context(self, rec: dict, where: str, st: "ContainerStream", ct: CodeTable, plan: ContextPlan,
                       index: int) -> None:
        """The table sets of a context record (one frequency list, and for tANS the spread, per set, on
        the code table's alphabet) and the runs its selects give, appended to ``st``."""
        ctx = rec["context"]
        sets = record_field(ctx, "sets", list, self._fail, where + " context")
        if len(sets) != plan.n_sets:
            raise self._fail(where, f"context sets holds {len(sets)} table sets, n_sets is {plan.n_sets}")
        tables = []
        for k, entry in enumerate(sets):
            what = f"{where} context set {k}"
            if not isinstance(entry, dict):
                raise self._fail(what, f"must be an object, not {type(entry).__name__}")
            freqs = record_field(entry, "freqs", list, self._fail, what)
            implied = st.spec.kind == "tans" and "tans_symbols" not in entry
            if implied and self.version < VERSION_SPREADS:
                raise self._fail(what, f"a table set without its spread ('tans_symbols') needs container version "
                                       f"{VERSION_SPREADS}, not {self.version}")
            try:
                ct_k = CodeTable(ct.direct_codes, ct.escape_codes, ct.extra_bits, tuple(freqs), ct.precision_bits)
                if implied:  # the spread its frequencies imply: fse, or tuned to f/L (version 7)
                    spread = record_field(entry, "tans_spread", str, self._fail, what)
                    if spread not in ("fse", "tuned"):
                        raise ConfigError(f"tans_spread {spread[:40]!r} is not fse or tuned")
                    table = st.spec.coder_table(ct_k, spread=spread)
                    table.stored_spread = False
                    tables.append(table)
                    continue
                tables.append(st.spec.table_from_record(ct_k, lambda key: record_field(entry, key, str, self._fail, what)))
            except (ValueError, TypeError, binascii.Error) as e:  # ConfigError is a ValueError too
                raise self._fail(what, f"table set is inconsistent: {e}") from None
        # A column plan is one run per group in every row: bound the runs by the file's size before
        # building them, so that a crafted shape (rANS pairs of zeros cost no words) cannot make the
        # reader allocate without limit. Real plans stay far below (MiniLM: < 0.1 run per byte).
        rows, cols = rec["shape"]
        n_runs = -(-rows // plan.group) if plan.axis == "rows" else rows * -(-cols // plan.group)
        if n_runs > 16 * len(self._data) + 16:
            raise self._fail(where, f"context plan makes {n_runs} runs, more than a {len(self._data)}-byte file "
                                    "can describe")
        first = len(st.tables)
        st.tables.extend(tables)
        st.table_owner.extend((index, 0) for _ in tables)
        st.runs.extend(plan.runs((rows, cols), first_table=first))

    # -- access ------------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [r["name"] for r in self.tensors]

    def record(self, name: str) -> dict:
        if name not in self._by_name:
            raise ConfigError(f"{self.path}: no tensor named {name!r}")
        return self.tensors[self._by_name[name]]

    def code_table(self, record: dict) -> CodeTable:
        """The :class:`CodeTable` (codes ↔ symbols, extra widths) of a tensor coded as pairs, given its
        :meth:`record`."""
        if record.get("coding") != "pairs":
            raise ConfigError(f"{self.path}: tensor {record.get('name')!r} is stored raw, it has no code table")
        return record["_code_table"]

    def plan_text(self, record: dict) -> str:
        """A tensor's context plan in a few characters: ``kind axis/group xSETS +mFOLD`` (``-`` without)."""
        plan = record.get("_plan")
        if plan is None:
            return "-"
        return f"{record['context']['kind']} {plan.axis}/{plan.group} x{plan.n_sets} +m{record['context']['fold']}"

    def side_bits(self, record: dict) -> int:
        """Side information of a coded tensor, packed as :func:`~.context.side_bits` counts it from its
        record: the code→exponent table (``exponents``, each a field of the pair format's exponent
        width, folded bits included), one ``precision_bits`` frequency per symbol and table set, the
        selects and the plan header; and every tANS spread the record stores (a plain record's, a set's
        ``tans_symbols``), ``2^R`` slots of ``ceil(log2 n_symbols)`` bits each (a spread a set's
        frequencies imply is not stored, version 7). A tensor without a context plan is one set without
        selects."""
        ct, fmt = record["_code_table"], record["_fmt"]
        plan = record.get("_plan")
        sets = record["context"]["sets"] if plan else [record]
        spreads = sum(1 for t in sets if "tans_symbols" in t)
        spread_bits = (1 << ct.precision_bits) * max(1, math.ceil(math.log2(max(2, ct.n_symbols))))
        return side_bits(len(record["exponents"]), fmt.exponent_bits, plan.n_sets if plan else 1, ct.n_symbols,
                         ct.precision_bits, len(plan.selects) if plan else 0) + spreads * spread_bits

    def tensor_bits(self, name: str) -> dict:
        """What a coded tensor alone in its stream (``--stream-per-tensor``) or in its own blocks (the
        blocks layout) costs in this file: ``stream_bits`` (its stream's or blocks' words as stored),
        ``checkpoint_bits`` (32 + 8 + state bits each; none in the blocks layout), ``side_bits``
        (:meth:`side_bits`), ``record_bytes`` (its JSON record with length and CRC)."""
        rec = self.record(name)
        if rec["coding"] != "pairs":
            raise ConfigError(f"{self.path}: tensor {name!r} is stored raw, it has no stream")
        st = self.streams[int(rec["stream"])]
        if st.block_pairs:
            i = self._by_name[name]
            return {"stream_bits": sum(b.n_words for b in st.spans if b.tensor == i) * st.word_bytes * 8,
                    "checkpoint_bits": 0, "side_bits": self.side_bits(rec),
                    "record_bytes": self._record_bytes[i]}
        if len(st.tensors) != 1:
            raise ConfigError(f"{self.path}: tensor {name!r} shares stream {st.index} with {len(st.tensors) - 1} "
                              "other tensors; its own bits need one stream per tensor (--stream-per-tensor)")
        return {"stream_bits": st.n_words * st.word_bytes * 8,
                "checkpoint_bits": len(st.checkpoints) * (40 + st.spec.state_bits),
                "side_bits": self.side_bits(rec), "record_bytes": self._record_bytes[self._by_name[name]]}

    def summary(self) -> dict:
        bits = sum(st.n_words * st.word_bytes * 8 + len(st.checkpoints) * (40 + st.spec.states * st.spec.state_bits)
                   for st in self.streams)
        ideal = sum(float(r.get("ideal_bits", 0.0)) for r in self.tensors if r["coding"] == "pairs")
        pairs = sum(st.n_pairs for st in self.streams)
        return {"tensors": len(self.tensors), "streams": len(self.streams), "pairs": pairs, "bits": bits,
                "ideal_bits": ideal, "gap": bits / ideal - 1 if ideal else 0.0,
                "bits_per_pair": bits / pairs if pairs else 0.0, "bytes": len(self._data)}

    def formats(self) -> dict[str, dict]:
        """:func:`format_sizes` of this container's tensors (its streams' bits shared out by ideal bits)."""
        return format_sizes(self.tensors, [st.n_words * st.word_bytes * 8 + len(st.checkpoints) * (40 + st.spec.state_bits)
                                           for st in self.streams])

    def inspect(self) -> str:
        """A human-readable listing: streams, codecs, checkpoints, and per tensor its alphabet and size."""
        s = self.summary()
        lines = [f"{self.path}: ansforge container v{self.version}, {s['tensors']} tensors, {s['streams']} stream(s), "
                 f"{s['bytes']:,} bytes",
                 f"coded pairs {s['pairs']:,}: {s['bits_per_pair']:.4f} bits/pair, "
                 f"{100 * s['gap']:+.4f}% vs ideal (final state and checkpoints included)"]
        for st in self.streams:
            cut = f"{len(st.blocks)} independent blocks of at most {st.block_pairs:,} pairs" if st.block_pairs else \
                f"{len(st.checkpoints)} checkpoints, {len(st.blocks)} CRC blocks"
            lines.append(f"stream {st.index}: {st.spec.name} {st.spec.to_json()}, {st.n_pairs:,} pairs, "
                         f"{st.n_words:,} words, {cut}")
        lines += format_lines(self.formats())
        lines.append(f"{'tensor':40s} {'shape':>14s} {'dtype':>5s} {'coding':>8s} {'codes':>5s} {'esc':>3s} "
                     f"{'spread':>6s} {'context plan':>18s}  conversion")
        for r in self.tensors:
            shape = "x".join(map(str, r["shape"])) or "scalar"
            if r["coding"] == "pairs":
                ct = r["_code_table"]
                lines.append(f"{r['name'][:40]:40s} {shape:>14s} {r['dtype']:>5s} {r['pair_format']:>8s} "
                             f"{ct.n_codes:5d} {len(ct.escape_codes):3d} {r.get('tans_spread', '-'):>6s} "
                             f"{self.plan_text(r):>18s}  {r['conversion']}")
            else:
                lines.append(f"{r['name'][:40]:40s} {shape:>14s} {r['dtype']:>5s} {'raw':>8s}")
        return "\n".join(lines)
