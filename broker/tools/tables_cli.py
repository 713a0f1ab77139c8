"""``krait tables``: the Iceberg tables of table topics (``krait.iceberg.mode``): for each,
its snapshots, data files, records and size, and per partition the table's offset, the log's
last stable offset and the lag (offsets, and the age of the oldest record the table lacks);
``--snapshots`` lists the snapshots too. ``krait topics --describe`` prints the same lag
under a table topic (:func:`table_lines`).

The catalog is the brokers': asked from a broker (DescribeConfigs: ``log.dirs``,
``krait.iceberg.catalog.uri``, ``krait.iceberg.warehouse``, ``krait.iceberg.namespace``)
unless given. The embedded catalog lives under the broker's first log dir, so it is
readable only on the broker's machine (where ``make serve`` runs); a shared catalog
(PostgreSQL, REST) from anywhere that reaches it. When the catalog cannot be read, the lag is
printed as unknown with the reason; nothing is ever created in a catalog.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from protocol.apis import ApiKey
from protocol.errors import ProtocolError
from protocol.records import HEADER_SIZE
from tables.lag import batch_time_ms, partition_lag

from .admin_client import RESOURCE_BROKER, AdminClient
from .command import CommandError, Parser, connect_admin, run

__all__ = ["CatalogPlace", "main", "table_lines"]

MODE_KEY = "krait.iceberg.mode"
_KEYS = ["log.dirs", "log.dir", "krait.iceberg.catalog.uri", "krait.iceberg.warehouse", "krait.iceberg.namespace"]
_ISOLATION_READ_COMMITTED = 1
_LATEST = -1


@dataclass
class CatalogPlace:
    """Where the tables are: a catalog URI (None: the embedded one under ``first_log_dir``)."""

    first_log_dir: str | None
    catalog_uri: str | None
    warehouse: str | None
    namespace: str

    def open(self) -> Any:
        """The catalog, or CommandError saying why it cannot be read from here."""
        from tables.catalog import embedded_paths, open_catalog

        if self.catalog_uri is None:
            if self.first_log_dir is None:
                raise CommandError("no catalog: give --catalog-uri or --log-dirs")
            db, _ = embedded_paths(self.first_log_dir)
            if not os.path.exists(db):
                raise CommandError(f"the embedded catalog {db} is not on this machine (run this on the broker's "
                                   "machine, or give --catalog-uri)")
        try:
            return open_catalog(self.first_log_dir, catalog_uri=self.catalog_uri, warehouse=self.warehouse)
        except Exception as exc:
            raise CommandError(f"cannot open the Iceberg catalog: {exc}") from None


def catalog_place(admin: AdminClient, args: argparse.Namespace) -> CatalogPlace:
    """The options given, the rest from a broker's configs."""
    got: dict[str, str] = {}
    if args.catalog_uri is None or args.namespace is None:
        node = sorted(admin.node_ids())[0]
        for c in admin.describe_configs(RESOURCE_BROKER, str(node), _KEYS):
            if c.value is not None:
                got[str(c.name)] = str(c.value)
    dirs = args.log_dirs or got.get("log.dirs") or got.get("log.dir")
    first = dirs.split(",")[0].strip() if dirs else None
    return CatalogPlace(first, args.catalog_uri or got.get("krait.iceberg.catalog.uri") or None,
                        args.warehouse or got.get("krait.iceberg.warehouse") or None,
                        args.namespace or got.get("krait.iceberg.namespace") or "krait")


def _batch_time_ms(admin: AdminClient, leader: int, topic: str, partition: int, offset: int) -> int | None:
    """The first timestamp of the committed batch at ``offset`` (a Fetch v4 of one batch)."""
    try:
        resp = admin.node(leader).request(ApiKey.FETCH, 4, replica_id=-1, max_wait=0, min_bytes=1,
                                          max_bytes=HEADER_SIZE, isolation_level=_ISOLATION_READ_COMMITTED,
                                          topics=[dict(topic=topic, partitions=[dict(
                                              partition=partition, fetch_offset=offset,
                                              partition_max_bytes=HEADER_SIZE)])])
        for t in resp.responses:
            for p in t.partitions:
                data = bytes(p.records or b"")
                if p.error_code or len(data) < HEADER_SIZE:
                    return None
                return batch_time_ms(data[:HEADER_SIZE])
    except (OSError, ProtocolError, ValueError):
        return None
    return None


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if ms else "-"


def _lags(admin: AdminClient, topic: str, offsets: dict[int, int]) -> list[Any]:
    info = admin.metadata([topic])[0]
    leaders = {p.partition: p.leader for p in info.partitions}
    parts = sorted(leaders)
    ends = admin.list_offsets({(topic, p): _LATEST for p in parts}, isolation_level=_ISOLATION_READ_COMMITTED)
    starts = admin.list_offsets({(topic, p): -2 for p in parts})
    now = int(time.time() * 1000)
    out = []
    for p in parts:
        start = offsets.get(p, starts[(topic, p)])
        end = ends[(topic, p)]
        ts = _batch_time_ms(admin, leaders[p], topic, p, start) if start < end else None
        out.append(partition_lag(p, offsets.get(p), starts[(topic, p)], end, ts, now))
    return out


