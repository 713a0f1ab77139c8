"""AlterUserScramCredentials (key 51), v0: add, replace and delete users' SCRAM credentials.
The client sends the salt and the salted password; the broker keeps only the salt, StoredKey,
ServerKey and iterations (Kafka's ScramControlManager rules and messages), in the security
store (krait-security.json, or ZooKeeper's /config/users in cluster mode). Needs ALTER on the
cluster when an authorizer is configured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from ..security import access
from ..security.operations import AclOperation
from ..security.sasl import SCRAM_MAX_ITERATIONS, SCRAM_MECHANISM_CODES, SCRAM_MIN_ITERATIONS, ScramCredential
from ..security.store import entity_path
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext

_DUPLICATE = "A user credential cannot be altered twice in the same request"


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in SCRAM_MECHANISM_CODES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, versions=(0, 0))
async def alter_user_scram_credentials(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    resp_type = apis.response_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.version)
    if not access.authorize_cluster(broker, ctx, AclOperation.ALTER):
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return make(resp_type, throttle_time=0, results=[
            dict(user=u, error_code=ErrorCode.cluster_authorization_failed, error_message=None) for u in users])
    store = broker.security_store
    errors: dict[str, tuple[ErrorCode, str]] = {}
    deletions: dict[str, Any] = {}
    upserts: dict[str, Any] = {}
    for d in req.deletions:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = (ErrorCode.duplicate_resource, _DUPLICATE)
            continue
        err = _check_name_and_mechanism(d.name, d.mechanism)
        if err is None and SCRAM_MECHANISM_CODES[d.mechanism] not in store.entities.get(entity_path({"user": d.name}), {}):
            err = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        if err is not None:
            errors[d.name] = err
        else:
            deletions[d.name] = d
    for u in req.upsertions:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = (ErrorCode.duplicate_resource, _DUPLICATE)
            continue
        err = _check_name_and_mechanism(u.name, u.mechanism)
        if err is None and u.iterations < SCRAM_MIN_ITERATIONS:
            err = (ErrorCode.unacceptable_credential, "Too few iterations")
        elif err is None and u.iterations > SCRAM_MAX_ITERATIONS:
            err = (ErrorCode.unacceptable_credential, "Too many iterations")
        if err is not None:
            errors[u.name] = err
        else:
            upserts[u.name] = u
    results = []

    async def alter(user: str, updates: dict[str, str | None]) -> None:
        try:
            await store.alter_entity(entity_path({"user": user}), updates)
        except KafkaError as exc:  # ZooKeeper unreachable: not applied
            results.append(dict(user=user, error_code=exc.error_code, error_message=exc.message))
        else:
            results.append(dict(user=user, error_code=ErrorCode.none, error_message=None))

    for d in deletions.values():
        await alter(d.name, {SCRAM_MECHANISM_CODES[d.mechanism]: None})
    for u in upserts.values():
        mech = SCRAM_MECHANISM_CODES[u.mechanism]
        cred = ScramCredential.from_salted_password(mech, bytes(u.salt), bytes(u.salted_password), u.iterations)
        await alter(u.name, {mech: cred.to_string()})
    for name, (code, message) in errors.items():
        results.append(dict(user=name, error_code=code, error_message=message))
    return make(resp_type, throttle_time=0, results=results)
