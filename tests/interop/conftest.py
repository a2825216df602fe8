"""Certificates made by openssl at run time for the TLS, SASL_SSL and ACL tests: nothing secret is
committed. A CA, a broker certificate for 127.0.0.1, a client (alice), one from a CA the broker does
not trust (mallory) and an expired one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(directory: Path, name: str, subject: str, ca: str, *, server: bool = False, days: int = 2) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=directory)  # fmt: skip
    extra: list[str] = []
    if server:
        (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
        extra = ["-extfile", "san.ext"]
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", str(days), *extra, cwd=directory)  # fmt: skip


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    for ca in ("ca", "rogue-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem",
                 "-days", "2", "-subj", f"/CN=pykraft-test-{ca}", cwd=d)  # fmt: skip
    _issue(d, "server", "/CN=127.0.0.1", "ca", server=True)
    _issue(d, "alice", "/O=pykraft/OU=eng/CN=alice", "ca")
    _issue(d, "mallory", "/CN=mallory", "rogue-ca")
    _issue(d, "expired", "/CN=expired", "ca", days=-1)  # valid until a day before it was issued
    # Kafka's PEM keystore: the certificate chain and the key in one file; this key is encrypted.
    _openssl(
        "pkey",
        "-in",
        "server.key",
        "-aes256",
        "-passout",
        "pass:s3cret-pass",
        "-out",
        "server-enc.key",
        cwd=d,
    )
    (d / "keystore.pem").write_text((d / "server.pem").read_text() + (d / "server-enc.key").read_text())
    return d
