"""Exactly-once appends of a topic's rows to its Iceberg table.

The table's current snapshot says what the table holds: its summary carries, for every
Kafka partition written so far, ``krait.offset.<partition>`` = the next offset after the
rows of that partition in the table. A snapshot is written by one append that adds the rows
of one or more partitions *and* sets those offsets (the others copied unchanged), in one
atomic catalog commit. So:

- after a crash, a restart or a leadership change, the writer resumes each partition at
  :meth:`TableWriter.committed_offsets` (the log is read again from there): no gap, and no
  row twice, since rows below those offsets are never appended again;
- brokers writing different partitions of one table commit concurrently through the
  catalog's optimistic concurrency: a commit based on a snapshot that is no longer current
  fails (CommitFailedException); the writer then reloads the table, re-reads the offsets,
  drops the rows now at or below a partition's committed offset (another writer took them:
  a leadership change) and tries again with the new offsets of everybody else.

A failed attempt leaves its Parquet files unreferenced (pyiceberg wrote them before the
commit): the orphan-file clean-up of the table's upkeep removes them.

pyiceberg's own commit retry (table property ``commit.retry.num-retries``, 4 by default)
would re-apply a failed append on top of the other writer's snapshot with the offsets
computed before it, losing that writer's offsets: the writer's tables set it to 0, and the
writer retries itself.

The table's schema is whatever it has grown to: a writer is created with the schema a new
table starts with (``key_value`` by default, :mod:`tables.decoded` and :mod:`tables.dlq`
give theirs), and :meth:`TableWriter.append` takes the columns the rows need: missing ones
are added (pyiceberg's ``union_by_name``, optional columns with new ids) in the same commit
as the rows. Rows are matched to the table's columns by name; a column they lack is null.

Snapshots written by something else (a compaction that rewrites files, which keeps the
table's contents) may lack the properties: the offsets are those of the nearest ancestor
that has them.

The partition spec is the writer's ``spec`` (the topic config ``krait.iceberg.partition.spec``):
a new table is created with it, and before each append a table whose spec differs has it
evolved (pyiceberg's ``update_spec``: the fields no longer named removed, the new ones
added) in a commit of its own, so the append's files use the new spec and the older files
keep theirs (Iceberg reads a table of mixed specs). A spec the table cannot take (a column
it does not have, a transform the column's type does not allow) is logged once and the
table keeps its spec: a spec never holds the topic up. A new table is then created with the
default spec. A column the append itself adds (a decoded mode's value field) is not
warned about: the next append evolves the spec to it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import VoidTransform

from storage.iceberg_spec import PARTITION_SPEC_KEY

from .catalog import DEFAULT_NAMESPACE, ensure_namespace, table_identifier
from .layout import DEFAULT_PARTITION_SPEC, bind_spec, key_value_schema, partition_spec, spec_text
from .schema_map import arrow_type, needs_update

__all__ = ["LeanTransaction", "OFFSET_PREFIX", "WRITER_PROPERTY", "TableWriter", "arrow_schema", "conform",
           "snapshot_offsets"]

OFFSET_PREFIX = "krait.offset."
#: table property naming the topic a table holds (the table name maps some characters)
TOPIC_PROPERTY = "krait.topic"
#: pyiceberg's commit retry, which must stay off (see the module doc)
RETRIES_PROPERTY = "commit.retry.num-retries"
#: snapshot summary property naming the broker (node.id) that wrote the snapshot: which
#: broker wrote what, across leadership changes, is then visible in the table's history
WRITER_PROPERTY = "krait.writer.broker"

log = logging.getLogger("krait.tables")


class LeanTransaction(Transaction):
    """A transaction that reads the table's metadata as it is while nothing is staged:
    pyiceberg 0.12 deep-copies the whole metadata (every snapshot) on each read of
    ``table_metadata``, a dozen times per commit, which made a commit cost ~1.8 ms per
    snapshot kept (measured: 0.27 s for one append with 110 snapshots, 0.07 s through this
    class; tables/upkeep.py). Nothing of pyiceberg's mutates the metadata it reads."""

    @property
    def table_metadata(self) -> TableMetadata:
        if not self._updates:
            return self._table.metadata
        return super().table_metadata


def snapshot_offsets(table: Table) -> dict[int, int]:
    """partition -> next offset held, from the current snapshot or its nearest ancestor
    that carries Krait's offsets; empty for a table with none."""
    snap = table.current_snapshot()
    while snap is not None:
        props = snap.summary.additional_properties if snap.summary is not None else {}
        found = {int(k[len(OFFSET_PREFIX):]): int(v) for k, v in props.items() if k.startswith(OFFSET_PREFIX)}
        if found:
            return found
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return {}


def arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema rows of an Iceberg schema are written in."""
    return pa.schema([pa.field(f.name, arrow_type(f.field_type), nullable=not f.required) for f in schema.fields])


def conform(rows: pa.Table, target: pa.Schema) -> pa.Table:
    """``rows`` with ``target``'s columns in its order: a column matched by name (cast when
    its type differs: an int into a widened long column), nulls for a column the rows lack."""
    if rows.schema == target:
        return rows
    arrays = []
    for f in target:
        i = rows.schema.get_field_index(f.name)
        if i < 0:
            if not f.nullable:
                raise ValueError(f"rows lack the required column {f.name}")
            arrays.append(pa.nulls(rows.num_rows, f.type))
            continue
        col = rows.column(i)
        arrays.append(col.cast(f.type) if col.type != f.type else col)
    return pa.Table.from_arrays(arrays, schema=target)


class TableWriter:
    """The writer of one table, created on first use with ``schema`` (default the
    ``key_value`` layout) under the name ``name`` (default the topic's; the DLQ table's is
    ``<topic>~dlq``)."""

    def __init__(self, catalog: Catalog, topic: str, *, namespace: str = DEFAULT_NAMESPACE,
                 spec: str = DEFAULT_PARTITION_SPEC, max_attempts: int = 20,
                 snapshot_properties: Mapping[str, str] | None = None, schema: Schema | None = None,
                 name: str | None = None) -> None:
        self.catalog = catalog
        #: added to the summary of every snapshot this writer commits (e.g. WRITER_PROPERTY)
        self.snapshot_properties = dict(snapshot_properties or {})
        self.topic = topic
        self.identifier = table_identifier(name if name is not None else topic, namespace)
        self.initial_schema = schema if schema is not None else key_value_schema()
        #: the partition spec the table is given (see the module doc); may change between appends
        self.spec = spec
        self.max_attempts = max_attempts
        #: commits that failed on a concurrent commit and were retried (for metrics and tests)
        self.conflicts = 0
        #: the spec last found unfit for the table (its warning is logged once)
        self._unfit_spec: str | None = None
        self.table = self._open_or_create()

    def _open_or_create(self) -> Table:
        try:
            return self._no_library_retry(self.catalog.load_table(self.identifier))
        except NoSuchTableError:
            pass
        ensure_namespace(self.catalog, self.identifier[0])
        schema = self.initial_schema
        try:
            spec = partition_spec(schema, self.spec)
        except ValueError:
            # a column the first append adds (decoded modes), or one that never comes: the
            # appends evolve the spec or warn (see the module doc)
            spec = partition_spec(schema, DEFAULT_PARTITION_SPEC)
        try:
            return self.catalog.create_table(self.identifier, schema, partition_spec=spec,
                                             properties={TOPIC_PROPERTY: self.topic, RETRIES_PROPERTY: "0"})
        except TableAlreadyExistsError:  # another writer created it first
            return self._no_library_retry(self.catalog.load_table(self.identifier))

    def _no_library_retry(self, table: Table) -> Table:
        """The table with pyiceberg's commit retry off (set by a commit of its own if
        something turned it on)."""
        for _ in range(self.max_attempts):
            if table.properties.get(RETRIES_PROPERTY) == "0":
                return table
            try:
                return table.transaction().set_properties({RETRIES_PROPERTY: "0"}).commit_transaction()
            except CommitFailedException:
                table = self.catalog.load_table(self.identifier)
        raise CommitFailedException(f"{self.identifier}: could not set {RETRIES_PROPERTY}")

    def refresh(self) -> Table:
        self.table = self._no_library_retry(self.catalog.load_table(self.identifier))
        return self.table

    def committed_offsets(self) -> dict[int, int]:
        """partition -> the next offset the table holds (partitions never written are absent)."""
        return snapshot_offsets(self.refresh())

    def append(self, batches: Mapping[int, tuple[pa.Table, int]], *,
               schema: Schema | None = None) -> dict[int, int] | None:
        """Append each partition's rows (``partition -> (rows, next offset after them)``) in
        one snapshot whose summary holds the new offsets and everybody else's; retried on a
        concurrent commit (see the module doc). ``schema``: columns the table must have for
        these rows (added in the same commit when it lacks them). The table's partition spec
        is made ``self.spec`` first, in a commit of its own, when it differs. Returns the
        offsets of the snapshot written, or None when there was nothing new to write."""
        self.conform_spec(pending=schema)
        for attempt in range(self.max_attempts):
            offsets = snapshot_offsets(self.table)
            if all(next_offset <= offsets.get(p, -1) for p, (_, next_offset) in batches.items()):
                return None
            tx = LeanTransaction(self.table)
            if schema is not None and needs_update(self.table.schema(), schema):
                with tx.update_schema() as update:
                    update.union_by_name(schema)
            rows, new = _fresh(batches, offsets, arrow_schema(tx.table_metadata.schema()))
            if new == offsets:
                return None
            props = {**self.snapshot_properties, **{f"{OFFSET_PREFIX}{p}": str(o) for p, o in sorted(new.items())}}
            if rows.num_rows:
                tx.append(rows, snapshot_properties=props)
            else:  # only control or aborted batches, or records compacted away: move the offsets alone
                with tx.update_snapshot(snapshot_properties=props).fast_append():
                    pass
            try:
                self.table = tx.commit_transaction()
                return new
            except CommitFailedException:
                self.conflicts += 1
                time.sleep(random.uniform(0, 0.01 * min(attempt + 1, 10)))
                self.refresh()
        raise CommitFailedException(f"{self.identifier}: {self.max_attempts} commits failed on concurrent commits")

    def conform_spec(self, pending: Schema | None = None) -> bool:
        """Evolve the table's partition spec to ``self.spec`` if it differs (one commit,
        retried on a concurrent one); True when it did. A spec the table cannot take is
        logged once and left (see the module doc); ``pending``: the schema an append is
        about to give the table, whose new columns the next call can partition by."""
        for attempt in range(self.max_attempts):
            try:
                wanted = {(source.field_id, str(transform)): (item, transform)
                          for item, source, transform in bind_spec(self.table.schema(), self.spec)}
            except ValueError as exc:
                if pending is not None and _binds(pending, self.spec):
                    return False
                self._unfit(str(exc))
                return False
            current = {(f.source_id, str(f.transform)): f for f in self.table.spec().fields
                       if not isinstance(f.transform, VoidTransform)}
            if wanted.keys() == current.keys():
                # the order of the fields is left as it is: Iceberg cannot reorder them
                return False
            tx = LeanTransaction(self.table)
            try:
                with tx.update_spec() as update:
                    for key, field in current.items():
                        if key not in wanted:
                            update.remove_field(field.name)
                    for key, (item, transform) in wanted.items():
                        if key not in current:
                            update.add_field(item.column, transform, item.name)
            except ValueError as exc:  # pyiceberg's own checks (a field name that is a column's)
                self._unfit(str(exc))
                return False
            before = self.table.spec()
            try:
                self.table = tx.commit_transaction()
            except CommitFailedException:
                self.conflicts += 1
                time.sleep(random.uniform(0, 0.01 * min(attempt + 1, 10)))
                self.refresh()
                continue
            log.info("%s: the partition spec of the Iceberg table %s is now %s (%s=%s); files written before keep "
                     "theirs (%s)", self.topic, ".".join(self.identifier),
                     spec_text(self.table.schema(), self.table.spec()), PARTITION_SPEC_KEY, self.spec,
                     spec_text(self.table.schema(), before))
            return True
        raise CommitFailedException(f"{self.identifier}: {self.max_attempts} spec updates failed on concurrent commits")

    def _unfit(self, reason: str) -> None:
        if self._unfit_spec != self.spec:
            self._unfit_spec = self.spec
            log.warning("%s: %s=%s does not fit the Iceberg table %s (%s): the table keeps its partition spec %s",
                        self.topic, PARTITION_SPEC_KEY, self.spec, ".".join(self.identifier), reason,
                        spec_text(self.table.schema(), self.table.spec()))


def _binds(schema: Schema, spec: str) -> bool:
    try:
        bind_spec(schema, spec)
    except ValueError:
        return False
    return True


def _fresh(batches: Mapping[int, tuple[pa.Table, int]], offsets: Mapping[int, int],
           target: pa.Schema) -> tuple[pa.Table, dict[int, int]]:
    """The rows not yet in the table (in ``target``'s columns) and the offsets after
    appending them."""
    new = dict(offsets)
    parts = []
    for p, (rows, next_offset) in sorted(batches.items()):
        done = offsets.get(p, -1)
        if next_offset <= done:
            continue  # all of it is in the table already
        if rows.num_rows and done > 0:
            rows = rows.filter(pc.greater_equal(rows["offset"], done))
        if rows.num_rows:
            parts.append(conform(rows, target))
        new[p] = next_offset
    rows = pa.concat_tables(parts) if parts else target.empty_table()
    return rows, new
