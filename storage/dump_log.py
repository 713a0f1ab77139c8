"""``krait dump-log``: print segment, index, ``.txnindex`` and snapshot files the way Kafka's
kafka-dump-log.sh (DumpLogSegments) prints them, so output can be diffed against Kafka's.

    krait dump-log --files 00000000000000000000.log[,...] [--deep-iteration]
                   [--print-data-log] [--verify-index-only] [--index-sanity-check]

``--print-data-log`` implies ``--deep-iteration`` (as in Kafka). Damage is reported, not
raised: a batch that fails its CRC prints ``isvalid: false``; a torn tail prints Kafka's
"Found N invalid bytes at the end of F" plus the offset and position where it starts.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from protocol.compression import codec_name
from protocol.errors import ProtocolError
from protocol.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, iter_records, parse_header

from .errors import CorruptIndexError
from .index import OffsetIndex, TimeIndex
from .producer_state import read_snapshot
from .txn_index import parse_entries

__all__ = ["main"]

_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _decode(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def _batches(data: bytes) -> tuple[list[tuple[int, BatchHeader]], int]:
    """Whole batches (position, header) and the number of valid bytes."""
    pos, out = 0, []
    while len(data) - pos >= HEADER_SIZE:
        h = parse_header(data, pos)
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > len(data):
            break
        out.append((pos, h))
        pos += h.size
    return out, pos


def _crc_ok(data: bytes, pos: int, h: BatchHeader) -> bool:
    from crc32c import crc32c

    return h.magic == 2 and crc32c(memoryview(data)[pos + 21 : pos + h.size]) == h.crc


def dump_log(path: str, deep: bool, print_data: bool, out: TextIO, err: TextIO) -> int:
    name = os.path.basename(path)
    stem = name.split(".")[0]
    if stem.isdigit():
        print(f"Log starting offset: {int(stem)}", file=out)
    with open(path, "rb") as f:
        data = f.read()
    batches, valid = _batches(data)
    last_offset = -1
    non_consecutive: list[tuple[int, int]] = []
    status = 0
    for pos, h in batches:
        ok = _crc_ok(data, pos, h)
        ts_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
        horizon = f"OptionalLong[{h.base_timestamp}]" if h.attributes & 0x40 else "OptionalLong.empty"
        print(f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
              f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
              f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
              f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
              f"deleteHorizonMs: {horizon} position: {pos} {ts_type}: {h.max_timestamp} size: {h.size} "
              f"magic: {h.magic} compresscodec: {codec_name(h.compression)} crc: {h.crc} isvalid: {_bool(ok)}", file=out)
        if not ok:
            status = 1
            print(f"Batch at offset {h.base_offset} position {pos} in {name} is corrupt (CRC mismatch)", file=err)
        if not (deep or print_data):
            continue
        if not ok:
            continue
        try:
            for i, rec in enumerate(iter_records(data, pos)):
                if rec.offset != last_offset + 1:
                    non_consecutive.append((last_offset, rec.offset))
                last_offset = rec.offset
                seq = h.base_sequence + i if h.base_sequence >= 0 else -1
                key_size = -1 if rec.key is None else len(rec.key)
                value_size = -1 if rec.value is None else len(rec.value)
                line = (f"| offset: {rec.offset} {ts_type}: {rec.timestamp} keySize: {key_size} valueSize: {value_size} "
                        f"sequence: {seq} headerKeys: [{','.join(k for k, _ in rec.headers)}]")
                if h.is_control and rec.key is not None and len(rec.key) >= 4:
                    ctype = int.from_bytes(rec.key[2:4], "big", signed=True)
                    cname = _CONTROL_TYPES.get(ctype)
                    if cname and rec.value is not None and len(rec.value) >= 6:
                        coord = int.from_bytes(rec.value[2:6], "big", signed=True)
                        line += f" endTxnMarker: {cname} coordinatorEpoch: {coord}"
                    else:
                        line += f" controlType: UNKNOWN({ctype})"
                elif print_data:
                    prefix = " "
                    if rec.key is not None:
                        line += f"{prefix}key: {_decode(rec.key)}"
                    if rec.value is not None:
                        line += f" payload: {_decode(rec.value)}"
                print(line, file=out)
        except ProtocolError as e:
            status = 1
            print(f"Cannot decode records of the batch at offset {h.base_offset} position {pos}: {e}", file=err)
    trailing = len(data) - valid
    if trailing > 0:
        status = 1
        print(f"Found {trailing} invalid bytes at the end of {name}", file=out)
        next_off = batches[-1][1].next_offset if batches else (int(stem) if stem.isdigit() else 0)
        print(f"Invalid data in {name} starts at position {valid} (after offset {next_off - 1})", file=err)
    if non_consecutive:
        print(f"Non-consecutive offsets in {os.path.abspath(path)}", file=err)
        for a, b in non_consecutive:
            print(f"  {a} is followed by {b}", file=err)
    return status


def _log_for(path: str) -> str:
    return os.path.join(os.path.dirname(path) or ".", os.path.basename(path).split(".")[0] + ".log")


def _sanity_check(idx, path: str, out: TextIO, err: TextIO) -> int:
    """--index-sanity-check: Kafka's index sanity check, its messages."""
    try:
        idx.sanity_check()
    except CorruptIndexError as e:
        print(f"{path} failed sanity check: {e}", file=err)
        return 1
    print(f"{path} passed sanity check.", file=out)
    return 0


