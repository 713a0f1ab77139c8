"""Kafka's four record-batch codecs: gzip, snappy (xerial framing), lz4 (frame), zstd.

Codec ids match the low three bits of a batch's attributes. Decoders accept what real
producers send: snappy-java's xerial framing *and* plain snappy, lz4 frames with the old
broken header checksum that Kafka < 0.10 clients wrote, zstd frames without a content
size. Every failure surfaces as :class:`CompressionError`.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.block
import lz4.frame
import zstandard

from .errors import CompressionError

__all__ = ["Codec", "compress", "decompress", "codec_name"]


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_NAMES = {Codec.NONE: "none", Codec.GZIP: "gzip", Codec.SNAPPY: "snappy", Codec.LZ4: "lz4", Codec.ZSTD: "zstd"}


def codec_name(codec: int) -> str:
    """Kafka's name for a codec id (as kafka-dump-log prints it)."""
    try:
        return _NAMES[Codec(codec)]
    except ValueError:
        return f"unknown({codec})"


# --- snappy -------------------------------------------------------------------------
# snappy-java's "xerial" stream framing, which Kafka clients use: no library implements
# it (python-snappy's framing is the official snappy framing format, a different one),
# so it is written here. Blocks are raw snappy, so cramjam does the real work.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def _snappy_raw(block: bytes, budget: int | None) -> bytes:
    """One raw snappy block. cramjam allocates the length its preamble claims before
    decoding, so check that claim first: snappy cannot expand more than ~21x (a 3-byte
    copy emits at most 64 bytes)."""
    size = shift = pos = 0
    while True:
        if pos >= len(block) or shift > 28:
            raise CompressionError("bad snappy length preamble")
        b = block[pos]
        pos += 1
        size |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    if size > 32 * len(block) + 64:
        raise CompressionError(f"snappy block claims {size} bytes from {len(block)}")
    if budget is not None and size > budget:
        raise CompressionError("decompressed size exceeds the limit")
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes | memoryview, max_size: int | None = None) -> bytes:
    data = bytes(data)
    if data[:8] == _XERIAL_MAGIC and len(data) >= 16:
        out = []
        total = 0
        pos = 16
        end = len(data)
        while pos < end:
            if pos + 4 > end:
                raise CompressionError("truncated xerial snappy block length")
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if n < 0 or pos + n > end:
                raise CompressionError("truncated xerial snappy block")
            block = _snappy_raw(data[pos : pos + n], None if max_size is None else max_size - total)
            total += len(block)
            out.append(block)
            pos += n
        return b"".join(out)
    return _snappy_raw(data, max_size)


def _snappy_compress(data: bytes | memoryview) -> bytes:
    data = memoryview(data)
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


# --- lz4 ------------------------------------------------------------------------------
_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def _lz4_decompress_lenient(data: bytes, max_size: int | None = None) -> bytes:
    """Decode an lz4 frame ignoring the header checksum.

    Kafka clients before 0.10 computed the frame-descriptor checksum over the magic too;
    liblz4 rightly rejects those frames, so we walk the blocks ourselves (the block
    decoder is still liblz4).
    """
    if len(data) < 7 or struct.unpack_from("<I", data, 0)[0] != _LZ4_MAGIC:
        raise CompressionError("not an lz4 frame")
    flg, bd = data[4], data[5]
    pos = 6
    if flg & 0x08:  # content size present
        pos += 8
    if flg & 0x01:  # dictionary id present
        pos += 4
    pos += 1  # header checksum (the broken one)
    independent = bool(flg & 0x20)
    block_checksum = bool(flg & 0x10)
    max_block = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x7)
    if max_block is None:
        raise CompressionError("bad lz4 block size id")
    out = bytearray()
    while True:
        if pos + 4 > len(data):
            raise CompressionError("truncated lz4 frame")
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if size == 0:
            break
        raw = size & 0x80000000
        size &= 0x7FFFFFFF
        block = data[pos : pos + size]
        if len(block) != size:
            raise CompressionError("truncated lz4 block")
        pos += size + (4 if block_checksum else 0)
        if raw:
            out += block
        else:
            kwargs = {} if independent else {"dict": bytes(out[-65536:])}
            try:
                out += lz4.block.decompress(block, uncompressed_size=max_block, **kwargs)
            except Exception as exc:  # lz4 raises LZ4BlockError
                raise CompressionError(f"lz4 block: {exc}") from None
        if max_size is not None and len(out) > max_size:
            raise CompressionError("decompressed size exceeds the limit")
    return bytes(out)


