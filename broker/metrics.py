"""The broker's metrics: the counters the hot paths bump (plain ints in dicts, one add per
request and per produced or fetched partition batch set, never per record) and the
Prometheus collector that turns them, and the broker's state read at scrape time (log
sizes and offsets, partitions, leaders, the ISR, purgatories, groups' committed offsets),
into metrics named as Kafka's: as the Prometheus JMX exporter's usual Kafka rules name
Kafka's JMX metrics (``kafka_server_brokertopicmetrics_messagesin_total{topic}``, ...), and
consumer lag as kafka-exporter names it (``kafka_consumergroup_lag{consumergroup,topic,partition}``).

Everything runs on the event loop: the counters are bumped inline, and the collector
reads them and the broker's state when /metrics is served (broker.http), so no mutable
state is read from another thread.

What is counted, per topic (Kafka's BrokerTopicMetrics):
- messages in: the records of every batch a Produce request appended as leader
  (``last offset - base offset + 1`` of the append, i.e. per partition, never per record);
- bytes in: the size of the ``records`` field of those partitions, the record batches as the
  client sent them (batch headers included; the request and topic/partition framing not);
- bytes out: the size of the ``records`` sent to consumers in Fetch responses (stored batches
  as they are on disk); a follower's fetch is replication and does not count (Kafka's
  ReplicationBytesOutPerSec).
Requests (Kafka's RequestMetrics): every dispatched request, labelled with Kafka's API name
(``Produce``, ``Fetch``, ``ListOffsets``, ...); its total time from the frame's arrival to its
response being queued for the socket, in milliseconds, as a Prometheus histogram.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING

from protocol import apis

from .tables.lag import table_lags

if TYPE_CHECKING:
    from .broker import Broker

#: upper bounds (ms) of the request latency histogram's buckets
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
                                         30000)
_NBUCKETS = len(LATENCY_BUCKETS_MS)


def kafka_api_name(api_key: int) -> str:
    """Kafka's name of an API (ApiKeys.name: ``Produce``, ``ListOffsets``, ``ApiVersions``)."""
    return "".join(part.capitalize() for part in apis.api_name(api_key).split("_"))


