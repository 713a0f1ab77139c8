"""The security calls of the admin client: ACLs (Describe/Create/DeleteAcls), SCRAM
credentials (Describe/AlterUserScramCredentials, salted and hashed on the client as
Kafka's admin client does) and client quotas (Describe/AlterClientQuotas): the
:class:`SecurityAdmin` an :class:`~broker.tools.admin_client.AdminClient` holds as
``admin.security_admin``, with the values they carry (:class:`AclEntry`,
:class:`ScramCredentialInfo`).

Used by ``krait acls`` and ``krait configs``. Error codes in responses are raised (or
returned per item) as :class:`protocol.errors.KafkaError`; trouble on the client's side is
a :class:`~protocol.client_errors.ClientError`. Nothing here prints.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from protocol.apis import ApiKey
from protocol.client_errors import ClientError, check, kafka_error
from protocol.errors import KafkaError

from ..security.sasl import secure_random_string
from .wire import WireClient

__all__ = [
    "SCRAM_MECHANISMS",
    "AclEntry",
    "ScramCredentialInfo",
    "SecurityAdmin",
    "salted_password",
    "scram_salt",
]

#: ScramMechanism: wire code -> (name, hash, minimum iterations) (Kafka's ScramMechanism)
SCRAM_MECHANISMS: dict[int, tuple[str, str, int]] = {1: ("SCRAM-SHA-256", "sha256", 4096),
                                                      2: ("SCRAM-SHA-512", "sha512", 4096)}


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 Hi(password, salt, i), what Kafka's admin client sends (ScramFormatter.hi):
    PBKDF2-HMAC of the mechanism's hash, one block."""
    digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    return hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)


def scram_salt() -> bytes:
    """Kafka's ScramFormatter.secureRandomBytes: a 130-bit random number written in base
    36, as ASCII bytes."""
    return secure_random_string().encode()


