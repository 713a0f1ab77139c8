"""AlterClientQuotas (key 49), v0-1: set or remove ``producer_byte_rate``,
``consumer_byte_rate``, ``request_percentage`` and ``controller_mutation_rate`` of user /
client-id entities (a None name is the type's default), persisted in the security store
(Kafka's /config/users and /config/clients entity configs). Validation and messages follow
Kafka's ClientQuotaControlManager: entity types, empty names, known keys, values > 0,
whole numbers for the LONG rates; each entity succeeds or fails on its own;
``validate_only`` checks without writing. Krait has no IP (connection) quotas: an ``ip``
entity fails with INVALID_REQUEST.

Needs ALTER_CONFIGS on the cluster when an authorizer is configured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.error_messages import MESSAGES
from protocol.errors import ErrorCode, KafkaError

from ..security import access
from ..security.operations import AclOperation
from ..security.quotas import USER_CLIENT_QUOTA_KEYS
from ..security.store import CLIENT_ID, USER, entity_path
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext

IP = "ip"
_JAVA_LONG_MAX = 2**63 - 1


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def entity_str(entity_data: Any) -> str:
    """ClientQuotaEntity.toString, for messages."""
    inner = ", ".join(f"{e.entity_type}={'null' if e.entity_name is None else e.entity_name}" for e in entity_data)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def validate_entity(entity_data: Any) -> dict[str, str | None]:
    """ClientQuotaControlManager.validateEntity + configKeysForEntityType."""
    entity: dict[str, str | None] = {}
    if not entity_data:
        raise _invalid("Invalid empty client quota entity")
    for e in entity_data:
        etype, name = e.entity_type, e.entity_name
        if etype in entity:
            raise _invalid(f"Invalid client quota entity, duplicate entity entry {etype}")
        if etype not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {etype}")
        entity[etype] = name
        if name is not None and name == "":
            raise _invalid(f"Empty {etype} not supported")
    if IP in entity:
        if USER in entity or CLIENT_ID in entity:
            # Kafka's message, missing space included
            raise _invalid("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        raise _invalid("IP connection quotas are not supported by this broker")
    return entity


def validated_value(key: str, value: float) -> str:
    """ClientQuotaControlManager.validateQuotaKeyValue; the value as the store keeps it
    (a whole number for LONG keys, as Kafka's ZooKeeper mode writes them)."""
    ktype = USER_CLIENT_QUOTA_KEYS.get(key)
    if ktype is None:
        raise _invalid(f"Invalid configuration key {key}")
    if not value > 0.0:
        raise _invalid(f"Quota {key} must be greater than 0")
    if ktype == "DOUBLE":
        return repr(float(value))
    if value > _JAVA_LONG_MAX:
        raise _invalid(f"Proposed value for {key} is too large for a LONG.")
    if abs(value % 1.0) > 1e-6:
        raise _invalid(f"{key} cannot be a fractional value.")
    return str(int(value + 1e-6))


def plan(entries: Any) -> list[tuple[Any, KafkaError | None, str | None, dict[str, str | None]]]:
    """Per request entry: (entity data, error, store path, updates)."""
    seen: set[tuple] = set()
    out = []
    for entry in entries:
        key = tuple((e.entity_type, e.entity_name) for e in entry.entity)
        try:
            if frozenset(key) in seen:
                raise _invalid(f"Ignoring duplicate entity {entity_str(entry.entity)}")
            seen.add(frozenset(key))
            updates: dict[str, str | None] = {}
            for op in entry.ops:
                if op.key in updates:
                    raise _invalid(f"Duplicate quota key {op.key} not updating quota for this entity "
                                   f"{entity_str(entry.entity)}")
                updates[op.key] = None
            entity = validate_entity(entry.entity)
            for op in entry.ops:
                if op.remove:
                    if op.key not in USER_CLIENT_QUOTA_KEYS:
                        # not a quota (the entity's SCRAM credentials live beside): nothing to remove
                        del updates[op.key]
                else:
                    updates[op.key] = validated_value(op.key, float(op.value))
            out.append((entry.entity, None, entity_path(entity), updates))
        except KafkaError as exc:
            out.append((entry.entity, exc, None, {}))
    return out


@handles(ApiKey.ALTER_CLIENT_QUOTAS, versions=(0, 1))
async def alter_client_quotas(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    resp = apis.response_type(ApiKey.ALTER_CLIENT_QUOTAS, ctx.version)

    def entity_out(entity_data: Any) -> list[dict]:
        return [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entity_data]

    if not access.authorize_cluster(broker, ctx, AclOperation.ALTER_CONFIGS):
        code = ErrorCode.cluster_authorization_failed
        return make(resp, throttle_time=0, entries=[
            {"error_code": code, "error_message": MESSAGES[int(code)], "entity": entity_out(e.entity)}
            for e in req.entries])
    results = []
    store = broker.security_store
    for entity_data, error, path, updates in plan(req.entries):
        if error is None and not req.validate_only:
            current = store.entities.get(path, {})
            changed = {k: v for k, v in updates.items() if current.get(k) != v}
            if changed:
                try:
                    await store.alter_entity(path, changed)
                except KafkaError as exc:  # ZooKeeper unreachable: not applied
                    error = exc
        results.append({"error_code": ErrorCode.none if error is None else error.error_code,
                        "error_message": None if error is None else error.message,
                        "entity": entity_out(entity_data)})
    return make(resp, throttle_time=0, entries=results)