def _lz4_decompress(data: bytes | memoryview, max_size: int | None = None) -> bytes:
    data = bytes(data)
    # python-lz4 allocates the frame's declared content size up front: check it first
    # (lz4 cannot expand more than 255x).
    if len(data) >= 14 and data[4] & 0x08:
        (content_size,) = struct.unpack_from("<Q", data, 6)
        if content_size > 256 * len(data) + 64 or (max_size is not None and content_size > max_size):
            raise CompressionError(f"lz4 frame claims {content_size} bytes from {len(data)}")
    if max_size is None:
        try:
            return lz4.frame.decompress(data)
        except RuntimeError:
            return _lz4_decompress_lenient(data)
    try:
        d = lz4.frame.LZ4FrameDecompressor()
        out = d.decompress(data, max_length=max_size + 1)
    except RuntimeError:
        return _lz4_decompress_lenient(data, max_size)
    if len(out) > max_size:
        raise CompressionError("decompressed size exceeds the limit")
    if not d.eof:
        raise CompressionError("truncated lz4 frame")
    return out


# --- zstd -----------------------------------------------------------------------------
_ZSTD_D = zstandard.ZstdDecompressor()
_ZSTD_C = zstandard.ZstdCompressor(level=3)


def _zstd_decompress(data: bytes | memoryview, max_size: int | None = None) -> bytes:
    # Producers stream-compress, so frames carry no content size: read as a stream.
    reader = _ZSTD_D.stream_reader(io.BytesIO(bytes(data)), read_across_frames=True)
    if max_size is None:
        return reader.read()
    out = reader.read(max_size + 1)
    if len(out) > max_size:
        raise CompressionError("decompressed size exceeds the limit")
    return out


def _gzip_decompress(data: bytes | memoryview, max_size: int | None = None) -> bytes:
    # wbits 47 = auto-detect zlib or gzip header; some clients concatenate members
    out = []
    total = 0
    data = bytes(data)
    while data:
        d = zlib.decompressobj(47)
        if max_size is None:
            out.append(d.decompress(data))
        else:
            chunk = d.decompress(data, max_size - total + 1)
            total += len(chunk)
            if total > max_size:
                raise CompressionError("decompressed size exceeds the limit")
            out.append(chunk)
        if not d.eof:
            raise CompressionError("truncated gzip data")
        data = d.unused_data
    return b"".join(out)


def decompress(codec: int, data: bytes | memoryview, max_size: int | None = None) -> bytes:
    """Decompress a batch's records section. Raises CompressionError on bad input, and
    when ``max_size`` is given, as soon as the output would exceed it (decompression
    bombs) without producing more than about that much."""
    try:
        if codec == Codec.NONE:
            if max_size is not None and len(data) > max_size:
                raise CompressionError("decompressed size exceeds the limit")
            return bytes(data)
        if codec == Codec.GZIP:
            return _gzip_decompress(data, max_size)
        if codec == Codec.SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == Codec.LZ4:
            return _lz4_decompress(data, max_size)
        if codec == Codec.ZSTD:
            return _zstd_decompress(data, max_size)
    except CompressionError:
        raise
    except Exception as exc:  # each library has its own error types
        raise CompressionError(f"{codec_name(codec)} decompression failed: {exc}") from None
    raise CompressionError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes | memoryview) -> bytes:
    """Compress a records section the way Kafka's Java client does."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if codec == Codec.SNAPPY:
        return _snappy_compress(data)
    if codec == Codec.LZ4:
        return lz4.frame.compress(bytes(data), block_size=lz4.frame.BLOCKSIZE_MAX64KB, content_checksum=False)
    if codec == Codec.ZSTD:
        return _ZSTD_C.compress(bytes(data))
    raise ValueError(f"unknown compression codec {codec}")
