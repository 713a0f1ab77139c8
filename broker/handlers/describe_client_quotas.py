"""DescribeClientQuotas (key 48), v0-1: the quota entities (user, client id, their
defaults and pairs) whose configs match a filter, with their quota values. Follows
Kafka's ClientQuotasImage.describe (the KRaft broker): a component matches its entity
type exactly (match type 0, a name), its default (1) or any specified name (2); ``strict``
excludes entities with types the filter does not name. Malformed filters fail the whole
request (INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown entity type). Krait has no
IP (connection) quotas, so an ``ip`` filter matches nothing.

Needs DESCRIBE_CONFIGS on the cluster when an authorizer is configured."""

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
from ..security.store import CLIENT_ID, USER, parse_entity_path
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext

IP = "ip"
MATCH_TYPE_EXACT, MATCH_TYPE_DEFAULT, MATCH_TYPE_SPECIFIED = 0, 1, 2


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def parse_filter(components: Any) -> tuple[dict[str, str | None], set[str]]:
    """(exact matches: type -> name or None for the default, types wanted with any name),
    validated as ClientQuotasImage.describe validates them."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        etype = c.entity_type
        if not etype:
            raise _invalid("Invalid empty entity type.")
        if etype in exact or etype in typed:
            raise _invalid(f"Entity type {etype} cannot appear more than once in the filter.")
        if etype not in (IP, USER, CLIENT_ID):
            raise KafkaError(ErrorCode.unsupported_version, f"Unsupported entity type {etype}")
        if c.match_type == MATCH_TYPE_EXACT:
            if c.match is None:
                raise _invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[etype] = c.match
        elif c.match_type == MATCH_TYPE_DEFAULT:
            if c.match is not None:
                raise _invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[etype] = None
        elif c.match_type == MATCH_TYPE_SPECIFIED:
            if c.match is not None:
                raise _invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(etype)
        else:
            raise _invalid(f"Unknown match type {c.match_type}")
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise _invalid("Invalid entity filter component combination. IP filter component should not be used "
                       "with user or clientId filter component.")
    return exact, typed


def matches(entity: dict[str, str | None], exact: dict[str, str | None], typed: set[str], strict: bool) -> bool:
    if strict and len(entity) != len(exact) + len(typed):
        return False
    for etype, name in exact.items():
        if etype not in entity or entity[etype] != name:
            return False
    return all(t in entity for t in typed)


def describe(entities: dict[str, dict[str, str]], components: Any, strict: bool) -> list[dict]:
    """The response entries for the store's entity configs (raises KafkaError)."""
    exact, typed = parse_filter(components)
    out = []
    for path in sorted(entities):
        values = [{"key": k, "value": float(v)} for k, v in sorted(entities[path].items())
                  if k in USER_CLIENT_QUOTA_KEYS]
        if not values:
            continue  # SCRAM credentials only
        try:
            entity = parse_entity_path(path)
        except ValueError:
            continue
        if matches(entity, exact, typed, strict):
            out.append({"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                        "values": values})
    return out


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS, versions=(0, 1))
def describe_client_quotas(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    resp = apis.response_type(ApiKey.DESCRIBE_CLIENT_QUOTAS, ctx.version)
    if not access.authorize_cluster(broker, ctx, AclOperation.DESCRIBE_CONFIGS):
        code = ErrorCode.cluster_authorization_failed
        return make(resp, throttle_time=0, error_code=code, error_message=MESSAGES[int(code)], entries=None)
    try:
        entries = describe(broker.security_store.entities, req.components, req.strict)
    except KafkaError as exc:
        return make(resp, throttle_time=0, error_code=exc.error_code, error_message=exc.message, entries=None)
    return make(resp, throttle_time=0, error_code=ErrorCode.none, error_message=None, entries=entries)
