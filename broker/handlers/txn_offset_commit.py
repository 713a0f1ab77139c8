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

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.TXN_OFFSET_COMMIT, versions=(0, 4))
def txn_offset_commit(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    if broker.authorizer is None:
        return groups.txn_offset_commit(req, getattr(broker, "transactions", None))
    # KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id, READ on the
    # group, READ on each topic
    if not access.authorize(broker, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return response_for(req, topics=_errors(req.topics, ErrorCode.transactional_id_authorization_failed))
    if not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return response_for(req, topics=_errors(req.topics, ErrorCode.group_authorization_failed))
    allowed = access.authorized_names(broker, ctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in req.topics])
    denied = _errors([t for t in req.topics if t.name not in allowed], ErrorCode.topic_authorization_failed)
    if not denied:
        return groups.txn_offset_commit(req, getattr(broker, "transactions", None))
    kept = tuple(t for t in req.topics if t.name in allowed)
    if not kept:
        return response_for(req, topics=denied)
    result = groups.txn_offset_commit(access.replace(req, topics=kept), getattr(broker, "transactions", None))
    return access.then(result, lambda resp: response_for(req, topics=denied + list(resp.topics)))


def _errors(topics: Any, code: ErrorCode) -> list[dict]:
    return [dict(name=t.name, partitions=[dict(partition_index=p.partition_index, error_code=code)
                                          for p in t.partitions]) for t in topics]
