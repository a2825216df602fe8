"""``pykraft`` command line: ``pykraft server start [--config FILE] [--override KEY=VALUE ...]`` and the
tools shaped like Kafka's scripts (topics, configs, consumer groups, storage, ...), one module each in
this package. Like ``io/`` it is a shell: it may use sockets, files and asyncio; ``io/`` is only the
runtime (the node), this package is what people and scripts type (issue 18)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import signal
import sys

from pykraft.core.config import DEFAULT_PROPERTIES, ConfigError, NodeConfig, load_config

log = logging.getLogger("pykraft")

# Modules that add `pykraft <group> ...` commands; each exposes add_subcommands(subparsers).
COMMAND_MODULES: tuple[str, ...] = (
    "pykraft.cli.storage",
    "pykraft.spark.commands",
    "pykraft.cli.metadata",
    "pykraft.cli.groups",
    "pykraft.cli.share_groups",
    "pykraft.cli.console",
    "pykraft.cli.get_offsets",
    "pykraft.cli.perf",
    "pykraft.cli.dump_log",
    "pykraft.cli.producers",
    "pykraft.cli.topics",
    "pykraft.cli.configs",
    "pykraft.cli.transactions",
    "pykraft.cli.features",
    "pykraft.cli.security",
    "pykraft.cli.cluster",
    "pykraft.cli.reassign",
    "pykraft.cli.dev",
)


def _parse_overrides(items: list[str]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override: {item!r} is not KEY=VALUE")
        overrides[key.strip()] = value.strip()
    return overrides


def read_config(path: str | None, override_items: list[str]) -> NodeConfig:
    if path is None:
        text = DEFAULT_PROPERTIES
    else:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise ConfigError(f"--config: cannot read {path}: {exc.strerror}") from None
    return load_config(text, _parse_overrides(override_items))


def _server_start(args: argparse.Namespace) -> int:
    from pykraft.io.node import Node, StartupError

    try:
        config = read_config(args.config, args.override or [])
    except ConfigError as exc:
        print(f"pykraft: {exc}", file=sys.stderr)
        return 2
    for key in config.ignored:
        log.info("ignoring property %s (not used by pykraft)", key)

    async def main() -> int:
        node = Node(config)
        try:
            await node.start()
        except StartupError as exc:
            print(f"pykraft: {exc}", file=sys.stderr)
            await node.stop()
            return 1
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if config.is_broker:
            log.info(
                "pykraft node %d serving clients on %s:%d", config.node_id, node.client_host, node.client_port
            )
        else:
            log.info(
                "pykraft controller %d serving the quorum on %s:%d",
                config.node_id,
                node.controller_host,
                node.controller_port,
            )
        stopping = asyncio.ensure_future(stop.wait())
        failing = asyncio.ensure_future(node.failed.wait())
        await asyncio.wait({stopping, failing}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        failing.cancel()
        log.info("shutting down: flushing logs")
        await node.stop()
        if node.failure is not None:
            print(f"pykraft: {node.failure}", file=sys.stderr)
            return 1
        return 0

    return asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pykraft", description="A Kafka-compatible broker with KRaft.")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True)

    server = sub.add_parser("server", help="run a node")
    server_sub = server.add_subparsers(dest="server_command", required=True)
    start = server_sub.add_parser("start", help="start a node in the foreground")
    start.add_argument("--config", help="a Kafka-style server.properties file")
    start.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="override one property (repeatable)"
    )
    start.set_defaults(func=_server_start)

    # Further command groups (storage, metadata, producers, groups, pipeline, ...) each live in their
    # own module with an ``add_subcommands(sub)`` function; list them here.
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).add_subcommands(sub)

    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    result: int = args.func(args)
    return result
