"""Issue 16, the pure parts: the SCRAM exchange, SASL sessions, the authorizer's decisions (Kafka's
StandardAuthorizer semantics), the controller's SCRAM and ACL records, and ``--add-scram``."""

from __future__ import annotations

import base64
import random
import uuid

import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.security import ScramDeletion, ScramUpsertion
from pykraft.core.errors import ErrorCode
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage, image_records
from pykraft.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from pykraft.security.acls import (
    AclFilter,
    AclOperation,
    AclPermissionType,
    AuthorizerConfig,
    PatternType,
    ResourceType,
    StandardAcl,
    authorize,
)
from pykraft.security.sasl import SaslAuthenticator, SaslSession
from pykraft.security.scram import (
    SCRAM_FAILED_MESSAGE,
    ScramCredential,
    ScramExchange,
    ScramMechanism,
    credential_from_salted_password,
    salted_password,
)
from pykraft.storage.formatter import FormatterError, parse_add_scram

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
SALT = b"0123456789abcdef"


def _credential(mechanism: ScramMechanism, password: str, iterations: int = 4096) -> ScramCredential:
    return credential_from_salted_password(
        mechanism, SALT, salted_password(mechanism, password, SALT, iterations), iterations
    )


# --- SCRAM ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_stored_and_server_keys_match_scramp(mechanism: ScramMechanism) -> None:
    """Kafka's ScramFormatter and RFC 5802 agree: the keys scramp derives from the password."""
    salt, stored_key, server_key, _ = scramp.ScramMechanism(mechanism.mechanism_name).make_auth_info(
        "pencil", iteration_count=4096, salt=SALT
    )
    ours = _credential(mechanism, "pencil")
    assert (ours.stored_key, ours.server_key) == (stored_key, server_key)


def _exchange(
    mechanism: ScramMechanism, credentials: dict[tuple[str, int], ScramCredential], user: str, password: str
) -> tuple[list[ErrorCode], str | None, scramp.ScramClient]:
    server = ScramExchange(mechanism, lambda u, m: credentials.get((u, m)), "server-nonce-1", b"secret")
    client = scramp.ScramClient([mechanism.mechanism_name], user, password)
    first = server.step(client.get_client_first().encode())
    errors = [first.error_code]
    if first.error_code != ErrorCode.NONE:
        return errors, None, client
    client.set_server_first(first.auth_bytes.decode())
    final = server.step(client.get_client_final().encode())
    errors.append(final.error_code)
    if final.error_code == ErrorCode.NONE:
        client.set_server_final(final.auth_bytes.decode())  # the server proved it knows the key too
    else:
        assert final.error_message == SCRAM_FAILED_MESSAGE.format(mechanism.mechanism_name)
    return errors, final.user, client


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_scram_exchange_authenticates_and_refuses_wrong_password_and_unknown_user_alike(
    mechanism: ScramMechanism,
) -> None:
    credentials = {("alice", int(mechanism)): _credential(mechanism, "alice-secret", 8192)}
    errors, user, _ = _exchange(mechanism, credentials, "alice", "alice-secret")
    assert errors == [ErrorCode.NONE, ErrorCode.NONE] and user == "alice"
    # A wrong password and an unknown user fail at the same step, with the same answer.
    assert _exchange(mechanism, credentials, "alice", "wrong")[0] == [
        ErrorCode.NONE,
        ErrorCode.SASL_AUTHENTICATION_FAILED,
    ]
    assert _exchange(mechanism, credentials, "mallory", "x")[0] == [
        ErrorCode.NONE,
        ErrorCode.SASL_AUTHENTICATION_FAILED,
    ]
    # The other mechanism's credential does not authenticate this one.
    other = SHA512 if mechanism is SHA256 else SHA256
    assert (
        _exchange(other, credentials, "alice", "alice-secret")[0][-1] == ErrorCode.SASL_AUTHENTICATION_FAILED
    )


def test_unknown_users_salt_is_stable_so_probing_does_not_reveal_them() -> None:
    def server_first(user: str) -> str:
        server = ScramExchange(SHA512, lambda u, m: None, "nonce", b"secret")
        client = scramp.ScramClient(["SCRAM-SHA-512"], user, "x", c_nonce="cnonce")
        return server.step(client.get_client_first().encode()).auth_bytes.decode()

    assert server_first("ghost") == server_first("ghost")
    assert server_first("ghost") != server_first("other")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.binary(max_size=80))