class BrokerMetrics:
    """The counters; the hot paths call the methods below (or add to the dicts) inline."""

    def __init__(self) -> None:
        #: topic -> records appended by Produce
        self.messages_in: dict[str, int] = {}
        #: topic -> bytes of record batches appended by Produce
        self.bytes_in: dict[str, int] = {}
        #: topic -> bytes of record batches sent to consumers
        self.bytes_out: dict[str, int] = {}
        #: topic -> partitions appended to by Produce requests (Kafka's TotalProduceRequestsPerSec)
        self.produce_requests: dict[str, int] = {}
        #: topic -> partitions read by consumers' Fetch requests (Kafka's TotalFetchRequestsPerSec)
        self.fetch_requests: dict[str, int] = {}
        #: api key (or Kafka's extra name: FetchConsumer, FetchFollower) ->
        #: [count per latency bucket..., count above the last bound, sum in ms]
        self.requests: dict[int | str, list] = {}
        #: cluster mode: ISR changes this broker made as a leader
        self.isr_shrinks = 0
        self.isr_expands = 0
        #: Kafka's purgatories: delayed operation -> [operations waiting, partitions they watch]
        self.delayed: dict[str, list[int]] = {"Produce": [0, 0], "Fetch": [0, 0]}

    def produced(self, topic: str, messages: int, size: int) -> None:
        """One partition's records appended by a Produce request."""
        self.messages_in[topic] = self.messages_in.get(topic, 0) + messages
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size
        self.produce_requests[topic] = self.produce_requests.get(topic, 0) + 1

    def fetched(self, topic: str, size: int) -> None:
        """One partition's records in a Fetch response to a consumer."""
        self.bytes_out[topic] = self.bytes_out.get(topic, 0) + size
        self.fetch_requests[topic] = self.fetch_requests.get(topic, 0) + 1

    def request(self, api_key: int | str, seconds: float) -> None:
        """One request answered after ``seconds``."""
        ms = seconds * 1000.0
        st = self.requests.get(api_key)
        if st is None:
            st = self.requests[api_key] = [0] * (_NBUCKETS + 1) + [0.0]
        st[bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        st[-1] += ms

    def delay(self, operation: str, watched: int, n: int = 1) -> None:
        """An operation parks in (n=1) or leaves (n=-1) a purgatory, watching ``watched`` partitions."""
        d = self.delayed[operation]
        d[0] += n
        d[1] += n * watched


def _family(kind: str, name: str, doc: str, labels: list[str]):
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    return (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, doc, labels=labels)


class KafkaCollector:
    """A prometheus_client collector over one broker: reads its counters and state when scraped."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def describe(self) -> list:
        return []  # registering must not scrape (the broker may not have started yet)

    def collect(self) -> Iterator:
        from prometheus_client.core import HistogramMetricFamily

        b = self.broker
        m = b.metrics
        for attr, name, doc in (
                ("messages_in", "messagesin", "Records appended by Produce requests"),
                ("bytes_in", "bytesin", "Bytes of record batches appended by Produce requests"),
                ("bytes_out", "bytesout", "Bytes of record batches sent to consumers"),
                ("produce_requests", "totalproducerequests", "Partitions appended to by Produce requests"),
                ("fetch_requests", "totalfetchrequests", "Partitions read by consumers' Fetch requests")):
            fam = _family("counter", f"kafka_server_brokertopicmetrics_{name}", doc, ["topic"])
            for topic, v in sorted(getattr(m, attr).items()):
                fam.add_metric([topic], v)
            yield fam

        total = _family("counter", "kafka_network_requestmetrics_requests", "Requests answered", ["request"])
        hist = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                     "Request total time in milliseconds (arrival to response queued)",
                                     labels=["request"])
        for key, st in sorted(m.requests.items(), key=lambda kv: str(kv[0])):
            name = key if isinstance(key, str) else kafka_api_name(key)
            buckets, acc = [], 0
            for bound, n in zip((*LATENCY_BUCKETS_MS, float("inf")), st[:-1], strict=True):
                acc += n
                buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), acc))
            total.add_metric([name], acc)
            hist.add_metric([name], buckets, st[-1])
        yield total
        yield hist

        yield from self._logs()
        yield from self._replicas()

        conns = _family("gauge", "kafka_server_socket_server_metrics_connection_count",
                        "Open client connections", ["listener"])
        counts: dict[str, int] = {name: 0 for name in b.listener_security}
        for conn in b.connections:
            name = conn.listener_name or ""
            counts[name] = counts.get(name, 0) + 1
        for name, n in sorted(counts.items()):
            conns.add_metric([name], n)
        yield conns

        size = _family("gauge", "kafka_server_delayedoperationpurgatory_purgatorysize",
                       "Partitions watched by parked operations", ["delayedOperation"])
        ops = _family("gauge", "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                      "Parked operations", ["delayedOperation"])
        for op, (n, watched) in sorted(m.delayed.items()):
            ops.add_metric([op], n)
            size.add_metric([op], watched)
        yield size
        yield ops

        yield from self._consumer_groups()
        yield from self._share_partitions()
        yield from self._schema_registry()
        yield from self._tables()

    def _tables(self) -> Iterator:
        """Iceberg table topics, per partition this broker leads: the records the table lacks
        (up to the last stable offset), the age of the oldest of them, and the table's offset
        (broker/tables/lag.py)."""
        labels = ["topic", "partition"]
        behind = _family("gauge", "krait_iceberg_table_lag_offsets",
                         "Committed records of the partition its Iceberg table does not hold yet", labels)
        seconds = _family("gauge", "krait_iceberg_table_lag_seconds",
                          "Age of the oldest committed record the Iceberg table does not hold yet (0: none)", labels)
        offset = _family("gauge", "krait_iceberg_table_offset",
                         "The next offset of the partition the Iceberg table holds (its snapshot's krait.offset)",
                         labels)
        for topic, lags in table_lags(self.broker).items():
            for lag in lags:
                key = [topic, str(lag.partition)]
                behind.add_metric(key, lag.offsets)
                if lag.seconds is not None:
                    seconds.add_metric(key, lag.seconds)
                offset.add_metric(key, lag.table_offset)
        yield behind
        yield seconds
        yield offset

    def _schema_registry(self) -> Iterator:
        """The Schema Registry (when served): subjects and schemas in this broker's replayed
        state, whether this broker is its writer (Confluent's master-slave-role), and the
        REST requests answered by method and status."""
        listener = self.broker.schema_registry
        if listener is None:
            return
        service = listener.service
        state = service.core.state
        for name, doc, value in (
                ("subjects", "Subjects with a live version", len(state.subject_names())),
                ("schemas", "Schema ids in use", len(state.by_id)),
                ("writer", "1 when this broker writes _schemas (leads its partition 0)",
                 int(service.leader() == self.broker.node_id))):
            fam = _family("gauge", f"krait_schema_registry_{name}", doc, [])
            fam.add_metric([], value)
            yield fam
        fam = _family("counter", "krait_schema_registry_requests", "REST requests answered", ["method", "status"])
        for (method, status), n in sorted(listener.requests.items()):
            fam.add_metric([method, str(status)], n)
        yield fam

    def _share_partitions(self) -> Iterator:
        """Share groups (KIP-932), per share-partition this broker leads: Kafka's
        SharePartitionMetrics gauges (in-flight records and batches) and Krait's counters of
        records acquired, delivered again and archived."""
        labels = ["group", "topic", "partition"]
        fams = {
            "in_flight_records": _family("gauge", "kafka_server_sharepartitionmetrics_inflightmessagecount",
                                         "Records between the share-partition's start and end offsets", labels),
            "in_flight_batches": _family("gauge", "kafka_server_sharepartitionmetrics_inflightbatchcount",
                                         "In-flight batches of the share-partition", labels),
            "acquired_records": _family("counter", "krait_share_partition_acquired_records",
                                        "Records acquired by share-group members", labels),
            "redelivered_records": _family("counter", "krait_share_partition_redelivered_records",
                                           "Records acquired again after a release, rejection of a lock or "
                                           "expiry", labels),
            "archived_records": _family("counter", "krait_share_partition_archived_records",
                                        "Records archived (rejected, or past the delivery count limit)", labels),
        }
        share = self.broker.share
        for group, topic, partition, counters in sorted(share.metrics() if share is not None else []):
            for name, fam in fams.items():
                fam.add_metric([group, topic, str(partition)], counters[name])
        yield from fams.values()

    def _logs(self) -> Iterator:
        logs = self.broker.logs
        parts = logs.partitions() if logs is not None else {}
        size = _family("gauge", "kafka_log_log_size", "Bytes of the partition's log segments", ["topic", "partition"])
        start = _family("gauge", "kafka_log_log_logstartoffset", "The partition's log start offset",
                        ["topic", "partition"])
        end = _family("gauge", "kafka_log_log_logendoffset", "The partition's log end offset", ["topic", "partition"])
        segs = _family("gauge", "kafka_log_log_numlogsegments", "The partition's segments", ["topic", "partition"])
        for (topic, p), plog in sorted(parts.items()):
            labels = [topic, str(p)]
            size.add_metric(labels, plog.size_bytes)
            start.add_metric(labels, plog.log_start_offset)
            end.add_metric(labels, plog.log_end_offset)
            segs.add_metric(labels, len(plog.segments))
        yield from (size, start, end, segs)
        # Kafka's LogManager OfflineLogDirectoryCount and ReplicaManager OfflineReplicaCount (KIP-112)
        dirs = _family("gauge", "kafka_log_logmanager_offlinelogdirectorycount", "Log dirs offline after an I/O error",
                       [])
        dirs.add_metric([], len(logs.failure_channel.offline) if logs is not None else 0)
        replicas = _family("gauge", "kafka_server_replicamanager_offlinereplicacount",
                           "Replicas on this broker in an offline log dir", [])
        replicas.add_metric([], sum(1 for plog in parts.values() if plog.offline))
        yield from (dirs, replicas)

    def _replicas(self) -> Iterator:
        b = self.broker
        rm = b.replicas
        if rm is None:
            partitions = leaders = under = 0
        else:
            parts = list(rm.partitions.values())
            partitions = len(parts)
            led = [p for p in parts if p.is_leader]
            leaders = len(led)
            under = sum(1 for p in led if len(p.isr) < len(p.assignment))
        for name, doc, v in (("partitioncount", "Partitions with a replica on this broker", partitions),
                             ("leadercount", "Partitions this broker leads", leaders),
                             ("underreplicatedpartitions", "Led partitions whose ISR is smaller than their replicas",
                              under)):
            fam = _family("gauge", f"kafka_server_replicamanager_{name}", doc, [])
            fam.add_metric([], v)
            yield fam
        m = b.metrics
        for name, doc, v in (("isrshrinks", "ISR shrinks made as leader", m.isr_shrinks),
                             ("isrexpands", "ISR expansions made as leader", m.isr_expands)):
            fam = _family("counter", f"kafka_server_replicamanager_{name}", doc, [])
            fam.add_metric([], v)
            yield fam
        active = _family("gauge", "kafka_controller_kafkacontroller_activecontrollercount",
                         "1 on the broker that is the active controller", [])
        active.add_metric([], 1 if b.controller_id() == b.node_id else 0)
        yield active

    def _consumer_groups(self) -> Iterator:
        """kafka-exporter's view of the groups this broker coordinates: committed offset and
        lag (the partition's high watermark minus it) per partition with a local replica."""
        b = self.broker
        current = _family("gauge", "kafka_consumergroup_current_offset", "The group's committed offset",
                          ["consumergroup", "topic", "partition"])
        lag = _family("gauge", "kafka_consumergroup_lag", "High watermark minus the group's committed offset",
                      ["consumergroup", "topic", "partition"])
        members = _family("gauge", "kafka_consumergroup_members", "Members of the group", ["consumergroup"])
        driver = b.groups
        logs = b.logs
        if driver is not None and logs is not None:
            for group in sorted(driver.coordinator.groups(), key=lambda g: g.group_id):
                gid = group.group_id
                members.add_metric([gid], len(getattr(group, "members", ()) or ()))
                for (topic, p), value in sorted(group.offsets.items()):
                    labels = [gid, topic, str(p)]
                    current.add_metric(labels, value.offset)
                    plog = logs.get(topic, p)
                    if plog is not None and value.offset >= 0:
                        lag.add_metric(labels, max(0, plog.high_watermark - value.offset))
        yield from (current, lag, members)


def readiness(broker: Broker) -> str | None:
    """None when the broker is ready to serve clients, else why not (for /readyz)."""
    if broker.stopping:
        return "stopping"
    if broker.logs is None:
        return "logs are loading"
    if broker.groups is None or broker.transactions is None:
        return "coordinators are loading"
    coordinator = broker.groups.coordinator
    served = coordinator.served_partitions()
    if served and any(coordinator.is_loading(p) for p in served):
        return "group coordinator partitions are loading"
    if not broker.serving:
        return "listeners are not open yet"
    if broker.cluster is not None:  # None until start() joined the cluster
        membership = broker.cluster.membership
        if not membership.connected:
            return "not connected to ZooKeeper"
        if broker.node_id not in membership.brokers:
            return f"broker {broker.node_id} is not registered in ZooKeeper"
    return None
