"""docs/architecture.md's import rules: pure cores, thin shell.

Imports flow one way: core -> protocol -> {raft, metadata, log} -> controller -> broker/coordinator -> io
-> cli. Only the shell (``io/``, ``client/``, ``spark/``, the command-line tools in ``cli/`` and
``testing``) may import asyncio, socket, time, threads or touch files.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "pykraft"

# Lower number = lower layer; a module may import only its own layer or lower ones.
LAYER = {
    "core": 0,
    "protocol": 1,
    "storage": 1,
    # Authentication (SASL, SCRAM) and authorization (ACLs): pure, below the image that stores them.
    "security": 1,
    "raft": 2,
    "metadata": 2,
    "log": 2,
    "controller": 3,
    "broker": 4,
    "coordinator": 4,
    "io": 5,
    # pykraft's own asyncio client (sockets): shell level, beside io.
    "client": 5,
    # PySpark source/sink and pipelines: shell level (pyspark, sockets, files).
    "spark": 6,
    # The `pykraft` command and its Kafka-shaped tools: the top of the shell (they load spark's commands,
    # use io's connections and the client); nothing below imports them.
    "cli": 7,
}
PURE = {
    "core",
    "protocol",
    "storage",
    "security",
    "raft",
    "metadata",
    "log",
    "controller",
    "broker",
    "coordinator",
}
FORBIDDEN_IN_PURE = {
    "asyncio",
    "socket",
    "selectors",
    "time",
    "threading",
    "multiprocessing",
    "concurrent",
    "os",
    "pathlib",
    "shutil",
    "tempfile",
    "signal",
    "subprocess",
}
FORBIDDEN_CALLS_IN_PURE = {"open"}


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _package_files() -> list[tuple[str, Path]]:
    files = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).parts
        if len(rel) > 1 and rel[0] in LAYER:
            files.append((rel[0], path))
    return files


def test_there_are_modules_to_check() -> None:
    assert len(_package_files()) > 10


def test_pure_packages_import_no_io() -> None:
    offenders = []
    for package, path in _package_files():
        if package not in PURE:
            continue
        tree = ast.parse(path.read_text())
        for name in _imports(tree):
            if name.split(".")[0] in FORBIDDEN_IN_PURE:
                offenders.append(f"{path.relative_to(SRC)} imports {name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in FORBIDDEN_CALLS_IN_PURE:
                    offenders.append(f"{path.relative_to(SRC)} calls {node.func.id}()")
    assert not offenders, "pure packages must not do I/O:\n" + "\n".join(offenders)


def test_imports_flow_one_way() -> None:
    offenders = []
    for package, path in _package_files():
        for name in _imports(ast.parse(path.read_text())):
            parts = name.split(".")
            if parts[0] != "pykraft" or len(parts) < 2:
                continue
            target = parts[1]
            if target in LAYER and LAYER[target] > LAYER[package]:
                offenders.append(f"{path.relative_to(SRC)} ({package}) imports {name}")
            if target in ("cli", "testing") and package in PURE:
                offenders.append(f"{path.relative_to(SRC)} imports the entry point {name}")
    assert not offenders, (
        "imports must flow core -> protocol -> raft/metadata/log -> ... -> io:\n" + "\n".join(offenders)
    )


def test_no_asyncio_wait_for_in_src() -> None:
    """Python 3.11's ``asyncio.wait_for`` can swallow a cancellation (CPython gh-86296): a loop around
    it then never stops, which hung ``Node.stop()``. Timed waits go through ``pykraft.io.waiting``."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "wait_for":
                if isinstance(node.value, ast.Name) and node.value.id == "asyncio":
                    offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not offenders, "use pykraft.io.waiting instead of asyncio.wait_for:\n" + "\n".join(offenders)
