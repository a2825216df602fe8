"""KIP-853 in the shell: the controllers' address book and pykraft's first-voter rule (io/quorum_peers)."""

from __future__ import annotations

import uuid

from pykraft.core.config import load_config
from pykraft.io.quorum_peers import ControllerAddresses, first_voters, local_voter
from pykraft.raft.control import Endpoint, Voter
from pykraft.raft.voter_set import VoterSet

SERVERS = "controller.quorum.bootstrap.servers=127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003\n"
DIRECTORY_ID = uuid.UUID(int=7)


def _controller(node_id: int, port: int) -> str:
    return (
        f"node.id={node_id}\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
        f"controller.listener.names=CONTROLLER\n{SERVERS}"
    )


def test_only_the_first_bootstrap_server_with_an_empty_log_starts_the_quorum() -> None:
    first = load_config(_controller(1, 9001))
    assert first_voters(first, DIRECTORY_ID, log_is_empty=True) == VoterSet.of(
        [local_voter(first, DIRECTORY_ID)]
    )
    assert local_voter(first, DIRECTORY_ID) == Voter(
        1, DIRECTORY_ID.bytes, (Endpoint("CONTROLLER", "127.0.0.1", 9001),)
    )
    assert first_voters(first, DIRECTORY_ID, log_is_empty=False) is None  # the log has the voter set
    assert first_voters(load_config(_controller(2, 9002)), DIRECTORY_ID, log_is_empty=True) is None
    assert first_voters(load_config(_controller(4, 9004)), DIRECTORY_ID, log_is_empty=True) is None


def test_addresses_are_the_bootstrap_servers_then_the_voters_and_leaders_learned() -> None:
    addresses = ControllerAddresses(load_config(_controller(2, 9002)))
    # Kafka's bootstrap node ids; a controller does not ask itself who leads.
    assert addresses.bootstrap_ids == {-2, -4}
    assert addresses.addresses() == {-2: ("127.0.0.1", 9001), -4: ("127.0.0.1", 9003)}
    seen: list[tuple[int, tuple[str, int]]] = []
    addresses.subscribe(lambda node_id, address: seen.append((node_id, address)))
    addresses.learn(1, ("127.0.0.1", 9001))
    addresses.learn(1, ("127.0.0.1", 9001))  # known: nobody told again
    voters = VoterSet.of(
        [
            Voter(1, DIRECTORY_ID.bytes, (Endpoint("CONTROLLER", "127.0.0.1", 9001),)),
            Voter(4, DIRECTORY_ID.bytes, (Endpoint("OTHER", "h", 1), Endpoint("CONTROLLER", "h4", 9004))),
        ]
    )
    addresses.sync_voters(voters)
    assert seen == [(1, ("127.0.0.1", 9001)), (4, ("h4", 9004))]
    static = ControllerAddresses(
        load_config(_controller(1, 9001).replace(SERVERS, "controller.quorum.voters=1@127.0.0.1:9001\n"))
    )
    assert static.bootstrap_ids == frozenset() and static.addresses() == {1: ("127.0.0.1", 9001)}
