"""The ``.ansf`` format's constants and records: versions, layouts, pair formats, the header, the
tensor and stream records as the writer builds them (:class:`CodedTensor`, :class:`CodedStream`) and
the reader returns them (:class:`ContainerStream`), and the per-format size summaries. The layout is
the package's docstring (:mod:`ansforge.model.coding.container`) and ``docs/bitstream.md``.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...llm.checkpoint import hf_llama_config
from ..codecs import Codec
from ..registry import DEFAULT_FORMAT, legacy_codecs
from ..codetable import CodeTable
from ..context import ContextPlan
from ...errors import AnsforgeError
from ...dtypes.pairs import PAIR_FORMATS, CodingPairs
from ...dtypes.quantized import FP8_FORMATS, Q4_0_BLOCK, Q4_0_BLOCK_BYTES, Q4_0_SCALES, Q4_0_VALUES
from ..stream import Checkpoint, Run


#: Codecs ansforge wrote before, which it still reads: the legacy names of the codec registry
#: (:mod:`..registry`): ``rans16-s64w32``, rans16 coded with a 64-bit state until the paper preset moved to
#: S = 48 (one-DSP decoder multiply, docs/bitstream.md), and ``rans16xN-s48w32``, rans16xN with S = 48,
#: W = 32 until it moved to S = 32, W = 16 (the ``interleaved`` preset). Their codec records keep the names
#: ``rans16`` / ``rans16xN`` and carry S and W, so such a stream decodes exactly as it was written.
LEGACY_CODECS = legacy_codecs()

MAGIC = b"ANSFORGE"
VERSION = 4
#: Versions this reader accepts. Version 1 computed each block CRC over the block's words in address
#: order and did not give a word split by a tANS checkpoint to both blocks; version 2 uses
#: :func:`~ansforge.model.coding.stream.block_ranges` and :func:`~ansforge.model.coding.stream.block_crc`
#: (decoding order), which a decoder core checks as the words arrive.
#: Version 3 adds a tensor's optional ``row_shifts`` (:func:`~.encode.row_shifts`); files without them are written
#: as version 2. Version 4 adds a matrix's optional ``context`` record (plan, selects and table sets,
#: :mod:`..context`); only files that hold one are written as version 4.
#: Version 5 adds codecs of ``N > 1`` interleaved states (a codec record's ``states``, checkpoints whose
#: state is a list of ``N`` states, ``docs/bitstream.md`` §8); a file is written as version 5 only when
#: one of its streams has ``N > 1``, so single-state files keep their version and their bytes. A file
#: is written as the highest version any of its fields needs.
VERSION_STATES = 5
#: Version 6 is the **blocks** layout (``docs/bitstream.md`` §6): a stream record gives ``block_pairs``
#: and its independent blocks ``[n_words, crc]`` instead of checkpoints; every field of versions 3 to 5
#: (row shifts, context plans, interleaved states) may appear in it.
VERSION_BLOCKS = 6
#: Version 7: a tANS context set may leave out its spread (``tans_symbols``) when it is the one its
#: frequencies imply (``tans_spread`` ``fse``, or ``tuned`` to the quantized probabilities ``f/L``;
#: docs/bitstream.md §6), which a reader rebuilds. Only files with such a set are written as version 7,
#: so every other file keeps its version and its bytes.
VERSION_SPREADS = 7
READ_VERSIONS = (1, 2, 3, 4, VERSION_STATES, VERSION_BLOCKS, VERSION_SPREADS)
#: The codec (the registry's default format, :data:`~.registry.DEFAULT_FORMAT`) and layout ``compress``
#: writes when none is named.
DEFAULT_CODEC = DEFAULT_FORMAT
LAYOUTS = ("blocks", "model", "tensor")
DEFAULT_LAYOUT = "blocks"
DEFAULT_CHECKPOINT_INTERVAL = 1 << 20
RAW_BLOCK_BYTES = 1 << 20
#: Largest payload offset or size a record may give (the reader checks them against the file after).
MAX_PAYLOAD = 1 << 48
#: Largest pair count, pair index or checkpoint interval a record may give (the writer refuses more).
MAX_PAIRS = 1 << 48
HEADER = struct.Struct("<8sIIII")
STORAGE = {"bf16": "BF16", "fp16": "F16", "fp32": "F32", "e4m3": "F8_E4M3", "e5m2": "F8_E5M2", "q4_0": "Q4_0",
            "q4_0_scale": "F16"}
#: Every pair format a tensor record may name: the float formats, fp8 and Q4_0's 4-bit values
#: (model/dtypes/quantized.py). A reader that predates one refuses the record by its pair_format.
FORMATS = {**PAIR_FORMATS, **FP8_FORMATS, "q4_0": Q4_0_VALUES, "q4_0_scale": Q4_0_SCALES}
#: Suffix of the record that holds a Q4_0 tensor's fp16 block scales (as fp16 pairs).
Q4_0_SCALES_SUFFIX = ":scales"
#: Suffix of the float32 scalar ``decompress`` writes beside an fp8 tensor converted with a scale
#: (vLLM's ``weight`` / ``weight_scale`` convention: dequantized = fp8 × scale).
FP8_SCALE_SUFFIX = "_scale"
RAW_NUMPY = {"F64": "<f8", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4",
              "U16": "<u2", "U8": "u1", "BOOL": "?"}


class ContainerError(AnsforgeError):
    """A container that is truncated, corrupted or not an ansforge container."""


def is_int(v) -> bool:
    return type(v) is int or (isinstance(v, int) and not isinstance(v, bool))


def record_field(rec: dict, key: str, kind: type, fail: Callable[[str, str], ContainerError], where: str,
           lo: int | None = None, hi: int | None = None):
    """``rec[key]``, checked to be of JSON type ``kind`` (``int`` excludes booleans) and, for integers,
    within ``lo .. hi``; otherwise ``fail(where, ...)`` names the field and the value."""
    if key not in rec:
        raise fail(where, f"lacks field {key!r}")
    v = rec[key]
    ok = is_int(v) if kind is int else isinstance(v, kind)
    if not ok:
        raise fail(where, f"field {key!r} must be {kind.__name__}, not {type(v).__name__} {str(v)[:40]}")
    if kind is int and ((lo is not None and v < lo) or (hi is not None and v > hi)):
        raise fail(where, f"field {key!r} = {v} is outside {lo}..{hi}")
    return v


def record_crc(b: bytes | memoryview) -> int:
    return zlib.crc32(b) & 0xFFFFFFFF


@dataclass
class CodedTensor:
    """One tensor's part of a stream: its pairs' alphabet and coder table and where its pairs lie."""

    name: str
    pairs: CodingPairs
    code_table: CodeTable
    table: object
    first_pair: int = 0
    ideal_bits: float = 0.0
    row_shifts: list | None = None  #: ``[[rows, z], ...]`` (see :func:`~.encode.row_shifts`), None when not used
    context: ContextPlan | None = None  #: the matrix's context plan (its ``pairs`` are the folded ones)
    set_tables: list | None = None      #: with ``context``: one coder table per table set


@dataclass
class CodedStream:
    """A stream of one or more tensors, encoded by a golden coder."""

    spec: Codec
    tensors: list[CodedTensor]
    words: np.ndarray
    checkpoints: list[Checkpoint]
    n_pairs: int
    checkpoint_interval: int
    runs: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    #: Independent blocks (container version 6), in stream order; empty for a stream of one stack.
    blocks: list = field(default_factory=list)
    block_pairs: int = 0

    @property
    def word_bits_total(self) -> int:
        return int(self.words.size) * self.spec.word_bits

    @property
    def checkpoint_bits(self) -> int:
        """Bits of the stored checkpoints: 32-bit word offset, 8-bit bit offset and the coder's ``N``
        states each."""
        return len(self.checkpoints) * (32 + 8 + self.spec.states * self.spec.state_bits)

    @property
    def total_bits(self) -> int:
        return self.word_bits_total + self.checkpoint_bits


def hf_config_text(config, dtype: str | None) -> str:
    return json.dumps(hf_llama_config(config, dtype), indent=2) + "\n"


def format_sizes(records: Sequence[dict], stream_bits: Sequence[int]) -> dict[str, dict]:
    """Per pair format of a container's tensor records: ``tensors``, ``weights``, ``raw_bytes`` (their
    storage as ``decompress`` writes it: 1 byte per fp8 weight, 18 bytes per 32 Q4_0 weights, …),
    ``bits`` and ``bits_per_weight``, ``fraction`` = coded bytes / raw bytes.

    ``bits`` are the streams' bits (final states and checkpoints included) shared out among each
    stream's tensors in proportion to their ideal bits: exact for a stream holding one format, and
    otherwise off by at most the stream's small gap to ideal. A Q4_0 tensor's scales (an fp16 record)
    count in ``q4_0``, which so measures the whole Q4_0 storage; table and record bytes are not counted.
    """
    ideal_in = [0.0] * len(stream_bits)
    for r in records:
        if r.get("coding") == "pairs":
            ideal_in[int(r["stream"])] += float(r.get("ideal_bits", 0.0))
    out: dict[str, dict] = {}
    for r in records:
        if r.get("coding") != "pairs":
            continue
        key = "q4_0" if "scales_of" in r else r["pair_format"]
        row = out.setdefault(key, {"tensors": 0, "weights": 0, "raw_bytes": 0, "bits": 0.0})
        si = int(r["stream"])
        row["bits"] += stream_bits[si] * float(r.get("ideal_bits", 0.0)) / ideal_in[si] if ideal_in[si] else 0.0
        if "scales_of" in r:
            continue
        n = int(r["n_pairs"])
        row["tensors"] += 1
        row["weights"] += n
        row["raw_bytes"] += n // Q4_0_BLOCK * Q4_0_BLOCK_BYTES if key == "q4_0" else n * FORMATS[key].total_bits // 8
    for row in out.values():
        row["bits_per_weight"] = row["bits"] / row["weights"] if row["weights"] else 0.0
        row["fraction"] = row["bits"] / 8 / row["raw_bytes"] if row["raw_bytes"] else 0.0
    return out


@dataclass
class ContainerStream:
    """One coded stream of an open container (``Container.streams[index]``), as its record gives it.

    ``spec`` is the codec, ``n_pairs``/``n_words`` its sizes, ``word_bytes`` the width of a word,
    ``checkpoints`` the decoder states every ``checkpoint_interval`` pairs, ``blocks`` the
    ``(first word, end word, CRC-32)`` of each CRC block, ``tensors`` the indices of the tensors whose
    pairs it holds (in order) and ``tables``/``runs`` the code tables and which pairs each codes. Its
    words are :meth:`Container.stream_words`, its pairs :meth:`Container.decode_stream`; the last
    four fields are the reader's caches.
    """

    index: int
    spec: Codec
    n_pairs: int
    n_words: int
    word_bytes: int
    offset: int
    checkpoints: list[Checkpoint]
    blocks: list[tuple[int, int, int]]
    tensors: list[int] = field(default_factory=list)
    tables: list = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    #: per table: (index of the tensor it codes, its rows' shift z) — what joins its pairs to values
    table_owner: list[tuple[int, int]] = field(default_factory=list)
    verified: set = field(default_factory=set)
    word_list: list | None = None
    prepared: object = None
    #: Version 6: the most pairs of a block, and the independent blocks (:class:`~.stream.Block`, in
    #: stream order; ``blocks`` then holds their word ranges and CRCs); 0 and empty otherwise.
    block_pairs: int = 0
    spans: list = field(default_factory=list)
    #: per tensor (its index in the container): its tables and its runs, as index ranges of
    #: ``tables`` and ``runs``
    tensor_tables: dict = field(default_factory=dict)
    tensor_runs: dict = field(default_factory=dict)
    coded_pairs: int = 0


#: Published figure the fp8 rows are compared with: entropy-coded fp8 exponents save up to ~27 %.
PUBLISHED_FP8_SAVING = 0.27
_RAW_UNIT = {"e4m3": "1-byte fp8", "e5m2": "1-byte fp8", "q4_0": "18-byte/32-weight Q4_0"}


def format_lines(formats: dict[str, dict]) -> list[str]:
    """One line per pair format of :func:`format_sizes`: bits per weight and the stored fraction of
    its raw storage (fp8 and Q4_0 against the published fp8 saving of up to ~27 %)."""
    lines = []
    for name, f in formats.items():
        raw = _RAW_UNIT.get(name, f"{FORMATS[name].total_bits}-bit {name}")
        line = (f"format {name}: {f['tensors']} tensors, {f['weights']:,} weights, {f['bits_per_weight']:.4f} "
                f"bits/weight, {100 * f['fraction']:.2f}% of the raw {raw} storage "
                f"(saves {100 * (1 - f['fraction']):.2f}%")
        if name in FP8_FORMATS:
            line += f"; published fp8 figure: up to ~{100 * PUBLISHED_FP8_SAVING:.0f}%"
        lines.append(line + ")")
    return lines
