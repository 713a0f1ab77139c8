"""ShareFetch (key 78), v1-2: KIP-932 share groups. A member fetches from its share session's
partitions; each partition answers the whole batches read and the offset ranges acquired for
the member under a lock of the group's ``share.record.lock.duration.ms`` (the client
delivers only those); acknowledgements may ride on the request and are applied first. Epoch
0 opens the session, -1 closes it (the member's records go back to the group) without
fetching. broker/share/ does the work.

Authorisation as KafkaApis.handleShareFetchRequest: READ on the group (else the whole
request is GROUP_AUTHORIZATION_FAILED), READ on each topic (else TOPIC_AUTHORIZATION_FAILED
for its partitions); an unknown topic id answers UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..replica.share_state import AckBatch
from ..security import access
from ..security.operations import AclOperation, ResourceType
from ..share.sessions import ShareSessionError
from . import handles
from .metadata import brokers

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


def acknowledgements(topics: Any) -> dict[tuple[uuid.UUID, int], list[AckBatch]]:
    """The acknowledgement batches of a ShareFetch or ShareAcknowledge, by partition."""
    out: dict[tuple[uuid.UUID, int], list[AckBatch]] = {}
    for t in topics:
        for p in t.partitions:
            batches = [AckBatch(b.first_offset, b.last_offset, tuple(int(x) for x in b.acknowledge_types))
                       for b in p.acknowledgement_batches]
            if batches:
                out[(t.topic_id, p.partition_index)] = batches
    return out


def denied_topics(broker: Broker, ctx: RequestContext, topic_ids: set[uuid.UUID]) -> set[uuid.UUID]:
    """Topic ids the caller may not READ (none without an authorizer)."""
    if broker.authorizer is None:
        return set()
    out = set()
    for tid in topic_ids:
        info = broker.registry.by_id.get(tid)
        if info is not None and not access.authorize(broker, ctx, AclOperation.READ, ResourceType.TOPIC, info.name):
            out.add(tid)
    return out


def group_denied(broker: Broker, ctx: RequestContext, group_id: str) -> bool:
    return broker.authorizer is not None and not access.authorize(broker, ctx, AclOperation.READ,
                                                                  ResourceType.GROUP, group_id)


class ShareRequest:
    """What ShareFetch and ShareAcknowledge check first: a group and member id, READ on the
    group; ``refusal`` is the whole-request answer when one fails (None otherwise)."""

    def __init__(self, broker: Broker, ctx: RequestContext, req: Any, api_key: int, api: str) -> None:
        self.rtype = apis.response_type(api_key, ctx.version)
        self.group_id = req.group_id or ""
        self.member_id = req.member_id or ""
        self.lock_ms = broker.share.lock_duration_ms(self.group_id) if self.group_id else 0
        self.refusal: Any = None
        if not self.group_id or not self.member_id:
            self.refusal = self.error(ErrorCode.invalid_request, f"{api} needs a group id and a member id.")
        elif group_denied(broker, ctx, self.group_id):
            self.refusal = self.error(ErrorCode.group_authorization_failed)

    def error(self, code: ErrorCode, message: str | None = None) -> Any:
        return self.response(code, message, [], [])

    def response(self, code: ErrorCode, message: str | None, topics: list[dict], endpoints: list[dict]) -> Any:
        return make(self.rtype, throttle_time=0, error_code=code, error_message=message,
                    acquisition_lock_timeout=self.lock_ms, responses=topics, node_endpoints=endpoints)


def node_endpoints(broker: Broker, ctx: RequestContext) -> list[dict]:
    return [dict(node_id=b["node_id"], host=b["host"], port=b["port"], rack=b.get("rack"))
            for b in brokers(broker, ctx)]


@handles(ApiKey.SHARE_FETCH, versions=(1, 2))
async def share_fetch(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    share = broker.share
    sr = ShareRequest(broker, ctx, req, ApiKey.SHARE_FETCH, "ShareFetch")
    if sr.refusal is not None:
        return sr.refusal
    group_id, member_id = sr.group_id, sr.member_id
    fetch_keys = [(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions]
    forget = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    acks = acknowledgements(req.topics)
    try:
        context = share.sessions.new_context(group_id, member_id, req.share_session_epoch, fetch_keys, forget,
                                             bool(acks), ctx.conn)
    except ShareSessionError as exc:
        return sr.error(exc.code, str(exc))
    denied = denied_topics(broker, ctx, {tid for tid, _ in [*context.partitions, *acks]})
    errors: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
    for key in {*context.partitions, *acks}:
        if key[0] in denied:
            errors[key] = (ErrorCode.topic_authorization_failed, None)
        elif key[0] not in broker.registry.by_id:
            errors[key] = (ErrorCode.unknown_topic_id, None)
    ack_results = await share.acknowledge(group_id, member_id, {k: v for k, v in acks.items() if k not in errors})
    fetched: dict = {}
    if context.final:
        await share.release_member(group_id, member_id, context.session.partitions if context.session else None)
        share.sessions.remove(group_id, member_id)
    else:
        wanted = [k for k in context.partitions if k not in errors]
        max_records = getattr(req, "max_records", 0) or 500
        batch_size = getattr(req, "batch_size", 0) or None
        fetched = await share.fetch(group_id, member_id, wanted, int(req.max_wait.total_seconds() * 1000),
                                    req.max_bytes, max_records, batch_size)
    session = context.session
    topics: dict[uuid.UUID, list[dict]] = {}
    for key in dict.fromkeys([*context.partitions, *acks]):
        pf = fetched.get(key)
        err, msg = errors.get(key, (pf.error, pf.message) if pf is not None else (ErrorCode.none, None))
        ack_err = ack_results.get(key)
        has_records = pf is not None and bool(pf.acquired)
        is_error = err != ErrorCode.none or ack_err is not None
        if not context.full and key not in acks and session is not None \
                and not session.must_respond(key, has_records, is_error):
            continue
        topics.setdefault(key[0], []).append(dict(
            partition_index=key[1], error_code=err, error_message=msg,
            acknowledge_error_code=ack_err.error_code if ack_err is not None else ErrorCode.none,
            acknowledge_error_message=ack_err.message if ack_err is not None else None,
            current_leader=dict(leader_id=pf.leader_id if pf else -1, leader_epoch=pf.leader_epoch if pf else -1),
            records=pf.records if has_records else b"",  # kio writes no null records here
            acquired_records=[dict(first_offset=a.first_offset, last_offset=a.last_offset,
                                   delivery_count=a.delivery_count) for a in pf.acquired] if has_records else []))
    leader_moved = any(e[0] == ErrorCode.not_leader_or_follower for e in errors.values()) or any(
        pf.error == ErrorCode.not_leader_or_follower for pf in fetched.values())
    return sr.response(ErrorCode.none, None, [dict(topic_id=tid, partitions=parts) for tid, parts in topics.items()],
                       node_endpoints(broker, ctx) if leader_moved else [])
