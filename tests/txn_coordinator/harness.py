"""Test doubles for the pure transaction coordinator: the group coordinator tests' fake clock
and in-memory log, a producer-id allocator, a marker sender that records requests (and can
answer them at once), and a Harness with one method per API that serializes every response
through kio (so a response with a wrong field type fails here, not on a socket)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from coordinator.responses import response_class
from coordinator.state import partition_for_group
from protocol.errors import KafkaError
from tests.coordinator.harness import Box, FakeClock, MemoryLog, request
from txn_coordinator import MarkerRequest, TopicPartition, TransactionConfig, TransactionCoordinator
from txn_coordinator.records import decode_key, decode_value

E = ErrorCode
TP = TopicPartition

__all__ = ["E", "TP", "Box", "FakeClock", "MemoryLog", "FakeAllocator", "FakeMarkerSender", "TxnHarness", "request"]


class FakeAllocator:
    """Producer ids 1000, 1001, ...; ``fail`` makes allocation raise."""

    def __init__(self, first: int = 1000) -> None:
        self.next = first
        self.fail: BaseException | None = None

    def next_producer_id(self) -> int:
        if self.fail is not None:
            raise self.fail
        pid = self.next
        self.next += 1
        return pid


class FakeMarkerSender:
    """Records each marker request with its completion callback. With ``auto`` set, answers
    every partition NONE at once (inside send), like a single broker writing locally."""

    def __init__(self) -> None:
        self.sent: list[tuple[MarkerRequest, Callable[[Any], None]]] = []
        self.auto = False
        self.fail: BaseException | None = None

    def send(self, req: MarkerRequest, on_complete: Callable[[Any], None]) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append((req, on_complete))
        if self.auto:
            on_complete(dict.fromkeys(req.partitions, E.none))

    @property
    def last(self) -> MarkerRequest:
        return self.sent[-1][0]

    def complete(self, index: int = -1, results: dict[TopicPartition, Any] | None = None) -> None:
        """Answer request ``index``: ``results``, or NONE for every partition."""
        req, cb = self.sent[index]
        cb(dict.fromkeys(req.partitions, E.none) if results is None else results)


def serialize(resp: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(resp))(buf, resp)
    return buf.getvalue()


def answered(req: Any, box: Box) -> Any:
    """The one response, of the request's own version, and serializable."""
    resp = box.value
    assert type(resp) is response_class(type(req))
    serialize(resp)
    return resp


class TxnHarness:
    def __init__(self, *, load: bool = True, partition_exists: Callable[[str, int], bool] | None = None,
                 **cfg: Any) -> None:
        cfg.setdefault("transaction_state_log_num_partitions", 50)
        self.config = TransactionConfig(**cfg)
        self.clock = FakeClock()
        self.log = MemoryLog()
        self.ids = FakeAllocator()
        self.markers = FakeMarkerSender()
        self.c = self.new_coordinator(partition_exists)
        if load:
            self.load_all(self.c)

    def new_coordinator(self, partition_exists: Callable[[str, int], bool] | None = None) -> TransactionCoordinator:
        return TransactionCoordinator(self.config, self.clock, self.log, self.ids, self.markers,
                                      partition_for_group=lambda g: partition_for_group(g, 50),
                                      partition_exists=partition_exists)

    def load_all(self, c: TransactionCoordinator, epoch: int = 0) -> None:
        """Load every partition from the in-memory log (a fresh coordinator on a restart)."""
        for p in range(self.config.transaction_state_log_num_partitions):
            c.start_loading(p, epoch)
            c.load_partition(p, self.log.replay(p))
            c.finished_loading(p)

    def advance(self, ms: int) -> None:
        self.clock.t += ms
        self.c.poll()

    # --- what was written -------------------------------------------------------
    def records(self, tid: str) -> list[Any]:
        """Decoded values (None for tombstones) written for ``tid``, in order."""
        p = self.c.partition_for(tid)
        return [None if v is None else decode_value(v) for k, v in self.log.partitions.get(p, []) if decode_key(k) == tid]

    def meta(self, tid: str) -> Any:
        m = self.c.transaction(tid)
        assert m is not None, tid
        return m

    # --- API calls ----------------------------------------------------------------
    def init(self, tid: str | None, timeout: int = 60_000, v: int = 5, pid: int = -1, epoch: int = -1) -> Any:
        fields: dict[str, Any] = {"transactional_id": tid, "transaction_timeout": timeout}
        if v >= 3:
            fields.update(producer_id=pid, producer_epoch=epoch)
        req = request("init_producer_id", v, **fields)
        box = Box()
        self.c.init_producer_id(req, box)
        return answered(req, box)

    def begin(self, tid: str, timeout: int = 60_000, parts: tuple[TopicPartition, ...] = (TP("t", 0),)) -> tuple[int, int]:
        """InitProducerId then AddPartitionsToTxn: (producer id, epoch) of an Ongoing transaction."""
        r = self.init(tid, timeout)
        assert r.error_code == E.none, r
        errors = self.add(tid, r.producer_id, r.producer_epoch, parts)
        assert set(errors.values()) == {E.none}, errors
        return r.producer_id, r.producer_epoch

    def add(self, tid: str, pid: int, epoch: int, parts: tuple[TopicPartition, ...] | list[TopicPartition],
            v: int = 3) -> dict[TopicPartition, ErrorCode]:
        by: dict[str, list[int]] = {}
        for t, p in parts:
            by.setdefault(t, []).append(p)
        topics = [{"name": t, "partitions": ps} for t, ps in by.items()]
        if v >= 4:
            req = request("add_partitions_to_txn", v, transactions=[
                {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": False, "topics": topics}])
        else:
            req = request("add_partitions_to_txn", v, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                          v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics)
        box = Box()
        self.c.add_partitions_to_txn(req, box)
        resp = answered(req, box)
        results = resp.results_by_transaction[0].topic_results if v >= 4 else resp.results_by_topic_v3_and_below
        return {TP(t.name, p.partition_index): p.partition_error_code for t in results for p in t.results_by_partition}

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str, v: int = 3) -> ErrorCode:
        req = request("add_offsets_to_txn", v, transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group)
        box = Box()
        self.c.add_offsets_to_txn(req, box)
        return answered(req, box).error_code

    def end(self, tid: str, pid: int, epoch: int, commit: bool = True, v: int = 3) -> Any:
        req = request("end_txn", v, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
        box = Box()
        self.c.end_txn(req, box)
        return answered(req, box)

    def describe(self, *tids: str) -> list[Any]:
        req = request("describe_transactions", 0, transactional_ids=list(tids))
        box = Box()
        self.c.describe_transactions(req, box)
        return list(answered(req, box).transaction_states)

    def list_(self, v: int = 1, **filters: Any) -> Any:
        req = request("list_transactions", v, **filters)
        box = Box()
        self.c.list_transactions(req, box)
        return answered(req, box)


def log_error(code: ErrorCode) -> KafkaError:
    """What a failing TransactionStateLog raises."""
    return KafkaError(code, f"append failed: {code.name}")
