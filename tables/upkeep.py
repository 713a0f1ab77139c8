"""Upkeep of a topic's Iceberg table: small-file compaction, snapshot expiry, orphan files.

The writer (:mod:`tables.writer`) commits every ``krait.iceberg.commit.interval.ms`` (10 s),
so an hour of one Kafka partition arrives as ~360 small Parquet files and the table gains
~8,640 snapshots a day. This module owns keeping that table fast to read and bounded on disk;
:func:`run_upkeep` does all of it for one table and is what the broker calls on a timer, on a
worker thread (it blocks on file and catalog I/O).

**Compaction** (:func:`compact`). The data files of one Iceberg partition (Kafka partition x
hour of the timestamp, by default) smaller than 75% of the target size
(``krait.iceberg.compaction.target.file.bytes``, 128 MiB; 75% is Iceberg's
``min-file-size-bytes`` default) are rewritten, packed in offset order into files of about the
target size. In an hour still being written that is the newest run of them in which each
older file holds at most 1.5 times the rows of the newer ones together (:func:`_newest_run`),
once it counts ``krait.iceberg.compaction.min.input.files`` (5, Iceberg's default) files:
sizes then about double from the newest file back, like a binary counter, so an hour of 360
commits holds at most ~11 files and a row is rewritten ~3 times, not once per compaction as
when every small file of the hour is rewritten each time (~30 times). An hour that got no
new file for 15 minutes (closed) has all its small files rewritten once.
Rows keep their order: sorted by offset within a Kafka partition. When the inputs are
single-Kafka-partition files with disjoint offset ranges (the default spec) they are
streamed one file at a time (memory: one row group of the output); otherwise a bin of at most
the target size is sorted in memory. Files of different schema versions (a column added in
the middle of an hour) are rewritten apart, each keeping its schema. All the partitions compacted by one run go in **one
replace commit** (Iceberg's ``replace`` operation: same rows, other files), which:

- carries the ``krait.offset.<partition>`` properties of its parent (those
  :func:`tables.writer.snapshot_offsets` reads, so from the nearest ancestor that has them):
  once expiry removes the parent, the writer still finds its offsets in the compaction's own
  snapshot and does not append everything again;
- is made on a base snapshot and fails (``CommitFailedException``) if anything was committed
  since: a writer's append in between. It is then made again on the new current snapshot,
  with that snapshot's offsets, the rewritten files already written; if a file being
  compacted is no longer in the table (another compaction took it) pyiceberg refuses the
  commit (``ValidationException``) and the compaction is abandoned, its new files deleted.
  Nothing is lost or doubled: the replace removes exactly the files it read and adds files
  holding exactly their rows, on top of whatever the current snapshot holds;
- merges manifests as Iceberg's merge-append does (bins of 8 MiB), so the one manifest per
  writer commit does not pile up and plan times stay flat;
- is written with pyiceberg's own overwrite producer (``_OverwriteFiles``) told to name its
  snapshot ``replace``: pyiceberg 0.12 has no public rewrite API and its summary code accepts
  only append/overwrite/delete, and an ``overwrite`` would make incremental readers (Spark
  streaming from Iceberg) fail or re-read the rows. pyiceberg's commit retry stays off
  (``commit.retry.num-retries=0``, as the writer keeps it): a library retry would reuse the
  offsets of the first base and lose a writer's.

A table with delete files (row-level deletes by another engine) is not compacted, nor are
files of an older partition spec or another file format. A compaction whose table got a new
partition spec before its commit (``krait.iceberg.partition.spec`` changed) is abandoned:
its files are partitioned by the spec they were planned with.

**Snapshot expiry** (:func:`expire_snapshots`). Snapshots older than
``krait.iceberg.snapshot.retention.ms`` (1 hour; Iceberg's ``history.expire.max-snapshot-age-ms``
is 5 days, too many snapshots for a commit every 10 s: see below) are removed with pyiceberg's ``ExpireSnapshots`` (``table.maintenance.expire_snapshots()``), always
keeping the current snapshot and its parent (``min_snapshots``, 2) and the nearest ancestor
carrying Krait's offsets. Only the oldest part of the history goes (at most 1,000 snapshots a
run), so, the history being one line of appends and replaces, a file one of them used is still
used iff the oldest snapshot kept uses it: the manifest lists of the expired snapshots, their
manifests that the oldest kept snapshot does not list, and the data files live only in those
are deleted after the commit (pyiceberg's expiry deletes no file). A table whose history is not
one line (branches, tags, a rollback) is left alone.

**Orphan files** (:func:`delete_orphan_files`). A failed commit leaves the Parquet files pyiceberg
wrote for it (it deletes its own manifests but not the data), and a crash between writing and
committing leaves files too. Data files under the table's data location (listed with the
filesystem of the table's own FileIO, so on an ``s3://`` warehouse too) that no snapshot uses
and that are older than ``krait.iceberg.orphan.file.age.ms`` (Iceberg's ``remove_orphan_files``
default, 3 days: a commit in flight, even from a broker paused for a long time, never loses its
files) are deleted. "Used by a snapshot" is, on a one-line history: live in the oldest snapshot
kept or in the current one, or removed by a snapshot kept (read from the deleted entries of
the manifests that snapshot wrote). Old ``metadata.json`` files are pyiceberg's to delete: the
upkeep sets ``write.metadata.delete-after-commit.enabled`` on the table (Iceberg keeps the last
100), else every commit left one behind.

**Calling it.** Every ``krait.iceberg.upkeep.interval.ms`` (1 min), for each table this
broker writes (in a cluster, one broker per table is enough, e.g. the leader of its lowest
partition; two at once are safe, they only conflict)::

    report = await asyncio.to_thread(run_topic_upkeep, catalog, topic, namespace,
                                     settings=UpkeepSettings.from_config(broker.config),
                                     orphans=<an hour since this table's last orphan scan>)

It loads a ``Table`` of its own (the writer's is another thread's); the writer needs no
change: its next commit after a compaction fails once on the new snapshot and is made again.

Cost when there is nothing to do: reading the current snapshot's manifests (a few, merged)
and comparing timestamps; the orphan scan lists the data directory and, when some file is
older than the age, reads the manifests of the oldest and current snapshots and of the
replaces kept, so the caller runs it less often (``orphans=`` of :func:`run_upkeep`).

Measured (``tests/tables/test_upkeep.py::test_measure_scan_before_and_after``, run with
``KRAIT_UPKEEP_MEASURE=1``; a 2-core machine shared with three other test runs, load ~11, so
two runs are shown): a table of 360 appends of 1,000 rows each (one Kafka partition, one hour,
~10-byte keys, 100-byte values; 360 Parquet files of ~13 KB), read back whole (360,000 rows) by
pyiceberg ``scan().to_arrow()``, median of 3 scans:

    ====================  =========================  ============  ============
    table                 files                      scan, run 1   scan, run 2
    ====================  =========================  ============  ============
    before compaction     360 (13 KB each, 4.8 MB)   1.41 s        0.78 s
    after compaction      1 (2.4 MB)                 0.24 s        0.30 s
    the compaction        360 -> 1, one commit       2.98 s        3.95 s
    ====================  =========================  ============  ============

**Snapshot count, measured, and what it means for the retention.** pyiceberg 0.12 copies the
whole table metadata (every snapshot) several times per commit, and the metadata file grows
by ~850 bytes per snapshot. One writer append (``TableWriter.append``, 5 rows) on the machine
above took 0.27 s with 110 snapshots, 0.85 s with 410 and 1.8 s with 1,010 (~1.8 ms per
snapshot); through :class:`tables.writer.LeanTransaction` (no copy while nothing is staged) 0.07, 0.23 and
0.56 s. At one commit per 10 s, Iceberg's 5-day retention keeps ~43,000 snapshots: a ~37 MB
metadata file and a commit of about a minute, far over the interval. So the key's default is
one hour (~360 snapshots), not Iceberg's 5 days; time travel and incremental reads reach that
far back. A query that reads an old snapshot for longer than the retention may find files of
it deleted once a compaction replaced them and its snapshot expired.
"""

