"""Where the local broker's Kafka comes from, in order of preference.

1. `--kafka-home` / `KAFKA_HOME`: an unpacked Apache Kafka distribution (its libs/);
2. kgctl's cache: `$KGCTL_CACHE_DIR` or `~/.cache/kgctl`, holding `kafka-<version>/libs`;
3. Maven: `mvn dependency:copy-dependencies` on the pom shipped beside this module;
4. the official binary release from Apache's archive, verified against its sha512.
Each fetch writes into a temporary folder and renames it into place only when complete,
so an interrupted or failed fetch leaves nothing half-written in the cache.

`resolve_kafka_tools` fetches Apache Kafka's kafka-tools jars the same way (Maven, the
cache), for the Java test members the benchmarks and the KIP-848 tests run
(`org.apache.kafka.tools.VerifiableConsumer`); `make test` and `make bench` fetch them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kgctl.errors import MissingDependencyError, SetupError

DEFAULT_KAFKA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"
DEFAULT_MIRROR = "https://archive.apache.org/dist/kafka"
MIN_JAVA = 17  # Kafka 4's brokers; the 3.x brokers run on Java 11 (min_java)

Progress = Callable[[str, int, int | None], None]  # (label, done bytes, total bytes)


@dataclass(frozen=True)
class KafkaDistribution:
    """The jars of one Apache Kafka version, and how they were found."""

    version: str
    libs: Path
    origin: str  # kafka-home | cache | maven | download

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")


def cache_dir() -> Path:
    base = os.environ.get("KGCTL_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "kgctl"


def java_executable() -> str:
    """The `java` to run Kafka with: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise MissingDependencyError(
            f"java not found: the local broker needs Java {MIN_JAVA}+; install it "
            "(Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    return found


def major_version(version: str) -> int:
    """3 for "3.9.1": the Kafka line a version belongs to (4 when it does not parse)."""
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else 4


def min_java(version: str) -> int:
    """The oldest Java that runs this Kafka version's broker (Kafka 4 dropped Java 11)."""
    return 11 if major_version(version) < 4 else MIN_JAVA


def check_java(java: str | None = None, version: str = DEFAULT_KAFKA_VERSION) -> int:
    """The major version of Java, or a one-line error if missing or too old for Kafka
    `version`."""
    java = java or java_executable()
    need = min_java(version)
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        raise MissingDependencyError(
            f"cannot run {java} ({exc.strerror}); install Java {need}+ or set JAVA_HOME"
        ) from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise MissingDependencyError(
            f"{java} -version printed no version; install Java {need}+ or set JAVA_HOME"
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_x" style
        major = int(match.group(2))
    if major < need:
        raise MissingDependencyError(
            f"Java {major} found at {java}, but Kafka {version} needs Java {need}+; "
            "install a newer JDK (Debian: apt-get install openjdk-17-jre-headless) "
            "or point JAVA_HOME at one"
        )
    return major


def _has_jars(libs: Path) -> bool:
    return libs.is_dir() and any(libs.glob("kafka_*.jar")) and any(libs.glob("kafka-clients-*"))


def from_kafka_home(home: Path, version: str) -> KafkaDistribution:
    libs = Path(home) / "libs"
    if not _has_jars(libs):
        raise SetupError(
            f"{home} is not an unpacked Apache Kafka distribution (no libs/kafka_*.jar); "
            "point --kafka-home / KAFKA_HOME at one, or unset it to let kgctl fetch Kafka"
        )
    jar = next(libs.glob("kafka_*.jar")).name
    found = re.search(r"kafka_[\d.]+-(.+?)\.jar", jar)
    return KafkaDistribution(found.group(1) if found else version, libs, "kafka-home")


def from_cache(version: str) -> KafkaDistribution | None:
    libs = cache_dir() / f"kafka-{version}" / "libs"
    return KafkaDistribution(version, libs, "cache") if _has_jars(libs) else None


def _copy_dependencies(
    mvn: str, pom_name: str, version: str, work: Path
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`mvn dependency:copy-dependencies` on a pom shipped beside this module, into work/libs."""
    pom = work / "pom.xml"
    pom.write_bytes(resources.files("kgctl.broker").joinpath(pom_name).read_bytes())
    libs = work / "libs"
    done = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-Dkafka.version={version}",
            f"-DoutputDirectory={libs}",
            "-DincludeScope=runtime",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return libs, done


def fetch_with_maven(
    version: str, say: Callable[[str], None] = lambda _m: None
) -> KafkaDistribution:
    mvn = shutil.which("mvn")
    if not mvn:
        raise MissingDependencyError("mvn not found")
    target = cache_dir() / f"kafka-{version}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kgctl-mvn-", dir=target.parent) as work:
        say(f"resolving Apache Kafka {version} jars with Maven (once; cached in {target})")
        libs, done = _copy_dependencies(mvn, "pom.xml", version, Path(work))
        if done.returncode != 0 or not _has_jars(libs):
            last = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise SetupError(
                f"Maven could not resolve org.apache.kafka:kafka_{SCALA_VERSION}:{version} "
                f"({' / '.join(last) or 'no output'}); check the version and your Maven "
                "settings, or pass --kafka-home"
            )
        staged = Path(work) / "dist"
        staged.mkdir()
        libs.rename(staged / "libs")
        if target.exists():
            shutil.rmtree(target)
        staged.rename(target)
    return KafkaDistribution(version, target / "libs", "maven")


def resolve_kafka_tools(
    version: str = DEFAULT_KAFKA_VERSION, say: Callable[[str], None] = lambda _m: None
) -> Path:
    """The folder of org.apache.kafka:kafka-tools and its runtime jars (for `java -cp
    DIR/*`), from the cache (`kafka-tools-<version>/libs`), else fetched once with Maven."""
    target = cache_dir() / f"kafka-tools-{version}"
    libs = target / "libs"
    if any(libs.glob("kafka-tools-*.jar")):
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise MissingDependencyError(
            "mvn not found: it is needed once to fetch Apache Kafka's kafka-tools jars "
            "(Debian: apt-get install maven)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kgctl-mvn-", dir=target.parent) as work:
        say(f"resolving Apache Kafka's kafka-tools {version} with Maven (once; cached in {libs})")
        staged, done = _copy_dependencies(mvn, "tools-pom.xml", version, Path(work))
        if done.returncode != 0 or not any(staged.glob("kafka-tools-*.jar")):
            last = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise SetupError(
                f"Maven could not resolve org.apache.kafka:kafka-tools:{version} "
                f"({' / '.join(last) or 'no output'}); check the version and your Maven settings"
            )
        target.mkdir(parents=True, exist_ok=True)
        if libs.exists():
            shutil.rmtree(libs)
        staged.rename(libs)
    return libs


def _expected_sha512(text: str) -> str:
    # Apache's .sha512 files come gpg style ("name.tgz: 0D4C 5F4B ...", wrapped over
    # lines) or sha512sum style ("0d4c5f4b...  name.tgz").
    first = text.split(maxsplit=1)[0] if text.strip() else ""
    body = text.split(":", 1)[1] if first.endswith(":") else first
    return re.sub(r"[^0-9a-fA-F]", "", body).lower()


def _download(url: str, dest: Path, progress: Progress | None) -> None:
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(dest, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            done = 0
            while chunk := response.read(1 << 16):
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(Path(url).name, done, total)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise SetupError(
            f"cannot download {url} ({reason}); pass --kafka-home with an unpacked "
            "Apache Kafka, or install Maven so kgctl can resolve the jars"
        ) from None


def fetch_release(
    version: str, mirror: str | None = None, progress: Progress | None = None
) -> KafkaDistribution:
    """Download kafka_<scala>-<version>.tgz, verify its sha512, unpack it into the cache."""
    base = (mirror or os.environ.get("KGCTL_KAFKA_MIRROR") or DEFAULT_MIRROR).rstrip("/")
    name = f"kafka_{SCALA_VERSION}-{version}"
    url = f"{base}/{version}/{name}.tgz"
    target = cache_dir() / f"kafka-{version}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kgctl-dl-", dir=target.parent) as work:
        tarball = Path(work) / f"{name}.tgz"
        checksum = Path(work) / f"{name}.tgz.sha512"
        _download(url + ".sha512", checksum, None)
        _download(url, tarball, progress)
        expected = _expected_sha512(checksum.read_text(errors="replace"))
        digest = hashlib.sha512()
        with open(tarball, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != expected:
            raise SetupError(
                f"sha512 of {url} does not match its .sha512 file: the download is corrupt "
                "or tampered with; nothing was installed; try again or use another mirror"
            )
        unpacked = Path(work) / "unpacked"
        with tarfile.open(tarball) as archive:
            archive.extractall(unpacked, filter="data")
        roots = [p for p in unpacked.iterdir() if p.is_dir()]
        if len(roots) != 1 or not _has_jars(roots[0] / "libs"):
            raise SetupError(f"{url} is not an Apache Kafka binary release (no libs/)")
        if target.exists():
            shutil.rmtree(target)
        roots[0].rename(target)
    return KafkaDistribution(version, target / "libs", "download")


def resolve_kafka(
    version: str = DEFAULT_KAFKA_VERSION,
    kafka_home: Path | None = None,
    say: Callable[[str], None] = lambda _m: None,
    progress: Progress | None = None,
) -> KafkaDistribution:
    """Find Kafka's jars, fetching them once if needed (see the module docstring)."""
    home = kafka_home or (Path(os.environ["KAFKA_HOME"]) if os.environ.get("KAFKA_HOME") else None)
    if home is not None:
        return from_kafka_home(home, version)
    cached = from_cache(version)
    if cached:
        return cached
    if shutil.which("mvn"):
        return fetch_with_maven(version, say)
    say(f"mvn not found; downloading Apache Kafka {version} from the Apache archive")
    return fetch_release(version, progress=progress)