def table_lines(admin: AdminClient, topic: str, mode: str, catalog: Any, namespace: str,
                snapshots: bool = False) -> list[str]:
    """The lines ``krait tables`` prints for one topic's table (and ``krait topics --describe``
    under a table topic)."""
    from pyiceberg.exceptions import NoSuchTableError

    from tables.catalog import table_identifier
    from tables.inspect import summarize

    ident = table_identifier(topic, namespace)
    name = ".".join(ident)
    try:
        table = catalog.load_table(ident)
    except NoSuchTableError:
        return [f"Table: {name}\tTopic: {topic}\tMode: {mode}\tSnapshots: 0\t(not written yet)"]
    s = summarize(table)
    lines = [f"Table: {name}\tTopic: {topic}\tMode: {mode}\tSnapshots: {s.snapshots}\tDataFiles: {s.data_files}\t"
             f"Records: {s.rows}\tBytes: {s.bytes}\tLastCommit: {_iso(s.last_commit_ms)}\t"
             f"PartitionSpec: {s.partition_spec}"]
    for lag in _lags(admin, topic, s.offsets):
        secs = "unknown" if lag.seconds is None else f"{lag.seconds:.1f}"
        lines.append(f"\tPartition: {lag.partition}\tTableOffset: {lag.table_offset}\tLogEnd: {lag.log_end}\t"
                     f"LagOffsets: {lag.offsets}\tLagSeconds: {secs}")
    if snapshots:
        for snap in table.metadata.snapshots:
            props = snap.summary.additional_properties if snap.summary is not None else {}
            op = snap.summary.operation.value if snap.summary is not None else "-"
            lines.append(f"\tSnapshot: {snap.snapshot_id}\tTime: {_iso(snap.timestamp_ms)}\tOperation: {op}\t"
                         f"AddedRecords: {props.get('added-records', 0)}\tWriter: {props.get('krait.writer.broker', '-')}")
    return lines


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="krait tables", description="List the Iceberg tables of table topics (krait.iceberg.mode), "
                                                "their snapshots, size and lag behind the log.")
    p.add_argument("--bootstrap-server", required=True, help="a broker to connect to, host:port")
    p.add_argument("--command-config", help="client properties (security) for the connection")
    p.add_argument("--topic", help="only topics matching this regular expression")
    p.add_argument("--snapshots", action="store_true", help="list each table's snapshots too")
    p.add_argument("--catalog-uri", help="the catalog (default: the brokers' krait.iceberg.catalog.uri)")
    p.add_argument("--warehouse", help="the warehouse (default: the brokers' krait.iceberg.warehouse)")
    p.add_argument("--namespace", help="the namespace (default: the brokers' krait.iceberg.namespace)")
    p.add_argument("--log-dirs", help="the broker's log dirs, for its embedded catalog (default: asked from it)")
    return p


def topic_modes(admin: AdminClient, pattern: str | None) -> dict[str, str]:
    """topic -> its krait.iceberg.mode (``disabled`` when not set), for the matching topics."""
    out = {}
    rx = re.compile(pattern) if pattern else None
    for t in admin.list_topics():
        if rx is None or rx.fullmatch(t.name):
            out[t.name] = admin.topic_configs(t.name).get(MODE_KEY) or "disabled"
    return out


def _existing_tables(catalog: Any, namespace: str) -> set[str]:
    from pyiceberg.exceptions import NoSuchNamespaceError

    try:
        return {ident[-1] for ident in catalog.list_tables(namespace)}
    except NoSuchNamespaceError:
        return set()


def _body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from tables.catalog import table_name

    with connect_admin(args) as admin:
        modes = topic_modes(admin, args.topic)
        place = catalog_place(admin, args)
        catalog = place.open()
        existing = _existing_tables(catalog, place.namespace)
        # a topic whose mode went back to disabled keeps its table (and its lag grows)
        shown = {t: m for t, m in modes.items() if m != "disabled" or table_name(t) in existing}
        if not shown:
            print("No table topics (no topic has krait.iceberg.mode set, and no table is in the catalog).", file=out)
            return 0
        for topic, mode in sorted(shown.items()):
            for line in table_lines(admin, topic, mode, catalog, place.namespace, snapshots=args.snapshots):
                print(line, file=out)
    return 0


def main(argv: list[str]) -> int:
    """``krait tables ...``; returns the exit code."""
    return run("krait tables", "Error while listing tables : ", _parser, _body, argv)
