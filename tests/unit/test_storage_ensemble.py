"""The ensemble of a node's meta.properties (kafka-facts.md §8.14 item 146, MetaPropertiesEnsembleTest)
and KIP-1262's startup writes and discovery (item 161)."""

from __future__ import annotations

import random
import uuid

import pytest

from pykraft.core.uuid import uuid_from_str, uuid_to_str
from pykraft.storage.ensemble import (
    MetaPropertiesEnsemble,
    VerificationFlag,
    check_logged_cluster_id,
    generate_directory_id,
    plan_cluster_id_writes,
    plan_startup_writes,
)
from pykraft.storage.meta_properties import MetaProperties, MetaPropertiesError, MetaPropertiesVersion

V0, V1, V2 = MetaPropertiesVersion.V0, MetaPropertiesVersion.V1, MetaPropertiesVersion.V2
ID_A = uuid_from_str("zd2vLVrZQlCLJj8-k7A10w")
ID_B = uuid_from_str("MkU3OEVBNTcwNTJENDM2Qk")


def _ensemble(
    props: dict[str, MetaProperties] | None = None,
    empty: set[str] | None = None,
    errors: dict[str, str] | None = None,
    metadata_log_dir: str | None = "/m",
) -> MetaPropertiesEnsemble:
    return MetaPropertiesEnsemble(frozenset(empty or ()), errors or {}, props or {}, metadata_log_dir)


FOO = _ensemble(
    {
        "/m": MetaProperties(V1, "fooClusterId", 2, ID_A),
        "/b": MetaProperties(V1, "fooClusterId", 2, ID_B),
    },
    empty={"/e"},
    errors={"/x": "Permission denied"},
)


# --- 146: the ensemble ------------------------------------------------------------------------


def test_dir_sets_and_derived_ids() -> None:
    assert FOO.all_log_dirs == ["/b", "/e", "/m", "/x"]
    assert FOO.node_id() == 2
    assert FOO.cluster_id() == "fooClusterId"
    assert FOO.directory_ids() == {ID_A, ID_B}
    empty = _ensemble(empty={"/a"})
    assert (empty.node_id(), empty.cluster_id()) == (None, None)


def test_verify__expected_ids() -> None:
    FOO.verify("fooClusterId", 2)
    FOO.verify(None, None)
    with pytest.raises(
        MetaPropertiesError, match=r"^Invalid cluster.id in: /b/meta.properties. Expected bar"
    ):
        FOO.verify("bar", 2)
    with pytest.raises(MetaPropertiesError, match=r"^Stored node id 2 in /b/meta.properties doesn't match"):
        FOO.verify("fooClusterId", 3)


def test_verify__flags() -> None:
    with pytest.raises(MetaPropertiesError, match="^No readable meta.properties files found.$"):
        _ensemble(empty={"/a"}).verify(flags={VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID})
    FOO.verify(flags={VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID})
    with pytest.raises(MetaPropertiesError, match="^Found unexpected version in /b/meta.properties"):
        FOO.verify(flags={VerificationFlag.REQUIRE_V0})
    _ensemble({"/m": MetaProperties(V0, "c", 1)}).verify(flags={VerificationFlag.REQUIRE_V0})
    with pytest.raises(MetaPropertiesError, match="^No metadata log directory was specified.$"):
        _ensemble({"/a": MetaProperties(V1, "c", 1)}, metadata_log_dir=None).verify(
            flags={VerificationFlag.REQUIRE_METADATA_LOG_DIR}
        )
    with pytest.raises(MetaPropertiesError, match="^Encountered I/O error in metadata log directory /m"):
        _ensemble(errors={"/m": "Input/output error"}).verify()


def test_verify__disagreeing_dirs() -> None:
    with pytest.raises(MetaPropertiesError) as info:
        _ensemble({"/a": MetaProperties(V2, "X", 1), "/b": MetaProperties(V2, "Y", 1)}).verify()
    message = str(info.value)
    assert "/b/meta.properties" in message and "Expected X" in message and "read Y" in message
    assert "/a/meta.properties" in message and "\n" not in message
    with pytest.raises(MetaPropertiesError, match="Stored node id 2 in /b/meta.properties doesn't match"):
        _ensemble({"/a": MetaProperties(V2, None, 1), "/b": MetaProperties(V2, None, 2)}).verify()
    # V2 dirs with and without a cluster id agree (the id is learned later).
    _ensemble({"/a": MetaProperties(V2, "X", 1), "/b": MetaProperties(V2, None, 1)}).verify()


def test_verify__directory_ids_unique_and_not_reserved() -> None:
    with pytest.raises(MetaPropertiesError, match="^Duplicate directory ID .* of /a, and also of /b"):
        _ensemble({"/a": MetaProperties(V2, None, 1, ID_A), "/b": MetaProperties(V2, None, 1, ID_A)}).verify()
    with pytest.raises(MetaPropertiesError, match="^Invalid reserved directory ID AAAAAAAAAAAAAAAAAAAAAg"):
        _ensemble({"/a": MetaProperties(V2, None, 1, uuid.UUID(int=2))}).verify()