@dataclass(frozen=True)
class AclEntry:
    """One ACL binding as the ACL APIs carry it (codes as on the wire)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: str
    iterations: int


class SecurityAdmin:
    """ACL, SCRAM and quota calls over one connection: the admin client's bootstrap one,
    since these APIs go to any broker."""

    def __init__(self, bootstrap: WireClient) -> None:
        self.bootstrap = bootstrap

    # ACLs (the ACL APIs go to any broker; Kafka's admin client picks the least loaded)

    def describe_acls(self, resource_type: int = 1, resource_name: str | None = None, pattern_type: int = 1,
                      principal: str | None = None, host: str | None = None, operation: int = 1,
                      permission_type: int = 1) -> list[AclEntry]:
        """The ACLs matching a filter (codes: 1 = ANY for each enum; None names match any)."""
        resp = self.bootstrap.request(ApiKey.DESCRIBE_ACLS, resource_type_filter=resource_type,
                                      resource_name_filter=resource_name, pattern_type_filter=pattern_type,
                                      principal_filter=principal, host_filter=host, operation=operation,
                                      permission_type=permission_type)
        check(resp.error_code, resp.error_message)
        return [AclEntry(int(r.resource_type), str(r.resource_name), int(getattr(r, "pattern_type", 3)),
                         str(a.principal), str(a.host), int(a.operation), int(a.permission_type))
                for r in resp.resources for a in r.acls]

    def create_acls(self, acls: list[AclEntry]) -> list[KafkaError | None]:
        """Create ACL bindings; per binding None or the error."""
        resp = self.bootstrap.request(ApiKey.CREATE_ACLS, creations=[dict(
            resource_type=a.resource_type, resource_name=a.resource_name, resource_pattern_type=a.pattern_type,
            principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type)
            for a in acls])
        return [kafka_error(r.error_code, r.error_message) if int(r.error_code) else None for r in resp.results]

    def delete_acls(self, filters: list[AclEntry | dict[str, Any]]) -> list[tuple[KafkaError | None, list[AclEntry]]]:
        """Delete the ACLs matching each filter (an AclEntry, whose names may be None, or a
        dict of DeleteAcls filter fields); per filter (error, the deleted bindings)."""
        wire = []
        for f in filters:
            if isinstance(f, AclEntry):
                f = dict(resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
                         pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
                         operation=f.operation, permission_type=f.permission_type)
            wire.append(f)
        resp = self.bootstrap.request(ApiKey.DELETE_ACLS, filters=wire)
        out: list[tuple[KafkaError | None, list[AclEntry]]] = []
        for r in resp.filter_results:
            err = kafka_error(r.error_code, r.error_message) if int(r.error_code) else None
            out.append((err, [AclEntry(int(m.resource_type), str(m.resource_name), int(getattr(m, "pattern_type", 3)),
                                       str(m.principal), str(m.host), int(m.operation), int(m.permission_type))
                              for m in r.matching_acls if int(m.error_code) == 0]))
        return out

    # SCRAM credentials

    def describe_user_scram_credentials(self, users: list[str] | None = None,
                                        ) -> dict[str, list[ScramCredentialInfo] | KafkaError]:
        """user -> its credentials (mechanism, iterations), or the error for that user
        (RESOURCE_NOT_FOUND when it has none). ``users`` None: every user with one."""
        resp = self.bootstrap.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                                      users=None if users is None else [dict(name=u) for u in users])
        check(resp.error_code, resp.error_message, context="DescribeUserScramCredentials")
        out: dict[str, list[ScramCredentialInfo] | KafkaError] = {}
        for r in resp.results:
            if int(r.error_code):
                out[str(r.user)] = kafka_error(r.error_code, r.error_message)
            else:
                out[str(r.user)] = [ScramCredentialInfo(SCRAM_MECHANISMS.get(int(c.mechanism), ("UNKNOWN",))[0],
                                                        int(c.iterations)) for c in r.credential_infos]
        return out

    def alter_user_scram_credentials(self, upsertions: Iterable[tuple[str, str, int, str]] = (),
                                     deletions: Iterable[tuple[str, str]] = (),
                                     ) -> dict[str, KafkaError | None]:
        """Upsert (user, mechanism name, iterations, password) and delete (user, mechanism
        name) credentials; the client salts and hashes, as Kafka's admin client does (the
        password never goes on the wire). Per user None or the error."""
        codes = {name: code for code, (name, _, _) in SCRAM_MECHANISMS.items()}
        ups = []
        for user, mechanism, iterations, password in upsertions:
            if mechanism not in codes:
                raise ClientError(f"Unknown SCRAM mechanism {mechanism}")
            salt = scram_salt()
            ups.append(dict(name=user, mechanism=codes[mechanism], iterations=iterations, salt=salt,
                            salted_password=salted_password(mechanism, password, salt, iterations)))
        dels = []
        for user, mechanism in deletions:
            if mechanism not in codes:
                raise ClientError(f"Unknown SCRAM mechanism {mechanism}")
            dels.append(dict(name=user, mechanism=codes[mechanism]))
        # One request per alteration: a KRaft controller (ScramControlManager) refuses a
        # second alteration of the same user in one request (DUPLICATE_RESOURCE), which
        # would fail Kafka's own documented example (SCRAM-SHA-256 and SCRAM-SHA-512 for
        # alice at once). The first error of a user is kept.
        out: dict[str, KafkaError | None] = {}
        for kind, alteration in [*(("deletions", d) for d in dels), *(("upsertions", u) for u in ups)]:
            resp = self.bootstrap.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                                          **{"deletions": [], "upsertions": [], kind: [alteration]})
            for r in resp.results:
                error = kafka_error(r.error_code, r.error_message) if int(r.error_code) else None
                if out.get(str(r.user)) is None:
                    out[str(r.user)] = error
        return out

    # client quotas

    def describe_client_quotas(self, components: list[tuple[str, int, str | None]], strict: bool = False,
                               ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """Quotas of the entities matching ``components`` ((entity type, match type
        0 exact / 1 default / 2 any, name)): [(entity {type: name or None for the
        default}, {key: value})]."""
        resp = self.bootstrap.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, components=[
            dict(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict)
        check(resp.error_code, resp.error_message, context="DescribeClientQuotas")
        return [({str(e.entity_type): e.entity_name for e in entry.entity},
                 {str(v.key): float(v.value) for v in entry.values}) for entry in resp.entries or ()]

    def alter_client_quotas(self, entity: dict[str, str | None], ops: dict[str, float | None],
                            validate_only: bool = False) -> None:
        """Set (a value) or remove (None) quota keys of one entity ({type: name or None})."""
        resp = self.bootstrap.request(ApiKey.ALTER_CLIENT_QUOTAS, entries=[dict(
            entity=[dict(entity_type=t, entity_name=n) for t, n in entity.items()],
            ops=[dict(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])],
            validate_only=validate_only)
        for r in resp.entries:
            check(r.error_code, r.error_message)
