"""Group properties in server.properties: defaults, overrides, one-line errors naming the key."""

from __future__ import annotations

import pytest

from pykraft.core.config import ConfigError, load_config
from pykraft.testing import node_properties

BASE = node_properties("/tmp/unused", 9092, 9093)


def test_group_properties_default_to_kafkas_values() -> None:
    config = load_config(BASE)
    assert config.offsets_topic_num_partitions == 50
    assert (config.group_min_session_timeout_ms, config.group_max_session_timeout_ms) == (6000, 1800000)
    assert config.group_initial_rebalance_delay_ms == 3000
    assert (
        "offsets.topic.num.partitions" not in load_config(BASE + "offsets.topic.num.partitions=3\n").ignored
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("offsets.topic.num.partitions=0", "offsets.topic.num.partitions: 0 is below the minimum 1"),
        (
            "group.initial.rebalance.delay.ms=soon",
            "group.initial.rebalance.delay.ms: 'soon' is not an integer",
        ),
        ("group.min.session.timeout.ms=-5", "group.min.session.timeout.ms: -5 is below the minimum 1"),
    ],
)
def test_bad_group_property_names_the_key(line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(BASE + line + "\n")
