"""verify: CRC and structure check of every batch of every segment in a log dir.

    spark-submit spark_jobs/verify.py --log-dirs DIR --output OUT [--topics a,b]

One Spark task per segment. For each batch: magic 2, CRC32C (protocol.records.check_batch,
the broker's own check), sane lengths and counts, offsets increasing across batches and
segments, and the records section decompresses and decodes (spark_jobs.decode). Bytes after
the last whole batch are a zero-filled tail (fine), a torn tail of the active segment (a
warning: the broker truncates it on recovery) or unreadable data inside a segment (an
error). .index entries must point at batch starts holding their offset; .timeindex entries
must be monotonic and inside the segment. Given several brokers' log dirs, every replica of
a partition is checked (each is a copy on disk of its own).

Writes OUT/verify.json, prints bad segments with positions, exits 1 if any error was found.
"""

from __future__ import annotations

import mmap
import os
import sys

if not __package__:  # run as a script (spark-submit spark_jobs/verify.py)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_jobs.jobcommon import base_parser, log, progress, session, write_json

MAX_ISSUES = 100  # per segment: a wholly corrupt file should not produce a huge report


def verify_segment(task: tuple[str, str, int, int, bool]) -> dict:
    """Check one segment; ``task`` is (topic, path, partition, base offset, is last segment)."""
    import numpy as np
    import pyarrow as pa

    from protocol.errors import CompressionError, CorruptRecordError
    from protocol.records import check_batch, parse_header
    from spark_jobs.decode import H_BASE_OFFSET, H_LAST_DELTA, H_POS, decode_batches, walk_all_headers
    from spark_jobs.logdir import Segment, read_offset_index, read_time_index

    topic, path, partition, base, is_last = task
    out = {"topic": topic, "partition": partition, "segment": os.path.basename(path), "path": path,
           "batches": 0, "records": 0, "bytes": 0, "errors": [], "warnings": []}

    def issue(kind: str, pos: int | None, msg: str, offset: int | None = None) -> None:
        lst = out[kind]
        if len(lst) < MAX_ISSUES:
            lst.append({"position": pos, "offset": offset, "error" if kind == "errors" else "warning": msg})

    try:
        size = os.path.getsize(path)
        f = open(path, "rb")
    except OSError as exc:
        issue("errors", None, f"cannot open: {exc}")
        return out
    with f:
        if size == 0:
            mm, buf = None, np.empty(0, dtype=np.uint8)
        else:
            # read-only mapping: the broker may be appending; we check what exists now
            mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
            buf = np.frombuffer(mm, dtype=np.uint8)
        try:
            headers, end = walk_all_headers(buf)
            out["batches"] = int(len(headers))
            out["bytes"] = int(end)
            schema = pa.schema([("offset", pa.int64())])
            expect = base
            for i in range(len(headers)):
                pos = int(headers[i, H_POS])
                h = parse_header(buf, pos)
                try:
                    check_batch(buf, pos, h, size)
                except CorruptRecordError as exc:
                    issue("errors", pos, str(exc), h.base_offset)
                    continue
                if h.record_count > h.last_offset_delta + 1:
                    issue("errors", pos, f"recordCount {h.record_count} > lastOffsetDelta+1", h.base_offset)
                if h.base_offset < expect:
                    issue("errors", pos, f"base offset {h.base_offset} goes backwards (expected >= {expect})",
                          h.base_offset)
                expect = h.next_offset
                try:
                    rb = decode_batches(buf, headers[i : i + 1], topic=topic, partition=partition, schema=schema,
                                        base_position=0)
                    if not h.is_control and rb.num_rows != h.record_count:
                        issue("errors", pos, f"{rb.num_rows} records decoded, header says {h.record_count}",
                              h.base_offset)
                    out["records"] += rb.num_rows
                except (CorruptRecordError, CompressionError) as exc:
                    issue("errors", pos, f"records: {exc}", h.base_offset)
            if end < size:
                rest = buf[end:]
                if not rest.any():
                    pass  # zero-filled (preallocated) tail
                elif is_last:
                    issue("warnings", end, f"torn tail: {size - end} bytes after the last whole batch")
                else:
                    blen = int.from_bytes(bytes(buf[end + 8 : end + 12]), "big", signed=True) if size - end >= 12 else None
                    issue("errors", end, f"unreadable data: {size - end} bytes after the last whole batch "
                                         f"(batchLength field {blen})")
            # indexes: entries are hints for readers, so wrong ones are errors worth fixing
            starts = {int(p): (int(b), int(b + d)) for p, b, d in
                      zip(headers[:, H_POS], headers[:, H_BASE_OFFSET], headers[:, H_LAST_DELTA], strict=True)}
            seg = Segment(base, path)
            offs, poss = read_offset_index(seg)
            raw_n = os.path.getsize(seg.index_path) // 8 if os.path.exists(seg.index_path) else 0
            if raw_n > len(offs) and is_last is False:
                issue("warnings", None, f".index has {raw_n - len(offs)} entries after its valid prefix")
            for o, p in zip(offs.tolist(), poss.tolist(), strict=True):
                rng = starts.get(p)
                if rng is None:
                    issue("errors", p, f".index entry for offset {o} points at no batch start")
                elif not rng[0] <= o <= rng[1]:
                    issue("errors", p, f".index entry offset {o} is not in the batch at that position {rng}")
            tss, toffs = read_time_index(seg)
            if len(tss) > 1 and np.any(np.diff(tss) < 0):
                issue("errors", None, ".timeindex timestamps go backwards")
            if len(toffs) and (toffs.min() < base or (len(headers) and toffs.max() > expect - 1)):
                issue("errors", None, ".timeindex has offsets outside the segment")
        finally:
            # numpy views still reference the mapping; it is unmapped when they are collected
            del buf, mm
    return out


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__.splitlines()[0])
    args = ap.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    spark = session("krait-verify", args.master)
    from spark_jobs.logdir import list_partitions

    topics = set(args.topics.split(",")) if args.topics else None
    tasks = []
    for plog in list_partitions(args.log_dirs.split(","), all_replicas=True):
        if topics is not None and plog.topic not in topics:
            continue
        for i, seg in enumerate(plog.segments):
            tasks.append((plog.topic, seg.path, plog.partition, seg.base_offset, i == len(plog.segments) - 1))
    with progress(spark, f"verify {len(tasks)} segments"):
        results = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).map(verify_segment).collect() \
            if tasks else []
    bad = [r for r in results if r["errors"]]
    warned = [r for r in results if r["warnings"]]
    summary = {
        "segments": len(results), "batches": sum(r["batches"] for r in results),
        "records": sum(r["records"] for r in results), "bytes": sum(r["bytes"] for r in results),
        "bad_segments": len(bad), "errors": sum(len(r["errors"]) for r in results),
        "warnings": sum(len(r["warnings"]) for r in results), "ok": not bad,
    }
    write_json(os.path.join(args.output, "verify.json"), {"summary": summary, "segments": results})
    print(f"{summary['segments']} segments, {summary['batches']} batches, {summary['records']} records, "
          f"{summary['bytes']} bytes checked: {summary['errors']} errors in {len(bad)} segments, "
          f"{summary['warnings']} warnings")
    for r in bad + [w for w in warned if w not in bad]:
        print(f"{'bad ' if r['errors'] else 'warn'} {r['path']}")
        for e in r["errors"]:
            print(f"  error   position {e['position']} offset {e['offset']}: {e['error']}")
        for w in r["warnings"]:
            print(f"  warning position {w['position']}: {w['warning']}")
    log(f"wrote {args.output}/verify.json")
    spark.stop()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
