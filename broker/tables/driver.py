"""Keeps the topics whose ``krait.iceberg.mode`` is not ``disabled`` as Iceberg tables
(``tables/``): every ``krait.iceberg.commit.interval.ms`` this broker reads, for each such partition it
leads, the committed records the table does not hold yet (from the table's offsets up to
the last stable offset, aborted transactions left out) and appends them, all of a topic's
partitions in one snapshot. The offsets live in the snapshot itself, so a crash or a leader
change resumes exactly where the table ends: no gap, no record twice (the writer drops rows
another broker committed meanwhile).

The log is read on the event loop (storage is synchronous and not thread-safe: one pread
per partition and commit); decoding and the pyiceberg commit, which block, run on a worker
thread, one commit at a time.

The mode and the partition spec (``krait.iceberg.partition.spec``) are read from each
topic's config at every commit, so a change (AlterConfigs, IncrementalAlterConfigs,
``kafka-configs --alter``) takes effect at the next commit, as Kafka's config changes do;
what it does to an existing table is :mod:`tables.topic_table`'s and
:mod:`tables.writer`'s module docs. The decoded modes look schemas up in this broker's
own registry replica (:mod:`broker.tables.registry_source`): the registry service of the
registry listener when there is one, else one the driver keeps for reading only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING, Any

from storage.iceberg_spec import DEFAULT_PARTITION_SPEC
from tables.modes import DECODED_MODES, DISABLED, IcebergMode, parse_mode_options

from ..schema_registry.service import SchemaRegistryService

if TYPE_CHECKING:
    from tables.topic_table import TopicTable
    from tables.upkeep import UpkeepSettings

    from ..broker import Broker
    from .registry_source import RegistrySource

log = logging.getLogger("krait.tables")


@functools.cache
def _lib() -> Any:
    """The table code: pyiceberg, pyarrow and the value decoders, imported when the first
    table topic needs them (~0.8 s of imports measured at every broker start otherwise, and
    most brokers, and most of the test suite's hundreds of broker starts, have no table
    topic); built once."""
    import types

    from tables import catalog, decoded, dlq, records, topic_table, upkeep, writer

    from . import registry_source

    return types.SimpleNamespace(catalog=catalog, decoded=decoded, dlq=dlq, records=records,
                                 topic_table=topic_table, upkeep=upkeep, writer=writer,
                                 registry_source=registry_source)

#: bytes of log read per partition and commit (the rest goes in the next commit)
MAX_BYTES_PER_COMMIT = 32 << 20


class TableTopics:
    def __init__(self, broker: Broker) -> None:
        cfg = broker.config
        self.broker = broker
        self.interval_s = cfg["krait.iceberg.commit.interval.ms"] / 1000
        self.catalog_uri = cfg["krait.iceberg.catalog.uri"] or None
        self.warehouse = cfg["krait.iceberg.warehouse"] or None
        self.namespace = cfg["krait.iceberg.namespace"]
        self._catalog: Any = None
        self._writers: dict[str, TopicTable] = {}
        self._task: asyncio.Task | None = None
        self._source: RegistrySource | None = None
        #: topic -> partition -> next offset its table holds, as last read or written here
        #: (broker/tables/lag.py reports the lag from it)
        self._known: dict[str, dict[int, int]] = {}
        self.upkeep_interval_s = cfg["krait.iceberg.upkeep.interval.ms"] / 1000
        self._upkeep_settings: UpkeepSettings | None = None
        self._next_upkeep = time.monotonic() + self.upkeep_interval_s
        #: table name -> epoch ms of its last orphan scan here
        self._orphan_scans: dict[str, int] = {}

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    def table_topics(self) -> dict[str, tuple[IcebergMode, list[int]]]:
        """topic -> (its mode and options, the partitions of it this broker leads), for
        topics kept as tables: the mode as the topic's config says now."""
        out: dict[str, tuple[IcebergMode, list[int]]] = {}
        for (topic, p), part in self.broker.replicas.partitions.items():
            if not part.is_leader or part.log.offline:
                continue
            try:
                mode = parse_mode_options(part.log.config.krait_iceberg_mode)
            except ValueError:
                continue
            if mode.mode != DISABLED:
                out.setdefault(topic, (mode, []))[1].append(p)
        return out

    def known_offsets(self, topic: str) -> dict[int, int]:
        """partition -> next offset ``topic``'s table holds, as this broker last saw it
        committed (empty before its first commit here)."""
        return self._known.get(topic, {})

    def source(self) -> RegistrySource:
        """The schema lookup over this broker's registry replica."""
        if self._source is None:
            listener = getattr(self.broker, "schema_registry", None)
            service = listener.service if listener is not None else SchemaRegistryService(self.broker)
            self._source = _lib().registry_source.RegistrySource(service)
        return self._source

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            topics = sorted(self.table_topics().items())
            for topic, (mode, partitions) in topics:
                try:
                    await self.sync(topic, sorted(partitions), mode)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("appending to the Iceberg table of %s failed (retried next commit)", topic)
            if time.monotonic() >= self._next_upkeep:
                self._next_upkeep = time.monotonic() + self.upkeep_interval_s
                # one broker per table is enough: the leader of partition 0 (two at once would
                # only conflict); after the commits, so never beside this broker's own commit
                for topic, (_mode, partitions) in topics:
                    if 0 in partitions and self._catalog is not None:
                        for name in (topic, _lib().dlq.dlq_topic(topic)):
                            await self.upkeep(name)

    async def upkeep(self, name: str) -> None:
        """Compaction, snapshot expiry and (hourly) the orphan scan of one table
        (:mod:`tables.upkeep`), on a worker thread; failures are logged and retried at the
        next upkeep."""
        upkeep = _lib().upkeep
        if self._upkeep_settings is None:
            self._upkeep_settings = upkeep.UpkeepSettings.from_config(self.broker.config)
        now_ms = int(time.time() * 1000)
        orphans = now_ms - self._orphan_scans.get(name, 0) >= upkeep.ORPHAN_SCAN_INTERVAL_MS
        try:
            report = await asyncio.to_thread(upkeep.run_topic_upkeep, self._catalog, name, self.namespace,
                                             settings=self._upkeep_settings, orphans=orphans)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the upkeep of the Iceberg table of %s failed (retried at the next upkeep)", name)
            return
        if report is None:
            return
        if orphans:
            self._orphan_scans[name] = now_ms
        if report:
            log.info("Iceberg table of %s: %d files (%d bytes) compacted into %d, %d snapshots expired, %d files "
                     "of expired snapshots and %d orphan files deleted, in %.2f s", name, report.files_rewritten,
                     report.bytes_rewritten, report.files_written, report.snapshots_expired,
                     report.expired_files_deleted, report.orphans_deleted, report.seconds)
        if report.abandoned:
            log.info("Iceberg table of %s: a compaction was given up: %s", name, report.abandoned)

    def _writer(self, topic: str, mode: str, source: RegistrySource, spec: str) -> TopicTable:
        if self._catalog is None:
            self._catalog = _lib().catalog.open_catalog(self.broker.log_dirs[0], catalog_uri=self.catalog_uri,
                                         warehouse=self.warehouse)
        writer = self._writers.get(topic)
        if writer is None:
            lib = _lib()
            writer = self._writers[topic] = lib.topic_table.TopicTable(
                self._catalog, topic, source, mode=mode, namespace=self.namespace, spec=spec,
                snapshot_properties={lib.writer.WRITER_PROPERTY: str(self.broker.node_id)})
        return writer

    def partition_spec(self, topic: str, partitions: list[int]) -> str:
        """``topic``'s ``krait.iceberg.partition.spec`` as its config says now (a topic config:
        every partition's log has the same)."""
        for p in partitions:
            part = self.broker.replicas.partitions.get((topic, p))
            if part is not None:
                return part.log.config.krait_iceberg_partition_spec
        return DEFAULT_PARTITION_SPEC

    async def sync(self, topic: str, partitions: list[int], options: IcebergMode) -> None:
        """One commit of ``topic``'s led ``partitions`` in the mode ``options`` name: what the
        table lacks, up to the LSO."""
        mode = options.mode
        source = self.source()
        if mode in DECODED_MODES:
            if not source.service.holds_replica():
                # no local _schemas replica to decode with (a cluster larger than its
                # replication factor): leave the topic to wait rather than send every
                # record to the DLQ
                log.warning("%s: no replica of the schema registry's topic on this broker: the decoded table "
                            "waits", topic)
                return
            # on the event loop: it reads _schemas
            source.prepare([options.subject or _lib().decoded.value_subject(topic)])
        spec = self.partition_spec(topic, partitions)
        writer = await asyncio.to_thread(self._writer, topic, mode, source, spec)
        committed = await asyncio.to_thread(writer.committed_offsets)
        self._known[topic] = dict(committed)
        work = {}
        for p in partitions:
            part = self.broker.replicas.partitions.get((topic, p))
            if part is None or not part.is_leader or part.log.offline:
                continue
            plog = part.log
            start = committed.get(p, plog.log_start_offset)
            if start < plog.log_start_offset:
                log.warning("%s-%d: offsets %d..%d were deleted before the table got them", topic, p, start,
                            plog.log_start_offset - 1)
                start = plog.log_start_offset
            end = min(plog.last_stable_offset, plog.high_watermark)
            if start >= end:
                continue
            region = plog.read(start, MAX_BYTES_PER_COMMIT, max_offset=end)
            if region is None:
                continue
            work[p] = (region.read(), plog.collect_aborted_transactions(start, end), start, end)
        if not work:
            return
        written = await asyncio.to_thread(self._append, writer, work, options, spec)
        if written:
            self._known[topic] = dict(written)

    @staticmethod
    def _append(writer: TopicTable, work: dict[int, tuple[bytes, list, int, int]], options: IcebergMode,
                spec: str) -> dict[int, int] | None:
        batches = {}
        for p, (buf, aborted, start, end) in work.items():
            rows = _lib().records.region_to_arrow(buf, p, aborted=aborted, start_offset=start, end_offset=end)
            batches[p] = (rows.table, rows.next_offset)
        return writer.append(batches, options.mode, spec, subject=options.subject,
                             protobuf_name=options.protobuf_name)
