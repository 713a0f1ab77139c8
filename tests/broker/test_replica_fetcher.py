"""The follower's fetcher takes a leader's batches only for a partition it follows from that
leader at that epoch (real storage, a real ReplicaManager and Partition; the leader's answer
is what the fetcher's socket would have read)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.cluster.election import PartitionState
from broker.replica.fetcher import ReplicaFetcher, ReplicaFetcherManager
from broker.replica.manager import ReplicaManager
from broker.replica.partition import Partition
from protocol.errors import ErrorCode
from protocol.records import build_batch
from storage.config import LogConfig
from storage.manager import LogManager


def _answer(records: bytes) -> SimpleNamespace:
    # the fields of a FetchResponse partition the fetcher reads
    return SimpleNamespace(error_code=ErrorCode.none, diverging_epoch=None, records=records, high_watermark=1,
                           log_start_offset=0)


def test_a_batch_of_the_old_epoch_is_not_taken_once_this_broker_leads(tmp_path):
    async def scenario() -> None:
        logs = LogManager([str(tmp_path)], LogConfig(), replicated=True)
        rm = ReplicaManager(logs, broker_id=3)
        plog = logs.create("t", 0)
        part = rm.partitions[("t", 0)] = Partition("t", 0, plog, broker_id=3)
        manager = ReplicaFetcherManager(3, rm, lambda b: None, fetch_max_bytes=1 << 20, response_max_bytes=1 << 20,
                                        max_wait_ms=500, backoff_ms=100)
        fetcher = ReplicaFetcher(manager, leader_id=2)
        batch = build_batch([(b"k", b"from leader 2 at epoch 78")])
        # following broker 2 at epoch 78: its batch is taken
        part.apply(PartitionState(2, 78, (2, 3), 1, 1), (2, 3), 0)
        fetcher.partitions = {("t", 0): 78}
        fetcher._handle(("t", 0), 0, _answer(batch))
        assert plog.log_end_offset == 1
        # elected at epoch 79 (the stopped fetcher's answer still comes in): not taken
        part.apply(PartitionState(3, 79, (3,), 1, 2), (2, 3), 0)
        fetcher._handle(("t", 0), 1, _answer(batch))
        assert plog.log_end_offset == 1 and plog.epoch_cache.end_offset_for(78, 1)[1] == 1
        # a fetcher told to stop forgets what it followed
        fetcher.stop()
        assert fetcher.partitions == {}

    asyncio.run(scenario())
