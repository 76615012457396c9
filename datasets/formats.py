"""Parsers of the raw formats the papers' data come in, each checking what it reads.

- IDX (LeCun's MNIST files, also Fashion-MNIST), usually gzipped: :func:`read_idx_gz`.
- UCI "Bag of Words" ``docword.*.txt(.gz)``: header ``D``, ``W``, ``NNZ`` then ``NNZ`` lines
  ``docID wordID count`` with 1-based ids: :func:`read_docword`.
- Blei's lda-c: one document per line, ``n id:count ... id:count`` with 0-based ids:
  :func:`parse_ldac`.
- A vocabulary: one word per line: :func:`parse_vocab`.

Every parser raises ``ValueError`` naming the file and what is wrong with it (a cut gzip
stream, a wrong magic number, a count that does not match the header), so bad bytes never
become silently wrong data.

Decompressed output is counted while it is read, in :data:`CHUNK` pieces, and refused past a
cap (:data:`MAX_MEMBER` for what is held in memory, :data:`MAX_TEXT` for a streamed docword
file): a gzip header's stated size is not trusted, so a small "decompression bomb" ends in a
``ValueError`` naming the cap instead of exhausting memory.
"""
from __future__ import annotations

import gzip
import io
import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

#: IDX type code -> big-endian numpy dtype (the third byte of the magic number)
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
#: magic numbers of the MNIST-style files: unsigned bytes, 3 dimensions (images) or 1 (labels)
IDX_IMAGES, IDX_LABELS = 2051, 2049
#: bytes read or decompressed at a time
CHUNK = 1 << 20
#: bytes of one file held in memory once decompressed (an archive member, a gunzipped IDX
#: file); the largest real one, Fashion-MNIST's training images, is 47 MB
MAX_MEMBER = 128 << 20
#: bytes of a decompressed text file streamed through a parser (UCI NYTimes' docword, the
#: largest, is about 1 GB)
MAX_TEXT = 2 << 30


class CappedReader(io.RawIOBase):
    """A binary stream over ``stream`` that raises ``ValueError`` naming ``what`` and ``cap`` as
    soon as more than ``cap`` bytes have come out of it; it never asks ``stream`` for more than
    one byte beyond the cap, so a decompressor under it never inflates more than that.

    Parameters
    ----------
    stream : file object
        Anything with ``read(n)`` (a decompressing file object, an archive member).
    cap : int
        Bytes allowed.
    what : str
        Name used in the error message (e.g. the file name).
    """

    def __init__(self, stream, cap: int, what: str):
        super().__init__()
        self._stream, self.cap, self.what, self.count = stream, int(cap), what, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read(min(len(buffer), self.cap - self.count + 1))
        self.count += len(data)
        if self.count > self.cap:
            raise ValueError(f"{self.what}: decompresses to more than the cap of {self.cap:,} bytes; refused "
                             "as a decompression bomb or not the expected file")
        buffer[:len(data)] = data
        return len(data)


def read_capped(stream, cap: int, what: str) -> bytes:
    """All of ``stream``, read in :data:`CHUNK` pieces; ``ValueError`` naming ``what`` and ``cap``
    once more than ``cap`` bytes came out (the excess is never held)."""
    reader, out = CappedReader(stream, cap, what), bytearray()
    while block := reader.read(CHUNK):
        out += block
    return bytes(out)


def gunzip(data: bytes, what: str, cap: int = MAX_MEMBER) -> bytes:
    """Decompress a complete gzip stream, at most ``cap`` bytes of output.

    Raises
    ------
    ValueError
        Naming ``what``: the stream is cut or corrupt, or it decompresses to more than ``cap``
        bytes (a gzip trailer's stated size is unreliable, so the output itself is counted).
    """
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as stream:
            return read_capped(stream, cap, what)
    except (EOFError, OSError, zlib.error) as exc:  # EOFError: stream cut short; OSError: bad header
        raise ValueError(f"{what} is not a complete gzip file ({exc}); it is truncated or corrupt") from None