def test_scram_exchange_never_raises_on_garbage(first: bytes, final: bytes) -> None:
    server = ScramExchange(SHA256, lambda u, m: _credential(SHA256, "p"), "n", b"s")
    step = server.step(first)
    if step.error_code == ErrorCode.NONE:
        assert server.step(final).error_code in (ErrorCode.NONE, ErrorCode.SASL_AUTHENTICATION_FAILED)


def test_sasl_session_scram_then_a_third_token_is_illegal() -> None:
    credentials = {("bob", int(SHA256)): _credential(SHA256, "bob-pw")}
    authenticator = SaslAuthenticator({}, lambda u, m: credentials.get((u, m)), b"k")
    session = SaslSession(("SCRAM-SHA-256",))
    assert authenticator.handshake(session, "SCRAM-SHA-512") == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert authenticator.handshake(session, "SCRAM-SHA-256") == ErrorCode.NONE
    client = scramp.ScramClient(["SCRAM-SHA-256"], "bob", "bob-pw")
    first = authenticator.authenticate(session, client.get_client_first().encode(), "snonce")
    client.set_server_first(first.auth_bytes.decode())
    final = authenticator.authenticate(session, client.get_client_final().encode())
    assert final.error_code == ErrorCode.NONE and session.principal == "User:bob"
    again = authenticator.authenticate(session, b"n,,n=bob,r=x")
    assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE and again.close


# --- the authorizer ---------------------------------------------------------------------------------------------


def _acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    principal: str = "User:alice",
    pattern: PatternType = PatternType.LITERAL,
    resource_type: ResourceType = ResourceType.TOPIC,
    host: str = "*",
) -> StandardAcl:
    return StandardAcl(resource_type, name, pattern, principal, host, operation, permission)


def _may(
    acls: list[StandardAcl],
    operation: AclOperation,
    name: str,
    principal: str = "User:alice",
    host: str = "10.0.0.1",
    config: AuthorizerConfig | None = None,
    resource_type: ResourceType = ResourceType.TOPIC,
) -> bool:
    return authorize(acls, config or AuthorizerConfig(), principal, host, operation, resource_type, name)


def test_literal_wildcard_and_prefixed_patterns() -> None:
    acls = [
        _acl("orders", AclOperation.READ),
        _acl("*", AclOperation.WRITE),
        _acl("logs-", AclOperation.CREATE, pattern=PatternType.PREFIXED),
    ]
    assert _may(acls, AclOperation.READ, "orders")
    assert not _may(acls, AclOperation.READ, "orders2")  # literal is exact
    assert _may(acls, AclOperation.WRITE, "anything")  # the literal wildcard
    assert _may(acls, AclOperation.CREATE, "logs-app")
    assert not _may(acls, AclOperation.CREATE, "log")
    assert not _may(acls, AclOperation.READ, "orders", principal="User:bob")


def test_deny_wins_over_allow_and_all_covers_every_operation() -> None:
    acls = [
        _acl("t-", AclOperation.ALL, pattern=PatternType.PREFIXED),
        _acl("t-secret", AclOperation.READ, AclPermissionType.DENY),
    ]
    assert _may(acls, AclOperation.WRITE, "t-public")
    assert _may(acls, AclOperation.WRITE, "t-secret")
    assert not _may(acls, AclOperation.READ, "t-secret")
    # A DENY of ALL denies every operation, for any principal it names, whatever allows.
    acls.append(_acl("t-x", AclOperation.ALL, AclPermissionType.DENY, principal="User:*"))
    assert not _may(acls, AclOperation.DESCRIBE, "t-x")


def test_read_write_delete_alter_imply_describe_and_alter_configs_implies_describe_configs() -> None:
    for operation in (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER):
        assert _may([_acl("t", operation)], AclOperation.DESCRIBE, "t")
    assert not _may([_acl("t", AclOperation.CREATE)], AclOperation.DESCRIBE, "t")
    assert _may([_acl("t", AclOperation.ALTER_CONFIGS)], AclOperation.DESCRIBE_CONFIGS, "t")
    # An implied operation is never denied by a DENY of the implying one.
    acls = [_acl("t", AclOperation.DESCRIBE), _acl("t", AclOperation.READ, AclPermissionType.DENY)]
    assert _may(acls, AclOperation.DESCRIBE, "t")


