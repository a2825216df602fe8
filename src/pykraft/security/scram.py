"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677, Kafka KIP-84 and KIP-554), pure.

What the metadata log stores for a user and mechanism is Kafka's UserScramCredentialRecord: the salt,
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``, ``ServerKey = HMAC(SaltedPassword, "Server Key"))``
and the iteration count, never the password. Clients send ``SaltedPassword`` (PBKDF2 of the password with
the salt) in AlterUserScramCredentials; the controller derives the two keys from it (Kafka
``ScramControlManager``).

The exchange on a connection is two SaslAuthenticate round trips; the message syntax is handled by
``scramp`` (a well-kept RFC 5802 implementation). An unknown user is given a made-up salt (the same one
every time for that name) and fails at the proof, exactly like a wrong password: the answer never says
which part was wrong (RFC 5802 §5.1's advice; Kafka itself fails an unknown user one step earlier).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import scramp

from pykraft.core.errors import ErrorCode

# Kafka ScramMechanism: iterations are bounded to [4096, 16384] for both mechanisms.
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384
# Kafka's SaslServerAuthenticator message for a SCRAM exchange that fails.
SCRAM_FAILED_MESSAGE = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)


class ScramMechanism(IntEnum):
    """Kafka's ScramMechanism type ids (UserScramCredentialRecord.Mechanism and the admin APIs)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def from_mechanism_name(cls, name: str) -> ScramMechanism:
        for mechanism in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if mechanism.mechanism_name == name.strip().upper():
                return mechanism
        return cls.UNKNOWN


SCRAM_MECHANISM_NAMES = tuple(
    m.mechanism_name for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's credential for one mechanism, as the metadata log holds it."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 (PBKDF2-HMAC), what a client sends in AlterUserScramCredentials."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored and server keys of a salted password (Kafka ``ScramFormatter.generateCredential``)."""
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", mechanism.hash_name)
    return ScramCredential(salt, stored_key, server_key, iterations)


def check_iterations(iterations: int) -> str | None:
    """Kafka's UNACCEPTABLE_CREDENTIAL message for an iteration count out of bounds, else None."""
    if iterations < SCRAM_MIN_ITERATIONS:
        return f"Too few iterations: {iterations} < {SCRAM_MIN_ITERATIONS}"
    if iterations > SCRAM_MAX_ITERATIONS:
        return f"Too many iterations: {iterations} > {SCRAM_MAX_ITERATIONS}"
    return None


@dataclass(slots=True)
class ScramStep:
    """One SaslAuthenticate answer of the exchange."""

    error_code: ErrorCode
    auth_bytes: bytes = b""
    error_message: str | None = None
    # Set once the proof checked: the authenticated user name.
    user: str | None = None


class ScramExchange:
    """The server side of one connection's SCRAM exchange: client-first, then client-final.

    ``lookup`` gives the credential of a (user, mechanism) at the moment the client's first message
    arrives (the latest metadata image); ``server_nonce`` and ``fake_salt_key`` come from the shell (a
    random nonce per exchange; one secret per process that makes an unknown user's salt stable)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Any,
        server_nonce: str,
        fake_salt_key: bytes,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._fake_salt_key = fake_salt_key
        self._server = scramp.ScramMechanism(mechanism.mechanism_name).make_server(
            self._auth_info, s_nonce=server_nonce
        )
        self._user: str | None = None
        self._known = False
        self._step = 0
        # What the client-final proof is checked against (RFC 5802 AuthMessage, the user's keys).
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._keys = (b"", b"")

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        self._user = user
        credential: ScramCredential | None = self._lookup(user, self.mechanism)
        if credential is not None:
            self._known = True
            self._keys = (credential.stored_key, credential.server_key)
            return credential.salt, credential.stored_key, credential.server_key, credential.iterations
        # An unknown user: a salt that stays the same for this name, keys that match no proof.
        fake = hmac.digest(self._fake_salt_key, user.encode("utf-8"), "sha256")
        self._keys = (fake, fake)
        return fake[:16], fake, fake, SCRAM_MIN_ITERATIONS

    def _failed(self) -> ScramStep:
        return ScramStep(
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            b"",
            SCRAM_FAILED_MESSAGE.format(self.mechanism.mechanism_name),
        )

    def _client_final(self, message: str) -> ScramStep:
        """RFC 5802's client-final, checked as Kafka's ScramSaslServer checks it: the channel binding
        is the client-first's GS2 header, the nonce ENDS with the server-first's (older librdkafka,
        2.0 among them, sends its own nonce before it once more, and Kafka accepts that), and the
        proof matches the stored key (compared in constant time)."""
        without_proof, sep, proof_text = message.rpartition(",p=")
        attributes = dict(part.split("=", 1) for part in without_proof.split(",") if "=" in part)
        server_nonce = self._server_first.split("r=", 1)[1].split(",", 1)[0]
        try:
            binding = base64.b64decode(attributes.get("c", ""), validate=True).decode("utf-8")
            proof = base64.b64decode(proof_text, validate=True)
        except (ValueError, UnicodeDecodeError):
            return self._failed()
        if not sep or binding != self._gs2_header or not attributes.get("r", "").endswith(server_nonce):
            return self._failed()
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        stored_key, server_key = self._keys
        hash_name = self.mechanism.hash_name
        client_signature = hmac.digest(stored_key, auth_message, hash_name)
        if len(proof) != len(client_signature):
            return self._failed()
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if (
            not hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), stored_key)
            or not self._known
        ):
            return self._failed()
        server_signature = hmac.digest(server_key, auth_message, hash_name)
        return ScramStep(ErrorCode.NONE, b"v=" + base64.b64encode(server_signature), user=self._user)

    def step(self, token: bytes) -> ScramStep:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            return self._failed()
        try:
            if self._step == 0:
                self._step = 1
                if "tokenauth=" in message.split(",", 2)[-1]:
                    return self._failed()  # delegation tokens are not served
                self._server.set_client_first(message)
                first, _, bare = message.partition(",")
                second, _, bare = bare.partition(",")
                self._gs2_header, self._client_first_bare = f"{first},{second},", bare
                self._server_first = self._server.get_server_first()
                return ScramStep(ErrorCode.NONE, self._server_first.encode("utf-8"))
            if self._step == 1:
                self._step = 2
                return self._client_final(message)
        except scramp.ScramException:
            return self._failed()
        return ScramStep(ErrorCode.ILLEGAL_SASL_STATE, b"", "the SCRAM exchange is already complete")
