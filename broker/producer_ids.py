"""Producer id allocation for InitProducerId (Kafka's ProducerIdManager): ids come in
blocks persisted before use, so an id is never handed out twice, even across a crash.

The blocks come from the metadata store (ZooKeeper's /latest_producer_id_block, so that
no two brokers hand out the same id, which deduplication after a leader change relies on;
a single node's local store persists them in its metadata document), and the manager is
Kafka's RPCProducerIdManager (KAFKA-14694): a block is fetched when the first id is asked
for, the next one in the background when 90% of the current one is handed out, and a
request finding no block never waits: it fails with COORDINATOR_LOAD_IN_PROGRESS, which
every client retries (Kafka chose it over REQUEST_TIMED_OUT, which older clients treat
as fatal). A store that answers at once (a single node's) hands the block over in the
same call, so no request finds none."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("krait.producer_ids")

PRODUCER_ID_BLOCK = 1000
#: ProducerIdManager.PidPrefetchThreshold
PREFETCH_THRESHOLD = 0.9
#: RPCProducerIdManager.RetryBackoffMs: after a failed fetch, none for this long
RETRY_BACKOFF_S = 0.05


class ProducerIdManager:
    def __init__(self, block_size: int = PRODUCER_ID_BLOCK) -> None:
        self.block_size = block_size
        #: (block size) -> (first, last) id of a block reserved in the metadata store
        self.fetch_block: Callable[[int], asyncio.Future[tuple[int, int]]] | None = None
        self._next = 0
        self._limit = 0
        self._prefetch_at = -1
        self._next_block: tuple[int, int] | None = None
        self._fetching: asyncio.Future | None = None
        self._retry_after = 0.0
        self._failing = False

    def next_producer_id(self) -> int:
        if self._next >= self._limit:
            if self._next_block is None:
                self._maybe_fetch()
            if self._next_block is None:
                raise KafkaError(ErrorCode.coordinator_load_in_progress,
                                 "Producer ID block is full. Waiting for next block")
            first, last = self._next_block
            self._next_block = None
            self._next, self._limit = first, last + 1
            self._prefetch_at = first + int((last + 1 - first) * PREFETCH_THRESHOLD)
        pid = self._next
        self._next += 1
        if pid == self._prefetch_at:
            self._maybe_fetch()
        return pid

    def _maybe_fetch(self) -> None:
        if self._next_block is not None or self._fetching is not None or time.monotonic() < self._retry_after:
            return
        fetching = self.fetch_block(self.block_size)
        if fetching.done():
            self._fetched(fetching)
        else:
            self._fetching = fetching
            fetching.add_done_callback(self._fetched)

    def _fetched(self, fetching: asyncio.Future) -> None:
        self._fetching = None
        if fetching.cancelled():
            return
        try:
            self._next_block = fetching.result()
            # Kafka's ZkProducerIdManager logs each block it acquires. Logged here, once the
            # block is in hand rather than when the store wrote it, it also shows from outside
            # that the next block was ready before the current one ran out.
            log.info("acquired producer id block [%d, %d]", *self._next_block)
            if self._failing:
                log.info("producer id blocks can be allocated again")
                self._failing = False
        except Exception as exc:
            self._retry_after = time.monotonic() + RETRY_BACKOFF_S
            # one line when the trouble starts, not one for every InitProducerId meanwhile
            if not self._failing:
                log.warning("could not allocate a producer id block: %s", exc)
                self._failing = True
