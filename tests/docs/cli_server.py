"""``pykraft`` for the docs examples without paying Python's start-up and pykraft's imports (about a
second on a busy 2-core machine) for each of their commands.

``python -m tests.docs.cli_server SOCKET`` imports the CLI once and serves a Unix socket; ``pykraft ...``
in an example is ``python -S tests/docs/cli_server.py --client SOCKET ...``, which sends its argv, working
directory, environment and its stdin/stdout/stderr (the descriptors themselves) to the server. The server
forks; the child takes those descriptors, directory and environment and runs ``pykraft.cli.main(argv)``
exactly as ``python -m pykraft.cli`` would, and its exit status is the client's. Commands run one at a
time (the server is single-threaded: it forks only from its main loop, with no thread running).
"""

from __future__ import annotations

import json
import os
import socket
import sys

_MAX_HEADER = 1 << 20


def _client(socket_path: str, argv: list[str]) -> int:
    header = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(socket_path)
        socket.send_fds(conn, [len(header).to_bytes(4, "big"), header], [0, 1, 2])
        status = b""
        while len(status) < 4:
            chunk = conn.recv(4 - len(status))
            if not chunk:
                return 1  # the server went away: a failure, never a silent success
            status += chunk
    return int.from_bytes(status, "big", signed=True)


def _child(header: dict[str, object], fds: list[int]) -> None:
    from pykraft.cli import main

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(str(header["cwd"]))
    env = header["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    argv = header["argv"]
    assert isinstance(argv, list)
    sys.stdin = open(0, closefd=False)  # the inherited descriptors, re-opened
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    try:
        status = main([str(word) for word in argv])
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # a crash is the command's failure, reported like python -m's
        import traceback

        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _serve(socket_path: str) -> None:
    import contextlib
    import io

    from pykraft.cli import main

    # main() imports every tool's module to build its parser: once here, so every forked command has
    # them ("--help" builds the whole parser and exits).
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
        main(["--help"])

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(socket_path)
        server.listen(8)
        print("ready", flush=True)
        while True:
            conn, _ = server.accept()
            with conn:
                size_bytes, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
                size = int.from_bytes(size_bytes, "big")
                assert len(fds) == 3 and 0 < size <= _MAX_HEADER
                raw = b""
                while len(raw) < size:
                    chunk = conn.recv(size - len(raw))
                    assert chunk, "the client hung up mid-request"
                    raw += chunk
                pid = os.fork()
                if pid == 0:
                    conn.close()
                    server.close()
                    _child(json.loads(raw), fds)
                for fd in fds:
                    os.close(fd)
                _, wait_status = os.waitpid(pid, 0)
                conn.sendall(os.waitstatus_to_exitcode(wait_status).to_bytes(4, "big", signed=True))


if __name__ == "__main__":
    if sys.argv[1] == "--client":
        sys.exit(_client(sys.argv[2], sys.argv[3:]))
    _serve(sys.argv[1])