from __future__ import annotations

import logging
import posixpath
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.conversions import from_bytes
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, ValidationException
from pyiceberg.io.pyarrow import PyArrowFileIO, parquet_file_to_data_file
from pyiceberg.manifest import DataFile, FileFormat, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation, Snapshot, Summary, ancestors_of
from pyiceberg.table.update.snapshot import ExpireSnapshots, _ManifestMergeManager, _OverwriteFiles
from pyiceberg.types import IntegerType, LongType

from .catalog import DEFAULT_NAMESPACE, table_identifier
from .writer import OFFSET_PREFIX, RETRIES_PROPERTY, LeanTransaction, snapshot_offsets

__all__ = ["ORPHAN_SCAN_INTERVAL_MS", "UpkeepReport", "UpkeepSettings", "compact", "delete_orphan_files",
           "expire_snapshots", "run_topic_upkeep", "run_upkeep"]

log = logging.getLogger("krait.tables.upkeep")

MiB = 1 << 20
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
#: how often a caller should let :func:`run_upkeep` scan for orphans (``orphans=True``): the
#: scan reads more than the rest, and orphans only need to go eventually
ORPHAN_SCAN_INTERVAL_MS = HOUR_MS
#: the columns a table of any mode has and its rows are ordered by
SORT_COLUMNS = ("partition", "offset")
#: pyiceberg keeps the last 100 metadata.json files when this is on (Iceberg's default count)
DELETE_OLD_METADATA = {TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true"}


@dataclass(frozen=True)
class UpkeepSettings:
    """What the upkeep does; :meth:`from_config` reads the broker's ``krait.iceberg.*`` keys."""

    target_file_bytes: int = 128 * MiB
    min_input_files: int = 5
    #: an older file joins a compaction of the hour being written while it is at most this
    #: many times the rows of the newer files taken (see _newest_run)
    tier_ratio: float = 1.5
    #: a partition that got no new file for this long is compacted from 2 small files on
    quiet_ms: int = 15 * 60_000
    #: files below this share of the target are small (Iceberg's min-file-size-bytes default)
    small_file_ratio: float = 0.75
    #: Parquet bytes rewritten per run at most (a backlog is worked off over several runs)
    max_rewrite_bytes: int = 1 << 30
    snapshot_retention_ms: int = HOUR_MS
    #: the current snapshot and this many - 1 ancestors are never expired
    min_snapshots: int = 2
    #: snapshots expired per run at most (bounds the files read for it)
    max_expire: int = 1000
    orphan_age_ms: int = 3 * DAY_MS
    #: commits tried per compaction before it gives up (a writer commits every 10 s)
    max_attempts: int = 10

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> UpkeepSettings:
        """The settings of a broker config (``broker.config``, or any mapping of its keys)."""
        return cls(target_file_bytes=int(cfg["krait.iceberg.compaction.target.file.bytes"]),
                   min_input_files=int(cfg["krait.iceberg.compaction.min.input.files"]),
                   snapshot_retention_ms=int(cfg["krait.iceberg.snapshot.retention.ms"]),
                   orphan_age_ms=int(cfg["krait.iceberg.orphan.file.age.ms"]))


@dataclass
class UpkeepReport:
    """What one run did (all zero when there was nothing to do)."""

    partitions_compacted: int = 0
    files_rewritten: int = 0
    bytes_rewritten: int = 0
    files_written: int = 0
    bytes_written: int = 0
    #: compaction commits made again on a new base after a concurrent commit
    conflicts: int = 0
    #: why a compaction was given up (None: it committed, or there was none)
    abandoned: str | None = None
    snapshots_expired: int = 0
    #: manifest lists, manifests and data files deleted because only expired snapshots used them
    expired_files_deleted: int = 0
    orphans_deleted: int = 0
    orphan_bytes_deleted: int = 0
    #: steps left out and why (non-linear history, delete files, ...)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.files_rewritten or self.snapshots_expired or self.expired_files_deleted
                    or self.orphans_deleted)


