"""server.properties parsing: Kafka's names and samples, one-line errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.core.config import DEFAULT_PROPERTIES, ConfigError, load_config, parse_properties

DATA = Path(__file__).resolve().parent.parent / "data"


def test_embedded_default_is_the_single_node_server() -> None:
    config = load_config(DEFAULT_PROPERTIES)
    assert config.node_id == 1
    assert config.process_roles == ("broker", "controller")
    assert (config.client_listener.host, config.client_listener.port) == ("127.0.0.1", 9092)
    assert config.controller_quorum_voters == {1: ("127.0.0.1", 9093)}
    assert config.log_dirs == ("./data",) and config.metadata_log_dir == "./data"
    assert config.ignored == ()


@pytest.mark.parametrize("sample", ["kafka-3.9-kraft-server.properties", "kafka-4.0-server.properties"])
def test_kafkas_sample_configs_load_and_report_what_is_ignored(sample: str) -> None:
    config = load_config((DATA / sample).read_text())
    assert config.node_id == 1
    assert config.client_listener.listener_name == "PLAINTEXT"
    assert config.client_listener.port == 9092
    assert config.advertised_for("PLAINTEXT").host == "localhost"
    assert config.controller_quorum_voters[1][1] == 9093
    assert config.log_dirs == ("/tmp/kraft-combined-logs",)
    assert config.log_retention_ms == 168 * 3_600_000
    assert "num.network.threads" in config.ignored
    assert "log.dirs" not in config.ignored


def test_overrides_win() -> None:
    config = load_config(DEFAULT_PROPERTIES, {"num.partitions": "4", "log.dirs": "/x,/y"})
    assert config.num_partitions == 4
    assert config.log_dirs == ("/x", "/y")


def test_properties_syntax() -> None:
    text = "# comment\n! also\na=1\nb : two\nc=long\\\n   value\nempty=\n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "longvalue", "empty": ""}


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ({"num.partitions": "many"}, "num.partitions"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"node.id": "-3"}, "node.id"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"listeners": "PLAINTEXT://127.0.0.1:notaport"}, "listeners"),
        ({"listeners": "127.0.0.1:9092"}, "listeners"),
        ({"listeners": "SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}, "listeners"),
        ({"process.roles": "zookeeper"}, "process.roles"),
        ({"controller.quorum.voters": "2@127.0.0.1:9093"}, "controller.quorum.voters"),
        ({"controller.quorum.voters": "one@x"}, "controller.quorum.voters"),
        ({"socket.request.max.bytes": "1e9"}, "socket.request.max.bytes"),
        ({"log.segment.bytes": "10"}, "log.segment.bytes"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_key(override: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(DEFAULT_PROPERTIES, override)
    message = str(excinfo.value)
    assert message.startswith(names + ":")
    assert "\n" not in message
