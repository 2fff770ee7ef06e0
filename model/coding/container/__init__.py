"""The ``.ansf`` container: a compressed checkpoint, random access, and its integrity checks.

Layout (all integers little-endian)::

    header   magic b"ANSFORGE" | u32 version (6 blocks layout; else 2, 3 row shifts, 4 context, 5 states) | u32 n_tensors | u32 n_streams | u32 crc32(previous 20 bytes)
    records  n_tensors tensor records, then n_streams stream records, each:
             u32 length | UTF-8 JSON | u32 crc32(JSON)
    payload  the streams' words (little-endian, W/8 bytes each) and raw tensors, at the offsets the
             records give (relative to the payload start)

A **tensor record** names the tensor and gives its shape, stored dtype, how it was coded (``pairs``
or ``raw``), the pair format and conversion, the code→exponent table, the
:class:`~ansforge.model.coding.codetable.CodeTable` (direct and escape codes, normalized frequencies, extra
widths), for tANS the state→symbol spread, and where its pairs lie in which stream. A **stream
record** gives the codec and its parameters, the pair and word counts, the checkpoints
(``[pair, word, bit, state]``, every ``checkpoint_interval`` pairs; ``state`` is a list of ``N``
states for a codec of ``N > 1`` interleaved states) and one CRC-32 per **block**; the
blocks split the word addresses at the checkpoints, so block ``b`` holds the words a decoder reads
between checkpoints ``b - 1`` and ``b`` (:func:`~ansforge.model.coding.stream.block_ranges`), and its CRC is
taken in the order the decoder reads them (:func:`~ansforge.model.coding.stream.block_crc`), so a decoder
core checks it in hardware. The format of the words is ``docs/bitstream.md``.

By default (the **blocks** layout, version 6) all coded tensors share one stream record whose pairs are
cut into independent blocks (:class:`~ansforge.model.coding.stream.Block`): each tensor's pairs every
``block_pairs`` (2^18) pairs, each block a complete stream with its own flush, head and CRC, listed as
``[n_words, crc]`` (its pairs implied by the cut). Blocks are coded and decoded on any number of
threads, a core decodes one per command, and random access decodes at most the blocks a range
touches. The layouts of versions 2 to 5 stay: ``layout="model"`` (one stack, a checkpoint every
``checkpoint_interval`` pairs) and ``layout="tensor"`` (one such stream per tensor).

Every byte is covered by a CRC or a structural check: a flipped or missing byte raises
:class:`ContainerError` naming the tensor and block, never returns wrong weights, and never hangs
(decoders are bounded by the pair counts).

The package, a module per concern:

``records``
    the format's versions and constants, the records as written and read, the size summaries;
``encode``
    tensors' coding pairs into one coded stream (:func:`encode_tensors`);
``write``
    a checkpoint into a container (:func:`compress_checkpoint`);
``parse``
    a container's header and records read and checked (:class:`~.parse.ContainerRecords`; what each
    version may hold is checked there, field by field, so files of every version since 1 still read);
``read``
    its tensors decoded (:class:`Container`, :func:`open_container`);
``pools``
    the threads and processes the coders run on.
"""

from ..stream import BLOCK_PAIRS
from .encode import encode_tensors, row_shifts
from .read import Container, open_container
from .records import (DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_CODEC, DEFAULT_LAYOUT, FORMATS, FP8_SCALE_SUFFIX, LAYOUTS,
                      LEGACY_CODECS, MAGIC, PUBLISHED_FP8_SAVING, VERSION, VERSION_BLOCKS, VERSION_SPREADS,
                      VERSION_STATES, CodedTensor, ContainerError, ContainerStream, format_lines, format_sizes)
from .write import CompressTask, compress_checkpoint, compress_tensor


__all__ = ["ContainerError", "CodedTensor", "encode_tensors", "compress_checkpoint", "compress_tensor", "CompressTask",
           "Container", "ContainerStream", "open_container", "DEFAULT_CHECKPOINT_INTERVAL", "MAGIC", "VERSION",
           "VERSION_STATES", "VERSION_BLOCKS", "VERSION_SPREADS", "DEFAULT_CODEC", "DEFAULT_LAYOUT", "LAYOUTS", "BLOCK_PAIRS",
           "LEGACY_CODECS", "FORMATS", "FP8_SCALE_SUFFIX", "format_sizes", "format_lines", "row_shifts", "PUBLISHED_FP8_SAVING"]