def run_topic_upkeep(catalog: Catalog, topic: str, namespace: str = DEFAULT_NAMESPACE, *, now_ms: int | None = None,
                     settings: UpkeepSettings | None = None, orphans: bool = True) -> UpkeepReport | None:
    """:func:`run_upkeep` of a topic's table, loaded for it (not the writer's ``Table``, which
    another thread uses); None when the topic has no table yet."""
    try:
        table = catalog.load_table(table_identifier(topic, namespace))
    except NoSuchTableError:
        return None
    return run_upkeep(table, now_ms, settings, orphans=orphans)


def run_upkeep(table: Table, now_ms: int | None = None, settings: UpkeepSettings | None = None, *,
               orphans: bool = True) -> UpkeepReport:
    """Compact, expire and (``orphans``) delete orphan files of one table; blocking (run it on a
    worker thread). ``table`` is refreshed in place. Conflicts with concurrent commits are
    handled inside; other errors (catalog unreachable, I/O) propagate, leaving the table
    consistent (a file written and not committed is an orphan for a later run)."""
    started = time.monotonic()
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    settings = settings or UpkeepSettings()
    report = UpkeepReport()
    table.refresh()
    _ensure_properties(table, settings)
    compact(table, now_ms, settings, report)
    expire_snapshots(table, now_ms, settings, report)
    if orphans:
        delete_orphan_files(table, now_ms, settings, report)
    report.seconds = time.monotonic() - started
    return report


