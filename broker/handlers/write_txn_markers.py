"""WriteTxnMarkers (key 27), v1 (Kafka 4 removed v0): a transaction coordinator (another broker, or
``krait transactions abort``) has this broker write COMMIT/ABORT control batches to the
partitions it leads. Answered once the markers are replicated (Kafka appends them with
acks=all); a marker in ``__consumer_offsets`` also completes the group's pending
transactional offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.WRITE_TXN_MARKERS, versions=(1, 1))
def write_txn_markers(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.WRITE_TXN_MARKERS, ctx.version)
    if broker.authorizer is not None and not access.authorize_cluster(broker, ctx, AclOperation.ALTER) and \
            not access.authorize_cluster(broker, ctx, AclOperation.CLUSTER_ACTION):
        # KafkaApis.handleWriteTxnMarkersRequest: ALTER or CLUSTER_ACTION on the cluster
        code = ErrorCode.cluster_authorization_failed
        return make(rtype, markers=[dict(producer_id=m.producer_id, topics=[
            dict(name=t.name, partitions=[dict(partition_index=p, error_code=code) for p in t.partition_indexes])
            for t in m.topics]) for m in req.markers])
    txns = broker.transactions
    answers = []
    waits = []
    for m in req.markers:
        tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        codes, appended = txns.write_markers_locally(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                                     bool(m.transaction_result), tps)
        answers.append((m.producer_id, codes))
        waits += appended

    def response() -> Any:
        markers = []
        for pid, codes in answers:
            topics: dict[str, list[dict]] = {}
            for (t, p), code in codes.items():
                topics.setdefault(t, []).append(dict(partition_index=p, error_code=code))
            markers.append(dict(producer_id=pid, topics=[dict(name=t, partitions=ps) for t, ps in topics.items()]))
        return make(rtype, markers=markers)

    if not waits:
        return response()

    async def after_replication() -> Any:
        got = await broker.replicas.wait_for_high_watermark(waits, txns.commit_timeout_s)
        for _, codes in answers:
            for tp in codes:
                if got.get(tp, ErrorCode.none) != ErrorCode.none:
                    codes[tp] = got[tp]
        return response()

    return after_replication()
