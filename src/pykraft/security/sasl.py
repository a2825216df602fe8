"""SASL authentication of client connections (issue 16): KIP-152 framing, PLAIN and SCRAM, pure.

A connection to a SASL_PLAINTEXT or SASL_SSL listener must authenticate before anything but
ApiVersions: SaslHandshake (17) v1 names the mechanism, then SaslAuthenticate (36) carries the tokens
(KIP-152; v0's raw tokens are not served, every current client uses v1). A request of any other kind
first closes the connection, as Kafka does.

PLAIN (RFC 4616): one token ``[authzid] NUL username NUL password``; the users are those of the
listener's JAAS configuration (``listener.name.<listener>.plain.sasl.jaas.config``, Kafka's
``PlainLoginModule`` with ``user_<name>="<password>"`` options). The password is compared in constant
time, and a failure says SASL_AUTHENTICATION_FAILED (58) with Kafka's one message whether the user or
the password was wrong; the connection is then closed.

SCRAM-SHA-256/512 (``security.scram``): the credentials are the metadata log's UserScramCredentialRecords.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import scramp

from pykraft.core.config import jaas_options
from pykraft.core.errors import ErrorCode
from pykraft.security.scram import ScramCredential, ScramExchange, ScramMechanism

PLAIN = "PLAIN"
# Kafka's message for every PLAIN failure: it does not tell which part was wrong.
AUTHENTICATION_FAILED_MESSAGE = "Authentication failed: Invalid username or password"


class JaasConfigError(ValueError):
    """A JAAS configuration that does not parse; the message never contains a password."""


def parse_plain_jaas(text: str, key: str) -> dict[str, str]:
    """The users (``user_<name>="<password>"``) of a ``PlainLoginModule`` JAAS configuration."""
    body = text.strip()
    if "PlainLoginModule" not in body:
        raise JaasConfigError(f"{key}: expected org.apache.kafka.common.security.plain.PlainLoginModule")
    if not body.endswith(";"):
        raise JaasConfigError(f"{key}: a JAAS configuration ends with ';'")
    users = {
        name[len("user_") :]: value for name, value in jaas_options(body).items() if name.startswith("user_")
    }
    if not users:
        raise JaasConfigError(f'{key}: no users (user_<name>="<password>" options)')
    return users


def parse_plain_token(token: bytes) -> tuple[str, str, str] | None:
    """(authzid, username, password) of a PLAIN token, or None when it is malformed."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        return None
    try:
        authzid, username, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        return None
    if not username or not password:
        return None
    return authzid, username, password


@dataclass(slots=True)
class SaslSession:
    """One connection's authentication: handshake, then authenticate, then authenticated."""

    mechanisms: tuple[str, ...]
    mechanism: str | None = None
    principal: str | None = None
    failed: bool = False
    # The SCRAM exchange under way (two SaslAuthenticate round trips).
    scram: ScramExchange | None = None
    # KIP-368: when the authenticated session ends (None: never), and the principal a
    # re-authentication under way must prove again.
    expires_at_ms: int | None = None
    reauthenticating_as: str | None = None
    # SaslHandshake v0: the tokens come as bare frames, not SaslAuthenticate requests (pre KIP-152).
    raw_tokens: bool = False

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def live(self, now_ms: int) -> bool:
        """Authenticated and not expired: a request other than SASL's may be served."""
        return self.principal is not None and (self.expires_at_ms is None or now_ms < self.expires_at_ms)


@dataclass(slots=True)
class AuthenticateResult:
    error_code: ErrorCode
    error_message: str | None = None
    # The connection ends after this answer (a failure).
    close: bool = False
    auth_bytes: bytes = b""
    # KIP-368: how long the session lasts (0: until the connection closes); the client re-authenticates
    # before then, or the broker closes the connection at its next request.
    session_lifetime_ms: int = 0


def _no_scram_credentials(_user: str, _mechanism: ScramMechanism) -> ScramCredential | None:
    return None


