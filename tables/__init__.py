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

Nothing here imports the broker: the broker drives a writer per topic.
"""