def _ensure_properties(table: Table, settings: UpkeepSettings) -> None:
    """Library commit retry off (see the module doc) and old metadata.json files deleted by
    pyiceberg; set by a commit of their own when missing (once per table)."""
    want = {**DELETE_OLD_METADATA, RETRIES_PROPERTY: "0"}
    for _ in range(settings.max_attempts):
        missing = {k: v for k, v in want.items() if table.properties.get(k) != v}
        if not missing:
            return
        try:
            table.transaction().set_properties(missing).commit_transaction()
        except CommitFailedException:
            table.refresh()
    raise CommitFailedException(f"{table.name()}: could not set {sorted(want)}")


# --- compaction --------------------------------------------------------------------------

class _ReplaceFiles(_OverwriteFiles):
    """pyiceberg's overwrite producer naming its snapshot ``replace`` (same rows, other files),
    with merge-append's manifest merging. pyiceberg's summary totals accept only
    append/overwrite/delete, and an overwrite's totals are a replace's, so they are computed
    as an overwrite's and the operation renamed."""

    def _summary(self, snapshot_properties: dict[str, str] = {}) -> Summary:  # noqa: B006 (the base's signature)
        self._operation = Operation.OVERWRITE
        try:
            summary = super()._summary(snapshot_properties)
        finally:
            self._operation = Operation.REPLACE
        return Summary(Operation.REPLACE, **summary.additional_properties)

    def _process_manifests(self, manifests: list[ManifestFile]) -> list[ManifestFile]:
        props = self._transaction.table_metadata.properties
        merger = _ManifestMergeManager(
            target_size_bytes=int(props.get(TableProperties.MANIFEST_TARGET_SIZE_BYTES,
                                            TableProperties.MANIFEST_TARGET_SIZE_BYTES_DEFAULT)),
            min_count_to_merge=int(props.get(TableProperties.MANIFEST_MIN_MERGE_COUNT,
                                             TableProperties.MANIFEST_MIN_MERGE_COUNT_DEFAULT)),
            merge_enabled=True, snapshot_producer=self)
        data = [m for m in manifests if m.content == ManifestContent.DATA]
        return merger.merge_manifests(data) + [m for m in manifests if m.content != ManifestContent.DATA]


@dataclass
class _Input:
    file: DataFile
    added_ms: int
    #: lower/upper bounds of the Kafka partition and offset columns (None: no statistics)
    part: tuple[int | None, int | None]
    offs: tuple[int | None, int | None]


def _bounds(f: DataFile, field_id: int | None, typ: Any) -> tuple[Any, Any]:
    if field_id is None:
        return None, None
    lo, hi = (f.lower_bounds or {}).get(field_id), (f.upper_bounds or {}).get(field_id)
    return (from_bytes(typ, lo) if lo is not None else None, from_bytes(typ, hi) if hi is not None else None)


def _field_id(table: Table, name: str) -> int | None:
    try:
        return table.schema().find_field(name).field_id
    except ValueError:
        return None


#: manifest path -> its entries: a manifest is never rewritten in place (its name is new each
#: time), so a run reads only the manifests committed since the last one
_ENTRIES: OrderedDict[tuple[str, bool], list[ManifestEntry]] = OrderedDict()
_ENTRIES_MAX = 4096
_ENTRIES_LOCK = threading.Lock()


def _entries(table: Table, m: ManifestFile, discard_deleted: bool = True) -> list[ManifestEntry]:
    key = (m.manifest_path, discard_deleted)
    with _ENTRIES_LOCK:
        hit = _ENTRIES.get(key)
        if hit is not None:
            _ENTRIES.move_to_end(key)
            return hit
    entries = m.fetch_manifest_entry(table.io, discard_deleted=discard_deleted)
    with _ENTRIES_LOCK:
        _ENTRIES[key] = entries
        while len(_ENTRIES) > _ENTRIES_MAX:
            _ENTRIES.popitem(last=False)
    return entries


def _live_entries(table: Table, snap: Snapshot) -> list[ManifestEntry] | None:
    """The live data entries of a snapshot; None when it has delete files."""
    entries: list[ManifestEntry] = []
    for m in snap.manifests(table.io):
        if m.content != ManifestContent.DATA:
            return None
        entries.extend(_entries(table, m))
    return entries


