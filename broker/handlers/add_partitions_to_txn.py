"""AddPartitionsToTxn (key 24), v0-4: a transactional producer adds partitions to its
transaction before producing to them (v0-3, from clients); brokers verify that a
partition is in a producer's transaction before its first transactional write there (v4,
``verify_only``, KIP-890). Served by the transaction coordinator."""

from __future__ import annotations

from collections.abc import Callable
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


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, versions=(0, 4))
def add_partitions_to_txn(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None:
        refused = _refused(broker, ctx, req)
        if refused is not None:
            return refused
    txns = broker.transactions
    return txns.call(txns.coordinator.add_partitions_to_txn, req)


def _refused(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """KafkaApis.handleAddPartitionsToTxnRequest: v4 comes from brokers and needs
    CLUSTER_ACTION; v0-3 need WRITE on the transactional id (else every partition is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else those partitions are
    TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED). The response, or
    None to go on."""
    if ctx.version >= 4:
        if access.authorize_cluster(broker, ctx, AclOperation.CLUSTER_ACTION):
            return None
        return response_for(req, error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=[])
    topics = req.v3_and_below_topics
    if not access.authorize(broker, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                            req.v3_and_below_transactional_id):
        return response_for(req, results_by_topic_v3_and_below=_results(
            topics, lambda _t, _p: ErrorCode.transactional_id_authorization_failed))
    allowed = access.authorized_names(broker, ctx, AclOperation.WRITE, ResourceType.TOPIC, [t.name for t in topics])
    if all(t.name in allowed for t in topics):
        return None
    reg = broker.registry

    def code(t: Any, p: int) -> ErrorCode:
        if t.name not in allowed:
            return ErrorCode.topic_authorization_failed
        info = reg.get(t.name)
        if info is None or not 0 <= p < info.partitions:
            return ErrorCode.unknown_topic_or_partition
        return ErrorCode.operation_not_attempted

    return response_for(req, results_by_topic_v3_and_below=_results(topics, code))


def _results(topics: Any, code: Callable[[Any, int], ErrorCode]) -> list[dict]:
    by_topic: dict[str, dict[int, ErrorCode]] = {}
    for t in topics:
        for p in t.partitions:
            by_topic.setdefault(t.name, {})[p] = code(t, p)
    return [dict(name=t, results_by_partition=[dict(partition_index=p, partition_error_code=c) for p, c in ps.items()])
            for t, ps in by_topic.items()]