def parse_idx(data: bytes, what: str = "IDX data", magic: int | None = None) -> np.ndarray:
    """An IDX array (LeCun's format: magic ``00 00 type ndim``, big-endian dimensions, data).

    Parameters
    ----------
    data : bytes
        The uncompressed file.
    what : str
        Name used in error messages (e.g. the file name).
    magic : int, optional
        Required magic number, e.g. :data:`IDX_IMAGES` (2051) or :data:`IDX_LABELS` (2049).

    Returns
    -------
    numpy.ndarray
        Native-endian array of the stored shape (a read-only view for unsigned bytes).

    Raises
    ------
    ValueError
        Wrong magic, unknown type code, or a payload whose size is not the product of the
        dimensions (truncated or with trailing bytes).
    """
    if len(data) < 4:
        raise ValueError(f"{what}: {len(data)} bytes, too short for an IDX header")
    found = int.from_bytes(data[:4], "big")
    code, ndim = data[2], data[3]
    if data[:2] != b"\0\0" or code not in IDX_TYPES or ndim == 0:
        raise ValueError(f"{what}: magic number {found} (0x{found:08x}) is not an IDX header")
    if magic is not None and found != magic:
        raise ValueError(f"{what}: magic number {found}, expected {magic}")
    start = 4 + 4 * ndim
    if len(data) < start:
        raise ValueError(f"{what}: header cut short ({len(data)} bytes, need {start} for {ndim} dimensions)")
    shape = struct.unpack(f">{ndim}I", data[4:start])
    dtype = np.dtype(IDX_TYPES[code])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - start != expected:
        raise ValueError(f"{what}: {len(data) - start} data bytes, but the header's shape {shape} needs "
                         f"{expected}; the file is truncated or not what it claims")
    return np.frombuffer(data, dtype=dtype, offset=start).reshape(shape).astype(dtype.newbyteorder("="), copy=False)


def read_idx_gz(data: bytes, what: str, magic: int) -> np.ndarray:
    """:func:`parse_idx` of a gzipped IDX file, with the magic number required."""
    return parse_idx(gunzip(data, what), what, magic)


