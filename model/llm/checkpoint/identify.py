"""What a file is, by its content and never by its name (:func:`identify`): a checkpoint of one of
the formats, an ``.ansf`` container, text, a zip or pickle (PyTorch), or too short to be anything.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ...errors import CheckpointError
from .base import EXPECTED, checked_size
from .llama2c import AK42_MAGIC, LEGACY_HEADER_BYTES, plausible_llama2c


#: What a file's extension claims it is (a file is read by its content, whatever its name).
_CLAIMED = {".safetensors": "a safetensors file", ".gguf": "a GGUF file", ".bin": "a llama2.c checkpoint"}
_ANSF_MAGIC = b"ANSFORGE"


def _looks_like_text(head: bytes) -> bool:
    if not head or b"\0" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not only a character cut at the end of the sample
            return False
        text = head[:e.start].decode("utf-8")
    if not text:
        return False
    return sum(c.isprintable() or c in "\t\r\n\f" for c in text) >= 0.95 * len(text)


def identify(path: str | os.PathLike[str]) -> tuple[str | None, str]:
    """What a file is, from its first bytes, whatever its name: ``(kind, description)``.

    ``kind`` is ``"safetensors"`` (an 8-byte little-endian header length, then ``{``), ``"gguf"``
    (magic ``GGUF``), ``"llama2c"`` (the ak42 magic, or a legacy header whose fields are plausible
    sizes), ``"ansf"`` (an ansforge container) or ``None``; ``description`` says what it is in a few
    words (``"it looks like text"``, ``"it is too short to be a checkpoint (27 bytes)"``), for a message
    that refuses it."""
    path = Path(path)
    size = checked_size(path)
    with open(path, "rb") as f:
        head = f.read(4096)
    if size == 0:
        return None, "it is empty"
    if head[:4] == b"GGUF":
        return "gguf", "it is a GGUF checkpoint"
    if head[:8] == _ANSF_MAGIC or (4 <= size < 8 and _ANSF_MAGIC.startswith(head)):
        return "ansf", "it is an ansforge container"
    if len(head) >= 9 and head[8:9] == b"{" and struct.unpack_from("<Q", head)[0] < 1 << 32:
        return "safetensors", "it is a safetensors checkpoint"
    if (len(head) >= 4 and struct.unpack_from("<I", head)[0] == AK42_MAGIC) or plausible_llama2c(head[:28]):
        return "llama2c", "it is a llama2.c checkpoint"
    if head[:4] == b"PK\x03\x04":
        return None, "it is a zip archive, as PyTorch saves checkpoints: convert it to safetensors first"
    if head[:2] == b"\x1f\x8b":
        return None, "it is gzip-compressed: uncompress it first"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return None, "it looks like a Python pickle (a PyTorch checkpoint?): convert it to safetensors first"
    text = _looks_like_text(head)
    if size < LEGACY_HEADER_BYTES:
        return None, f"it is too short to be a checkpoint: {size} bytes{' of text' if text else ''}"
    if text:
        return None, "it looks like JSON text" if head.lstrip()[:1] in (b"{", b"[") else "it looks like text"
    return None, f"its first bytes ({head[:8].hex(' ')}) match no format ansforge reads"


def not_a_checkpoint(path: Path, description: str) -> CheckpointError:
    """The error for a file that is not a checkpoint: what its name claims, what it is, what is read."""
    claimed = _CLAIMED.get(path.suffix.lower(), "a checkpoint")
    return CheckpointError(f"{path}: not {claimed} ({description}); {EXPECTED}")
