"""Build a Maven program under tests/java at test time (issue 33): dependencies come from Maven Central
into ~/.m2 (reused by later runs, CI's cache of Maven like pip's), and ``mvn compile`` runs only when the
project's sources changed: its target/ holds the classes, the dependencies (target/lib) and the hash of
the sources they came from."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest


def _source_hash(project: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted([project / "pom.xml", *(project / "src").rglob("*")]):
        if path.is_file():
            digest.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def maven_classpath(project: Path) -> str:
    """Compile ``project`` unless its target/ already holds the classes of these exact sources; return
    the classpath of its classes and dependencies."""
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.fail("Java 17 and Maven are needed for the Java tests")
    target = project / "target"
    target.mkdir(exist_ok=True)
    stamp = target / "source.sha256"
    with open(target / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test sessions at once build once
        wanted = _source_hash(project)
        if not (stamp.exists() and stamp.read_text() == wanted):
            built = subprocess.run(
                ["mvn", "-q", "-B", "-Dstyle.color=never", "compile"],
                cwd=project,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert built.returncode == 0, built.stdout + built.stderr
            stamp.write_text(wanted)
    return f"{target / 'classes'}:{target / 'lib'}/*"


# A test's JVM lives seconds: C2's compile threads and G1 cost more CPU on this 2-core machine than they
# give back (Kafka's Java client checks: 6.4 CPU s with JDK defaults, 3.5 s with these).
SHORT_LIVED_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def java_command(classpath: str, main_class: str, *args: str) -> list[str]:
    """The command line that runs ``main_class`` of a program built by :func:`maven_classpath`."""
    return ["java", *SHORT_LIVED_JVM_OPTIONS, "-cp", classpath, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            main_class, *args]  # fmt: skip
