"""Iceberg table topics (issue 27): each topic whose ``krait.iceberg.mode`` is not
``disabled`` is kept as an Apache Iceberg table, written through pyiceberg.

- :mod:`tables.modes`: the topic config's values;
- :mod:`tables.catalog`: the catalog (embedded SQLite under the first log dir, a shared SQL
  database, or an Iceberg REST catalog) and the table name of a topic;
- :mod:`tables.layout`: the ``key_value`` schema and the partition spec;
- :mod:`tables.records`: a log region (whole record batches) to an Arrow table of committed
  rows;
- :mod:`tables.writer`: :class:`~tables.writer.TableWriter`, exactly-once appends (each
  snapshot's summary names the next offset of every partition the table holds).
- :mod:`tables.schema_map`: registry schemas (Avro, JSON Schema) as Iceberg columns, and
  whether a schema fits a table's (evolution) or clashes with it;
- :mod:`tables.decoded`: the decoded modes, values decoded per schema group into columns;
- :mod:`tables.protobuf_map`: Protobuf schemas as columns and their payloads parsed;
- :mod:`tables.dlq`: the dead-letter table ``<topic>~dlq``;
- :mod:`tables.topic_table`: one commit of a topic in its current mode (the DLQ table and the
  main table exactly once together; what a mode change does to a table).

Nothing here imports the broker: the broker drives a writer per topic.
"""