def _read_segment_log(index_path: str) -> bytes:
    """The .log beside an index (empty if it is gone), to verify entries against."""
    try:
        with open(_log_for(index_path), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def dump_index(path: str, sanity_only: bool, verify_only: bool, out: TextIO, err: TextIO) -> int:
    base = int(os.path.basename(path).split(".")[0])
    idx = OffsetIndex(path, base)
    try:
        if idx.entries == 0:
            print(f"{path} is empty.", file=out)
            return 0
        if sanity_only:
            return _sanity_check(idx, path, out, err)
        data = _read_segment_log(path)
        mismatches = []
        for i in range(idx.entries):
            off, pos = idx.entry(i)
            if off == base and i > 0:
                break  # zero-filled tail of a preallocated index
            try:
                found = parse_header(data, pos).last_offset if pos + HEADER_SIZE <= len(data) else -1
            except ProtocolError:
                found = -1
            if found != off:
                mismatches.append((off, found))
            if not verify_only:
                print(f"offset: {off} position: {pos}", file=out)
        if mismatches:
            print(f"Mismatches in :{os.path.abspath(path)}", file=err)
            for a, b in mismatches:
                print(f"  Index offset: {a}, log offset: {b}", file=err)
            return 1
        return 0
    finally:
        idx.close()


def dump_time_index(path: str, sanity_only: bool, verify_only: bool, out: TextIO, err: TextIO) -> int:
    base = int(os.path.basename(path).split(".")[0])
    idx = TimeIndex(path, base)
    try:
        if sanity_only:
            return _sanity_check(idx, path, out, err)
        data = _read_segment_log(path)
        batches, _ = _batches(data)
        prev = -1
        status = 0
        for i in range(idx.entries):
            ts, off = idx.entry(i)
            if off == base and i > 0:
                break
            match = next((h for _, h in batches if h.last_offset >= off), None)
            if match is None or match.last_offset != off:
                status = 1
                print("The following indexed offsets are not found in the log.", file=err)
                print(f"Indexed offset: {off}, found log offset: {match.last_offset if match else -1}", file=err)
            elif match.max_timestamp != ts:
                status = 1
                print(f"Found timestamp mismatch in :{os.path.abspath(path)}", file=err)
                print(f"  Index timestamp: {ts}, log timestamp: {match.max_timestamp}", file=err)
            if prev >= ts:
                status = 1
                print(f"Found out of order timestamp in :{os.path.abspath(path)}", file=err)
                print(f"  Index timestamp: {ts}, Previously indexed timestamp: {prev}", file=err)
            if not verify_only:
                print(f"timestamp: {ts} offset: {off}", file=out)
            prev = ts
        return status
    finally:
        idx.close()


def dump_snapshot(path: str, out: TextIO, err: TextIO) -> int:
    try:
        entries = read_snapshot(path)
    except ValueError as e:
        print(str(e), file=err)
        return 1
    for e in entries:
        line = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {e.current_txn_first_offset} lastTimestamp: {e.last_timestamp}")
        if e.batches:
            b = e.batches[-1]
            line += (f" firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
                     f"offsetDelta: {b.offset_delta} timestamp: {b.timestamp}")
        print(line, file=out)
    return 0


def dump_txn_index(path: str, out: TextIO) -> int:
    """Kafka's dumpTxnIndex: one line per aborted transaction (version is always 0)."""
    with open(path, "rb") as f:
        for t in parse_entries(f.read(), path):
            print(f"version: 0 producerId: {t.producer_id} firstOffset: {t.first_offset} "
                  f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}", file=out)
    return 0


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point for ``krait dump-log``; returns a process exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    ap = argparse.ArgumentParser(prog="krait dump-log", description="Dump Kafka log segments, indexes and snapshots.")
    ap.add_argument("--files", required=True, help="comma-separated list of .log/.index/.timeindex/.snapshot/.txnindex files")
    ap.add_argument("--deep-iteration", action="store_true", help="print every record, not only batch headers")
    ap.add_argument("--print-data-log", action="store_true", help="print keys and payloads (implies --deep-iteration)")
    ap.add_argument("--verify-index-only", action="store_true", help="check index entries against the log, print mismatches only")
    ap.add_argument("--index-sanity-check", action="store_true", help="only run the index sanity check")
    args = ap.parse_args(argv)
    status = 0
    for path in [p for p in args.files.split(",") if p]:
        print(f"Dumping {path}", file=out)
        try:
            if path.endswith(".log"):
                status |= dump_log(path, args.deep_iteration or args.print_data_log, args.print_data_log, out, err)
            elif path.endswith(".index"):
                status |= dump_index(path, args.index_sanity_check, args.verify_index_only, out, err)
            elif path.endswith(".timeindex"):
                status |= dump_time_index(path, args.index_sanity_check, args.verify_index_only, out, err)
            elif path.endswith(".snapshot"):
                status |= dump_snapshot(path, out, err)
            elif path.endswith(".txnindex"):
                status |= dump_txn_index(path, out)
            else:
                print(f"Ignoring unknown file {path}", file=err)
        except (OSError, ValueError, CorruptIndexError) as e:
            print(f"Cannot read {path}: {e}", file=err)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
