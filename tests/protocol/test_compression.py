"""Codec edge cases real producers hit, and decompression-bomb limits."""

from __future__ import annotations

import gzip
import io
import json
import struct

import cramjam
import lz4.frame
import pytest
import zstandard

from protocol.compression import Codec, compress, decompress
from protocol.errors import CompressionError
from protocol.records import build_batch, iter_records

DATA = b"".join(json.dumps({"id": i, "user": f"u{i % 97}", "ok": True}).encode() for i in range(5000))
CODECS = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_roundtrip(codec):
    assert decompress(codec, compress(codec, DATA)) == DATA
    assert decompress(codec, memoryview(compress(codec, DATA))) == DATA
    assert decompress(codec, compress(codec, b"")) == b""


def test_xerial_snappy_layout():
    out = compress(Codec.SNAPPY, DATA)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def test_plain_snappy_is_accepted():
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(DATA))) == DATA


def test_lz4_with_broken_header_checksum():
    for store_size in (False, True):
        frame = bytearray(lz4.frame.compress(DATA, store_size=store_size, content_checksum=False))
        hc = 6 + (8 if store_size else 0)
        frame[hc] ^= 0x5A  # Kafka < 0.10 clients computed it over the magic too
        with pytest.raises(RuntimeError):
            lz4.frame.decompress(bytes(frame))
        assert decompress(Codec.LZ4, bytes(frame)) == DATA
        assert decompress(Codec.LZ4, bytes(frame), max_size=len(DATA)) == DATA


def test_lz4_with_block_checksums_and_linked_blocks():
    frame = lz4.frame.compress(DATA, block_linked=True, block_checksum=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                             store_size=False)
    bad = bytearray(frame)
    bad[6] ^= 0xFF
    assert decompress(Codec.LZ4, bytes(bad)) == DATA


def test_zstd_without_content_size():
    buf = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buf, closefd=False) as w:
        w.write(DATA[:1000])
        w.flush()
        w.write(DATA[1000:])
    frame = buf.getvalue()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(Codec.ZSTD, frame) == DATA
    cobj = zstandard.ZstdCompressor().compressobj()
    frame2 = cobj.compress(DATA) + cobj.flush()
    assert decompress(Codec.ZSTD, frame2) == DATA


def test_gzip_concatenated_members_and_zlib():
    assert decompress(Codec.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_batches_with_every_codec(codec):
    recs = [(b"k%d" % i, DATA[i * 50 : i * 50 + 100], [("h", b"v")]) for i in range(100)]
    batch = build_batch(recs, compression=codec, timestamp=5)
    assert [(r.key, r.value, list(r.headers)) for r in iter_records(batch)] == [(k, v, h) for k, v, h in recs]


BOMB = b"\x00" * (64 << 20)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_decompression_bomb_is_refused_with_max_size(codec):
    bomb = compress(codec, BOMB)
    assert len(bomb) < 4 << 20
    with pytest.raises(CompressionError):
        decompress(codec, bomb, max_size=1 << 20)
    assert len(decompress(codec, bomb, max_size=len(BOMB))) == len(BOMB)
    with pytest.raises(CompressionError):
        decompress(Codec.NONE, BOMB, max_size=1 << 20)


def test_snappy_size_claim_is_checked_before_allocating():
    # a raw snappy preamble claiming 4 GiB: cramjam would allocate it (and abort) unchecked
    with pytest.raises(CompressionError):
        decompress(Codec.SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\x00" * 10)
    xerial = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 15) + b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    with pytest.raises(CompressionError):
        decompress(Codec.SNAPPY, xerial)


def test_lz4_content_size_claim_is_checked_before_allocating():
    frame = bytearray(lz4.frame.compress(b"hello" * 10, store_size=True))
    frame[6:14] = struct.pack("<Q", 1 << 40)
    with pytest.raises(CompressionError):
        decompress(Codec.LZ4, bytes(frame))


# Inputs that are valid, empty streams: empty gzip and zstd input, a raw snappy block of
# length 0. Everything else below is garbage for every codec.
_EMPTY_STREAMS = {(Codec.GZIP, b""), (Codec.SNAPPY, b"\x00"), (Codec.ZSTD, b"")}


@pytest.mark.parametrize("codec", [*CODECS, 7], ids=str)
def test_garbage_raises_compression_error(codec):
    for junk in (b"", b"\x00", b"garbage!" * 10, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09"):
        if (codec, junk) in _EMPTY_STREAMS:
            assert decompress(codec, junk) == b""
            continue
        with pytest.raises(CompressionError):
            decompress(codec, junk)
