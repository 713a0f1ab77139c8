"""DescribeTransactions (key 65), v0: state, producer id and epoch, timeout, start time
and partitions of transactional ids this broker coordinates (NOT_COORDINATOR for others:
the admin client asks each id's coordinator)."""

from __future__ import annotations

import datetime
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


#: kio's non-nullable start time for Java's default 0
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@handles(ApiKey.DESCRIBE_TRANSACTIONS, versions=(0, 0))
def describe_transactions(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    txns = broker.transactions
    if broker.authorizer is None:
        return txns.call(txns.coordinator.describe_transactions, req)
    # KafkaApis.handleDescribeTransactionsRequest: DESCRIBE on each transactional id, and
    # only the partitions of topics the caller may DESCRIBE
    ids = list(req.transactional_ids)
    allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, ids)
    kept = tuple(i for i in ids if i in allowed)
    result = txns.call(txns.coordinator.describe_transactions, access.replace(req, transactional_ids=kept)) \
        if kept else None

    def merge(resp: Any) -> Any:
        answers = iter(resp.transaction_states if resp is not None else ())
        states = []
        for tid in ids:
            if tid not in allowed:
                states.append(dict(transactional_id=tid, error_code=ErrorCode.transactional_id_authorization_failed,
                                   transaction_state="", transaction_timeout=0, transaction_start_time=_EPOCH,
                                   producer_id=0, producer_epoch=0, topics=[]))
                continue
            state = next(answers)
            visible = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                              [t.topic for t in state.topics])
            if len(visible) < len({t.topic for t in state.topics}):
                state = access.replace(state, topics=tuple(t for t in state.topics if t.topic in visible))
            states.append(state)
        return response_for(req, transaction_states=states)

    return merge(None) if result is None else access.then(result, merge)