def _plan(table: Table, now_ms: int, settings: UpkeepSettings, report: UpkeepReport) -> list[list[_Input]]:
    """Bins of small files to rewrite, each one Iceberg partition's, in offset order."""
    snap = table.current_snapshot()
    if snap is None:
        return []
    entries = _live_entries(table, snap)
    if entries is None:
        report.skipped.append("compaction: the table has delete files")
        return []
    small_limit = int(settings.target_file_bytes * settings.small_file_ratio)
    spec_id = table.metadata.default_spec_id
    pid, oid = _field_id(table, SORT_COLUMNS[0]), _field_id(table, SORT_COLUMNS[1])
    added_ms: dict[int, int] = {}
    groups: dict[Any, list[_Input]] = {}
    newest: dict[Any, int] = {}
    for e in entries:
        f = e.data_file
        sid = e.snapshot_id
        if sid not in added_ms:
            s = table.snapshot_by_id(sid) if sid is not None else None
            added_ms[sid] = s.timestamp_ms if s is not None else 0  # expired: old
        key = (f.spec_id, f.partition)
        newest[key] = max(newest.get(key, 0), added_ms[sid])
        if f.spec_id != spec_id or f.file_format != FileFormat.PARQUET or f.file_size_in_bytes >= small_limit:
            continue
        groups.setdefault(key, []).append(_Input(f, added_ms[sid], _bounds(f, pid, IntegerType()),
                                                 _bounds(f, oid, LongType())))
    ready = []
    for key, files in groups.items():
        files.sort(key=_offset_order)
        if len(files) >= 2 and newest[key] <= now_ms - settings.quiet_ms:
            ready.append((key, files))  # a closed hour: every small file, once
            continue
        run = _newest_run(files, settings.tier_ratio)
        if len(run) >= settings.min_input_files:
            ready.append((key, run))
    # the partitions with the most small files first, within the bytes of one run
    ready.sort(key=lambda kv: -len(kv[1]))
    bins: list[list[_Input]] = []
    budget = settings.max_rewrite_bytes
    for _key, files in ready:
        cur: list[_Input] = []
        size = 0
        for i in files + [None]:  # type: ignore[list-item]
            if i is not None and (not cur or size + i.file.file_size_in_bytes <= settings.target_file_bytes):
                cur.append(i)
                size += i.file.file_size_in_bytes
                continue
            if len(cur) >= 2 and size <= budget:  # one file alone is not worth rewriting
                bins.append(cur)
                budget -= size
            cur, size = ([i], i.file.file_size_in_bytes) if i is not None else ([], 0)
        if budget <= 0:
            break
    return bins


def _offset_order(i: _Input) -> tuple[int, int, str]:
    return (i.part[0] if i.part[0] is not None else -1, i.offs[0] if i.offs[0] is not None else -1,
            i.file.file_path)


def _newest_run(files: list[_Input], ratio: float) -> list[_Input]:
    """The files an hour still being written compacts now (``files`` in offset order): the
    newest file, then each next-older one while it holds at most ``ratio`` times the rows taken
    so far. A file compacted before is taken again only once about as many rows came after
    it, so sizes about double from the newest file back (a binary counter). Simulated for 360
    commits of +-20% rows compacted every 6 commits: ratio 1.5 rewrites a row 3.1 times and
    the hour never holds more than 11 files; 1.0 lets one slightly larger commit stop the run
    (up to 45 files), 2.0 rewrites 4.2 times; rewriting every small file each time rewrites
    a row ~30 times."""
    run: list[_Input] = []
    taken = 0
    for i in reversed(files):
        # rows, not bytes: a small commit's file is mostly Parquet footer, so a compacted
        # file is far smaller than its inputs together and bytes would take it every time
        rows = i.file.record_count
        if run and rows > ratio * taken:
            break
        run.append(i)
        taken += rows
    run.reverse()
    return run


def _streamable(b: list[_Input], has_sort: bool) -> bool:
    """True when concatenating the files in order keeps rows sorted: each holds one Kafka
    partition, the same one, and their offset ranges follow each other."""
    if not has_sort:
        return True  # nothing to keep in order but the files' own order
    parts = {i.part for i in b}
    if len(parts) != 1 or None in next(iter(parts)) or b[0].part[0] != b[0].part[1]:
        return False
    prev = None
    for i in b:
        lo, hi = i.offs
        if lo is None or hi is None or (prev is not None and lo <= prev):
            return False
        prev = hi
    return True


def _read(table: Table, path: str) -> pa.Table:
    with table.io.new_input(path).open() as f:
        return pq.read_table(f)


def _schema_key(schema: pa.Schema) -> list[Any]:
    # field ids live in the fields' metadata: files of other schema versions do not mix
    return [(f.name, str(f.type), f.nullable, f.metadata) for f in schema]


