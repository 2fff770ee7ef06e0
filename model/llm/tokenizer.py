"""llama2.c's ``tokenizer.bin``: reader, BPE encode with byte fallback, and decode.

File format (little-endian)::

    int32 max_token_length
    vocab_size times:  float32 score | int32 length | length bytes (the token's UTF-8 piece)

The file does not store ``vocab_size``; it is the number of entries up to the end of the file, and
must equal the model's (:class:`TokenizerError` otherwise). Ids 0, 1 and 2 are ``<unk>``, ``<s>``
(BOS) and ``</s>`` (EOS); ids 3..258 are the byte-fallback tokens ``<0x00>`` .. ``<0xFF>``.

Encoding is ``run.c``'s ``encode()``: an optional BOS, a dummy-prefix space token when the text is
not empty, one token per UTF-8 character (its bytes as byte-fallback tokens, id = byte + 3, when the
character has no token), then repeatedly merge the adjacent pair whose concatenation is a token with
the highest score (the leftmost on ties) until no pair merges.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np

from ..errors import AnsforgeError

__all__ = ["Tokenizer", "TokenizerError", "BOS", "EOS"]

BOS = 1
EOS = 2
_BYTE_PIECE = re.compile(rb"^<0x([0-9A-Fa-f]{2})>$")


class TokenizerError(AnsforgeError):
    """A tokenizer file is missing, truncated, or does not match the model."""


class Tokenizer:
    """A llama2.c BPE vocabulary (see the module docstring).

    Attributes
    ----------
    pieces : list of bytes
        Each token's bytes (byte-fallback tokens keep their ``<0xXX>`` spelling).
    scores : ndarray of float32
        Merge priority of each token.
    """

    def __init__(self, pieces: list[bytes], scores: np.ndarray, max_token_length: int, path: Path | None = None):
        self.pieces = pieces
        self.scores = np.asarray(scores, dtype=np.float32)
        self.max_token_length = max_token_length
        self.path = path
        self._ids: dict[bytes, int] = {}
        for i, p in enumerate(pieces):
            self._ids.setdefault(p, i)      # the first of duplicate pieces, as run.c's sorted search may
        self._bytes = [self._piece_bytes(p) for p in pieces]

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    @classmethod
    def load(cls, path: str | Path, vocab_size: int | None = None) -> "Tokenizer":
        """Read ``path``; with ``vocab_size``, require exactly that many tokens."""
        path = Path(path)
        if path.is_dir():
            raise TokenizerError(f"{path}: is a directory; expected a llama2.c tokenizer file (tokenizer.bin)")
        try:
            with open(path, "rb") as f:
                head = f.read(8)
        except OSError as e:
            raise TokenizerError(f"{path}: cannot read tokenizer: {e.strerror or e}") from None
        # What the file is, before reading it whole: a checkpoint or a container given here is named as
        # such (and not read into memory), text as text. (A tokenizer.bin starts with max_token_length and
        # the score 0.0 of <unk>: never a checkpoint's header.)
        from .checkpoint import identify

        kind, what = identify(path)
        max_len = struct.unpack_from("<i", head)[0] if len(head) >= 4 else 0
        if kind is not None or not 0 < max_len < 1 << 16:
            if len(head) < 4 and kind is None:
                raise TokenizerError(f"{path}: truncated tokenizer: {len(head)} bytes, the header has 4")
            raise TokenizerError(f"{path}: not a llama2.c tokenizer ({what}); expected llama2.c's tokenizer.bin")
        try:
            data = path.read_bytes()
        except OSError as e:
            raise TokenizerError(f"{path}: cannot read tokenizer: {e.strerror or e}") from None
        pos, pieces, scores = 4, [], []
        while pos < len(data):
            if pos + 8 > len(data):
                raise TokenizerError(f"{path}: truncated at token {len(pieces)} (byte {pos}): its score and length "
                                     "need 8 bytes")
            score, n = struct.unpack_from("<fi", data, pos)
            if not 0 <= n <= max_len or pos + 8 + n > len(data):
                raise TokenizerError(f"{path}: token {len(pieces)} (byte {pos}) has length {n}, outside 0.."
                                     f"{max_len} or past the end of the file")
            pieces.append(data[pos + 8:pos + 8 + n])
            scores.append(score)
            pos += 8 + n
        if len(pieces) < 259:
            raise TokenizerError(f"{path}: {len(pieces)} tokens; a llama2.c vocabulary has <unk>, <s>, </s> and "
                                 "256 byte tokens at least")
        if vocab_size is not None and len(pieces) != vocab_size:
            raise TokenizerError(f"{path}: the tokenizer has {len(pieces)} tokens but the model's vocab_size is "
                                 f"{vocab_size}; pass the tokenizer the model was trained with")
        return cls(pieces, np.array(scores, np.float32), max_len, path)

    @staticmethod
    def _piece_bytes(piece: bytes) -> bytes:
        m = _BYTE_PIECE.match(piece)
        return bytes([int(m.group(1), 16)]) if m else piece

    def encode(self, text: str, bos: bool = True, eos: bool = False) -> list[int]:
        """Token ids of ``text`` (see the module docstring for the algorithm)."""
        tokens: list[int] = [BOS] if bos else []
        if text:
            space = self._ids.get(b" ")
            if space is not None:
                tokens.append(space)
        ids = self._ids
        for ch in text:
            b = ch.encode("utf-8")
            t = ids.get(b)
            if t is not None:
                tokens.append(t)
            else:
                tokens.extend(x + 3 for x in b)
        start = 1 if bos else 0     # BOS never merges: no piece starts with "<s>"
        seq = tokens[start:]
        scores = self.scores
        while len(seq) > 1:
            best, best_score = -1, -1e10
            for i in range(len(seq) - 1):
                t = ids.get(self.pieces[seq[i]] + self.pieces[seq[i + 1]])
                if t is not None and scores[t] > best_score:
                    best, best_score, best_id = i, scores[t], t
            if best < 0:
                break
            seq[best:best + 2] = [best_id]
        tokens = tokens[:start] + seq
        if eos:
            tokens.append(EOS)
        return tokens

    def piece(self, prev: int, token: int) -> bytes:
        """The bytes ``token`` contributes after ``prev`` (``run.c``'s ``decode``: the leading space
        of the first token after BOS is dropped; byte-fallback tokens give their byte)."""
        if not 0 <= token < self.vocab_size:
            raise TokenizerError(f"token id {token} is outside the tokenizer's vocabulary (0..{self.vocab_size - 1})")
        b = self._bytes[token]
        if prev == BOS and b.startswith(b" "):
            b = b[1:]
        return b

    def decode(self, tokens: list[int], prev: int = BOS) -> str:
        """Text of ``tokens`` (which do not include the BOS), invalid UTF-8 replaced."""
        out = []
        for t in tokens:
            if t in (BOS, EOS):
                prev = t
                continue
            out.append(self.piece(prev, t))
            prev = t
        return b"".join(out).decode("utf-8", errors="replace")
