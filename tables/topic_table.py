"""One commit of a topic's table in the topic's current mode: ``key_value`` rows as they
are, or (decoded modes) the values decoded by :mod:`tables.decoded`, with the records that
do not decode written to the dead-letter table ``<topic>~dlq`` (:mod:`tables.dlq`).

**Exactly once across the two tables.** A commit of a region covers ``[start, next)`` of
each partition, ``start`` being the main table's ``krait.offset.<p>``. The DLQ table is
committed *first*, its snapshot summary carrying its own ``krait.offset.<p>`` = ``next``
for the partitions it has rows of; then the main table, with ``next`` for every partition.
A crash between the two leaves the main table at ``start``: the region is read and decoded
again, and the DLQ writer drops every DLQ row below the DLQ table's own offset of its
partition (:class:`tables.writer.TableWriter` drops rows below a table's offsets anyway),
so each DLQ row is appended once, and the main rows, never committed, are appended now. A
crash before the DLQ commit loses nothing (neither table moved); after the main commit,
nothing is redone. Resumption always follows the main table's offsets; the DLQ table's
only filter. This holds while decoding a record gives the same outcome both times, which it
does for a given record, schema id and table schema; it could differ only if, between the
crash and the retry, the registry lost the record's schema (a hard delete) or another
broker made the table's schema clash with it, and then that record could be in both tables
or in neither.

**Mode changes** (the mode is read from the topic config at every commit, so a change takes
effect at the next commit, as Kafka config changes do):

- ``disabled``: nothing is written; the table, its DLQ table and their offsets stay. Set a
  mode again and the table resumes from its offsets: records produced meanwhile are added,
  if the log still has them;
- ``key_value`` -> a decoded mode: the table gains the decoded columns (null in the earlier
  rows) and keeps filling its ``value`` column;
- a decoded mode -> ``key_value``: the table gains a ``value`` column if it has none (null
  in the earlier rows); the decoded columns stay, null in the new rows;
- between the two decoded modes: the same table; only the schema each value is decoded
  with changes.

The partition spec (``krait.iceberg.partition.spec``) is read at every commit too: the
main table's spec follows it (:class:`tables.writer.TableWriter`). The DLQ table keeps the
default spec: its columns are the ``key_value`` layout's, which the topic's spec, naming
decoded fields, need not fit.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyiceberg.catalog import Catalog

from .catalog import DEFAULT_NAMESPACE
from .decoded import DEFAULT_GRACE_S, SchemaSource, ValueDecoder, base_schema
from .dlq import dlq_schema, dlq_topic
from .layout import DEFAULT_PARTITION_SPEC, key_value_schema
from .modes import DECODED_MODES, KEY_VALUE
from .writer import TableWriter

__all__ = ["TopicTable"]


class TopicTable:
    """A topic's table (created in the mode of its first commit) and, once a record has
    gone there, its DLQ table."""

    def __init__(self, catalog: Catalog, topic: str, source: SchemaSource, *, mode: str,
                 namespace: str = DEFAULT_NAMESPACE, spec: str = DEFAULT_PARTITION_SPEC,
                 snapshot_properties: Mapping[str, str] | None = None, grace_s: float = DEFAULT_GRACE_S) -> None:
        self.catalog = catalog
        self.topic = topic
        self.namespace = namespace
        self.spec = spec
        self.snapshot_properties = dict(snapshot_properties or {})
        self.decoder = ValueDecoder(topic, source, grace_s=grace_s)
        self.main = TableWriter(catalog, topic, namespace=namespace, spec=spec,
                                snapshot_properties=self.snapshot_properties,
                                schema=base_schema() if mode in DECODED_MODES else key_value_schema())
        self._dlq: TableWriter | None = None

    @property
    def dlq(self) -> TableWriter:
        if self._dlq is None:
            self._dlq = TableWriter(self.catalog, self.topic, namespace=self.namespace, spec=DEFAULT_PARTITION_SPEC,
                                    snapshot_properties=self.snapshot_properties, schema=dlq_schema(),
                                    name=dlq_topic(self.topic))
        return self._dlq

    def committed_offsets(self) -> dict[int, int]:
        """partition -> next offset of the main table (where the next region starts)."""
        return self.main.committed_offsets()

    def append(self, batches: Mapping[int, tuple[pa.Table, int]], mode: str,
               spec: str | None = None, *, subject: str | None = None,
               protobuf_name: str | None = None) -> dict[int, int] | None:
        """Commit each partition's ``key_value`` rows (``partition -> (rows, next offset)``)
        in ``mode``: the DLQ table first, then the main table (see the module doc), the main
        table with the partition spec ``spec`` (None: as before). ``subject`` and
        ``protobuf_name``: ``value_schema_latest``'s options (tables.modes). The main table's
        new offsets, or None when it had nothing new."""
        if spec is not None:
            self.spec = self.main.spec = spec
        if mode == KEY_VALUE:
            return self.main.append(batches, schema=key_value_schema())
        if mode not in DECODED_MODES:
            raise ValueError(f"no table is written in mode {mode!r}")
        schema = self.main.table.schema()
        evolve = None
        main: dict[int, tuple[pa.Table, int]] = {}
        dlq: dict[int, tuple[pa.Table, int]] = {}
        for p, (rows, next_offset) in sorted(batches.items()):
            got = self.decoder.decode(rows, schema, mode, subject=subject, protobuf_name=protobuf_name)
            if got.hold is not None:
                next_offset = got.hold  # the rest of the region next commit
            if got.schema is not None:
                schema = evolve = got.schema
            main[p] = (got.rows, next_offset)
            if got.dlq.num_rows:
                dlq[p] = (got.dlq, next_offset)
        if dlq:
            self.dlq.refresh()  # its offsets as committed now (another broker may have written)
            self.dlq.append(dlq)
        return self.main.append(main, schema=evolve)
