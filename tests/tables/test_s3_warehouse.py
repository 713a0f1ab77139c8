"""``krait.iceberg.warehouse=s3://...`` on a real broker process, against moto's S3 server on
127.0.0.1 (no other address is contacted): the broker is configured as any AWS client is,
through its environment (credentials, ``AWS_ENDPOINT_URL``, ``AWS_REGION``: tables/catalog.py
turns the last two into pyiceberg's ``s3.endpoint`` / ``s3.region``), the embedded SQLite
catalog stays under the log dir and every table file (data, manifests, metadata) goes to the
bucket. The broker's upkeep (compaction, expiry, the orphan scan) runs on S3 too, and the
table read back with pyiceberg holds exactly the produced records, each once."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from moto.server import ThreadedMotoServer

from tables.catalog import open_catalog, s3_properties_from_env, table_identifier
from tables.upkeep import UpkeepSettings, delete_orphan_files
from tables.writer import snapshot_offsets
from tests.krait_harness import BrokerProcess, free_port

BUCKET = "krait-tables"
WAREHOUSE = f"s3://{BUCKET}/wh"
TOPIC = "orders"
PARTITIONS = 2


@pytest.fixture
def s3_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 on a free local port, with a bucket, and this process's environment (the
    broker inherits it) pointing every AWS client at it."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)  # would take precedence over what is set below
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "krait-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "krait-test-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    # no credential or region lookups at the EC2 instance metadata address
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    try:
        _s3(endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.stop()


def _s3(endpoint: str):
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


def _keys(endpoint: str, prefix: str) -> list[str]:
    out: list[str] = []
    for page in _s3(endpoint).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return out


def _produce(bootstrap: str, start: int, n: int) -> list[tuple[int, int, bytes, bytes]]:
    """n records; (partition, offset, key, value) of each as acknowledged."""
    acked: list[tuple[int, int, bytes, bytes]] = []

    def done(err, msg):
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=done)
    assert p.flush(30) == 0
    assert len(acked) == n
    return acked


def _table(log_dir: str):
    # the embedded catalog under the broker's log dir, the same S3 settings (this environment)
    return open_catalog(log_dir, warehouse=WAREHOUSE).load_table(table_identifier(TOPIC))


def _wait_for(log_dir: str, sent: list[tuple[int, int, bytes, bytes]], timeout: float = 60) -> None:
    ends: dict[int, int] = {}
    for p, o, _, _ in sent:
        ends[p] = max(ends.get(p, 0), o + 1)
    deadline = time.monotonic() + timeout
    offsets: dict[int, int] = {}
    while time.monotonic() < deadline:
        try:
            offsets = snapshot_offsets(_table(log_dir))
        except Exception:  # no table (or namespace) yet
            offsets = {}
        if all(offsets.get(p, 0) >= e for p, e in ends.items()):
            return
        time.sleep(0.3)
    raise AssertionError(f"table offsets {offsets} never reached {ends}")


def _rows(log_dir: str) -> list[tuple[int, int, bytes, bytes]]:
    rows = _table(log_dir).scan(selected_fields=("partition", "offset", "key", "value")).to_arrow().to_pylist()
    return sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in rows)


def test_s3_warehouse_holds_exactly_the_records_through_upkeep(tmp_path, s3_endpoint):
    log_dir = str(tmp_path / "logs")
    b = BrokerProcess(log_dir, {"krait.iceberg.warehouse": WAREHOUSE,
                                "krait.iceberg.commit.interval.ms": "200",
                                "krait.iceberg.upkeep.interval.ms": "1000",
                                "krait.iceberg.compaction.min.input.files": "3",
                                "krait.iceberg.snapshot.retention.ms": "0",
                                "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
    b.start()
    sent: list[tuple[int, int, bytes, bytes]] = []
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config={"krait.iceberg.mode": "key_value"})])[
            TOPIC].result(30)
        # a commit (a small file per partition) per round, until the upkeep has compacted some
        deadline = time.monotonic() + 90
        ops: list[str] = []
        seen: set[int] = set()  # every snapshot id the table has shown
        while "replace" not in ops:
            assert time.monotonic() < deadline, f"no compaction on S3 within 90 s: {ops}\n{b.log_text()}"
            sent += _produce(b.bootstrap, len(sent), 40)
            _wait_for(log_dir, sent)
            snapshots = _table(log_dir).metadata.snapshots
            seen |= {s.snapshot_id for s in snapshots}
            ops = [s.summary.operation.value for s in snapshots if s.summary is not None]
        # expiry (retention 0) removes snapshots, deleting from the bucket the files only they
        # used (it may already have, in the upkeep run that compacted: so a snapshot seen
        # before and gone now, not a count); the orphan scan ran at the first upkeep that
        # found the table (failures: below)
        while seen <= {s.snapshot_id for s in _table(log_dir).metadata.snapshots}:
            assert time.monotonic() < deadline, f"no snapshot expired within 90 s: {ops}\n{b.log_text()}"
            time.sleep(0.3)
        assert _rows(log_dir) == sorted(sent)
        assert b.stop() == 0
    finally:
        b.kill()
    log = b.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "failed (retried" not in log, log[-5000:]

    table = _table(log_dir)
    assert table.location().startswith(WAREHOUSE + "/")
    assert table.metadata_location.startswith(WAREHOUSE + "/")
    keys = _keys(s3_endpoint, "wh/")
    live = [t.file.file_path for t in table.scan().plan_files()]
    assert live and all(p.startswith(WAREHOUSE + "/") for p in live)
    assert {p[len(f"s3://{BUCKET}/"):] for p in live} <= set(keys)
    assert any(k.endswith(".metadata.json") for k in keys) and any(k.endswith(".avro") for k in keys)
    # nothing of the table on local disk: the log dir holds the catalog's SQLite file and the log
    local = [str(p.relative_to(log_dir)) for p in Path(log_dir).rglob("*") if p.is_file()]
    assert not [f for f in local if f.endswith((".parquet", ".avro", ".metadata.json"))], local
    assert not (Path(log_dir) / "krait-iceberg" / "warehouse").exists()

    # the orphan scan on S3 deletes a file no snapshot uses once old enough and keeps every
    # file in use (a scan that listed wrong would delete them: the read below would fail)
    data_dir = live[0][len(f"s3://{BUCKET}/"):].rsplit("/", 1)[0]
    orphan = f"{data_dir}/orphan-{os.getpid()}.parquet"
    _s3(s3_endpoint).put_object(Bucket=BUCKET, Key=orphan, Body=b"not referenced")
    settings = UpkeepSettings()
    report = delete_orphan_files(table, int(time.time() * 1000) + settings.orphan_age_ms + 60_000, settings)
    assert not report.skipped, report.skipped
    assert report.orphans_deleted >= 1
    keys = set(_keys(s3_endpoint, "wh/"))
    assert orphan not in keys
    assert {p[len(f"s3://{BUCKET}/"):] for p in live} <= keys
    assert _rows(log_dir) == sorted(sent)


def test_orphan_scan_is_skipped_where_the_fileio_gives_no_pyarrow_filesystem():
    """fsspec's FileIO (``py-io-impl``) has no pyarrow filesystem to list an s3:// location
    with: the scan is skipped with its reason, nothing listed or deleted, no error."""
    from types import SimpleNamespace

    from pyiceberg.io.fsspec import FsspecFileIO

    table = SimpleNamespace(io=FsspecFileIO({}), properties={}, location=lambda: f"{WAREHOUSE}/krait/{TOPIC}",
                            name=lambda: ("krait", TOPIC))
    report = delete_orphan_files(table, int(time.time() * 1000), UpkeepSettings())  # type: ignore[arg-type]
    assert report.skipped == [f"orphans: FsspecFileIO gives no pyarrow filesystem to list {WAREHOUSE}/krait/"
                              f"{TOPIC}/data with"]
    assert report.orphans_deleted == 0


def test_s3_properties_from_the_aws_environment():
    """The standard AWS variables, the service-specific one first; none set: no property (a
    local warehouse's catalog gets nothing it did not have)."""
    assert s3_properties_from_env({}) == {}
    assert s3_properties_from_env({"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "http://s3:2",
                                   "AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": ""}) == {
        "s3.endpoint": "http://s3:2", "s3.region": "eu-west-1"}
    assert s3_properties_from_env({"AWS_ENDPOINT_URL": "http://a:1", "AWS_REGION": "us-east-2",
                                   "AWS_DEFAULT_REGION": "eu-west-1"}) == {
        "s3.endpoint": "http://a:1", "s3.region": "us-east-2"}
