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
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pykraft.core.errors import ErrorCode
from pykraft.security.scram import ScramCredential, ScramExchange, ScramMechanism

PLAIN = "PLAIN"
# Kafka's message for every PLAIN failure: it does not tell which part was wrong.
AUTHENTICATION_FAILED_MESSAGE = "Authentication failed: Invalid username or password"

_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


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
        name[len("user_") :]: value.replace('\\"', '"').replace("\\\\", "\\")
        for name, value in _OPTION.findall(body)
        if name.startswith("user_")
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

    @property
    def authenticated(self) -> bool:
        return self.principal is not None


@dataclass(slots=True)
class AuthenticateResult:
    error_code: ErrorCode
    error_message: str | None = None
    # The connection ends after this answer (a failure).
    close: bool = False
    auth_bytes: bytes = b""


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

    def handshake(self, session: SaslSession, mechanism: str) -> ErrorCode:
        if session.mechanism is not None or session.authenticated:
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in session.mechanisms:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        session.mechanism = mechanism
        return ErrorCode.NONE

    def authenticate(self, session: SaslSession, token: bytes, server_nonce: str = "") -> AuthenticateResult:
        """One SaslAuthenticate; ``server_nonce`` (random, from the shell) starts a SCRAM exchange."""
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