def read_docword(path: Path) -> sp.csr_matrix:
    """A UCI "Bag of Words" ``docword`` file as a ``(D, W)`` CSR count matrix.

    Parameters
    ----------
    path : pathlib.Path
        ``docword.NAME.txt`` or ``docword.NAME.txt.gz``: three header lines ``D``, ``W``,
        ``NNZ``, then ``NNZ`` lines ``docID wordID count`` (1-based ids).

    Returns
    -------
    scipy.sparse.csr_matrix
        float64 counts, documents x words.

    Raises
    ------
    ValueError
        A cut or corrupt gzip stream, a file of more than :data:`MAX_TEXT` bytes (decompressed),
        a malformed header or line, an id outside the header's range, a non-positive count, a
        repeated (doc, word) pair, or a number of entries other than ``NNZ``.
    """
    import pandas as pd  # deferred: only this parser needs pandas' fast C tokenizer

    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as raw:
            f = io.BufferedReader(CappedReader(raw, MAX_TEXT, path.name), CHUNK)
            header = [f.readline(64).strip() for _ in range(3)]
            try:
                D, W, NNZ = (int(h) for h in header)
            except ValueError:
                raise ValueError(f"{path.name}: header {header!r} is not three integers D, W, NNZ") from None
            # a line takes at least 6 bytes ("1 1 1\n"): a larger NNZ cannot fit in MAX_TEXT bytes
            if min(D, W, NNZ) < 0 or NNZ > min(D * W, MAX_TEXT // 6):
                raise ValueError(f"{path.name}: header D, W, NNZ = {D}, {W}, {NNZ} is impossible (negative, "
                                 f"or NNZ above D * W or above {MAX_TEXT // 6:,} lines of a {MAX_TEXT:,}-byte file)")
            try:  # at most one row past NNZ is read: a wrong count is caught without reading on
                table = pd.read_csv(f, sep=r"\s+", header=None, names=("doc", "word", "count"),
                                    dtype=np.int64, engine="c", nrows=NNZ + 1).to_numpy()
            except pd.errors.EmptyDataError:
                table = np.zeros((0, 3), dtype=np.int64)
            except (pd.errors.ParserError, ValueError, OverflowError) as exc:
                raise ValueError(f"{path.name}: not in docword format ({exc})") from None
    except (EOFError, OSError, zlib.error) as exc:
        raise ValueError(f"{path.name} is not a complete gzip file ({exc}); it is truncated or corrupt") from None
    if table.shape[0] != NNZ:
        raise ValueError(f"{path.name}: header says NNZ = {NNZ} entries, found {table.shape[0]}; truncated?")
    doc, word, count = table.T
    for name, ids, top in (("docID", doc, D), ("wordID", word, W)):
        if ids.size and (ids.min() < 1 or ids.max() > top):
            raise ValueError(f"{path.name}: {name} outside 1..{top} (found {ids.min()}..{ids.max()})")
    if count.size and count.min() < 1:
        raise ValueError(f"{path.name}: non-positive count {count.min()}")
    X = sp.csr_matrix((count.astype(np.float64), (doc - 1, word - 1)), shape=(D, W))
    if X.nnz != NNZ:
        raise ValueError(f"{path.name}: {NNZ - X.nnz} repeated (docID, wordID) pairs")
    return X


def parse_ldac(text: str, vocab_size: int) -> sp.csr_matrix:
    """Blei's lda-c format (``n id:count id:count ...`` per document, 0-based ids) to CSR.

    Parameters
    ----------
    text : str
        One document per line; ``n`` is the number of ``id:count`` pairs that follow (an
        empty document is the line ``0``). Trailing blank lines are ignored.
    vocab_size : int
        Number of columns; every id must be below it.

    Returns
    -------
    scipy.sparse.csr_matrix
        ``(documents, vocab_size)`` float64 counts.

    Raises
    ------
    ValueError
        A blank or malformed line, ``n`` not matching the pairs on its line, an id outside
        ``0..vocab_size-1``, a non-positive count, or an id repeated within a document (the
        message gives the line number).
    """
    lines = text.rstrip().splitlines() if text.strip() else []
    sizes = np.empty(len(lines), dtype=np.int64)
    for i, line in enumerate(lines):
        head, _, rest = line.strip().partition(" ")
        n_pairs = len(rest.split())
        if not head.isdigit() or int(head) != n_pairs or rest.count(":") != n_pairs:
            raise ValueError(f"lda-c line {i + 1}: expected 'n id:count ...' with n pairs, got {line[:60]!r}")
        sizes[i] = n_pairs
    body = " ".join(line.strip().partition(" ")[2] for line in lines).replace(":", " ")
    with warnings.catch_warnings():
        # numpy only warns when it stops at a token that is not an integer: make that an error
        warnings.simplefilter("error", DeprecationWarning)
        try:
            pairs = np.fromstring(body, dtype=np.int64, sep=" ") if body.strip() else np.zeros(0, np.int64)
        except (ValueError, DeprecationWarning):
            pairs = None
    if pairs is None or pairs.size != 2 * sizes.sum():
        raise ValueError("lda-c: an 'id:count' pair is not two integers")
    pairs = pairs.reshape(-1, 2)
    words, counts = pairs[:, 0], pairs[:, 1]
    rows = np.repeat(np.arange(len(lines)), sizes)
    if words.size and (words.min() < 0 or words.max() >= vocab_size):
        bad = int(rows[np.flatnonzero((words < 0) | (words >= vocab_size))[0]])
        raise ValueError(f"lda-c line {bad + 1}: word id outside 0..{vocab_size - 1}")
    if counts.size and counts.min() < 1:
        bad = int(rows[np.flatnonzero(counts < 1)[0]])
        raise ValueError(f"lda-c line {bad + 1}: non-positive count")
    X = sp.csr_matrix((counts.astype(np.float64), (rows, words)), shape=(len(lines), vocab_size))
    if X.nnz != words.size:
        raise ValueError("lda-c: a word id is repeated within a document")
    return X


def parse_vocab(text: str, what: str, size: int | None = None) -> list[str]:
    """One word per line; ``ValueError`` if ``size`` is given and the count differs."""
    words = text.rstrip("\n").split("\n") if text.strip() else []
    words = [w.rstrip("\r") for w in words]
    if size is not None and len(words) != size:
        raise ValueError(f"{what}: {len(words)} words, expected {size}")
    return words
