"""HTTP basic auth of the Schema Registry against the broker's own SASL users: the PLAIN
users of every SASL listener's JAAS config and the SCRAM credentials in the metadata store
(a SCRAM user's password is checked by deriving its stored key, so no password is kept).
Auth is on when the broker has a SASL listener; then every request must authenticate, and
a write (register, delete, config and mode changes) needs one of ``super.users`` when an
authorizer is configured, as Confluent's registry with basic auth and a role for writes."""

from __future__ import annotations

import base64
import binascii
import hmac
from typing import TYPE_CHECKING

from ..security.authorizer import parse_super_users
from ..security.sasl import SCRAM_MECHANISMS, ScramCredential

if TYPE_CHECKING:
    from ..broker import Broker


class RegistryAuth:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.plain_users: dict[str, str] = {}
        for sec in broker.listener_security.values():
            if sec.sasl is not None:
                self.plain_users.update(sec.sasl.plain_users)
        self.enabled = any(sec.sasl is not None for sec in broker.listener_security.values())
        self.super_users = parse_super_users(broker.config.originals.get("super.users"))

    def authenticate(self, header: str | None) -> str | None:
        """The user a ``Authorization: Basic ...`` header proves, else None."""
        if not header or not header.startswith("Basic "):
            return None
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if not sep or not user:
            return None
        expected = self.plain_users.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return user
        for mechanism in SCRAM_MECHANISMS:
            cred = self.broker.scram_credential(mechanism, user)
            if cred is not None and _scram_matches(mechanism, cred, password):
                return user
        return None

    def may_write(self, user: str | None) -> bool:
        if not self.enabled:
            return True
        if self.broker.authorizer is None:
            return user is not None
        return f"User:{user}" in self.super_users


def _scram_matches(mechanism: str, cred: ScramCredential, password: str) -> bool:
    expected = ScramCredential.from_password(mechanism, password, cred.salt, cred.iterations)
    return hmac.compare_digest(expected.stored_key, cred.stored_key)
