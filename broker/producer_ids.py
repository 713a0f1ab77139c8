"""Producer id allocation for InitProducerId (Kafka's ProducerIdManager): ids come in
blocks persisted in the metadata document before use, so an id is never handed out twice,
even across a crash. In cluster mode the blocks come from ZooKeeper's
/latest_producer_id_block (Kafka's ZK-mode ProducerIdManager), so that no two brokers hand
out the same id: deduplication after a leader change relies on it."""

from __future__ import annotations

from collections.abc import Callable

from .topics import TopicRegistry

PRODUCER_ID_BLOCK = 1000


class ProducerIdManager:
    def __init__(self, registry: TopicRegistry, block_size: int = PRODUCER_ID_BLOCK) -> None:
        self.registry = registry
        self.block_size = block_size
        #: cluster mode: (block size) -> (first, last) id of a block reserved in ZooKeeper
        self.allocate_block: Callable[[int], tuple[int, int]] | None = None
        self._next = 0
        self._limit = 0

    def next_producer_id(self) -> int:
        if self._next >= self._limit and self.allocate_block is not None:
            first, last = self.allocate_block(self.block_size)
            self._next, self._limit = first, last + 1
        elif self._next >= self._limit:
            start = self.registry.next_producer_id_block
            self.registry.next_producer_id_block = start + self.block_size
            self.registry.save()
            self._next, self._limit = start, start + self.block_size
        pid = self._next
        self._next += 1
        return pid