def test_hosts_super_users_and_allow_everyone_if_no_acl_found() -> None:
    acls = [_acl("t", AclOperation.READ, host="10.0.0.1")]
    assert _may(acls, AclOperation.READ, "t", host="10.0.0.1")
    assert not _may(acls, AclOperation.READ, "t", host="10.0.0.2")
    supers = AuthorizerConfig(super_users=frozenset({"User:admin"}))
    deny_all = [_acl("*", AclOperation.ALL, AclPermissionType.DENY, principal="User:*")]
    assert _may(deny_all, AclOperation.ALTER, "t", principal="User:admin", config=supers)
    everyone = AuthorizerConfig(allow_everyone_if_no_acl_found=True)
    assert _may([], AclOperation.READ, "t", config=everyone)
    assert not _may([], AclOperation.READ, "t")
    # Any ACL on the resource, even for someone else, switches the default off.
    assert not _may(
        [_acl("t", AclOperation.READ, principal="User:bob")], AclOperation.READ, "t", config=everyone
    )
    assert _may([_acl("u", AclOperation.READ, principal="User:bob")], AclOperation.READ, "t", config=everyone)


def test_filters_match_like_kafka_acl_binding_filters() -> None:
    literal = _acl("orders", AclOperation.READ)
    prefixed = _acl("ord", AclOperation.WRITE, pattern=PatternType.PREFIXED)
    wildcard = _acl("*", AclOperation.DESCRIBE)
    every = AclFilter(
        ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert all(every.matches(a) for a in (literal, prefixed, wildcard))
    match = AclFilter(
        ResourceType.TOPIC, "orders", PatternType.MATCH, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert [a for a in (literal, prefixed, wildcard) if match.matches(a)] == [literal, prefixed, wildcard]
    exact = AclFilter(
        ResourceType.TOPIC, "orders", PatternType.LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert [a for a in (literal, prefixed, wildcard) if exact.matches(a)] == [literal]
    bad = AclFilter(
        ResourceType.UNKNOWN, None, PatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert bad.validate() == "Invalid resource type"


# --- the controller: records, replay, snapshots -----------------------------------------------------------------


def _controller() -> QuorumController:
    controller = QuorumController(rng=random.Random(7))
    controller.activate()
    return controller


def _upsert(name: str, mechanism: int = 2, iterations: int = 4096, password: str = "pw") -> ScramUpsertion:
    m = ScramMechanism(mechanism) if mechanism in (1, 2) else SHA512
    return ScramUpsertion(name, mechanism, iterations, SALT, salted_password(m, password, SALT, iterations))


def test_alter_user_scram_credentials_validates_like_kafka() -> None:
    controller = _controller()
    result = controller.alter_user_scram_credentials(
        [ScramDeletion("ghost", 2), ScramDeletion("dup", 1)],
        [
            _upsert("alice"),
            _upsert(""),
            _upsert("few", iterations=100),
            _upsert("many", iterations=20000),
            _upsert("odd", mechanism=3),
            _upsert("dup"),
        ],
    )
    errors = {r.user: r.error_code for r in result.response}
    assert errors == {
        "ghost": ErrorCode.RESOURCE_NOT_FOUND,
        "dup": ErrorCode.DUPLICATE_RESOURCE,
        "alice": ErrorCode.NONE,
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "odd": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
    }
    assert [type(r.message) for r in result.records] == [UserScramCredentialRecord]
    assert result.records[0].message.stored_key == _credential(SHA512, "pw").stored_key
    # Deleting works once the credential exists; the password never reaches a record.
    deleted = controller.alter_user_scram_credentials([ScramDeletion("alice", 2)], [])
    assert [type(r.message) for r in deleted.records] == [RemoveUserScramCredentialRecord]
    assert controller.scram_control.credentials() == {}


def test_acl_records_replay_into_the_image_and_survive_a_snapshot_and_an_aborted_transaction() -> None:
    controller = _controller()
    acl = _acl("orders", AclOperation.READ)
    created = controller.create_acls([acl, acl, _acl("", AclOperation.READ)])
    assert [r.error_code for r in created.response] == [
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
    ]
    assert [type(r.message) for r in created.records] == [
        AccessControlEntryRecord
    ]  # the duplicate is not stored
    assert controller.create_acls([acl]).records == []
    scram = controller.alter_user_scram_credentials([], [_upsert("alice")])
    delta = MetadataDelta(MetadataImage.EMPTY)
    for record in [*created.records, *scram.records]:
        delta.replay(record)
    image = delta.apply()
    assert list(image.acls.acls.values()) == [acl]
    assert image.scram.credential("alice", 2) == _credential(SHA512, "pw")
    # A snapshot of the image holds both, and loading it gives the same image and controller state.
    reloaded = MetadataDelta(MetadataImage.EMPTY)
    for record in image_records(image):
        reloaded.replay(record)
    assert reloaded.apply().acls == image.acls and reloaded.apply().scram == image.scram
    fresh = QuorumController(rng=random.Random(1))
    fresh.load_image(image, 10)
    assert fresh.acl_control.acls() == controller.acl_control.acls()
    assert fresh.scram_control.credentials() == controller.scram_control.credentials()
    # DeleteAcls removes every match, and the image follows.
    removed = controller.delete_acls(
        [
            AclFilter(
                ResourceType.TOPIC, None, PatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
            )
        ]
    )
    assert [type(r.message) for r in removed.records] == [RemoveAccessControlEntryRecord]
    assert removed.response[0].matching == (acl,)
    delta = MetadataDelta(image)
    delta.replay(removed.records[0])
    assert delta.apply().acls.acls == {}


def test_remove_records_for_missing_entries_are_an_inconsistent_log() -> None:
    from pykraft.metadata.records import MetadataReplayError

    delta = MetadataDelta(MetadataImage.EMPTY)
    with pytest.raises(MetadataReplayError):
        delta.replay(RemoveUserScramCredentialRecord(name="x", mechanism=1))
    with pytest.raises(MetadataReplayError):
        delta.replay(RemoveAccessControlEntryRecord(id=uuid.uuid4()))


def test_bootstrap_records_carry_the_formatted_credentials() -> None:
    controller = QuorumController(rng=random.Random(3))
    credential = _credential(SHA256, "s3")
    from pykraft.metadata.image import scram_record

    controller.bootstrap_extra_records = [scram_record("admin", 1, credential)]
    written = controller.activate().records
    assert any(isinstance(r.message, UserScramCredentialRecord) for r in written)
    assert controller.scram_control.credentials() == {("admin", 1): credential}


# --- storage format --add-scram ----------------------------------------------------------------------------------


def test_add_scram_parses_kafka_syntax() -> None:
    rng = random.Random(5)
    name, mechanism, credential = parse_add_scram("SCRAM-SHA-512=[name=alice,password=alice-secret]", rng)
    assert (name, mechanism, credential.iterations) == ("alice", SHA512, 4096)
    salt = base64.b64encode(SALT).decode()
    name, mechanism, credential = parse_add_scram(
        f"SCRAM-SHA-256=[name=bob,password=pencil,iterations=8192,salt={salt}]", rng
    )
    assert credential == _credential(SHA256, "pencil", 8192)
    salted = base64.b64encode(salted_password(SHA256, "pencil", SALT, 4096)).decode()
    _, _, credential = parse_add_scram(f"SCRAM-SHA-256=[name=c,saltedpassword={salted},salt={salt}]", rng)
    assert credential == _credential(SHA256, "pencil")
    for bad, why in [
        ("SCRAM-SHA-1=[name=a,password=b]", "unknown SCRAM mechanism"),
        ("SCRAM-SHA-256=[password=b]", "'name'"),
        ("SCRAM-SHA-256=[name=a]", "exactly one of"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=10]", "Too few iterations"),
        ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "unknown option"),
        ("SCRAM-SHA-256=name=a", "expected"),
    ]:
        with pytest.raises(FormatterError, match=why):
            parse_add_scram(bad, rng)


def test_describe_configs_never_sends_a_password_or_a_jaas_text() -> None:
    from pykraft.broker.configs_api import _config_result, broker_entries
    from pykraft.core.config import load_config

    config = load_config(
        "node.id=1\nlisteners=SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        "controller.quorum.voters=1@127.0.0.1:9093\nssl.key.password=k3y-secret\n"
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
        'PlainLoginModule required user_alice="alice-secret";\n'
    )
    results = {r.name: r for r in map(_config_result, broker_entries(config, {}, {}))}
    for name in ("ssl.key.password", "listener.name.sasl_plaintext.plain.sasl.jaas.config"):
        assert results[name].is_sensitive and results[name].value is None
    assert results["listener.name.sasl_plaintext.sasl.enabled.mechanisms"].value == "PLAIN"
    assert not any("secret" in str(r.value) for r in results.values())
    assert "secret" not in repr(config)


def test_sasl_client_talks_to_the_authenticator_for_each_mechanism() -> None:
    from pykraft.security.sasl import SaslClient, SaslClientError

    salt = b"0123456789abcdef"
    credentials = {
        m: credential_from_salted_password(m, salt, salted_password(m, "pw", salt, 4096), 4096)
        for m in ScramMechanism
    }
    authenticator = SaslAuthenticator(
        {"bob": "pw"}, lambda user, m: credentials[m] if user == "bob" else None
    )
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        for password, succeeds in (("pw", True), ("nope", False)):
            session = SaslSession((mechanism,))
            assert authenticator.handshake(session, mechanism) == ErrorCode.NONE
            client = SaslClient(mechanism, "bob", password)
            token: bytes | None = client.first_token()
            while token is not None:
                result = authenticator.authenticate(session, token, "server-nonce")
                if result.error_code != ErrorCode.NONE:
                    break
                token = client.next_token(result.auth_bytes)
            assert session.authenticated is succeeds, (mechanism, password)
    # A server that does not know the password cannot fake the final SCRAM message.
    client = SaslClient("SCRAM-SHA-256", "bob", "pw")
    first = client.first_token().decode()
    nonce = first.split("r=", 1)[1]
    client.next_token(f"r={nonce}xyz,s={base64.b64encode(salt).decode()},i=4096".encode())
    with pytest.raises(SaslClientError):
        client.next_token(b"v=" + base64.b64encode(b"\x00" * 32))


def test_kip_368_sessions_expire_and_re_authenticate_as_the_same_principal() -> None:
    authenticator = SaslAuthenticator({"bob": "pw", "eve": "pw2"}, max_reauth_ms=1000)

    def login(session: SaslSession, user: str, password: str, now_ms: int) -> ErrorCode:
        error = authenticator.handshake(session, "PLAIN")
        if error != ErrorCode.NONE:
            return error
        result = authenticator.authenticate(session, f"\x00{user}\x00{password}".encode(), now_ms=now_ms)
        assert result.session_lifetime_ms == (1000 if result.error_code == ErrorCode.NONE else 0)
        return result.error_code

    session = SaslSession(("PLAIN", "SCRAM-SHA-256"))
    assert login(session, "bob", "pw", now_ms=5_000) == ErrorCode.NONE
    assert session.live(5_999) and not session.live(6_000)  # expired: only re-authentication now
    assert login(session, "bob", "pw", now_ms=6_500) == ErrorCode.NONE
    assert session.live(7_499) and session.principal == "User:bob"
    # Another principal on the same connection, or another mechanism: refused.
    assert login(session, "eve", "pw2", now_ms=7_000) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not session.authenticated
    other = SaslSession(("PLAIN", "SCRAM-SHA-256"))
    assert login(other, "bob", "pw", now_ms=0) == ErrorCode.NONE
    assert authenticator.handshake(other, "SCRAM-SHA-256") == ErrorCode.ILLEGAL_SASL_STATE
    # Without connections.max.reauth.ms sessions never expire and a second handshake is refused.
    forever = SaslAuthenticator({"bob": "pw"})
    session = SaslSession(("PLAIN",))
    assert forever.handshake(session, "PLAIN") == ErrorCode.NONE
    assert forever.authenticate(session, b"\x00bob\x00pw", now_ms=0).session_lifetime_ms == 0
    assert session.live(10**12) and forever.handshake(session, "PLAIN") == ErrorCode.ILLEGAL_SASL_STATE


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
@pytest.mark.parametrize(
    ("final_nonce", "password", "accepted"),
    [("echo", "pw", True), ("twice", "pw", True), ("other", "pw", False), ("echo", "nope", False)],
)
def test_scram_final_nonce_must_end_with_the_servers_as_kafka_checks_it(
    mechanism: ScramMechanism, final_nonce: str, password: str, accepted: bool
) -> None:
    """Kafka's ScramSaslServer accepts a client-final nonce that ends with the server-first nonce:
    librdkafka 2.0 sends its own nonce once more in front. The proof still has to match."""
    import hashlib
    import hmac

    credential = credential_from_salted_password(
        mechanism, SALT, salted_password(mechanism, "pw", SALT, 4096), 4096
    )
    exchange = ScramExchange(
        mechanism, lambda u, m: credential if u == "bob" else None, "srvnonce", b"k" * 32
    )
    client_nonce = "cl1entnonce"
    server_first = exchange.step(f"n,,n=bob,r={client_nonce}".encode()).auth_bytes.decode()
    combined = server_first.split("r=", 1)[1].split(",", 1)[0]
    nonce = {"echo": combined, "twice": client_nonce + combined, "other": combined + "x"}[final_nonce]
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"n=bob,r={client_nonce},{server_first},{without_proof}".encode()
    salted = salted_password(mechanism, password, SALT, 4096)
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    signature = hmac.digest(
        hashlib.new(mechanism.hash_name, client_key).digest(), auth_message, mechanism.hash_name
    )
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    step = exchange.step(f"{without_proof},p={proof}".encode())
    assert (step.error_code == ErrorCode.NONE) is accepted
    assert (step.user == "bob") is accepted
    if accepted:  # the server's signature proves it knew the key
        server_key = hmac.digest(salted, b"Server Key", mechanism.hash_name)
        expected = base64.b64encode(hmac.digest(server_key, auth_message, mechanism.hash_name))
        assert step.auth_bytes == b"v=" + expected
