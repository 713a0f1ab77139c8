"""Produce (key 0), v3-11 served (v0-2 advertised, answered UNSUPPORTED_VERSION per
partition): per partition the ReplicaManager validates the batches (storage.validator,
Kafka's LogValidator), assigns offsets, appends the bytes as received and wakes parked
fetches; then the answer. acks=0
sends nothing back (and, as in Kafka, an error closes the connection so the client
notices). A batch refused because of some records names them in the response (KIP-467
record_errors, Produce v8+), so that clients fail those records and report the rest as
collateral.

With an authorizer (KafkaApis.handleProduceRequest): transactional records need WRITE on
the transactional id (else the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
and each topic needs WRITE (else its partitions answer TOPIC_AUTHORIZATION_FAILED, before
any existence check, so that a topic's existence does not leak).

Internal topics are refused (INVALID_TOPIC_EXCEPTION) unless the client id is Kafka's admin
client id, ``__admin_client`` (KafkaApis' internalTopicsAllowed): brokers delete moved
coordinator keys that way (broker/legacy_placement.py)."""

from __future__ import annotations

import inspect
import logging
import struct
import time
from typing import TYPE_CHECKING, Any

from protocol import framing
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, KafkaError, ProtocolError
from protocol.produce_codec import encode_produce_response
from protocol.records import ATTR_TRANSACTIONAL, HEADER_SIZE, parse_header
from storage.transactions import SENTINEL_GUARD
from storage.validator import RecordValidationError

from ..security import access
from ..security.operations import AclOperation, ResourceType
from ..security.quotas import produce_throttle
from ..topics import ADMIN_CLIENT_ID
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


log = logging.getLogger("krait.produce")


