"""DescribeUserScramCredentials (key 50), v0: which SCRAM mechanisms (and iterations) each
user has credentials for, never the credentials; Kafka's ScramImage.describe rules and
messages. Needs DESCRIBE on the cluster when an authorizer is configured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation
from ..security.sasl import SCRAM_MECHANISM_CODES, ScramCredential
from ..security.store import parse_entity_path
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


def _scram_users(broker: Broker) -> dict[str, list[dict]]:
    """user -> credential infos, from the user entities that hold SCRAM credentials."""
    out: dict[str, list[dict]] = {}
    for path, cfg in broker.security_store.entities.items():
        entity = parse_entity_path(path)
        if set(entity) != {"user"} or entity["user"] is None:
            continue
        infos = []
        for code, mech in SCRAM_MECHANISM_CODES.items():
            if mech in cfg:
                try:
                    infos.append(dict(mechanism=code, iterations=ScramCredential.from_string(cfg[mech]).iterations))
                except ValueError:
                    continue
        if infos:
            out[entity["user"]] = infos
    return out


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, versions=(0, 0))
def describe_user_scram_credentials(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    resp_type = apis.response_type(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ctx.version)
    if not access.authorize_cluster(broker, ctx, AclOperation.DESCRIBE):
        return make(resp_type, throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                    error_message=None, results=())
    known = _scram_users(broker)
    if not req.users:
        wanted = {u: False for u in known}
    else:
        wanted = {}
        for u in req.users:
            wanted[u.name] = u.name in wanted  # True: asked twice
    results = []
    for user, duplicate in wanted.items():
        if duplicate:
            results.append(dict(user=user, error_code=ErrorCode.duplicate_resource, credential_infos=(),
                                error_message="Cannot describe SCRAM credentials for the same user twice in a "
                                              "single request: " + user))
        elif user in known:
            results.append(dict(user=user, error_code=ErrorCode.none, error_message=None, credential_infos=known[user]))
        else:
            results.append(dict(user=user, error_code=ErrorCode.resource_not_found, credential_infos=(),
                                error_message="Attempt to describe a user credential that does not exist: " + user))
    return make(resp_type, throttle_time=0, error_code=ErrorCode.none, error_message=None, results=results)
