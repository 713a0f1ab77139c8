"""The server side of a SASL listener's authentication, one per connection: Kafka's
SaslServerAuthenticator as a state machine with no I/O.

Before authentication only ApiVersions, SaslHandshake (v1: tokens then travel in
SaslAuthenticate requests) and SaslAuthenticate are answered; anything else closes the
connection, as in Kafka. A failed exchange is answered (after
``connection.failed.authentication.delay.ms``, which the connection applies) and the
connection closed. With ``connections.max.reauth.ms`` the session lifetime goes to the client
(SaslAuthenticate v1+), which re-authenticates with a new SaslHandshake on the same
connection; the principal may not change, and a connection past its session expiry is closed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from .sasl import ListenerSasl, SaslAuthenticationError, ScramCredential

log = logging.getLogger("krait.sasl")

HANDSHAKE_OR_VERSIONS = "handshake_or_versions"
HANDSHAKE = "handshake"
AUTHENTICATE = "authenticate"
COMPLETE = "complete"
FAILED = "failed"
#: a re-authentication asked for another mechanism: the next token is refused (Kafka's REAUTH_BAD_MECHANISM)
REAUTH_BAD_MECHANISM = "reauth_bad_mechanism"


@dataclass
class Outcome:
    """What the connection does with a frame during authentication."""

    #: a kio response to send (None: nothing)
    response: Any = None
    #: close the connection (after sending the response, delayed if ``delay``)
    close: bool = False
    #: a failed authentication: delay the response by connection.failed.authentication.delay.ms
    failed: bool = False
    #: not an authentication frame: dispatch it normally
    dispatch: bool = False


class SaslAuthenticator:
    def __init__(self, settings: ListenerSasl, scram_lookup: Callable[[str, str], ScramCredential | None],
                 clock: Callable[[], float], peer: str = ""):
        self.settings = settings
        self.scram_lookup = scram_lookup
        self.clock = clock  # seconds, monotonic
        self.peer = peer
        self.state = HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        self.principal: str | None = None
        #: monotonic second the session ends (None: no re-authentication configured)
        self.session_expiry: float | None = None
        self.client_supports_reauth = False
        self._server: Any = None
        self._reauth_from: tuple[str, str] | None = None  # (mechanism, principal) being re-authenticated
        self._bad_mechanism = ""

    @property
    def authenticated(self) -> bool:
        return self.state == COMPLETE

    def expired(self) -> bool:
        return self.session_expiry is not None and self.clock() >= self.session_expiry

    def in_exchange(self) -> bool:
        """Frames go through ``handle`` (not the normal dispatch)."""
        return self.state != COMPLETE

    # --- frames ----------------------------------------------------------------------------
    def handle(self, header: framing.RequestHeader, frame: bytes) -> Outcome:
        key = header.api_key
        if self.state == COMPLETE:
            if key == ApiKey.SASL_HANDSHAKE:
                return self._start_reauth(header, frame)
            return Outcome(dispatch=True)
        if self.state in (HANDSHAKE_OR_VERSIONS, HANDSHAKE):
            if key == ApiKey.API_VERSIONS and self.state == HANDSHAKE_OR_VERSIONS and self._reauth_from is None:
                self.state = HANDSHAKE
                return Outcome(dispatch=True)
            if key != ApiKey.SASL_HANDSHAKE:
                # Kafka: IllegalSaslStateException("Unexpected Kafka request of type X during SASL
                # handshake."), no response, the connection closes
                log.info("closing connection from %s: %s before SASL authentication", self.peer, apis.api_name(key))
                self.state = FAILED
                return Outcome(close=True)
            return self._handshake(header, frame)
        if self.state == AUTHENTICATE:
            return self._authenticate(header, frame)
        if self.state == REAUTH_BAD_MECHANISM and header.api_key == ApiKey.SASL_AUTHENTICATE:
            self.state = FAILED
            resp_type = apis.response_type(ApiKey.SASL_AUTHENTICATE, header.api_version)
            return Outcome(response=make(resp_type, error_code=ErrorCode.sasl_authentication_failed,
                                         error_message=self._bad_mechanism, auth_bytes=b""), close=True, failed=True)
        return Outcome(close=True)

    def _handshake(self, header: framing.RequestHeader, frame: bytes) -> Outcome:
        req = framing.decode_request(header, frame)
        mechanism = req.mechanism
        resp_type = apis.response_type(ApiKey.SASL_HANDSHAKE, header.api_version)
        enabled = tuple(self.settings.mechanisms)
        if header.api_version < 1:
            # v0 sends raw tokens after the handshake; every client Krait serves speaks v1
            self.state = FAILED
            return Outcome(response=make(resp_type, error_code=ErrorCode.unsupported_version, mechanisms=enabled),
                           close=True)
        if mechanism not in enabled:
            self.state = FAILED
            return Outcome(response=make(resp_type, error_code=ErrorCode.unsupported_sasl_mechanism,
                                         mechanisms=enabled), close=True, failed=True)
        if self._reauth_from is not None and mechanism != self._reauth_from[0]:
            # Kafka answers the handshake, then fails the next token with this message
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self._reauth_from[0]}'")
            self.state = REAUTH_BAD_MECHANISM
        else:
            self.mechanism = mechanism
            self._server = self.settings.server(mechanism, self.scram_lookup)
            self.state = AUTHENTICATE
        return Outcome(response=make(resp_type, error_code=ErrorCode.none, mechanisms=enabled))

    def _authenticate(self, header: framing.RequestHeader, frame: bytes) -> Outcome:
        if header.api_key != ApiKey.SASL_AUTHENTICATE:
            self.state = FAILED
            message = f"Unexpected Kafka request of type {apis.api_name(header.api_key).upper()} during SASL authentication."
            resp = _error_response(header, ErrorCode.illegal_sasl_state, message)
            return Outcome(response=resp, close=True, failed=resp is not None)
        req = framing.decode_request(header, frame)
        resp_type = apis.response_type(ApiKey.SASL_AUTHENTICATE, header.api_version)
        if header.api_version > 0:
            self.client_supports_reauth = True
        try:
            token = self._server.step(bytes(req.auth_bytes))
            if self._server.complete:
                principal = "User:" + str(self._server.username)
                if self._reauth_from is not None and principal != self._reauth_from[1]:
                    raise SaslAuthenticationError(
                        "Cannot change principals during re-authentication from "
                        f"{self._reauth_from[1].replace(':', '.', 1)}: {principal.replace(':', '.', 1)}")
        except SaslAuthenticationError as exc:
            self.state = FAILED
            what = "re-authentication" if self._reauth_from else "authentication"
            log.info("SASL %s from %s failed (%s): %s", what, self.peer, self.mechanism, exc)
            return Outcome(response=make(resp_type, error_code=ErrorCode.sasl_authentication_failed,
                                         error_message=str(exc), auth_bytes=b""), close=True, failed=True)
        lifetime_ms = 0
        if self._server.complete:
            self.principal = principal
            self.state = COMPLETE
            reauth = self.settings.reauth_ms.get(self.mechanism or "", 0)
            if reauth > 0:
                lifetime_ms = reauth
                self.session_expiry = self.clock() + reauth / 1000
            self._reauth_from = None
            log.debug("SASL %s authenticated %s from %s", self.mechanism, principal, self.peer)
        return Outcome(response=make(resp_type, error_code=ErrorCode.none, error_message=None, auth_bytes=token,
                                     session_lifetime=lifetime_ms))

    def _start_reauth(self, header: framing.RequestHeader, frame: bytes) -> Outcome:
        self._reauth_from = (self.mechanism or "", self.principal or "")
        self.state = HANDSHAKE
        return self._handshake(header, frame)


def _error_response(header: framing.RequestHeader, code: ErrorCode, message: str) -> Any:
    """An error answer to an unexpected request in the middle of an exchange, for the APIs
    Krait can encode an error for (Kafka answers with the request's getErrorResponse)."""
    if not apis.is_supported(header.api_key, header.api_version):
        return None
    try:
        resp_type = apis.response_type(header.api_key, header.api_version)
        return make(resp_type, error_code=code, error_message=message)
    except Exception:
        return None