@handles(ApiKey.PRODUCE, versions=(3, 11), advertised_from=0)
def produce(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    denied: dict = {}
    if broker.authorizer is not None:
        denied = _unauthorized(broker, ctx, req)
        if denied is None:
            code = ErrorCode.transactional_id_authorization_failed
            preset = {(td.name, pd.index): (code, None) for td in req.topic_data for pd in td.partition_data}
            return _append_all(broker, ctx, req, preset, {})
    if req.transactional_id is None:
        if _has_transactional_records(req):
            # Kafka refuses the whole request: transactional records need a transactional id
            # (its coordinator is the only one who can ever end their transaction)
            code = ErrorCode.transactional_id_authorization_failed
            preset = {(td.name, pd.index): (code, "Transactional records need a transactional id")
                      for td in req.topic_data for pd in td.partition_data}
            return _append_all(broker, ctx, req, preset, {})
    elif broker.transactions.verification and req.acks in (0, 1, -1):
        checks = _transactional_partitions(broker, req, denied)
        if checks:
            return _verify_then_append(broker, ctx, req, checks, denied)
    return _append_all(broker, ctx, req, denied, {})


def _unauthorized(broker: Broker, ctx: RequestContext, req: Any) -> dict | None:
    """The partitions of topics the caller may not WRITE, as preset errors; None when the
    request carries transactional records the caller may not write for its transactional
    id (Kafka refuses the whole request then)."""
    if req.transactional_id is not None and _has_transactional_records(req) and not access.authorize(
            broker, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return None
    names = [td.name for td in req.topic_data]
    allowed = access.authorized_names(broker, ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
    if len(allowed) == len(set(names)):
        return {}
    code = ErrorCode.topic_authorization_failed
    return {(td.name, pd.index): (code, None) for td in req.topic_data if td.name not in allowed
            for pd in td.partition_data}


#: the byte of a batch header holding the low bits of its attributes (big-endian int16 at 21)
_ATTR_LOW_BYTE = 22


def _has_transactional_records(req: Any) -> bool:
    """Is the first batch of any partition transactional? One byte per partition: the
    non-transactional hot path pays no header parse."""
    for td in req.topic_data:
        for pd in td.partition_data:
            records = pd.records
            if records is not None and len(records) >= HEADER_SIZE and records[_ATTR_LOW_BYTE] & ATTR_TRANSACTIONAL:
                return True
    return False


def _transactional_partitions(broker: Broker, req: Any,
                              denied: dict | None = None) -> dict[tuple[str, int], tuple[int, int, Any]]:
    """KIP-890 part 1: the partitions whose records open a transaction here, with
    (producer id, epoch, verification guard): those must be confirmed in the producer's
    transaction by its coordinator before they are written (Kafka's
    appendRecordsWithTransactionVerification). A partition whose transaction is already
    open here needs no question."""
    out = {}
    for td in req.topic_data:
        for pd in td.partition_data:
            records = pd.records
            if not records or len(records) < HEADER_SIZE or (denied and (td.name, pd.index) in denied):
                continue
            try:
                h = parse_header(records)
                if not h.attributes & ATTR_TRANSACTIONAL or h.producer_id < 0:
                    continue
                guard = broker.replicas.start_transaction_verification(td.name, pd.index, h.producer_id,
                                                                       h.base_sequence, h.producer_epoch)
            except (KafkaError, ProtocolError):
                continue  # the append reports it
            if guard is not SENTINEL_GUARD:
                out[(td.name, pd.index)] = (h.producer_id, h.producer_epoch, guard)
    return out


# Kafka's translation of verification errors for the produce response (ReplicaManager and
# AddPartitionsToTxnManager): retriable coordinator trouble becomes NOT_ENOUGH_REPLICAS,
# which every client retries without a metadata refresh.
_VERIFY_RETRIABLE = frozenset({ErrorCode.concurrent_transactions, ErrorCode.network_exception,
                               ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                               ErrorCode.not_coordinator})


def _produce_error(code: ErrorCode, version: int) -> tuple[ErrorCode, str]:
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch, "The producer was fenced by a newer epoch"
    if code == ErrorCode.transaction_abortable:
        # Produce v11+ clients understand TRANSACTION_ABORTABLE (KIP-890); older ones get INVALID_TXN_STATE
        code = ErrorCode.transaction_abortable if version > 10 else ErrorCode.invalid_txn_state
        return code, "Partition was not added to the transaction"
    if code in _VERIFY_RETRIABLE:
        return (ErrorCode.not_enough_replicas,
                f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}")
    return code, f"Transaction verification failed: {code.name}"


async def _verify_then_append(broker: Broker, ctx: RequestContext, req: Any, checks: dict,
                              denied: dict | None = None) -> Any:
    partitions = list(checks)
    pid, epoch, _ = next(iter(checks.values()))
    if any(c[0] != pid for c in checks.values()):
        errors = {tp: (ErrorCode.invalid_producer_id_mapping, "Transactional records contained more than one "
                       "producer ID") for tp in partitions}
        return await _resolve(_append_all(broker, ctx, req, {**errors, **(denied or {})}, {}))
    got = broker.transactions.verify(req.transactional_id, pid, epoch, partitions)
    if not isinstance(got, dict):
        got = await got
    errors = {tp: _produce_error(code, ctx.version) for tp, code in got.items() if code != ErrorCode.none}
    if denied:
        errors.update(denied)
    guards = {tp: g for tp, (_, _, g) in checks.items() if tp not in errors}
    return await _resolve(_append_all(broker, ctx, req, errors, guards))


async def _resolve(result: Any) -> Any:
    return await result if inspect.isawaitable(result) else result


def _append_all(broker: Broker, ctx: RequestContext, req: Any, preset: dict, guards: dict) -> Any:
    """Append every partition (``preset``: (error, message) of partitions refused before,
    ``guards``: verification guards of transactions opened here) and answer."""
    acks = req.acks
    now_ms = int(time.time() * 1000)
    bad_acks = acks not in (0, 1, -1)
    any_error = False
    topics_out = []
    #: acks=all: (tp, required offset, leader epoch) and the entry to answer in
    waits: list[tuple[tuple[str, int], int, int]] = []
    entries: dict[tuple[str, int], dict] = {}
    produced = broker.metrics.produced
    internal_ok = ctx.client_id == ADMIN_CLIENT_ID
    for td in req.topic_data:
        parts = []
        for pd in td.partition_data:
            entry = dict(index=pd.index, error_code=ErrorCode.none, base_offset=-1, log_start_offset=-1)
            refused = preset.get((td.name, pd.index)) if preset else None
            if bad_acks:
                entry["error_code"] = ErrorCode.invalid_required_acks
            elif refused is not None:
                entry["error_code"], entry["error_message"] = refused
                any_error = True
            else:
                try:
                    res = broker.replicas.append_records(td.name, pd.index, pd.records, now_ms, acks=acks,
                                                         verification_guard=guards.get((td.name, pd.index)),
                                                         internal_ok=internal_ok)
                    # an idempotent retry's duplicate adds its bytes, not its records again
                    produced(td.name, 0 if res.duplicate else res.last_offset - res.base_offset + 1, len(pd.records))
                    if acks == -1:
                        tp = (td.name, pd.index)
                        waits.append((tp, res.last_offset + 1, broker.replicas.leader_epoch_of(*tp)))
                        entries[tp] = entry
                    entry["base_offset"] = res.base_offset
                    entry["log_start_offset"] = res.log_start_offset
                    if res.log_append_time_ms >= 0:
                        entry["log_append_time"] = res.log_append_time_ms
                except KafkaError as exc:
                    entry["error_code"] = exc.error_code
                    entry["error_message"] = exc.message
                    if isinstance(exc, RecordValidationError):
                        # the encoder drops both fields for versions before 8
                        entry["record_errors"] = [dict(batch_index=i, batch_index_error_message=m)
                                                  for i, m in exc.record_errors]
                        entry["log_start_offset"] = exc.log_start_offset
                    any_error = True
                    if exc.error_code not in (ErrorCode.unknown_topic_or_partition,):
                        log.info("produce to %s-%d from %s rejected: %s %s", td.name, pd.index, ctx.client_id,
                                 exc.error_code.name, exc.message or "")
            parts.append(entry)
        topics_out.append(dict(name=td.name, partition_responses=parts))
    if acks == 0:
        if any_error:
            ctx.conn.close()
            return None
        # no answer, but the byte rate still counts: the connection is muted (Kafka)
        throttle = produce_throttle(broker, ctx, ctx.size)
        if throttle:
            ctx.conn.mute(throttle)
        return None
    if waits:
        codes = {tp: broker.replicas.replicated_to(tp[0], tp[1], required, epoch) for tp, required, epoch in waits}
        if any(c is None for c in codes.values()):
            return _await_replication(broker, ctx, topics_out, waits, entries, req.timeout.total_seconds())
        _answer_replicated(entries, codes)
    return _response(broker, ctx, topics_out)


def _response(broker: Broker, ctx: RequestContext, topics_out: list[dict]) -> bytearray:
    """The answer's frame, encoded by hand (protocol.produce_codec) rather than through kio."""
    return encode_produce_response(ctx.version, ctx.header.correlation_id, topics_out, _throttle(broker, ctx))


async def _await_replication(broker: Broker, ctx: RequestContext, topics_out, waits, entries,
                             timeout: float) -> Any:
    """acks=all: answer once the ISR has the records (Kafka's delayed produce)."""
    broker.metrics.delay("Produce", len(waits))
    try:
        codes = await broker.replicas.wait_for_high_watermark(waits, timeout)
    finally:
        broker.metrics.delay("Produce", len(waits), -1)
    _answer_replicated(entries, codes)
    return _response(broker, ctx, topics_out)


def _throttle(broker: Broker, ctx: RequestContext) -> int:
    """Kafka's sendResponseCallback: the request's size against the producer byte rate,
    recorded as the answer is made; over the quota the connection is muted (KIP-219)."""
    throttle = produce_throttle(broker, ctx, ctx.size)
    if throttle:
        ctx.conn.mute(throttle)
    return throttle


def _answer_replicated(entries: dict, codes: dict) -> None:
    for tp, code in codes.items():
        if code != ErrorCode.none:
            entry = entries[tp]
            entry["error_code"] = code
            entry["base_offset"] = -1
            entry.pop("log_append_time", None)


def legacy_produce_response(header, frame: bytes) -> list[bytes] | None:
    """Produce v0-2 (advertised, like Kafka, so that old librdkafka keeps compression on)
    carries magic 0/1 message sets, which Krait does not store. Answer every partition
    with UNSUPPORTED_VERSION instead of dropping the connection, so the client reports a
    clear error. v0-2 requests are v3 without the transactional id, and v2/v3 responses
    share a layout (v1 lacks the append time, v0 also the throttle time)."""
    if header.api_version >= 3:
        return None
    body = b"\xff\xff" + bytes(memoryview(frame)[header.body_offset:])  # null transactional id
    v3 = framing.RequestHeader(header.api_key, 3, header.correlation_id, header.client_id, 0)
    req = framing.decode_request(v3, body)
    if req.acks == 0:
        return None
    out = bytearray()
    out += struct.pack(">i", len(req.topic_data))
    for td in req.topic_data:
        name = td.name.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(">i", len(td.partition_data))
        for pd in td.partition_data:
            out += struct.pack(">ihq", pd.index, ErrorCode.unsupported_version, -1)
            if header.api_version >= 2:
                out += struct.pack(">q", -1)
    if header.api_version >= 1:
        out += struct.pack(">i", 0)  # throttle time
    return [struct.pack(">ii", len(out) + 4, header.correlation_id), bytes(out)]