@dataclass(slots=True)
class SaslAuthenticator:
    """A SASL listener's mechanisms: PLAIN users from its JAAS configuration, SCRAM credentials from the
    metadata image (``scram_lookup``, read when an exchange starts, so a credential added or removed
    takes effect for the next connection)."""

    plain_users: dict[str, str] = field(default_factory=dict)
    scram_lookup: Callable[[str, ScramMechanism], ScramCredential | None] = _no_scram_credentials
    # One secret per process: an unknown SCRAM user's made-up salt stays the same across attempts.
    fake_salt_key: bytes = b""
    # connections.max.reauth.ms (KIP-368): 0 = sessions do not expire and nobody re-authenticates.
    max_reauth_ms: int = 0

    def handshake(self, session: SaslSession, mechanism: str) -> ErrorCode:
        if session.authenticated:
            # KIP-368: a SaslHandshake on an authenticated connection starts a re-authentication,
            # with the same mechanism, when the listener has sessions that expire.
            if self.max_reauth_ms <= 0 or mechanism != session.mechanism:
                return ErrorCode.ILLEGAL_SASL_STATE
            session.reauthenticating_as, session.principal, session.scram = session.principal, None, None
            return ErrorCode.NONE
        if session.mechanism is not None:
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in session.mechanisms:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        session.mechanism = mechanism
        return ErrorCode.NONE

    def authenticate(
        self, session: SaslSession, token: bytes, server_nonce: str = "", now_ms: int = 0
    ) -> AuthenticateResult:
        """One SaslAuthenticate; ``server_nonce`` (random, from the shell) starts a SCRAM exchange."""
        result = self._authenticate(session, token, server_nonce)
        if result.error_code != ErrorCode.NONE or session.principal is None:
            return result
        if session.reauthenticating_as is not None and session.principal != session.reauthenticating_as:
            # KIP-368: a connection keeps its principal; proving another one ends it.
            session.failed, session.principal = True, None
            return AuthenticateResult(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                "re-authentication must prove the connection's principal again",
                True,
            )
        session.reauthenticating_as = None
        if self.max_reauth_ms > 0:
            session.expires_at_ms = now_ms + self.max_reauth_ms
            result.session_lifetime_ms = self.max_reauth_ms
        return result

    def _authenticate(self, session: SaslSession, token: bytes, server_nonce: str) -> AuthenticateResult:
        if session.mechanism is None or session.authenticated:
            return AuthenticateResult(
                ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake", True
            )
        if session.mechanism == PLAIN:
            return self._plain(session, token)
        if session.scram is None:
            scram_mechanism = ScramMechanism.from_mechanism_name(session.mechanism)
            session.scram = ScramExchange(
                scram_mechanism, self.scram_lookup, server_nonce, self.fake_salt_key
            )
        step = session.scram.step(token)
        if step.error_code != ErrorCode.NONE:
            session.failed = True
            return AuthenticateResult(step.error_code, step.error_message, True)
        if step.user is not None:
            session.principal = f"User:{step.user}"
        return AuthenticateResult(ErrorCode.NONE, auth_bytes=step.auth_bytes)

    def _plain(self, session: SaslSession, token: bytes) -> AuthenticateResult:
        parsed = parse_plain_token(token)
        if parsed is None:
            session.failed = True
            return AuthenticateResult(
                ErrorCode.SASL_AUTHENTICATION_FAILED, AUTHENTICATION_FAILED_MESSAGE, True
            )
        authzid, username, password = parsed
        expected = self.plain_users.get(username)
        # Constant time in the password, and the same work for an unknown user.
        ok = hmac.compare_digest(
            password.encode(), (expected if expected is not None else "\x00" * len(password)).encode()
        )
        if expected is None or not ok or (authzid and authzid != username):
            session.failed = True
            return AuthenticateResult(
                ErrorCode.SASL_AUTHENTICATION_FAILED, AUTHENTICATION_FAILED_MESSAGE, True
            )
        session.principal = f"User:{username}"
        return AuthenticateResult(ErrorCode.NONE)


class SaslClientError(Exception):
    """The server's SCRAM answer does not verify (a server that does not know the password)."""


class SaslClient:
    """The client side of PLAIN or SCRAM-SHA-256/512, for the connections a node or a tool opens:
    ``first_token()`` goes in the first SaslAuthenticate, and each server answer goes to
    ``next_token``, which returns the next token to send or None when the exchange is complete."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._username, self._password = username, password
        self._scram: Any = None
        self._round = 0
        if mechanism != PLAIN:
            ScramMechanism.from_mechanism_name(mechanism)  # ValueError for a mechanism pykraft lacks
            self._scram = scramp.ScramClient([mechanism], username, password)

    def first_token(self) -> bytes:
        if self._scram is None:
            return f"\x00{self._username}\x00{self._password}".encode()
        return str(self._scram.get_client_first()).encode()

    def next_token(self, server_token: bytes) -> bytes | None:
        self._round += 1
        if self._scram is None:
            return None
        try:
            if self._round == 1:
                self._scram.set_server_first(server_token.decode())
                return str(self._scram.get_client_final()).encode()
            self._scram.set_server_final(server_token.decode())
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise SaslClientError(f"SASL/{self.mechanism}: {exc}") from None
        return None