class _ParquetOut:
    """One output file, written a row group at a time with the table's Parquet settings."""

    def __init__(self, table: Table, path: str, schema: pa.Schema) -> None:
        props = table.properties
        codec = props.get(TableProperties.PARQUET_COMPRESSION, TableProperties.PARQUET_COMPRESSION_DEFAULT)
        level = props.get(TableProperties.PARQUET_COMPRESSION_LEVEL)
        self.row_group_rows = int(props.get(TableProperties.PARQUET_ROW_GROUP_LIMIT,
                                            TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT))
        self.path = path
        self._stream = table.io.new_output(path).create(overwrite=False)
        self._writer = pq.ParquetWriter(self._stream, schema, compression="none" if codec == "uncompressed" else codec,
                                        compression_level=int(level) if level is not None else None)
        self._pending: list[pa.Table] = []
        self._rows = self._bytes = 0

    def add(self, rows: pa.Table) -> None:
        self._pending.append(rows)
        self._rows += rows.num_rows
        self._bytes += rows.nbytes
        # row groups of ~1 M rows or 128 MiB in memory, not one per input file
        if self._rows >= self.row_group_rows or self._bytes >= 128 * MiB:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(pa.concat_tables(self._pending), row_group_size=self.row_group_rows)
        self._pending, self._rows, self._bytes = [], 0, 0

    def close(self) -> None:
        self._flush()
        self._writer.close()
        self._stream.close()


def _sorted(rows: pa.Table, has_sort: bool) -> pa.Table:
    if not has_sort or rows.num_rows < 2:
        return rows
    p, o = rows[SORT_COLUMNS[0]], rows[SORT_COLUMNS[1]]
    if pc.all(pc.equal(p, p[0])).as_py() and pc.all(pc.greater(o[1:], o[:-1])).as_py():
        return rows  # as the writer wrote it
    return rows.sort_by([(SORT_COLUMNS[0], "ascending"), (SORT_COLUMNS[1], "ascending")])


def _schema_runs(table: Table, b: list[_Input]) -> list[tuple[pa.Schema, list[_Input]]]:
    """The bin cut where the files' schema changes (a schema evolution in the middle of an
    hour): files of one schema version go together, each run keeps its own."""
    runs: list[tuple[pa.Schema, list[_Input]]] = []
    for i in b:
        with table.io.new_input(i.file.file_path).open() as f:
            schema = pq.read_schema(f)
        if runs and _schema_key(runs[-1][0]) == _schema_key(schema):
            runs[-1][1].append(i)
        else:
            runs.append((schema, [i]))
    return runs


def _rewrite(table: Table, schema: pa.Schema, b: list[_Input], n: int) -> DataFile:
    """One new file holding the rows of the files of ``b`` (one schema), next to them."""
    has_sort = all(_field_id(table, c) is not None for c in SORT_COLUMNS)
    path = posixpath.join(posixpath.dirname(b[0].file.file_path), f"compacted-{uuid.uuid4()}-{n}.parquet")
    out = _ParquetOut(table, path, schema)
    try:
        if _streamable(b, has_sort):
            for i in b:
                out.add(_sorted(_read(table, i.file.file_path), has_sort))
        else:
            out.add(_sorted(pa.concat_tables([_read(table, i.file.file_path) for i in b]), True))
        out.close()
        new = parquet_file_to_data_file(table.io, table.metadata, path)
        if new.partition != b[0].file.partition or new.record_count != sum(i.file.record_count for i in b):
            raise ValueError(f"compacted file {path} does not match its inputs")  # never expected
        return new
    except BaseException:
        _delete(table, [path])
        raise


def compact(table: Table, now_ms: int, settings: UpkeepSettings, report: UpkeepReport | None = None, *,
            before_commit: Callable[[int], None] | None = None) -> UpkeepReport:
    """Rewrite the small files of the partitions that need it in one replace commit (see the
    module doc). ``before_commit(attempt)`` is called before each commit attempt (tests race a
    writer there)."""
    report = report if report is not None else UpkeepReport()
    bins = _plan(table, now_ms, settings, report)
    if not bins:
        return report
    written: list[DataFile] = []
    removed: list[DataFile] = []
    try:
        for b in bins:
            for schema, run in _schema_runs(table, b):
                if len(run) >= 2:
                    written.append(_rewrite(table, schema, run, len(written)))
                    removed.extend(i.file for i in run)
    except BaseException:
        _delete(table, [f.file_path for f in written])
        raise
    if not written:
        return report
    # an exception here leaves the new files alone: the commit's outcome may be unknown, and
    # the orphan clean-up deletes them if it did not land
    committed = _commit_replace(table, removed, written, settings, report, before_commit)
    if not committed:  # it certainly did not land: nothing refers to the new files
        _delete(table, [f.file_path for f in written])
    if committed:
        report.partitions_compacted += len({(f.spec_id, f.partition) for f in removed})
        report.files_rewritten += len(removed)
        report.bytes_rewritten += sum(f.file_size_in_bytes for f in removed)
        report.files_written += len(written)
        report.bytes_written += sum(f.file_size_in_bytes for f in written)
    return report


