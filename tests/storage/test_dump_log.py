import io

from storage.config import LogConfig
from storage.dump_log import main

from .helpers import append, batch, open_log


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(argv, out, err)
    return rc, out.getvalue(), err.getvalue()


def test_dump_log_matches_kafka_format(tmp_path):
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=100))
    for i in range(5):
        append(plog, batch(2, keys=[b"key", None], values=[b"hello", b"w"], ts=1700000000000 + i, pid=3, epoch=0, seq=2 * i))
    plog.close()
    seg = plog.segments[0]
    rc, out, err = _run(["--files", seg.log_path, "--print-data-log"])
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Dumping {seg.log_path}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith(
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 3 producerEpoch: 0 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 1700000000000 size: ")
    assert " magic: 2 compresscodec: none crc: " in lines[2] and lines[2].endswith("isvalid: true")
    assert lines[3] == ("| offset: 0 CreateTime: 1700000000000 keySize: 3 valueSize: 5 sequence: 0 headerKeys: [] "
                        "key: key payload: hello")
    assert lines[4] == "| offset: 1 CreateTime: 1700000000000 keySize: -1 valueSize: 1 sequence: 1 headerKeys: [] payload: w"
    rc, out, _ = _run(["--files", f"{seg.offset_index.path},{seg.time_index.path}"])
    assert rc == 0
    assert "offset: " in out and "position: " in out and "timestamp: 1700000000004 offset: 9" in out
    rc, out, _ = _run(["--files", seg.offset_index.path, "--verify-index-only"])
    assert rc == 0 and "position" not in out


def test_dump_log_reports_damage(tmp_path):
    plog = open_log(tmp_path)
    for _ in range(3):
        append(plog, batch(1))
    plog.close()
    path = plog.segments[0].log_path
    data = bytearray(open(path, "rb").read())
    size = len(data) // 3
    data[size + 70] ^= 0xFF  # corrupt the second batch's records
    open(path, "wb").write(bytes(data[:-10]))
    rc, out, err = _run(["--files", path, "--deep-iteration"])
    assert rc == 1
    assert "isvalid: false" in out
    assert f"Found {size - 10} invalid bytes at the end of" in out
    assert f"offset 1 position {size}" in err
    assert f"starts at position {2 * size}" in err
