"""Token id -> the exact bytes it adds to the output, for byte-level BPE and SentencePiece vocabularies.

The grammar works on UTF-8 bytes, so every token must be seen as the byte string it appends.
- byte-level BPE (GPT-2, Llama-3, Qwen, SmolLM): each character of the token string stands for one
  byte through GPT-2's `bytes_to_unicode` table (`Ġ` is a space, `Ċ` a newline, ...);
- SentencePiece (Llama-2, Mistral, Gemma): `▁` is a space and `<0xNN>` is the raw byte NN.
Special/control tokens map to None: they are never allowed, except EOS in accepting states.
Empty tokens also map to None (allowing them would let a walk loop without progress).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from kvx.errors import KvxError

BYTE_LEVEL = "byte_level"
SENTENCEPIECE = "sentencepiece"
_SP_SPACE = "\u2581"  # ▁
_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to 256+i."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + extra)] = b
            extra += 1
    return table


@dataclass
class TokenVocab:
    """What the grammar needs from a tokenizer: bytes per id, EOS ids, and a stable hash."""

    token_bytes: list[bytes | None]  # index = token id, length = vocab_size (model rows)
    eos_ids: list[int]
    kind: str
    hash: str = ""
    _by_bytes: dict[bytes, int] | None = field(default=None, repr=False)
    _single: np.ndarray | None = field(default=None, repr=False)
    _longest: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.hash:
            self.hash = _vocab_hash(self.token_bytes, self.eos_ids, self.kind)

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)

    def id_for_bytes(self, data: bytes) -> int | None:
        """The token whose bytes are exactly `data` (lowest id if several), or None."""
        if self._by_bytes is None:
            index: dict[bytes, int] = {}
            for tid, tb in enumerate(self.token_bytes):
                if tb and tid not in self.eos_ids:
                    index.setdefault(tb, tid)
            self._by_bytes = index
        return self._by_bytes.get(data)

    def single_byte_tokens(self) -> np.ndarray:
        """[256] bool: which bytes exist as a one-byte token (true for all 256 in byte-level BPE)."""
        if self._single is None:
            have = np.zeros(256, dtype=bool)
            for tb in self.token_bytes:
                if tb is not None and len(tb) == 1:
                    have[tb[0]] = True
            self._single = have
        return self._single.copy()

    @property
    def longest(self) -> int:
        """Bytes in the longest token (1 for an empty vocabulary); computed once."""
        if self._longest is None:
            self._longest = max((len(tb) for tb in self.token_bytes if tb), default=1)
        return self._longest


def _vocab_hash(token_bytes: list[bytes | None], eos_ids: list[int], kind: str) -> str:
    h = hashlib.sha256(f"{kind}|{len(token_bytes)}|{sorted(eos_ids)}|".encode())
    for tb in token_bytes:
        h.update(b"\xff-" if tb is None else len(tb).to_bytes(2, "little") + tb)
    return h.hexdigest()[:32]


def detect_kind(hf) -> str:
    """Byte-level or SentencePiece, from the backend decoder, else from the vocabulary itself."""
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is not None and backend.decoder is not None:
        decoder = json.loads(backend.to_str()).get("decoder") or {}
        text = json.dumps(decoder)
        if '"ByteLevel"' in text:
            return BYTE_LEVEL
        if '"Metaspace"' in text or '"ByteFallback"' in text or _SP_SPACE in text:
            return SENTENCEPIECE
    pieces = hf.convert_ids_to_tokens(list(range(len(hf))))
    spaces_sp = sum(1 for p in pieces if p and p.startswith(_SP_SPACE))
    spaces_bl = sum(1 for p in pieces if p and p.startswith("\u0120"))  # Ġ
    if spaces_sp == 0 and spaces_bl == 0:
        raise KvxError("tokenizer: cannot tell whether it is byte-level BPE or SentencePiece")
    return SENTENCEPIECE if spaces_sp > spaces_bl else BYTE_LEVEL


def _piece_bytes(piece: str, kind: str) -> bytes | None:
    if kind == BYTE_LEVEL:
        table = unicode_to_bytes()
        try:
            return bytes(table[ch] for ch in piece)
        except KeyError:
            return None  # not a byte-level piece (a control token that slipped through)
    match = _BYTE_PIECE.match(piece)
    if match:
        return bytes([int(match.group(1), 16)])
    return piece.replace(_SP_SPACE, " ").encode("utf-8")


def _special_ids(hf) -> set[int]:
    ids = set(getattr(hf, "all_special_ids", []) or [])
    for tid, added in (getattr(hf, "added_tokens_decoder", {}) or {}).items():
        if getattr(added, "special", False):
            ids.add(int(tid))
    unk = getattr(hf, "unk_token_id", None)
    if unk is not None:
        ids.add(int(unk))
    return ids


def build_vocab(hf, vocab_size: int | None = None, eos_ids: list[int] | None = None) -> TokenVocab:
    """Map every id of a HF tokenizer to its bytes; ids past len(hf) (padding rows) map to None."""
    kind = detect_kind(hf)
    n = len(hf)
    size = max(n, vocab_size or 0)
    special = _special_ids(hf)
    added = {int(t): a for t, a in (getattr(hf, "added_tokens_decoder", {}) or {}).items()}
    pieces = hf.convert_ids_to_tokens(list(range(n)))
    token_bytes: list[bytes | None] = [None] * size
    for tid, piece in enumerate(pieces):
        if tid in special or piece is None:
            continue
        if tid in added:  # a non-special added token: its text is literal, not byte-level encoded
            data = added[tid].content.encode("utf-8")
        else:
            data = _piece_bytes(piece, kind)
        token_bytes[tid] = data or None
    if eos_ids is None:
        eos_ids = [] if hf.eos_token_id is None else [int(hf.eos_token_id)]
    eos_ids = sorted({int(e) for e in eos_ids if 0 <= int(e) < size})
    for e in eos_ids:
        token_bytes[e] = None
    if not eos_ids:
        raise KvxError("tokenizer: no EOS token id, so a grammar could never end a record")
    return TokenVocab(token_bytes=token_bytes, eos_ids=eos_ids, kind=kind)


_VOCABS: dict[int, tuple[object, TokenVocab]] = {}


def vocab_for(tokenizer) -> TokenVocab:
    """TokenVocab for a kvx Tokenizer (has .hf) or a raw HF tokenizer; built once per object."""
    hit = _VOCABS.get(id(tokenizer))
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    hf = getattr(tokenizer, "hf", tokenizer)
    if hf is tokenizer:
        vocab = build_vocab(hf)
    else:
        vocab = build_vocab(hf, getattr(tokenizer, "vocab_size", None), list(tokenizer.eos_token_ids))
    _VOCABS[id(tokenizer)] = (tokenizer, vocab)  # holding the object keeps its id from being reused
    return vocab


def known_vocab(vocab_hash: str | None) -> TokenVocab | None:
    """A vocabulary this process has built, by its hash (a pickled CopyGuard finds its bytes here)."""
    return next((v for _, v in _VOCABS.values() if v.hash == vocab_hash), None)