def _commit_replace(table: Table, removed: list[DataFile], added: list[DataFile], settings: UpkeepSettings,
                    report: UpkeepReport, before_commit: Callable[[int], None] | None) -> bool:
    """True once committed; False with ``report.abandoned`` set when it certainly was not."""
    for attempt in range(settings.max_attempts):
        if any(f.spec_id != table.metadata.default_spec_id for f in removed):
            # the new files are partitioned as their inputs (the spec current at planning) and
            # pyiceberg lists added files in a manifest of the table's current spec: after a
            # writer evolved the spec they would be misread
            report.abandoned = "the table's partition spec changed meanwhile"
            return False
        if table.properties.get(RETRIES_PROPERTY) != "0":
            _ensure_properties(table, settings)
        # the offsets the table holds now: the new snapshot says the same (see the module doc)
        props = {f"{OFFSET_PREFIX}{p}": str(o) for p, o in sorted(snapshot_offsets(table).items())}
        tx = LeanTransaction(table)
        producer = _ReplaceFiles(operation=Operation.REPLACE, transaction=tx, io=table.io, snapshot_properties=props,
                                 branch=MAIN_BRANCH)
        for f in removed:
            producer.delete_data_file(f)
        for f in added:
            producer.append_data_file(f)
        try:
            producer.commit()  # stages; refuses (ValidationException) a file no longer in the table
            if before_commit is not None:
                before_commit(attempt)
            tx.commit_transaction()
            return True
        except ValidationException as e:
            report.abandoned = f"a file being compacted left the table meanwhile ({e})"
            return False
        except CommitFailedException:
            report.conflicts += 1
            table.refresh()
    report.abandoned = f"{settings.max_attempts} commits failed on concurrent commits"
    return False


# --- snapshot expiry ---------------------------------------------------------------------

def _linear_history(table: Table) -> list[Snapshot] | None:
    """The snapshots newest first when they form one line from the current one (no branch,
    tag or stray snapshot); None otherwise."""
    cur = table.current_snapshot()
    if cur is None:
        return []
    chain = list(ancestors_of(cur, table.metadata))
    if len(chain) != len(table.metadata.snapshots) or set(table.metadata.refs) - {MAIN_BRANCH}:
        return None
    return chain


def _has_offsets(s: Snapshot) -> bool:
    props = s.summary.additional_properties if s.summary is not None else {}
    return any(k.startswith(OFFSET_PREFIX) for k in props)


def _live_paths(table: Table, manifests: Iterable[ManifestFile]) -> set[str]:
    return {e.data_file.file_path for m in manifests for e in _entries(table, m)}


def expire_snapshots(table: Table, now_ms: int, settings: UpkeepSettings,
                     report: UpkeepReport | None = None) -> UpkeepReport:
    """Expire the snapshots older than the retention and delete the files only they used
    (see the module doc)."""
    report = report if report is not None else UpkeepReport()
    chain = _linear_history(table)
    if chain is None:
        report.skipped.append("expiry: the table's history is not one line (branches, tags or a rollback)")
        return report
    cutoff = now_ms - settings.snapshot_retention_ms
    keep = max(settings.min_snapshots, 1)
    for i, s in enumerate(chain):
        if s.timestamp_ms >= cutoff:
            keep = max(keep, i + 1)  # everything newer than the oldest young snapshot stays
    offsets_at = next((i for i, s in enumerate(chain) if _has_offsets(s)), None)
    if offsets_at is not None:
        keep = max(keep, offsets_at + 1)  # where snapshot_offsets reads the table's offsets
    if keep >= len(chain):
        return report
    expired = chain[keep:][-settings.max_expire:]  # the oldest ones: the rest stays one line
    oldest_kept = chain[len(chain) - len(expired) - 1]
    # what the expired snapshots used and the oldest kept does not (read before they go)
    kept_manifests = oldest_kept.manifests(table.io)
    kept_paths = {m.manifest_path for m in kept_manifests}
    dropped: dict[str, ManifestFile] = {}
    lists = []
    for s in expired:
        lists.append(s.manifest_list)
        for m in s.manifests(table.io):
            if m.manifest_path not in kept_paths:
                dropped.setdefault(m.manifest_path, m)
    data: set[str] = set()
    if dropped:
        data = _live_paths(table, dropped.values()) - _live_paths(table, kept_manifests)
    ids = [s.snapshot_id for s in expired]
    try:
        # table.maintenance.expire_snapshots() with a transaction that does not copy the
        # metadata for each id it checks
        ExpireSnapshots(transaction=LeanTransaction(table, autocommit=True)).by_ids(ids).commit()
    except (CommitFailedException, ValueError) as e:
        # a concurrent commit or another upkeep expiring them too: the next run sees anew
        report.skipped.append(f"expiry: {type(e).__name__}: {e}")
        table.refresh()
        return report
    table.refresh()
    report.snapshots_expired += len(ids)
    report.expired_files_deleted += _delete(table, [*sorted(data), *dropped, *lists])
    return report


