"""Writing a container: :func:`compress_checkpoint` reads a checkpoint a tensor at a time, splits
each into coding pairs (or keeps it raw), codes it (:mod:`.encode`, on threads or processes) and
writes the header, the records and the payload, staged so that nothing the user had is lost.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import shutil
import struct
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...llm.checkpoint import (ITEMSIZE, SUPPORTED_DTYPES, Llama2cCheckpoint, SafetensorsCheckpoint, ShardedCheckpoint,
                               llama2c_config_of, open_checkpoint, shape_problem)
from ..codecs import Codec, parse_codec
from .. import fastpairs
from ..context import folded_format, plan_context, plan_record, spread_is_stored
from ...errors import ConfigError
from ...dtypes.custom_float import MINIFLOATS
from ...dtypes.pairs import PAIR_FORMATS, CodingPairs, Conversion, convert
from ...dtypes.quantized import (FP8_FORMATS, FP8_STORAGE, Q4_0_BLOCK, Q4_0_BLOCK_BYTES, Q4_0_SCALES, Q4_0_VALUES,
                                 Fp8Conversion, q4_0_split, to_fp8)
from ..probability import ideal_bits
from ..stream import BLOCK_PAIRS, Block, block_crc, block_ranges, word_dtype
from .encode import encode_tensors
from .pools import process_tasks, thread_map
from .records import (CodedStream, CodedTensor, DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_CODEC, FORMATS, FP8_SCALE_SUFFIX,
                      HEADER, LAYOUTS, MAGIC, MAX_PAIRS, Q4_0_SCALES_SUFFIX, RAW_BLOCK_BYTES, STORAGE, VERSION,
                      VERSION_BLOCKS, VERSION_SPREADS, VERSION_STATES, format_sizes, hf_config_text, record_crc)


#: Checkpoint dtypes whose values split into pairs as they are (no conversion).
_NATIVE = {"F32": "fp32", "F16": "fp16", "BF16": "bf16"}


def _coded_fields(spec: Codec, ct: CodedTensor, ctx: tuple | None) -> dict:
    """The fields of a coded tensor's record that its coding decides, in the order they are written:
    ``code_table``, ``ideal_bits``, ``row_shifts``, then the ``context`` record (``ctx``: plan, fold,
    unfolded ideal bits) or the coder table's own fields (tANS: its spread). A set's spread is stored
    only where it is not the one its frequencies imply (:func:`~.context.spread_is_stored`; version 7)."""
    out = {"code_table": ct.code_table.to_json(), "ideal_bits": ct.ideal_bits if ctx is None else ctx[2]}
    if ct.row_shifts is not None:
        out["row_shifts"] = ct.row_shifts
    if ct.context is not None:
        plan, fold, _ = ctx
        sets = []
        for t in ct.set_tables:
            entry = {"freqs": list(t.code_table.freqs), **spec.table_record(t)}
            if not spread_is_stored(t):
                entry.pop("tans_symbols", None)
            sets.append(entry)
        out["context"] = {**plan_record(plan, fold), "sets": sets}
    else:
        out.update(spec.table_record(ct.table))
    return out


def _json_bytes(value) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def _coded_bytes(spec: Codec, name: str, conv: Conversion, cp: CodingPairs, ctx: tuple | None, mantissa_bits: int,
                 choose: tuple[int, int, bool]) -> int:
    """Bytes that tensor ``name``'s coding costs in a container of ``choose`` = ``(block_pairs,
    checkpoint_interval, row_shifts)``: its words, the record fields its coding decides
    (:func:`_coded_fields`, its conversion and exponents) and its part of the stream record (its
    blocks' ``[n_words, crc]``, or its checkpoints and CRC blocks), coded alone as :func:`encode_tensors`
    codes it in the container. Exact for the blocks and tensor layouts (a tensor's blocks or stream are
    its own); for the model layout's one stream, up to the words and checkpoints shared at its ends."""
    block_pairs, interval, shifts = choose
    plan = ctx[0] if ctx is not None else None
    coded = encode_tensors(spec, [(name, cp)], interval, 1, mantissa_bits=[0 if plan else mantissa_bits] if shifts
                           else None, contexts=[plan] if plan is not None else None, block_pairs=block_pairs)
    fields = _coded_fields(spec, coded.tensors[0], ctx)
    if block_pairs:
        part = [[b.n_words, b.crc] for b in coded.blocks]
    else:
        part = [[c.to_record() for c in coded.checkpoints],
                [[lo, hi, block_crc(coded.words, lo, hi)] for lo, hi in block_ranges(int(coded.words.size),
                                                                                      coded.checkpoints)]]
    return int(coded.words.nbytes) + _json_bytes([conv.describe(), cp.exponents.tolist(), fields, part])


def _raw_bytes(ckpt, info) -> np.ndarray:
    """The stored bytes of ``info``, mapped from the file that holds them."""
    return np.memmap(ckpt.file_of(info), dtype=np.uint8, mode="r", offset=info.offset, shape=(info.nbytes,)) \
        if info.nbytes else np.zeros(0, np.uint8)


def _split_tensor(ckpt, info, model, spec: Codec, pairs: str, context: bool | str, context_fold: int,
                  context_sets: int, choose: tuple[int, int, bool] = (0, 0, False)) -> list | None:
    """Checkpoint ``ckpt``'s tensor ``info`` as ``(target, conversion, pairs, record fields)``, one per
    record (a Q4_0 tensor has two: its values and its scales); ``None`` for a tensor stored raw
    (:func:`compress_checkpoint`'s options; ``model`` names the checkpoint in messages).

    With ``context``, a 2-D float matrix keeps its context plan only where it pays: its bytes in the
    container (:func:`_coded_bytes` with ``choose`` = ``(block_pairs, checkpoint_interval,
    row_shifts)``: words, every table set and stored spread, selects, record and block entries) below
    those of the plain record the same options write without ``context``; otherwise it is that plain
    record, byte for byte. Either way its fields hold ``context_bytes`` = ``(plain bytes, bytes
    written)``."""
    if info.dtype in FP8_STORAGE:
        target = FP8_STORAGE[info.dtype]
        bits = _raw_bytes(ckpt, info)
        nonfinite = int(np.count_nonzero(~np.isfinite(MINIFLOATS[target].to_float64(bits))))
        return [(target, Conversion(target, target, False, 0, nonfinite),
                 FP8_FORMATS[target].split(bits.reshape(info.shape)), {})]
    if info.dtype == "Q4_0":
        if info.size % Q4_0_BLOCK or info.nbytes != info.size // Q4_0_BLOCK * Q4_0_BLOCK_BYTES:
            raise ConfigError(f"{model}: tensor {info.name!r} of type Q4_0 has {info.size} weights in "
                              f"{info.nbytes} bytes, not whole {Q4_0_BLOCK}-weight blocks of {Q4_0_BLOCK_BYTES} bytes")
        q, d = q4_0_split(_raw_bytes(ckpt, info))
        nonfinite = int(np.count_nonzero((d & np.uint16(0x7C00)) == np.uint16(0x7C00)))
        scales = info.name + Q4_0_SCALES_SUFFIX
        return [("q4_0", Conversion("q4_0", "q4_0", False, 0, 0), Q4_0_VALUES.split(q.reshape(info.shape)),
                 {"scales": scales}),
                ("q4_0_scale", Conversion("fp16", "fp16", False, 0, nonfinite), Q4_0_SCALES.split(d),
                 {"name": scales, "shape": [int(d.size)], "scales_of": info.name})]
    if info.dtype not in SUPPORTED_DTYPES:
        return None
    if pairs in FP8_FORMATS and len(info.shape) >= 2:
        bits, conv = to_fp8(ckpt.tensor(info.name).array, info.dtype, pairs)
        return [(pairs, conv, FP8_FORMATS[pairs].split(bits), {})]
    target = _NATIVE[info.dtype] if pairs == "auto" or pairs in FP8_FORMATS else pairs
    fmt = PAIR_FORMATS[target]
    plain = not context or len(info.shape) != 2 or info.size == 0  # split as it is, without a fold
    if plain and _NATIVE[info.dtype] == target:
        # As stored, no conversion: the compiled split, whose exponent histogram also counts the
        # NaN/Inf values (exponent field all ones) that convert() would count in a pass of its own.
        fast = fastpairs.split_pairs(fmt, ckpt.tensor(info.name).array)
        if fast is not None:
            cp, hist = fast
            return [(target, Conversion(target, target, False, 0, int(hist[-1])), cp, {})]
    bits, conv = convert(ckpt.tensor(info.name).array, info.dtype, target)
    if plain:
        return [(target, conv, fmt.split(bits), {})]
    # Context coding: the folded pairs carry the code; the record's ideal stays the unfolded
    # per-matrix ideal (Table 1's "Ideal"), so the gap is comparable with a plain container's.
    plain = fmt.split(bits)
    ideal = ideal_bits(plain.counts()) + plain.extra_bits_total()
    fold = min(context_fold, fmt.mantissa_bits, 16 - fmt.exponent_bits)  # codes index 16-bit exponent fields
    cp = folded_format(fmt, fold).split(bits.reshape(info.shape))
    # Each set as a record holds it: a decimal frequency and a comma per symbol, the set's keys.
    n_sym = max(1, int(np.count_nonzero(np.bincount(cp.codes, minlength=cp.n_codes))))
    plan = plan_context(cp.codes.reshape(info.shape), cp.n_codes, precision_bits=spec.precision_bits,
                        max_sets=context_sets, frequency_bits=8 * (1 + len(str((1 << spec.precision_bits) // n_sym))),
                        set_bits=8 * (len('{"freqs":[],"tans_spread":"tuned"},') if spec.kind == "tans" else
                                      len('{"freqs":[]},')))
    # The plain record this matrix would have without --context, exactly (the same path), against
    # the plan: each charged in full, in the container's own bytes.
    if context == "always":  # every plan kept, paying or not (tests and fuzzing of the format)
        return [(target, conv, cp, {"context": (plan, fold, ideal)})]
    (p_target, p_conv, p_cp, p_fields), = _split_tensor(ckpt, info, model, spec, pairs, False, 0, 0)
    where = f"{model}: tensor {info.name!r}"
    try:
        with_plan = _coded_bytes(spec, info.name, conv, cp, (plan, fold, ideal), 0, choose)
        without = _coded_bytes(spec, info.name, p_conv, p_cp, None, fmt.mantissa_bits, choose)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if with_plan < without:
        return [(target, conv, cp, {"context": (plan, fold, ideal), "context_bytes": (without, with_plan)})]
    return [(p_target, p_conv, p_cp, {**p_fields, "context_bytes": (without, without)})]


@dataclass(frozen=True)
class CompressTask:
    """What :func:`compress_tensor` needs of :func:`compress_checkpoint`'s options (small, picklable)."""

    codec: str
    pairs: str
    context: bool | str  #: True, False or "always" (compress_checkpoint)
    context_fold: int
    context_sets: int
    allow_nonfinite: bool
    row_shifts: bool
    checkpoint_interval: int
    block_pairs: int  #: > 0: the blocks layout's blocks; 0: one stream with checkpoints (tensor layout)
    #: A folder the task writes each coded stream's words into (:class:`_WordsFile`), on the machine of the
    #: caller's file: what local processes do, so that the words never travel through a pipe; "" to return them.
    words_dir: str = ""


@functools.lru_cache(maxsize=4)
def _opened(path: str, stamp: tuple) -> object:
    """A worker's checkpoint, opened once for all its tasks on the same file (``stamp``: its size and
    modification time, so that a file rewritten in between is read again)."""
    return open_checkpoint(path, quantized=True)


def compress_tensor(path: str, model: str, name: str, job: CompressTask) -> list | None:
    """One task of :func:`compress_checkpoint` with ``tasks``: tensor ``name`` of the checkpoint at
    ``path`` (``model`` names it in messages) split, its tables built and coded alone, as
    :func:`compress_checkpoint` codes it in this process. Returns ``None`` for a tensor stored raw,
    else per record ``(target, conversion, pair count, fields, exponents, stream)``: the tensor's stream
    (blocks or checkpoints) without its pairs, which the caller joins in order."""
    st = os.stat(path)
    ckpt = _opened(path, (st.st_size, st.st_mtime_ns))
    return _code_tensor(ckpt, ckpt.info(name), model, job)


def _code_tensor(ckpt, info, model: str, job: CompressTask, threads: int = 1,
                 split_done: Callable[[], None] | None = None) -> list | None:
    """:func:`compress_tensor` of an opened checkpoint, its blocks coded on ``threads`` threads
    (``split_done()`` once the tensor is split into pairs): one tensor in memory at a time."""
    spec = parse_codec(job.codec)
    done = _split_tensor(ckpt, info, model, spec, job.pairs, job.context, job.context_fold,
                         job.context_sets, (job.block_pairs, job.checkpoint_interval, job.row_shifts))
    if split_done is not None:
        split_done()
    if done is None:
        return None
    out = []
    for target, conv, cp, fields in done:
        rec_name = fields.get("name", info.name)
        if conv.nonfinite and not job.allow_nonfinite:  # before the coding (the caller checks again)
            after = f" (after conversion to {target})" if conv.source != conv.target else ""
            raise ConfigError(f"{model}: tensor {rec_name!r} holds {conv.nonfinite} NaN/Inf values{after}; "
                              "pass allow_nonfinite (--allow-nonfinite) to code them exactly")
        plan = fields["context"][0] if "context" in fields else None
        bits = [0 if plan is not None else FORMATS[target].mantissa_bits] if job.row_shifts else None
        coded = encode_tensors(spec, [(rec_name, cp)], job.checkpoint_interval, threads, mantissa_bits=bits,
                               contexts=[plan] if plan is not None else None, block_pairs=job.block_pairs)
        for ct in coded.tensors:   # the pairs stay here: the caller needs only their count
            ct.pairs = None
        coded.runs, coded.tables = [], []
        if job.words_dir and coded.blocks:
            coded.words = _WordsFile.write(job.words_dir, coded.words)
        out.append((target, conv, int(cp.codes.size), fields, cp.exponents.tolist(), coded))
    return out


def _join_blocks(spec: Codec, parts: Sequence[CodedStream], block_pairs: int, words: np.ndarray | None = None
                 ) -> CodedStream:
    """The blocks layout's one stream from its tensors' own (each a :func:`compress_tensor` result): the
    same words, blocks and positions as :func:`encode_tensors` of all of them (each tensor's blocks are
    cut from its first pair and coded with its own tables alone). ``words``: the stream's words where
    the parts' own have been written out already (:class:`_SpilledWords`), else their concatenation."""
    tensors, blocks, parts_words = [], [], []
    pos = word = 0
    for ti, st in enumerate(parts):
        for ct in st.tensors:
            ct.first_pair += pos
            tensors.append(ct)
        blocks += [Block(b.pair + pos, b.count, b.word + word, b.n_words, b.crc, ti) for b in st.blocks]
        parts_words.append(st.words)
        word += sum(b.n_words for b in st.blocks)
        pos += st.n_pairs
    dt = word_dtype(spec.word_bits)
    if words is None:
        words = np.concatenate(parts_words).astype(dt, copy=False) if parts_words else np.zeros(0, dt)
    return CodedStream(spec, tensors, words, [], pos, 0, [], [], blocks, block_pairs)


class _WordsFile:
    """A coded stream's words in a file of their own (little-endian), written by the worker process that
    coded them (:attr:`CompressTask.words_dir`): what the caller needs of them (``size``, ``dtype``,
    ``nbytes``) without reading them; :class:`_SpilledWords` takes the file over."""

    _count = itertools.count()

    def __init__(self, path: str, size: int, dtype: np.dtype):
        self.path, self.size, self.dtype = path, size, np.dtype(dtype)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @classmethod
    def write(cls, folder: str, words: np.ndarray) -> "_WordsFile":
        path = os.path.join(folder, f"{os.getpid()}-{next(cls._count)}.words")
        little = np.ascontiguousarray(words.astype(words.dtype.newbyteorder("<"), copy=False))
        with open(path, "xb") as f:
            f.write(memoryview(little).cast("B"))
        return cls(path, int(words.size), little.dtype)


class _SpilledWords:
    """A blocks-layout stream's words, written to a file beside the output as each tensor is coded
    (a 7B model's are ~9 GB), or left in the files the coding processes wrote (:class:`_WordsFile`),
    then copied behind the container's header in order: what :class:`CodedStream` needs of them
    (``size``, ``dtype``) without holding them."""

    def __init__(self, path: Path, dtype: np.dtype):
        self.path, self.dtype, self.size = path, np.dtype(dtype).newbyteorder("<"), 0
        self._file = open(path, "wb")
        self._own = 0                      # bytes written to our own file
        self._parts: list[list] = []       # in stream order: [file, offset, bytes]
        self._adopted: list[str] = []

    def append(self, words: "np.ndarray | _WordsFile") -> None:
        if isinstance(words, _WordsFile):
            if words.dtype != self.dtype:
                raise TypeError(f"spilled words are {self.dtype}, not {words.dtype}")  # pragma: no cover
            self._adopted.append(words.path)
            self._parts.append([words.path, 0, words.nbytes])
        else:
            data = memoryview(np.ascontiguousarray(words.astype(self.dtype, copy=False))).cast("B")
            self._file.write(data)
            if self._parts and self._parts[-1][0] is self.path:
                self._parts[-1][2] += data.nbytes
            else:
                self._parts.append([self.path, self._own, data.nbytes])
            self._own += data.nbytes
        self.size += int(words.size)

    def astype(self, dtype, copy: bool = True) -> "_SpilledWords":
        if np.dtype(dtype) != self.dtype:
            raise TypeError(f"spilled words are {self.dtype}, not {dtype}")  # pragma: no cover
        return self

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def close(self) -> None:
        self._file.close()

    def remove(self) -> None:
        """Delete our file and the files taken over (after the copy, or on the way out of an error)."""
        self.close()
        for path in [self.path, *self._adopted]:
            Path(path).unlink(missing_ok=True)

    def copy_to(self, f) -> None:
        """Append the words to the open file ``f`` (the kernel's copy where it has one)."""
        self._file.close()
        f.flush()
        out = f.fileno()
        for path, offset, nbytes in self._parts:
            with open(path, "rb") as src:
                left = nbytes
                while left:
                    try:
                        n = os.copy_file_range(src.fileno(), out, left, offset)
                    except (AttributeError, OSError):
                        f.seek(0, os.SEEK_END)
                        src.seek(offset)
                        while left:
                            chunk = src.read(min(left, 1 << 24))
                            if not chunk:
                                raise OSError(f"{path}: {left} bytes short")  # pragma: no cover
                            f.write(chunk)
                            left -= len(chunk)
                        f.flush()
                        break
                    if n == 0:
                        raise OSError(f"{path}: {left} bytes short")  # pragma: no cover
                    left -= n
                    offset += n
            f.seek(0, os.SEEK_END)


class _WeightProgress:
    """:func:`compress_checkpoint`'s ``progress(done, total)`` in weights, safe to call from its threads."""

    def __init__(self, progress: Callable[[int, int], None] | None, total: int):
        self._progress, self._total, self._done = progress, total, 0
        self._lock = threading.Lock()

    def __call__(self, weights: int) -> None:
        if self._progress is not None:
            with self._lock:
                self._done += weights
                self._progress(self._done, max(self._total, self._done))

    def total(self, total: int) -> None:
        """The total now known (the split has said how many pairs are coded)."""
        if self._progress is not None:
            with self._lock:
                self._total = total
                self._progress(self._done, max(total, self._done))


def compress_checkpoint(model: str | os.PathLike[str], out: str | os.PathLike[str], codec: str = DEFAULT_CODEC, *,
                        pairs: str = "auto", checkpoint_interval: int | None = None,
                        group: str | None = None, layout: str | None = None, block_pairs: int = BLOCK_PAIRS,
                        allow_nonfinite: bool = False,
                        progress: Callable[[int, int], None] | None = None, threads: int = 1,
                        row_shifts: bool | None = None, context: bool | str = False, context_sets: int = 8,
                        context_fold: int = 1, tasks: Callable[[Callable, list[tuple]], Iterable] | None = None
                        ) -> dict:
    """Compress every tensor of checkpoint ``model`` into container ``out`` (written atomically).

    Parameters
    ----------
    codec
        A codec name (:func:`~ansforge.model.coding.codecs.parse_codec`).
    pairs
        ``auto`` codes each float tensor in its own storage format (lossless); ``bf16``, ``fp16`` or
        ``fp32`` convert first (the conversion is recorded; decompression returns the converted tensor).
        ``e4m3`` or ``e5m2`` convert every float tensor of two or more dimensions to fp8 with a
        per-tensor scale (:func:`~ansforge.model.dtypes.quantized.to_fp8`; the scale and the error are
        recorded; decompression writes the fp8 tensor and its scale as ``NAME_scale``) and code the
        others (norms, biases) as stored, as fp8 checkpoints do. Whatever ``pairs`` is, safetensors
        ``F8_E4M3``/``F8_E5M2`` tensors are coded as fp8 pairs and GGUF ``Q4_0`` tensors as their 4-bit
        values plus fp16 scales, losslessly; any other quantized type is refused.
    layout
        ``blocks`` (container version 6): one stream whose tensors are cut into independent blocks of
        at most ``block_pairs`` pairs (a tensor when smaller), each coded alone with its own flush and
        head, on ``threads`` threads; the blocks are the random-access points. ``model``: one stream for
        all coded tensors, with a checkpoint every ``checkpoint_interval`` pairs (default 2^20; the
        layout of versions 2 to 5). ``tensor``: one such stream per tensor. Default: ``group`` when
        given, else ``model`` when a ``checkpoint_interval`` is given (checkpoints belong to the
        one-stack layouts), else ``blocks``.
    group
        The older name of the one-stack layouts (``model`` or ``tensor``).
    checkpoint_interval
        Pairs between checkpoints in the ``model`` and ``tensor`` layouts (0: none); refused with
        ``blocks`` unless 0.
    allow_nonfinite
        NaN and Inf code exactly, but a checkpoint holding them is usually broken: refused unless set.
    threads
        Parallel workers (the container is the same for any number). The blocks layout codes whole
        tensors on ``threads`` processes (split, tables and blocks: building a table is Python, which
        threads cannot share), unless one tensor holds more than three quarters of the model's weights:
        then each tensor's blocks are coded on ``threads`` threads. The other layouts split tensors, build
        their tables and encode streams on ``threads`` threads.
    row_shifts
        Leave out rows' all-zero low mantissa bits (:func:`row_shifts`; version 3). Default: with
        ``group="model"``; not with ``group="tensor"``, the layout the hardware decoders read, whose
        commands take one table per stream.
    context
        Code every 2-D float tensor with context tables (:mod:`.context`; version 4): its top
        ``context_fold`` mantissa bits folded into the code, up to ``context_sets`` table sets chosen
        per row or column group by :func:`~.context.plan_context`, every set and select stored in the
        tensor's ``context`` record, where that costs fewer bytes in the file than the plain record
        (:func:`_split_tensor`; the summary's ``context`` says how many and what they saved). Other
        tensors are coded as without it. ``"always"`` keeps every plan, paying or not (to exercise the
        format on matrices too small for a plan to pay).
    progress
        ``progress(done, total)``, in weights, as the work advances: each tensor counts once when it is
        split into pairs (its tables chosen) and once more when its pairs are coded (``total`` is revised
        once, when the split has told how many pairs are coded). Called from worker threads, in order
        of completion; ``done`` never decreases.
    tasks
        Where the tensors are coded, instead of this process's ``threads``: a function that runs
        ``fn(*args)`` for each ``args`` of a list and returns (or yields) the results in order, e.g. on
        a Dask cluster (:func:`ansforge.analysis.parallel.ordered_results`). Each task is
        :func:`compress_tensor`: one tensor split, its tables built and its blocks (``blocks`` layout)
        or its stream (``tensor`` layout) coded, read by the checkpoint's absolute path, so the workers
        must see the same file system. The container is byte-identical to one coded here. The
        ``model`` layout (one stack for all tensors) is refused.

    Returns a summary (``tensors``, ``pairs``, ``bits``, ``ideal_bits``, ``gap``, ``bytes``; ``formats``:
    per pair format the :func:`format_sizes`; ``lossy``: ``(name, conversion)`` of each lossy tensor).
    """
    spec = parse_codec(codec)
    if pairs != "auto" and pairs not in PAIR_FORMATS and pairs not in FP8_FORMATS:
        raise ConfigError(f"pairs must be auto or one of {', '.join([*PAIR_FORMATS, *FP8_FORMATS])}, not {pairs!r}")
    if group is not None and group not in ("model", "tensor"):
        raise ConfigError(f"group must be 'model' or 'tensor', not {group!r}")
    if layout is None:
        layout = group or ("model" if checkpoint_interval is not None else "blocks")
    elif layout not in LAYOUTS:
        raise ConfigError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    elif group is not None and group != layout:
        raise ConfigError(f"layout {layout!r} and group {group!r} disagree")
    if tasks is not None and layout == "model":
        raise ConfigError("the model layout codes every tensor into one stream, which one task has to code; "
                          "tasks (--dask) take the blocks or tensor layout")
    if layout == "blocks":
        if checkpoint_interval:
            raise ConfigError(f"checkpoint_interval = {checkpoint_interval!r} needs the model or tensor layout; the "
                              f"blocks layout's independent blocks (at most {block_pairs} pairs) are its "
                              "random-access points")
        if isinstance(block_pairs, bool) or not isinstance(block_pairs, int) or not 1 <= block_pairs <= MAX_PAIRS:
            raise ConfigError(f"block_pairs must be an integer from 1 to 2^48 pairs, not {block_pairs!r}")
        checkpoint_interval = 0
    elif checkpoint_interval is None:
        checkpoint_interval = DEFAULT_CHECKPOINT_INTERVAL
    group = "tensor" if layout == "tensor" else "model"
    if isinstance(checkpoint_interval, bool) or not isinstance(checkpoint_interval, int) \
            or not 0 <= checkpoint_interval <= MAX_PAIRS:  # the reader's bound (Container._parse_stream)
        raise ConfigError(f"checkpoint_interval must be an integer from 0 to 2^48 pairs, not {checkpoint_interval!r}")
    ckpt = open_checkpoint(model, quantized=True)
    records: list[dict] = []
    coded_items: list[tuple[int, str, CodingPairs]] = []
    raw_payload: list[tuple[int, bytes]] = []
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"threads must be a positive integer, not {threads!r}")
    if context not in (False, True, "always"):
        raise ConfigError(f"context must be True, False or 'always', not {context!r}")
    if context and (isinstance(context_sets, bool) or not isinstance(context_sets, int) or not 1 <= context_sets <= 16):
        raise ConfigError(f"context_sets must be an integer from 1 to 16, not {context_sets!r}")
    if context and (isinstance(context_fold, bool) or not isinstance(context_fold, int) or context_fold < 0):
        raise ConfigError(f"context_fold must be a non-negative integer, not {context_fold!r}")

    infos = ckpt.infos()
    names = {info.name for info in infos}
    for info in infos:  # refuse before any work: a type we do not code, or a name our outputs would reuse
        problem = shape_problem(info.shape)
        if problem:  # the reader's own check (Container._parse): never write a file decompress refuses
            raise ConfigError(f"{model}: tensor {info.name!r} has shape {str(list(info.shape))[:120]}: {problem}; "
                              "an ansforge container holds at most 32 dimensions, each and the product of the "
                              "non-zero ones below 2^48")
        if info.dtype not in SUPPORTED_DTYPES and info.dtype not in FP8_STORAGE and info.dtype != "Q4_0" \
                and info.dtype not in ITEMSIZE:
            raise ConfigError(f"{model}: tensor {info.name!r} has type {info.dtype}, which ansforge does not code "
                              f"(it codes F32, F16, BF16, F8_E4M3, F8_E5M2 and GGUF Q4_0 tensors)")
        extra_name = info.name + Q4_0_SCALES_SUFFIX if info.dtype == "Q4_0" else info.name + FP8_SCALE_SUFFIX \
            if pairs in FP8_FORMATS and info.dtype in SUPPORTED_DTYPES and len(info.shape) >= 2 else None
        if extra_name is not None and extra_name in names:
            raise ConfigError(f"{model}: tensor {info.name!r} needs the name {extra_name!r} for its scales, "
                              "but the checkpoint has a tensor of that name")

    def raw_bytes(info) -> np.ndarray:
        return _raw_bytes(ckpt, info)

    ctx_of: dict[int, tuple] = {}  # record index -> (plan, fold, unfolded ideal bits)
    shifts = group == "model" if row_shifts is None else bool(row_shifts)
    # A matrix keeps its context plan where it costs fewer bytes in this container (_split_tensor).
    choose = (block_pairs if layout == "blocks" else 0, checkpoint_interval, shifts)
    context_bytes: list[tuple[int, int]] = []  # per 2-D float matrix: (plain bytes, bytes written)

    report = _WeightProgress(progress, 2 * sum(int(i.size) for i in infos))

    def split(info) -> list | None:
        done = _split_tensor(ckpt, info, model, spec, pairs, context, context_fold, context_sets, choose)
        report(int(info.size))
        return done

    parts: list[CodedStream] = []  # per tensor: each coded record's stream, as its task coded it
    job = CompressTask(codec, pairs, context, context_fold, context_sets, allow_nonfinite, shifts,
                       checkpoint_interval, block_pairs if layout == "blocks" else 0)
    # The blocks layout streams: one tensor split and coded at a time (its blocks on the threads), its
    # words written to a file beside the output at once, so that memory holds one tensor, whatever the
    # model's size. The one-stack layouts code everything at the end, from every tensor's pairs.
    per_tensor = tasks is not None or layout == "blocks"
    out = Path(out)
    if out.is_dir():
        raise ConfigError(f"{out}: is a directory")
    tmp = out.with_name(out.name + ".partial")
    spill = _SpilledWords(out.with_name(out.name + ".partial-words"), word_dtype(spec.word_bits)) \
        if layout == "blocks" else None
    words_dir = None

    def local(info):
        """This process's task: one tensor, split then coded on ``threads``; 2 x its weights reported."""
        done = _code_tensor(ckpt, info, model, job, threads, lambda: report(int(info.size)))
        report(int(info.size))
        return done

    if tasks is None and threads > 1 and layout == "blocks" and len(infos) > 1 \
            and max(int(i.size) for i in infos) <= 0.75 * sum(int(i.size) for i in infos):
        # Whole tensors on processes: a tensor's tables are built in Python, under the GIL. (One tensor
        # of most of the model's weights gains more from its blocks coded on threads, below.)
        tasks = process_tasks(threads, {i.name: int(i.size) for i in infos})
        # The processes write their words beside the output, where the final copy reads them: no pipe
        # carries them, and this process never holds them (on 4 x MiniLM, 300 MB pickled, read and
        # spilled again were most of the serial time of --threads 2).
        words_dir = tempfile.mkdtemp(prefix=out.name + ".partial-words-", dir=out.parent)
        job = dataclasses.replace(job, words_dir=words_dir)
    if tasks is None and not per_tensor:
        split_all = thread_map(split, infos, threads)
    elif tasks is None:
        split_all = map(local, infos)
    else:
        where = os.path.abspath(os.fspath(model))  # a worker's working folder is not ours
        split_all = tasks(compress_tensor, [(where, os.fspath(model), info.name, job) for info in infos])
    try:
        for info, done in zip(infos, split_all):
            if tasks is not None:  # a task has split and coded it
                report(2 * int(info.size))
            if done is None:
                rec: dict = {"name": info.name, "shape": list(info.shape), "source_dtype": info.dtype}
                rec.update({"coding": "raw", "dtype": info.dtype})
                raw_payload.append((len(records), bytes(raw_bytes(info))))
                records.append(rec)
                continue
            for target, conv, cp, fields, *coded in done:  # coded: a task's (exponents, stream); cp its pair count
                name = fields.get("name", info.name)
                rec = {"name": name, "shape": fields.get("shape", list(info.shape)), "source_dtype": info.dtype}
                if "context" in fields:
                    ctx_of[len(records)] = fields["context"]
                if "context_bytes" in fields:
                    context_bytes.append(fields["context_bytes"])
                if conv.nonfinite and not allow_nonfinite:
                    after = f" (after conversion to {target})" if conv.source != conv.target else ""
                    raise ConfigError(f"{model}: tensor {name!r} holds {conv.nonfinite} NaN/Inf values{after}; "
                                      "pass allow_nonfinite (--allow-nonfinite) to code them exactly")
                rec.update({"coding": "pairs", "dtype": STORAGE[target], "pair_format": target,
                            "conversion": conv.describe(), "lossy": conv.lossy, "changed": conv.changed,
                            "exponents": coded[0] if coded else cp.exponents.tolist()})
                if isinstance(conv, Fp8Conversion):
                    rec.update({"scale": conv.scale, "rel_rmse": conv.rel_rmse, "max_abs_error": conv.max_abs_error})
                rec.update({k: v for k, v in fields.items() if k in ("scales", "scales_of")})
                if "scales" in fields:
                    rec["conversion"] = f"GGUF Q4_0 as stored: 4-bit values as codes, block scales in {fields['scales']!r}"
                elif "scales_of" in fields:
                    rec["conversion"] = f"fp16 block scales of Q4_0 tensor {fields['scales_of']!r}, as stored"
                coded_items.append((len(records), name, cp))
                records.append(rec)
                if coded:
                    if spill is not None:  # its words to the file now; the stream keeps their count
                        spill.append(coded[1].words)
                        coded[1].words = np.zeros(0, coded[1].words.dtype)  # not a view: it would keep them
                    parts.append(coded[1])
        if tasks is None and not per_tensor:  # what is left: the coded tensors' pairs
            report.total(sum(int(i.size) for i in infos) + sum(int(cp.codes.size) for _, _, cp in coded_items))
        groups = [coded_items] if group == "model" else [[it] for it in coded_items]
        groups = [g for g in groups if g]
        fmt_of = {ri: FORMATS[records[ri]["pair_format"]].mantissa_bits for ri, _, _ in coded_items}

        def encode_group(g, threads=1):
            coded = encode_tensors(spec, [(n, p) for _, n, p in g], checkpoint_interval, threads,
                                   mantissa_bits=[0 if ri in ctx_of else fmt_of[ri] for ri, _, _ in g] if shifts else None,
                                   contexts=[ctx_of[ri][0] if ri in ctx_of else None for ri, _, _ in g] if ctx_of else None,
                                   block_pairs=block_pairs if layout == "blocks" else 0)
            report(sum(int(p.codes.size) for _, _, p in g))
            return coded

        if per_tensor:  # coded a tensor at a time: the blocks layout's tensors joined into its one stream
            streams = parts if layout == "tensor" else [_join_blocks(spec, parts, block_pairs, spill)] if parts else []
        elif group == "model":
            streams = [encode_group(g, threads) for g in groups]
        else:
            streams = thread_map(encode_group, groups, threads)
        payload: list = []  # bytes and arrays, each written through the buffer protocol
        offset = 0
        stream_records = []
        for si, (g, st) in enumerate(zip(groups, streams)):
            # Little-endian words, written from the array itself (no bytes copy of the stream), or copied
            # from the file they were spilled to.
            blob = st.words if isinstance(st.words, _SpilledWords) else \
                np.ascontiguousarray(st.words.astype(st.words.dtype.newbyteorder("<"), copy=False))
            wb = st.words.dtype.itemsize
            if st.block_pairs:
                # Version 6: each block's pairs are implied (its tensor's pairs cut every block_pairs), so a
                # block is [n_words, crc] and its words follow the previous block's.
                stream_records.append({
                    "codec": spec.to_json(), "n_pairs": st.n_pairs, "n_words": int(st.words.size), "word_bytes": wb,
                    "payload_offset": offset, "block_pairs": st.block_pairs,
                    "blocks": [[b.n_words, b.crc] for b in st.blocks]})
            else:
                blocks = [[lo, hi, block_crc(st.words, lo, hi)]
                          for lo, hi in block_ranges(int(st.words.size), st.checkpoints)]
                stream_records.append({
                    "codec": spec.to_json(), "n_pairs": st.n_pairs, "n_words": int(st.words.size),
                    "word_bytes": wb, "payload_offset": offset, "checkpoint_interval": st.checkpoint_interval,
                    "checkpoints": [c.to_record() for c in st.checkpoints], "blocks": blocks})
            payload.append(blob)
            offset += blob.nbytes
            for (ri, _, cp), ct in zip(g, st.tensors):
                rec = records[ri]
                n = cp if isinstance(cp, int) else int(ct.pairs.codes.size)
                rec.update({"stream": si, "first_pair": ct.first_pair, "n_pairs": n})
                rec.update(_coded_fields(spec, ct, ctx_of.get(ri)))
                ct.ideal_bits = rec["ideal_bits"]
        for ri, data in raw_payload:
            blocks = [[o, min(len(data), o + RAW_BLOCK_BYTES), record_crc(data[o:o + RAW_BLOCK_BYTES])]
                      for o in range(0, len(data), RAW_BLOCK_BYTES)]
            records[ri].update({"payload_offset": offset, "nbytes": len(data), "blocks": blocks})
            payload.append(data)
            offset += len(data)
        meta = getattr(ckpt, "metadata", None) if isinstance(ckpt, SafetensorsCheckpoint) else None
        if records and isinstance(meta, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            # The source file's own metadata (e.g. transformers' {"format": "pt"}, which its loader requires),
            # for decompress to write back: older readers ignore the key, so no version change.
            records[0]["file_metadata"] = dict(meta)
        source_layout = _file_layout(ckpt, infos)
        if records and source_layout is not None:
            # Where the tensors came from, for decompress to give the folder (shards, index, config.json) back:
            # older readers ignore the key and write one file, so no version change (as file_metadata).
            records[0]["file_layout"] = source_layout
        try:
            with open(tmp, "wb") as f:
                # The lowest version whose reader knows every field written, so that older readers still read
                # the files they can (and single-state files without plans stay byte-identical to theirs):
                # 5 with interleaved states, 4 with context plans, 3 with row shifts, 2 otherwise.
                # 6 for the blocks layout, whatever else it holds; 7 with a table set whose spread is implied.
                version = VERSION_SPREADS if any("tans_symbols" not in s for r in records if "context" in r
                                                 for s in r["context"]["sets"]) and spec.kind == "tans" else \
                    VERSION_BLOCKS if layout == "blocks" else VERSION_STATES if spec.states > 1 else \
                    VERSION if any("context" in r for r in records) else 3 if any("row_shifts" in r for r in records) else 2
                head = HEADER.pack(MAGIC, version, len(records), len(stream_records), 0)[:20]
                f.write(head + struct.pack("<I", record_crc(head)))
                for rec in records + stream_records:
                    js = json.dumps(rec, separators=(",", ":")).encode()
                    f.write(struct.pack("<I", len(js)) + js + struct.pack("<I", record_crc(js)))
                for blob in payload:
                    if isinstance(blob, _SpilledWords):
                        blob.copy_to(f)
                    else:
                        f.write(memoryview(blob).cast("B"))
            os.replace(tmp, out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        bits = sum(s.total_bits for s in streams)
        ideal = sum(t.ideal_bits for s in streams for t in s.tensors)
        return {"tensors": len(records), "coded": len(coded_items), "pairs": sum(s.n_pairs for s in streams),
                "layout": layout, "version": version, "blocks": sum(len(s.blocks) for s in streams),
                "bits": bits, "ideal_bits": ideal, "gap": bits / ideal - 1 if ideal else 0.0,
                "streams": len(streams), "bytes": out.stat().st_size,
                "formats": format_sizes(records, [s.total_bits for s in streams]),
                "lossy": [(r["name"], r["conversion"]) for r in records if r.get("lossy")],
                **({"context": _context_summary(context_bytes, len(ctx_of), out.stat().st_size)} if context is True else {})}
    finally:
        close = getattr(split_all, "close", None)
        if close is not None:  # a generator of tasks: its processes stop (and stop writing words) first
            close()
        if spill is not None:
            spill.remove()
        if words_dir is not None:
            shutil.rmtree(words_dir, ignore_errors=True)


def _context_summary(costs: Sequence[tuple[int, int]], kept: int, size: int) -> dict:
    """What ``--context`` did: ``matrices`` (2-D float matrices it planned), ``kept`` (those whose plan
    paid and was written), ``saved_bytes`` (their bytes with one table each, less what was written) and
    ``plain_bytes``, the size of the same container without ``--context`` (exact for the blocks and tensor
    layouts; :func:`_coded_bytes`)."""
    saved = sum(a - b for a, b in costs)
    return {"matrices": len(costs), "kept": kept, "saved_bytes": saved, "plain_bytes": size + saved}


def _file_layout(ckpt, infos) -> dict | None:
    """The ``file_layout`` record of a checkpoint: a sharded folder's :meth:`~.ShardedCheckpoint.layout`
    (shard files and their tensors and metadata, the index and ``config.json`` as read); for a llama2.c
    file whose tensors do not imply its configuration (:func:`~.checkpoint.llama2c_config_of`: an ak42
    version-1 file), the Hugging Face ``config.json`` of its header; ``None`` otherwise."""
    if isinstance(ckpt, ShardedCheckpoint):
        return ckpt.layout()
    if isinstance(ckpt, Llama2cCheckpoint) and llama2c_config_of([(i.name, i.shape) for i in infos]) != ckpt.config:
        return {"index": None, "config": hf_config_text(ckpt.config, "F32"), "shards": None}
    return None
