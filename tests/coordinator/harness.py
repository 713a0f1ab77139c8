"""Test doubles for the pure coordinator: a fake clock, an in-memory OffsetsLog, kio request
builders for any version, and a Harness that runs a group through join/sync/heartbeat."""

from __future__ import annotations

import importlib
import io
import struct
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from coordinator import CoordinatorConfig, GroupCoordinator
from protocol.build import make

E = ErrorCode


class FakeClock:
    def __init__(self, t: int = 1_700_000_000_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


class MemoryLog:
    """OffsetsLog keeping (key, value) records per partition; ``fail`` makes appends raise."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail: BaseException | None = None
        self.appends = 0

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        if self.fail is not None:
            raise self.fail
        self.appends += 1
        self.partitions.setdefault(partition, []).extend(records)

    def replay(self, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
        return [(i, k, v) for i, (k, v) in enumerate(self.partitions.get(partition, []))]

    def all_records(self) -> list[tuple[bytes, bytes | None]]:
        return [r for recs in self.partitions.values() for r in recs]


class ReplicatedLog(MemoryLog):
    """The log of a cluster's ``__consumer_offsets`` partitions: appends (transactional ones
    too) return their base offset, and only records below ``hw[partition]`` are committed.
    :func:`replicate` plays the broker once the ISR has the records."""

    def __init__(self) -> None:
        super().__init__()
        self.hw: dict[int, int] = {}

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], **_: Any) -> int:
        base = self.end(partition)
        super().append(partition, records)
        return base

    def end(self, partition: int) -> int:
        return len(self.partitions.get(partition, []))

    def high_watermark(self, partition: int) -> int:
        return self.hw.get(partition, 0)


def replicate(c: GroupCoordinator, log: ReplicatedLog, partition: int, upto: int | None = None) -> None:
    """The followers of ``partition`` caught up (to ``upto``, default the log end): its
    high watermark moves and the broker tells the coordinator."""
    log.hw[partition] = log.end(partition) if upto is None else upto
    c.on_committed(partition, log.hw[partition])


@cache
def request_class(api: str, version: int) -> type:
    mod = importlib.import_module(f"kio.schema.{api}.v{version}.request")
    name = "".join(p.capitalize() for p in api.split("_")) + "Request"
    return getattr(mod, name)


def request(api: str, version: int, **fields: Any) -> Any:
    return make(request_class(api, version), **fields)


def subscription(topics: list[str], version: int = 0, **fields: Any) -> bytes:
    """A consumer's JoinGroup metadata: int16 version, then kio's ConsumerProtocolSubscription
    of that version (``fields``: user_data, owned_partitions, generation_id, rack_id)."""
    cls = importlib.import_module(f"kio.schema.consumer_protocol_subscription.v{version}").ConsumerProtocolSubscription
    if version >= 1:
        fields.setdefault("owned_partitions", ())
    buf = io.BytesIO()
    buf.write(struct.pack(">h", version))
    entity_writer(cls)(buf, make(cls, topics=topics, **fields))
    return buf.getvalue()


class Box:
    """Collects what the coordinator passes to ``respond``."""

    def __init__(self) -> None:
        self.responses: list[Any] = []

    def __call__(self, resp: Any) -> None:
        self.responses.append(resp)

    @property
    def done(self) -> bool:
        return bool(self.responses)

    @property
    def value(self) -> Any:
        assert len(self.responses) == 1, f"expected exactly one response, got {self.responses}"
        return self.responses[0]


@dataclass
class Client:
    """What a consumer remembers: its member id, generation, assignment."""

    client_id: str
    member_id: str = ""
    generation: int = -1
    instance_id: str | None = None
    protocols: list[tuple[str, bytes]] = field(default_factory=lambda: [("range", subscription(["t"]))])
    session: int = 10_000
    rebalance: int = 30_000


class Harness:
    def __init__(self, **cfg: Any) -> None:
        self.clock = FakeClock()
        self.log = MemoryLog()
        cfg.setdefault("group_initial_rebalance_delay_ms", 3000)
        self.config = CoordinatorConfig(**cfg)
        self.c = GroupCoordinator(self.config, self.clock, self.log)

    def advance(self, ms: int) -> None:
        self.clock.t += ms
        self.c.poll()

    # --- raw calls ---------------------------------------------------------------
    def join(self, group: str, cl: Client, v: int = 9, **extra: Any) -> Box:
        box = Box()
        fields = dict(
            group_id=group,
            session_timeout=cl.session,
            rebalance_timeout=cl.rebalance,
            member_id=cl.member_id,
            group_instance_id=cl.instance_id,
            protocol_type="consumer",
            protocols=[{"name": n, "metadata": m} for n, m in cl.protocols],
        )
        fields.update(extra)
        self.c.join_group(request("join_group", v, **fields), box, client_id=cl.client_id, client_host="/127.0.0.1")
        return box

    def sync(self, group: str, cl: Client, assignments: dict[str, bytes] | None = None, v: int = 5, **extra: Any) -> Box:
        box = Box()
        fields = dict(
            group_id=group,
            generation_id=cl.generation,
            member_id=cl.member_id,
            group_instance_id=cl.instance_id,
            assignments=[{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
        )
        fields.update(extra)
        self.c.sync_group(request("sync_group", v, **fields), box)
        return box

    def heartbeat(self, group: str, cl: Client, v: int = 4) -> ErrorCode:
        box = Box()
        req = request(
            "heartbeat", v, group_id=group, generation_id=cl.generation, member_id=cl.member_id,
            group_instance_id=cl.instance_id,
        )
        self.c.heartbeat(req, box)
        return box.value.error_code

    def leave(self, group: str, *cls: Client, v: int = 5) -> Any:
        box = Box()
        if v >= 3:
            req = request(
                "leave_group", v, group_id=group,
                members=[{"member_id": c.member_id, "group_instance_id": c.instance_id} for c in cls],
            )
        else:
            req = request("leave_group", v, group_id=group, member_id=cls[0].member_id)
        self.c.leave_group(req, box)
        return box.value

    def commit(
        self, group: str, offsets: dict[tuple[str, int], int], cl: Client | None = None, v: int = 9,
        metadata: str | None = "", **extra: Any,
    ) -> dict[tuple[str, int], ErrorCode]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, "committed_metadata": metadata})
        fields = dict(
            group_id=group,
            generation_id_or_member_epoch=cl.generation if cl else -1,
            member_id=cl.member_id if cl else "",
            group_instance_id=cl.instance_id if cl else None,
            topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
        )
        fields.update(extra)
        box = Box()
        self.c.offset_commit(request("offset_commit", v, **fields), box)
        return {(t.name, p.partition_index): p.error_code for t in box.value.topics for p in t.partitions}

    def fetch(self, group: str, parts: list[tuple[str, int]] | None, v: int = 7) -> Any:
        topics = None
        if parts is not None:
            by: dict[str, list[int]] = {}
            for t, p in parts:
                by.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by.items()]
        box = Box()
        if v >= 8:
            req = request("offset_fetch", v, groups=[{"group_id": group, "topics": topics}])
        else:
            req = request("offset_fetch", v, group_id=group, topics=topics)
        self.c.offset_fetch(req, box)
        return box.value

    # --- whole cycles ---------------------------------------------------------------
    def join_until_parked(self, group: str, cl: Client, v: int = 9) -> Box:
        """JoinGroup, answering MEMBER_ID_REQUIRED like a real client; returns the box of the
        join that is (or will be) answered by the rebalance."""
        box = self.join(group, cl, v)
        if box.done and box.value.error_code == E.member_id_required:
            cl.member_id = box.value.member_id
            box = self.join(group, cl, v)
        return box

    def absorb_join(self, cl: Client, box: Box) -> Any:
        resp = box.value
        assert resp.error_code == E.none, resp
        cl.member_id = resp.member_id
        cl.generation = resp.generation_id
        return resp

    def form_group(self, group: str, clients: list[Client], v: int = 9) -> dict[str, Any]:
        """Join all, let the rebalance complete, leader assigns ``member_id`` bytes, sync all.
        Returns {member_id: SyncGroup response}."""
        boxes = [self.join_until_parked(group, cl, v) for cl in clients]
        for _ in range(100):  # the initial delay (extended while members arrive)
            if all(b.done for b in boxes):
                break
            self.advance(max(self.config.group_initial_rebalance_delay_ms, 1))
        joins = [self.absorb_join(cl, b) for cl, b in zip(clients, boxes, strict=True)]
        return self.sync_all(group, clients, joins)

    def sync_all(self, group: str, clients: list[Client], joins: list[Any]) -> dict[str, Any]:
        leader = joins[0].leader
        order = [c for c in clients if c.member_id != leader] + [c for c in clients if c.member_id == leader]
        lead_resp = next(j for j in joins if j.member_id == leader)
        assignment = {m.member_id: m.member_id.encode() for m in lead_resp.members}
        sboxes = {c.member_id: self.sync(group, c, assignment if c.member_id == leader else None) for c in order}
        return {m: b.value for m, b in sboxes.items()}