# --- orphan files --------------------------------------------------------------------------

def _strip_scheme(path: str) -> str:
    return path.split("://", 1)[1] if "://" in path else path


def _data_location(table: Table) -> str:
    loc = table.properties.get(TableProperties.WRITE_DATA_PATH)
    return loc or table.location().rstrip("/") + "/data"


def _referenced_data_files(table: Table) -> set[str] | None:
    """The data files some snapshot uses (paths without scheme); None when the history is not
    one line. On one line a file is live over consecutive snapshots, so it is live in the
    oldest snapshot or the current one, or some snapshot in between removed it."""
    chain = _linear_history(table)
    if chain is None:
        return None
    if not chain:
        return set()
    out = _live_paths(table, chain[0].manifests(table.io)) | _live_paths(table, chain[-1].manifests(table.io))
    for s in chain[:-1]:
        summary = s.summary.additional_properties if s.summary is not None else {}
        op = s.summary.operation if s.summary is not None else None
        if op == Operation.APPEND and not int(summary.get("deleted-data-files", "0") or 0):
            continue
        for m in s.manifests(table.io):
            if m.added_snapshot_id != s.snapshot_id:
                continue
            for e in _entries(table, m, discard_deleted=False):
                if e.status == ManifestEntryStatus.DELETED and e.snapshot_id == s.snapshot_id:
                    out.add(e.data_file.file_path)
    return {_strip_scheme(p) for p in out}


def _data_filesystem(table: Table) -> tuple[pafs.FileSystem, str] | None:
    """The pyarrow filesystem of the table's data location and the location's path in it.
    The table's own FileIO's when it is pyarrow's (pyiceberg's default): built from the
    catalog's properties (``s3.endpoint``, ``s3.region``, credentials), so the scan lists the
    store the writer wrote to; ``FileSystem.from_uri`` would ignore them. Another FileIO
    (``py-io-impl``, e.g. fsspec's) has none to give: a local location is listed with
    pyarrow's local filesystem, a remote one is not listed (None)."""
    location = _data_location(table)
    io = table.io
    if isinstance(io, PyArrowFileIO):
        scheme, netloc, path = PyArrowFileIO.parse_location(location, io.properties)
        return io.fs_by_scheme(scheme, netloc), path
    if "://" not in location or location.startswith("file:"):
        return pafs.FileSystem.from_uri(location if "://" in location else posixpath.abspath(location))
    return None


def delete_orphan_files(table: Table, now_ms: int, settings: UpkeepSettings,
                        report: UpkeepReport | None = None) -> UpkeepReport:
    """Delete the data files no snapshot uses that are older than the orphan age."""
    report = report if report is not None else UpkeepReport()
    listing = _data_filesystem(table)
    if listing is None:
        reason = (f"orphans: {type(table.io).__name__} gives no pyarrow filesystem to list "
                  f"{_data_location(table)} with")
        log.info("Iceberg table %s: orphan scan skipped: %s", table.name(), reason)
        report.skipped.append(reason)
        return report
    fs, root = listing
    # listed before the table is read: a file committed after the listing is young anyway
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    limit_ns = (now_ms - settings.orphan_age_ms) * 1_000_000
    old = [i for i in infos if i.type == pafs.FileType.File and i.mtime_ns is not None and i.mtime_ns < limit_ns]
    if not old:
        return report
    table.refresh()
    used = _referenced_data_files(table)
    if used is None:
        report.skipped.append("orphans: the table's history is not one line (branches, tags or a rollback)")
        return report
    for info in old:
        if _strip_scheme(info.path) in used:
            continue
        try:
            fs.delete_file(info.path)
        except FileNotFoundError:
            continue
        report.orphans_deleted += 1
        report.orphan_bytes_deleted += info.size or 0
    return report


def _delete(table: Table, paths: Iterable[str]) -> int:
    n = 0
    for p in paths:
        try:
            table.io.delete(p)
            n += 1
        except FileNotFoundError:
            pass
        except OSError:
            log.warning("could not delete %s (an orphan for a later upkeep)", p, exc_info=True)
    return n