def test_generate_directory_id__never_reserved_nor_taken() -> None:
    class Scripted(random.Random):
        def __init__(self, values: list[int]) -> None:
            super().__init__(0)
            self.values = values

        def getrandbits(self, k: int) -> int:
            return self.values.pop(0)

    rng = Scripted([0, 1, 99, ID_A.int, ID_B.int])
    assert generate_directory_id(rng, {ID_A}) == ID_B
    # Kafka Uuid.randomUuid: text starting with '-' is drawn again, since `remove-controller -d ID`
    # would read such an id as a flag (a CI run drew '-mFBl5iHTe_gykhRok1GiA' and the tool refused it).
    dash_first = 62 << 122
    assert uuid_to_str(uuid.UUID(int=dash_first)).startswith("-")
    assert generate_directory_id(Scripted([dash_first, ID_B.int]), set()) == ID_B


# --- KIP-1262 startup writes (161: a missing meta.properties is auto-written as V2) ------------------


def test_startup__never_formatted__v2_with_node_id_and_unique_directory_ids() -> None:
    writes = plan_startup_writes(_ensemble(empty={"/a", "/b", "/m"}), 5, random.Random(1))
    assert sorted(writes) == ["/a", "/b", "/m"]
    assert {(m.version, m.node_id, m.cluster_id) for m in writes.values()} == {(V2, 5, None)}
    assert len({m.directory_id for m in writes.values()}) == 3


def test_startup__new_dir_joins_formatted_ones__same_cluster_id_and_only_changed_dirs_written() -> None:
    ensemble = _ensemble({"/m": MetaProperties(V1, "C", 5, ID_A), "/a": MetaProperties(V2, None, 5)}, {"/b"})
    writes = plan_startup_writes(ensemble, 5, random.Random(1))
    assert sorted(writes) == ["/a", "/b"]  # /m has everything already
    assert writes["/b"].version == V2 and writes["/b"].cluster_id == "C"
    assert writes["/a"].cluster_id == "C" and writes["/a"].directory_id not in (None, ID_A)
    assert writes["/b"].directory_id != writes["/a"].directory_id


def test_startup__v1_without_directory_id_gains_one_and_stays_v1() -> None:
    writes = plan_startup_writes(_ensemble({"/m": MetaProperties(V1, "C", 5)}), 5, random.Random(1))
    assert writes["/m"].version == V1 and writes["/m"].directory_id is not None


def test_startup__refusals_name_the_file() -> None:
    with pytest.raises(MetaPropertiesError, match="doesn't match the configured node.id 5"):
        plan_startup_writes(_ensemble({"/m": MetaProperties(V2, None, 4)}), 5, random.Random(1))
    with pytest.raises(MetaPropertiesError, match="^Cannot read /x/meta.properties: Unknown meta.prop"):
        plan_startup_writes(
            _ensemble(errors={"/x": "Unknown meta.properties version number 9"}), 5, random.Random(1)
        )
    with pytest.raises(MetaPropertiesError, match="^/m/meta.properties is a ZooKeeper-mode"):
        plan_startup_writes(_ensemble({"/m": MetaProperties(V0, "C", 5)}), 5, random.Random(1))


# --- the metadata log versus meta.properties --------------------------------------------------------


def test_logged_cluster_id__mismatch_names_both_ids_and_the_dir() -> None:
    ensemble = _ensemble({"/m": MetaProperties(V2, "X", 1)})
    check_logged_cluster_id(ensemble, "X", "/m/__cluster_metadata-0")
    check_logged_cluster_id(ensemble, None, "/m/__cluster_metadata-0")
    check_logged_cluster_id(_ensemble({"/m": MetaProperties(V2, None, 1)}), "Y", "/m/__cluster_metadata-0")
    with pytest.raises(MetaPropertiesError) as info:
        check_logged_cluster_id(ensemble, "Y", "/m/__cluster_metadata-0")
    message = str(info.value)
    assert "/m/meta.properties" in message and "cluster Y" in message and "read X" in message
    assert "set cluster.id=Y" in message


# --- discovery (161: persisted to all meta.properties before it is exposed; the id never changes) ---


def test_discovery__every_file_without_the_id_is_rewritten() -> None:
    props = {"/a": MetaProperties(V2, None, 1, ID_A), "/m": MetaProperties(V2, None, 1, ID_B)}
    writes = plan_cluster_id_writes(props, None, "C")
    assert writes == {d: m.with_cluster_id("C") for d, m in props.items()}
    assert plan_cluster_id_writes(props, None, None) == {}
    partly = {"/a": MetaProperties(V2, "C", 1, ID_A), "/m": MetaProperties(V2, None, 1, ID_B)}
    assert list(plan_cluster_id_writes(partly, "C", "C")) == ["/m"]


def test_discovery__another_id_is_refused() -> None:
    props = {"/a": MetaProperties(V2, "X", 1, ID_A)}
    with pytest.raises(MetaPropertiesError, match="carries cluster id Y.*carry X"):
        plan_cluster_id_writes(props, "X", "Y")
