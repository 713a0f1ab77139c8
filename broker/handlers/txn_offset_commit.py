"""TxnOffsetCommit (key 28), v0-4: a transactional producer commits a consumer group's
offsets inside its transaction (``sendOffsetsToTransaction``). The group coordinator
writes them to __consumer_offsets as a transactional batch of the producer; they stay
pending, invisible to OffsetFetch, until the transaction's COMMIT or ABORT marker.

Before writing, the group's __consumer_offsets partition is verified to be in the
producer's transaction with the transaction coordinator (KIP-890 part 1,
``transaction.partition.verification.enable``), as Kafka does; without a transaction
coordinator on this broker the verification is skipped. v3+ carry the member's generation,
member id and instance id, checked as for OffsetCommit; v4 clients understand
TRANSACTION_ABORTABLE."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.TXN_OFFSET_COMMIT, versions=(0, 4))
def txn_offset_commit(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return groups.txn_offset_commit(req, getattr(broker, "transactions", None))
