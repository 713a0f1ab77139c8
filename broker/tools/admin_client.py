"""A small synchronous Kafka admin client, on the shared wire client.

Used by the ``krait topics`` / ``krait groups`` / ``krait log-dirs`` commands (and handy
in tests). Every connection is a :class:`~broker.tools.wire.WireClient`, which uses for
every API the highest version both sides support; requests are built from
version-agnostic values, so one method serves every version. Where an API changed shape
between versions (FindCoordinator batching, OffsetFetch multi-group, DeleteTopics by id)
the method branches on the version.

Error codes in responses are raised as :class:`protocol.errors.KafkaError` with the
broker's message or one derived from the code (:mod:`protocol.client_errors`); trouble on
the client's side as :class:`~protocol.client_errors.ClientError`. Nothing here prints.
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.serial import entity_reader

from protocol.apis import ApiKey
from protocol.bounds import check_entity
from protocol.client_errors import ClientError, check, kafka_error
from protocol.errors import ErrorCode, KafkaError

from ..security.client_security import ClientSecurity
from .security_admin import SecurityAdmin
from .wire import WireClient, connect

__all__ = [
    "AdminClient",
    "PartitionInfo",
    "TopicInfo",
    "GroupMember",
    "GroupDescription",
    "ReplicaInfo",
    "LogDirDescription",
    "LATEST",
    "EARLIEST",
    "RESOURCE_TOPIC",
    "RESOURCE_BROKER",
    "RESOURCE_GROUP",
    "decode_assignment",
    "format_uuid",
]

#: ListOffsets timestamps
LATEST = -1
EARLIEST = -2

#: DescribeConfigs / IncrementalAlterConfigs resource types and operations
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32
OP_SET = 0
OP_DELETE = 1
#: ConfigSource.DEFAULT_CONFIG
CONFIG_SOURCE_DEFAULT = 5


def format_uuid(value: uuid.UUID | None) -> str:
    """A topic id the way Kafka prints it (URL-safe base64 without padding)."""
    raw = value.bytes if value is not None else bytes(16)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# --- results ---------------------------------------------------------------------------------


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    error_code: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: list[PartitionInfo]
    error_code: int = 0


@dataclass
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    #: decoded assignment: topic -> partitions (empty when not a consumer group or undecodable)
    assignment: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]
    error_code: int = 0
    coordinator: tuple[int, str, int] | None = None


@dataclass
class ReplicaInfo:
    """One partition replica in a log dir (Kafka's admin ReplicaInfo)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirDescription:
    """One log dir of a broker (Kafka's admin LogDirDescription)."""

    path: str
    error_code: int
    replicas: dict[tuple[str, int], ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    """Decode a ConsumerProtocolAssignment (int16 version, then the versioned body)."""
    if not data or len(data) < 2:
        return {}
    (version,) = struct.unpack_from(">h", data, 0)
    if version < 0:
        return {}
    import importlib

    mod = importlib.import_module(f"kio.schema.consumer_protocol_assignment.v{min(version, 3)}")
    buf = bytes(data)
    try:
        check_entity(mod.ConsumerProtocolAssignment, buf, 2)  # kio preallocates from hostile lengths
        obj, _ = entity_reader(mod.ConsumerProtocolAssignment)(buf, 2)
    except Exception:  # kio raises assorted errors on malformed input
        return {}
    out: dict[str, list[int]] = {}
    for tp in obj.assigned_partitions or ():
        out.setdefault(str(tp.topic), []).extend(int(p) for p in tp.partitions)
    return out


# --- the admin client ------------------------------------------------------------------------


class AdminClient:
    """Admin operations against a cluster reached through ``bootstrap`` (host:port,...);
    the security calls (ACLs, SCRAM credentials, client quotas) are ``security_admin``'s, a
    :class:`~broker.tools.security_admin.SecurityAdmin` on the bootstrap connection."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, client_id: str = "krait-admin",
                 security: ClientSecurity | None = None):
        self.timeout, self.client_id, self.security = timeout, client_id, security
        self.bootstrap: WireClient = connect(bootstrap, timeout, client_id, security=security)
        self.security_admin = SecurityAdmin(self.bootstrap)
        self._nodes: dict[int, WireClient] = {}
        self._addresses: dict[int, tuple[str, int]] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None

    def close(self) -> None:
        for conn in self._nodes.values():
            conn.close()
        self._nodes.clear()
        self.bootstrap.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # connections

    def node(self, node_id: int) -> WireClient:
        """A connection to broker ``node_id`` (the bootstrap one if it is that broker)."""
        if node_id in self._nodes:
            return self._nodes[node_id]
        if node_id not in self._addresses:
            self.metadata([])
        addr = self._addresses.get(node_id)
        if addr is None:
            raise ClientError(f"broker {node_id} is not in the cluster metadata")
        b = self.bootstrap
        if addr == (b.host, b.port) or (addr[1] == b.port and _same_host(addr[0], b.host)):
            conn = b
        else:
            conn = WireClient(addr[0], addr[1], self.timeout, self.client_id, security=self.security)
        self._nodes[node_id] = conn
        return conn

    def node_ids(self) -> list[int]:
        if not self._addresses:
            self.metadata([])
        return sorted(self._addresses)

    def controller(self) -> WireClient:
        if self.controller_id < 0:
            self.metadata([])
        return self.node(self.controller_id) if self.controller_id >= 0 else self.bootstrap

    # topics

    def metadata(self, topics: Iterable[str] | None = None) -> list[TopicInfo]:
        """Metadata for ``topics`` (None: every topic; []: brokers only). Never auto-creates."""
        conn = self.bootstrap
        v = conn.version(ApiKey.METADATA)
        if topics is None:
            tlist: Any = None if v >= 1 else []
        else:
            tlist = [dict(name=t) for t in topics]
        resp = conn.request(ApiKey.METADATA, topics=tlist, allow_auto_topic_creation=False,
                            include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
        self._addresses = {int(b.node_id): (str(b.host), int(b.port)) for b in resp.brokers}
        self.controller_id = int(getattr(resp, "controller_id", -1))
        self.cluster_id = getattr(resp, "cluster_id", None)
        out = []
        for t in resp.topics:
            parts = [PartitionInfo(int(p.partition_index), int(p.leader_id), [int(r) for r in p.replica_nodes],
                                   [int(r) for r in p.isr_nodes], int(p.error_code)) for p in t.partitions]
            parts.sort(key=lambda p: p.partition)
            out.append(TopicInfo(str(t.name), getattr(t, "topic_id", None), bool(getattr(t, "is_internal", False)),
                                 parts, int(t.error_code)))
        return out

    def list_topics(self) -> list[TopicInfo]:
        return [t for t in self.metadata(None) if t.error_code == 0]

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False) -> Any:
        """Create one topic (-1: the broker's default); raises KafkaError on failure."""
        conn = self.controller()
        v = conn.version(ApiKey.CREATE_TOPICS)
        if v < 4 and (num_partitions < 0 or replication_factor < 0):
            raise ClientError("this broker needs --partitions and --replication-factor")
        resp = conn.request(ApiKey.CREATE_TOPICS, topics=[dict(
            name=name, num_partitions=num_partitions, replication_factor=replication_factor, assignments=[],
            configs=[dict(name=k, value=val) for k, val in (configs or {}).items()])],
            timeout=int(self.timeout * 1000), validate_only=validate_only)
        for t in resp.topics:
            check(t.error_code, getattr(t, "error_message", None))
            return t
        raise ClientError("empty CreateTopics response")

    def delete_topics(self, names: list[str]) -> dict[str, KafkaError | None]:
        """Delete topics by name; per topic None or the error."""
        conn = self.controller()
        v = conn.version(ApiKey.DELETE_TOPICS)
        if v >= 6:
            resp = conn.request(ApiKey.DELETE_TOPICS, topics=[dict(name=n, topic_id=None) for n in names],
                                timeout=int(self.timeout * 1000))
        else:
            resp = conn.request(ApiKey.DELETE_TOPICS, topic_names=list(names), timeout=int(self.timeout * 1000))
        out: dict[str, KafkaError | None] = {}
        for r in resp.responses:
            code = int(r.error_code)
            out[str(r.name)] = kafka_error(code, getattr(r, "error_message", None)) if code else None
        return out

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        """Increase ``name`` to ``count`` partitions in total."""
        conn = self.controller()
        resp = conn.request(ApiKey.CREATE_PARTITIONS, topics=[dict(name=name, count=count, assignments=None)],
                            timeout=int(self.timeout * 1000), validate_only=validate_only)
        for r in resp.results:
            check(r.error_code, getattr(r, "error_message", None))

    def describe_configs(self, resource_type: int, name: str, keys: list[str] | None = None) -> list[Any]:
        """Config entries of one resource (kio ``DescribeConfigsResourceResult`` objects)."""
        conn = self.node(int(name)) if resource_type == RESOURCE_BROKER and name.isdigit() else self.bootstrap
        resp = conn.request(ApiKey.DESCRIBE_CONFIGS, resources=[dict(
            resource_type=resource_type, resource_name=name, configuration_keys=keys)],
            include_synonyms=False, include_documentation=False)
        for r in resp.results:
            check(r.error_code, getattr(r, "error_message", None))
            return list(r.configs)
        return []

    def topic_configs(self, name: str, include_defaults: bool = False) -> dict[str, str | None]:
        """A topic's configs; without defaults, like kafka-topics.sh --describe shows them."""
        out: dict[str, str | None] = {}
        for c in self.describe_configs(RESOURCE_TOPIC, name):
            source = getattr(c, "config_source", -1)
            if not include_defaults and (source == CONFIG_SOURCE_DEFAULT or (source == -1 and c.is_default)):
                continue
            out[str(c.name)] = None if c.value is None else str(c.value)
        return out

    def incremental_alter_configs(self, resource_type: int, name: str, set_configs: dict[str, str] | None = None,
                                  delete_configs: Iterable[str] = (), validate_only: bool = False) -> None:
        ops = [dict(name=k, config_operation=OP_SET, value=v) for k, v in (set_configs or {}).items()]
        ops += [dict(name=k, config_operation=OP_DELETE, value=None) for k in delete_configs]
        conn = self.node(int(name)) if resource_type == RESOURCE_BROKER and name.isdigit() else self.bootstrap
        resp = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, resources=[dict(
            resource_type=resource_type, resource_name=name, configs=ops)], validate_only=validate_only)
        for r in resp.responses:
            check(r.error_code, getattr(r, "error_message", None))

    # offsets

    def list_offsets(self, partitions: dict[tuple[str, int], int],
                     isolation_level: int = 0) -> dict[tuple[str, int], int]:
        """(topic, partition) -> timestamp (LATEST, EARLIEST or ms) => offset (-1: none);
        ``isolation_level`` 1 (read_committed): LATEST is the last stable offset.

        Requests go to each partition's leader. Raises KafkaError on a partition error."""
        topics = {t for t, _ in partitions}
        leaders: dict[tuple[str, int], int] = {}
        for t in self.metadata(sorted(topics)):
            check(t.error_code, context=f"topic {t.name}")
            for p in t.partitions:
                leaders[(t.name, p.partition)] = p.leader
        by_leader: dict[int, dict[str, list[tuple[int, int]]]] = {}
        for (t, p), ts in partitions.items():
            if (t, p) not in leaders:
                raise kafka_error(ErrorCode.unknown_topic_or_partition, context=f"{t}-{p}")
            by_leader.setdefault(leaders[(t, p)], {}).setdefault(t, []).append((p, ts))
        out: dict[tuple[str, int], int] = {}
        for leader, tps in by_leader.items():
            if leader < 0:
                raise kafka_error(ErrorCode.leader_not_available, context=", ".join(sorted(tps)))
            conn = self.node(leader)
            resp = conn.request(ApiKey.LIST_OFFSETS, replica_id=-1, isolation_level=isolation_level, topics=[dict(
                name=t, partitions=[dict(partition_index=p, current_leader_epoch=-1, timestamp=ts,
                                         max_num_offsets=1) for p, ts in ps]) for t, ps in tps.items()])
            for t in resp.topics:
                for p in t.partitions:
                    check(p.error_code, context=f"{t.name}-{p.partition_index}")
                    out[(str(t.name), int(p.partition_index))] = int(p.offset)
        return out

    # log dirs

    def describe_log_dirs(self, broker_id: int, topics: dict[str, list[int]] | None = None,
                          ) -> list[LogDirDescription]:
        """The log dirs of one broker with the replicas they hold (``topics`` None: all)."""
        conn = self.node(broker_id)
        tlist = None if topics is None else [dict(topic=t, partitions=ps) for t, ps in topics.items()]
        resp = conn.request(ApiKey.DESCRIBE_LOG_DIRS, topics=tlist)
        check(getattr(resp, "error_code", 0), context=f"DescribeLogDirs on broker {broker_id}")
        out = []
        for r in resp.results:
            replicas = {(str(t.name), int(p.partition_index)): ReplicaInfo(int(p.partition_size), int(p.offset_lag),
                                                                           bool(p.is_future_key))
                        for t in r.topics for p in t.partitions}
            out.append(LogDirDescription(str(r.log_dir), int(r.error_code), replicas,
                                         int(getattr(r, "total_bytes", -1)), int(getattr(r, "usable_bytes", -1))))
        return out

    def alter_replica_log_dirs(self, broker_id: int, assignments: dict[tuple[str, int], str],
                               ) -> dict[tuple[str, int], KafkaError | None]:
        """Move replicas of broker ``broker_id`` to other log dirs: (topic, partition) ->
        absolute dir. Per partition None (the move started, or there was nothing to do) or
        the error. The broker moves the data in the background."""
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (t, p), path in assignments.items():
            by_dir.setdefault(path, {}).setdefault(t, []).append(p)
        resp = self.node(broker_id).request(ApiKey.ALTER_REPLICA_LOG_DIRS, dirs=[
            dict(path=path, topics=[dict(name=t, partitions=ps) for t, ps in topics.items()])
            for path, topics in by_dir.items()])
        out: dict[tuple[str, int], KafkaError | None] = {}
        for t in resp.results:
            for p in t.partitions:
                code = int(p.error_code)
                out[(str(t.topic_name), int(p.partition_index))] = kafka_error(code) if code else None
        return out

    # groups

    def find_coordinator(self, group_id: str) -> tuple[int, str, int]:
        """(node id, host, port) of the group's coordinator."""
        conn = self.bootstrap
        v = conn.version(ApiKey.FIND_COORDINATOR)
        if v >= 4:
            resp = conn.request(ApiKey.FIND_COORDINATOR, key_type=0, coordinator_keys=[group_id])
            if not resp.coordinators:
                raise ClientError("empty FindCoordinator response")
            c = resp.coordinators[0]
        else:
            c = conn.request(ApiKey.FIND_COORDINATOR, key=group_id, key_type=0)
        check(c.error_code, getattr(c, "error_message", None), context=f"FindCoordinator for group '{group_id}'")
        node_id, host, port = int(c.node_id), str(c.host), int(c.port)
        self._addresses.setdefault(node_id, (host, port))
        return node_id, host, port

    def coordinator(self, group_id: str) -> WireClient:
        node_id, host, port = self.find_coordinator(group_id)
        if node_id not in self._nodes:
            self._addresses[node_id] = (host, port)
        return self.node(node_id)

    def list_groups(self, states: list[str] | None = None) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group on every broker."""
        out: dict[str, tuple[str, str, str]] = {}
        for node_id in self.node_ids():
            conn = self.node(node_id)
            resp = conn.request(ApiKey.LIST_GROUPS, states_filter=states or [], types_filter=[])
            check(resp.error_code, context=f"ListGroups on broker {node_id}")
            for g in resp.groups:
                out[str(g.group_id)] = (str(g.group_id), str(g.protocol_type),
                                        str(getattr(g, "group_state", "") or ""))
        if states:  # brokers older than ListGroups v4 ignore the filter
            wanted = {s.lower() for s in states}
            return [g for g in out.values() if not g[2] or g[2].lower() in wanted]
        return list(out.values())

    def describe_group(self, group_id: str) -> GroupDescription:
        node = self.find_coordinator(group_id)
        conn = self.node(node[0])
        resp = conn.request(ApiKey.DESCRIBE_GROUPS, groups=[group_id], include_authorized_operations=False)
        if not resp.groups:
            raise ClientError("empty DescribeGroups response")
        g = resp.groups[0]
        code = int(g.error_code)
        if code and code != ErrorCode.group_id_not_found:
            raise kafka_error(code, getattr(g, "error_message", None), context=f"group '{group_id}'")
        members = []
        for m in g.members:
            assignment = decode_assignment(m.member_assignment) if g.protocol_type in ("consumer", "") else {}
            members.append(GroupMember(str(m.member_id), getattr(m, "group_instance_id", None), str(m.client_id),
                                       str(m.client_host), assignment))
        state = "Dead" if code == ErrorCode.group_id_not_found else str(g.group_state)
        return GroupDescription(str(g.group_id), state, str(g.protocol_type), str(g.protocol_data), members,
                                code, node)

    def offset_fetch(self, group_id: str, partitions: list[tuple[str, int]] | None = None,
                     ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Committed offsets of a group: (topic, partition) -> (offset, metadata); only committed ones."""
        conn = self.coordinator(group_id)
        v = conn.version(ApiKey.OFFSET_FETCH)
        topics: Any = None
        if partitions is not None:
            grouped: dict[str, list[int]] = {}
            for t, p in partitions:
                grouped.setdefault(t, []).append(p)
            topics = [dict(name=t, partition_indexes=ps) for t, ps in grouped.items()]
        elif v < 2:
            raise ClientError("this broker cannot fetch all offsets of a group (OffsetFetch < v2)")
        if v >= 8:
            resp = conn.request(ApiKey.OFFSET_FETCH, groups=[dict(group_id=group_id, member_id=None,
                                                                  member_epoch=-1, topics=topics)],
                                require_stable=False)
            if not resp.groups:
                raise ClientError("empty OffsetFetch response")
            g = resp.groups[0]
            check(g.error_code, context=f"OffsetFetch for group '{group_id}'")
            rtopics = g.topics
        else:
            resp = conn.request(ApiKey.OFFSET_FETCH, group_id=group_id, topics=topics, require_stable=False)
            check(getattr(resp, "error_code", 0), context=f"OffsetFetch for group '{group_id}'")
            rtopics = resp.topics
        out: dict[tuple[str, int], tuple[int, str | None]] = {}
        for t in rtopics:
            for p in t.partitions:
                if int(p.error_code) == ErrorCode.unknown_topic_or_partition:
                    continue
                check(p.error_code, context=f"OffsetFetch {t.name}-{p.partition_index}")
                if int(p.committed_offset) >= 0:
                    out[(str(t.name), int(p.partition_index))] = (int(p.committed_offset), p.metadata)
        return out

    def offset_commit(self, group_id: str, offsets: dict[tuple[str, int], int],
                      generation: int = -1, member_id: str = "") -> dict[tuple[str, int], KafkaError | None]:
        """Commit offsets (as an admin: generation -1, no member). Per partition None or the error."""
        conn = self.coordinator(group_id)
        grouped: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in sorted(offsets.items()):
            grouped.setdefault(t, []).append(dict(partition_index=p, committed_offset=off, committed_leader_epoch=-1,
                                                  committed_timestamp=-1, committed_metadata=""))
        resp = conn.request(ApiKey.OFFSET_COMMIT, group_id=group_id, generation_id_or_member_epoch=generation,
                            member_id=member_id, group_instance_id=None, retention_time=-1,
                            topics=[dict(name=t, partitions=ps) for t, ps in grouped.items()])
        out: dict[tuple[str, int], KafkaError | None] = {}
        for t in resp.topics:
            for p in t.partitions:
                code = int(p.error_code)
                out[(str(t.name), int(p.partition_index))] = kafka_error(code) if code else None
        return out

    def delete_groups(self, group_ids: list[str]) -> dict[str, KafkaError | None]:
        """Delete groups (each at its coordinator); per group None or the error."""
        by_node: dict[int, list[str]] = {}
        out: dict[str, KafkaError | None] = {}
        for g in group_ids:
            try:
                by_node.setdefault(self.find_coordinator(g)[0], []).append(g)
            except KafkaError as exc:
                out[g] = exc
        for node_id, groups in by_node.items():
            resp = self.node(node_id).request(ApiKey.DELETE_GROUPS, groups_names=groups)
            for r in resp.results:
                code = int(r.error_code)
                out[str(r.group_id)] = kafka_error(code) if code else None
        return out


def _same_host(a: str, b: str) -> bool:
    local = {"localhost", "127.0.0.1", "::1", "0.0.0.0", ""}
    return a == b or (a in local and b in local)
