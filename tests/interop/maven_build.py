"""Build a Maven program at test (or bench) time (issue 33): dependencies come from Maven Central into
~/.m2 (reused by later runs, CI's cache of Maven like pip's), and ``mvn compile`` runs only when the
project's sources changed: its target/ holds the classes, the dependencies (target/lib) and the hash of
the sources they came from. The programs under tests/java and Apache Kafka's jars for the benchmarks'
and the differential tests' reference broker (bench/kafka_jars, bench.kafka_peer) are built here."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path


class MavenError(RuntimeError):
    """Java or Maven is missing, or ``mvn compile`` failed (the message says which, with its output)."""


def _source_hash(project: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted([project / "pom.xml", *(project / "src").rglob("*")]):
        if path.is_file():
            digest.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def maven_build(project: Path) -> Path:
    """Compile ``project`` unless its target/ already holds the build of these exact sources; return
    target/ (classes/ and lib/, the dependencies)."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise MavenError(f"{tool} not found (Java 17 and Maven are needed to build {project})")
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
            if built.returncode != 0:
                raise MavenError(f"mvn compile in {project} failed:\n{built.stdout}{built.stderr}")
            stamp.write_text(wanted)
    return target


def maven_classpath(project: Path) -> str:
    """The classpath of ``project``'s classes and dependencies, built first if needed; a test fails
    with the reason when it cannot be built."""
    import pytest

    try:
        target = maven_build(project)
    except MavenError as exc:
        pytest.fail(str(exc))
    return f"{target / 'classes'}:{target / 'lib'}/*"


# A test's JVM lives seconds: C2's compile threads and G1 cost more CPU on this 2-core machine than they
# give back (Kafka's Java client checks: 6.4 CPU s with JDK defaults, 3.5 s with these).
SHORT_LIVED_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def java_command(classpath: str, main_class: str, *args: str) -> list[str]:
    """The command line that runs ``main_class`` of a program built by :func:`maven_classpath`."""
    return ["java", *SHORT_LIVED_JVM_OPTIONS, "-cp", classpath, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            main_class, *args]  # fmt: skip
