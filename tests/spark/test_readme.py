"""The README's Spark example runs as written (issue 28: it raised UNSUPPORTED_DATA_SOURCE_SAVE_MODE,
since Python data sources take only the Append and Overwrite save modes)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pykraft.testing import running_node
from tests.spark.helpers import consume_all, create_topic, produce

README = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


def _spark_example() -> str:
    section = README.read_text()
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's Spark section has no python block"
    return match.group(1)


def test_the_readme_spark_example_copies_a_topic(spark: Any) -> None:
    code = _spark_example()
    assert "127.0.0.1:9092" in code
    with running_node() as node:
        create_topic(node.bootstrap_servers, "events", 2)
        create_topic(node.bootstrap_servers, "copy", 2)
        produce(node.bootstrap_servers, "events", [(b"k%d" % i, b"v%d" % i, i % 2, None) for i in range(50)])
        exec(
            compile(code.replace("127.0.0.1:9092", node.bootstrap_servers), str(README), "exec"),
            {"spark": spark},
        )
        copied = consume_all(node.bootstrap_servers, "copy", 2)
    assert sorted((k, v) for _p, _o, k, v, _h in copied) == sorted(
        (b"k%d" % i, b"v%d" % i) for i in range(50)
    )
